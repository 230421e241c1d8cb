/*
 * ovl-construct: one step: balance its pieces over the ranks, pack every
 * rank's pieces into sequences, emit SEQ frames. See construct.h.
 */
#include "construct.h"

#include "cp.h"

#include <math.h>

/* ---- output --------------------------------------------------------- */

void
json_text(FILE *fp, const char *key, const char *s, size_t n)
{
	fprintf(fp, ",\"%s\":", key);
	ovl_json_string(fp, s, n);
}

void
out_frame_copy(struct construct *c, uint8_t kind, const void *payload,
    uint32_t len)
{
	if (!c->o->json)
		ovl_writer_frame(c->wr, kind, 0, payload, len);
}

void
write_state_json(const struct ovl_state *st)
{
	printf("{\"kind\":\"state\",\"stage\":\"%s\",\"n\":%" PRIu64,
	    st->stage == OVL_STAGE_MIX ? "mix" : st->stage ==
	    OVL_STAGE_CONSTRUCT ? "construct" : "other", st->n);
	json_text(stdout, "text", st->text, st->text_len);
	printf("}\n");
}

/*
 * Rank rank has its nseq sequences of step step: a STEP frame, so the
 * rank's reader knows the step is complete, even when it got none.
 */
static void
emit_step_end(struct construct *c, uint64_t step, uint32_t rank,
    uint32_t nseq)
{
	struct ovl_step st = { step, rank, nseq };
	uint8_t p[OVL_STEP_LEN];

	if (c->o->json) {
		printf("{\"kind\":\"step\",\"step\":%" PRIu64 ",\"rank\":%"
		    PRIu32 ",\"seqs\":%" PRIu32 "}\n", step, rank, nseq);
		return;
	}
	ovl_step_encode(p, &st);
	ovl_writer_frame(c->wr, OVL_STEP, 0, p, sizeof(p));
}

/* Position ids p0, p0 + 1, ... of n tokens at index k, of width bytes. */
static void
put_positions(void *pos, uint32_t width, uint32_t k, uint32_t p0, uint32_t n)
{
	uint32_t i;

	if (width == 2) {
		uint16_t *q = (uint16_t *)pos + k;
		for (i = 0; i < n; i++)
			q[i] = (uint16_t)(p0 + i);
	} else {
		uint32_t *q = (uint32_t *)pos + k;
		for (i = 0; i < n; i++)
			q[i] = p0 + i;
	}
}

/* Does token off_q of piece q follow token end_p of piece p? */
int
pieces_meet(const struct piece *p, uint32_t end_p, const struct piece *q,
    uint32_t off_q)
{
	return p->mix_pos == q->mix_pos && p->source == q->source &&
	    (uint64_t)p->offset + end_p == (uint64_t)q->offset + off_q;
}

/* Does piece q continue piece p in their document? */
int
piece_follows(const struct piece *p, const struct piece *q)
{
	return pieces_meet(p, p->length, q, 0);
}

/*
 * One sequence: pieces idx[0..np) of the step in order. Pieces that
 * continue each other are written as one (one cu_seqlens segment, its
 * positions going on), as a reader that sees document ends only at end
 * tokens reads them.
 */
