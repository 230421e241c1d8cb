/*
 * ovl-construct: fixed shapes (--uniform): the plans of a step, each
 * rank's sequences filled without hiding a document end from a reader
 * that sees one only at an end token (Megatron), the cheapest plan
 * chosen. See construct.h and ovl-construct(1).
 */
#include "construct.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct emitkey *ekeys;
static size_t ekeys_cap;

void
ekeys_grow(size_t n)
{
	if (n > ekeys_cap) {
		ekeys_cap = n + n / 2 + 16;
		ekeys = ovl_xrealloc(ekeys, ekeys_cap * sizeof(*ekeys));
	}
}

/* Room for n bins' cost, rank and micro-batch (the fills). */
static void
bins_grow(struct stepwork *w, size_t n)
{
	if (n > w->bins_cap) {
		w->bins_cap = n + n / 2;
		w->bcost = ovl_xrealloc(w->bcost, w->bins_cap *
		    sizeof(*w->bcost));
		w->brank = ovl_xrealloc(w->brank, w->bins_cap *
		    sizeof(*w->brank));
		w->bmb = ovl_xrealloc(w->bmb, w->bins_cap * sizeof(*w->bmb));
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
		p->pad = 0;
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
	return pieces_meet(&c->pieces[c->sw.idx[item_a]], end_a,
	    &c->pieces[c->sw.idx[item_b]], off_b);
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
 * Does a piece of source src hold image runs (IMAGE frames, or an image
 * placeholder token from its META), or padding that keeps one whole?
 */
int
piece_has_runs(const struct construct *c, const struct piece *p)
{
	return p->pad > 0 || p->nimg > 0 || (p->source < c->nrun &&
	    c->run_id[p->source] != OVL_STEP_NORUN);
}

/*
 * Does a cut at token x of step piece item fall inside an image's run
 * that a sequence of S tokens could hold whole (step.h)? The runs of its
 * IMAGE frames, else of its source's placeholder token.
 */
static int
cuts_run(const struct construct *c, uint32_t item, uint32_t x, uint32_t S)
{
	const struct piece *p = &c->pieces[c->sw.idx[item]];
	uint64_t y = (uint64_t)p->offset + x, a, e;
	uint32_t id;
	size_t i;

	if (x == 0 || x >= p->length)
		return 0;
	for (i = p->img0; i < (size_t)p->img0 + p->nimg; i++) {
		a = c->imgs[i].doc_pos;
		if (a < y && a + c->imgs[i].ntokens > y)
			return c->imgs[i].ntokens <= S;
	}
	if (p->nimg > 0 || p->source >= c->nrun ||
	    (id = c->run_id[p->source]) == OVL_STEP_NORUN)
		return 0;
#define TOK(k)	ovl_tok_at(c->arena.p, c->tok_width, p->tok + (k))
	if (TOK(x - 1) != id || TOK(x) != id)
		return 0;
	for (a = x - 1; a > 0 && TOK(a - 1) == id; a--)
		;
	for (e = x + 1; e < p->length && e - a <= S && TOK(e) == id; e++)
		;
#undef TOK
	return e - a <= S;
}

/*
 * Fragments of a fill in emission order: each bin's cost with the
 * contiguous fragments of one document counted as one piece (as emitted),
 * and whether every fragment followed by another in its bin ends its
 * document or is continued by it (*ok cleared when not).
 */
struct fragrun {
	uint32_t	S;		/* sequence length: runs it holds stay */
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
			if ((u->bin == bin && !u->closed) ||
			    cuts_run(c, u->item, u->end, u->S))
				*ok = 0;
		}
		if (cuts_run(c, item, off, u->S))
			*ok = 0;
		u->len = x;
	}
	u->have = 1;
	u->bin = bin;
	u->item = item;
	u->end = off + len;
	u->closed = ends_doc(c, item, off + len);
}

