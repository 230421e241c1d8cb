/*
 * frameio: relinking a stream to the successor of a process that died
 * (relink.h), and the writer's backup that a successor reader is replayed
 * from.
 */
#include "frameio-int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "io.h"
#include "num.h"
#include "ring.h"

/* ---- relinking (relink.h) ---- */

void
ovl_reader_relink(struct ovl_reader *r)
{
	if (ovl_link_of_fd(r->fd, &r->link) != 0)
		ovl_errx(OVL_EXIT_USAGE, "'%s': relinking needs a named FIFO "
		    "(mkfifo), as ovl-run links stages", r->name);
	r->relink = 1;
}

void
ovl_reader_resume_at(struct ovl_reader *r, uint64_t n)
{
	r->positioned = 1;
	r->pos_b = n;
	r->pos_k = 0;
	r->have_crc = 0;
}

uint64_t
ovl_reader_dropped(const struct ovl_reader *r)
{
	return r->dropped;
}

/*
 * The writer is gone (end of file without END, or a frame cut short):
 * wait for its successor on the link's next generation and read its
 * stream from the start. 0, or -1 keeping the error that brought us here.
 */
int
ovl_frameio__reader_relink(struct ovl_reader *r)
{
	char *path;
	int rc, again;

	/* a writer that sent nothing: its successor comes here (relink.h) */
	again = r->base + r->end == 0 && !ovl_link_marked(&r->link);
	ovl_warnx("%s; waiting for its successor%s", r->errmsg,
	    again ? " on the same link" : "");
	if (r->ring != NULL) {
		free(r->big);
		r->big = NULL;
		r->inbig = 0;
		ovl_ring_close(r->ring);
		r->ring = NULL;
		r->cap = r->chunk;
		r->buf = ovl_xmalloc(r->cap);
	}
	rc = again ? ovl_link_again(&r->link, r->fd, &path) :
	    ovl_link_next(&r->link, r->fd, 0, &path);
	if (rc != 0) {
		if (errno != EINTR)
			ovl_warn("'%s': cannot open its %s generation",
			    r->link.base, again ? "same" : "next");
		return -1;
	}
	free(r->name);
	r->name = path;
	r->start = r->end = 0;
	r->base = 0;
	r->eof = 0;
	r->state = 0;
	r->scount = 0;
	/*
	 * Nothing came before (the first writer sent nothing): the
	 * successor's stream is the first, its META the stage's.
	 */
	if (r->count > 0) {
		r->positioned = 1;
		r->successor = 1;
	}
	return 0;
}

/*
 * A META: where its stream starts ("resumed M": right after BARRIER M)
 * against where this reader is, and what to drop of it.
 */
int
ovl_frameio__resync(struct ovl_reader *r, const struct ovl_frame *f)
{
	const char *text;
	uint32_t len;
	char v[32];
	uint64_t m = 0;

	if (!r->positioned)
		return OVL_F_OK;
	if (ovl_meta_decode(f, &text, &len) != OVL_F_OK)
		return ovl_frameio__bad(r, OVL_F_EPAYLOAD, "META");
	if (!ovl_meta_value(text, len, "resumed", v, sizeof(v))) {
		/*
		 * No "resumed": a successor's stream starts at the start; the
		 * first stream of a resumed stage starts where its writer was
		 * told to (a writer of before relinking).
		 */
		if (!r->successor)
			return OVL_F_OK;
	} else if (ovl_num_u64(v, &m) != 0)
		return ovl_frameio__bad(r, OVL_F_EPAYLOAD, "META resumed '%s'", v);
	if (m > r->pos_b)
		return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "the stream resumes after "
		    "checkpoint %" PRIu64 ", past this reader's checkpoint %"
		    PRIu64 ": what lies between is missing", m, r->pos_b);
	r->skip_bar = m < r->pos_b;
	r->skip_k = r->pos_k;
	return OVL_F_OK;
}

/*
 * While a resumed stream repeats what this reader has: 1 to drop f, 0 to
 * take it, or an error (the stream is not the one this reader follows).
 */
