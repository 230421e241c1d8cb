/*
 * ovl-construct: one step: balance its pieces over the ranks, pack every
 * rank's pieces into sequences, emit SEQ frames. See construct.h.
 */
#include "construct.h"

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

/* Does piece q continue piece p in their document? */
int
piece_follows(const struct piece *p, const struct piece *q)
{
	return p->mix_pos == q->mix_pos && p->source == q->source &&
	    (uint64_t)p->offset + p->length == q->offset;
}

/*
 * One sequence: pieces idx[0..np) of the step in order. Pieces that
 * continue each other are written as one (one cu_seqlens segment, its
 * positions going on), as a reader that sees document ends only at end
 * tokens reads them.
 */
static void
emit_seq(struct construct *c, uint64_t step, uint32_t seq_len, uint32_t rank,
    uint32_t mb, const uint32_t *idx, size_t np)
{
	const struct construct_opts *o = c->o;
	uint32_t real = 0, ntok, k, *cu, nseg = 0, seg, tw = 4, pw = 4;
	uint64_t pmax = 0, segend = 0;
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
		s.flags = 0;
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
enum { PLAN_BALANCED, PLAN_MID, PLAN_CUT, PLAN_NONE };
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

static struct emitkey *ekeys;
static size_t ekeys_cap;

static void
ekeys_grow(size_t n)
{
	if (n > ekeys_cap) {
		ekeys_cap = n + n / 2 + 16;
		ekeys = ovl_xrealloc(ekeys, ekeys_cap * sizeof(*ekeys));
	}
}

/* A new piece: tokens [off, off + len) of piece i (images stay first). */
static uint32_t
piece_cut(struct construct *c, uint32_t i, uint32_t off, uint32_t len)
{
	struct piece *p;

	if (off == 0 && len == c->pieces[i].length)
		return i;
	if (c->npieces == c->pcap) {
		c->pcap = c->pcap ? 2 * c->pcap : 1024;
		c->pieces = ovl_xrealloc(c->pieces, c->pcap * sizeof(*p));
	}
	p = &c->pieces[c->npieces];
	*p = c->pieces[i];
	p->offset += off;
	p->tok += off;
	p->length = len;
	if (off > 0) {
		p->images = 0;
		p->enc = 0;
	}
	return (uint32_t)c->npieces++;
}

/*
 * Does tokens [off_b, ...) of step piece item_b continue tokens [..,
 * end_a) of step piece item_a in their document? Then a sequence holds
 * them as one piece (emit_seq): positions go on, as a reader that sees
 * document ends only at end tokens (Megatron) has them.
 */
static int
continues(const struct construct *c, uint32_t item_a, uint32_t end_a,
    uint32_t item_b, uint32_t off_b)
{
	const struct piece *p = &c->pieces[c->sw.idx[item_a]];
	const struct piece *q = &c->pieces[c->sw.idx[item_b]];

	return p->mix_pos == q->mix_pos && p->source == q->source &&
	    (uint64_t)p->offset + end_a == (uint64_t)q->offset + off_b;
}

/* Do tokens [.., end) of step piece item end with the end token? */
static int
ends_doc(const struct construct *c, uint32_t item, uint32_t end)
{
	const struct piece *p = &c->pieces[c->sw.idx[item]];

	return end > 0 && ovl_tok_at(c->arena.p, c->tok_width,
	    p->tok + end - 1) == c->eod;
}

/*
 * Fragments of a fill in emission order: each bin's cost with the
 * contiguous fragments of one document counted as one piece (as emitted),
 * and whether every fragment followed by another in its bin ends its
 * document or is continued by it (*ok cleared when not).
 */
struct fragrun {
	uint32_t	bin, item, end;
	uint64_t	len;		/* tokens of the run, image tokens too */
	int		have, closed;
};

static void
run_add(struct construct *c, struct fragrun *u, uint32_t bin, uint32_t item,
    uint32_t off, uint32_t len, double *cost_of_bin, int *ok)
{
	const struct construct_opts *o = c->o;
	uint64_t x = (uint64_t)len + (off == 0 ? c->sw.extra[item] : 0);

	if (u->have && u->bin == bin && continues(c, u->item, u->end, item,
	    off)) {
		u->len += x;
	} else {
		if (u->have) {
			cost_of_bin[u->bin] += ovl_cost_of(&o->cost, u->len);
			if (u->bin == bin && !u->closed)
				*ok = 0;
		}
		u->len = x;
	}
	u->have = 1;
	u->bin = bin;
	u->item = item;
	u->end = off + len;
	u->closed = ends_doc(c, item, off + len);
}

static void
run_end(struct construct *c, struct fragrun *u, double *cost_of_bin)
{
	if (u->have)
		cost_of_bin[u->bin] += ovl_cost_of(&c->o->cost, u->len);
	u->have = 0;
}

/*
 * One rank's chains (uniform_fill) filled one after the other, those that
 * lack their end token last: the fragments in w->frags, their number.
 */
static size_t
concat_opens_last(struct construct *c, size_t nc, uint32_t S, uint32_t per)
{
	struct stepwork *w = &c->sw;
	size_t i, m = 0, nf;
	int pass;

	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < nc; i++)
			if ((w->copen[i] != 0) == pass)
				w->cord[m++] = (uint32_t)i;
	for (i = 0; i < nc; i++)
		w->clen[i] = w->plen[w->cord[i]];
	nf = ovl_pack_fill(c->pk, OVL_PACK_CONCAT, w->clen, nc, S, per,
	    w->frags);
	for (i = 0; i < nf; i++)
		w->frags[i].item = w->cord[w->frags[i].item];
	return nf;
}