static void
emit_seq(struct construct *c, uint64_t step, uint32_t seq_len, uint32_t rank,
    uint32_t mb, uint32_t group, const uint32_t *idx, size_t np)
{
	const struct construct_opts *o = c->o;
	uint32_t real = 0, ntok, k, *cu, nseg = 0, seg, tw = 4, pw = 4;
	uint64_t pmax = 0, segend = 0;
	uint32_t cpmax = 0;
	int cont = 0;
	void *tok, *pos;
	uint8_t *pl = NULL;
	struct ovl_seq s;
	size_t j, e;

	for (j = 0; j < np; j++) {
		const struct piece *p = &c->pieces[idx[j]];

		real += p->length;
		if (j == 0 || !piece_follows(&c->pieces[idx[j - 1]], p)) {
			nseg++;
			/* a segment's positions start at 0, or go on */
			segend = p->source < OVL_PLAN_MAX_SOURCES &&
			    o->cont_pos[p->source] ? p->offset : 0;
			if (segend > 0)
				cont = 1;
		}
		segend += p->length;
		if (segend > pmax)
			pmax = segend;
	}
	ntok = o->uniform ? seq_len : real;
	if (o->json) {
		c->jtok.len = c->jpos.len = c->jcu.len = 0;
		tok = ovl_u32vec_reserve(&c->jtok, ntok);
		pos = ovl_u32vec_reserve(&c->jpos, ntok);
		cu = ovl_u32vec_reserve(&c->jcu, nseg + 1);
		if (nseg > c->jpiece_cap) {
			c->jpiece_cap = nseg + nseg / 2;
			c->jpiece = ovl_xrealloc(c->jpiece, c->jpiece_cap *
			    sizeof(*c->jpiece));
		}
	} else {
		uint32_t len;

		/*
		 * 16-bit arrays where every id fits, and no positions at all
		 * where they restart at every segment: the reader derives them
		 * (ovl-frame(5), minor 2). --token-bits 32: minor 1's layout.
		 */
		tw = c->tok_width;
		if (o->token_bits == 32)
			pw = 4;
		else
			pw = !cont ? 0 : pmax <= 0x10000 ? 2 : 4;
		len = ovl_seq_payload_len(ntok, nseg, tw, pw);
		if (len == 0)
			ovl_errx(OVL_EXIT_DATA, "a sequence of %u tokens is "
			    "over the frame limit", ntok);
		pl = ovl_writer_begin(c->wr, len);
		memset(&s, 0, sizeof(s));
		s.step = step;
		s.rank = rank;
		s.mb = mb;
		s.ntokens = ntok;
		s.npieces = nseg;
		s.seq_len = seq_len;
		s.flags = group;
		s.width = tw;
		s.pos_width = pw;
		ovl_seq_encode(pl, &s);
		tok = ovl_seq_tokens(pl);
		pos = ovl_seq_positions(pl, ntok, tw);
		cu = ovl_seq_cu(pl, ntok, tw, pw);
	}
	k = 0;
	cu[0] = 0;
	for (j = 0, seg = 0; j < np; j = e, seg++) {
		const struct piece *p = &c->pieces[idx[j]];
		uint32_t p0 = p->source < OVL_PLAN_MAX_SOURCES &&
		    o->cont_pos[p->source] ? p->offset : 0, slen = 0;

		for (e = j; e < np && (e == j || piece_follows(
		    &c->pieces[idx[e - 1]], &c->pieces[idx[e]])); e++) {
			const struct piece *q = &c->pieces[idx[e]];

			(void)ovl_tok_copy((uint8_t *)tok + (size_t)k * tw, tw,
			    c->arena.p + (size_t)q->tok * c->tok_width,
			    c->tok_width, q->length);
			if (pw != 0)
				put_positions(pos, pw, k, p0 + slen, q->length);
			k += q->length;
			slen += q->length;
		}
		cu[seg + 1] = k;
		if (pl != NULL) {
			struct ovl_piece pc;
			pc.source = p->source;
			pc.epoch = p->epoch;
			pc.chunk = p->chunk;
			pc.offset = p->offset;
			pc.record = p->record;
			pc.mix_pos = p->mix_pos;
			pc.length = slen;
			/* the IMAGE frames after the SEQ, of all its parts */
			pc.nimages = 0;
			for (size_t q = j; q < e; q++)
				pc.nimages += piece_images(c,
				    &c->pieces[idx[q]]);
			ovl_seq_put_piece(pl, &s, seg, &pc);
		} else {
			c->jpiece[seg] = (struct jpiece){ p->source,
			    p->mix_pos, p->offset, slen };
		}
	}
	for (; k < ntok; k++) {
		if (tw == 2)
			((uint16_t *)tok)[k] = (uint16_t)c->pad_id;
		else
			((uint32_t *)tok)[k] = c->pad_id;
		if (pw != 0)
			put_positions(pos, pw, k, 0, 1);
	}
	c->seqs++;
	c->tokens += real;
	c->padding += ntok - real;
	if (o->cp > 0) {
		uint32_t *cpu;

		c->cpcu.len = 0;
		cpu = ovl_u32vec_reserve(&c->cpcu, nseg + 1);
		double v[OVL_PLAN_MAX_CP];
		uint32_t r;

		cpmax = ovl_cp_layout(ovl_cp_seq_size(o->cp, o->cp_hybrid,
		    group), o->cp_pad, cu, nseg, ntok, cpu);
		c->cp_padding += cpu[nseg] - ntok;
		/* hybrid: the costs as balanced are the ones written */
		if (o->cp_hybrid || cp_seq_costs(o, cu, nseg, ntok, v) != 0)
			c->sw.cpseq_bad = 1;
		for (r = 0; !o->cp_hybrid && r < o->cp; r++)
			c->sw.cpseq[(size_t)rank * o->cp + r] += v[r];
	}
	if (pl != NULL) {
		ovl_writer_finish(c->wr, OVL_SEQ, ovl_seq_flags(&s));
		images_emit(c, step, rank, mb, idx, np);
		return;
	}
	printf("{\"kind\":\"seq\",\"step\":%" PRIu64 ",\"rank\":%u,\"mb\":%u,"
	    "\"seq_len\":%u,\"ntokens\":%u,\"tokens\":", step, rank, mb,
	    seq_len, ntok);
	ovl_json_u32s(stdout, (const uint32_t *)tok, ntok);
	printf(",\"positions\":");
	ovl_json_u32s(stdout, (const uint32_t *)pos, ntok);
	printf(",\"cu_seqlens\":");
	ovl_json_u32s(stdout, cu, nseg + 1);
	if (o->cp > 0) {
		printf(",\"cu_seqlens_padded\":");
		ovl_json_u32s(stdout, c->cpcu.p, nseg + 1);
		printf(",\"max_seqlen\":%u", cpmax);
		if (o->cp_hybrid)
			printf(",\"local_cp_size\":%u,\"cp_first\":%u",
			    OVL_CP_GROUP_SIZE(group), OVL_CP_GROUP_FIRST(group));
	}
	printf(",\"docs\":[");
	for (seg = 0; seg < nseg; seg++) {
		const struct jpiece *p = &c->jpiece[seg];
		printf("%s[%u,%" PRIu64 ",%u,%u]", seg > 0 ? "," : "",
		    p->source, p->mix_pos, p->offset, p->length);
	}
	printf("]}\n");
	images_emit(c, step, rank, mb, idx, np);
}

