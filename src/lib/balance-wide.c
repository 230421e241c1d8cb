/*
 * balance-wide: kk past its exact size (balance-int.h,
 * ovl_balance__kk_exact_cells).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "balance-int.h"
#include "buf.h"

/* ---- kk above its exact size ----------------------------------------- */

/*
 * Past ovl_balance__kk_exact_cells the exact path's cost grows with
 * pieces x ranks x ranks (every improvement step looks at every rank and
 * every piece). The wide path starts from LPT and runs the same two
 * improvements, each step only between the costliest rank and the
 * cheapest few, over per-rank lists kept sorted as pieces move: a step
 * costs O(ranks + pieces of two ranks x KKW_CAND x log), so a step of n
 * pieces costs O(n log n + ranks^2) in all.
 */
size_t ovl_balance__kk_exact_cells = (size_t)1 << 16;

#define KKW_CAND	128	/* ranks a move or a swap may go to */
#define KKW_PAIR	32	/* ranks a two-rank repartition tries */

struct ovl_kkwide {
	uint32_t	**a;	/* per rank: its pieces, costliest first */
	uint32_t	 *n, *cap;
	size_t		  ranks_cap;
	double		 *tree;	/* ffd_wide: 2 x leaves */
	size_t		  leaves, tree_cap;
};

void
ovl_balance__kk_wide_free(struct ovl_kkwide *w)
{
	size_t r;

	if (w == NULL)
		return;
	for (r = 0; r < w->ranks_cap; r++)
		free(w->a[r]);
	free(w->a);
	free(w->n);
	free(w->cap);
	free(w->tree);
	free(w);
}

/* i before j costliest first, the earlier first among equals. */
static int
desc_before(const double *cost, uint32_t i, uint32_t j)
{
	if (cost[i] != cost[j])
		return cost[i] > cost[j];
	return i < j;
}

