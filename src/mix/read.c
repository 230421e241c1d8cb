/*
 * ovl-mix: the inputs, the targets and the selection of the next source,
 * and every source read in canonical order. See mix.h.
 */
#include "mix.h"

/* ---- small helpers --------------------------------------------------- */

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct ovl_plan *
load_plan(const char *path, int flags)
{
	char err[8192];		/* every error of the plan, a line each */
	struct ovl_plan *p = ovl_plan_loadf(path, flags, err, sizeof(err));

	if (p == NULL)
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	return p;
}

/* Set the mixed fields of the DOC frame f in place and fix its CRC. */
void
doc_rewrite(struct ovl_frame *f, uint32_t source, uint64_t pos,
    uint64_t tokens)
{
	uint8_t *pl = (uint8_t *)(uintptr_t)f->payload;
	uint8_t *hdr = pl - OVL_FRAME_HDR_LEN;
	uint64_t old[8], nw[8];
	int i;

	/*
	 * CRC-32C is linear: the new CRC follows from the old one and the
	 * change of the 64 first payload bytes, without a pass over the rest
	 * (the reader checked the input CRC; this saves a second pass).
	 */
	memcpy(old, pl, sizeof(old));
	ovl_doc_set_mixed(pl, source, pos, tokens);
	memcpy(nw, pl, sizeof(nw));
	for (i = 0; i < 8; i++)
		old[i] ^= nw[i];
	ovl_put32(hdr + 8, ovl_crc32c_patch(ovl_le32(hdr + 8), old,
	    sizeof(old), f->len - 64));
}

/* ---- inputs ------------------------------------------------------------- */

