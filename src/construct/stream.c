/*
 * ovl-construct: the input stream: documents, barriers and checkpoints,
 * and resuming from a STATE. See construct.h.
 */
#include "construct.h"

/* ---- checkpoints ------------------------------------------------------ */

static void
state_text(struct construct *c, uint64_t n, uint64_t pos, uint32_t off,
    struct ovl_buf *out)
{
	const struct construct_opts *o = c->o;
	char line[512];
	int k;

#define ADD(...) do { \
	k = snprintf(line, sizeof(line), __VA_ARGS__); \
	ovl_buf_append(out, line, (size_t)k); \
} while (0)
	out->len = 0;
	ADD("version %d\n", STATE_VERSION);
	ADD("n %" PRIu64 "\n", n);
	ADD("step %" PRIu64 "\n", c->cut.step);
	ADD("start %" PRIu64 "\n", c->cut.start);
	ADD("used 0\n");
	ADD("skip.pos %" PRIu64 "\n", pos);
	ADD("skip.offset %u\n", off);
	ADD("next.pos %" PRIu64 "\n", pos);
	ADD("seqs %" PRIu64 "\n", c->seqs);
	ADD("ranks %u\n", o->ranks);
	ADD("micro-batches %u\n", o->mb);
	ADD("step-tokens %" PRIu64 "\n", o->step_tokens);
	ADD("seq-len %s\n", c->seqlen_text);
	ADD("balance %s\n", ovl_balance_name(o->balance));
	ADD("pack %s\n", ovl_pack_name(o->pack));
	ADD("window %u\n", o->window);
	ADD("uniform %d\n", o->uniform);
	ADD("cost %s\n", o->cost_text);
	ADD("image-tokens %" PRIu64 "\n", o->image_tokens);
	if (o->enc_text[0] != '\0')
		ADD("image-encoder-cost %s\n", o->enc_text);
	if (o->cp > 0) {
		ADD("cp %u\n", o->cp);
		ADD("cp-pad %s\n", ovl_plan_cp_pads[o->cp_pad]);
		if (o->cp_hybrid)
			ADD("cp-balance hybrid\n");
	}
#undef ADD
}