/*
 * Do one rank's chain fragments w->frags[0..nf) (parts pi[], chains
 * w->cfirst) keep every document end where Megatron sees it: a part
 * slice followed by another in its sequence ends its document or is
 * continued by it?
 */
static int
chain_frags_ok(const struct construct *c, const uint32_t *pi, size_t nf)
{
	const struct stepwork *w = &c->sw;
	size_t k, j;
	uint32_t pbin = UINT32_MAX, pitem = 0, pend = 0;
	int pclosed = 1;

	for (k = 0; k < nf; k++) {
		const struct ovl_frag *f = &w->frags[k];
		uint32_t cs = 0, fe = f->off + f->len;

		for (j = w->cfirst[f->item]; j < w->cfirst[f->item + 1]; j++) {
			const struct ovl_part *pt = &w->parts[pi[j]];
			uint32_t lo = f->off > cs ? f->off : cs;
			uint32_t hi = fe < cs + pt->len ? fe : cs + pt->len;

			cs += pt->len;
			if (lo >= hi)
				continue;
			lo = pt->off + lo - (cs - pt->len);
			hi = pt->off + hi - (cs - pt->len);
			if (pbin == f->bin && !pclosed &&
			    !continues(c, pitem, pend, pt->item, lo))
				return 0;
			pbin = f->bin;
			pitem = pt->item;
			pend = hi;
			pclosed = ends_doc(c, pt->item, hi);
		}
	}
	return 1;
}

/*
 * Uniform shapes: the step's pieces to ranks of exactly per x seq_len
 * tokens (ovl_balance_exact), each rank's parts into per sequences,
 * cutting where they do not fit. A rank's parts that continue each other
 * (a document longer than a sequence, a piece cut between ranks and both
 * parts here) are one chain, kept in order. With none (or --pack concat)
 * the chains fill the sequences one after the other in arrival order, cut
 * at every boundary; else by ovl_pack_fill_ends, so that a fragment
 * without its end token is the last of its sequence (the concat fill when
 * that cannot be done). Rank costs into rc; *ok cleared when some
 * sequence would hide a document end from Megatron. Returns the number of
 * fragments; with keys, they become pieces and emission keys.
 */
