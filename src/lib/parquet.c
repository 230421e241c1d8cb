/*
 * parquet: the footer and the schema (see parquet.h). The footer is the
 * Thrift compact encoding of FileMetaData, at the end of the file before
 * its 4-byte length and the magic "PAR1".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "parquet-int.h"
#include "remote.h"

/* ---- io over a file descriptor -------------------------------------- */

static int
fd_pread(int fd, void *buf, size_t n, uint64_t off)
{
	unsigned char *p = buf;

	while (n > 0) {
		ssize_t k = pread(fd, p, n, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;	/* the file shrank under us */
			return -1;
		}
		p += k;
		n -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

int
ovl_pq_io_fd(struct ovl_pq_io *io, int fd)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return -1;
	memset(io, 0, sizeof(*io));
	io->fd = fd;
	io->size = (uint64_t)st.st_size;
	return 0;
}

int
ovl_pq_io_read(const struct ovl_pq_io *io, void *buf, size_t n, uint64_t off)
{
	if (io->pread == NULL)
		return fd_pread(io->fd, buf, n, off);
	return io->pread(io->arg, buf, n, off);
}

static int
remote_pread(void *arg, void *buf, size_t n, uint64_t off)
{
	ssize_t k = ovl_remote_pread(arg, buf, n, off);

	if (k < 0 || (size_t)k != n) {
		errno = k < 0 ? EIO : ESPIPE;
		return -1;
	}
	return 0;
}

void
ovl_pq_io_remote(struct ovl_pq_io *io, struct ovl_remote *r)
{
	memset(io, 0, sizeof(*io));
	io->pread = remote_pread;
	io->arg = r;
	io->size = ovl_remote_size(r);
}

/* ---- Thrift: skipping what we do not read --------------------------- */

void
ovl_pq_tr_skip(struct tr *t, int type, int depth)
{
	uint32_t n, i;
	int16_t id = 0;
	int et, kt, vt;

	if (depth > PQ_MAX_DEPTH) {
		t->err = 1;
		return;
	}
	switch (type) {
	case TT_TRUE:
	case TT_FALSE:
		return;
	case TT_BYTE:
		if (t->p < t->e)
			t->p++;
		else
			t->err = 1;
		return;
	case TT_I16:
	case TT_I32:
	case TT_I64:
		(void)tr_varint(t);
		return;
	case TT_DOUBLE:
		if (t->e - t->p >= 8)
			t->p += 8;
		else
			t->err = 1;
		return;
	case TT_BINARY:
		(void)tr_bin(t, &n);
		return;
	case TT_LIST:
	case TT_SET:
		et = tr_list(t, &n);
		for (i = 0; i < n && !t->err; i++)
			ovl_pq_tr_skip(t, et == TT_TRUE || et == TT_FALSE ?
			    TT_BYTE : et, depth + 1);
		return;
	case TT_MAP:
		n = (uint32_t)tr_varint(t);
		if (n == 0)
			return;
		if (t->p >= t->e || n > (uint64_t)(t->e - t->p)) {
			t->err = 1;
			return;
		}
		kt = *t->p >> 4;
		vt = *t->p & 15;
		t->p++;
		for (i = 0; i < n && !t->err; i++) {
			ovl_pq_tr_skip(t, kt, depth + 1);
			ovl_pq_tr_skip(t, vt, depth + 1);
		}
		return;
	case TT_STRUCT:
		while (!t->err && (et = tr_field(t, &id)) != TT_STOP)
			ovl_pq_tr_skip(t, et, depth + 1);
		return;
	default:
		t->err = 1;
	}
}

/* ---- the schema ----------------------------------------------------- */

struct pq_elem {
	const uint8_t	*name;
	uint32_t	 nlen;
	int32_t		 type;		/* -1: a group */
	int32_t		 rep;
	int32_t		 nchildren;
};

static void
read_elem(struct tr *t, struct pq_elem *el)
{
	int16_t id = 0;
	int ty;

	memset(el, 0, sizeof(*el));
	el->type = -1;
	while (!t->err && (ty = tr_field(t, &id)) != TT_STOP) {
		if (id == 1 && ty == TT_I32)
			el->type = (int32_t)tr_int(t);
		else if (id == 3 && ty == TT_I32)
			el->rep = (int32_t)tr_int(t);
		else if (id == 4 && ty == TT_BINARY)
			el->name = tr_bin(t, &el->nlen);
		else if (id == 5 && ty == TT_I32)
			el->nchildren = (int32_t)tr_int(t);
		else
			ovl_pq_tr_skip(t, ty, 1);
	}
}

struct walk {
	const struct pq_elem *el;
	uint32_t	 n, i;
	char		 path[1024];
	FILE		*names;		/* every leaf's path */
	uint32_t	 leaf;		/* leaves seen */
	const char	*want;
	int		 found;		/* 1: the leaf, 2: a group, 3: repeated */
	uint32_t	 found_leaf;
	int		 found_def, found_type;
};

/* Element w->i and its children, depth-first, as the schema lists them. */
static int
walk(struct walk *w, size_t plen, int def, int rep, int depth)
{
	const struct pq_elem *el;
	size_t len;
	int32_t k;

	if (w->i >= w->n || depth > PQ_MAX_DEPTH)
		return -1;
	el = &w->el[w->i++];
	if (el->nchildren < 0 || (uint32_t)el->nchildren > w->n ||
	    el->name == NULL)
		return -1;	/* a name is required */
	len = plen + (plen > 0) + el->nlen;
	if (len >= sizeof(w->path))
		return -1;
	if (plen > 0)
		w->path[plen] = '.';
	memcpy(w->path + plen + (plen > 0), el->name, el->nlen);
	w->path[len] = '\0';
	if (el->rep == PQ_OPTIONAL)
		def++;
	else if (el->rep == PQ_REPEATED) {
		def++;
		rep++;
	}
	if (el->nchildren == 0) {
		if (w->names != NULL)
			fprintf(w->names, "%s%s", w->leaf > 0 ? ", " : "",
			    w->path);
		if (w->want != NULL && strcmp(w->path, w->want) == 0) {
			w->found = rep > 0 ? 3 : 1;
			w->found_leaf = w->leaf;
			w->found_def = def;
			w->found_type = el->type;
		}
		w->leaf++;
		return 0;
	}
	if (w->want != NULL && strcmp(w->path, w->want) == 0)
		w->found = 2;
	for (k = 0; k < el->nchildren; k++)
		if (walk(w, len, def, rep, depth + 1) != 0)
			return -1;
	return 0;
}

static int
read_schema(struct ovl_pq_file *f, struct tr *t, char *err, size_t errlen)
{
	struct walk w;
	struct pq_elem *el;
	uint32_t n, i, k;
	size_t nl = 0;
	int et = tr_list(t, &n);

	if (t->err || et != TT_STRUCT || n == 0) {
		snprintf(err, errlen, "malformed schema in the footer");
		return -1;
	}
	el = ovl_xcalloc(n, sizeof(*el));
	for (i = 0; i < n && !t->err; i++)
		read_elem(t, &el[i]);
	memset(&w, 0, sizeof(w));
	w.el = el;
	w.n = n;
	w.want = f->column;
	w.names = open_memstream(&f->columns, &nl);
	if (w.names == NULL)
		ovl_errx(1, "out of memory");
	/* the root is a group whose children are the top-level columns */
	w.i = 1;
	for (k = 0; k < (uint32_t)(el[0].nchildren > 0 ? el[0].nchildren : 0);
	    k++)
		if (walk(&w, 0, 0, 0, 1) != 0) {
			t->err = 1;
			break;
		}
	fclose(w.names);
	free(el);
	if (t->err || w.i != n) {
		snprintf(err, errlen, "malformed schema in the footer");
		return -1;
	}
	f->nleaves = w.leaf;
	if (f->column == NULL)
		return 0;
	if (w.found == 0) {
		snprintf(err, errlen, "no column '%s' (columns: %.300s)",
		    f->column, f->columns);
		return -1;
	}
	if (w.found == 2) {
		snprintf(err, errlen, "column '%s' is a group: name one of its "
		    "fields (columns: %.300s)", f->column, f->columns);
		return -1;
	}
	if (w.found == 3) {
		snprintf(err, errlen, "column '%s' is repeated (a list): only "
		    "single values are read", f->column);
		return -1;
	}
	if (w.found_type != PQ_BYTE_ARRAY) {
		snprintf(err, errlen, "column '%s' is not a string (BYTE_ARRAY) "
		    "column (physical type %d)", f->column, w.found_type);
		return -1;
	}
	if (w.found_def > 255) {
		snprintf(err, errlen, "column '%s' is nested too deeply",
		    f->column);
		return -1;
	}
	f->leaf = w.found_leaf;
	f->max_def = w.found_def;
	return 0;
}

/* ---- row groups ----------------------------------------------------- */

static void
read_colmeta(struct tr *t, struct pq_chunk *c)
{
	int16_t id = 0;
	int ty;

	while (!t->err && (ty = tr_field(t, &id)) != TT_STOP) {
		if (id == 1 && ty == TT_I32)
			c->type = (int32_t)tr_int(t);
		else if (id == 4 && ty == TT_I32)
			c->codec = (int32_t)tr_int(t);
		else if (id == 5 && ty == TT_I64)
			c->nvalues = tr_int(t);
		else if (id == 7 && ty == TT_I64)
			c->comp_size = tr_int(t);
		else if (id == 9 && ty == TT_I64)
			c->data_off = tr_int(t);
		else if (id == 11 && ty == TT_I64)
			c->dict_off = tr_int(t);
		else
			ovl_pq_tr_skip(t, ty, 1);
	}
}

static void
read_column(struct tr *t, struct pq_chunk *c)
{
	int16_t id = 0;
	int ty;

	while (!t->err && (ty = tr_field(t, &id)) != TT_STOP) {
		if (id == 1 && ty == TT_BINARY) {
			uint32_t n;

			(void)tr_bin(t, &n);
			c->external = 1;
		} else if (id == 3 && ty == TT_STRUCT)
			read_colmeta(t, c);
		else
			ovl_pq_tr_skip(t, ty, 1);
	}
}

/* One RowGroup: its rows, byte range and (when wanted) the column. */
static int
read_rowgroup(const struct ovl_pq_file *f, struct tr *t, struct pq_chunk *c)
{
	int16_t id = 0;
	int ty, got_cols = 0;
	int64_t first = -1, total = -1;

	memset(c, 0, sizeof(*c));
	c->rows = -1;
	while (!t->err && (ty = tr_field(t, &id)) != TT_STOP) {
		if (id == 1 && ty == TT_LIST) {
			uint32_t n, i;
			int et = tr_list(t, &n);

			if (et != TT_STRUCT || n != f->nleaves)
				return -1;
			for (i = 0; i < n && !t->err; i++) {
				struct pq_chunk cc;

				memset(&cc, 0, sizeof(cc));
				read_column(t, &cc);
				if (i == 0)
					first = cc.dict_off > 0 && cc.dict_off <
					    cc.data_off ? cc.dict_off : cc.data_off;
				if (f->column != NULL && i == f->leaf) {
					c->data_off = cc.data_off;
					c->dict_off = cc.dict_off;
					c->comp_size = cc.comp_size;
					c->nvalues = cc.nvalues;
					c->codec = cc.codec;
					c->type = cc.type;
					c->external = cc.external;
				}
				if (i + 1 == n) {
					int64_t s = cc.dict_off > 0 && cc.dict_off <
					    cc.data_off ? cc.dict_off : cc.data_off;

					/* offsets near 2^63: a bad footer */
					if (__builtin_add_overflow(s, cc.comp_size,
					    &total) || __builtin_sub_overflow(total,
					    first, &total))
						t->err = 1;
				}
			}
			got_cols = 1;
		} else if (id == 3 && ty == TT_I64)
			c->rows = tr_int(t);
		else if (id == 5 && ty == TT_I64)
			c->rg_off = tr_int(t);
		else if (id == 6 && ty == TT_I64)
			c->rg_len = tr_int(t);
		else
			ovl_pq_tr_skip(t, ty, 1);
	}
	if (t->err || !got_cols || c->rows < 0)
		return -1;
	if (first >= 0) {	/* the columns' bytes: what the file holds */
		c->rg_off = first;
		c->rg_len = total;
	}
	return 0;
}

/* ---- the file ------------------------------------------------------- */

struct ovl_pq_file *
ovl_pq_open(const struct ovl_pq_io *io, const char *column, char *err,
    size_t errlen)
{
	struct ovl_pq_file *f;
	unsigned char tail[8], head[4];
	uint32_t flen;
	struct tr t;
	int16_t id = 0;
	int ty, have_schema = 0;
	const uint8_t *rgs = NULL;
	uint32_t nrg = 0, i;

	if (io->size < 12) {
		snprintf(err, errlen, "not a parquet file (%" PRIu64 " bytes)",
		    io->size);
		return NULL;
	}
	if (ovl_pq_io_read(io, head, 4, 0) != 0 ||
	    ovl_pq_io_read(io, tail, 8, io->size - 8) != 0) {
		snprintf(err, errlen, "cannot read: %s", strerror(errno));
		return NULL;
	}
	if (memcmp(head, "PAR1", 4) != 0 || memcmp(tail + 4, "PAR1", 4) != 0) {
		snprintf(err, errlen, memcmp(tail + 4, "PARE", 4) == 0 ?
		    "an encrypted parquet file (not supported)" :
		    "not a parquet file (no PAR1 magic at its start and end)");
		return NULL;
	}
	flen = (uint32_t)tail[0] | (uint32_t)tail[1] << 8 |
	    (uint32_t)tail[2] << 16 | (uint32_t)tail[3] << 24;
	if (flen == 0 || flen > PQ_MAX_FOOTER || flen > io->size - 12) {
		snprintf(err, errlen, "footer length %" PRIu32 " at byte %"
		    PRIu64 " does not fit the file", flen, io->size - 8);
		return NULL;
	}
	f = ovl_xcalloc(1, sizeof(*f));
	f->io = *io;
	f->flen = flen;
	f->fstart = io->size - 8 - flen;
	f->footer = ovl_xmalloc(flen);
	f->column = column != NULL ? ovl_xstrdup(column) : NULL;
	if (ovl_pq_io_read(io, f->footer, flen, f->fstart) != 0) {
		snprintf(err, errlen, "cannot read the footer: %s",
		    strerror(errno));
		goto fail;
	}
	t.p = t.b = f->footer;
	t.e = f->footer + flen;
	t.err = 0;
	while (!t.err && (ty = tr_field(&t, &id)) != TT_STOP) {
		if (id == 2 && ty == TT_LIST) {
			if (have_schema) {
				snprintf(err, errlen, "malformed footer: two "
				    "schemas");
				goto fail_at;
			}
			if (read_schema(f, &t, err, errlen) != 0)
				goto fail_at;
			have_schema = 1;
		} else if (id == 4 && ty == TT_LIST) {
			rgs = t.p;	/* read once the schema is known */
			ovl_pq_tr_skip(&t, ty, 0);
		} else
			ovl_pq_tr_skip(&t, ty, 0);
	}
	if (t.err || !have_schema || rgs == NULL) {
		snprintf(err, errlen, "malformed footer (byte %" PRIu64 ")",
		    f->fstart + (uint64_t)(t.p - t.b));
		goto fail;
	}
	t.p = rgs;
	if (tr_list(&t, &nrg) != TT_STRUCT && nrg > 0)
		t.err = 1;
	f->rg = ovl_xcalloc(nrg > 0 ? nrg : 1, sizeof(*f->rg));
	for (i = 0; i < nrg && !t.err; i++)
		if (read_rowgroup(f, &t, &f->rg[i]) != 0)
			t.err = 1;
	if (t.err) {
		snprintf(err, errlen, "malformed row group %" PRIu32 " in the "
		    "footer (byte %" PRIu64 ")", i > 0 ? i - 1 : 0,
		    f->fstart + (uint64_t)(t.p - t.b));
		goto fail;
	}
	f->nrg = nrg;
	return f;
fail_at:
	if (strncmp(err, "malformed", 9) == 0) {
		size_t l = strlen(err);

		snprintf(err + l, errlen - l, " (byte %" PRIu64 ")",
		    f->fstart + (uint64_t)(t.p - t.b));
	}
fail:
	ovl_pq_close(f);
	return NULL;
}

void
ovl_pq_close(struct ovl_pq_file *f)
{
	if (f == NULL)
		return;
	free(f->footer);
	free(f->rg);
	free(f->column);
	free(f->columns);
	free(f);
}

uint32_t
ovl_pq_row_groups(const struct ovl_pq_file *f)
{
	return f->nrg;
}

uint64_t
ovl_pq_rows(const struct ovl_pq_file *f, uint32_t rg)
{
	return (uint64_t)f->rg[rg].rows;
}

void
ovl_pq_range(const struct ovl_pq_file *f, uint32_t rg, uint64_t *off,
    uint64_t *len)
{
	*off = f->rg[rg].rg_off > 0 ? (uint64_t)f->rg[rg].rg_off : 0;
	*len = f->rg[rg].rg_len > 0 ? (uint64_t)f->rg[rg].rg_len : 0;
}

const char *
ovl_pq_columns(const struct ovl_pq_file *f)
{
	return f->columns != NULL ? f->columns : "";
}
