/*
 * ovl-mix: the mixed stream (META, DOC, BARRIER and STATE), statistics
 * and resuming from a STATE. See mix.h.
 */
#include "mix.h"

/* ---- output -------------------------------------------------------------- */

void
write_meta(struct mixer *m)
{
	struct ovl_buf b = { NULL, 0, 0 };
	char line[256], *sl;
	size_t i;
	int n;

	n = snprintf(line, sizeof(line), "tokenizer %s\nvocab %" PRIu64
	    "\neod %" PRIu64 "\n", m->tokenizer, m->vocab, m->eod);
	ovl_buf_append(&b, line, (size_t)n);
	for (i = 0; i < m->nsrc; i++) {
		n = snprintf(line, sizeof(line), "source %zu %s\n", i,
		    m->src[i].ps->name);
		ovl_buf_append(&b, line, (size_t)n);
	}
	for (i = 0; i < m->nsrc; i++)
		ovl_buf_append(&b, m->src[i].meta.p, m->src[i].meta.len);
	n = snprintf(line, sizeof(line), "mix-by %s\ncheckpoint-every %" PRIu64
	    "\nranks %u\nmicro-batches %u\n",
	    m->by == OVL_MIXBY_DOCS ? "docs" : "tokens", m->every,
	    m->plan->ranks, m->plan->micro_batches);
	ovl_buf_append(&b, line, (size_t)n);
	/* what the steps are cut with: ovl-construct must cut the same */
	sl = ovl_stepcfg_text(&m->cfg);
	ovl_buf_append(&b, "seq-len ", 8);
	ovl_buf_append(&b, sl, strlen(sl));
	ovl_buf_append(&b, "\n", 1);
	free(sl);
	if (m->plan->step_tokens > 0) {
		n = snprintf(line, sizeof(line), "step-tokens %" PRIu64 "\n",
		    m->plan->step_tokens);
		ovl_buf_append(&b, line, (size_t)n);
	}
	if (m->o->resume != NULL) {	/* right after BARRIER n (relink.h) */
		n = snprintf(line, sizeof(line), "resumed %" PRIu64 "\n",
		    m->last_n);
		ovl_buf_append(&b, line, (size_t)n);
	}
	if (m->o->json) {
		fputs("{\"kind\":\"meta\",\"text\":", stdout);
		ovl_json_string(stdout, (const char *)b.p, b.len);
		fputs("}\n", stdout);
	} else {
		uint8_t *p = ovl_writer_begin(m->w,
		    ovl_meta_payload_len((uint32_t)b.len));
		ovl_meta_encode(p, (const char *)b.p, (uint32_t)b.len);
		ovl_writer_finish(m->w, OVL_META, 0);
	}
	ovl_buf_free(&b);
}

/* The mixer's state before the document it is about to select. */
static void
state_text(struct mixer *m, uint64_t n, struct ovl_buf *b)
{
	char line[512], c[OVL_CURSOR_STRLEN];
	size_t i;
	int k;
	static const char *const names[] = { "active", "dropped", "exhausted" };

	b->len = 0;
#define PUT(...) do {							\
	k = snprintf(line, sizeof(line), __VA_ARGS__);			\
	ovl_buf_append(b, line, (size_t)k);				\
} while (0)
	PUT("version 1\n");
	PUT("checkpoint %" PRIu64 "\n", n);
	PUT("sources %zu\n", m->nsrc);
	PUT("mix-by %s\n", m->by == OVL_MIXBY_DOCS ? "docs" : "tokens");
	if (m->plan->split != NULL)
		PUT("split %s %s %" PRIu64 "\n",
		    ovl_split_names[m->plan->split_use], m->plan->split,
		    m->plan->has_seed ? m->plan->seed : 0);
	PUT("pos %" PRIu64 "\n", m->pos);
	PUT("tokens %" PRIu64 "\n", m->tokens);
	PUT("step %" PRIu64 "\n", m->cut.step);
	PUT("step.start %" PRIu64 "\n", m->cut.start);
	PUT("step.used %" PRIu64 "\n", m->cut.used);
	if (m->any_drop)
		PUT("drop.at %" PRIu64 "\n", m->drop_at);
	for (i = 0; i < m->nsrc; i++) {
		const struct source *s = &m->src[i];
		const char *nm = s->ps->name;

		PUT("source.%s.cursor %s\n", nm, ovl_cursor_format(&s->cur, c));
		PUT("source.%s.partitions %u\n", nm, s->nparts);
		PUT("source.%s.tokens %" PRIu64 "\n", nm, s->tokens);
		PUT("source.%s.docs %" PRIu64 "\n", nm, s->docs);
		PUT("source.%s.nchunks %u\n", nm, s->nchunks);
		PUT("source.%s.state %s\n", nm, names[s->state]);
		if (s->long_img[0] + s->long_img[1] > 0)
			PUT("source.%s.long %" PRIu64 " %" PRIu64 " %" PRIu64
			    " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", nm,
			    s->long_n[0], s->long_n[1], s->long_n[2],
			    s->long_cut, s->long_img[0], s->long_img[1]);
		else if (s->long_n[0] + s->long_n[1] + s->long_n[2] > 0)
			PUT("source.%s.long %" PRIu64 " %" PRIu64 " %" PRIu64
			    " %" PRIu64 "\n", nm, s->long_n[0], s->long_n[1],
			    s->long_n[2], s->long_cut);
		if (m->any_drop)
			PUT("source.%s.base %a\n", nm, s->base);
	}