static size_t
uniform_fill(struct construct *c, int method, size_t n, uint32_t S,
    uint32_t per, double *rc, int keys, int *ok)
{
	const struct construct_opts *o = c->o;
	struct stepwork *w = &c->sw;
	uint32_t ranks = o->ranks, r;
	size_t np, i, k, nk = 0, need = OVL_BALANCE_EXACT_PARTS(n, ranks);
	double *bc = w->bcost;

	if (need > w->parts_cap) {
		w->parts_cap = need + need / 2;
		w->parts = ovl_xrealloc(w->parts, w->parts_cap *
		    sizeof(*w->parts));
		w->plen = ovl_xrealloc(w->plen, w->parts_cap * sizeof(*w->plen));
		w->pidx = ovl_xrealloc(w->pidx, w->parts_cap * sizeof(*w->pidx));
		w->cfirst = ovl_xrealloc(w->cfirst, (w->parts_cap + 1) *
		    sizeof(*w->cfirst));
		w->copen = ovl_xrealloc(w->copen, w->parts_cap *
		    sizeof(*w->copen));
		w->cord = ovl_xrealloc(w->cord, w->parts_cap *
		    sizeof(*w->cord));
		w->clen = ovl_xrealloc(w->clen, w->parts_cap *
		    sizeof(*w->clen));
	}
	if (per > w->bins_cap) {
		w->bins_cap = per + per / 2;
		w->bcost = ovl_xrealloc(w->bcost, w->bins_cap *
		    sizeof(*w->bcost));
		w->brank = ovl_xrealloc(w->brank, w->bins_cap *
		    sizeof(*w->brank));
		w->bmb = ovl_xrealloc(w->bmb, w->bins_cap * sizeof(*w->bmb));
		bc = w->bcost;
	}
	np = ovl_balance_exact(c->bal, method, &o->cost, w->cost, w->len,
	    w->extra, n, ranks, (uint64_t)per * S, w->parts, rc);
	if (np + per > w->frags_cap) {
		w->frags_cap = np + per + (np + per) / 2;
		w->frags = ovl_xrealloc(w->frags, w->frags_cap *
		    sizeof(*w->frags));
	}
	if (keys)
		ekeys_grow(np + (size_t)per * ranks);
	/* the parts of each rank, in arrival order */
	memset(w->rfirst, 0, (ranks + 1) * sizeof(*w->rfirst));
	for (i = 0; i < np; i++)
		w->rfirst[w->parts[i].rank + 1]++;
	for (r = 0; r < ranks; r++)
		w->rfirst[r + 1] += w->rfirst[r];
	for (i = 0; i < np; i++)
		w->pidx[w->rfirst[w->parts[i].rank]++] = (uint32_t)i;
	for (r = ranks; r > 0; r--)
		w->rfirst[r] = w->rfirst[r - 1];
	w->rfirst[0] = 0;
	memset(rc, 0, ranks * sizeof(*rc));
	for (r = 0; r < ranks; r++) {
		size_t a = w->rfirst[r], z = w->rfirst[r + 1], nf, j, nc = 0;
		uint32_t *pi = w->pidx + a;
		struct fragrun u = { 0 };
		int concat, try;

		/* insertion sort by (piece, offset): parts mostly in order */
		for (j = 1; j < z - a; j++) {
			uint32_t x = pi[j];
			size_t q = j;
			while (q > 0 && (w->parts[pi[q - 1]].item >
			    w->parts[x].item || (w->parts[pi[q - 1]].item ==
			    w->parts[x].item && w->parts[pi[q - 1]].off >
			    w->parts[x].off))) {
				pi[q] = pi[q - 1];
				q--;
			}
			pi[q] = x;
		}
		/* chains of parts that continue each other */
		for (j = 0; j < z - a; j++) {
			const struct ovl_part *pt = &w->parts[pi[j]];
			const struct ovl_part *pv = j > 0 ?
			    &w->parts[pi[j - 1]] : NULL;

			if (pv == NULL || !continues(c, pv->item, pv->off +
			    pv->len, pt->item, pt->off)) {
				w->cfirst[nc] = (uint32_t)j;
				w->plen[nc++] = 0;
			}
			w->plen[nc - 1] += pt->len;
			w->copen[nc - 1] = !ends_doc(c, pt->item, pt->off +
			    pt->len);
		}
		w->cfirst[nc] = (uint32_t)(z - a);
		concat = method == OVL_BAL_NONE || o->pack == OVL_PACK_CONCAT;
		for (try = 0; try < 2; try++) {
			nf = concat != try ? concat_opens_last(c, nc, S, per) :
			    ovl_pack_fill_ends(c->pk, w->plen, w->copen, nc, S,
			    per, w->frags);
			if (nf != SIZE_MAX && chain_frags_ok(c, pi, nf))
				break;
		}
		if (try == 2) {
			/* neither: the concat fill, and the plan is no candidate */
			nf = concat_opens_last(c, nc, S, per);
			*ok = 0;
		}
		/* chain fragments to the parts they cover, in order */
		for (k = 0; k < per; k++)
			bc[k] = 0;
		w->rtok[r] = 0;
		for (k = 0; k < nf; k++) {
			const struct ovl_frag *f = &w->frags[k];
			uint32_t cs = 0, fe = f->off + f->len;

			for (j = w->cfirst[f->item]; j < w->cfirst[f->item + 1];
			    j++) {
				const struct ovl_part *pt = &w->parts[pi[j]];
				uint32_t lo = f->off > cs ? f->off : cs;
				uint32_t hi = fe < cs + pt->len ? fe :
				    cs + pt->len;

				cs += pt->len;
				if (lo >= hi)
					continue;
				lo -= cs - pt->len;
				hi -= cs - pt->len;
				run_add(c, &u, f->bin, pt->item, pt->off + lo,
				    hi - lo, bc, ok);
				w->rtok[r] += hi - lo;
				if (keys) {
					ekeys[nk].key = (uint64_t)r << 32 |
					    f->bin;
					ekeys[nk].sub = nk;
					ekeys[nk].piece = piece_cut(c,
					    w->idx[pt->item], pt->off + lo,
					    hi - lo);
				}
				nk++;
			}
		}
		run_end(c, &u, bc);
		for (k = 0; k < per; k++)
			rc[r] += bc[k];
	}
	return nk;
}

