/*
 * ovl-source --format parquet: a chunk is a row group (lib/parquet.c),
 * a row of the --field column a document.
 */
#include "source.h"

/*
 * A row group of a parquet file: its rows from row0 on, one document each.
 * The cursor's offset is the row, as a tar chunk's is the member group.
 * Returns the column chunk's compressed bytes read.
 */
static uint64_t
run_parquet(struct src *s, uint64_t row0,
    uint64_t rec0 __attribute__((unused)))	/* a row is its record */
{
	const struct src_opts *o = s->o;
	struct ovl_pq_io io;
	struct ovl_pq_file *f = NULL;
	struct ovl_pq_reader r;
	struct rec rc;
	char err[512];
	const uint8_t *p;
	size_t len;
	uint64_t bytes;
	struct ovl_remote *rem = NULL;
	int fd = -1, k;

	memset(&rc, 0, sizeof(rc));
	memset(&r, 0, sizeof(r));
	if (ovl_remote_is(s->cx.path)) {
		if ((rem = ovl_remote_open(s->cx.path, err, sizeof(err))) == NULL) {
			bad(s, R_OPEN, NULL, "%s", err);
			return 0;
		}
		if (chunk_same(s, -1, rem) != 0)
			goto out;
		ovl_pq_io_remote(&io, rem);
	} else if ((fd = open(s->cx.path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    ovl_pq_io_fd(&io, fd) != 0) {
		bad(s, R_OPEN, NULL, "cannot open: %s", strerror(errno));
		if (fd != -1)
			close(fd);
		return 0;
	}
	if (fd != -1 && chunk_same(s, fd, NULL) != 0)
		goto out;
	if ((f = ovl_pq_open(&io, o->field, err, sizeof(err))) == NULL) {
		/* a failed read says more in the remote reader's words */
		bad(s, R_INPUT, NULL, "%s", rem != NULL &&
		    strncmp(err, "cannot read", 11) == 0 ? ovl_remote_err(rem) : err);
		goto out;
	}
	if (s->cx.c->part >= ovl_pq_row_groups(f)) {
		bad(s, R_INPUT, NULL, "row group %" PRIu32 " is gone (the file "
		    "changed since it was listed)", s->cx.c->part);
		goto out;
	}
	if (row0 > ovl_pq_rows(f, s->cx.c->part))
		resume_error(s, row0, "is beyond the last row");
	if (ovl_pq_reader_open(&r, f, s->cx.c->part, row0) != 0) {
		bad(s, R_INPUT, NULL, "%s", r.err);
		goto out;
	}
	rc.row = 1;
	for (rc.start_off = row0; (k = ovl_pq_next(&r, &p, &len)) >= 0;
	    rc.start_off++) {
		rc.next_off = rc.start_off + 1;
		rc.index = rc.start_off;
		if (k == 0)
			bad(s, R_MISSING, &rc, "column '%s' is null", o->field);
		else if (len > o->max_doc)
			bad(s, R_TOOLONG, &rc, "value longer than --max-doc-bytes "
			    "(%" PRIu64 ")", o->max_doc);
		else
			record(s, &rc, (const char *)p, len);
	}
	if (k == -2)
		bad(s, R_INPUT, &rc, "%s", r.err);
out:
	bytes = r.pos - r.start;
	ovl_pq_reader_close(&r);
	ovl_pq_close(f);
	if (fd != -1)
		close(fd);
	ovl_remote_close(rem);
	return bytes;
}

static const char *const parquet_exts[] = { ".parquet", ".pq", NULL };

const struct src_format src_fmt_parquet = {
	.exts = parquet_exts,
	.cut = OVL_CUT_ROWGROUPS,
	.run = run_parquet,
};
