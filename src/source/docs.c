/*
 * ovl-source: records become documents (filters, tokenizing, frames or
 * JSON, counted skips). See source.h.
 */
#include "source.h"

const char *const reason_names[R_NREASONS] = {
	"invalid JSON", "missing field", "field not a string", "invalid UTF-8",
	"too long", "unreadable or corrupt input", "unopenable file",
	"duplicate text member", "tokenizer error", "bad image"
};

/* ---- messages and counting ------------------------------------------ */

/* Report a bad record: exit 1, or count it under --on-error=skip. */
void
bad(struct src *s, int reason, const struct rec *r, const char *fmt, ...)
{
	char msg[640], where[128];
	const struct ovl_chunk *c = s->cx.c;
	va_list ap;
	int skip = s->o->skip;
	size_t k;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* a tokenizer that cannot run fails every record alike: no skip */
	if (reason == R_TOK && ovl_tok_fatal(s->tok)) {
		skip = 0;
		k = strlen(msg);
		snprintf(msg + k, sizeof(msg) - k, " (the tokenizer's "
		    "pre-tokenizer pattern cannot run on it: a tokenizer error, "
		    "not a bad record; ovl-mix --check tries the patterns)");
	}
	if (r == NULL)
		where[0] = '\0';
	else if (r->member != NULL)
		snprintf(where, sizeof(where), " group %" PRIu64, r->start_off);
	else if (r->row == 1)
		snprintf(where, sizeof(where), " row group %" PRIu32 " row %"
		    PRIu64, c->part, r->start_off);
	else if (r->row == 2)
		snprintf(where, sizeof(where), " document %" PRIu64,
		    r->start_off);
	else if (r->line != 0)
		snprintf(where, sizeof(where), " line %" PRIu64, r->line);
	else if (c->comp != OVL_COMP_NONE)
		snprintf(where, sizeof(where), " decompressed byte offset %"
		    PRIu64, r->start_off);
	else
		snprintf(where, sizeof(where), " byte offset %" PRIu64,
		    c->off + r->start_off);
	if (r != NULL && r->member != NULL) {
		if (!skip)
			ovl_errx(OVL_EXIT_DATA, "'%s': member '%s' (%s): %s",
			    s->cx.name, r->member, where + 1, msg);
		ovl_info(1, "skipped: '%s': member '%s' (%s): %s", s->cx.name,
		    r->member, where + 1, msg);
	} else {
		if (!skip)
			ovl_errx(OVL_EXIT_DATA, "'%s':%s%s %s", s->cx.name, where,
			    where[0] != '\0' ? ":" : "", msg);
		ovl_info(1, "skipped: '%s':%s%s %s", s->cx.name, where,
		    where[0] != '\0' ? ":" : "", msg);
	}
	s->skipped[reason]++;
}

static void
flush_out(struct src *s)
{
	if (s->w != NULL)
		ovl_writer_flush(s->w);
	else if (fflush(stdout) != 0) {
		if (errno == EPIPE)
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on standard output");
	}
}

static void
throttle(struct src *s, uint64_t bytes)
{
	double due, now;

	s->thr_bytes += bytes;
	s->thr_docs++;
	due = (s->o->throttle_docs ? (double)s->thr_docs :
	    (double)s->thr_bytes) / s->o->throttle;
	now = ovl_io_since(&s->t0);
	if (due > now + 0.0005) {
		struct timespec ts;
		double d = due - now;

		flush_out(s);
		ts.tv_sec = (time_t)d;
		ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
		while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
			;
	}
}

/* ---- documents ------------------------------------------------------ */

static inline void
widen(uint32_t *t, const unsigned char *p, size_t n)
{
	size_t i = 0;

#ifdef __SSE2__
	const __m128i z = _mm_setzero_si128();

	for (; i + 16 <= n; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
		__m128i lo = _mm_unpacklo_epi8(v, z), hi = _mm_unpackhi_epi8(v, z);

		_mm_storeu_si128((__m128i *)(void *)(t + i),
		    _mm_unpacklo_epi16(lo, z));
		_mm_storeu_si128((__m128i *)(void *)(t + i + 4),
		    _mm_unpackhi_epi16(lo, z));
		_mm_storeu_si128((__m128i *)(void *)(t + i + 8),
		    _mm_unpacklo_epi16(hi, z));
		_mm_storeu_si128((__m128i *)(void *)(t + i + 12),
		    _mm_unpackhi_epi16(hi, z));
	}
#endif
	for (; i < n; i++)
		t[i] = p[i];
}