/* The mid-cut chain looks this many pieces ahead past one that does not fit. */
#define MID_LOOK	64

/*
 * The order of the mid-cut chain: the longest pieces (at least a quarter
 * of S, at most one per sequence boundary) straddle the boundaries of
 * the sequences filled one after the other, each near its middle (the
 * next pieces in arrival order that bring the fill closer to where its
 * middle falls on the boundary go before it, looking up to MID_LOOK
 * pieces past one that does not), long and short ones alternating; the
 * other pieces after, in arrival order. Writes the order to
 * perm[0..n).
 */
static void
mid_order(struct construct *c, const uint32_t *len, size_t n, uint32_t S,
    size_t nb, uint32_t *perm)
{
	struct stepwork *w = &c->sw;
	uint32_t *byl = w->order, *isx = w->bin2;
	size_t i, k = 0, zi, fi = 0, m = 0, q, seen;
	uint64_t pos = 0;

	for (i = 0; i < n; i++)
		byl[i] = (uint32_t)i;
	ovl_pack_sort_desc(byl, n, len);
	while (k < n && k + 1 < nb && len[byl[k]] >= S / 4 &&
	    len[byl[k]] >= 2)
		k++;
	for (i = 0; i < n; i++)
		isx[i] = 0;
	for (i = 0; i < k; i++)
		isx[byl[i]] = 1;
	for (zi = 0; zi < k; zi++) {
		/* long and short alternating: 0, k-1, 1, k-2, ... */
		uint32_t x = byl[zi % 2 == 0 ? zi / 2 : k - 1 - zi / 2];
		uint64_t L = len[x], target;

		target = (pos / S + 1) * S;
		target = target > pos + (L + 1) / 2 ? target - (L + 1) / 2 :
		    pos;
		/* the next unused pieces that bring pos closer to target */
		while (fi < n && isx[fi] != 0)
			fi++;
		for (q = fi, seen = 0; q < n && seen < MID_LOOK && pos < target;
		    q++) {
			uint64_t nx;

			if (isx[q] != 0)
				continue;
			nx = pos + len[q];
			if ((nx > target ? nx - target : target - nx) >=
			    target - pos) {
				seen++;
				continue;
			}
			perm[m++] = (uint32_t)q;
			isx[q] = 2;
			pos = nx;
		}
		perm[m++] = x;
		pos += L;
	}
	for (; fi < n; fi++)
		if (isx[fi] == 0)
			perm[m++] = (uint32_t)fi;
}

/*
 * Uniform shapes, the cut plans: the step's pieces fill ranks x per
 * sequences of S tokens one after the other, cut at every sequence
 * boundary (as none cuts them), in arrival order or (mid) in the
 * mid-cut chain's order, and whole sequences go to the ranks, per each,
 * balanced (ovl_balance_bins). Rank costs into rc. Returns the number
 * of fragments; with keys, they become pieces and emission keys.
 */
