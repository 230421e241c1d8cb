#include "frameio.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "crc32c.h"
#include "err.h"
#include "io.h"
#include "num.h"
#include "frameio-int.h"
#include "relink.h"
#include "ring.h"

/*
 * Bounded memory: a buffer grown for an outlier frame goes back
 * to its normal size after it (the writer's once CALM frames in a row were
 * small), so memory follows the largest frame of the moment, not of the
 * whole stream. Buffers shrink only from 4 times their normal size: frames
 * of the usual sizes never allocate.
 */
#define CALM		8

static uint32_t
default_max(void)
{
	const char *env = getenv("OVL_FRAME_MAX");
	uint64_t v;

	if (env != NULL && ovl_num_size(env, &v) == 0 && v >= 64 &&
	    v <= OVL_FRAME_LIMIT)
		return (uint32_t)v;
	return OVL_FRAME_MAX_DEFAULT;
}

struct ovl_reader *
ovl_reader_new(int fd, const char *name, uint32_t max)
{
	struct ovl_reader *r = ovl_xcalloc(1, sizeof(*r));

	r->fd = fd;
	r->name = ovl_xstrdup(name);
	r->max = max != 0 ? max : default_max();
	if (r->max > OVL_FRAME_LIMIT)
		r->max = OVL_FRAME_LIMIT;
	/* the buffer comes with the first read, of the chunk then set */
	r->chunk = RD_CHUNK;
	ovl_io_pipe_grow(fd);
	return r;
}

void
ovl_reader_set_chunk(struct ovl_reader *r, size_t chunk)
{
	if (chunk < 4096)
		chunk = 4096;
	if (chunk > RD_CHUNK)
		chunk = RD_CHUNK;
	r->chunk = chunk;
	if (r->ring == NULL && r->end == r->start && r->cap > chunk) {
		/* nothing buffered: a buffer of the new size */
		r->base += r->start;
		r->start = r->end = 0;
		free(r->buf);
		r->cap = chunk;
		r->buf = ovl_xmalloc(r->cap);
	}
}

void
ovl_reader_defer(struct ovl_reader *r, size_t size)
{
	r->defer = size;
}

void
ovl_reader_on_idle(struct ovl_reader *r, void (*fn)(void *), void *arg)
{
	r->idle = fn;
	r->idle_arg = arg;
}

void
ovl_reader_free(struct ovl_reader *r)
{
	if (r == NULL)
		return;
	if (r->ring != NULL) {
		free(r->big);
		ovl_ring_close(r->ring);
	} else
		free(r->buf);
	free(r->name);
	free(r->meta_keys);
	free(r->link.base);
	ovl_buf_free(&r->meta);
	free(r);
}

void
ovl_reader_expect(struct ovl_reader *r, const struct ovl_expect *e)
{
	r->expect = 1;
	r->ex = *e;
	free(r->meta_keys);
	r->meta_keys = ovl_xstrdup(e->meta_keys != NULL ? e->meta_keys : "");
	r->ex.meta_keys = r->meta_keys;
	r->ranks = e->ranks;
}

uint64_t
ovl_reader_skipped(const struct ovl_reader *r)
{
	return r->skipped;
}

int
ovl_reader_meta_u64(const struct ovl_reader *r, const char *key, uint64_t *v)
{
	char val[32];

	return r->meta.len > 0 && ovl_meta_value((const char *)r->meta.p,
	    r->meta.len, key, val, sizeof(val)) && ovl_num_u64(val, v) == 0;
}

static int
fail(struct ovl_reader *r, int rc, uint64_t off, const char *detail)
{
	snprintf(r->errmsg, sizeof(r->errmsg), "'%s': %s at byte offset %" PRIu64
	    "%s%s", r->name, ovl_frame_strerror(rc), off,
	    detail != NULL ? ": " : "", detail != NULL ? detail : "");
	r->frame_off = off;
	r->state = rc;
	return rc;
}

int
ovl_frameio__bad(struct ovl_reader *r, int rc, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(r->errmsg, sizeof(r->errmsg), "'%s': %s at byte offset %"
	    PRIu64, r->name, what, r->frame_off);
	r->state = rc;
	return rc;
}