/* The bytes tokenizer's ids of p[0..n) as u16 (a 16-bit DOC). */
static inline void
widen16(uint16_t *t, const unsigned char *p, size_t n)
{
	size_t i = 0;

#ifdef __SSE2__
	const __m128i z = _mm_setzero_si128();

	for (; i + 16 <= n; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));

		_mm_storeu_si128((__m128i *)(void *)(t + i),
		    _mm_unpacklo_epi8(v, z));
		_mm_storeu_si128((__m128i *)(void *)(t + i + 8),
		    _mm_unpackhi_epi8(v, z));
	}
#endif
	for (; i < n; i++)
		t[i] = p[i];
}

/* The ids of n bytes of text, of width bytes each, at t. */
static void
put_bytes(void *t, uint32_t width, const unsigned char *p, size_t n)
{
	if (width == 2)
		widen16(t, p, n);
	else
		widen(t, p, n);
}

/* Id v at index i of an array of width-byte ids. */
static void
put_id(void *t, uint32_t width, size_t i, uint32_t v)
{
	if (width == 2)
		((uint16_t *)t)[i] = (uint16_t)v;
	else
		((uint32_t *)t)[i] = v;
}

static int
re_hit(struct src *s, pcre2_code *re, const char *text, size_t len)
{
	int rc = ovl_pcre.match(re, (PCRE2_SPTR)text, len, 0, PCRE2_NO_UTF_CHECK,
	    s->md, s->mctx);

	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	{
		PCRE2_UCHAR msg[256];
		ovl_pcre.get_error_message(rc, msg, sizeof(msg));
		ovl_errx(OVL_EXIT_DATA, "'%s': regular expression match failed: %s",
		    s->cx.name, (const char *)msg);
	}
}

static void
emit_json(struct src *s, const struct rec *r, const char *text, size_t len,
    const uint32_t *toks, uint32_t ntok)
{
	struct ovl_cursor cur;
	char cbuf[OVL_CURSOR_STRLEN];

	cur.epoch = s->cx.epoch;
	cur.chunk = s->cx.k;
	cur.off = r->next_off;
	cur.rec = r->index + 1;
	fputs("{\"source\":", stdout);
	ovl_json_string(stdout, s->o->name, strlen(s->o->name));
	printf(",\"id\":%" PRIu32 ",\"pos\":[%" PRIu32 ",%" PRIu32 ",%" PRIu64
	    "],\"cursor\":\"%s\",\"off\":%" PRIu64 ",\"nimages\":%" PRIu32
	    ",\"ntokens\":%" PRIu32 ",\"tokens\":", s->o->id, s->cx.epoch,
	    s->cx.k, r->index, ovl_cursor_format(&cur, cbuf), r->start_off,
	    r->nimages, ntok);
	ovl_json_u32s(stdout, toks, ntok);
	fputs(",\"file\":", stdout);
	ovl_json_string(stdout, s->cx.name, strlen(s->cx.name));
	if (s->o->text) {
		fputs(",\"text\":", stdout);
		ovl_json_string(stdout, text, len);
	}
	fputs("}\n", stdout);
	ovl_io_check_stdout();
}

/* The placeholder run of image k of r appended to v; counted. */
static void
image_run(struct src *s, const struct rec *r, uint32_t k, struct ovl_u32vec *v)
{
	uint64_t n = ovl_image_tokens(&s->o->image_cost, r->images[k].width,
	    r->images[k].height, NULL, NULL), i;
	uint32_t *t = ovl_u32vec_reserve(v, (size_t)n);

	s->img_at[k] = (uint32_t)v->len;
	for (i = 0; i < n; i++)
		t[i] = s->image_id;
	v->len += (size_t)n;
	s->images++;
	s->image_tokens += n;
}

/*
 * Does every image of r cost at most a sequence's largest length
 * (OVL_PACK_CAP_MAX), and do they all together fit a document
 * (--max-doc-bytes tokens, the bound of a document's tokens: its DOC frame
 * stays within 4 x --max-doc-bytes)? A header may claim any size up to
 * 2^24 pixels a side; runs that do not fit are refused as a bad image
 * before their tokens are allocated. Runs longer in all than --max-tokens
 * are filtered out then, as their document would be. 0 after reporting
 * (or counting) the record.
 */