/* Write everything before the boundary, the held STATEs, ours, the barrier. */
static void
emit_checkpoint(struct construct *c, struct held *h, uint64_t pos,
    uint32_t off)
{
	struct ovl_buf text = { 0 };
	struct ovl_state st;
	size_t i = 0, k;
	uint8_t bp[OVL_BARRIER_LEN];

	flush_window(c);
	for (k = 0; k < h->nstates; k++) {
		uint32_t len = ovl_le32(h->states.p + i);
		const uint8_t *pl = h->states.p + i + 4;
		struct ovl_frame f = { OVL_STATE, 0, len, pl, 0 };

		if (c->o->json) {
			ovl_state_decode(&f, &st);
			write_state_json(&st);
		} else {
			out_frame_copy(c, OVL_STATE, pl, len);
		}
		i += 4 + (size_t)len;
	}
	state_text(c, h->b.n, pos, off, &text);
	st.stage = OVL_STAGE_CONSTRUCT;
	st.n = h->b.n;
	st.text = (const char *)text.p;
	st.text_len = (uint32_t)text.len;
	if (c->o->json) {
		write_state_json(&st);
		printf("{\"kind\":\"barrier\",\"n\":%" PRIu64 ",\"step\":%"
		    PRIu64 ",\"mix_pos\":%" PRIu64 ",\"tokens\":%" PRIu64
		    ",\"offset\":%u}\n", h->b.n, h->b.step, h->b.mix_pos,
		    h->b.tokens, h->b.offset);
	} else {
		uint8_t *pl = ovl_writer_begin(c->wr,
		    ovl_state_payload_len(st.text_len));
		ovl_state_encode(pl, &st);
		ovl_writer_finish(c->wr, OVL_STATE, 0);
		ovl_barrier_encode(bp, &h->b);
		/*
		 * The figures of every step before the checkpoint are on disk
		 * before it can commit: a restore recomputes only the steps
		 * after it.
		 */
		if (c->stats != NULL && fflush(c->stats) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot write the --stats file");
		out_frame_copy(c, OVL_BARRIER, bp, OVL_BARRIER_LEN);
		/* a checkpoint must reach the sink now, not with the next block */
		ovl_writer_flush(c->wr);
	}
	if (c->o->json)
		fflush(stdout);
	ovl_info(1, "checkpoint %" PRIu64 " before step %" PRIu64
	    " (document %" PRIu64 " offset %u)", h->b.n, h->b.step, pos, off);
	ovl_buf_free(&text);
}

void
held_pop(struct construct *c)
{
	ovl_buf_free(&c->held[0].states);
	memmove(c->held, c->held + 1, (c->nheld - 1) * sizeof(*c->held));
	c->nheld--;
}

/* Why barriers may not match: the cut differs with fixed shapes. */
static const char *
uniform_hint(const struct construct *c)
{
	return c->o->uniform ? " (--uniform cuts every step exactly at its "
	    "budget: ovl-mix must run a plan with 'uniform yes')" :
	    " (if ovl-mix's plan says 'uniform yes', it cuts steps exactly "
	    "at their budget: give ovl-construct --uniform too)";
}

/*
 * A piece is about to be placed at offset off of document pos; boundary
 * is 1 when a step begins just before it. Emit the checkpoints that sit
 * there; fail when the cut passed one without meeting it.
 */
static void
check_barriers(struct construct *c, uint64_t pos, uint32_t off, int boundary)
{
	while (c->nheld > 0) {
		struct held *h = &c->held[0];
		const struct ovl_barrier *b = &h->b;

		if (!h->has_barrier)
			ovl_errx(OVL_EXIT_DATA, "'%s': STATE %" PRIu64 " without "
			    "its BARRIER", ovl_reader_name(c->rd),
			    b->n);
		if (boundary && pos == b->mix_pos && off == b->offset) {
			if (b->step != c->cut.step || b->tokens != c->cut.start)
				ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64
				    ": ovl-mix places step %" PRIu64 " after %"
				    PRIu64 " tokens, the construct plan step %"
				    PRIu64 " after %" PRIu64 ": the plans "
				    "differ%s", b->n, b->step, b->tokens,
				    c->cut.step, c->cut.start, uniform_hint(c));
			emit_checkpoint(c, h, pos, off);
			held_pop(c);
			continue;
		}
		if (pos > b->mix_pos || (pos == b->mix_pos && off >= b->offset))
			ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64 " at "
			    "document %" PRIu64 " offset %u (step %" PRIu64
			    ") is not a step boundary here: the plans of "
			    "ovl-mix and ovl-construct differ%s", b->n,
			    b->mix_pos, b->offset, b->step, uniform_hint(c));
		break;
	}
}

static struct held *
held_push(struct construct *c)
{
	struct held *h;

	if (c->nheld == c->heldcap) {
		c->heldcap = c->heldcap ? 2 * c->heldcap : 8;
		c->held = ovl_xrealloc(c->held, c->heldcap * sizeof(*c->held));
	}
	h = &c->held[c->nheld++];
	memset(h, 0, sizeof(*h));
	return h;
}