/* The META's keys against what the stage needs. */
static int
check_meta(struct ovl_reader *r, const struct ovl_frame *f)
{
	const char *text, *p = r->meta_keys, *sp;
	char key[64], val[64];
	uint32_t len;
	uint64_t v, vocab = 0;
	int have_vocab = 0;
	size_t kl;

	if (ovl_meta_decode(f, &text, &len) != OVL_F_OK)
		return ovl_frameio__bad(r, OVL_F_EPAYLOAD, "malformed META");
	r->meta.len = 0;
	ovl_buf_append(&r->meta, text, len);
	while (*p != '\0') {
		kl = strcspn(p, " ");
		if (kl > 0 && kl < sizeof(key)) {
			memcpy(key, p, kl);
			key[kl] = '\0';
			if (!ovl_meta_value(text, len, key, val, sizeof(val)))
				return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "META has no %s",
				    key);
			if (ovl_num_u64(val, &v) != 0 ||
			    (strcmp(key, "vocab") == 0 && v == 0))
				return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "bad %s '%s' in "
				    "META", key, val);
			if (strcmp(key, "vocab") == 0) {
				vocab = v;
				have_vocab = 1;
			}
		}
		p += kl;
		p += strspn(p, " ");
	}
	if (have_vocab && (sp = strstr(r->meta_keys, "eod")) != NULL &&
	    (sp[3] == '\0' || sp[3] == ' ') &&
	    ovl_meta_value(text, len, "eod", val, sizeof(val)) &&
	    ovl_num_u64(val, &v) == 0 && v >= vocab)
		return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "bad eod '%s' in META (vocab %"
		    PRIu64 ")", val, vocab);
	if (ovl_meta_value(text, len, "ranks", val, sizeof(val)) &&
	    ovl_num_u64(val, &v) == 0 && v >= 1 && v <= UINT32_MAX)
		r->ranks = (uint32_t)v;
	return OVL_F_OK;
}

/* The declared grammar, on a frame whose CRC holds. */
static int
check_frame(struct ovl_reader *r, const struct ovl_frame *f)
{
	const char *in = r->ex.what != NULL ? " in " : "";
	const char *what = r->ex.what != NULL ? r->ex.what : "";
	struct ovl_seq s;
	struct ovl_doc d;
	struct ovl_barrier b;

	if (f->kind == OVL_META) {
		if (r->seen_meta)
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "a second META");
		r->seen_meta = 1;
		return check_meta(r, f);
	}
	if (!r->seen_meta)
		return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "the stream does not begin with "
		    "META (%s first)", ovl_kind_name(f->kind));
	if (r->img_due > 0 && f->kind != OVL_IMAGE)
		return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "%s frame where %" PRIu64 " more "
		    "IMAGE frames of the %s before were due",
		    ovl_kind_name(f->kind), r->img_due, r->img_seq ? "SEQ" :
		    "DOC");
	if (f->kind == OVL_END)
		return OVL_F_OK;
	if (r->ex.kinds != 0 && !(r->ex.kinds & (1u << f->kind)))
		return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "unexpected %s frame%s%s",
		    ovl_kind_name(f->kind), in, what);
	switch (f->kind) {
	case OVL_SEQ:
		if (!(r->ex.checks & OVL_EXPECT_SEQ))
			break;
		if (ovl_seq_decode(f, &s) != OVL_F_OK)
			return ovl_frameio__bad(r, OVL_F_EPAYLOAD, "malformed SEQ");
		if (r->ranks > 0 && s.rank >= r->ranks)
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "SEQ for rank %" PRIu32
			    " of a %" PRIu32 "-rank run", s.rank, r->ranks);
		if (s.step < r->next_step)
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "SEQ for step %" PRIu64
			    " after step %" PRIu64 " (steps out of order)",
			    s.step, r->next_step);
		r->next_step = s.step;
		{
			struct ovl_piece pc;
			uint32_t i;

			r->img_due = 0;
			for (i = 0; i < s.npieces; i++) {
				ovl_seq_piece(&s, i, &pc);
				r->img_due += pc.nimages;
			}
			r->img_seq = 1;
			r->img_step = s.step;
			r->img_rank = s.rank;
			r->img_mb = s.mb;
		}
		break;
	case OVL_IMAGE: {
		struct ovl_image im;

		if (r->ex.checks == 0)
			break;
		if (ovl_image_decode(f, &im) != OVL_F_OK)
			return ovl_frameio__bad(r, OVL_F_EPAYLOAD, "malformed IMAGE");
		if (r->img_due == 0)
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "an IMAGE frame that no "
			    "DOC or SEQ before it announced");
		if (r->img_seq && (im.step != r->img_step ||
		    im.rank != r->img_rank || im.mb != r->img_mb))
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "IMAGE of step %" PRIu64
			    " rank %" PRIu32 " micro-batch %" PRIu32 " after "
			    "the SEQ of step %" PRIu64 " rank %" PRIu32
			    " micro-batch %" PRIu32, im.step, im.rank, im.mb,
			    r->img_step, r->img_rank, r->img_mb);
		r->img_due--;
		break;
	}
	case OVL_STEP: {
		struct ovl_step st;

		if (!(r->ex.checks & OVL_EXPECT_SEQ))
			break;
		if (ovl_step_decode(f, &st) != OVL_F_OK)
			return ovl_frameio__bad(r, OVL_F_EPAYLOAD, "malformed STEP");
		if (r->ranks > 0 && st.rank >= r->ranks)
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "STEP for rank %" PRIu32
			    " of a %" PRIu32 "-rank run", st.rank, r->ranks);
		if (st.step < r->next_step)
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "STEP %" PRIu64 " after "
			    "step %" PRIu64 " (steps out of order)", st.step,
			    r->next_step);
		break;
	}
	case OVL_DOC:
		if (!(r->ex.checks & OVL_EXPECT_DOC))
			break;
		/* the decoder holds the chunk below the chunk count */
		if (ovl_doc_decode(f, &d) != OVL_F_OK)
			return ovl_frameio__bad(r, OVL_F_EPAYLOAD, "malformed DOC");
		if (d.next_rec != d.record + 1 || (d.next_off < d.start_off &&
		    !(d.flags & OVL_DOC_SHUFFLED)))
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "DOC of record %" PRIu64
			    " at byte %" PRIu64 " with the cursor after it at "
			    "record %" PRIu64 ", byte %" PRIu64, d.record,
			    d.start_off, d.next_rec, d.next_off);
		r->img_due = (d.flags & OVL_DOC_IMAGES) ? d.nimages : 0;
		r->img_seq = 0;
		break;
	case OVL_BARRIER:
		if (r->ex.checks == 0)
			break;
		if (ovl_barrier_decode(f, &b) != OVL_F_OK)
			return ovl_frameio__bad(r, OVL_F_EPAYLOAD, "malformed BARRIER");
		if (r->have_barrier && b.n < r->next_barrier)
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "BARRIER %" PRIu64
			    " after BARRIER %" PRIu64, b.n,
			    r->next_barrier - 1);
		r->next_barrier = b.n + 1;
		r->have_barrier = 1;
		break;
	}
	return OVL_F_OK;
}