int
ovl_frameio__repeated(struct ovl_reader *r, const struct ovl_frame *f)
{
	struct ovl_barrier b;
	uint32_t crc;

	if (!r->skip_bar && r->skip_k == 0)
		return 0;
	if (f->kind == OVL_END)
		return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "the stream ends before "
		    "reaching where this reader is (after checkpoint %"
		    PRIu64 " and %" PRIu64 " frames)", r->pos_b, r->pos_k);
	if (r->skip_bar) {
		if (f->kind == OVL_BARRIER) {
			if (ovl_barrier_decode(f, &b) != OVL_F_OK)
				return ovl_frameio__bad(r, OVL_F_EPAYLOAD, "BARRIER frame");
			if (b.n > r->pos_b)
				return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "BARRIER %" PRIu64
				    " before BARRIER %" PRIu64 ": the stream "
				    "does not hold this reader's place",
				    b.n, r->pos_b);
			if (b.n == r->pos_b)
				r->skip_bar = 0;
		}
	} else
		r->skip_k--;
	r->dropped++;
	crc = ovl_le32(f->payload - OVL_FRAME_HDR_LEN + 8);
	if (!r->skip_bar && r->skip_k == 0 && r->have_crc &&
	    crc != r->last_crc)
		return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "the frame before this one "
		    "differs from the one this reader had there: the "
		    "resumed stream is not the same stream");
	return 1;
}

/* A frame is taken: where this reader is now. */
void
ovl_frameio__advance(struct ovl_reader *r, const struct ovl_frame *f)
{
	struct ovl_barrier b;

	if (f->kind == OVL_META || f->kind == OVL_END)
		return;
	if (f->kind == OVL_BARRIER && ovl_barrier_decode(f, &b) == OVL_F_OK) {
		r->pos_b = b.n;
		r->pos_k = 0;
	} else
		r->pos_k++;
	r->last_crc = ovl_le32(f->payload - OVL_FRAME_HDR_LEN + 8);
	r->have_crc = 1;
}

/* ---- the backup and relinking (relink.h) ---- */