int
images_fit(struct src *s, const struct rec *r)
{
	uint64_t n, total = 0;
	uint32_t i;

	for (i = 0; r->images != NULL && s->o->image_cost.kind != 0 &&
	    i < r->nimages; i++) {
		n = ovl_image_tokens(&s->o->image_cost, r->images[i].width,
		    r->images[i].height, NULL, NULL);
		if (n > OVL_PACK_CAP_MAX) {
			bad(s, R_IMAGE, r, "image '%s' (%" PRIu32 "x%" PRIu32
			    ") costs %s%" PRIu64 " tokens, more than a sequence "
			    "holds (%u)", r->images[i].member,
			    r->images[i].width, r->images[i].height,
			    n == UINT32_MAX ? "at least " : "", n,
			    OVL_PACK_CAP_MAX);
			return 0;
		}
		total += n;
		if (total > s->o->max_doc) {
			bad(s, R_IMAGE, r, "its images cost %" PRIu64 " tokens "
			    "by image '%s' (%" PRIu32 "x%" PRIu32 ", image %" PRIu32
			    " of %" PRIu32 "), more than a document holds "
			    "(--max-doc-bytes %" PRIu64 ")", total,
			    r->images[i].member, r->images[i].width,
			    r->images[i].height, i + 1, r->nimages,
			    s->o->max_doc);
			return 0;
		}
	}
	if (s->o->max_tokens != 0 && total > s->o->max_tokens) {
		s->filtered_len++;
		return 0;
	}
	return 1;
}

/*
 * A WebDataset sample's images, each a run of the placeholder token as long
 * as the cost model says, before its text (after a beginning-of-document
 * token): the document's tokens in s->itoks, returned, with their count.
 */
static const uint32_t *
place_images(struct src *s, const struct rec *r, const char *text,
    size_t len, const uint32_t *toks, uint64_t *ntok)
{
	size_t lead = toks != NULL && s->bos != OVL_TOK_NONE ? 1 : 0;
	uint32_t i, *t;

	s->itoks.len = 0;
	if (lead)
		ovl_u32vec_push(&s->itoks, toks[0]);
	for (i = 0; i < r->nimages; i++)
		image_run(s, r, i, &s->itoks);
	if (toks != NULL) {
		t = ovl_u32vec_reserve(&s->itoks, (size_t)(*ntok - lead));
		memcpy(t, toks + lead, (size_t)(*ntok - lead) * 4);
		s->itoks.len += (size_t)(*ntok - lead);
	} else {
		t = ovl_u32vec_reserve(&s->itoks, len);
		widen(t, (const unsigned char *)text, len);
		s->itoks.len += len;
	}
	*ntok = s->itoks.len;
	return s->itoks.p;
}

/*
 * A long document's DOC frame goes out in pieces (ovl_writer_frame_gen):
 * the writer never holds it whole, only the text (or the tokens) it comes
 * from (bounded memory): from 128 KiB on, a frame is written in pieces,
 * so the writer's buffer keeps its normal size.
 */
#define DOC_PIECES	(128u << 10)	/* payloads longer than this */

struct docgen {
	uint8_t		 hdr[OVL_DOC_FIXED];
	const uint32_t	*toks;		/* the ids, or NULL: the text's bytes */
	const unsigned char *text;
	uint32_t	 ntok;		/* without the end-of-document token */
	uint32_t	 eod;
	uint32_t	 width;		/* bytes per id in the frame */
};

/* Payload bytes [off, off + n) of the frame: header, ids, eod. */
static void
doc_piece(void *arg, uint8_t *dst, uint32_t off, uint32_t n)
{
	const struct docgen *g = arg;
	uint32_t w = g->width;
	uint32_t end = off + n, tend = OVL_DOC_FIXED + g->ntok * w, b;

	if (off < OVL_DOC_FIXED) {
		b = end < OVL_DOC_FIXED ? end : OVL_DOC_FIXED;
		memcpy(dst, g->hdr + off, b - off);
		dst += b - off;
		off = b;
	}
	if (off < end && off < tend) {
		/* pieces are multiples of 4 bytes: whole ids of either width */
		size_t i = (off - OVL_DOC_FIXED) / w;

		b = end < tend ? end : tend;
		if (g->toks != NULL)
			(void)ovl_tok_copy(dst, w, g->toks + i, 4, (b - off) / w);
		else
			put_bytes(dst, w, g->text + i, (b - off) / w);
		dst += b - off;
		off = b;
	}
	if (off < end) {
		/* the end token, then the padding of a 16-bit array */
		memset(dst, 0, end - off);
		if (off == tend)
			put_id(dst, w, 0, g->eod);
	}
}

