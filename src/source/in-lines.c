/*
 * ovl-source --format jsonl and text: a chunk's records are lines (or
 * blank-line paragraphs, or the whole file: --doc-per), read through
 * lib/lines.c from the chunk's decompressed bytes (lib/input.c).
 */
#include "source.h"

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

	if (ovl_input_open(&s->inx, &in, s->cx.c, s->cx.path, 0,
	    ovl_chunks_file(&s->cs, s->cx.ci)) != 0) {
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

/* A text chunk is cut at lines or paragraphs, as its documents are. */
static enum ovl_chunk_cut
text_cut(const struct src_opts *o)
{
	return o->per == PER_LINE ? OVL_CUT_LINES : o->per == PER_BLANK ?
	    OVL_CUT_PARAGRAPHS : OVL_CUT_NONE;
}

static const char *const jsonl_exts[] = { ".jsonl", ".ndjson", ".json", NULL };
static const char *const text_exts[] = { ".txt", ".text", ".md", NULL };

const struct src_format src_fmt_jsonl = {
	.exts = jsonl_exts,
	.flags = SRC_FMT_IDS,
	.cut = OVL_CUT_LINES,
	.run = run_lines,
};

const struct src_format src_fmt_text = {
	.exts = text_exts,
	.cut_by = text_cut,
	.run = run_lines,
};
