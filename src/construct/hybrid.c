/*
 * ovl-construct: hybrid context parallelism (cp-balance hybrid). Each
 * piece runs on its own group of CP ranks, as Megatron-LM's hybrid
 * context parallelism runs a sub-sample: its CP size the next power of
 * two of its length over what one CP rank holds (seq-len / cp), up to
 * cp; the groups balanced over every (DP, CP) rank. See construct.h.
 */
#include "construct.h"

#include "cp.h"

/* One sequence of the step: its DP rank, CP group and first piece. */
struct hseq {
	uint32_t	rank, k, first;	/* first: CP rank within its DP rank */
	uint32_t	arrival;	/* its first piece's place in the step */
	uint32_t	mb;		/* its place in its rank's sequences */
};

static struct {
	uint32_t	*k, *first, *seq, *bin, *lens, *idx;
	double		*cost, *rc, *scr;
	size_t		 cap, rcap, scr_cap;
	struct hseq	*seqs;
	uint32_t	*sord;
	size_t		 scap;
} H;

static void
grow(size_t n, size_t nr)
{
	if (n > H.cap) {
		H.cap = n + n / 2 + 16;
		H.k = ovl_xrealloc(H.k, H.cap * sizeof(*H.k));
		H.first = ovl_xrealloc(H.first, H.cap * sizeof(*H.first));
		H.seq = ovl_xrealloc(H.seq, H.cap * sizeof(*H.seq));
		H.bin = ovl_xrealloc(H.bin, H.cap * sizeof(*H.bin));
		H.lens = ovl_xrealloc(H.lens, H.cap * sizeof(*H.lens));
		H.idx = ovl_xrealloc(H.idx, H.cap * sizeof(*H.idx));
		H.cost = ovl_xrealloc(H.cost, H.cap * sizeof(*H.cost));
	}
	if (n > H.scap) {
		H.scap = H.cap;
		H.seqs = ovl_xrealloc(H.seqs, H.scap * sizeof(*H.seqs));
		H.sord = ovl_xrealloc(H.sord, H.scap * sizeof(*H.sord));
	}
	if (nr > H.rcap) {
		H.rcap = nr;
		H.rc = ovl_xrealloc(H.rc, H.rcap * sizeof(*H.rc));
	}
}

void
hybrid_free(void)
{
	free(H.k);
	free(H.first);
	free(H.seq);
	free(H.bin);
	free(H.lens);
	free(H.idx);
	free(H.cost);
	free(H.rc);
	free(H.scr);
	free(H.seqs);
	free(H.sord);
	memset(&H, 0, sizeof(H));
}

/* A rank's sequences: larger groups first, then by first CP rank, arrival. */
static int
cmp_hseq(const void *a, const void *b)
{
	const struct hseq *x = &H.seqs[*(const uint32_t *)a];
	const struct hseq *y = &H.seqs[*(const uint32_t *)b];

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->k != y->k)
		return x->k > y->k ? -1 : 1;
	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	return x->arrival < y->arrival ? -1 : x->arrival > y->arrival;
}

size_t
hybrid_plan(struct construct *c, size_t n, uint32_t seq_len, uint32_t *nmb,
    double *maxc, double *lb)
{
	const struct construct_opts *o = c->o;
	struct stepwork *w = &c->sw;
	uint32_t N = o->cp, R = o->ranks, per = seq_len / N, r, h, j;
	size_t nr = (size_t)R * N, i, ns = 0, q;
	double v[OVL_PLAN_MAX_CP];

	grow(n, nr);
	if (n * N > H.scr_cap) {
		H.scr_cap = n * N + n * N / 2 + 16;
		H.scr = ovl_xrealloc(H.scr, H.scr_cap * sizeof(*H.scr));
	}
	for (i = 0; i < n; i++) {
		const struct piece *p = &c->pieces[w->idx[i]];
		uint32_t k = ovl_cp_hybrid_size(p->length, per, N);

		H.k[i] = k;
		cp_rank_costs_k(o, k, p->length, v);
		H.cost[i] = 0;
		for (j = 0; j < k; j++)
			if (v[j] > H.cost[i])
				H.cost[i] = v[j];
		H.cost[i] += p->enc / k;
	}
	*maxc = ovl_balance_hybrid(c->bal, H.cost, H.k, n, (uint32_t)nr,
	    H.first, H.rc);
	*lb = ovl_balance_hybrid_bound(H.cost, H.k, n, (uint32_t)nr, H.scr);
	/* a group of more than one CP rank: one piece a sequence */
	for (i = 0; i < n; i++) {
		if (H.k[i] == 1)
			continue;
		H.seq[i] = (uint32_t)ns;
		H.seqs[ns++] = (struct hseq){ H.first[i] / N, H.k[i],
		    H.first[i] % N, (uint32_t)i, 0 };
	}
	/* one CP rank's own pieces packed into sequences of per tokens */
	for (h = 0; h < nr; h++) {
		size_t m = 0, nb, b0 = ns;

		for (i = 0; i < n; i++)
			if (H.k[i] == 1 && H.first[i] == h) {
				H.idx[m] = (uint32_t)i;
				H.lens[m++] = ovl_cp_padded(1, o->cp_pad,
				    c->pieces[w->idx[i]].length);
			}
		if (m == 0)
			continue;
		nb = ovl_pack(c->pk, o->pack, H.lens, m, per, H.bin);
		for (q = 0; q < nb; q++)
			H.seqs[ns + q] = (struct hseq){ h / N, 1, h % N,
			    UINT32_MAX, 0 };
		ns += nb;
		for (q = 0; q < m; q++) {
			struct hseq *s = &H.seqs[b0 + H.bin[q]];

			H.seq[H.idx[q]] = (uint32_t)(b0 + H.bin[q]);
			if (H.idx[q] < s->arrival)
				s->arrival = H.idx[q];
		}
	}
	/* each rank's order, its sequences numbered in it */
	for (q = 0; q < ns; q++)
		H.sord[q] = (uint32_t)q;
	qsort(H.sord, ns, sizeof(*H.sord), cmp_hseq);
	memset(nmb, 0, R * sizeof(*nmb));
	if (ns > w->hgroup_cap) {
		w->hgroup_cap = ns + ns / 2 + 16;
		w->hgroup = ovl_xrealloc(w->hgroup, w->hgroup_cap *
		    sizeof(*w->hgroup));
	}
	for (q = 0; q < ns; q++) {
		struct hseq *s = &H.seqs[H.sord[q]];

		s->mb = nmb[s->rank]++;
		w->hgroup[q] = OVL_CP_GROUP(s->k, s->first);
	}
	ekeys_grow(n);
	memset(w->rtok, 0, R * sizeof(*w->rtok));
	for (i = 0; i < n; i++) {
		const struct hseq *s = &H.seqs[H.seq[i]];

		ekeys[i].key = (uint64_t)s->rank << 32 | s->mb;
		ekeys[i].sub = (uint64_t)i << 32;
		ekeys[i].piece = w->idx[i];
		w->rtok[s->rank] += c->pieces[w->idx[i]].length;
	}
	for (r = 0; r < R; r++) {
		w->rcost[r] = 0;
		for (j = 0; j < N; j++)
			w->rcost[r] += H.rc[(size_t)r * N + j] / N;
	}
	return n;
}
