/*
 * ovl-source --shuffle-window: the documents of a window (records of a
 * chunk, or a group of chunks) go out in a permuted order (lib/docshuf.h
 * says which, and what their positions and cursors are). The frames of a
 * window's documents (each DOC with its IMAGE frames) are held until its
 * last record has been read, then written in the window's order with
 * their positions set: memory is one window's frames, nothing of them is
 * in any cursor.
 */
#include "source.h"

/* Frames of more payload than this go out in pieces (as docs.c's). */
#define SHUF_PIECES	(128u << 10)
#define SHUF_CALM	8

int
shuf_on(const struct src *s)
{
	return s->sh.win.kind != OVL_DOCSHUF_OFF;
}

/* A window begins empty; skip of its documents were sent before. */
static void
window_begin(struct shuf *h, uint32_t epoch, uint32_t k, uint64_t skip)
{
	h->epoch = epoch;
	h->k = k;
	h->skip = skip;
	h->started = 0;
	h->arena.len = 0;
	h->nfr = 0;
	h->docs.len = 0;
}

void
shuf_chunk_begin(struct src *s, uint64_t *rec0)
{
	struct shuf *h = &s->sh;
	uint64_t w, j;

	if (h->win.kind != OVL_DOCSHUF_DOCS)
		return;
	*rec0 = ovl_docshuf_split(&h->win, *rec0, &w, &j);
	window_begin(h, s->cx.epoch, s->cx.k, j);
	h->count = *rec0;
	h->w = w;
	h->group = 0;
}

void
shuf_group_begin(struct src *s, uint32_t epoch, uint32_t first, uint64_t skip)
{
	window_begin(&s->sh, epoch, first, skip);
	s->sh.w = 0;
	s->sh.start_off = 0;
	s->sh.group = 1;
}

void
shuf_record_begin(struct src *s, const struct rec *r)
{
	struct shuf *h = &s->sh;
	uint64_t w;

	if (h->group)
		return;
	w = ovl_docshuf_window(&h->win, h->count);
	h->count++;
	if (h->started && w == h->w)
		return;
	if (h->started)
		(void)shuf_flush(s);
	h->w = w;
	h->start_off = r->start_off;
	h->started = 1;
}

void
shuf_record_end(struct src *s)
{
	struct shuf *h = &s->sh;

	if (!h->group && h->count % h->win.n == 0)
		(void)shuf_flush(s);
}

uint8_t *
shuf_begin(struct src *s, uint32_t len)
{
	struct shuf *h = &s->sh;
	uint8_t *p = ovl_buf_reserve(&h->arena, len);

	if (h->nfr == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 64;
		h->fr = ovl_xrealloc(h->fr, h->cap * sizeof(*h->fr));
	}
	h->fr[h->nfr].off = h->arena.len;
	h->fr[h->nfr].len = len;
	return p;
}

void
shuf_finish(struct src *s, uint8_t kind, uint8_t flags)
{
	struct shuf *h = &s->sh;

	h->fr[h->nfr].kind = kind;
	h->fr[h->nfr].flags = flags;
	h->arena.len += h->fr[h->nfr].len;
	if (kind == OVL_DOC)
		ovl_u32vec_push(&h->docs, (uint32_t)h->nfr);
	h->nfr++;
}

static void
piece(void *arg, uint8_t *dst, uint32_t off, uint32_t n)
{
	memcpy(dst, (const uint8_t *)arg + off, n);
}

static void
put_frame(struct src *s, const struct shuf_frame *f)
{
	uint8_t *p = s->sh.arena.p + f->off;

	if (f->len > SHUF_PIECES)
		ovl_writer_frame_gen(s->w, f->kind, f->flags, f->len, piece, p);
	else
		ovl_writer_frame(s->w, f->kind, f->flags, p, f->len);
}

/*
 * Write the window held in its order, from the document a resume skips
 * to; the documents skipped were counted when read, and are not sent.
 */
uint64_t
shuf_flush(struct src *s)
{
	struct shuf *h = &s->sh;
	size_t n = h->docs.len, j, d, end;
	uint64_t pos, sent = 0;

	if (h->skip > n)
		ovl_errx(OVL_EXIT_USAGE, "--resume cursor %" PRIu32 ":%" PRIu32
		    ":%" PRIu64 ":%" PRIu64 " is past the %zu documents of its "
		    "shuffle window", h->epoch, h->k, h->start_off,
		    ovl_docshuf_pos(&h->win, h->w, h->skip), n);
	if (h->pcap < n) {
		h->pcap = n;
		h->perm = ovl_xrealloc(h->perm, n * sizeof(*h->perm));
	}
	ovl_docshuf_perm(s->o->seed, h->epoch, h->k, h->w, h->perm, n);
	for (j = 0; j < n; j++) {
		d = h->perm[j];
		end = d + 1 < n ? h->docs.p[d + 1] : h->nfr;
		if (j < h->skip) {
			uint32_t ntok = ovl_le32(h->arena.p + h->fr[h->docs.p[d]].off +
			    64);

			s->docs--;
			s->tokens -= ntok;
			if (!h->group) {
				s->cx.docs--;
				s->cx.tokens -= ntok;
			}
			continue;
		}
		{
			uint8_t *p = h->arena.p + h->fr[h->docs.p[d]].off;

			pos = h->group ? j : ovl_docshuf_pos(&h->win, h->w, j);
			ovl_put32(p + 4, ovl_le32(p + 4) | OVL_DOC_SHUFFLED);
			ovl_put32(p + 12, h->k);
			ovl_put64(p + 24, pos);
			ovl_put64(p + 32, h->start_off);
			ovl_put64(p + 40, pos + 1);
		}
		for (d = h->docs.p[d]; d < end; d++)
			put_frame(s, &h->fr[d]);
		sent++;
	}
	h->skip = 0;
	h->nfr = 0;
	h->docs.len = 0;
	/*
	 * A window grown for outliers gives its storage back: to the most
	 * the last SHUF_CALM windows held, every SHUF_CALM windows.
	 */
	if (h->hi < h->arena.len)
		h->hi = h->arena.len;
	h->arena.len = 0;
	if (++h->calm == SHUF_CALM) {
		ovl_buf_trim(&h->arena, h->hi);
		h->hi = 0;
		h->calm = 0;
	}
	return sent;
}

void
shuf_chunk_end(struct src *s)
{
	if (s->sh.win.kind == OVL_DOCSHUF_DOCS)
		(void)shuf_flush(s);
}

void
shuf_free(struct src *s)
{
	ovl_buf_free(&s->sh.arena);
	ovl_u32vec_free(&s->sh.docs);
	free(s->sh.fr);
	free(s->sh.perm);
}