/*
 * Between frames: a buffer grown past 4 chunks for a large frame goes back
 * to the size what is buffered needs (one chunk, mostly) as soon as that
 * frame is consumed. No count here: the input that just passed an outlier
 * is the one its reader may not need for longest (ovl-mix takes other
 * sources while they catch up), and a frame of 4 chunks costs far more to
 * read and check than one allocation.
 */
static void
settle(struct ovl_reader *r)
{
	size_t have = r->end - r->start, ncap = r->chunk;
	uint8_t *nb;

	if (r->ring != NULL || r->cap <= 4 * r->chunk)
		return;
	while (ncap < have + r->chunk / 4)
		ncap *= 2;
	if (ncap > r->cap / 2)
		return;
	nb = ovl_xmalloc(ncap);
	memcpy(nb, r->buf + r->start, have);
	free(r->buf);
	r->buf = nb;
	r->cap = ncap;
	r->base += r->start;
	r->start = 0;
	r->end = have;
}

void
ovl_reader_done(struct ovl_reader *r)
{
	settle(r);
}

/*
 * After a read(2) of r->fd that failed: 0 to read again (EINTR),
 * OVL_RD_AGAIN (a non-blocking fd), or -1 with the message.
 */
static int
read_failed(struct ovl_reader *r)
{
	if (errno == EINTR)
		return 0;
	if (errno == EAGAIN)
		return OVL_RD_AGAIN;
	snprintf(r->errmsg, sizeof(r->errmsg), "'%s': read error: %s",
	    r->name, strerror(errno));
	r->state = OVL_F_ETRUNC;
	return -1;
}

/*
 * Make buf[start..end) hold at least need bytes, reading as needed.
 * Returns 1 when it does, 0 at end of file first, OVL_RD_AGAIN when a
 * non-blocking fd has nothing more, -1 on a read error (errmsg set).
 */
static int ring_fill(struct ovl_reader *, size_t);