static void
run_end(struct construct *c, struct fragrun *u, double *cost_of_bin, int *ok)
{
	if (u->have) {
		cost_of_bin[u->bin] += ovl_cost_of(&c->o->cost, u->len);
		if (cuts_run(c, u->item, u->end, u->S))
			*ok = 0;
	}
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
	bins_grow(w, per);
	bc = w->bcost;
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
		struct fragrun u = { S, 0, 0, 0, 0, 0, 0 };
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
		run_end(c, &u, bc, ok);
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

	bins_grow(w, nb);
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
		struct fragrun u = { S, 0, 0, 0, 0, 0, 0 };

		for (k = 0; k < nf; k++) {
			struct ovl_frag *f = &w->frags[k];

			f->item = perm[f->item];
			run_add(c, &u, f->bin, f->item, f->off, f->len,
			    w->bcost, ok);
		}
		run_end(c, &u, w->bcost, ok);
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

/*
 * One walk over a step with image runs in the cutter's layout: the
 * pieces in arrival order, each after its padding (step.h), fill nb
 * sequences of S tokens one after the other, cut at every boundary.
 * Without keys: each sequence's cost into w->bcost (*ok cleared as
 * run_add says); with keys, the fragments become pieces and emission
 * keys by w->brank, w->bmb, and the ranks' tokens w->rtok. Returns the
 * number of fragments.
 */
static size_t
arrival_walk(struct construct *c, size_t n, uint32_t S, size_t nb, int keys,
    int *ok)
{
	struct stepwork *w = &c->sw;
	struct fragrun u = { S, 0, 0, 0, 0, 0, 0 };
	uint64_t at = 0, g;
	size_t i, nk = 0;
	uint32_t t;

	for (i = 0; i < n; i++) {
		uint32_t len = w->len[i], off = 0;

		at += c->pieces[w->idx[i]].pad;
		for (; off < len; off += t, at += t, nk++) {
			g = at / S;
			if (g >= nb)
				ovl_errx(OVL_EXIT_DATA, "a step of %zu sequences "
				    "cannot hold its pieces and padding", nb);
			t = S - (uint32_t)(at % S);
			if (t > len - off)
				t = len - off;
			if (!keys) {
				run_add(c, &u, (uint32_t)g, (uint32_t)i, off, t,
				    w->bcost, ok);
				continue;
			}
			w->rtok[w->brank[g]] += t;
			ekeys[nk].key = (uint64_t)w->brank[g] << 32 | w->bmb[g];
			ekeys[nk].sub = nk;
			ekeys[nk].piece = piece_cut(c, w->idx[i], off, t);
		}
	}
	if (!keys)
		run_end(c, &u, w->bcost, ok);
	return nk;
}

/*
 * Uniform shapes, a step with image runs: the cutter's layout
 * (arrival_walk), so no run a sequence holds is cut and a sequence
 * before a run ends in padding. none: the sequences to the ranks in
 * order, per each; cut (bal): whole sequences balanced over the ranks
 * (ovl_balance_bins), a rank's in the fill's order. Rank costs into rc;
 * *ok cleared when some sequence would hide a document end. Returns the
 * number of fragments; with keys, they become pieces and emission keys.
 */
static size_t
arrival_fill(struct construct *c, size_t n, uint32_t S, uint32_t per,
    double *rc, int keys, int bal, int *ok)
{
	struct stepwork *w = &c->sw;
	uint32_t ranks = c->o->ranks, r;
	size_t nb = (size_t)ranks * per, k, nk;

	bins_grow(w, nb);
	for (k = 0; k < nb; k++)
		w->bcost[k] = 0;
	nk = arrival_walk(c, n, S, nb, 0, ok);
	if (bal)
		(void)ovl_balance_bins(c->bal, w->bcost, nb, ranks, per,
		    w->brank, rc);
	else {
		memset(rc, 0, ranks * sizeof(*rc));
		for (k = 0; k < nb; k++) {
			w->brank[k] = (uint32_t)(k / per);
			rc[k / per] += w->bcost[k];
		}
	}
	memset(w->rfirst, 0, (ranks + 1) * sizeof(*w->rfirst));
	for (k = 0; k < nb; k++)
		w->bmb[k] = w->rfirst[w->brank[k]]++;
	if (keys) {
		for (r = 0; r < ranks; r++)
			w->rtok[r] = 0;
		ekeys_grow(nk);
		(void)arrival_walk(c, n, S, nb, 1, ok);
	}
	return nk;
}

/* The largest of v[0..n). */
double
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
 * of them among equals. In a step with image runs, none's is the
 * cutter's layout and cut its sequences balanced (arrival_fill), and a
 * plan that cuts a run a sequence holds is no candidate. Its emission keys are in ekeys (returns their
 * number), its rank costs in w->rcost; none's maximum and fragments
 * into *none_max and *none_nf, the plan into *plan.
 */
size_t
uniform_plan(struct construct *c, size_t n, uint32_t S, uint32_t per,
    double *none_max, size_t *none_nf, int *plan)
{
	const struct construct_opts *o = c->o;
	struct stepwork *w = &c->sw;
	uint32_t ranks = o->ranks;
	double mid_max, cut_max, maxc;
	int ok = 1;

	size_t i;
	int runs = 0;

	/* a step with image runs: none is the cutter's layout */
	for (i = 0; i < n && !runs; i++)
		runs = piece_has_runs(c, &c->pieces[w->idx[i]]);
	*none_nf = runs ? arrival_fill(c, n, S, per, w->rcost, 0, 0, &ok) :
	    uniform_fill(c, OVL_BAL_NONE, n, S, per, w->rcost, 0, &ok);
	*none_max = max_of(w->rcost, ranks);
	if (o->balance == OVL_BAL_NONE) {
		*plan = PLAN_NONE;
		return runs ? arrival_fill(c, n, S, per, w->rcost, 1, 0, &ok) :
		    uniform_fill(c, OVL_BAL_NONE, n, S, per, w->rcost, 1, &ok);
	}
	/* a plan that would hide a document end is not a candidate */
	ok = 1;
	(void)cut_fill(c, n, S, per, w->rcost, 0, 1, &ok);
	mid_max = ok ? max_of(w->rcost, ranks) : HUGE_VAL;
	ok = 1;
	/* with image runs: none's sequences as the cutter padded them */
	(void)(runs ? arrival_fill(c, n, S, per, w->rcost, 0, 1, &ok) :
	    cut_fill(c, n, S, per, w->rcost, 0, 0, &ok));
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
		return runs ? arrival_fill(c, n, S, per, w->rcost, 1, 1, &ok) :
		    cut_fill(c, n, S, per, w->rcost, 1, 0, &ok);
	}
	*plan = PLAN_NONE;
	return runs ? arrival_fill(c, n, S, per, w->rcost, 1, 0, &ok) :
	    uniform_fill(c, OVL_BAL_NONE, n, S, per, w->rcost, 1, &ok);
}

void
ekeys_free(void)
{
	free(ekeys);
	ekeys = NULL;
}