void
ovl_writer_backup(struct ovl_writer *w, const char *spill,
    const char *committed, uint64_t max)
{
	struct backup *b;

	if (w->started)
		ovl_errx(OVL_EXIT_DATA, "internal error: backup of '%s' after "
		    "its first frame", w->name);
	b = ovl_xcalloc(1, sizeof(*b));
	if (ovl_link_of_fd(w->fd, &b->link) != 0)
		ovl_errx(OVL_EXIT_USAGE, "'%s': a backup is for a named FIFO "
		    "(mkfifo), as ovl-run links stages", w->name);
	if (ovl_link_mark(&b->link) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot mark '%s' as written",
		    b->link.base);
	b->fd = open(spill, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (b->fd < 0)
		ovl_err(OVL_EXIT_DATA, "cannot create '%s'", spill);
	b->path = ovl_xstrdup(spill);
	b->committed = ovl_xstrdup(committed);
	b->max = max;
	w->bk = b;
	/* no ring: a backed-up stream is replayed from its own bytes */
	w->ring_asked = 1;
	/* a reader's leaving is EPIPE here, answered by relinking */
	signal(SIGPIPE, SIG_IGN);
}

/* The frame at p (whole) was written: a META is kept, a BARRIER noted. */
void
ovl_frameio__bk_frame(struct ovl_writer *w, const uint8_t *p, uint8_t kind, size_t size,
    uint64_t end)
{
	struct backup *b = w->bk;

	if (kind == OVL_META && b->meta.len == 0)
		ovl_buf_append(&b->meta, p, size);
	if (kind == OVL_END) {
		b->ended = 1;
		b->end_at = end - size;
	}
	if (kind != OVL_BARRIER)
		return;
	if (b->nbar == b->capbar) {
		b->capbar = b->capbar ? 2 * b->capbar : 16;
		b->bar = ovl_xrealloc(b->bar, b->capbar * sizeof(*b->bar));
	}
	b->bar[b->nbar].n = ovl_le64(p + OVL_FRAME_HDR_LEN);
	b->last_n = b->bar[b->nbar].n;
	b->bar[b->nbar].end = end;
	b->bar[b->nbar].count = w->count;
	b->nbar++;
}

/*
 * Everything up to stream offset upto went out and checkpoint c (read
 * before it was written) is committed: what lies before BARRIER c is
 * no longer needed by any reader.
 */
static void
bk_prune(struct ovl_writer *w, uint64_t c, uint64_t upto)
{
	struct backup *b = w->bk;
	size_t i, k = SIZE_MAX;

	for (i = 0; i < b->nbar && b->bar[i].n <= c && b->bar[i].end <= upto;
	    i++)
		k = i;
	if (k == SIZE_MAX)
		return;
	b->keep = b->bar[k].end;
	b->keep_count = b->bar[k].count;
	b->m = b->bar[k].n;
	memmove(b->bar, b->bar + k + 1, (b->nbar - k - 1) * sizeof(*b->bar));
	b->nbar -= k + 1;
	/* a hole where the bytes were (a file system without holes keeps them) */
	(void)fallocate(b->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
	    (off_t)(b->keep & ~(uint64_t)4095));
}

/* The bytes [from, to) of the spill to the fd: 0, or -1 with errno. */
static int
bk_copy(struct ovl_writer *w, uint64_t from, uint64_t to)
{
	static uint8_t t[1u << 16];
	ssize_t n;
	size_t k;

	while (from < to) {
		k = to - from < sizeof(t) ? (size_t)(to - from) : sizeof(t);
		n = pread(w->bk->fd, t, k, (off_t)from);
		if (n <= 0)
			ovl_err(OVL_EXIT_DATA, "cannot read back '%s'",
			    w->bk->path);
		if (ovl_io_write_full(w->fd, t, (size_t)n) != 0)
			return -1;
		from += (uint64_t)n;
	}
	return 0;
}

/*
 * The bytes [from, upto) of the spill, its END frame (counted for the
 * stream it was written to) counted again for this one, which starts
 * count_base frames later. 0, or -1 with errno.
 */
static int
bk_copy_end(struct ovl_writer *w, uint64_t from, uint64_t upto)
{
	struct backup *b = w->bk;
	uint8_t end[OVL_FRAME_HDR_LEN + OVL_END_LEN];

	if (!b->ended || upto <= b->end_at)
		return bk_copy(w, from, upto);
	if (upto != b->end_at + sizeof(end))
		ovl_errx(OVL_EXIT_DATA, "internal error: a replay of '%s' "
		    "ends inside its END frame", w->name);
	if (bk_copy(w, from, b->end_at) != 0)
		return -1;
	memset(end, 0, sizeof(end));
	ovl_end_encode(end + OVL_FRAME_HDR_LEN, w->count - w->count_base);
	ovl_frame_seal(end, OVL_END, 0, OVL_END_LEN);
	return ovl_io_write_full(w->fd, end, sizeof(end));
}

/*
 * The successor's stream: the stream header, the META saying where it
 * resumes, the bytes kept since then up to upto. 0, or -1 with errno.
 */
static int
bk_replay(struct ovl_writer *w, uint64_t upto)
{
	struct backup *b = w->bk;
	struct ovl_frame f;
	struct ovl_buf text = { 0 }, fr = { 0 };
	const char *t, *p, *e, *nl;
	uint32_t len, plen;
	char line[48];
	int rc;

	if (b->keep == 0 || b->meta.len == 0) {
		w->count_base = 0;
		return bk_copy_end(w, 0, upto);
	}
	if (ovl_frame_parse(b->meta.p, b->meta.len, OVL_FRAME_LIMIT, &f) !=
	    OVL_F_OK || ovl_meta_decode(&f, &t, &len) != OVL_F_OK)
		ovl_errx(OVL_EXIT_DATA, "internal error: the META of '%s'",
		    w->name);
	for (p = t, e = t + len; p < e; p = nl) {
		nl = memchr(p, '\n', (size_t)(e - p));
		nl = nl == NULL ? e : nl + 1;
		if (strncmp(p, "resumed ", 8) != 0)
			ovl_buf_append(&text, p, (size_t)(nl - p));
	}
	snprintf(line, sizeof(line), "resumed %" PRIu64 "\n", b->m);
	ovl_buf_append(&text, line, strlen(line));
	plen = ovl_meta_payload_len((uint32_t)text.len);
	ovl_buf_reserve(&fr, OVL_STREAM_HDR_LEN + OVL_FRAME_HDR_LEN + plen);
	memset(fr.p, 0, OVL_STREAM_HDR_LEN + OVL_FRAME_HDR_LEN + plen);
	ovl_stream_hdr_encode(fr.p);
	ovl_meta_encode(fr.p + OVL_STREAM_HDR_LEN + OVL_FRAME_HDR_LEN,
	    (const char *)text.p, (uint32_t)text.len);
	ovl_frame_seal(fr.p + OVL_STREAM_HDR_LEN, OVL_META, 0, plen);
	rc = ovl_io_write_full(w->fd, fr.p, OVL_STREAM_HDR_LEN +
	    OVL_FRAME_HDR_LEN + plen);
	ovl_buf_free(&text);
	ovl_buf_free(&fr);
	/* the new stream's frames: its META, then those after keep */
	w->count_base = b->keep_count - 1;
	return rc != 0 ? -1 : bk_copy_end(w, b->keep, upto);
}

/* The reader went away: replay to its successor, as often as it takes. */
static void
bk_relink(struct ovl_writer *w, uint64_t upto)
{
	char *path;

	for (;;) {
		ovl_warnx("the reader of '%s' went away; waiting for its "
		    "successor, to replay since checkpoint %" PRIu64, w->name,
		    w->bk->m);
		if (ovl_link_next(&w->bk->link, w->fd, 1, &path) != 0 ||
		    ovl_link_mark(&w->bk->link) != 0)
			ovl_err(OVL_EXIT_DATA, "'%s': cannot open its next "
			    "generation", w->bk->link.base);
		free(w->name);
		w->name = path;
		if (bk_replay(w, upto) == 0)
			return;
		if (errno != EPIPE && errno != ECONNRESET)
			ovl_err(OVL_EXIT_DATA, "write error on '%s'", w->name);
	}
}

/* put() with a backup: the bytes kept first, then written or replayed. */
void
ovl_frameio__bk_put(struct ovl_writer *w, const void *p, size_t n)
{
	struct backup *b = w->bk;
	uint64_t off = w->written, c = 0;
	int have_c = 0;
	size_t k = 0;
	ssize_t m;

	if (b->nbar > 0)
		have_c = ovl_link_committed(b->committed, &c);
	while (k < n) {
		m = pwrite(b->fd, (const uint8_t *)p + k, n - k,
		    (off_t)(off + k));
		if (m < 0 && errno == EINTR)
			continue;
		if (m <= 0)
			ovl_err(OVL_EXIT_DATA, "cannot write the backup '%s'",
			    b->path);
		k += (size_t)m;
	}
	if (off + n - b->keep > b->max)
		ovl_errx(OVL_EXIT_DATA, "'%s': %" PRIu64 " bytes written since "
		    "checkpoint %" PRIu64 ", more than the backup may hold "
		    "(%" PRIu64 "): is the sink committing?", w->name,
		    off + n - b->keep, b->m, b->max);
	if (ovl_io_write_full(w->fd, p, n) != 0) {
		if (errno != EPIPE && errno != ECONNRESET)
			ovl_err(OVL_EXIT_DATA, "write error on '%s'", w->name);
		bk_relink(w, off + n);
	}
	if (have_c)
		bk_prune(w, c, off + n);
}


void
ovl_meta_frame_without(const struct ovl_frame *f, const char *key,
    struct ovl_buf *out)
{
	struct ovl_buf text = { 0 };
	const char *t, *p, *e, *nl;
	size_t klen = strlen(key), at;
	uint32_t len, plen;

	if (ovl_meta_decode(f, &t, &len) != OVL_F_OK) {
		ovl_buf_append(out, f->payload - OVL_FRAME_HDR_LEN, f->size);
		return;
	}
	for (p = t, e = t + len; p < e; p = nl) {
		nl = memchr(p, '\n', (size_t)(e - p));
		nl = nl == NULL ? e : nl + 1;
		if ((size_t)(nl - p) > klen && memcmp(p, key, klen) == 0 &&
		    (p[klen] == ' ' || p[klen] == '\n'))
			continue;
		ovl_buf_append(&text, p, (size_t)(nl - p));
	}
	if (text.len == len) {	/* nothing to drop: the frame as it came */
		ovl_buf_free(&text);
		ovl_buf_append(out, f->payload - OVL_FRAME_HDR_LEN, f->size);
		return;
	}
	plen = ovl_meta_payload_len((uint32_t)text.len);
	at = out->len;
	ovl_buf_reserve(out, OVL_FRAME_HDR_LEN + plen);
	memset(out->p + at, 0, OVL_FRAME_HDR_LEN + plen);
	ovl_meta_encode(out->p + at + OVL_FRAME_HDR_LEN, (const char *)text.p,
	    (uint32_t)text.len);
	ovl_frame_seal(out->p + at, OVL_META, 0, plen);
	out->len = at + OVL_FRAME_HDR_LEN + plen;
	ovl_buf_free(&text);
}

void
ovl_frameio__bk_end(struct ovl_writer *w)
{
	struct backup *b = w->bk;
	struct pollfd p;
	uint64_t c;
	int rc;

	for (;;) {
		/* events 0: POLLERR alone, once the reader closed its end */
		p.fd = w->fd;
		p.events = 0;
		p.revents = 0;
		rc = poll(&p, 1, -1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			ovl_err(OVL_EXIT_DATA, "cannot wait for the reader of "
			    "'%s'", w->name);
		if (ovl_link_committed(b->committed, &c) && c > b->last_n)
			return;
		bk_relink(w, w->written);
	}
}