void
on_state(struct construct *c, const struct ovl_frame *f)
{
	struct ovl_state st;
	struct held *h;
	uint8_t lenb[4];

	if (ovl_state_decode(f, &st) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad STATE at byte offset %"
		    PRIu64, ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	if (st.stage == OVL_STAGE_CONSTRUCT)
		ovl_errx(OVL_EXIT_DATA, "'%s': the input already holds a "
		    "construct STATE at byte offset %" PRIu64,
		    ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	if (c->nheld > 0 && !c->held[c->nheld - 1].has_barrier)
		h = &c->held[c->nheld - 1];
	else
		h = held_push(c);
	h->b.n = st.n;
	ovl_put32(lenb, f->len);
	ovl_buf_append(&h->states, lenb, 4);
	ovl_buf_append(&h->states, f->payload, f->len);
	h->nstates++;
}

void
on_barrier(struct construct *c, const struct ovl_frame *f)
{
	struct ovl_barrier b;
	struct held *h;

	if (ovl_barrier_decode(f, &b) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad BARRIER at byte offset %"
		    PRIu64, ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	if (c->nheld > 0 && !c->held[c->nheld - 1].has_barrier) {
		h = &c->held[c->nheld - 1];
		if (h->b.n != b.n)
			ovl_errx(OVL_EXIT_DATA, "'%s': BARRIER %" PRIu64
			    " follows STATE %" PRIu64 " at byte offset %" PRIu64,
			    ovl_reader_name(c->rd), b.n, h->b.n,
			    ovl_reader_offset(c->rd));
	} else {
		h = held_push(c);
	}
	h->b = b;
	h->has_barrier = 1;
	if (b.n <= c->resume_n) {
		/* re-sent by a resumed ovl-mix: already committed */
		ovl_buf_free(&h->states);
		c->nheld--;
	}
}

/* ---- documents ------------------------------------------------------ */

static void
add_piece(struct construct *c, const struct ovl_doc *d, uint64_t pos,
    uint32_t off, uint32_t len)
{
	struct piece *p;
	uint32_t tw;

	if (c->npieces == c->pcap) {
		c->pcap = c->pcap ? 2 * c->pcap : 1024;
		c->pieces = ovl_xrealloc(c->pieces, c->pcap * sizeof(*p));
	}
	p = &c->pieces[c->npieces++];
	p->mix_pos = pos;
	p->record = d->record;
	p->source = d->source;
	p->epoch = d->epoch;
	p->chunk = d->chunk;
	p->offset = off;
	p->length = len;
	p->pad = (uint32_t)c->cut.pad;
	p->images = off == 0 ? (uint32_t)((uint64_t)d->nimages *
	    c->o->image_tokens > UINT32_MAX ? UINT32_MAX :
	    (uint64_t)d->nimages * c->o->image_tokens) : 0;
	/* in the width of the SEQ frames: one copy here, none when emitted */
	tw = c->tok_width;
	p->tok = c->arena.len / tw;
	if (ovl_tok_copy(ovl_buf_reserve(&c->arena, (size_t)len * tw), tw,
	    ovl_tok_from(d->tokens, d->width, off), d->width, len) > 0xffff)
		ovl_errx(OVL_EXIT_DATA, "'%s': document at mixed position %"
		    PRIu64 " has token id %" PRIu32 ", not below the stream's "
		    "vocabulary", ovl_reader_name(c->rd), pos,
		    ovl_tok_max(ovl_tok_from(d->tokens, d->width, off),
		    d->width, len));
	c->arena.len += (size_t)len * tw;
	images_attach(c, p);
}

void
on_doc(struct construct *c, const struct ovl_frame *f)
{
	struct ovl_doc d;
	uint64_t pos;
	uint32_t off = 0;

	if (ovl_doc_decode(f, &d) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad DOC at byte offset %" PRIu64,
		    ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	pos = (d.flags & OVL_DOC_MIXED) ? d.mix_pos : c->next_pos;
	if (c->skipping && pos < c->skip_pos && (d.flags & OVL_DOC_MIXED)) {
		/*
		 * A writer that replays from an older checkpoint than the one
		 * resumed (it had not yet heard of the newer commit): what
		 * lies before the resume point is in the checkpoint already.
		 */
		c->have_pos = 1;
		c->last_pos = pos;
		return;
	}
	if (c->have_pos && pos <= c->last_pos)
		ovl_errx(OVL_EXIT_DATA, "'%s': document at mixed position %"
		    PRIu64 " after %" PRIu64 " (byte offset %" PRIu64 ")",
		    ovl_reader_name(c->rd), pos, c->last_pos,
		    ovl_reader_offset(c->rd));
	c->have_pos = 1;
	c->last_pos = pos;
	c->next_pos = pos + 1;
	if (c->skipping) {
		if (pos != c->skip_pos)
			ovl_errx(OVL_EXIT_DATA, "'%s': resuming at document %"
			    PRIu64 " but the stream starts at %" PRIu64,
			    ovl_reader_name(c->rd), c->skip_pos, pos);
		if (c->skip_off > 0 && c->skip_off >= d.ntokens)
			ovl_errx(OVL_EXIT_DATA, "'%s': resuming at token %u of "
			    "document %" PRIu64 ", which has %u",
			    ovl_reader_name(c->rd), c->skip_off, pos, d.ntokens);
		off = c->skip_off;
		c->skipping = 0;
	}
	images_begin(c, &d, off);
	while (off < d.ntokens && !c->stopped) {
		struct wstep prev;
		int opened, fresh = c->cut.used == 0;
		uint32_t len;

		prev.step = c->cut.step;
		prev.budget = c->cut.budget;
		prev.seq_len = c->cut.seq_len;
		prev.used = c->cut.budget;	/* closed by the next piece: full */
		/* an image's placeholders stay in one piece (step.h) */
		len = ovl_stepcut_next_bounds(&c->cut, d.ntokens - off,
		    ovl_tok_from(d.tokens, d.width, off), d.width,
		    d.source < c->nrun ? c->run_id[d.source] :
		    OVL_STEP_NORUN, off, c->runs.len > 0 ? c->runs.p : NULL,
		    c->runs.len / 2, &opened);
		/*
		 * The plan's stop steps=: ovl-mix ends its stream after the
		 * document that reaches it, whole; its tokens from that step on
		 * are not trained on.
		 */
		if (opened && c->o->stop_steps != 0 &&
		    c->cut.step >= c->o->stop_steps) {
			close_step(c, &prev, c->cut.seq_len);
			c->stopped = 1;
			break;
		}
		if (opened)
			close_step(c, &prev, c->cut.seq_len);
		if (c->nheld > 0)
			check_barriers(c, pos, off, opened || fresh);
		add_piece(c, &d, pos, off, len);
		off += len;
	}
}

/*
 * A "source ID NAME" line of the META: the source's image placeholder, if
 * it has one, into c->run_id[ID] (the cutter keeps its runs whole, as
 * ovl-mix's does).
 */
static void
run_source(struct construct *c, const char *meta, uint32_t mlen,
    const char *p, const char *nl)
{
	char line[300], name[280];
	unsigned id;
	size_t n = (size_t)(nl - p), i;

	if (n >= sizeof(line))
		return;
	memcpy(line, p, n);
	line[n] = '\0';
	if (sscanf(line, "source %u %279s", &id, name) != 2 || id >= 65536)
		return;
	if (id >= c->nrun) {
		c->run_id = ovl_xrealloc(c->run_id, ((size_t)id + 1) *
		    sizeof(*c->run_id));
		for (i = c->nrun; i <= id; i++)
			c->run_id[i] = OVL_STEP_NORUN;
		c->nrun = (size_t)id + 1;
	}
	c->run_id[id] = ovl_step_run_token(meta, mlen, name);
}

/*
 * The stream's META from ovl-mix names the seq-len schedule and step
 * budget its steps were cut with: ours must be the same, or the steps
 * would part at the first BARRIER. Refused here, before any output.
 */
static void
check_mixed_for(const struct construct *c, const char *text, uint32_t tlen)
{
	size_t n = strlen(c->seqlen_text) + 2;
	char *v = ovl_xmalloc(n > 32 ? n : 32);
	uint64_t st;

	if (ovl_meta_value(text, tlen, "seq-len", v, n) &&
	    strcmp(v, c->seqlen_text) != 0)
		ovl_errx(OVL_EXIT_USAGE, "'%s': seq-len %s, but the stream was "
		    "mixed for seq-len %s", ovl_reader_name(c->rd),
		    c->seqlen_text, v);
	if (ovl_meta_value(text, tlen, "step-tokens", v, 32) &&
	    (ovl_num_u64(v, &st) != 0 || st != c->o->step_tokens))
		ovl_errx(OVL_EXIT_USAGE, "'%s': step-tokens %" PRIu64 ", but "
		    "the stream was mixed for step-tokens %s",
		    ovl_reader_name(c->rd), c->o->step_tokens, v);
	free(v);
}

void
on_meta(struct construct *c, const struct ovl_frame *f)
{
	const struct construct_opts *o = c->o;
	const char *text, *p, *e, *nl;
	uint32_t tlen;
	struct ovl_buf out = { 0 };
	char line[512];
	int k;
	static const char *const mine[] = { "seq-len", "ranks",
	    "micro-batches", "step-tokens", "balance", "pack", "window",
	    "uniform", "cost", "image-tokens", "image-encoder-cost", "pad-id",
	    "resumed", "cp", "cp-pad", "cp-balance", NULL };

	if (ovl_meta_decode(f, &text, &tlen) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad META at byte offset %" PRIu64,
		    ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	check_mixed_for(c, text, tlen);
	c->eod = UINT64_MAX;
	(void)ovl_reader_meta_u64(c->rd, "eod", &c->eod);
	for (p = text, e = text + tlen; p < e; p = nl) {
		size_t klen, i;
		int skip = 0;

		nl = memchr(p, '\n', (size_t)(e - p));
		nl = nl == NULL ? e : nl + 1;
		klen = strcspn(p, " \n");
		if (klen > (size_t)(nl - p))
			klen = (size_t)(nl - p);
		for (i = 0; mine[i] != NULL; i++)
			if (strlen(mine[i]) == klen &&
			    memcmp(p, mine[i], klen) == 0)
				skip = 1;
		if (!c->o->pad_set && klen == 3 && memcmp(p, "eod", 3) == 0) {
			char num[24];
			size_t vl = (size_t)(nl - p) - 4;
			uint64_t v;
			if (nl[-1] == '\n')
				vl--;
			if ((size_t)(nl - p) > 4 && vl < sizeof(num)) {
				memcpy(num, p + 4, vl);
				num[vl] = '\0';
				if (ovl_num_u64(num, &v) == 0 && v <= UINT32_MAX)
					c->pad_id = (uint32_t)v;
			}
		}
		if (klen == 6 && memcmp(p, "source", 6) == 0)
			run_source(c, text, tlen, p, nl);
		if (skip)
			continue;
		ovl_buf_append(&out, p, (size_t)(nl - p));
		if (nl == e && nl[-1] != '\n')
			ovl_buf_append(&out, "\n", 1);
	}
#define ADD(...) do { \
	k = snprintf(line, sizeof(line), __VA_ARGS__); \
	ovl_buf_append(&out, line, (size_t)k); \
} while (0)
	ADD("seq-len %s\n", c->seqlen_text);
	ADD("ranks %u\n", o->ranks);
	ADD("micro-batches %u\n", o->mb);
	if (o->step_tokens > 0)
		ADD("step-tokens %" PRIu64 "\n", o->step_tokens);
	ADD("balance %s\n", ovl_balance_name(o->balance));
	ADD("pack %s\n", ovl_pack_name(o->pack));
	ADD("window %u\n", o->window);
	ADD("uniform %s\n", o->uniform ? "yes" : "no");
	ADD("cost %s\n", o->cost_text);
	ADD("image-tokens %" PRIu64 "\n", o->image_tokens);
	if (o->enc_text[0] != '\0')
		ADD("image-encoder-cost %s\n", o->enc_text);
	ADD("pad-id %u\n", c->pad_id);
	if (o->cp > 0) {
		ADD("cp %u\n", o->cp);
		ADD("cp-pad %s\n", ovl_plan_cp_pads[o->cp_pad]);
		if (o->cp_hybrid)
			ADD("cp-balance hybrid\n");
	}
	if (o->resume_path != NULL)	/* right after BARRIER n (relink.h) */
		ADD("resumed %" PRIu64 "\n", c->resume_n);
#undef ADD
	if (o->json) {
		printf("{\"kind\":\"meta\"");
		json_text(stdout, "text", (const char *)out.p, out.len);
		printf("}\n");
	} else {
		uint8_t *pl = ovl_writer_begin(c->wr,
		    ovl_meta_payload_len((uint32_t)out.len));
		ovl_meta_encode(pl, (const char *)out.p, (uint32_t)out.len);
		ovl_writer_finish(c->wr, OVL_META, 0);
	}
	ovl_buf_free(&out);
	/*
	 * Every id below the vocabulary: SEQ tokens of 16 bits when it has
	 * at most 65,536 ids and the padding fits too (ovl-frame(5)).
	 */
	{
		uint64_t vocab = 0;

		c->tok_width = ovl_reader_meta_u64(c->rd, "vocab", &vocab) &&
		    vocab <= 65536 && c->pad_id <= 0xffff &&
		    c->o->token_bits != 32 ? 2 : 4;
	}
}

/* The end: the open step closes, the window flushes. */
void
on_end(struct construct *c)
{
	struct wstep prev;

	prev.step = c->cut.step;
	prev.budget = c->cut.budget;
	prev.seq_len = c->cut.seq_len;
	prev.used = c->cut.used;
	close_step(c, &prev, prev.seq_len);
	flush_window(c);
	/* a checkpoint at the very end of the stream */
	while (c->nheld > 0 && c->held[0].has_barrier &&
	    c->held[0].b.tokens == c->cut.start + c->cut.used &&
	    c->held[0].b.step == c->cut.step + 1) {
		struct held *h = &c->held[0];
		c->cut.step = h->b.step;
		c->cut.start = h->b.tokens;
		c->cut.used = 0;
		emit_checkpoint(c, h, h->b.mix_pos, h->b.offset);
		held_pop(c);
	}
	if (c->nheld > 0)
		ovl_errx(OVL_EXIT_DATA, "'%s': the stream ends before "
		    "checkpoint %" PRIu64 " (step %" PRIu64 ")",
		    ovl_reader_name(c->rd), c->held[0].b.n, c->held[0].b.step);
}

/* ---- resume ------------------------------------------------------- */

void
load_resume(struct construct *c, const char *path)
{
	FILE *fp = fopen(path, "r");
	char line[1024], cfg[4096], elastic[2200] = "";
	struct ovl_buf mine = { 0 };
	uint64_t step = 0, start = 0, used = 0;
	unsigned have = 0, lineno = 0;
	int have_cp = 0, have_hybrid = 0;

	if (fp == NULL)
		ovl_err(OVL_EXIT_USAGE, "cannot open '%s'", path);
	/* the settings this run would write, to compare */
	state_text(c, 0, 0, 0, &mine);
	ovl_buf_append(&mine, "", 1);
	snprintf(cfg, sizeof(cfg), "%s", (const char *)mine.p);
	ovl_buf_free(&mine);
	while (fgets(line, sizeof(line), fp) != NULL) {
		char *sp, *val, *nl;
		uint64_t v = 0;
		int isnum;

		lineno++;
		nl = strchr(line, '\n');
		if (nl == NULL && !feof(fp))
			ovl_errx(OVL_EXIT_USAGE, "%s:%u: line too long", path,
			    lineno);
		if (nl != NULL)
			*nl = '\0';
		if (line[0] == '\0')
			continue;
		sp = strchr(line, ' ');
		if (sp == NULL)
			ovl_errx(OVL_EXIT_USAGE, "%s:%u: expected 'key value'",
			    path, lineno);
		*sp = '\0';
		val = sp + 1;
		isnum = ovl_num_u64(val, &v) == 0;
#define NUMKEY(k, bit, dst) \
		if (strcmp(line, k) == 0) { \
			if (!isnum) \
				ovl_errx(OVL_EXIT_USAGE, "%s:%u: bad %s '%s'", \
				    path, lineno, k, val); \
			dst; \
			have |= bit; \
			continue; \
		}
		NUMKEY("version", 1u, if (v != STATE_VERSION)
		    ovl_errx(OVL_EXIT_USAGE, "%s:%u: unknown version %s",
		    path, lineno, val))
		NUMKEY("n", 2u, c->resume_n = v)
		NUMKEY("step", 4u, step = v)
		NUMKEY("start", 8u, start = v)
		NUMKEY("used", 16u, used = v)
		NUMKEY("skip.pos", 32u, c->skip_pos = v)
		NUMKEY("skip.offset", 64u, if (v > UINT32_MAX)
		    ovl_errx(OVL_EXIT_USAGE, "%s:%u: bad skip.offset", path,
		    lineno); c->skip_off = (uint32_t)v)
		NUMKEY("next.pos", 128u, c->next_pos = v)
		NUMKEY("seqs", 256u, c->seqs = v)
#undef NUMKEY
		{
			/* a setting: must equal this run's */
			char want[600];
			size_t kl = strlen(line);
			const char *q = cfg;
			int found = 0;

			while ((q = strstr(q, line)) != NULL) {
				if ((q == cfg || q[-1] == '\n') && q[kl] == ' ') {
					size_t vl = strcspn(q + kl + 1, "\n");
					if (vl >= sizeof(want))
						vl = sizeof(want) - 1;
					memcpy(want, q + kl + 1, vl);
					want[vl] = '\0';
					found = 1;
					break;
				}
				q += kl;
			}
			if (!found)
				ovl_errx(OVL_EXIT_USAGE, "%s:%u: unknown key '%s'",
				    path, lineno, line);
			if (strcmp(line, "cp") == 0)
				have_cp = 1;
			if (strcmp(line, "cp-balance") == 0)
				have_hybrid = 1;
			if (strcmp(want, val) == 0)
				continue;
			/*
			 * Elastic data parallelism: with a fixed step budget
			 * (step-tokens) and free shapes, the ranks and
			 * micro-batches only split each step differently;
			 * checked once every key is read.
			 */
			if (strcmp(line, "ranks") == 0 ||
			    strcmp(line, "micro-batches") == 0) {
				snprintf(elastic, sizeof(elastic), "%s:%u: the "
				    "state was written with %s %s, this run has "
				    "%s", path, lineno, line, val, want);
				continue;
			}
			ovl_errx(OVL_EXIT_USAGE, "%s:%u: the state was "
			    "written with %s %s, this run has %s", path,
			    lineno, line, val, want);
		}
	}
	if (ferror(fp))
		ovl_err(OVL_EXIT_USAGE, "cannot read '%s'", path);
	fclose(fp);
	if ((have & 0xff) != 0xff)
		ovl_errx(OVL_EXIT_USAGE, "'%s': not a complete construct state",
		    path);
	if (c->o->cp > 0 && !have_cp)
		ovl_errx(OVL_EXIT_USAGE, "'%s': the state was written without "
		    "cp, this run has cp %u", path, c->o->cp);
	if (c->o->cp_hybrid && !have_hybrid)
		ovl_errx(OVL_EXIT_USAGE, "'%s': the state was written with "
		    "cp-balance static, this run has cp-balance hybrid", path);
	if (elastic[0] != '\0') {
		if (c->o->step_tokens == 0 || c->o->uniform)
			ovl_errx(OVL_EXIT_USAGE, "%s (another rank count keeps "
			    "every step only with step-tokens and uniform no)",
			    elastic);
		ovl_info(1, "%s: the steps keep their %" PRIu64 " tokens and "
		    "are split over %u ranks", elastic, c->o->step_tokens,
		    c->o->ranks);
	}
	if (used != 0)
		ovl_errx(OVL_EXIT_USAGE, "'%s': a state must sit at a step "
		    "boundary (used 0)", path);
	ovl_stepcut_restore(&c->cut, &c->cfg, step, start, used);
	c->skipping = 1;
	if (c->next_pos != c->skip_pos)
		c->next_pos = c->skip_pos;
}

