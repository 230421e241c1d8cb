#include "balance.h"

#include <stdlib.h>
#include <string.h>

#include "balance-int.h"
#include "buf.h"
#include "cli.h"

/* MULTIFIT is tried after KK on steps of at most this many pieces. */
#ifndef MULTIFIT_MAX
#define MULTIFIT_MAX	100000
#endif

const char *const ovl_balance_names[] = { "none", "lpt", "kk", NULL };

int
ovl_balance_parse(const char *name)
{
	return ovl_cli_choice(ovl_balance_names, name);
}

const char *
ovl_balance_name(int method)
{
	return ovl_cli_choice_name(ovl_balance_names, method);
}

double
ovl_cost_of(const struct ovl_cost *c, uint64_t len)
{
	double l = (double)len;

	return c->a * l * l + c->b * l;
}

void
ovl_cost_model(struct ovl_cost *c, uint64_t layers, uint64_t hidden,
    uint64_t ffn, uint64_t vocab)
{
	double h = (double)hidden, f = ffn != 0 ? (double)ffn : 4.0 * h;

	c->a = 4.0 * (double)layers * h;
	c->b = (double)layers * (8.0 * h * h + 4.0 * h * f) +
	    2.0 * h * (double)vocab;
}

int
ovl_balance__cmp_double_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x > y ? -1 : x < y;
}

/* The costs into scratch, costliest first; their total. */
static double
sorted_costs(const double *cost, size_t n, double *scratch)
{
	double total = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		total += cost[i];
		scratch[i] = cost[i];
	}
	qsort(scratch, n, sizeof(*scratch), ovl_balance__cmp_double_desc);
	return total;
}

double
ovl_balance_lower_bound(const double *cost, size_t n, uint32_t ranks,
    double *scratch)
{
	double lb;

	if (n == 0 || ranks == 0)
		return 0;
	lb = sorted_costs(cost, n, scratch) / ranks;
	if (scratch[0] > lb)
		lb = scratch[0];
	if (n > ranks && scratch[ranks - 1] + scratch[ranks] > lb)
		lb = scratch[ranks - 1] + scratch[ranks];
	return lb;
}

double
ovl_balance_bound_sorted(const double *desc, size_t n, uint32_t ranks,
    double total)
{
	double lb = total / ranks, s;
	size_t k, j;

	if (n == 0 || ranks == 0)
		return 0;
	for (k = 0; k * ranks < n; k++) {
		/* the k+1 cheapest of the k*R+1 costliest share a rank */
		s = 0;
		for (j = k * ranks - k; j <= k * ranks; j++)
			s += desc[j];
		if (s > lb)
			lb = s;
	}
	return lb;
}

double
ovl_balance_tight_bound(const double *cost, size_t n, uint32_t ranks,
    double *scratch)
{
	double total;

	if (n == 0 || ranks == 0)
		return 0;
	total = sorted_costs(cost, n, scratch);
	return ovl_balance_bound_sorted(scratch, n, ranks, total);
}

struct ovl_balancer *
ovl_balancer_new(void)
{
	return ovl_xcalloc(1, sizeof(struct ovl_balancer));
}

void
ovl_balancer_free(struct ovl_balancer *b)
{
	if (b == NULL)
		return;
	free(b->order);
	free(b->sum);
	free(b->head);
	free(b->tail);
	free(b->next);
	free(b->heap);
	free(b->diff);
	free(b->mf_rank);
	free(b->pr_order);
	free(b->pr_side);
	free(b->rcost);
	free(b->rcount);
	free(b->pairs);
	free(b->tsum);
	free(b->thead);
	free(b->ttail);
	free(b->slot);
	free(b->wused);
	free(b->xcost);
	free(b->xcumc);
	free(b->xcum);
	free(b->xpos);
	free(b->xgrp);
	ovl_balance__kk_wide_free(b->kkw);
	free(b);
}