static int
fill(struct ovl_reader *r, size_t need)
{
	size_t c = r->chunk, want, upto;
	ssize_t n;
	int rc;

	if (r->ring != NULL)
		return ring_fill(r, need);
	while (r->end - r->start < need) {
		if (r->eof)
			return 0;
		if (r->start > 0 && (r->start + need > r->cap ||
		    r->cap - r->end < c / 4)) {
			memmove(r->buf, r->buf + r->start, r->end - r->start);
			r->base += r->start;
			r->end -= r->start;
			r->start = 0;
		}
		/*
		 * The buffer grows with what arrives, a chunk past it at most:
		 * a frame's header alone (a corrupt length) costs no memory.
		 */
		upto = r->start + need;
		if (upto > r->end + c)
			upto = r->end + c;
		if (upto > r->cap || r->cap - r->end < c / 4) {
			size_t ncap = r->cap != 0 ? r->cap : c;
			while (ncap < upto || ncap - r->end < c / 4)
				ncap *= 2;
			r->buf = ovl_xrealloc(r->buf, ncap);
			r->cap = ncap;
		}
		/*
		 * At most a chunk at a time (more when a long frame needs
		 * it), so what is read stays in the cache until it is used.
		 */
		want = r->cap - r->end;
		if (want > c && want > need - (r->end - r->start))
			want = c > need - (r->end - r->start) ? c :
			    need - (r->end - r->start);
		if (r->idle != NULL) {
			struct pollfd p = { r->fd, POLLIN, 0 };
			if (poll(&p, 1, 0) == 0)
				r->idle(r->idle_arg);
		}
		n = read(r->fd, r->buf + r->end, want);
		if (n > 0) {
			r->end += (size_t)n;
			continue;
		}
		if (n == 0) {
			r->eof = 1;
			return 0;
		}
		if ((rc = read_failed(r)) != 0)
			return rc;
	}
	return 1;
}

/* ---- the ring transport (ring.h) ---- */

/*
 * Everything before buf[start] is consumed: the window begins there, and
 * the writer may reuse what lies before it. A frame read into big (an
 * outlier) is over: back to the ring.
 */
static void
ring_rebase(struct ovl_reader *r)
{
	size_t size = ovl_ring_size(r->ring);

	r->base += r->start;
	r->end -= r->start;
	r->start = 0;
	if (r->inbig) {
		/*
		 * big held exactly the one frame, consumed now: freed at once,
		 * as settle() gives back a pipe reader's grown buffer. Kept
		 * for outliers in a row, ovl-mix held one per input that had
		 * one until that input was read again (120 sources over rings:
		 * its peak RSS 272 MB against 40 over pipes, bench memory).
		 */
		r->inbig = 0;
		r->end = 0;
		free(r->big);
		r->big = NULL;
	}
	r->buf = ovl_ring_data(r->ring) + r->base % size;
	r->cap = size;
	ovl_ring_release(r->ring, r->base);
}

/*
 * Nothing more is published: wait for the writer. Returns 1 to look
 * again, 0 when the writer is gone (the caller looks once more),
 * OVL_RD_AGAIN on a non-blocking pipe, -1 on a read error.
 */
static int
ring_wait(struct ovl_reader *r, uint64_t have)
{
	char junk[64];
	ssize_t n;
	int rc;

	if (r->eof)
		return 0;
	if (r->idle != NULL)
		r->idle(r->idle_arg);
	if (ovl_ring_sleep(r->ring, have))
		return 1;
	for (;;) {
		n = read(r->fd, junk, sizeof(junk));
		if (n > 0)
			return 1;
		if (n == 0) {
			r->eof = 1;
			return 1;
		}
		if ((rc = read_failed(r)) != 0)
			return rc;
	}
}

/*
 * fill() over a ring: the bytes are viewed where the writer put them.
 * A frame larger than the ring is copied out to big as it comes.
 */
static int
ring_fill(struct ovl_reader *r, size_t need)
{
	size_t size = ovl_ring_size(r->ring), k;
	uint64_t head, at;
	int rc;

	while (r->end - r->start < need) {
		if (r->inbig && r->start > 0)
			ring_rebase(r);	/* the outlier was returned */
		if (!r->inbig && r->start > 0 && (r->start + need > size ||
		    r->start >= size / 4))
			ring_rebase(r);
		if (!r->inbig && need > size) {
			/* an outlier: into a buffer of its own */
			free(r->big);	/* NULL: freed when its frame was consumed */
			r->big = ovl_xmalloc(need);
			memcpy(r->big, r->buf + r->start, r->end - r->start);
			r->base += r->start;
			r->end -= r->start;
			r->start = 0;
			r->buf = r->big;
			r->cap = need;
			r->inbig = 1;
			ovl_ring_release(r->ring, r->base + r->end);
		}
		head = ovl_ring_head(r->ring);
		at = r->base + r->end;
		if (head > at && r->inbig) {
			k = need - (r->end - r->start);
			if (k > head - at)
				k = (size_t)(head - at);
			memcpy(r->big + r->end, ovl_ring_data(r->ring) + at % size,
			    k);
			r->end += k;
			ovl_ring_release(r->ring, r->base + r->end);
			continue;
		}
		if (head > at) {
			r->end = head - r->base < size ? (size_t)(head - r->base) :
			    size;
			continue;
		}
		if (r->eof)
			return 0;
		if (!r->inbig)
			ring_rebase(r);
		rc = ring_wait(r, r->base + r->end);
		if (rc != 1)
			return rc == 0 ? 0 : rc;
	}
	return 1;
}