#undef PUT
}

static void
emit_barrier(struct mixer *m, const struct barrier_at *ba, struct ovl_buf *st)
{
	struct ovl_barrier b;
	struct ovl_state s;
	uint8_t *p;

	state_text(m, ba->n, st);
	b.n = ba->n;
	b.step = ba->step;
	b.mix_pos = m->pos;
	b.tokens = ba->tokens;
	b.offset = ba->offset;
	if (m->o->json) {
		printf("{\"kind\":\"state\",\"stage\":\"mix\",\"n\":%" PRIu64
		    ",\"text\":", ba->n);
		ovl_json_string(stdout, (const char *)st->p, st->len);
		printf("}\n{\"kind\":\"barrier\",\"n\":%" PRIu64 ",\"step\":%"
		    PRIu64 ",\"pos\":%" PRIu64 ",\"tokens\":%" PRIu64
		    ",\"offset\":%" PRIu32 "}\n", b.n, b.step, b.mix_pos,
		    b.tokens, b.offset);
	} else {
		s.stage = OVL_STAGE_MIX;
		s.n = ba->n;
		s.text = (const char *)st->p;
		s.text_len = (uint32_t)st->len;
		p = ovl_writer_begin(m->w, ovl_state_payload_len(s.text_len));
		ovl_state_encode(p, &s);
		ovl_writer_finish(m->w, OVL_STATE, 0);
		p = ovl_writer_begin(m->w, OVL_BARRIER_LEN);
		ovl_barrier_encode(p, &b);
		ovl_writer_finish(m->w, OVL_BARRIER, 0);
	}
	m->last_n = ba->n;
}

static void
emit_json_doc(struct mixer *m, const struct ovl_doc *d, uint32_t sid)
{
	struct ovl_cursor c;
	char cb[OVL_CURSOR_STRLEN];

	ovl_doc_cursor(d, &c);
	fputs("{\"kind\":\"doc\",\"source\":", stdout);
	ovl_json_string(stdout, m->src[sid].ps->name,
	    strlen(m->src[sid].ps->name));
	printf(",\"id\":%" PRIu32 ",\"mix_pos\":%" PRIu64 ",\"mix_tokens\":%"
	    PRIu64 ",\"pos\":[%" PRIu32 ",%" PRIu32 ",%" PRIu64 "],\"cursor\":"
	    "\"%s\",\"nimages\":%" PRIu32 ",\"ntokens\":%" PRIu32
	    ",\"tokens\":", sid, m->pos, m->tokens, d->epoch, d->chunk,
	    d->record, ovl_cursor_format(&c, cb), d->nimages, d->ntokens);
	ovl_json_ids(stdout, d->tokens, d->width, d->ntokens);
	if (d->flags & OVL_DOC_TEXT) {
		fputs(",\"text\":", stdout);
		ovl_json_string(stdout, d->text, d->text_len);
	}
	fputs("}\n", stdout);
	ovl_io_check_stdout();
}

static void
emit_json_image(const struct ovl_image *im)
{
	printf("{\"kind\":\"image\",\"index\":%" PRIu32 ",\"doc_pos\":%"
	    PRIu32 ",\"ntokens\":%" PRIu32 ",\"width\":%" PRIu32
	    ",\"height\":%" PRIu32 ",\"format\":%" PRIu32 ",\"ref\":%s,"
	    "\"offset\":%" PRIu64 ",\"length\":%" PRIu64 ",\"member\":",
	    im->index, im->doc_pos, im->ntokens, im->width, im->height,
	    im->format, im->flags == OVL_IMAGE_REF ? "true" : "false",
	    im->offset, im->length);
	ovl_json_string(stdout, im->name, im->name_len);
	fputs("}\n", stdout);
	ovl_io_check_stdout();
}