/* ---- one step: balance, pack, emit -------------------------------------- */

static void
sw_grow(struct stepwork *w, size_t n, size_t nbins, uint32_t ranks)
{
	if (n > w->cap) {
		size_t cap = n + n / 2 + 16;
		w->idx = ovl_xrealloc(w->idx, cap * sizeof(*w->idx));
		w->len = ovl_xrealloc(w->len, cap * sizeof(*w->len));
		w->cost = ovl_xrealloc(w->cost, cap * sizeof(*w->cost));
		w->scratch = ovl_xrealloc(w->scratch, cap * sizeof(*w->scratch));
		w->rank = ovl_xrealloc(w->rank, cap * sizeof(*w->rank));
		w->bin = ovl_xrealloc(w->bin, cap * sizeof(*w->bin));
		w->bin2 = ovl_xrealloc(w->bin2, cap * sizeof(*w->bin2));
		w->order = ovl_xrealloc(w->order, cap * sizeof(*w->order));
		w->rlen = ovl_xrealloc(w->rlen, cap * sizeof(*w->rlen));
		w->rbin = ovl_xrealloc(w->rbin, cap * sizeof(*w->rbin));
		w->ulen = ovl_xrealloc(w->ulen, cap * sizeof(*w->ulen));
		w->ufirst = ovl_xrealloc(w->ufirst, (cap + 1) *
		    sizeof(*w->ufirst));
		w->uperm = ovl_xrealloc(w->uperm, cap * sizeof(*w->uperm));
		w->extra = ovl_xrealloc(w->extra, cap * sizeof(*w->extra));
		w->cap = cap;
	}
	if (nbins > w->bcap) {
		size_t cap = nbins + nbins / 2 + 16;
		w->bin_rank = ovl_xrealloc(w->bin_rank, cap *
		    sizeof(*w->bin_rank));
		w->bin_mb = ovl_xrealloc(w->bin_mb, cap * sizeof(*w->bin_mb));
		w->bcap = cap;
	}
	if (w->rcost == NULL) {
		w->rcost = ovl_xcalloc(ranks, sizeof(*w->rcost));
		w->nmb = ovl_xcalloc(ranks, sizeof(*w->nmb));
		w->nmb_none = ovl_xcalloc(ranks, sizeof(*w->nmb_none));
		w->rfirst = ovl_xcalloc(ranks + 1, sizeof(*w->rfirst));
		w->rtok = ovl_xcalloc(ranks, sizeof(*w->rtok));
		w->rcost2 = ovl_xcalloc(ranks, sizeof(*w->rcost2));
	}
}