/* A frame begun and finished: on the stream, or held by a shuffle window. */
static uint8_t *
out_begin(struct src *s, uint32_t len)
{
	return shuf_on(s) ? shuf_begin(s, len) : ovl_writer_begin(s->w, len);
}

static void
out_finish(struct src *s, uint8_t kind, uint8_t flags)
{
	if (shuf_on(s))
		shuf_finish(s, kind, flags);
	else
		ovl_writer_finish(s->w, kind, flags);
}

/* Do IMAGE frames follow r's DOC (its images placed, and sent)? */
static int
ships_images(const struct src *s, const struct rec *r)
{
	return r->images != NULL && r->nimages > 0 &&
	    s->o->image_cost.kind != 0 && s->o->images != IMG_NONE &&
	    !s->o->json;
}

/*
 * The IMAGE frames of r's images after its DOC: each with where its run
 * begins (img_at, set as the runs were placed), and its bytes or where
 * they are in the shard.
 */
static void
write_images(struct src *s, const struct rec *r)
{
	struct ovl_image im;
	uint32_t k, len;
	int ref = s->o->images == IMG_REF;

	for (k = 0; k < r->nimages; k++) {
		const struct ovl_wds_image *w = &r->images[k];

		memset(&im, 0, sizeof(im));
		im.flags = ref ? OVL_IMAGE_REF : OVL_IMAGE_INLINE;
		im.format = (uint32_t)w->format;
		im.width = w->width;
		im.height = w->height;
		im.index = k;
		im.ntokens = (uint32_t)ovl_image_tokens(&s->o->image_cost,
		    w->width, w->height, NULL, NULL);
		im.doc_pos = s->img_at[k];
		im.offset = w->data_off;
		im.length = w->size;
		im.name = w->member;
		im.name_len = (uint32_t)strlen(w->member);
		if (ref) {
			im.path = s->cx.path;
			im.path_len = (uint32_t)strlen(s->cx.path);
		} else {
			im.data = r->image_data + w->at;
			im.data_len = (uint32_t)w->size;
		}
		len = ovl_image_payload_len(im.name_len, im.path_len,
		    im.data_len);
		ovl_image_encode(out_begin(s, len), &im);
		out_finish(s, OVL_IMAGE, 0);
	}
}

/* A record's DOC fields but its tokens and text. */
static void
doc_head(const struct src *s, const struct rec *r, struct ovl_doc *d)
{
	memset(d, 0, sizeof(*d));
	d->source = s->o->id;
	d->epoch = s->cx.epoch;
	d->chunk = s->cx.k;
	d->record = r->index;
	d->nchunks = s->cs.n;
	d->nimages = r->nimages;
	if (ships_images(s, r))
		d->flags |= OVL_DOC_IMAGES;
	d->start_off = r->start_off;
	d->next_off = r->next_off;
	d->next_rec = r->index + 1;
}

static void
write_pieces(struct src *s, const struct rec *r, const uint32_t *toks,
    const char *text, uint32_t ntok, uint32_t plen)
{
	struct docgen g;
	struct ovl_doc d;

	doc_head(s, r, &d);
	/* the fixed part alone, then its token count (ovl-frame(5): u32 at 64) */
	ovl_doc_encode(g.hdr, &d);
	ovl_put32(g.hdr + 64, ntok + 1);
	g.toks = toks;
	g.text = (const unsigned char *)text;
	g.ntok = ntok;
	g.eod = s->eod;
	g.width = s->width;
	if (shuf_on(s)) {
		/* held whole by the window: its memory bound counts it */
		doc_piece(&g, shuf_begin(s, plen), 0, plen);
		shuf_finish(s, OVL_DOC, ovl_width_flags(s->width));
		return;
	}
	ovl_writer_frame_gen(s->w, OVL_DOC, ovl_width_flags(s->width), plen,
	    doc_piece, &g);
}

/*
 * Whether the record is in the split this source keeps: its identity is
 * its file's name, the chunk's row group and its position in the file
 * (split.h), never the chunk's number or the record's in a chunk.
 */