static size_t
cut_fill(struct construct *c, size_t n, uint32_t S, uint32_t per, double *rc,
    int keys, int mid, int *ok)
{
	const struct construct_opts *o = c->o;
	struct stepwork *w = &c->sw;
	uint32_t ranks = o->ranks, r, *perm = w->rbin, *plen = w->rlen, i;
	size_t nb = (size_t)ranks * per, nf, k, nk = 0, nu, m;
	int pass;

	if (nb > w->bins_cap) {
		w->bins_cap = nb + nb / 2;
		w->bcost = ovl_xrealloc(w->bcost, w->bins_cap *
		    sizeof(*w->bcost));
		w->brank = ovl_xrealloc(w->brank, w->bins_cap *
		    sizeof(*w->brank));
		w->bmb = ovl_xrealloc(w->bmb, w->bins_cap * sizeof(*w->bmb));
	}
	if (n + nb > w->frags_cap) {
		w->frags_cap = n + nb + (n + nb) / 2;
		w->frags = ovl_xrealloc(w->frags, w->frags_cap *
		    sizeof(*w->frags));
	}
	/* chains: pieces that continue each other stay together, in order */
	for (k = 0, nu = 0; k < n; k++) {
		if (k == 0 || !continues(c, (uint32_t)k - 1, w->len[k - 1],
		    (uint32_t)k, 0)) {
			w->ufirst[nu] = (uint32_t)k;
			w->ulen[nu++] = 0;
		}
		w->ulen[nu - 1] += w->len[k];
	}
	w->ufirst[nu] = (uint32_t)n;
	if (mid)
		mid_order(c, w->ulen, nu, S, nb, w->uperm);
	else
		for (k = 0; k < nu; k++)
			w->uperm[k] = (uint32_t)k;
	/* chains without their end token last (a step's last piece) */
	for (pass = 0, m = 0; pass < 2; pass++)
		for (k = 0; k < nu; k++) {
			uint32_t u = w->uperm[k], e = w->ufirst[u + 1] - 1;

			if (ends_doc(c, e, w->len[e]) != !pass)
				continue;
			for (i = w->ufirst[u]; i <= e; i++)
				perm[m++] = i;
		}
	for (k = 0; k < n; k++)
		plen[k] = w->len[perm[k]];
	nf = ovl_pack_fill(c->pk, OVL_PACK_CONCAT, plen, n, S, nb, w->frags);
	for (k = 0; k < nb; k++)
		w->bcost[k] = 0;
	{
		struct fragrun u = { 0 };

		for (k = 0; k < nf; k++) {
			struct ovl_frag *f = &w->frags[k];

			f->item = perm[f->item];
			run_add(c, &u, f->bin, f->item, f->off, f->len,
			    w->bcost, ok);
		}
		run_end(c, &u, w->bcost);
	}
	(void)ovl_balance_bins(c->bal, w->bcost, nb, ranks, per, w->brank, rc);
	/* a rank's sequences keep the fill's order */
	memset(w->rtok, 0, ranks * sizeof(*w->rtok));
	memset(w->rfirst, 0, (ranks + 1) * sizeof(*w->rfirst));
	for (k = 0; k < nb; k++)
		w->bmb[k] = w->rfirst[w->brank[k]]++;
	if (keys)
		ekeys_grow(nf);
	for (k = 0; k < nf; k++) {
		const struct ovl_frag *f = &w->frags[k];

		r = w->brank[f->bin];
		w->rtok[r] += f->len;
		if (keys) {
			ekeys[nk].key = (uint64_t)r << 32 | w->bmb[f->bin];
			ekeys[nk].sub = nk;
			ekeys[nk].piece = piece_cut(c, w->idx[f->item], f->off,
			    f->len);
		}
		nk++;
	}
	return nk;
}

/* The largest of v[0..n). */
static double
max_of(const double *v, uint32_t n)
{
	double m = 0;
	uint32_t i;

	for (i = 0; i < n; i++)
		if (v[i] > m)
			m = v[i];
	return m;
}

/*
 * Fixed shapes: the plan with the least maximum rank cost of the
 * method's own (pieces whole where they fit), the two cut plans
 * (cut_fill, mid-cut chain first; not for none) and none's, the first
 * of them among equals. Its emission keys are in ekeys (returns their
 * number), its rank costs in w->rcost; none's maximum and fragments
 * into *none_max and *none_nf, the plan into *plan.
 */