/*
 * The stream begins with a ring's hello (ring.h): take it, map the ring
 * and read the stream from there. Returns 1, OVL_RD_AGAIN, or an error.
 */
static int
ring_attach(struct ovl_reader *r)
{
	struct ovl_ring *g;
	char msg[256];
	long len;
	int got;

	got = fill(r, 12);
	if (got == 1) {
		len = ovl_ring_hello_len(r->buf + r->start, r->end - r->start);
		if (len < 0)
			return fail(r, OVL_F_EMAGIC, r->base + r->start,
			    "malformed ring hello");
		got = fill(r, len > 0 ? (size_t)len : 12);
	}
	if (got == OVL_RD_AGAIN)
		return OVL_RD_AGAIN;
	if (got < 0)
		return r->state;
	if (got == 0)
		return fail(r, OVL_F_ETRUNC, r->base + r->end,
		    "inside a ring hello");
	g = ovl_ring_attach(r->fd, r->buf + r->start, r->end - r->start,
	    msg, sizeof(msg));
	if (g == NULL) {
		snprintf(r->errmsg, sizeof(r->errmsg), "'%.100s': %s", r->name,
		    msg);
		r->state = OVL_F_ETRUNC;
		return r->state;
	}
	/* the stream's offsets count from the ring's first byte */
	free(r->buf);
	r->ring = g;
	r->base = 0;
	r->start = r->end = 0;
	r->buf = ovl_ring_data(g);
	r->cap = ovl_ring_size(g);
	return 1;
}

static int
next_frame(struct ovl_reader *r, struct ovl_frame *f)
{
	uint16_t minor;
	uint64_t nframes;
	int rc, got;

	if (r->state < 0)
		return r->state;
	if (r->state == 2)
		return OVL_RD_EOF;
	if (r->state == 0) {
		got = fill(r, OVL_STREAM_HDR_LEN);
		if (got == OVL_RD_AGAIN)
			return OVL_RD_AGAIN;
		if (got < 0)
			return r->state;
		if (r->ring == NULL && r->end - r->start >= OVL_RING_MAGIC_LEN &&
		    memcmp(r->buf + r->start, OVL_RING_MAGIC,
		    OVL_RING_MAGIC_LEN) == 0 && ovl_io_isfifo(r->fd)) {
			got = ring_attach(r);
			if (got != 1)
				return got;
			got = fill(r, OVL_STREAM_HDR_LEN);
			if (got == OVL_RD_AGAIN)
				return OVL_RD_AGAIN;
			if (got < 0)
				return r->state;
		}
		rc = ovl_stream_hdr_check(r->buf + r->start, r->end - r->start,
		    &minor);
		if (rc == OVL_F_NEED)
			return fail(r, r->end == r->start ? OVL_F_ETRUNC :
			    OVL_F_ETRUNC, r->base + r->end,
			    r->end == r->start ? "empty stream" :
			    "inside the stream header");
		if (rc != OVL_F_OK)
			return fail(r, rc, r->base + r->start, NULL);
		r->minor = minor;
		r->start += OVL_STREAM_HDR_LEN;
		r->state = 1;
	}
	settle(r);
	got = fill(r, OVL_FRAME_HDR_LEN);
	if (got == OVL_RD_AGAIN)
		return OVL_RD_AGAIN;
	if (got < 0)
		return r->state;
	rc = ovl_frame_parse(r->buf + r->start, r->end - r->start, r->max, f);
	if (rc == OVL_F_NEED) {
		if (got == 0)
			return fail(r, OVL_F_ETRUNC, r->base + r->start,
			    r->end == r->start ? NULL : "inside a frame header");
		if (r->defer != 0 && f->size > r->defer)
			return OVL_RD_DEFER;
		got = fill(r, f->size);
		if (got == OVL_RD_AGAIN)
			return OVL_RD_AGAIN;
		if (got < 0)
			return r->state;
		if (got == 0)
			return fail(r, OVL_F_ETRUNC, r->base + r->start,
			    "inside a frame");
		rc = ovl_frame_parse(r->buf + r->start, r->end - r->start,
		    r->max, f);
	}
	if (rc != OVL_F_OK) {
		char detail[64];
		const char *d = NULL;
		if (rc == OVL_F_ETOOBIG) {
			snprintf(detail, sizeof(detail), "%" PRIu32
			    " bytes, limit %" PRIu32,
			    ovl_le32(r->buf + r->start), r->max);
			d = detail;
		}
		return fail(r, rc, r->base + r->start, d);
	}
	r->frame_off = r->base + r->start;
	r->start += f->size;
	if (f->kind == OVL_END) {
		if (ovl_end_decode(f, &nframes) != OVL_F_OK)
			return fail(r, OVL_F_EPAYLOAD, r->frame_off, "END frame");
		if (nframes != r->scount)
			return fail(r, OVL_F_EPAYLOAD, r->frame_off,
			    "END frame count does not match the frames read");
		r->state = 2;
		if (r->ring != NULL)
			ovl_ring_ended(r->ring);
		return OVL_RD_FRAME;
	}
	r->count++;
	r->scount++;
	return OVL_RD_FRAME;
}

