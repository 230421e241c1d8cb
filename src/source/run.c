/*
 * ovl-source: the chunks this partition owns, in canonical order: line
 * records, tar member groups, CHUNK_END. See source.h.
 */
#include "source.h"

/* ---- input: lib/input.c ---- */

/* The line reader reads the chunk's decompressed bytes. */
static ssize_t
lines_read(void *arg, unsigned char *buf, size_t n)
{
	return ovl_input_read(arg, buf, n);
}

static void
input_failed(struct src *s, struct ovl_input *in, uint64_t at)
{
	struct rec rr;

	memset(&rr, 0, sizeof(rr));
	rr.start_off = at;
	rr.line = s->lr.line;
	bad(s, R_INPUT, &rr, "%s", in->err);
}

/* Count a skip of the chunk's remainder under --on-error=skip. */
static void
resume_error(struct src *s, uint64_t off, const char *why)
{
	ovl_errx(OVL_EXIT_USAGE, "'%s': --resume offset %" PRIu64 " %s "
	    "(chunk %" PRIu32 " of epoch %" PRIu32 ")", s->cx.name, off, why,
	    s->cx.k, s->cx.epoch);
}

/* A chunk of jsonl or text: returns the chunk's decompressed bytes read. */
static uint64_t
run_lines(struct src *s, uint64_t off0, uint64_t rec0)
{
	const struct src_opts *o = s->o;
	struct ovl_lines *r = &s->lr;
	struct ovl_input in;
	struct rec rc;
	uint64_t idx = rec0;
	int jsonl = o->format == FMT_JSONL;

	if (ovl_input_open(&s->inx, &in, s->cx.c, s->cx.path, 0) != 0) {
		bad(s, in.unopened ? R_OPEN : R_INPUT, NULL, "%s", in.err);
		ovl_input_close(&in);
		return 0;
	}
	if (in.kind != OVL_COMP_NONE && !in.zeof)
		ovl_input_readahead(&in);
	r->max = (size_t)o->max_doc;
	r->read = lines_read;
	r->arg = &in;
	/* Line numbers are known when the chunk is read from its start. */
	ovl_lines_reset(r, s->cx.c->off == 0 && (off0 == 0 ||
	    in.comp != OVL_COMP_NONE || in.stream) ? 1 : 0);
	if (off0 > 0) {
		int k;

		if (in.comp == OVL_COMP_NONE &&
		    s->cx.c->len != OVL_CHUNK_WHOLE) {
			if (off0 > s->cx.c->len)
				resume_error(s, off0, "is beyond the end");
		}
		if (in.comp == OVL_COMP_NONE && !in.stream &&
		    in.kind != OVL_INPUT_ARCHIVE) {
			/* a remote file is asked for its bytes from off0 on */
			unsigned char prev;
			ssize_t n = ovl_input_pread(&in, &prev, 1, off0 - 1);

			if (n < 0)
				ovl_errx(OVL_EXIT_DATA, "'%s': %s", s->cx.name,
				    in.err);
			if (n != 1)
				resume_error(s, off0, "is beyond the end");
			if (prev != '\n' && !(o->format == FMT_TEXT &&
			    o->per == PER_FILE))
				resume_error(s, off0, "is not at a record start");
			if (ovl_input_skip(&in, off0) != 0)
				ovl_errx(OVL_EXIT_DATA, "'%s': %s", s->cx.name,
				    in.err);
			r->base = off0;
		} else if ((k = ovl_lines_skip(r, off0)) != 0) {
			if (k == -1) {
				input_failed(s, &in, r->base + r->beg);
				ovl_input_close(&in);
				return r->base + r->end;
			}
			if (k == -2)
				resume_error(s, off0, "is beyond the end");
			if (!(o->format == FMT_TEXT && o->per == PER_FILE))
				resume_error(s, off0, "is not at a record start");
		}
	}
	/* A remote plain file: its GET streams into blocks ahead of us. */
	if (in.remote != NULL && in.kind == OVL_COMP_NONE && in.zt == NULL)
		ovl_input_readahead(&in);
	if (o->format == FMT_TEXT && o->per == PER_FILE) {
		/* One record: the whole chunk, unless the cursor is past it. */
		int got;

		while ((got = ovl_lines_fill(r)) > 0) {
			if (idx > 0 || off0 > 0) {
				r->beg = r->end;
				continue;
			}
			if (r->end - r->beg > o->max_doc)
				break;
		}
		memset(&rc, 0, sizeof(rc));
		if (got < 0) {
			input_failed(s, &in, r->base + r->end);
		} else if (idx == 0 && off0 == 0 && r->end > 0) {
			if (r->end - r->beg > o->max_doc) {
				bad(s, R_TOOLONG, &rc, "document longer than "
				    "--max-doc-bytes (%" PRIu64 ")", o->max_doc);
				r->beg = r->end;
				while ((got = ovl_lines_fill(r)) > 0)
					r->beg = r->end;
				if (got < 0)
					input_failed(s, &in, r->base + r->end);
			} else {
				rc.next_off = r->base + r->end;
				rc.index = 0;
				record(s, &rc, (const char *)r->buf, r->end);
			}
		}
		ovl_input_close(&in);
		return r->base + r->end;
	}
	for (;;) {
		size_t ls, le, nx;
		int k = o->format == FMT_TEXT && o->per == PER_BLANK ?
		    ovl_lines_para(r, &ls, &le, &nx) : ovl_lines_line(r, &ls, &le,
		    &nx);

		if (k == 0)
			break;
		if (k == -1) {
			input_failed(s, &in, r->base + r->beg);
			break;
		}
		memset(&rc, 0, sizeof(rc));
		if (k == -2) {
			uint64_t nxo;
			int para = o->format == FMT_TEXT && o->per == PER_BLANK;

			rc.start_off = r->base + r->beg;
			rc.line = para ? r->pline : r->line;
			bad(s, R_TOOLONG, &rc, "record longer than --max-doc-bytes "
			    "(%" PRIu64 ")", o->max_doc);
			if (ovl_lines_discard(r, para, &nxo) != 0) {
				input_failed(s, &in, r->base + r->beg);
				break;
			}
			idx++;
			continue;
		}
		if (o->format == FMT_TEXT && o->per == PER_BLANK) {
			rc.line = r->pline;
		} else {
			rc.line = r->line;
			if (r->line != 0)
				r->line++;
			if (!jsonl && le > ls && r->buf[le - 1] == '\r')
				le--;
			if (ovl_lines_blank(r->buf + ls, le - ls))
				continue;
		}
		rc.start_off = r->base + ls;
		rc.next_off = r->base + nx;
		rc.index = idx++;
		if (le - ls > o->max_doc) {
			bad(s, R_TOOLONG, &rc, "record longer than --max-doc-bytes "
			    "(%" PRIu64 ")", o->max_doc);
			continue;
		}
		if (jsonl)
			json_record(s, &rc, (char *)r->buf + ls, le - ls);
		else
			record(s, &rc, (const char *)r->buf + ls, le - ls);
	}
	ovl_input_close(&in);
	return r->base + r->end;
}