/* The IMAGE frames held with the document just emitted, after it. */
static void
pass_images(struct mixer *m, struct input *in)
{
	struct ovl_frame f;
	struct ovl_image im;
	size_t at = 0;
	uint32_t k;

	for (k = 0; k < in->hn; k++) {
		const uint8_t *h = in->himg.p + at;

		f.len = ovl_le32(h);
		f.kind = h[4];
		f.flags = h[5];
		f.payload = h + OVL_FRAME_HDR_LEN;
		f.size = OVL_FRAME_HDR_LEN + (size_t)f.len;
		if (m->o->json) {
			(void)ovl_image_decode(&f, &im);	/* checked */
			emit_json_image(&im);
		} else
			ovl_writer_copy(m->w, &f);
		at += f.size;
	}
}

/*
 * The first image of the document held on in whose run is longer than
 * seq_len (no sequence holds it whole), or UINT32_MAX; how many are
 * into *n.
 */
static uint32_t
long_image(const struct input *in, uint32_t seq_len, uint32_t *n)
{
	uint32_t k, first = UINT32_MAX;

	*n = 0;
	for (k = 0; k < in->hn; k++)
		if (in->hruns.p[2 * k + 1] > seq_len) {
			if (first == UINT32_MAX)
				first = k;
			(*n)++;
		}
	return first;
}

/*
 * long-docs=truncate: the tokens of document d kept (its first ntok - 1
 * and its end token), seq_len at most; never inside an image's run: a
 * run the cut would fall in goes whole. The images left out (their runs
 * not whole in what is kept; ovl-construct drops their IMAGE frames)
 * into *lost.
 */
static uint32_t
truncate_at(const struct source *s, const struct input *in,
    const struct ovl_doc *d, uint32_t seq_len, uint32_t *lost)
{
	uint32_t ntok = seq_len, k, a, e;

	*lost = 0;
	if (in->hn > 0) {
		for (k = 0; k < in->hn; k++) {
			a = in->hruns.p[2 * k];
			e = a + in->hruns.p[2 * k + 1];
			if (a < ntok - 1 && e > ntok - 1)
				ntok = a + 1;
		}
		for (k = 0; k < in->hn; k++)
			if (in->hruns.p[2 * k] + in->hruns.p[2 * k + 1] >
			    ntok - 1)
				(*lost)++;
		return ntok;
	}
	if (s->run_id == OVL_STEP_NORUN)
		return ntok;
	/* placeholders without IMAGE frames: the runs by their tokens */
#define TOK(i)	ovl_tok_at(d->tokens, d->width, (i))
	if (ntok >= 2 && TOK(ntok - 2) == s->run_id &&
	    TOK(ntok - 1) == s->run_id) {
		for (a = ntok - 2; a > 0 && TOK(a - 1) == s->run_id; a--)
			;
		ntok = a + 1;
	}
	for (k = ntok - 1; k < d->ntokens; k++)
		if (TOK(k) == s->run_id && (k == ntok - 1 ||
		    TOK(k - 1) != s->run_id))
			(*lost)++;
#undef TOK
	return ntok;
}

/*
 * Emit the document pending on in (source k) at the next mixed position,
 * preceded by the checkpoints the step cutter opens inside it. Returns 0
 * when the plan's stop steps= falls before it (nothing emitted), 2 when
 * it falls inside it (emitted, the stream ends after it), 1 otherwise.
 */
int
emit_doc(struct mixer *m, size_t k, struct input *in, const struct ovl_doc *d,
    struct ovl_buf *st)
{
	struct source *s = &m->src[k];
	struct ovl_stepcut c2 = m->cut;
	uint64_t left, off = 0, stop = m->plan->stop_steps;
	uint32_t plen, ntok = d->ntokens, nbig = 0, nlost = 0;
	size_t nb = 0, i;
	int opened, stopped = 0, longk = -1;
	/* the runs of its images, when its IMAGE frames came with it */
	const uint32_t *runs = in->hn > 0 ? in->hruns.p : NULL;