/* Where piece k is (or goes) in rank r's list. */
static uint32_t
kkw_pos(const struct ovl_kkwide *w, const double *cost, uint32_t r,
    uint32_t k)
{
	uint32_t lo = 0, hi = w->n[r], mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (desc_before(cost, w->a[r][mid], k))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void
kkw_room(struct ovl_kkwide *w, uint32_t r)
{
	if (w->n[r] < w->cap[r])
		return;
	w->cap[r] = w->cap[r] ? 2 * w->cap[r] : 16;
	w->a[r] = ovl_xrealloc(w->a[r], w->cap[r] * sizeof(*w->a[r]));
}

/* Move piece k from rank from to rank to, keeping both lists sorted. */
static void
kkw_move(struct ovl_kkwide *w, const double *cost, uint32_t k, uint32_t from,
    uint32_t to, uint32_t *rank, double *rc)
{
	uint32_t p = kkw_pos(w, cost, from, k);

	memmove(w->a[from] + p, w->a[from] + p + 1, (w->n[from] - p - 1) *
	    sizeof(**w->a));
	w->n[from]--;
	kkw_room(w, to);
	p = kkw_pos(w, cost, to, k);
	memmove(w->a[to] + p + 1, w->a[to] + p, (w->n[to] - p) *
	    sizeof(**w->a));
	w->a[to][p] = k;
	w->n[to]++;
	rank[k] = to;
	rc[from] -= cost[k];
	rc[to] += cost[k];
}

/* Every rank's list from rank[]; order holds the pieces costliest first. */
static struct ovl_kkwide *
kkw_lists(struct ovl_balancer *b, const uint32_t *order, size_t n,
    uint32_t ranks, const uint32_t *rank)
{
	struct ovl_kkwide *w = b->kkw;
	size_t i;
	uint32_t r;

	if (w == NULL)
		w = b->kkw = ovl_xcalloc(1, sizeof(*w));
	if (ranks > w->ranks_cap) {
		w->a = ovl_xrealloc(w->a, ranks * sizeof(*w->a));
		w->n = ovl_xrealloc(w->n, ranks * sizeof(*w->n));
		w->cap = ovl_xrealloc(w->cap, ranks * sizeof(*w->cap));
		for (i = w->ranks_cap; i < ranks; i++) {
			w->a[i] = NULL;
			w->cap[i] = 0;
		}
		w->ranks_cap = ranks;
	}
	memset(w->n, 0, ranks * sizeof(*w->n));
	for (i = 0; i < n; i++) {
		r = rank[order[i]];
		kkw_room(w, r);
		w->a[r][w->n[r]++] = order[i];
	}
	return w;
}

/*
 * The m cheapest ranks other than skip into c, cheapest first (the lower
 * rank first among equals); returns how many.
 */
static uint32_t
cheapest(const double *rc, uint32_t ranks, uint32_t skip, uint32_t m,
    uint32_t *c)
{
	uint32_t r, k = 0, j;

	for (r = 0; r < ranks; r++) {
		if (r == skip || (k == m && rc[r] >= rc[c[k - 1]]))
			continue;
		j = k < m ? k++ : m - 1;
		while (j > 0 && rc[c[j - 1]] > rc[r]) {
			c[j] = c[j - 1];
			j--;
		}
		c[j] = r;
	}
	return k;
}

/*
 * refine over the lists: one piece of the costliest rank moved to the
 * cheapest, or swapped with a cheaper piece of one of the KKW_CAND
 * cheapest ranks, while that lowers the maximum.
 */
static void
refine_wide(struct ovl_kkwide *w, const double *cost, uint32_t ranks,
    uint32_t *rank, double *rc)
{
	size_t iter, maxiter = 4 * (size_t)ranks + 16;
	uint32_t c[KKW_CAND], nc, ci, A, B, r, i, z, lo, hi, mid;
	const uint32_t *la, *lr;
	double cA, gap, want;
	struct ovl_balance_step st = { 0, -1, -1, 0 };

	for (iter = 0; iter < maxiter; iter++) {
		A = ovl_balance__argmax(rc, ranks);
		nc = cheapest(rc, ranks, A, KKW_CAND, c);
		if (nc == 0)
			return;
		B = c[0];
		cA = rc[A];
		st.best = cA;
		st.bi = st.bj = -1;
		if (cA - rc[B] <= cA * 1e-9)
			return;
		la = w->a[A];
		/* move: the piece of A closest to half the gap, to B */
		for (i = 0; i < w->n[A]; i++)
			ovl_balance__consider_move(&st, cost, la[i], cA, rc[B], B);
		/* swap: piece k of A with piece q of r, cost[k] > cost[q] */
		for (ci = 0; ci < nc; ci++) {
			r = c[ci];
			lr = w->a[r];
			gap = cA - rc[r];
			for (i = 0; i < w->n[A] && w->n[r] > 0; i++) {
				uint32_t k = la[i];

				want = cost[k] - gap / 2;
				/* the first piece of r cheaper than want */
				for (lo = 0, hi = w->n[r]; lo < hi;) {
					mid = lo + (hi - lo) / 2;
					if (cost[lr[mid]] >= want)
						lo = mid + 1;
					else
						hi = mid;
				}
				for (z = lo > 0 ? lo - 1 : lo; z <= lo &&
				    z < w->n[r]; z++)
					ovl_balance__consider_swap(&st, cost, k,
					    lr[z], cA, rc[r], r);
			}
		}
		if (st.bi < 0 || st.best >= cA * (1 - 1e-12))
			return;
		kkw_move(w, cost, (uint32_t)st.bi, A, st.bB, rank, rc);
		if (st.bj >= 0)
			kkw_move(w, cost, (uint32_t)st.bj, st.bB, A, rank, rc);
	}
}

/* The pieces of ranks A and B, costliest first, into pool; side 1 for B. */
static size_t
kkw_pool(const struct ovl_kkwide *w, const double *cost, uint32_t A,
    uint32_t B, uint32_t *pool, uint32_t *side)
{
	const uint32_t *a = w->a[A], *bb = w->a[B];
	uint32_t i = 0, j = 0, na = w->n[A], nb = w->n[B];
	size_t m = 0;

	while (i < na || j < nb) {
		if (j == nb || (i < na && desc_before(cost, a[i], bb[j]))) {
			side[a[i]] = 0;
			pool[m++] = a[i++];
		} else {
			side[bb[j]] = 1;
			pool[m++] = bb[j++];
		}
	}
	return m;
}

/* pair_repart over the lists, B among the KKW_PAIR cheapest ranks. */
static void
pair_wide(struct ovl_balancer *b, struct ovl_kkwide *w, const double *cost,
    uint32_t ranks, uint32_t *rank, double *rc)
{
	uint32_t *side = b->pr_side, *pool = b->mf_rank, c[KKW_PAIR], nc, ci;
	uint32_t A, B, bB, r;
	size_t iter, i, m, maxiter = 2 * (size_t)ranks + 8;
	double best, v;
	long x, y, bx = -1, by = -1;

	for (iter = 0; iter < maxiter; iter++) {
		A = ovl_balance__argmax(rc, ranks);
		best = rc[A] * (1 - 1e-9);
		bB = ranks;
		nc = cheapest(rc, ranks, A, KKW_PAIR, c);
		for (ci = 0; ci < nc; ci++) {
			B = c[ci];
			m = kkw_pool(w, cost, A, B, pool, side);
			v = ovl_balance__pair_best(cost, pool, m, side, rc[A],
			    rc[B], &x, &y);
			if (v < best) {
				best = v;
				bB = B;
				bx = x;
				by = y;
			}
		}
		if (bB == ranks)
			return;
		B = bB;
		m = kkw_pool(w, cost, A, B, pool, side);
		(void)ovl_balance__pair_try(cost, pool, m, side, rc[A], rc[B],
		    bx, by, 1);
		rc[A] = rc[B] = 0;
		w->n[A] = w->n[B] = 0;
		for (i = 0; i < m; i++) {
			uint32_t k = pool[i];

			r = side[k] ? B : A;
			rank[k] = r;
			rc[r] += cost[k];
			kkw_room(w, r);
			w->a[r][w->n[r]++] = k;
		}
	}
}

void
ovl_balance__polish_wide(struct ovl_balancer *b, const double *cost,
    size_t n, uint32_t ranks, uint32_t *rank, double *rc)
{
	struct ovl_kkwide *w = kkw_lists(b, b->order, n, ranks, rank);

	refine_wide(w, cost, ranks, rank, rc);
	pair_wide(b, w, cost, ranks, rank, rc);
	ovl_balance__rank_costs(cost, n, rank, ranks, rc);
	refine_wide(w, cost, ranks, rank, rc);
}

int
ovl_balance__ffd_wide(struct ovl_balancer *b, const double *cost, size_t n,
    uint32_t ranks, double cap, uint32_t *rank2, double *rc)
{
	struct ovl_kkwide *w = b->kkw;
	const uint32_t *order = b->order;
	double *t;
	size_t i, leaves, x;
	uint32_t k;

	for (w->leaves = 1; w->leaves < ranks; w->leaves *= 2)
		;
	if (2 * w->leaves > w->tree_cap) {
		w->tree_cap = 2 * w->leaves;
		w->tree = ovl_xrealloc(w->tree, w->tree_cap * sizeof(*w->tree));
	}
	t = w->tree;
	leaves = w->leaves;
	memset(rc, 0, ranks * sizeof(*rc));
	for (x = 0; x < leaves; x++)
		t[leaves + x] = x < ranks ? 0 : HUGE_VAL;
	for (x = leaves - 1; x > 0; x--)
		t[x] = t[2 * x] < t[2 * x + 1] ? t[2 * x] : t[2 * x + 1];
	for (i = 0; i < n; i++) {
		k = order[i];
		if (t[1] + cost[k] > cap)
			return 0;
		for (x = 1; x < leaves;)
			x = t[2 * x] + cost[k] <= cap ? 2 * x : 2 * x + 1;
		rank2[k] = (uint32_t)(x - leaves);
		rc[x - leaves] += cost[k];
		t[x] = rc[x - leaves];
		for (x /= 2; x > 0; x /= 2)
			t[x] = t[2 * x] < t[2 * x + 1] ? t[2 * x] : t[2 * x + 1];
	}
	return 1;
}

void
ovl_balance__kk_wide(struct ovl_balancer *b, const double *cost, size_t n,
    uint32_t ranks, uint32_t *rank, double *rank_cost)
{
	ovl_balance__lpt(b, cost, n, ranks, rank);
	ovl_balance__rank_costs(cost, n, rank, ranks, rank_cost);
	if (n <= ranks)
		return;		/* a piece a rank: the costliest piece bounds */
	/* balance_lpt left b->order costliest first */
	ovl_balance__polish_wide(b, cost, n, ranks, rank, rank_cost);
	ovl_balance__multifit(b, cost, n, ranks, rank, rank_cost, 1);
}