static int
split_keeps(const struct src *s, const struct rec *r)
{
	const struct src_opts *o = s->o;
	const struct ovl_chunk *c = s->cx.c;
	uint64_t pos = r->start_off;

	if (r->row == 0 && r->member == NULL && c->comp == OVL_COMP_NONE)
		pos += c->off;
	return ovl_split_of(&o->split, o->split_seed,
	    ovl_split_relname(s->cx.path, o->split_root),
	    r->row == 1 ? c->part : 0, pos) == o->split_keep;
}

/*
 * One record's text: check, filter, tokenize and write it. The text stays
 * where it is (no copy) on the bytes tokenizer's path.
 */
static void
record_doc(struct src *s, const struct rec *r, const char *text, size_t len)
{
	const struct src_opts *o = s->o;
	uint64_t ntok;
	const uint32_t *toks = NULL;

	s->recs++;
	s->cx.recs++;
	if (o->split.n != 0 && !split_keeps(s, r)) {
		s->pre = 0;
		s->filtered_split++;
		return;
	}
	if (s->pre) {
		/* pre-tokenized: json_record checked the ids; no text */
		s->pre = 0;
		ntok = s->toks.len;
		toks = s->toks.p;
		goto counted;
	}
	if (!r->utf8_ok || !s->tok_bytes) {
		size_t ok = ovl_utf8_valid(text, len);
		if (ok != len) {
			bad(s, R_UTF8, r, "invalid UTF-8 at byte %zu of the record",
			    ok);
			return;
		}
	}
	if (s->re_match != NULL && !re_hit(s, s->re_match, text, len)) {
		s->filtered_re++;
		return;
	}
	if (s->re_drop != NULL && re_hit(s, s->re_drop, text, len)) {
		s->filtered_re++;
		return;
	}
	if (s->tok_bytes)
		ntok = len;
	else {
		size_t badoff;

		s->toks.len = 0;
		if (s->bos != OVL_TOK_NONE)
			ovl_u32vec_push(&s->toks, s->bos);
		if (ovl_tok_encode(s->tok, text, len, &s->toks, &badoff) != 0) {
			bad(s, R_TOK, r, "%s at byte %zu of the document",
			    ovl_tok_error(s->tok), badoff);
			return;
		}
		ntok = s->toks.len;
		toks = s->toks.p;
	}
	if (r->images != NULL && s->o->image_cost.kind != 0)
		toks = place_images(s, r, text, len, toks, &ntok);
counted:
	if (ntok < o->min_tokens || (o->max_tokens != 0 && ntok > o->max_tokens)) {
		s->filtered_len++;
		return;
	}
	if (ntok + 1 > UINT32_MAX ||
	    ovl_doc_payload_len((uint32_t)ntok + 1, o->text ? (uint32_t)len : 0,
	    s->width) == 0) {
		bad(s, R_TOOLONG, r, "document too large for one frame");
		return;
	}
	if (o->json) {
		if (toks == NULL) {
			uint32_t *t;
			s->toks.len = 0;
			t = ovl_u32vec_reserve(&s->toks, len + 1);
			widen(t, (const unsigned char *)text, len);
			s->toks.len = len;
			toks = s->toks.p;
		}
		if (toks == s->itoks.p) {	/* with its images */
			ovl_u32vec_push(&s->itoks, s->eod);
			toks = s->itoks.p;
		} else {
			ovl_u32vec_push(&s->toks, s->eod);
			toks = s->toks.p;
		}
		emit_json(s, r, text, len, toks, (uint32_t)ntok + 1);
	} else {
		struct ovl_doc d;
		uint32_t tl = o->text ? (uint32_t)len : 0;
		uint32_t plen = ovl_doc_payload_len((uint32_t)ntok + 1, tl,
		    s->width);
		uint8_t *p, *t;

		if (plen > DOC_PIECES && tl == 0) {
			write_pieces(s, r, toks, text, (uint32_t)ntok, plen);
			goto written;
		}
		p = out_begin(s, plen);
		t = p + OVL_DOC_FIXED;
		doc_head(s, r, &d);
		d.ntokens = (uint32_t)ntok + 1;
		d.text_len = tl;
		d.text = text;
		d.width = s->width;
		ovl_doc_encode(p, &d);
		/* ids below the vocabulary: 16 bits hold them when width is 2 */
		if (toks != NULL)
			(void)ovl_tok_copy(t, s->width, toks, 4, ntok);
		else
			put_bytes(t, s->width, (const unsigned char *)text, len);
		put_id(t, s->width, ntok, s->eod);
		out_finish(s, OVL_DOC, ovl_width_flags(s->width));
	}
written:
	if (ships_images(s, r))
		write_images(s, r);
	s->docs++;
	s->tokens += ntok + 1;
	s->cx.docs++;
	s->cx.tokens += ntok + 1;
	if (o->throttle > 0)
		throttle(s, len);
}