void
open_input(struct input *in, int fd)
{
	struct stat st;
	int fl;

	if (in->path == NULL)
		in->fd = STDIN_FILENO;
	else if (in->net != NULL && fd >= 0)
		in->fd = fd;
	else if (in->net != NULL) {
		in->fd = ovl_net_wait(in->net);
		if (in->fd < 0)
			ovl_err(OVL_EXIT_DATA, "input %s", in->label);
	} else {
		in->fd = open(in->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (in->fd < 0)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", in->path);
	}
	if (fstat(in->fd, &st) == 0 && S_ISFIFO(st.st_mode))
		in->is_fifo = 1;
	/*
	 * A FIFO opened without blocking reads end-of-file until its writer
	 * opens it: read it only once poll(2) has reported it (Linux reports
	 * nothing on a FIFO that has had no writer since it was opened).
	 */
	in->connected = !in->is_fifo || in->path == NULL;
	fl = fcntl(in->fd, F_GETFL);
	if (fl >= 0 && !(fl & O_NONBLOCK))
		(void)fcntl(in->fd, F_SETFL, fl | O_NONBLOCK);
	in->r = ovl_reader_new(in->fd, in->net != NULL ? ovl_net_name(in->net) :
	    in->path != NULL ? in->path : "-", 0);
	ovl_reader_expect(in->r, &(struct ovl_expect){
	    .meta_keys = "vocab eod", .kinds = 1u << OVL_DOC |
	    1u << OVL_CHUNK_END | 1u << OVL_IMAGE, .what = "a source stream",
	    .checks = OVL_EXPECT_DOC });
	/*
	 * Small reads: with many inputs, 1 MiB read ahead per input falls
	 * out of the cache before the CRC check and the copy touch it.
	 */
	ovl_reader_set_chunk(in->r, MIX_READ_CHUNK);
	in->need_meta = 1;
	in->has_pend = 0;
	in->deferred = 0;
	in->ended = 0;
}

/*
 * The writer of a FIFO input failed: wait for a new one on the same path
 * (on a tcp: endpoint, connect again or take the listener's next peer).
 * Documents it repeats are dropped by canonical position (see take_doc).
 */
static void
reopen_input(struct input *in)
{
	ovl_warnx("%s; waiting for a new writer on '%s'", ovl_reader_error(in->r),
	    in->path);
	ovl_reader_free(in->r);
	close(in->fd);
	in->reopens++;
	open_input(in, -1);
}

/* Check an input's META against the plan and the other inputs. */
static void
take_meta(struct mixer *m, struct input *in, const struct ovl_frame *f)
{
	struct source *s = &m->src[in->src];
	const char *text, *p, *end, *nl;
	uint32_t tl, pp, pn;
	char tok[256], val[256];
	uint64_t vocab = 0, eod = 0;

	/*
	 * The reader checked the grammar (META first, with vocab and eod
	 * below it): every input says what it is, a broken META is blamed on
	 * itself.
	 */
	(void)ovl_meta_decode(f, &text, &tl);
	if (!ovl_meta_value(text, tl, "tokenizer", tok, sizeof(tok)))
		strcpy(tok, "bytes");
	(void)ovl_reader_meta_u64(in->r, "vocab", &vocab);
	(void)ovl_reader_meta_u64(in->r, "eod", &eod);
	if (ovl_meta_value(text, tl, "source", val, sizeof(val))) {
		const char *sp = strchr(val, ' ');
		if (sp != NULL && strcmp(sp + 1, s->ps->name) != 0)
			ovl_errx(OVL_EXIT_USAGE, "'%s' carries source '%s', not "
			    "'%s'", in->label, sp + 1, s->ps->name);
	}
	{
		char key[OVL_PLAN_MAX_NAME + 32];
		snprintf(key, sizeof(key), "source.%s.partition", s->ps->name);
		if (ovl_meta_value(text, tl, key, val, sizeof(val)) &&
		    ovl_num_part(val, &pp, &pn) == 0 &&
		    (pp != in->part || pn != s->nparts))
			ovl_errx(OVL_EXIT_USAGE, "'%s' is partition %s, but is "
			    "given as partition %u/%u (inputs go in partition "
			    "order)", in->label, val, in->part, s->nparts);
	}
	{
		char key[OVL_PLAN_MAX_NAME + 32];
		uint64_t g = 1;

		snprintf(key, sizeof(key), "source.%s.chunk-group", s->ps->name);
		if (ovl_meta_value(text, tl, key, val, sizeof(val)) &&
		    ovl_num_u64(val, &g) != 0)
			g = 0;
		if (g != ovl_docshuf_group(&s->win))
			ovl_errx(OVL_EXIT_USAGE, "'%s' reads chunks in groups "
			    "of %s, the plan's shuffle-window= in groups of %u",
			    in->label, g == 1 ? "1" : val,
			    ovl_docshuf_group(&s->win));
	}
	if (!m->have_ref) {
		m->tokenizer = ovl_xstrdup(tok);
		m->vocab = vocab;
		m->eod = eod;
		m->ref_label = in->label;
		m->have_ref = 1;
	} else if (strcmp(tok, m->tokenizer) != 0 || vocab != m->vocab ||
	    eod != m->eod)
		ovl_errx(OVL_EXIT_USAGE, "'%s': tokenizer %s (vocab %" PRIu64
		    ", eod %" PRIu64 ") differs from '%s': %s (vocab %" PRIu64
		    ", eod %" PRIu64 ")", in->label, tok, vocab, eod,
		    m->ref_label, m->tokenizer, m->vocab, m->eod);
	/*
	 * Pass on the other keys of each source's first partition, once: at
	 * its first META, which may come from a second writer when the first
	 * died before sending one (so not "reopens == 0").
	 */
	if (!in->meta_seen && in->part == 0)
		s->run_id = ovl_step_run_token(text, tl, s->ps->name);
	if (in->part == 0 && !in->meta_seen) {
		for (p = text, end = text + tl; p < end; p = nl + 1) {
			nl = memchr(p, '\n', (size_t)(end - p));
			if (nl == NULL)
				nl = end;
			if (nl == p)
				continue;
			if ((nl - p > 10 && memcmp(p, "tokenizer ", 10) == 0) ||
			    (nl - p > 6 && memcmp(p, "vocab ", 6) == 0) ||
			    (nl - p > 4 && memcmp(p, "eod ", 4) == 0) ||
			    (nl - p > 7 && memcmp(p, "source ", 7) == 0) ||
			    memmem(p, (size_t)(nl - p), ".partition ", 11) != NULL)
				continue;
			ovl_buf_append(&s->meta, p, (size_t)(nl - p));
			ovl_buf_append(&s->meta, "\n", 1);
		}
	}
}


/*
 * Read the next frame of in without blocking. Returns 1 when in has a
 * pending frame (or has ended), 0 when it would block. An input read
 * ahead (not needed now) leaves a frame over MIX_AHEAD_MAX in its pipe
 * (in->deferred, not polled until needed): with many inputs, outliers read
 * ahead would otherwise be held at once, one per input.
 */
static int
try_read(struct mixer *m, struct input *in, int needed)
{
	int rc;

	for (;;) {
		if (in->has_pend || in->ended)
			return 1;
		if (!in->connected)
			return 0;
		ovl_reader_defer(in->r, needed ? 0 : MIX_AHEAD_MAX);
		in->deferred = 0;
		rc = ovl_reader_next(in->r, &in->pend);
		if (rc == OVL_RD_AGAIN)
			return 0;
		if (rc == OVL_RD_DEFER) {
			in->deferred = 1;
			return 0;
		}
		if (rc == OVL_RD_FRAME) {
			if (in->need_meta) {
				take_meta(m, in, &in->pend);
				in->need_meta = 0;
				in->meta_seen = 1;
				if (m->starting)
					return 1;
				continue;
			}
			in->has_pend = 1;
			return 1;
		}
		if (rc == OVL_RD_EOF)
			ovl_errx(OVL_EXIT_FRAME, "'%s': read after END",
			    in->label);
		if (rc == OVL_F_ETRUNC && m->o->reopen && (in->is_fifo ||
		    in->net != NULL) && in->path != NULL) {
			reopen_input(in);
			/*
			 * Say so at once: a supervisor hands the FIFO to a
			 * new writer only once we read from a new open file
			 * (else the old and new streams would run together).
			 */
			if (m->o->stats != NULL)
				write_stats(m, 0);
			continue;
		}
		ovl_errx(OVL_EXIT_FRAME, "input %s: %s%s", in->label,
		    ovl_reader_error(in->r), rc == OVL_F_ETRUNC ?
		    " (its writer failed)" : "");
	}
}

/*
 * Wait until need has a frame, reading ahead (one frame each) from the
 * other inputs meanwhile. The time goes to need's blocked counter.
 */
void
wait_for(struct mixer *m, struct input *need)
{
	size_t i, n;
	int rc, timeout;
	double t0;

	while (!try_read(m, need, 1)) {
		n = 0;
		for (i = 0; i < m->nin; i++) {
			struct input *in = &m->in[i];
			if (in->has_pend || in->ended || in->deferred)
				continue;
			m->pfd[n].fd = in->fd;
			m->pfd[n].events = POLLIN;
			m->pfd[n].revents = 0;
			m->pin[n++] = in;
		}
		timeout = m->o->stats != NULL ? 1000 : -1;
		/*
		 * Nothing to read now: what is mixed so far goes downstream
		 * before waiting, so a slow source never holds back documents
		 * already mixed (a live trainer waits for them).
		 */
		if (poll(m->pfd, n, 0) == 0 && m->w != NULL)
			ovl_writer_flush(m->w);
		t0 = now_s();
		rc = poll(m->pfd, n, timeout);
		need->blocked += now_s() - t0;
		if (rc < 0 && errno != EINTR)
			ovl_err(OVL_EXIT_DATA, "poll");
		for (i = 0; rc > 0 && i < n; i++) {
			if (m->pfd[i].revents != 0)
				m->pin[i]->connected = 1;
			if (m->pfd[i].revents != 0 && m->pin[i] != need)
				(void)try_read(m, m->pin[i], 0);
		}
		if (m->o->stats != NULL && ovl_io_since(&m->last_stats) >= 1.0)
			write_stats(m, 0);
	}
}

/* ---- targets and selection ------------------------------------------- */

uint64_t
count_of(const struct mixer *m)
{
	uint64_t docs = m->pos;

	return m->by == OVL_MIXBY_DOCS ? docs : m->tokens;
}

uint64_t
consumed(const struct mixer *m, const struct source *s)
{
	return m->by == OVL_MIXBY_DOCS ? s->docs : s->tokens;
}

/* Each source's target at the current count into m->target. */
void
targets(struct mixer *m)
{
	size_t i;
	uint64_t T = count_of(m);

	if (!m->any_drop) {
		ovl_plan_target(m->plan, T, m->target, NULL);
		return;
	}
	for (i = 0; i < m->nsrc; i++)
		m->target[i] = m->src[i].base;
	ovl_plan_target_active(m->plan, m->drop_at, T, m->active, m->target);
}

/*
 * The source furthest below its target among those that may be chosen:
 * weight now above zero, or behind their target. Ties go to plan order.
 * Returns -1 when no active source has weight left.
 */
int
select_source(struct mixer *m)
{
	size_t i;
	int best = -1;
	double d, bestd = 0;

	targets(m);
	ovl_plan_weights_at(m->plan, count_of(m), m->w8);
	for (i = 0; i < m->nsrc; i++) {
		if (!m->active[i])
			continue;
		d = m->target[i] - (double)consumed(m, &m->src[i]);
		if (!(m->w8[i] > 0) && !(d > 0))
			continue;
		if (best < 0 || d > bestd) {
			best = (int)i;
			bestd = d;
		}
	}
	return best;
}

/* Source s ran out under on-exhaust=drop: share its deficit and go on. */
void
drop_source(struct mixer *m, size_t k)
{
	struct source *s = &m->src[k];
	size_t i, nact = 0;
	double excess, sum = 0;

	targets(m);
	ovl_plan_weights_at(m->plan, count_of(m), m->w8);
	excess = m->target[k] - (double)consumed(m, s);
	m->active[k] = 0;
	s->state = ST_DROPPED;
	for (i = 0; i < m->nsrc; i++)
		if (m->active[i]) {
			nact++;
			sum += m->w8[i];
		}
	for (i = 0; i < m->nsrc; i++) {
		if (m->active[i])
			m->src[i].base = m->target[i] + excess * (sum > 0 ?
			    m->w8[i] / sum : 1.0 / (double)nact);
		else if (i == k)
			m->src[i].base = (double)consumed(m, s);
		else
			m->src[i].base = m->target[i];
	}
	m->drop_at = count_of(m);
	m->any_drop = 1;
	ovl_info(1, "source '%s' exhausted after %" PRIu64 " tokens; dropped",
	    s->ps->name, s->tokens);
}

/* ---- reading a source in canonical order ------------------------------- */

static int
chunk_before(uint32_t e1, uint32_t c1, uint32_t e2, uint32_t c2)
{
	return e1 < e2 || (e1 == e2 && c1 < c2);
}

static void
next_chunk(struct source *s, uint32_t nchunks)
{
	s->nchunks = nchunks;
	s->cur.chunk++;
	if (nchunks == 0 || s->cur.chunk >= nchunks) {
		s->cur.epoch++;
		s->cur.chunk = 0;
	}
	s->cur.off = 0;
	s->cur.rec = 0;
}

/*
 * The document pending on in has n IMAGE frames after it: copy it and
 * them (in->hold, in->himg, in->hruns), so the cutter knows where every
 * run begins and ends before it cuts, and make the copy the pending
 * frame again (*d viewing it). A writer restarted meanwhile (--reopen)
 * sends the document again and all its images: the repeat of the
 * document and of the images already taken are dropped.
 */
static void
take_images(struct mixer *m, struct input *in, struct ovl_doc *d, uint32_t n)
{
	const struct ovl_frame *f = &in->pend;
	struct ovl_image im;
	struct ovl_doc r;
	uint32_t ep = d->epoch, ch = d->chunk, k = 0;
	uint64_t rec = d->record;

	in->hold.len = 0;
	ovl_buf_append(&in->hold, f->payload - OVL_FRAME_HDR_LEN, f->size);
	in->himg.len = 0;
	in->hruns.len = 0;
	in->has_pend = 0;
	while (k < n) {
		if (!in->has_pend && !in->ended)
			wait_for(m, in);
		if (in->ended || f->kind == OVL_END)
			ovl_errx(OVL_EXIT_FRAME, "'%s': the stream ends inside "
			    "the images of record %" PRIu64 " of chunk %" PRIu32
			    ":%" PRIu32, in->label, rec, ep, ch);
		in->has_pend = 0;
		if (f->kind == OVL_DOC && ovl_doc_decode(f, &r) == OVL_F_OK &&
		    r.epoch == ep && r.chunk == ch && r.record == rec) {
			in->dups++;	/* a restarted writer's repeat */
			continue;
		}
		if (f->kind != OVL_IMAGE || ovl_image_decode(f, &im) != OVL_F_OK)
			ovl_errx(OVL_EXIT_FRAME, "'%s': %s frame at byte offset %"
			    PRIu64 " where image %" PRIu32 " of %" PRIu32 " of "
			    "record %" PRIu64 " was due", in->label,
			    ovl_kind_name(f->kind), ovl_reader_offset(in->r), k,
			    n, rec);
		if (im.index < k)
			continue;	/* taken before the restart */
		ovl_buf_append(&in->himg, f->payload - OVL_FRAME_HDR_LEN,
		    f->size);
		ovl_u32vec_push(&in->hruns, im.doc_pos);
		ovl_u32vec_push(&in->hruns, im.ntokens);
		k++;
	}
	in->hn = n;
	in->pend.kind = OVL_DOC;
	in->pend.flags = in->hold.p[5];
	in->pend.len = (uint32_t)(in->hold.len - OVL_FRAME_HDR_LEN);
	in->pend.payload = in->hold.p + OVL_FRAME_HDR_LEN;
	in->pend.size = in->hold.len;
	in->has_pend = 1;
	(void)ovl_doc_decode(&in->pend, d);	/* decoded before, from these bytes */
}

/*
 * Make the pending frame of the right partition of s its next document.
 * Returns that input, or NULL when the source has ended.
 */
struct input *
take_doc(struct mixer *m, struct source *s, struct ovl_doc *d)
{
	struct input *in;
	struct ovl_chunk_end ce;
	char a[OVL_CURSOR_STRLEN];

	for (;;) {
		in = s->in[ovl_docshuf_part(&s->win, s->cur.chunk,
		    s->nparts)];
		if (!in->has_pend && !in->ended)
			wait_for(m, in);
		if (in->ended)
			return NULL;
		switch (in->pend.kind) {
		case OVL_END:
			in->ended = 1;
			in->has_pend = 0;
			return NULL;
		case OVL_CHUNK_END:
			if (ovl_chunk_end_decode(&in->pend, &ce) != OVL_F_OK)
				ovl_errx(OVL_EXIT_FRAME, "'%s': malformed "
				    "CHUNK_END at byte offset %" PRIu64,
				    in->label, ovl_reader_offset(in->r));
			in->has_pend = 0;
			if (chunk_before(ce.epoch, ce.chunk, s->cur.epoch,
			    s->cur.chunk)) {
				in->dups++;
				continue;
			}
			if (ce.epoch != s->cur.epoch || ce.chunk != s->cur.chunk)
				ovl_errx(OVL_EXIT_FRAME, "'%s': chunk %" PRIu32
				    ":%" PRIu32 " ends where chunk %s was "
				    "expected (partitions out of order?)",
				    in->label, ce.epoch, ce.chunk,
				    ovl_cursor_format(&s->cur, a));
			next_chunk(s, ce.nchunks);
			if (++s->empty_run > (uint64_t)ce.nchunks + 1 &&
			    s->ps->on_exhaust == OVL_EXHAUST_REPEAT)
				ovl_errx(OVL_EXIT_DATA, "source '%s' yields no "
				    "document in a whole epoch", s->ps->name);
			continue;
		case OVL_DOC:
			if (ovl_doc_decode(&in->pend, d) != OVL_F_OK)
				ovl_errx(OVL_EXIT_FRAME, "'%s': malformed DOC "
				    "at byte offset %" PRIu64, in->label,
				    ovl_reader_offset(in->r));
			if (chunk_before(d->epoch, d->chunk, s->cur.epoch,
			    s->cur.chunk) || (d->epoch == s->cur.epoch &&
			    d->chunk == s->cur.chunk && d->record < s->cur.rec)) {
				/* already consumed: a restarted writer */
				in->dups++;
				in->has_pend = 0;
				continue;
			}
			if (d->epoch != s->cur.epoch || d->chunk != s->cur.chunk)
				ovl_errx(OVL_EXIT_FRAME, "'%s': a document of "
				    "chunk %" PRIu32 ":%" PRIu32 " where chunk %s "
				    "was expected (partitions out of order?)",
				    in->label, d->epoch, d->chunk,
				    ovl_cursor_format(&s->cur, a));
			if (d->nchunks != 0)
				s->nchunks = d->nchunks;
			if ((d->flags & OVL_DOC_IMAGES) && d->nimages > 0 &&
			    in->hn == 0)
				take_images(m, in, d, d->nimages);
			return in;
		case OVL_IMAGE:
			/*
			 * An image of a document not mixed (consumed before,
			 * or dropped as too long): its DOC went, so does it.
			 */
			in->has_pend = 0;
			continue;
		default:	/* the reader lets DOC, CHUNK_END, END, IMAGE through */
			abort();
		}
	}
}