void
ovl_balance__grow(struct ovl_balancer *b, size_t n, uint32_t ranks)
{
	if (n > b->items_cap) {
		b->order = ovl_xrealloc(b->order, n * sizeof(*b->order));
		b->next = ovl_xrealloc(b->next, n * sizeof(*b->next));
		b->heap = ovl_xrealloc(b->heap, n * sizeof(*b->heap));
		b->diff = ovl_xrealloc(b->diff, n * sizeof(*b->diff));
		b->mf_rank = ovl_xrealloc(b->mf_rank, n * sizeof(*b->mf_rank));
		b->pr_order = ovl_xrealloc(b->pr_order, n *
		    sizeof(*b->pr_order));
		b->pr_side = ovl_xrealloc(b->pr_side, n * sizeof(*b->pr_side));
		b->items_cap = n;
	}
	if (ranks > b->ranks_cap) {
		b->rcost = ovl_xrealloc(b->rcost, ranks * sizeof(*b->rcost));
		b->rcount = ovl_xrealloc(b->rcount, ranks * sizeof(*b->rcount));
		b->pairs = ovl_xrealloc(b->pairs, 2 * ranks * sizeof(*b->pairs));
		b->tsum = ovl_xrealloc(b->tsum, ranks * sizeof(*b->tsum));
		b->thead = ovl_xrealloc(b->thead, ranks * sizeof(*b->thead));
		b->ttail = ovl_xrealloc(b->ttail, ranks * sizeof(*b->ttail));
		b->ranks_cap = ranks;
	}
}

/* Sort indices by cost, costliest first, earlier first among equals. */
static const double *sort_cost;

static int
cmp_idx_cost_desc(const void *a, const void *b)
{
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;

	if (sort_cost[i] != sort_cost[j])
		return sort_cost[i] > sort_cost[j] ? -1 : 1;
	return i < j ? -1 : i > j;
}

void
ovl_balance__sort_by_cost(uint32_t *idx, size_t n, const double *cost)
{
	size_t i;

	for (i = 0; i < n; i++)
		idx[i] = (uint32_t)i;
	sort_cost = cost;
	qsort(idx, n, sizeof(*idx), cmp_idx_cost_desc);
	sort_cost = NULL;
}

static double
rank_costs(const double *cost, size_t n, const uint32_t *rank, uint32_t ranks,
    double *rank_cost)
{
	double max = 0;
	size_t i;

	memset(rank_cost, 0, ranks * sizeof(*rank_cost));
	for (i = 0; i < n; i++)
		rank_cost[rank[i]] += cost[i];
	for (i = 0; i < ranks; i++)
		if (rank_cost[i] > max)
			max = rank_cost[i];
	return max;
}

static void
balance_none(const uint32_t *len, size_t n, uint32_t ranks, uint32_t *rank)
{
	uint64_t total = 0, cum = 0, r;
	size_t i;

	for (i = 0; i < n; i++)
		total += len[i];
	for (i = 0; i < n; i++) {
		/* the rank whose share of the tokens holds the piece's middle */
		r = (2 * cum + len[i]) * ranks / (2 * total);
		rank[i] = r >= ranks ? ranks - 1 : (uint32_t)r;
		cum += len[i];
	}
}

/* ---- a binary heap of ids with a key and a direction ---------------- */

struct heap {
	uint32_t	*a;
	size_t		 n;
	const double	*key;
	int		 max;	/* 1: largest key on top */
};

static int
heap_before(const struct heap *h, uint32_t x, uint32_t y)
{
	if (h->key[x] != h->key[y])
		return h->max ? h->key[x] > h->key[y] : h->key[x] < h->key[y];
	return x < y;
}

static void
heap_down(struct heap *h, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		uint32_t t;

		if (l < h->n && heap_before(h, h->a[l], h->a[m]))
			m = l;
		if (r < h->n && heap_before(h, h->a[r], h->a[m]))
			m = r;
		if (m == i)
			return;
		t = h->a[i];
		h->a[i] = h->a[m];
		h->a[m] = t;
		i = m;
	}
}

static void
heap_push(struct heap *h, uint32_t x)
{
	size_t i = h->n++;

	h->a[i] = x;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		uint32_t t;

		if (!heap_before(h, h->a[i], h->a[p]))
			break;
		t = h->a[i];
		h->a[i] = h->a[p];
		h->a[p] = t;
		i = p;
	}
}

static uint32_t
heap_pop(struct heap *h)
{
	uint32_t top = h->a[0];

	h->a[0] = h->a[--h->n];
	heap_down(h, 0);
	return top;
}