int
ovl_reader_next(struct ovl_reader *r, struct ovl_frame *f)
{
	int rc;

	for (;;) {
		rc = next_frame(r, f);
		if (rc == OVL_F_ETRUNC && r->relink && ovl_frameio__reader_relink(r) == 0)
			continue;
		if (rc != OVL_RD_FRAME)
			return rc;
		if (f->kind == OVL_META) {
			if ((rc = ovl_frameio__resync(r, f)) != OVL_F_OK)
				return rc;
			if (r->successor)
				continue;	/* the stage has its META */
		} else if ((rc = ovl_frameio__repeated(r, f)) != 0) {
			if (rc < 0)
				return rc;
			continue;
		}
		if (f->kind == OVL_META || f->kind == OVL_DOC ||
		    f->kind == OVL_CHUNK_END || f->kind == OVL_SEQ ||
		    f->kind == OVL_BARRIER || f->kind == OVL_STATE ||
		    f->kind == OVL_END || f->kind == OVL_STEP ||
		    f->kind == OVL_IMAGE)
			break;
		if (r->minor <= OVL_VERSION_MINOR)
			return ovl_frameio__bad(r, OVL_F_EGRAMMAR, "unknown frame kind %u "
			    "(stream version %u.%u)", f->kind,
			    OVL_VERSION_MAJOR, r->minor);
		r->skipped++;	/* an addition of a newer minor version */
	}
	if (r->expect && (rc = check_frame(r, f)) != OVL_F_OK)
		return rc;
	ovl_frameio__advance(r, f);
	return OVL_RD_FRAME;
}

const char *
ovl_reader_error(const struct ovl_reader *r)
{
	return r->errmsg;
}

void
ovl_reader_die(const struct ovl_reader *r)
{
	ovl_errx(OVL_EXIT_FRAME, "%s", r->errmsg);
}

uint64_t
ovl_reader_offset(const struct ovl_reader *r)
{
	return r->frame_off;
}

uint64_t
ovl_reader_count(const struct ovl_reader *r)
{
	return r->count;
}

int
ovl_reader_fd(const struct ovl_reader *r)
{
	return r->fd;
}

const char *
ovl_reader_name(const struct ovl_reader *r)
{
	return r->name;
}

unsigned
ovl_reader_minor(const struct ovl_reader *r)
{
	return r->minor;
}

/* ---- writer ---- */

struct ovl_writer *
ovl_writer_new(int fd, const char *name)
{
	struct ovl_writer *w = ovl_xcalloc(1, sizeof(*w));

	w->fd = fd;
	w->name = ovl_xstrdup(name);
	w->cap = WR_FLUSH * 2;
	w->buf = ovl_xmalloc(w->cap);
	w->open = SIZE_MAX;
	ovl_io_pipe_grow(fd);
	return w;
}

void
ovl_writer_free(struct ovl_writer *w)
{
	if (w == NULL)
		return;
	ovl_ring_close(w->ring);
	free(w->inring ? w->heap : w->buf);
	free(w->name);
	if (w->bk != NULL) {
		close(w->bk->fd);
		(void)unlink(w->bk->path);
		free(w->bk->path);
		free(w->bk->committed);
		free(w->bk->bar);
		free(w->bk->link.base);
		ovl_buf_free(&w->bk->meta);
		free(w->bk);
	}
	free(w);
}