	/* the sequence length of the step the document starts in */
	(void)ovl_stepcut_next(&c2, d->ntokens, &opened);
	if (d->ntokens > c2.seq_len && c2.seq_len > 0) {
		char cb[OVL_CURSOR_STRLEN];
		struct ovl_cursor cur;

		uint32_t big = long_image(in, c2.seq_len, &nbig);

		switch (s->long_policy) {
		case OVL_LONG_ERROR:
			ovl_doc_cursor(d, &cur);
			if (big != UINT32_MAX)
				ovl_errx(OVL_EXIT_DATA, "source '%s': record %"
				    PRIu64 " of chunk %u, epoch %u (just before "
				    "cursor %s): its image %u is a run of %u "
				    "tokens, longer than seq-len %u "
				    "(long-docs=error)", s->ps->name, d->record,
				    d->chunk, d->epoch, ovl_cursor_format(&cur,
				    cb), big, in->hruns.p[2 * big + 1],
				    c2.seq_len);
			ovl_errx(OVL_EXIT_DATA, "source '%s': record %" PRIu64
			    " of chunk %u, epoch %u (just before cursor %s) has "
			    "%u tokens, longer than seq-len %u (long-docs=error)",
			    s->ps->name, d->record, d->chunk, d->epoch,
			    ovl_cursor_format(&cur, cb), d->ntokens, c2.seq_len);
		case OVL_LONG_DROP:
			/* consumed, never mixed: the cursor moves past it */
			if (stop != 0 && m->cut.step >= stop)
				return 0;
			s->long_n[2]++;
			s->long_cut += d->ntokens;
			s->long_img[1] += in->hn;
			in->has_pend = 0;
			in->hn = 0;	/* its images go with it */
			ovl_doc_cursor(d, &s->cur);
			return 1;
		case OVL_LONG_TRUNCATE:
			longk = 1;
			ntok = truncate_at(s, in, d, c2.seq_len, &nlost);
			break;
		default:
			longk = 0;
			if (nbig > 0 && s->long_img[0] == 0)
				ovl_warnx("source '%s': record %" PRIu64 " of "
				    "chunk %u, epoch %u: image %u is a run of %u "
				    "tokens, longer than seq-len %u: split "
				    "across sequences, its IMAGE frame with the "
				    "first (long-docs=split; counted; 'drop' or "
				    "'error' refuses such images)", s->ps->name,
				    d->record, d->chunk, d->epoch, big,
				    in->hruns.p[2 * big + 1], c2.seq_len);
			break;
		}
	}
	c2 = m->cut;
	left = ntok;
	while (left > 0) {
		/* an image's placeholders stay in one piece (step.h) */
		plen = ovl_stepcut_next_bounds(&c2, left,
		    ovl_tok_from(d->tokens, d->width, off), d->width,
		    s->run_id, off, runs, in->hn, &opened);
		if (opened && stop != 0 && c2.step >= stop && !stopped) {
			if (off == 0)
				return 0;
			stopped = 1;
		}
		if (opened && !stopped && m->every != 0 &&
		    c2.step % m->every == 0 && c2.step / m->every > m->last_n) {
			if (nb == m->capbars) {
				m->capbars = m->capbars ? m->capbars * 2 : 8;
				m->bars = ovl_xrealloc(m->bars,
				    m->capbars * sizeof(*m->bars));
			}
			m->bars[nb].n = c2.step / m->every;
			m->bars[nb].step = c2.step;
			/* the cutter's count: padding that keeps runs whole too */
			m->bars[nb].tokens = c2.start;
			m->bars[nb].offset = (uint32_t)off;
			nb++;
		}
		left -= plen;
		off += plen;
	}
	for (i = 0; i < nb; i++)
		emit_barrier(m, &m->bars[i], st);
	/* counted with the document, after the checkpoints before it */
	if (longk >= 0) {
		s->long_n[longk]++;
		s->long_cut += d->ntokens - ntok;
		s->long_img[0] += longk == 0 ? nbig : 0;
		s->long_img[1] += nlost;
	}
	if (ntok < d->ntokens) {
		/* truncated: its first ntok - 1 tokens and its end token */
		struct ovl_doc d2 = *d;

		d2.ntokens = ntok;
		uint32_t last = ovl_tok_at(d->tokens, d->width,
		    d->ntokens - 1);

		if (m->o->json) {
			uint32_t *t = ovl_u32vec_reserve(&m->trunc, ntok);
			(void)ovl_tok_copy(t, 4, d->tokens, d->width, ntok);
			t[ntok - 1] = last;
			d2.tokens = t;
			d2.width = 4;
			emit_json_doc(m, &d2, (uint32_t)k);
		} else {
			/* in the width it came in */
			uint8_t *p = ovl_writer_begin(m->w,
			    ovl_doc_payload_len(ntok, d->text_len, d->width));

			ovl_doc_encode(p, &d2);
			if (d->width == 2)
				memcpy(p + OVL_DOC_FIXED + (ntok - 1) * 2,
				    &(uint16_t){ (uint16_t)last }, 2);
			else
				ovl_put32(p + OVL_DOC_FIXED + (ntok - 1) * 4,
				    last);
			ovl_doc_set_mixed(p, (uint32_t)k, m->pos, m->tokens);
			ovl_writer_finish(m->w, OVL_DOC,
			    ovl_width_flags(d->width));
		}
	} else if (m->o->json)
		emit_json_doc(m, d, (uint32_t)k);
	else {
		/* rewritten in the reader's buffer, then passed through */
		doc_rewrite(&in->pend, (uint32_t)k, m->pos, m->tokens);
		ovl_writer_copy(m->w, &in->pend);
	}
	in->has_pend = 0;
	m->cut = c2;
	m->pos++;
	m->tokens += ntok;
	s->tokens += ntok;
	s->docs++;
	s->empty_run = 0;
	in->tokens += ntok;
	in->docs++;
	ovl_doc_cursor(d, &s->cur);
	/* its images follow it */
	if (in->hn > 0) {
		pass_images(m, in);
		in->hn = 0;
		in->hold.len = in->himg.len = 0;
		ovl_buf_trim(&in->hold, 1u << 20);
		ovl_buf_trim(&in->himg, 1u << 20);
	}
	/* an outlier's buffer goes now: this input may wait long */
	ovl_reader_done(in->r);
	return stopped ? 2 : 1;
}