/*
 * Bounded memory: the per-document buffers (tokens, unescaped
 * text, a tar member's text) grown for an outlier go back to KEEP_BYTES
 * once KEEP_CALM documents in a row were small, so a source holds what
 * its current documents need, not its largest one ever.
 */
#define KEEP_BYTES	(1u << 20)
#define KEEP_CALM	8

void
record(struct src *s, const struct rec *r, const char *text, size_t len)
{
	size_t used;

	if (shuf_on(s)) {
		shuf_record_begin(s, r);
		record_doc(s, r, text, len);
		shuf_record_end(s);
	} else
		record_doc(s, r, text, len);
	used = len > s->toks.len * 4 ? len : s->toks.len * 4;
	if (used < s->itoks.len * 4)
		used = s->itoks.len * 4;	/* a document with its images */
	s->itoks.len = 0;
	s->calm = used <= KEEP_BYTES ? s->calm + 1 : 0;
	if (s->calm == KEEP_CALM) {
		ovl_u32vec_trim(&s->toks, KEEP_BYTES / 4);
		ovl_u32vec_trim(&s->itoks, KEEP_BYTES / 4);
		ovl_buf_trim(&s->scratch, KEEP_BYTES);
		ovl_buf_trim(&s->doc, KEEP_BYTES);
	}
}

/*
 * Parse a record's JSON and walk to the --field: the value (root in *root,
 * the caller's to free), or NULL after reporting the bad record.
 */
static json_t *
json_field(struct src *s, const struct rec *r, const char *text, size_t len,
    json_t **root)
{
	json_error_t je;
	json_t *v;
	size_t i;

	if ((*root = json_loadb(text, len, 0, &je)) == NULL) {
		bad(s, R_JSON, r, "invalid JSON at column %d: %s", je.column,
		    je.text);
		return NULL;
	}
	v = *root;
	for (i = 0; i < s->path.n && v != NULL; i++)
		v = json_is_object(v) ? json_object_get(v, s->path.key[i]) : NULL;
	if (v == NULL) {
		bad(s, R_MISSING, r, "no field '%s'", s->o->field);
		json_decref(*root);
		*root = NULL;
	}
	return v;
}

/*
 * A JSON line whose field is an array of token ids (--field-type ids):
 * every id an integer below the tokenizer's vocabulary, then recorded
 * as the document's tokens (the end-of-document token appended, no text).
 */
static void
ids_record(struct src *s, struct rec *r, const char *line, size_t len)
{
	json_t *root, *v, *x;
	uint32_t vocab = ovl_tok_vocab(s->tok);
	size_t i;

	if ((v = json_field(s, r, line, len, &root)) == NULL)
		return;
	if (!json_is_array(v)) {
		bad(s, R_NOTSTRING, r, "field '%s' is not an array of token ids",
		    s->o->field);
		goto out;
	}
	s->toks.len = 0;
	if (s->bos != OVL_TOK_NONE)
		ovl_u32vec_push(&s->toks, s->bos);
	json_array_foreach(v, i, x) {
		json_int_t id = json_integer_value(x);

		if (!json_is_integer(x) || id < 0 || id >= vocab) {
			bad(s, R_TOK, r, "token %zu of field '%s' is %s: not an "
			    "id of %s (vocabulary %" PRIu32 ")", i, s->o->field,
			    json_is_integer(x) ? "out of range" : "not an integer",
			    ovl_tok_name(s->tok), vocab);
			goto out;
		}
		ovl_u32vec_push(&s->toks, (uint32_t)id);
	}
	json_decref(root);
	s->pre = 1;
	record(s, r, "", 0);
	return;
out:
	json_decref(root);
}

/*
 * A JSON line: extract the field, then record it. The field is unescaped
 * over the line's own bytes: a long document is held once, not twice.
 */