static size_t
uniform_plan(struct construct *c, size_t n, uint32_t S, uint32_t per,
    double *none_max, size_t *none_nf, int *plan)
{
	const struct construct_opts *o = c->o;
	struct stepwork *w = &c->sw;
	uint32_t ranks = o->ranks;
	double mid_max, cut_max, maxc;
	int ok = 1;

	*none_nf = uniform_fill(c, OVL_BAL_NONE, n, S, per, w->rcost, 0, &ok);
	*none_max = max_of(w->rcost, ranks);
	if (o->balance == OVL_BAL_NONE) {
		*plan = PLAN_NONE;
		return uniform_fill(c, OVL_BAL_NONE, n, S, per, w->rcost, 1,
		    &ok);
	}
	/* a plan that would hide a document end is not a candidate */
	ok = 1;
	(void)cut_fill(c, n, S, per, w->rcost, 0, 1, &ok);
	mid_max = ok ? max_of(w->rcost, ranks) : HUGE_VAL;
	ok = 1;
	(void)cut_fill(c, n, S, per, w->rcost, 0, 0, &ok);
	cut_max = ok ? max_of(w->rcost, ranks) : HUGE_VAL;
	ok = 1;
	(void)uniform_fill(c, o->balance, n, S, per, w->rcost, 0, &ok);
	maxc = ok ? max_of(w->rcost, ranks) : HUGE_VAL;
	if (maxc <= mid_max && maxc <= cut_max && maxc <= *none_max) {
		*plan = PLAN_BALANCED;
		return uniform_fill(c, o->balance, n, S, per, w->rcost, 1, &ok);
	}
	if (mid_max <= cut_max && mid_max <= *none_max) {
		*plan = PLAN_MID;
		return cut_fill(c, n, S, per, w->rcost, 1, 1, &ok);
	}
	if (cut_max <= *none_max) {
		*plan = PLAN_CUT;
		return cut_fill(c, n, S, per, w->rcost, 1, 0, &ok);
	}
	*plan = PLAN_NONE;
	return uniform_fill(c, OVL_BAL_NONE, n, S, per, w->rcost, 1, &ok);
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
	int want_none = c->stats != NULL || ovl_verbose >= 1;

	memset(&fg, 0, sizeof(fg));
	fg.drift = drift;
	fg.moved = moved;
	for (i = 0; i < n; i++) {
		const struct piece *p = &c->pieces[w->idx[i]];
		w->len[i] = p->length;
		w->extra[i] = p->images;
		w->cost[i] = piece_cost(c, p);
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
		}
		fg.maxc = ovl_balance(c->bal, o->balance, w->cost, w->len, n,
		    ranks, w->rank, w->rcost);
		pack_ranks(c, n, s->seq_len, nmb);
		ekeys_grow(n);
		memset(w->rtok, 0, ranks * sizeof(*w->rtok));
		for (i = 0; i < n; i++) {
			ekeys[i].key = (uint64_t)w->rank[i] << 32 | w->bin[i];
			ekeys[i].sub = (uint64_t)i << 32;
			ekeys[i].piece = w->idx[i];
			w->rtok[w->rank[i]] += w->len[i];
		}
		nk = n;
	} else {
		uint64_t rs = (uint64_t)ranks * s->seq_len;

		per = (s->budget + rs - 1) / rs;
		if (per < o->mb)
			per = o->mb;
		/*
		 * Steps are cut exactly, so only the stream's last step holds
		 * less than its budget: as many micro-batches as it needs.
		 */
		if (tokens < s->budget && (tokens + rs - 1) / rs < per)
			per = (tokens + rs - 1) / rs > 0 ?
			    (tokens + rs - 1) / rs : 1;
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
		/* the bounds of the pieces as placed: cutting lowers costs */
		sw_grow(w, nk, 0, ranks);
		for (i = 0; i < nk; i++) {
			const struct piece *p = &c->pieces[ekeys[i].piece];
			w->cost[i] = piece_cost(c, p);
		}
		fg.lb = ovl_balance_lower_bound(w->cost, nk, ranks, w->scratch);
		fg.tb = ovl_balance_tight_bound(w->cost, nk, ranks, w->scratch);
	}
	if (want_none)
		write_stats(c, s, n, tokens, pad, nmb, w->nmb_none, &fg);
	/* emit rank by rank, micro-batch by micro-batch */
	qsort(ekeys, nk, sizeof(*ekeys), cmp_emitkey);
	sw_grow(w, nk, 0, ranks);
	{
		size_t a = 0;
		uint32_t m;

		for (r = 0; r < ranks; r++) {
			for (m = 0; m < nmb[r]; m++) {
				uint64_t key = (uint64_t)r << 32 | m;
				size_t z = a;

				while (z < nk && ekeys[z].key == key)
					z++;
				for (i = a; i < z; i++)
					w->order[i - a] = ekeys[i].piece;
				emit_seq(c, s->step, s->seq_len, r, m, w->order,
				    z - a);
				a = z;
			}
			emit_step_end(c, s->step, r, nmb[r]);
		}
	}
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
		 * (uniform_fill).
		 */
		for (i = 0; c->o->uniform && i < n; i++) {
			const struct piece *p = &c->pieces[i];

			if ((i > 0 && p[-1].mix_pos == p->mix_pos) ||
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


void
ekeys_free(void)
{
	free(ekeys);
	ekeys = NULL;
}