/* ---- statistics ------------------------------------------------------- */

/*
 * The statistics as flat "key value" lines, for a shell's `read`: the
 * figures a supervisor needs, already computed (integers, or text only
 * shown). Keys: final, elapsed_ms, pos, tokens, step, checkpoint, by,
 * sources (count), split and split_weights (the run's held-out split
 * and the plan's weights; in a plan with a split only), then per
 * source NAME: source.NAME.state, .tokens, .docs,
 * .tok_per_s, .share_pct and .target_pct (one decimal, for people),
 * .blocked_ms, .cursor, .partitions, and per partition P:
 * source.NAME.input.P.reopens, .blocked_ms, .ended. ovl-mix(1) lists them.
 */
static void
stats_kv(struct mixer *m, FILE *fp, int final, double T)
{
	static const char *const st[] = { "active", "dropped", "exhausted" };
	char c[OVL_CURSOR_STRLEN];
	double t = ovl_io_since(&m->t0), blocked;
	size_t i, j;

	fprintf(fp, "final %d\nelapsed_ms %" PRIu64 "\npos %" PRIu64
	    "\ntokens %" PRIu64 "\nstep %" PRIu64 "\ncheckpoint %" PRIu64
	    "\nby %s\nsources %zu\n", final, (uint64_t)(t * 1000), m->pos,
	    m->tokens, m->cut.step, m->last_n, m->by == OVL_MIXBY_DOCS ?
	    "docs" : "tokens", m->nsrc);
	if (m->plan->split != NULL)
		fprintf(fp, "split %s\nsplit_weights %s\n",
		    ovl_split_names[m->plan->split_use], m->plan->split);
	for (i = 0; i < m->nsrc; i++) {
		const struct source *s = &m->src[i];
		const char *n = s->ps->name;

		for (blocked = 0, j = 0; j < s->nparts; j++)
			blocked += s->in[j]->blocked;
		fprintf(fp, "source.%s.state %s\nsource.%s.tokens %" PRIu64
		    "\nsource.%s.docs %" PRIu64 "\nsource.%s.tok_per_s %" PRIu64
		    "\nsource.%s.share_pct %.1f\nsource.%s.target_pct %.1f\n"
		    "source.%s.blocked_ms %" PRIu64 "\nsource.%s.cursor %s\n"
		    "source.%s.partitions %u\n", n, st[s->state], n, s->tokens,
		    n, s->docs, n, t > 0 ? (uint64_t)((double)s->tokens / t) : 0,
		    n, T > 0 ? 100.0 * (double)consumed(m, s) / T : 0.0, n,
		    100.0 * (T > 0 ? m->target[i] / T : m->w8[i]), n,
		    (uint64_t)(blocked * 1000), n, ovl_cursor_format(&s->cur, c),
		    n, s->nparts);
		fprintf(fp, "source.%s.long_split %" PRIu64 "\nsource.%s."
		    "long_truncated %" PRIu64 "\nsource.%s.long_dropped %" PRIu64
		    "\nsource.%s.long_cut_tokens %" PRIu64 "\n", n, s->long_n[0],
		    n, s->long_n[1], n, s->long_n[2], n, s->long_cut);
		fprintf(fp, "source.%s.long_images_split %" PRIu64 "\n"
		    "source.%s.long_images_left_out %" PRIu64 "\n", n,
		    s->long_img[0], n, s->long_img[1]);
		for (j = 0; j < s->nparts; j++) {
			const struct input *in = s->in[j];

			fprintf(fp, "source.%s.input.%u.reopens %" PRIu64 "\n"
			    "source.%s.input.%u.blocked_ms %" PRIu64 "\n"
			    "source.%s.input.%u.ended %d\n", n, in->part,
			    in->reopens, n, in->part,
			    (uint64_t)(in->blocked * 1000), n, in->part,
			    in->ended);
		}
	}
}