void
json_record(struct src *s, struct rec *r, char *line, size_t len)
{
	struct ovl_jsonl_result jr;
	int rc;

	if (s->o->ids) {
		ids_record(s, r, line, len);
		return;
	}
	if (s->o->parser == PARSER_JANSSON) {
		json_error_t je;
		json_t *root = json_loadb(line, len, 0, &je), *v;
		size_t i;

		if (root == NULL) {
			bad(s, R_JSON, r, "invalid JSON at column %d: %s",
			    je.column, je.text);
			return;
		}
		v = root;
		for (i = 0; i < s->path.n && v != NULL; i++)
			v = json_is_object(v) ? json_object_get(v, s->path.key[i]) :
			    NULL;
		if (v == NULL)
			bad(s, R_MISSING, r, "no field '%s'", s->o->field);
		else if (!json_is_string(v))
			bad(s, R_NOTSTRING, r, "field '%s' is not a string",
			    s->o->field);
		else {
			/* Copy: the record outlives nothing, but root does not. */
			s->scratch.len = 0;
			ovl_buf_append(&s->scratch, json_string_value(v),
			    json_string_length(v));
			r->utf8_ok = 1;
			json_decref(root);
			record(s, r, (const char *)s->scratch.p, s->scratch.len);
			return;
		}
		json_decref(root);
		return;
	}
	rc = ovl_jsonl_extract_inplace(&s->path, line, len, &jr);
	switch (rc) {
	case OVL_JSONL_OK:
		r->utf8_ok = 1;
		record(s, r, jr.val, jr.len);
		break;
	case OVL_JSONL_MISSING:
		bad(s, R_MISSING, r, "no field '%s'", s->o->field);
		break;
	case OVL_JSONL_NOTSTRING:
		bad(s, R_NOTSTRING, r, "field '%s' is %s %s, not a string",
		    s->o->field, jr.type[0] == 'a' || jr.type[0] == 'o' ? "an" :
		    "a", jr.type);
		break;
	default:
		bad(s, R_JSON, r, "invalid JSON at column %zu: %s",
		    jr.err_off + 1, jr.err);
		break;
	}
}


void
wds_json_record(struct src *s, struct rec *r, const char *json, size_t len)
{
	json_t *root, *v, *e;
	size_t i, nnull = 0, badoff;
	uint32_t k = 0;
	int place = r->images != NULL && s->o->image_cost.kind != 0;

	if ((v = json_field(s, r, json, len, &root)) == NULL)
		return;
	if (json_is_string(v)) {	/* a caption */
		s->scratch.len = 0;
		ovl_buf_append(&s->scratch, json_string_value(v),
		    json_string_length(v));
		r->utf8_ok = 1;
		record(s, r, (const char *)s->scratch.p, s->scratch.len);
		goto out;
	}
	json_array_foreach(v, i, e) {
		if (json_is_null(e))
			nnull++;
		else if (!json_is_string(e))
			break;
	}
	if (!json_is_array(v) || i < json_array_size(v)) {
		bad(s, R_NOTSTRING, r, "field '%s' is neither a string nor an "
		    "array of strings and nulls", s->o->field);
		goto out;
	}
	if (place && nnull != r->nimages) {
		bad(s, R_IMAGE, r, "field '%s' has %zu image places (nulls) for "
		    "%" PRIu32 " images", s->o->field, nnull, r->nimages);
		goto out;
	}
	/* interleaved: each text as it is tokenized alone, each null an image */
	s->toks.len = 0;
	if (s->bos != OVL_TOK_NONE)
		ovl_u32vec_push(&s->toks, s->bos);
	json_array_foreach(v, i, e) {
		if (json_is_null(e)) {
			if (place)
				image_run(s, r, k++, &s->toks);
			continue;
		}
		if (ovl_tok_encode(s->tok, json_string_value(e),
		    json_string_length(e), &s->toks, &badoff) != 0) {
			bad(s, R_TOK, r, "%s at byte %zu of text %zu of field "
			    "'%s'", ovl_tok_error(s->tok), badoff, i,
			    s->o->field);
			goto out;
		}
	}
	s->pre = 1;
	record(s, r, json, len);
out:
	json_decref(root);
}

void
resume_error(struct src *s, uint64_t off, const char *why)
{
	ovl_errx(OVL_EXIT_USAGE, "'%s': --resume offset %" PRIu64 " %s "
	    "(chunk %" PRIu32 " of epoch %" PRIu32 ")", s->cx.name, off, why,
	    s->cx.k, s->cx.epoch);
}