/* ---- tar and WebDataset: lib/wds.c ---------------------------------- */

static void
tar_doc(void *arg, const struct ovl_wds_group *g)
{
	struct src *s = arg;
	struct rec rc;

	memset(&rc, 0, sizeof(rc));
	rc.start_off = g->index;
	rc.next_off = g->index + 1;
	rc.index = g->record;
	rc.nimages = g->nimages;
	rc.images = g->images;
	rc.image_data = g->image_data;
	rc.member = g->member;
	if (!images_fit(s, &rc))
		return;
	if (s->o->field_set && s->o->format == FMT_WDS && ovl_wds_ends_with(
	    g->member, ".json"))
		wds_json_record(s, &rc, g->text, g->len);
	else
		record(s, &rc, g->text, g->len);
}

static void
tar_bad(void *arg, int what, uint64_t index, const char *member,
    const char *msg)
{
	struct src *s = arg;
	struct rec rr;

	memset(&rr, 0, sizeof(rr));
	rr.start_off = index;
	rr.member = member;
	bad(s, what == OVL_WDS_DUP ? R_DUP : what == OVL_WDS_TOOLONG ?
	    R_TOOLONG : what == OVL_WDS_IMAGE ? R_IMAGE : R_INPUT, &rr, "%s",
	    msg);
}