void
write_stats(struct mixer *m, int final)
{
	char *text = NULL;
	size_t len = 0, i, j;
	FILE *fp;
	double T;

	clock_gettime(CLOCK_MONOTONIC, &m->last_stats);
	if (m->o->stats == NULL)
		return;
	targets(m);
	ovl_plan_weights_at(m->plan, count_of(m), m->w8);
	T = (double)count_of(m);
	fp = open_memstream(&text, &len);
	if (fp == NULL)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	if (m->o->stats_kv) {
		stats_kv(m, fp, final, T);
		goto done;
	}
	fprintf(fp, "{\"final\":%s,\"elapsed_s\":%.3f,\"pos\":%" PRIu64
	    ",\"tokens\":%" PRIu64 ",\"step\":%" PRIu64 ",\"checkpoint\":%"
	    PRIu64 ",\"by\":\"%s\",\"sources\":[", final ? "true" : "false",
	    ovl_io_since(&m->t0), m->pos, m->tokens, m->cut.step, m->last_n,
	    m->by == OVL_MIXBY_DOCS ? "docs" : "tokens");
	for (i = 0; i < m->nsrc; i++) {
		const struct source *s = &m->src[i];
		static const char *const st[] = { "active", "dropped",
		    "exhausted" };
		double blocked = 0;

		for (j = 0; j < s->nparts; j++)
			blocked += s->in[j]->blocked;
		fprintf(fp, "%s{\"name\":", i ? "," : "");
		ovl_json_string(fp, s->ps->name, strlen(s->ps->name));
		fprintf(fp, ",\"state\":\"%s\",\"tokens\":%" PRIu64 ",\"docs\":%"
		    PRIu64 ",\"share\":%.6f,\"target_share\":%.6f,\"target\":"
		    "%.1f,\"weight\":%.6f,\"blocked_s\":%.3f,\"cursor\":\"",
		    st[s->state], s->tokens, s->docs,
		    T > 0 ? (double)consumed(m, s) / T : 0.0,
		    T > 0 ? m->target[i] / T : m->w8[i], m->target[i],
		    m->w8[i], blocked);
		{
			char c[OVL_CURSOR_STRLEN];
			fprintf(fp, "%s\",\"inputs\":[", ovl_cursor_format(
			    &s->cur, c));
		}
		for (j = 0; j < s->nparts; j++) {
			const struct input *in = s->in[j];

			fprintf(fp, "%s{\"partition\":%u,\"path\":", j ? "," : "",
			    in->part);
			ovl_json_string(fp, in->path != NULL ? in->path : "-",
			    strlen(in->path != NULL ? in->path : "-"));
			fprintf(fp, ",\"tokens\":%" PRIu64 ",\"docs\":%" PRIu64
			    ",\"blocked_s\":%.3f,\"duplicates\":%" PRIu64
			    ",\"reopens\":%" PRIu64 ",\"ended\":%s}", in->tokens,
			    in->docs, in->blocked, in->dups, in->reopens,
			    in->ended ? "true" : "false");
		}
		fputs("]}", fp);
	}
	fputs("]}\n", fp);
done:
	if (fclose(fp) != 0)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	if (ovl_atomic_write(m->o->stats, text, len) != 0)
		ovl_warn("cannot write '%s'", m->o->stats);
	free(text);
}