static void
balance_lpt(struct ovl_balancer *b, const double *cost, size_t n,
    uint32_t ranks, uint32_t *rank)
{
	struct heap h = { b->heap, 0, b->rcost, 0 };
	size_t i;
	uint32_t r;

	/* b->heap holds n >= ranks ids only when n >= ranks: use order's tail */
	if (n < ranks) {
		for (i = 0; i < n; i++)
			rank[i] = (uint32_t)i;
		return;
	}
	ovl_balance__sort_by_cost(b->order, n, cost);
	memset(b->rcost, 0, ranks * sizeof(*b->rcost));
	for (r = 0; r < ranks; r++)
		heap_push(&h, r);
	for (i = 0; i < n; i++) {
		uint32_t k = b->order[i];

		r = heap_pop(&h);
		rank[k] = r;
		b->rcost[r] += cost[k];
		heap_push(&h, r);
	}
}

static int
cmp_pair_desc(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static int
cmp_pair_asc(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	if (x->v != y->v)
		return x->v < y->v ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

static void
tuple_diff(struct ovl_balancer *b, uint32_t t, uint32_t ranks)
{
	const double *s = b->sum + (size_t)t * ranks;
	double lo = s[0], hi = s[0];
	uint32_t j;

	for (j = 1; j < ranks; j++) {
		if (s[j] < lo)
			lo = s[j];
		if (s[j] > hi)
			hi = s[j];
	}
	b->diff[t] = hi - lo;
}

/* Karmarkar-Karp largest differencing, ranks ways. */
static void
balance_kk(struct ovl_balancer *b, const double *cost, size_t n,
    uint32_t ranks, uint32_t *rank)
{
	size_t cells = n * ranks, i;
	struct heap h = { b->heap, 0, b->diff, 1 };
	struct pair *pa = b->pairs, *pb = b->pairs + ranks;
	uint32_t j, t1, t2;

	if (cells > b->cells_cap) {
		b->sum = ovl_xrealloc(b->sum, cells * sizeof(*b->sum));
		b->head = ovl_xrealloc(b->head, cells * sizeof(*b->head));
		b->tail = ovl_xrealloc(b->tail, cells * sizeof(*b->tail));
		b->cells_cap = cells;
	}
	for (i = 0; i < n; i++) {
		double *s = b->sum + i * ranks;
		int32_t *hd = b->head + i * ranks, *tl = b->tail + i * ranks;

		for (j = 0; j < ranks; j++) {
			s[j] = 0;
			hd[j] = tl[j] = -1;
		}
		s[0] = cost[i];
		hd[0] = tl[0] = (int32_t)i;
		b->next[i] = -1;
		b->diff[i] = cost[i];
		heap_push(&h, (uint32_t)i);
	}
	while (h.n > 1) {
		double *s1, *s2;
		int32_t *h1, *h2, *e1, *e2;
		double *ns = b->tsum;
		int32_t *nh = b->thead, *nt = b->ttail;

		t1 = heap_pop(&h);
		t2 = heap_pop(&h);
		s1 = b->sum + (size_t)t1 * ranks;
		s2 = b->sum + (size_t)t2 * ranks;
		h1 = b->head + (size_t)t1 * ranks;
		h2 = b->head + (size_t)t2 * ranks;
		e1 = b->tail + (size_t)t1 * ranks;
		e2 = b->tail + (size_t)t2 * ranks;
		for (j = 0; j < ranks; j++) {
			pa[j].v = s1[j];
			pa[j].i = j;
			pb[j].v = s2[j];
			pb[j].i = j;
		}
		qsort(pa, ranks, sizeof(*pa), cmp_pair_desc);
		qsort(pb, ranks, sizeof(*pb), cmp_pair_asc);
		for (j = 0; j < ranks; j++) {
			uint32_t x = pa[j].i, y = pb[j].i;

			ns[j] = s1[x] + s2[y];
			if (h1[x] < 0) {
				nh[j] = h2[y];
				nt[j] = e2[y];
			} else {
				nh[j] = h1[x];
				nt[j] = e1[x];
				if (h2[y] >= 0) {
					b->next[e1[x]] = h2[y];
					nt[j] = e2[y];
				}
			}
		}
		for (j = 0; j < ranks; j++) {
			s1[j] = ns[j];
			h1[j] = nh[j];
			e1[j] = nt[j];
		}
		tuple_diff(b, t1, ranks);
		heap_push(&h, t1);
	}
	t1 = heap_pop(&h);
	for (j = 0; j < ranks; j++) {
		int32_t x;

		for (x = b->head[(size_t)t1 * ranks + j]; x >= 0; x = b->next[x])
			rank[x] = j;
	}
}

/* ---- local improvement ----------------------------------------------- */

static int
cmp_idx_cost_asc(const void *a, const void *b)
{
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;

	if (sort_cost[i] != sort_cost[j])
		return sort_cost[i] < sort_cost[j] ? -1 : 1;
	return i < j ? -1 : i > j;
}

uint32_t
ovl_balance__argmax(const double *v, uint32_t n)
{
	uint32_t i, m = 0;

	for (i = 1; i < n; i++)
		if (v[i] > v[m])
			m = i;
	return m;
}

static uint32_t
argmin(const double *v, uint32_t n)
{
	uint32_t i, m = 0;

	for (i = 1; i < n; i++)
		if (v[i] < v[m])
			m = i;
	return m;
}

void
ovl_balance__consider_move(struct ovl_balance_step *st, const double *cost,
    uint32_t k, double cA, double cr, uint32_t r)
{
	double m = cA - cost[k] > cr + cost[k] ? cA - cost[k] : cr + cost[k];

	if (cost[k] > 0 && m < st->best) {
		st->best = m;
		st->bi = k;
		st->bj = -1;
		st->bB = r;
	}
}

void
ovl_balance__consider_swap(struct ovl_balance_step *st, const double *cost,
    uint32_t k, uint32_t q, double cA, double cr, uint32_t r)
{
	double d = cost[k] - cost[q], m;

	if (d <= 0 || d >= cA - cr)
		return;
	m = cA - d > cr + d ? cA - d : cr + d;
	if (m < st->best) {
		st->best = m;
		st->bi = k;
		st->bj = q;
		st->bB = r;
	}
}

/*
 * Lower the maximum rank cost by moving one piece off the costliest rank
 * or swapping a piece of it with a cheaper one of another rank, as long as
 * that helps. Pieces are grouped by rank in b->order, by cost within.
 */
static void
refine(struct ovl_balancer *b, const double *cost, size_t n, uint32_t ranks,
    uint32_t *rank, double *rc)
{
	size_t iter, maxiter = 4 * (size_t)ranks + 16, i, lo, hi;
	uint32_t *start = b->rcount, r;

	if (n > 200000)
		maxiter = 4;
	for (iter = 0; iter < maxiter; iter++) {
		uint32_t A = ovl_balance__argmax(rc, ranks), B = argmin(rc, ranks);
		double cA = rc[A], gap;
		struct ovl_balance_step st = { cA, -1, -1, 0 };

		if (cA - rc[B] <= cA * 1e-9)
			return;
		/* group pieces by rank, each group by cost ascending */
		for (i = 0; i < n; i++)
			b->order[i] = (uint32_t)i;
		sort_cost = cost;
		qsort(b->order, n, sizeof(*b->order), cmp_idx_cost_asc);
		sort_cost = NULL;
		/* stable counting sort by rank into next[] as scratch */
		memset(start, 0, ranks * sizeof(*start));
		for (i = 0; i < n; i++)
			start[rank[i]]++;
		{
			uint32_t acc = 0, c;
			for (r = 0; r < ranks; r++) {
				c = start[r];
				start[r] = acc;
				acc += c;
			}
		}
		for (i = 0; i < n; i++) {
			uint32_t k = b->order[i];
			b->next[start[rank[k]]++] = (int32_t)k;
		}
		/* start[r] is now the end of rank r's group */
		/* move: the piece of A closest to half the gap, to B */
		gap = cA - rc[B];
		lo = A == 0 ? 0 : start[A - 1];
		hi = start[A];
		for (i = lo; i < hi; i++)
			ovl_balance__consider_move(&st, cost,
			    (uint32_t)b->next[i], cA, rc[B], B);
		/* swap: piece k of A with piece q of rank r, cost[k] > cost[q] */
		for (r = 0; r < ranks; r++) {
			size_t rlo = r == 0 ? 0 : start[r - 1], rhi = start[r];
			double want;

			if (r == A || rlo == rhi)
				continue;
			gap = cA - rc[r];
			for (i = lo; i < hi; i++) {
				uint32_t k = (uint32_t)b->next[i];
				size_t a = rlo, z = rhi;

				want = cost[k] - gap / 2;
				/* first piece of r with cost >= want */
				while (a < z) {
					size_t mid = a + (z - a) / 2;
					if (cost[b->next[mid]] < want)
						a = mid + 1;
					else
						z = mid;
				}
				for (z = a > rlo ? a - 1 : a; z <= a && z < rhi; z++)
					ovl_balance__consider_swap(&st, cost, k,
					    (uint32_t)b->next[z], cA, rc[r], r);
			}
		}
		if (st.bi < 0 || st.best >= cA * (1 - 1e-12))
			return;
		rank[st.bi] = st.bB;
		rc[A] -= cost[st.bi];
		rc[st.bB] += cost[st.bi];
		if (st.bj >= 0) {
			rank[st.bj] = A;
			rc[st.bB] -= cost[st.bj];
			rc[A] += cost[st.bj];
		}
	}
}

/*
 * Two ranks at a time: A (the costliest) and B, their pieces pooled in
 * pool[0..m), costliest first, side[] 0 for A and 1 for B. Try every
 * swap of one of A's costliest pieces with a cheaper one of B's (and no
 * swap), each followed by greedy moves of single pieces, costliest first,
 * from the costlier side while a move lowers the pair's maximum. Returns
 * the best maximum; with apply, leaves that outcome in side[].
 */
#define PAIR_X	8
#define PAIR_Y	16

static double
pair_try(const double *cost, const uint32_t *pool, size_t m, uint32_t *side,
    double sA, double sB, long x, long y, int apply)
{
	double s[2];
	size_t i;
	int hs;

	s[0] = sA;
	s[1] = sB;
	if (x >= 0) {
		s[0] += cost[y] - cost[x];
		s[1] += cost[x] - cost[y];
	}
	if (apply && x >= 0) {
		side[x] = 1;
		side[y] = 0;
	}
	for (i = 0; i < m; i++) {
		uint32_t k = pool[i], sk;

		if ((long)k == x || (long)k == y)
			continue;
		sk = side[k];
		hs = s[1] > s[0];
		if ((int)sk != hs || cost[k] <= 0 ||
		    s[!hs] + cost[k] >= s[hs])
			continue;
		s[hs] -= cost[k];
		s[!hs] += cost[k];
		if (apply)
			side[k] = (uint32_t)!hs;
	}
	return s[0] > s[1] ? s[0] : s[1];
}

static double
pair_best(const double *cost, const uint32_t *pool, size_t m, uint32_t *side,
    double sA, double sB, long *bx, long *by)
{
	double best = pair_try(cost, pool, m, side, sA, sB, -1, -1, 0), v;
	size_t i, j, nx = 0, ny;

	*bx = *by = -1;
	for (i = 0; i < m && nx < PAIR_X; i++) {
		uint32_t x = pool[i];

		if (side[x] != 0)
			continue;
		nx++;
		ny = 0;
		for (j = i + 1; j < m && ny < PAIR_Y; j++) {
			uint32_t y = pool[j];

			if (side[y] != 1 || cost[y] >= cost[x])
				continue;
			ny++;
			v = pair_try(cost, pool, m, side, sA, sB, x, y, 0);
			if (v < best) {
				best = v;
				*bx = x;
				*by = y;
			}
		}
	}
	return best;
}

static void
pair_repart(struct ovl_balancer *b, const double *cost, size_t n,
    uint32_t ranks, uint32_t *rank, double *rc)
{
	uint32_t *ord = b->pr_order, *side = b->pr_side, *pool = b->mf_rank;
	uint32_t A, B, bB;
	size_t iter, i, m, maxiter = 2 * (size_t)ranks + 8;
	double best, v;
	long x, y, bx = -1, by = -1;

	ovl_balance__sort_by_cost(ord, n, cost);
	for (i = 0; i < n; i++)
		side[i] = 0;
	for (iter = 0; iter < maxiter; iter++) {
		A = ovl_balance__argmax(rc, ranks);
		best = rc[A] * (1 - 1e-9);
		bB = ranks;
		for (B = 0; B < ranks; B++) {
			if (B == A)
				continue;
			for (i = 0, m = 0; i < n; i++) {
				uint32_t k = ord[i];
				if (rank[k] == A || rank[k] == B) {
					pool[m++] = k;
					side[k] = rank[k] == B;
				}
			}
			v = pair_best(cost, pool, m, side, rc[A], rc[B], &x, &y);
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
		for (i = 0, m = 0; i < n; i++) {
			uint32_t k = ord[i];
			if (rank[k] == A || rank[k] == B) {
				pool[m++] = k;
				side[k] = rank[k] == B;
			}
		}
		(void)pair_try(cost, pool, m, side, rc[A], rc[B], bx, by, 1);
		rc[A] = rc[B] = 0;
		for (i = 0; i < m; i++) {
			uint32_t k = pool[i];
			rank[k] = side[k] ? B : A;
			rc[rank[k]] += cost[k];
		}
	}
}

/* Local improvement after a first assignment. */
static void
polish(struct ovl_balancer *b, const double *cost, size_t n, uint32_t ranks,
    uint32_t *rank, double *rc)
{
	refine(b, cost, n, ranks, rank, rc);
	if (n <= MULTIFIT_MAX) {
		pair_repart(b, cost, n, ranks, rank, rc);
		rank_costs(cost, n, rank, ranks, rc);
		refine(b, cost, n, ranks, rank, rc);
	}
}

/*
 * First-fit decreasing of the pieces (b->order, costliest first) into
 * ranks of capacity cap: 1 when all fit (rank2[], rc set), else 0.
 */
static int
ffd(const double *cost, const uint32_t *order, size_t n, uint32_t ranks,
    double cap, uint32_t *rank2, double *rc)
{
	size_t i;
	uint32_t r;

	memset(rc, 0, ranks * sizeof(*rc));
	for (i = 0; i < n; i++) {
		uint32_t k = order[i];

		for (r = 0; r < ranks && rc[r] + cost[k] > cap; r++)
			;
		if (r == ranks)
			return 0;
		rank2[k] = r;
		rc[r] += cost[k];
	}
	return 1;
}

/*
 * MULTIFIT (Coffman, Garey, Johnson): the least capacity at which
 * first-fit decreasing places every piece, by bisection between the tight
 * bound and the maximum in hand, then the same refinement. Replaces
 * rank[] and rank_cost[] when that lowers the maximum. wide: the wide
 * path's first fit and refinement (balance-wide.c).
 */
void
ovl_balance__multifit(struct ovl_balancer *b, const double *cost, size_t n,
    uint32_t ranks, uint32_t *rank, double *rank_cost, int wide)
{
	uint32_t *rank2 = b->heap, *order = b->rcount + ranks;
	double *rc2 = b->tsum, *sorted = b->diff, total = 0, lo, hi, cur;
	size_t i;
	int iter, found = 0;

	cur = rank_costs(cost, n, rank, ranks, rank_cost);
	ovl_balance__sort_by_cost(b->order, n, cost);
	for (i = 0; i < n; i++) {
		sorted[i] = cost[b->order[i]];
		total += sorted[i];
	}
	lo = ovl_balance_bound_sorted(sorted, n, ranks, total);
	hi = cur;
	if (hi <= lo * (1 + 1e-6))
		return;
	(void)order;
	for (iter = 0; iter < 14 && hi > lo * (1 + 1e-4); iter++) {
		double mid = (lo + hi) / 2;

		if (wide ? ovl_balance__ffd_wide(b, cost, n, ranks, mid, rank2,
		    rc2) : ffd(cost, b->order, n, ranks, mid, rank2, rc2)) {
			hi = mid;
			found = 1;
			memcpy(b->mf_rank, rank2, n * sizeof(*rank2));
		} else {
			lo = mid;
		}
	}
	if (!found)
		return;
	memcpy(rank2, b->mf_rank, n * sizeof(*rank2));
	rank_costs(cost, n, rank2, ranks, rc2);
	if (wide)
		ovl_balance__polish_wide(b, cost, n, ranks, rank2, rc2);
	else
		polish(b, cost, n, ranks, rank2, rc2);
	if (rank_costs(cost, n, rank2, ranks, rc2) < cur * (1 - 1e-12)) {
		memcpy(rank, rank2, n * sizeof(*rank));
		memcpy(rank_cost, rc2, ranks * sizeof(*rank_cost));
	}
}

/* ---- what the wide path (balance-wide.c) shares ---------------------- */

void
ovl_balance__lpt(struct ovl_balancer *b, const double *cost, size_t n,
    uint32_t ranks, uint32_t *rank)
{
	balance_lpt(b, cost, n, ranks, rank);
}

double
ovl_balance__rank_costs(const double *cost, size_t n, const uint32_t *rank,
    uint32_t ranks, double *rank_cost)
{
	return rank_costs(cost, n, rank, ranks, rank_cost);
}

double
ovl_balance__pair_try(const double *cost, const uint32_t *pool, size_t m,
    uint32_t *side, double sA, double sB, long x, long y, int apply)
{
	return pair_try(cost, pool, m, side, sA, sB, x, y, apply);
}

double
ovl_balance__pair_best(const double *cost, const uint32_t *pool, size_t m,
    uint32_t *side, double sA, double sB, long *bx, long *by)
{
	return pair_best(cost, pool, m, side, sA, sB, bx, by);
}

/*
 * Never worse than none: keep none's assignment when its maximum is lower
 * than the one in rank[] (rank_cost[] set for it). Returns the maximum.
 */
static double
keep_none_if_better(struct ovl_balancer *b, const double *cost,
    const uint32_t *len, size_t n, uint32_t ranks, uint32_t *rank,
    double *rank_cost)
{
	uint32_t *r2 = b->heap;
	double *rc2 = b->tsum, cur, alt;

	cur = rank_costs(cost, n, rank, ranks, rank_cost);
	balance_none(len, n, ranks, r2);
	alt = rank_costs(cost, n, r2, ranks, rc2);
	if (alt >= cur)
		return cur;
	memcpy(rank, r2, n * sizeof(*rank));
	memcpy(rank_cost, rc2, ranks * sizeof(*rank_cost));
	return alt;
}

void
ovl_balance_by_count(size_t n, uint32_t ranks, uint32_t *rank)
{
	size_t i;

	for (i = 0; i < n; i++)
		rank[i] = (uint32_t)(i % ranks);
}

double
ovl_balance(struct ovl_balancer *b, int method, const double *cost,
    const uint32_t *len, size_t n, uint32_t ranks, uint32_t *rank,
    double *rank_cost)
{
	size_t i;

	if (n == 0) {
		memset(rank_cost, 0, ranks * sizeof(*rank_cost));
		return 0;
	}
	ovl_balance__grow(b, n > ranks ? n : ranks, ranks);
	if (ranks == 1) {
		for (i = 0; i < n; i++)
			rank[i] = 0;
		return rank_costs(cost, n, rank, ranks, rank_cost);
	}
	switch (method) {
	case OVL_BAL_NONE:
		balance_none(len, n, ranks, rank);
		break;
	case OVL_BAL_LPT:
		balance_lpt(b, cost, n, ranks, rank);
		break;
	default:
		if (n * ranks > ovl_balance__kk_exact_cells) {
			ovl_balance__kk_wide(b, cost, n, ranks, rank, rank_cost);
			break;
		}
		balance_kk(b, cost, n, ranks, rank);
		rank_costs(cost, n, rank, ranks, rank_cost);
		polish(b, cost, n, ranks, rank, rank_cost);
		if (n <= MULTIFIT_MAX)
			ovl_balance__multifit(b, cost, n, ranks, rank,
			    rank_cost, 0);
		break;
	}
	if (method == OVL_BAL_NONE)
		return rank_costs(cost, n, rank, ranks, rank_cost);
	return keep_none_if_better(b, cost, len, n, ranks, rank, rank_cost);
}