static uint64_t
run_tar(struct src *s, uint64_t g0, uint64_t rec0)
{
	const struct src_opts *o = s->o;
	struct ovl_wds_opts wo = { o->format == FMT_WDS, o->ext,
	    (size_t)o->next, o->max_doc, o->image_cost.kind != 0,
	    o->image_cost.kind != 0 && o->images == IMG_INLINE };
	struct ovl_wds_cb cb = { tar_doc, tar_bad, s };
	struct ovl_wds_result res;
	struct ovl_input in;

	if (ovl_input_open(&s->inx, &in, s->cx.c, s->cx.path, 1) != 0) {
		bad(s, in.unopened ? R_OPEN : R_INPUT, NULL, "%s", in.err);
		ovl_input_close(&in);
		return 0;
	}
	ovl_wds_read(in.a, &wo, g0, rec0, &s->doc, &cb, &res);
	s->no_text_groups += res.no_text;
	ovl_input_close(&in);
	if (!res.failed && g0 > res.groups)
		resume_error(s, g0, "is beyond the last member group");
	return res.bytes;
}

/* ---- parquet: lib/parquet.c ----------------------------------------- */

/*
 * A row group of a parquet file: its rows from row0 on, one document each.
 * The cursor's offset is the row, as a tar chunk's is the member group.
 * Returns the column chunk's compressed bytes read.
 */