void
report(struct mixer *m)
{
	size_t i;
	double T = (double)count_of(m);

	if (ovl_verbose < 1)
		return;
	targets(m);
	for (i = 0; i < m->nin; i++) {
		const struct input *in = &m->in[i];
		ovl_info(1, "input %s: %" PRIu64 " docs, %" PRIu64 " tokens, "
		    "blocked %.3f s, %" PRIu64 " duplicates dropped, %" PRIu64
		    " reopens", in->label, in->docs, in->tokens, in->blocked,
		    in->dups, in->reopens);
	}
	for (i = 0; i < m->nsrc; i++) {
		const struct source *s = &m->src[i];
		ovl_info(1, "source %s: %" PRIu64 " docs, %" PRIu64 " tokens, "
		    "share %.4f, target %.4f", s->ps->name, s->docs, s->tokens,
		    T > 0 ? (double)consumed(m, s) / T : 0.0,
		    T > 0 ? m->target[i] / T : 0.0);
	}
	ovl_info(1, "%" PRIu64 " documents, %" PRIu64 " tokens, %" PRIu64
	    " steps begun, last checkpoint %" PRIu64 "; %s", m->pos, m->tokens,
	    m->cut.step, m->last_n, m->end_reason);
}

/* ---- resume ---------------------------------------------------------- */

/*
 * The state's held-out split (val: "NAME WEIGHTS SEED", or NULL when it
 * has none) must be the plan's: another split, weights or seed would read
 * other documents from the cursors. Exit 2 otherwise.
 */
static void
split_same(const struct mixer *m, const char *path, size_t lineno,
    const char *val)
{
	const struct ovl_plan *p = m->plan;
	char want[128];

	if (p->split != NULL)
		snprintf(want, sizeof(want), "%s %s %" PRIu64,
		    ovl_split_names[p->split_use], p->split, p->has_seed ?
		    p->seed : 0);
	if ((val == NULL) != (p->split == NULL) || (val != NULL &&
	    strcmp(val, want) != 0))
		ovl_errx(OVL_EXIT_USAGE, "%s:%zu: the held-out split changed "
		    "since the run began (split %s, the plan %s): a resume "
		    "would read other documents", path, lineno, val != NULL ?
		    val : "none", p->split != NULL ? want : "none");
}