/*
 * Varlen: pack every rank's pieces (rank[] set) into bins: the bin within
 * its rank (the micro-batch) into bin[], micro-batch counts into nmb[].
 * Returns the number of bins.
 */
static size_t
pack_ranks(struct construct *c, size_t n, uint32_t seq_len, uint32_t *nmb)
{
	struct stepwork *w = &c->sw;
	uint32_t ranks = c->o->ranks, r;
	size_t i, k, nb = 0;

	/* pieces of each rank in arrival order, by a counting sort */
	memset(w->rfirst, 0, (ranks + 1) * sizeof(*w->rfirst));
	for (i = 0; i < n; i++)
		w->rfirst[w->rank[i] + 1]++;
	for (r = 0; r < ranks; r++)
		w->rfirst[r + 1] += w->rfirst[r];
	for (i = 0; i < n; i++)
		w->order[w->rfirst[w->rank[i]]++] = (uint32_t)i;
	for (r = ranks; r > 0; r--)
		w->rfirst[r] = w->rfirst[r - 1];
	w->rfirst[0] = 0;
	for (r = 0; r < ranks; r++) {
		size_t a = w->rfirst[r], z = w->rfirst[r + 1], m;

		for (k = a; k < z; k++)
			w->rlen[k - a] = w->len[w->order[k]];
		m = ovl_pack(c->pk, c->o->pack, w->rlen, z - a, seq_len,
		    w->rbin);
		for (k = a; k < z; k++)
			w->bin[w->order[k]] = w->rbin[k - a];
		nmb[r] = (uint32_t)m;
		nb += m;
	}
	return nb;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Which plan a fixed-shape step was written with (do_step). */
static const char *const plan_names[] = { "balanced", "mid-cut", "cut", "none" };

/* What write_stats reports besides the step's own figures. */
struct stepfig {
	double		 maxc, lb, tb;
	double		 none_max;	/* none on the same pieces */
	uint64_t	 none_pad;
	double		 samples_max;	/* the same count of pieces per rank */
	int		 plan;		/* fixed shapes: PLAN_* */
	size_t		 splits, none_splits;	/* fixed shapes: cuts */
	double		 drift;
	uint32_t	 moved;
	/* cp: the policy's padding; costliest (DP, CP) rank and its bound,
	   and the same after DP-only balancing and after none (has_cp) */
	uint64_t	 cp_pad;
	int		 has_cp, has_base;	/* has_base: dp_only, none */
	double		 cp_max, cp_lb, cp_dp, cp_none;
	double		 cp_seq_max, cp_seq_mean;	/* as written */
};

static void
write_stats(struct construct *c, const struct wstep *s, size_t n,
    uint64_t tokens, uint64_t pad, const uint32_t *nmb,
    const uint32_t *nmb_none, const struct stepfig *fg)
{
	double maxc = fg->maxc, lb = fg->lb, tb = fg->tb;
	double none_max = fg->none_max, drift = fg->drift;
	uint32_t ranks = c->o->ranks, r, lo = UINT32_MAX, hi = 0;
	double total = 0, mean;
	size_t i;

	for (i = 0; i < ranks; i++)
		total += c->sw.rcost[i];
	mean = total / ranks;
	for (r = 0; r < ranks; r++) {
		if (nmb[r] < lo)
			lo = nmb[r];
		if (nmb[r] > hi)
			hi = nmb[r];
	}
	if (c->stats != NULL) {
		FILE *fp = c->stats;

		fprintf(fp, "{\"step\":%" PRIu64 ",\"seq_len\":%u,\"budget\":%"
		    PRIu64 ",\"tokens\":%" PRIu64 ",\"pieces\":%zu,"
		    "\"padding\":%" PRIu64 ",\"mb\":", s->step, s->seq_len,
		    s->budget, tokens, n, pad);
		ovl_json_u32s(fp, nmb, ranks);
		fprintf(fp, ",\"rank_tokens\":[");
		for (r = 0; r < ranks; r++)
			fprintf(fp, "%s%" PRIu64, r > 0 ? "," : "",
			    c->sw.rtok[r]);
		fprintf(fp, "],\"max_over_bound\":%.4f", lb > 0 ? maxc / lb : 1);
		fprintf(fp, ",\"max_cost\":%.17g,\"mean_cost\":%.17g,"
		    "\"lower_bound\":%.17g,\"tight_bound\":%.17g,"
		    "\"none\":{\"max_cost\":%.17g,"
		    "\"padding\":%" PRIu64 ",\"mb\":", maxc, mean, lb, tb,
		    none_max, fg->none_pad);
		ovl_json_u32s(fp, nmb_none, ranks);
		if (c->o->uniform)
			fprintf(fp, ",\"splits\":%zu", fg->none_splits);
		fprintf(fp, "},\"samples\":{\"max_cost\":%.17g}",
		    fg->samples_max);
		if (c->o->uniform)
			fprintf(fp, ",\"plan\":\"%s\",\"splits\":%zu",
			    plan_names[fg->plan], fg->splits);
		if (c->o->window > 1)
			fprintf(fp, ",\"moved\":%u,\"drift\":%.6f", fg->moved,
			    drift);
		if (c->o->cp > 0) {
			fprintf(fp, ",\"cp\":{\"padding\":%" PRIu64,
			    fg->cp_pad);
			if (!c->sw.cpseq_bad)
				fprintf(fp, ",\"written\":{\"max_cost\":%.17g,"
				    "\"mean_cost\":%.17g}", fg->cp_seq_max,
				    fg->cp_seq_mean);
			if (fg->has_cp)
				fprintf(fp, ",\"max_cost\":%.17g,"
				    "\"lower_bound\":%.17g,\"max_over_bound\":"
				    "%.4f", fg->cp_max, fg->cp_lb, fg->cp_lb > 0 ?
				    fg->cp_max / fg->cp_lb : 1);
			if (fg->has_base)
				fprintf(fp, ",\"dp_only\":{\"max_cost\":%.17g},"
				    "\"none\":{\"max_cost\":%.17g}",
				    fg->cp_dp, fg->cp_none);
			fprintf(fp, "}");
		}
		fprintf(fp, "}\n");
	}
	ovl_info(1, "step %" PRIu64 ": %" PRIu64 " tokens, %zu pieces, "
	    "%" PRIu64 " padding, micro-batches %u-%u, max/mean %.4f, "
	    "max/bound %.4f, none max/mean %.4f, drift %.4f", s->step, tokens,
	    n, pad, lo, hi, mean > 0 ? maxc / mean : 1, lb > 0 ? maxc / lb : 1,
	    mean > 0 ? none_max / mean : 1, drift);
}

static int
cmp_emitkey(const void *a, const void *b)
{
	const struct emitkey *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->sub < y->sub ? -1 : x->sub > y->sub;
}

/*
 * Fixed shapes: the bounds of the step as written (ekeys[0..nk) in
 * emission order). A document's pieces that meet in a sequence are one
 * segment there (emit_seq), its attention spanning them, so each segment
 * counts once, as the plans' rank costs count it; the pieces as cut
 * would give a bound below every plan's mean.
 */
static void
segment_bounds(struct construct *c, size_t nk, double *lb, double *tb)
{
	struct stepwork *w = &c->sw;
	size_t i, m = 0;
	uint64_t len = 0;
	double enc = 0;

	for (i = 0; i < nk; i++) {
		const struct piece *p = &c->pieces[ekeys[i].piece];

		if (i > 0 && (ekeys[i].key != ekeys[i - 1].key ||
		    !piece_follows(&c->pieces[ekeys[i - 1].piece], p))) {
			w->cost[m++] = ovl_cost_of(&c->o->cost, len) + enc;
			len = 0;
			enc = 0;
		}
		len += (uint64_t)p->length + p->images;
		enc += p->enc;
	}
	if (nk > 0)
		w->cost[m++] = ovl_cost_of(&c->o->cost, len) + enc;
	*lb = ovl_balance_lower_bound(w->cost, m, c->o->ranks, w->scratch);
	*tb = ovl_balance_tight_bound(w->cost, m, c->o->ranks, w->scratch);
}

/* Balance, pack and write one step made of the pieces w->idx[0..n). */
static void
do_step(struct construct *c, const struct wstep *s, size_t n, double drift,
    uint32_t moved)
{
	const struct construct_opts *o = c->o;
	struct stepwork *w = &c->sw;
	uint32_t ranks = o->ranks, r, *nmb = w->nmb;
	uint64_t tokens = 0, pad = 0;
	struct stepfig fg;
	size_t i, nk = 0, per = 0, none_nf;
	int want_none = c->stats != NULL || ovl_verbose >= 1, cpdoc;
	uint64_t cp_pad0 = c->cp_padding;

	if (o->cp > 0) {
		if (w->cpseq == NULL)
			w->cpseq = ovl_xcalloc((size_t)ranks * o->cp,
			    sizeof(*w->cpseq));
		memset(w->cpseq, 0, (size_t)ranks * o->cp * sizeof(*w->cpseq));
		w->cpseq_bad = 0;
	}

	memset(&fg, 0, sizeof(fg));
	fg.drift = drift;
	fg.moved = moved;
	/* cp-pad document: pieces packed padded, costs of CP ranks */
	cpdoc = o->cp > 0 && o->cp_pad == OVL_CP_PAD_DOCUMENT;
	if (cpdoc && n > w->cost2_cap) {
		w->cost2_cap = n + n / 2 + 16;
		w->cost2 = ovl_xrealloc(w->cost2, w->cost2_cap *
		    sizeof(*w->cost2));
	}
	for (i = 0; i < n; i++) {
		const struct piece *p = &c->pieces[w->idx[i]];
		w->len[i] = cp_padded(o, p->length);
		w->extra[i] = p->images;
		w->cost[i] = cpdoc ? cp_piece_cost(c, p) : piece_cost(c, p);
		if (cpdoc)
			w->cost2[i] = piece_cost(c, p);
		tokens += p->length;
	}
	fg.lb = ovl_balance_lower_bound(w->cost, n, ranks, w->scratch);
	fg.tb = ovl_balance_tight_bound(w->cost, n, ranks, w->scratch);
	if (want_none) {
		/* the data-parallel loaders' baseline: equal piece counts */
		ovl_balance_by_count(n, ranks, w->bin2);
		memset(w->rcost2, 0, ranks * sizeof(*w->rcost2));
		for (i = 0; i < n; i++)
			w->rcost2[w->bin2[i]] += w->cost[i];
		fg.samples_max = max_of(w->rcost2, ranks);
	}
	if (!o->uniform) {
		if (want_none) {
			fg.none_max = ovl_balance(c->bal, OVL_BAL_NONE, w->cost,
			    w->len, n, ranks, w->rank, w->rcost);
			pack_ranks(c, n, s->seq_len, w->nmb_none);
			if (cpdoc) {
				fg.has_cp = fg.has_base = 1;
				fg.cp_none = cp_max_cost(c, n, w->rank, NULL);
				(void)ovl_balance(c->bal, o->balance, w->cost2,
				    w->len, n, ranks, w->rank, w->rcost);
				fg.cp_dp = cp_max_cost(c, n, w->rank, NULL);
			}
		}
		if (o->cp_hybrid) {
			nk = hybrid_plan(c, n, s->seq_len, nmb, &fg.maxc, &fg.lb);
			fg.tb = fg.lb;
			fg.has_cp = 1;
			fg.cp_max = fg.maxc;
			fg.cp_lb = fg.lb;
		} else {
			fg.maxc = ovl_balance(c->bal, o->balance, w->cost,
			    w->len, n, ranks, w->rank, w->rcost);
			pack_ranks(c, n, s->seq_len, nmb);
			if (fg.has_cp)
				fg.cp_max = cp_max_cost(c, n, w->rank,
				    &fg.cp_lb);
			ekeys_grow(n);
			memset(w->rtok, 0, ranks * sizeof(*w->rtok));
			for (i = 0; i < n; i++) {
				ekeys[i].key = (uint64_t)w->rank[i] << 32 |
				    w->bin[i];
				ekeys[i].sub = (uint64_t)i << 32;
				ekeys[i].piece = w->idx[i];
				w->rtok[w->rank[i]] +=
				    c->pieces[w->idx[i]].length;
			}
			nk = n;
		}
	} else {
		uint64_t rs = (uint64_t)ranks * s->seq_len;

		per = (s->budget + rs - 1) / rs;
		if (per < o->mb)
			per = o->mb;
		/*
		 * Steps are cut exactly, so only the stream's last step holds
		 * less than its budget (tokens and the padding that keeps
		 * image runs whole): as many micro-batches as it needs.
		 */
		if (s->used < s->budget && (s->used + rs - 1) / rs < per)
			per = (s->used + rs - 1) / rs > 0 ?
			    (s->used + rs - 1) / rs : 1;
		nk = uniform_plan(c, n, s->seq_len, (uint32_t)per, &fg.none_max,
		    &none_nf, &fg.plan);
		fg.splits = nk - n;
		fg.none_splits = none_nf - n;
		for (r = 0; r < ranks; r++) {
			nmb[r] = (uint32_t)per;
			w->nmb_none[r] = (uint32_t)per;
		}
		fg.maxc = max_of(w->rcost, ranks);
		pad = (uint64_t)per * ranks * s->seq_len - tokens;
		fg.none_pad = pad;
	}
	/* emit rank by rank, micro-batch by micro-batch */
	qsort(ekeys, nk, sizeof(*ekeys), cmp_emitkey);
	sw_grow(w, nk, 0, ranks);
	if (o->uniform)
		segment_bounds(c, nk, &fg.lb, &fg.tb);
	{
		size_t a = 0, q = 0;
		uint32_t m;

		for (r = 0; r < ranks; r++) {
			for (m = 0; m < nmb[r]; m++) {
				uint64_t key = (uint64_t)r << 32 | m;
				size_t z = a;

				while (z < nk && ekeys[z].key == key)
					z++;
				for (i = a; i < z; i++)
					w->order[i - a] = ekeys[i].piece;
				emit_seq(c, s->step, s->seq_len, r, m,
				    o->cp_hybrid ? w->hgroup[q++] : 0, w->order,
				    z - a);
				a = z;
			}
			emit_step_end(c, s->step, r, nmb[r]);
		}
	}
	fg.cp_pad = c->cp_padding - cp_pad0;
	for (i = 0; o->cp > 0 && i < (size_t)ranks * o->cp; i++) {
		if (w->cpseq[i] > fg.cp_seq_max)
			fg.cp_seq_max = w->cpseq[i];
		fg.cp_seq_mean += w->cpseq[i] / ((double)ranks * o->cp);
	}
	if (want_none)
		write_stats(c, s, n, tokens, pad, nmb, w->nmb_none, &fg);
	c->steps++;
}

/* Per step of the window: how far its mixture moved from the cut's. */
static void
window_drift(struct construct *c, size_t nw)
{
	uint64_t *keys, orig[MAX_WINDOW], now[MAX_WINDOW];
	uint64_t so[MAX_WINDOW], sn[MAX_WINDOW];
	size_t i, j, n = c->npieces;

	memset(c->drift, 0, sizeof(c->drift));
	memset(c->moved, 0, sizeof(c->moved));
	memset(orig, 0, sizeof(orig));
	memset(now, 0, sizeof(now));
	if (n == 0)
		return;
	keys = ovl_xmalloc(n * sizeof(*keys));
	for (i = 0; i < n; i++) {
		const struct piece *p = &c->pieces[i];
		keys[i] = (uint64_t)p->source << 32 | i;
		orig[p->wstep] += p->length;
		now[p->nstep] += p->length;
		if (p->wstep != p->nstep)
			c->moved[p->nstep]++;
	}
	qsort(keys, n, sizeof(*keys), cmp_u64);
	for (i = 0; i < n; i = j) {
		uint32_t src = (uint32_t)(keys[i] >> 32);
		size_t t;

		memset(so, 0, sizeof(so));
		memset(sn, 0, sizeof(sn));
		for (j = i; j < n && (uint32_t)(keys[j] >> 32) == src; j++) {
			const struct piece *p = &c->pieces[keys[j] & 0xffffffffu];
			so[p->wstep] += p->length;
			sn[p->nstep] += p->length;
		}
		for (t = 0; t < nw; t++) {
			double a = orig[t] ? (double)so[t] / orig[t] : 0;
			double b = now[t] ? (double)sn[t] / now[t] : 0;
			c->drift[t] += (a > b ? a - b : b - a) / 2;
		}
	}
	free(keys);
}

/* Balance and write every closed step of the window; empty the window. */
void
flush_window(struct construct *c)
{
	struct stepwork *w = &c->sw;
	size_t nw = c->nws, t, i, n;

	if (nw == 0)
		return;
	n = c->ws[nw - 1].end;
	sw_grow(w, n, 0, c->o->ranks);
	for (t = 0; t < nw; t++)
		for (i = c->ws[t].first; i < c->ws[t].end; i++)
			c->pieces[i].wstep = c->pieces[i].nstep = (uint32_t)t;
	if (nw > 1) {
		uint64_t lo[MAX_WINDOW], hi[MAX_WINDOW];
		int moves;

		if (n > c->wgroup_cap) {
			c->wgroup_cap = n + n / 2;
			c->wgroup = ovl_xrealloc(c->wgroup, c->wgroup_cap *
			    sizeof(*c->wgroup));
		}
		for (i = 0; i < n; i++) {
			w->len[i] = c->pieces[i].length;
			w->cost[i] = piece_cost(c, &c->pieces[i]);
			w->rank[i] = c->pieces[i].wstep;
			w->bin[i] = c->pieces[i].source;
			c->wgroup[i] = c->pieces[i].mix_pos;
		}
		/*
		 * Fixed shapes: the pieces of a document cut in several, and
		 * any piece without its end token, stay where the cut put
		 * them, so such a piece is still followed by its continuation
		 * or ends its step, and a sequence can end with it
		 * (uniform_fill); so do the pieces of a step with image runs,
		 * whose padding holds only where the cut put them (step.h).
		 */
		int runs[MAX_WINDOW] = { 0 };

		for (i = 0; c->o->uniform && i < n; i++)
			runs[c->pieces[i].wstep] |= piece_has_runs(c,
			    &c->pieces[i]);
		for (i = 0; c->o->uniform && i < n; i++) {
			const struct piece *p = &c->pieces[i];

			if (runs[p->wstep] || (i > 0 && p[-1].mix_pos == p->mix_pos) ||
			    (i + 1 < n && p[1].mix_pos == p->mix_pos) ||
			    ovl_tok_at(c->arena.p, c->tok_width,
			    p->tok + p->length - 1) != c->eod)
				c->wgroup[i] |= OVL_WINDOW_PINNED;
		}
		/*
		 * Every step keeps its token budget: at most its budget and at
		 * least what the cut guarantees (more than budget - seq-len, or
		 * what it had as cut); exactly as cut with fixed shapes.
		 */
		for (t = 0; t < nw; t++) {
			const struct wstep *ws = &c->ws[t];
			uint64_t cut = 0, floor;

			for (i = ws->first; i < ws->end; i++)
				cut += c->pieces[i].length;
			floor = ws->budget >= ws->seq_len ?
			    ws->budget - ws->seq_len + 1 : 0;
			lo[t] = c->o->uniform || cut < floor ? cut : floor;
			hi[t] = c->o->uniform ? cut : ws->budget;
		}
		moves = ovl_balance_window(c->bal, w->cost, w->len, w->bin,
		    c->wgroup, n, w->rank, nw, lo, hi, c->o->ranks,
		    16 * nw);
		if (moves > 0)
			for (i = 0; i < n; i++)
				c->pieces[i].nstep = w->rank[i];
		ovl_info(2, "window of steps %" PRIu64 "-%" PRIu64 ": %d "
		    "trades", c->ws[0].step, c->ws[nw - 1].step, moves);
		window_drift(c, nw);
	}
	for (t = 0; t < nw; t++) {
		size_t k = 0;

		for (i = 0; i < n; i++)
			if (c->pieces[i].nstep == t)
				w->idx[k++] = (uint32_t)i;
		do_step(c, &c->ws[t], k, nw > 1 ? c->drift[t] : 0,
		    nw > 1 ? c->moved[t] : 0);
	}
	/* the open step is empty whenever the window is flushed */
	c->npieces = 0;
	c->arena.len = 0;
	images_flushed(c);
	c->nws = 0;
	c->open_first = 0;
}

/* Close the open step (its last values in prev); flush a full window. */
void
close_step(struct construct *c, const struct wstep *prev, uint32_t next_sl)
{
	struct wstep *s;

	if (c->npieces == c->open_first)
		return;		/* nothing in it: resumed at its start */
	s = &c->ws[c->nws++];
	*s = *prev;
	s->first = c->open_first;
	s->end = c->npieces;
	c->open_first = c->npieces;
	if (c->nws >= c->o->window || next_sl != s->seq_len)
		flush_window(c);
}