static uint64_t
run_parquet(struct src *s, uint64_t row0)
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
		ovl_pq_io_remote(&io, rem);
	} else if ((fd = open(s->cx.path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    ovl_pq_io_fd(&io, fd) != 0) {
		bad(s, R_OPEN, NULL, "cannot open: %s", strerror(errno));
		if (fd != -1)
			close(fd);
		return 0;
	}
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

/* ---- the run -------------------------------------------------------- */

static void
chunk_end(struct src *s, uint64_t bytes)
{
	const struct src_opts *o = s->o;
	double t = ovl_io_since(&s->cx.t0);

	s->bytes += bytes;
	ovl_info(1, "%s: chunk %" PRIu32 ":%" PRIu32 " '%s': %" PRIu64
	    " docs, %" PRIu64 " tokens, %" PRIu64 " bytes, %.1f MB/s", o->name,
	    s->cx.epoch, s->cx.k, s->cx.name, s->cx.docs, s->cx.tokens, bytes,
	    t > 0 ? (double)bytes / t / 1e6 : 0.0);
	if (o->json)
		return;
	{
		struct ovl_chunk_end ce;
		uint8_t *p = ovl_writer_begin(s->w, OVL_CHUNK_END_LEN);

		ce.source = o->id;
		ce.epoch = s->cx.epoch;
		ce.chunk = s->cx.k;
		ce.nchunks = s->cs.n;
		ce.ndocs = s->cx.docs;
		ce.nbytes = bytes;
		ovl_chunk_end_encode(p, &ce);
		ovl_writer_finish(s->w, OVL_CHUNK_END, 0);
	}
}

static void
run_chunk(struct src *s, uint32_t epoch, uint32_t k, uint64_t off0,
    uint64_t rec0)
{
	uint64_t bytes;

	memset(&s->cx, 0, sizeof(s->cx));
	s->cx.epoch = epoch;
	s->cx.k = k;
	s->cx.ci = s->perm[k];
	s->cx.c = &s->cs.v[s->cx.ci];
	s->cx.path = ovl_chunks_path(&s->cs, s->cx.ci);
	/* messages never show a URL's query or password */
	s->cx.name = ovl_remote_is(s->cx.path) ? ovl_remote_shown(s->cx.path,
	    s->cx.shown, sizeof(s->cx.shown)) : s->cx.path;
	clock_gettime(CLOCK_MONOTONIC, &s->cx.t0);
	if (s->o->format == FMT_TAR || s->o->format == FMT_WDS)
		bytes = run_tar(s, off0, rec0);
	else if (s->o->format == FMT_PARQUET)
		bytes = run_parquet(s, off0);
	else if (s->o->format == FMT_MEGATRON)
		bytes = run_megatron(s, off0);
	else if (s->o->format == FMT_NPY)
		bytes = run_npy(s, off0);
	else
		bytes = run_lines(s, off0, rec0);
	chunk_end(s, bytes);
}

static void
write_meta(struct src *s)
{
	const struct src_opts *o = s->o;
	char *text = NULL;
	size_t len = 0;
	uint32_t k;
	FILE *fp;

	if (o->json)
		return;
	if ((fp = open_memstream(&text, &len)) == NULL)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	fprintf(fp, "tokenizer %s\nvocab %" PRIu32 "\neod %" PRIu32 "\n"
	    "source %" PRIu32 " %s\nsource.%s.chunks %" PRIu32 "\n"
	    "source.%s.partition %" PRIu32 "/%" PRIu32 "\n",
	    ovl_tok_name(s->tok), ovl_tok_vocab(s->tok), s->eod, o->id, o->name,
	    o->name, s->cs.n, o->name, o->part_p, o->part_n);
	if (s->bos != OVL_TOK_NONE)
		fprintf(fp, "bos %" PRIu32 "\n", s->bos);
	if (o->image_cost.kind != 0) {
		char spec[128];

		ovl_image_cost_format(&o->image_cost, spec, sizeof(spec));
		fprintf(fp, "source.%s.image-token %" PRIu32 "\n"
		    "source.%s.image-cost %s\nsource.%s.images %s\n", o->name,
		    s->image_id, o->name, spec, o->name, o->images ==
		    IMG_INLINE ? "inline" : o->images == IMG_REF ? "ref" :
		    "none");
	}
	/*
	 * Where every chunk comes from, in chunk order, and the shuffle that
	 * orders them per epoch: a manifest can name each piece's file.
	 */
	if (o->shuffle)
		fprintf(fp, "source.%s.shuffle %" PRIu64 "\n", o->name, o->seed);
	for (k = 0; k < s->cs.n; k++) {
		const struct ovl_chunk *c = &s->cs.v[k];
		const char *path = s->cs.files[c->file];

		if (strchr(path, '\n') != NULL)
			continue;	/* a name META lines cannot carry */
		if (c->len == OVL_CHUNK_WHOLE)
			fprintf(fp, "source.%s.chunk.%" PRIu32 " %" PRIu64 " - %s\n",
			    o->name, k, c->off, path);
		else
			fprintf(fp, "source.%s.chunk.%" PRIu32 " %" PRIu64 " %"
			    PRIu64 " %s\n", o->name, k, c->off, c->len, path);
	}
	if (fclose(fp) != 0)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	{
		uint32_t plen = ovl_meta_payload_len((uint32_t)len);
		uint8_t *p = ovl_writer_begin(s->w, plen);

		ovl_meta_encode(p, text, (uint32_t)len);
		ovl_writer_finish(s->w, OVL_META, 0);
	}
	free(text);
}

void
run(struct src *s)
{
	const struct src_opts *o = s->o;
	uint32_t n = s->cs.n, e = 0, k0 = 0, k;
	uint64_t off0 = 0, rec0 = 0;
	int inside = 0;

	write_meta(s);
	if (o->resume) {
		const struct ovl_cursor *c = &o->cursor;

		if (c->chunk == n && c->off == 0 && c->rec == 0 &&
		    c->epoch < UINT32_MAX) {
			/* "the start of chunk n": the next epoch's start */
			e = c->epoch + 1;
			goto epochs;
		}
		if (c->chunk >= n)
			ovl_errx(OVL_EXIT_USAGE, "--resume cursor chunk %" PRIu32
			    " is out of range: the source has %" PRIu32 " chunks",
			    c->chunk, n);
		e = c->epoch;
		if (ovl_chunks_owned(c->chunk, o->part_p, o->part_n)) {
			k0 = c->chunk;
			off0 = c->off;
			rec0 = c->rec;
			inside = 1;
		} else
			k0 = c->chunk + 1;
	}
epochs:
	if (o->part_p < n) {
		for (;; e++) {
			if (!o->repeat && e >= o->epochs)
				break;
			ovl_chunks_perm(n, o->shuffle, o->seed, e, s->perm);
			for (k = ovl_chunks_next_owned(k0, n, o->part_p, o->part_n);
			    k < n; k = ovl_chunks_next_owned(k + 1, n, o->part_p,
			    o->part_n)) {
				run_chunk(s, e, k, inside ? off0 : 0,
				    inside ? rec0 : 0);
				inside = 0;
			}
			k0 = 0;
			if (e == UINT32_MAX)
				break;
		}
	}
	if (!o->json)
		ovl_writer_end(s->w);
}