/* Write n bytes of p to the writer's fd, or die as write_out says. */
static void
put(struct ovl_writer *w, const void *p, size_t n)
{
	if (w->bk != NULL) {
		ovl_frameio__bk_put(w, p, n);
		return;
	}
	if (!w->ring_asked) {
		/* at the first bytes, as a pipe's reader would see them */
		w->ring_asked = 1;
		if (ovl_ring_wanted(w->fd))
			w->ring = ovl_ring_create(w->fd, w->name);
	}
	if (w->ring != NULL) {
		/* published at whole frames only (ring.h) */
		ovl_ring_put(w->ring, p, n);
		ovl_ring_publish(w->ring);
		if (w->inring) {	/* the window moved on */
			w->buf = ovl_ring_window(w->ring, 0);
			w->cap = 0;
		}
		return;
	}
	if (ovl_io_write_full(w->fd, p, n) != 0) {
		/*
		 * A socket's reader leaving is said, naming the peer, before
		 * the writer ends as a pipe's does (by SIGPIPE).
		 */
		if ((errno == EPIPE || errno == ECONNRESET) &&
		    ovl_io_issock(w->fd)) {
			ovl_warnx("the reader of '%s' went away (%s)", w->name,
			    strerror(errno));
			ovl_io_die_epipe();
		}
		if (errno == EPIPE)
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on '%s'", w->name);
	}
}

/*
 * Frames are built in the ring from now on: the heap buffer is empty and
 * kept for an outlier.
 */
static void
to_ring(struct ovl_writer *w)
{
	w->heap = w->buf;
	w->heapcap = w->cap;
	w->buf = ovl_ring_window(w->ring, 0);
	w->cap = 0;
	w->inring = 1;
}

static void
write_out(struct ovl_writer *w, size_t n)
{
	if (n == 0)
		return;
	if (w->inring) {
		/* built in place: commit and publish (n is all of len) */
		ovl_ring_commit(w->ring, n);
		ovl_ring_publish(w->ring);
		w->written += n;
		w->len = 0;
		w->buf = ovl_ring_window(w->ring, 0);
		w->cap = 0;
		return;
	}
	put(w, w->buf, n);
	memmove(w->buf, w->buf + n, w->len - n);
	w->len -= n;
	w->written += n;
	/* grown for a large frame, written out, CALM small frames since */
	if (w->calm >= CALM && w->cap > 4 * (2 * WR_FLUSH) && w->len == 0 &&
	    w->open == SIZE_MAX) {
		free(w->buf);
		w->cap = 2 * WR_FLUSH;
		w->buf = ovl_xmalloc(w->cap);
	}
	if (w->ring != NULL && w->len == 0 && w->open == SIZE_MAX &&
	    !w->ingen)
		to_ring(w);
}

/*
 * ensure() in place: a window of the ring for what is built and extra
 * bytes more; a frame larger than the ring is built in the heap buffer.
 */
static int
ensure_ring(struct ovl_writer *w, size_t extra)
{
	size_t size = ovl_ring_size(w->ring);

	if (w->len >= WR_FLUSH && !w->ingen)
		write_out(w, w->len);
	/*
	 * Never wait for room with frames built and not committed: the
	 * reader may be waiting for them (mid-frame in ovl_writer_frame_gen
	 * the frame's start is committed, and published once it is whole).
	 */
	if (w->len + extra > size || ovl_ring_room(w->ring) < w->len + extra) {
		write_out(w, w->len);
		if (extra > size) {
			w->buf = w->heap;
			w->cap = w->heapcap;
			w->heap = NULL;
			w->inring = 0;
			return 0;
		}
	}
	w->buf = ovl_ring_window(w->ring, w->len + extra);
	w->cap = w->len + extra;
	return 1;
}

void
ovl_writer_flush(struct ovl_writer *w)
{
	write_out(w, w->len);
}

static void
ensure(struct ovl_writer *w, size_t extra)
{
	if (w->inring && ensure_ring(w, extra))
		return;
	if (w->len >= WR_FLUSH)
		write_out(w, w->len);
	if (w->inring && ensure_ring(w, extra))
		return;
	if (w->cap - w->len < extra) {
		size_t ncap = w->cap;
		while (ncap - w->len < extra)
			ncap *= 2;
		w->buf = ovl_xrealloc(w->buf, ncap);
		w->cap = ncap;
	}
}

static void
start(struct ovl_writer *w)
{
	if (w->started)
		return;
	ensure(w, OVL_STREAM_HDR_LEN);
	ovl_stream_hdr_encode(w->buf + w->len);
	w->len += OVL_STREAM_HDR_LEN;
	w->started = 1;
}

uint8_t *
ovl_writer_begin(struct ovl_writer *w, uint32_t len)
{
	if ((len & 3) != 0 || len > OVL_FRAME_LIMIT || w->open != SIZE_MAX)
		ovl_errx(OVL_EXIT_DATA, "internal error: bad frame length %" PRIu32
		    " for '%s'", len, w->name);
	start(w);
	ensure(w, (size_t)OVL_FRAME_HDR_LEN + len);
	w->open = w->len;
	w->open_len = len;
	return w->buf + w->len + OVL_FRAME_HDR_LEN;
}