void
resume_from(struct mixer *m, const char *path)
{
	FILE *fp = fopen(path, "r");
	char *line = NULL, *sp, *key, *val, *dot;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	uint64_t x, step = 0, start = 0, used = 0, nsrc = 0;
	int seen_cursor[OVL_PLAN_MAX_SOURCES];
	size_t i;
	int k, seen_split = 0;

	if (fp == NULL)
		ovl_err(OVL_EXIT_USAGE, "cannot open '%s'", path);
	memset(seen_cursor, 0, sizeof(seen_cursor));
	while ((n = getline(&line, &cap, fp)) > 0) {
		lineno++;
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (n == 0)
			continue;
		sp = strchr(line, ' ');
		if (sp == NULL)
			ovl_errx(OVL_EXIT_USAGE, "%s:%zu: expected 'key value'",
			    path, lineno);
		*sp = '\0';
		key = line;
		val = sp + 1;
#define NUM(dst) do {							\
	if (ovl_num_u64(val, &x) != 0)					\
		ovl_errx(OVL_EXIT_USAGE, "%s:%zu: bad value '%s' for %s",	\
		    path, lineno, val, key);					\
	dst = x;							\
} while (0)
		if (strcmp(key, "version") == 0) {
			if (strcmp(val, "1") != 0)
				ovl_errx(OVL_EXIT_USAGE, "%s:%zu: unknown state "
				    "version %s", path, lineno, val);
		} else if (strcmp(key, "checkpoint") == 0)
			NUM(m->last_n);
		else if (strcmp(key, "sources") == 0)
			NUM(nsrc);
		else if (strcmp(key, "mix-by") == 0) {
			if (strcmp(val, m->by == OVL_MIXBY_DOCS ? "docs" :
			    "tokens") != 0)
				ovl_errx(OVL_EXIT_USAGE, "%s:%zu: the state "
				    "mixes by %s, the plan by %s", path, lineno,
				    val, m->by == OVL_MIXBY_DOCS ? "docs" :
				    "tokens");
		} else if (strcmp(key, "split") == 0) {
			split_same(m, path, lineno, val);
			seen_split = 1;
		} else if (strcmp(key, "pos") == 0)
			NUM(m->pos);
		else if (strcmp(key, "tokens") == 0)
			NUM(m->tokens);
		else if (strcmp(key, "step") == 0)
			NUM(step);
		else if (strcmp(key, "step.start") == 0)
			NUM(start);
		else if (strcmp(key, "step.used") == 0)
			NUM(used);
		else if (strcmp(key, "drop.at") == 0) {
			NUM(m->drop_at);
			m->any_drop = 1;
		} else if (strncmp(key, "source.", 7) == 0 &&
		    (dot = strrchr(key + 7, '.')) != NULL) {
			struct source *s;
			const char *field = dot + 1;

			k = ovl_plan_find(m->plan, key + 7,
			    (size_t)(dot - (key + 7)));
			if (k < 0)
				ovl_errx(OVL_EXIT_USAGE, "%s:%zu: the plan has "
				    "no source '%.*s'", path, lineno,
				    (int)(dot - (key + 7)), key + 7);
			s = &m->src[k];
			if (strcmp(field, "cursor") == 0) {
				if (ovl_cursor_parse(val, &s->cur) != 0)
					ovl_errx(OVL_EXIT_USAGE, "%s:%zu: bad "
					    "cursor '%s'", path, lineno, val);
				seen_cursor[k] = 1;
			} else if (strcmp(field, "tokens") == 0)
				NUM(s->tokens);
			else if (strcmp(field, "docs") == 0)
				NUM(s->docs);
			else if (strcmp(field, "nchunks") == 0) {
				NUM(x);
				s->nchunks = (uint32_t)x;
			} else if (strcmp(field, "partitions") == 0)
				;	/* the inputs given now decide */
			else if (strcmp(field, "state") == 0) {
				if (strcmp(val, "active") == 0)
					s->state = ST_ACTIVE;
				else if (strcmp(val, "dropped") == 0)
					s->state = ST_DROPPED;
				else if (strcmp(val, "exhausted") == 0)
					s->state = ST_EXHAUSTED;
				else
					ovl_errx(OVL_EXIT_USAGE, "%s:%zu: bad "
					    "state '%s'", path, lineno, val);
			} else if (strcmp(field, "long") == 0) {
				int nf = sscanf(val, "%" SCNu64 " %" SCNu64 " %"
				    SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
				    &s->long_n[0], &s->long_n[1], &s->long_n[2],
				    &s->long_cut, &s->long_img[0],
				    &s->long_img[1]);

				if (nf != 4 && nf != 6)
					ovl_errx(OVL_EXIT_USAGE, "%s:%zu: bad "
					    "long '%s'", path, lineno, val);
			} else if (strcmp(field, "base") == 0) {
				char *end;
				errno = 0;
				s->base = strtod(val, &end);
				if (*end != '\0' || errno != 0)
					ovl_errx(OVL_EXIT_USAGE, "%s:%zu: bad "
					    "base '%s'", path, lineno, val);
			} else
				ovl_errx(OVL_EXIT_USAGE, "%s:%zu: unknown key "
				    "'%s'", path, lineno, key);
		} else
			ovl_errx(OVL_EXIT_USAGE, "%s:%zu: unknown key '%s'", path,
			    lineno, key);
#undef NUM
	}
	if (ferror(fp))
		ovl_err(OVL_EXIT_USAGE, "cannot read '%s'", path);
	free(line);
	fclose(fp);
	if (nsrc != m->nsrc)
		ovl_errx(OVL_EXIT_USAGE, "%s: the state has %" PRIu64 " sources, "
		    "the plan %zu", path, nsrc, m->nsrc);
	if (!seen_split)
		split_same(m, path, lineno, NULL);
	for (i = 0; i < m->nsrc; i++) {
		if (!seen_cursor[i])
			ovl_errx(OVL_EXIT_USAGE, "%s: no cursor for source '%s'",
			    path, m->src[i].ps->name);
		m->active[i] = m->src[i].state == ST_ACTIVE;
	}
	ovl_stepcut_restore(&m->cut, &m->cfg, step, start, used);
	ovl_info(1, "resuming at mixed position %" PRIu64 ", %" PRIu64
	    " tokens, step %" PRIu64 ", after checkpoint %" PRIu64, m->pos,
	    m->tokens, step, m->last_n);
}