void
ovl_writer_finish(struct ovl_writer *w, uint8_t kind, uint8_t flags)
{
	ovl_frame_seal(w->buf + w->open, kind, flags, w->open_len);
	w->len += (size_t)OVL_FRAME_HDR_LEN + w->open_len;
	w->calm = w->open_len <= WR_FLUSH / 2 ? w->calm + 1 : 0;
	if (kind != OVL_END)
		w->count++;
	if (w->bk != NULL)
		ovl_frameio__bk_frame(w, w->buf + w->open, kind, (size_t)OVL_FRAME_HDR_LEN +
		    w->open_len, w->written + w->len);
	w->open = SIZE_MAX;
}

void
ovl_writer_frame(struct ovl_writer *w, uint8_t kind, uint8_t flags,
    const void *payload, uint32_t len)
{
	uint8_t *p = ovl_writer_begin(w, len);

	if (len > 0)
		memcpy(p, payload, len);
	ovl_writer_finish(w, kind, flags);
}

#define GEN_PIECE	(WR_FLUSH / 2)	/* ovl_writer_frame_gen's pieces */

void
ovl_writer_frame_gen(struct ovl_writer *w, uint8_t kind, uint8_t flags,
    uint32_t len, void (*gen)(void *, uint8_t *, uint32_t, uint32_t),
    void *arg)
{
	uint8_t *hdr, *p;
	uint32_t off, n, crc;

	if (len <= GEN_PIECE) {
		gen(arg, ovl_writer_begin(w, len), 0, len);
		ovl_writer_finish(w, kind, flags);
		return;
	}
	if ((len & 3) != 0 || len > OVL_FRAME_LIMIT || w->open != SIZE_MAX)
		ovl_errx(OVL_EXIT_DATA, "internal error: bad frame length %"
		    PRIu32 " for '%s'", len, w->name);
	start(w);
	/* room for the header and one piece: the buffer keeps its size */
	ensure(w, OVL_FRAME_HDR_LEN + GEN_PIECE);
	hdr = w->buf + w->len;
	/* the header as ovl_frame_seal makes it, its CRC over the pieces */
	ovl_put32(hdr, len);
	hdr[4] = kind;
	hdr[5] = flags;
	hdr[6] = hdr[7] = 0;
	crc = ovl_crc32c(0, hdr, 8);
	p = hdr + OVL_FRAME_HDR_LEN;
	for (off = 0; off < len; off += n) {
		n = len - off < GEN_PIECE ? len - off : GEN_PIECE;
		gen(arg, p, off, n);
		crc = ovl_crc32c(crc, p, n);
	}
	ovl_put32(hdr + 8, crc);
	w->len += OVL_FRAME_HDR_LEN;
	w->ingen = 1;
	for (off = 0; off < len; off += n) {
		n = len - off < GEN_PIECE ? len - off : GEN_PIECE;
		ensure(w, n);
		gen(arg, w->buf + w->len, off, n);
		w->len += n;
	}
	w->ingen = 0;
	w->count++;
	w->calm++;
}

void
ovl_writer_copy(struct ovl_writer *w, const struct ovl_frame *f)
{
	start(w);
	if (f->size > WR_FLUSH) {
		/*
		 * A large frame goes out from where it was read, after what
		 * is buffered: no second copy of an outlier in memory.
		 */
		write_out(w, w->len);
		put(w, f->payload - OVL_FRAME_HDR_LEN, f->size);
		w->written += f->size;
		if (f->kind != OVL_END)
			w->count++;
		if (w->bk != NULL)
			ovl_frameio__bk_frame(w, f->payload - OVL_FRAME_HDR_LEN, f->kind,
			    f->size, w->written);
		return;
	}
	ensure(w, f->size);
	memcpy(w->buf + w->len, f->payload - OVL_FRAME_HDR_LEN, f->size);
	w->len += f->size;
	w->calm++;
	if (f->kind != OVL_END)
		w->count++;
	if (w->bk != NULL)
		ovl_frameio__bk_frame(w, f->payload - OVL_FRAME_HDR_LEN, f->kind, f->size,
		    w->written + w->len);
}

void
ovl_writer_end(struct ovl_writer *w)
{
	uint8_t *p = ovl_writer_begin(w, OVL_END_LEN);

	ovl_end_encode(p, w->count - w->count_base);
	ovl_writer_finish(w, OVL_END, 0);
	ovl_writer_flush(w);
	if (w->bk != NULL)
		ovl_frameio__bk_end(w);
}

uint64_t
ovl_writer_offset(const struct ovl_writer *w)
{
	return w->written + w->len;
}

uint64_t
ovl_writer_count(const struct ovl_writer *w)
{
	return w->count;
}
