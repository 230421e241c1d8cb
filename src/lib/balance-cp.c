/*
 * balance-cp: balancing for hybrid context parallelism
 * (ovl_balance_hybrid): sequences on aligned groups of ranks, each
 * member paying the sequence's cost. See balance.h.
 */
#include "balance.h"

#include <string.h>

#include "balance-int.h"

/* The costliest of rank_cost[f .. f + k) and their total into *sum. */
static double
group_max(const double *rc, uint32_t f, uint32_t k, double *sum)
{
	double m = rc[f], s = 0;
	uint32_t j;

	for (j = f; j < f + k; j++) {
		if (rc[j] > m)
			m = rc[j];
		s += rc[j];
	}
	if (sum != NULL)
		*sum = s;
	return m;
}

static void
group_add(double *rc, uint32_t f, uint32_t k, double v)
{
	uint32_t j;

	for (j = f; j < f + k; j++)
		rc[j] += v;
}

/* The aligned group of k ranks whose costliest member costs least. */
static uint32_t
best_group(const double *rc, uint32_t ranks, uint32_t k)
{
	uint32_t f, bf = 0;
	double bm = 0, bs = 0, m, s;

	for (f = 0; f + k <= ranks; f += k) {
		m = group_max(rc, f, k, &s);
		if (f == 0 || m < bm || (m == bm && s < bs)) {
			bm = m;
			bs = s;
			bf = f;
		}
	}
	return bf;
}

/*
 * One improvement of the costliest rank A: the move or trade of a
 * sequence of A's that leaves the groups it touches with the lowest
 * costliest member, when that is below A's cost. Returns 1 when applied.
 */
static int
improve(const double *cost, const uint32_t *size, size_t n, uint32_t ranks,
    uint32_t *first, double *rc)
{
	uint32_t A = ovl_balance__argmax(rc, ranks), f, k;
	double cur = rc[A], best = cur * (1 - 1e-12), m, mo, mn;
	size_t i, j;
	long bi = -1, bj = -1;
	uint32_t bf = 0;

	for (i = 0; i < n; i++) {
		k = size[i];
		if (A < first[i] || A >= first[i] + k || cost[i] <= 0)
			continue;
		mo = group_max(rc, first[i], k, NULL);
		/* a move to another group of k */
		for (f = 0; f + k <= ranks; f += k) {
			if (f == first[i])
				continue;
			mn = group_max(rc, f, k, NULL) + cost[i];
			m = mn > mo - cost[i] ? mn : mo - cost[i];
			if (m < best) {
				best = m;
				bi = (long)i;
				bj = -1;
				bf = f;
			}
		}
		/* a trade with a cheaper sequence of k elsewhere */
		for (j = 0; j < n; j++) {
			double d = cost[i] - cost[j];

			if (size[j] != k || first[j] == first[i] || d <= 0)
				continue;
			mn = group_max(rc, first[j], k, NULL) + d;
			m = mn > mo - d ? mn : mo - d;
			if (m < best) {
				best = m;
				bi = (long)i;
				bj = (long)j;
				bf = first[j];
			}
		}
	}
	if (bi < 0)
		return 0;
	k = size[bi];
	group_add(rc, first[bi], k, -cost[bi]);
	group_add(rc, bf, k, cost[bi]);
	if (bj >= 0) {
		group_add(rc, bf, k, -cost[bj]);
		group_add(rc, first[bi], k, cost[bj]);
		first[bj] = first[bi];
	}
	first[bi] = bf;
	return 1;
}

/*
 * Every sequence (in b->order) to a group whose members stay within cap:
 * the group of its size with the costliest member that still leaves room
 * (best fit). 1 when all fit (first[] and rc[] set), else 0.
 */
static int
fit(const struct ovl_balancer *b, const double *cost, const uint32_t *size,
    size_t n, uint32_t ranks, double cap, uint32_t *first, double *rc)
{
	size_t i;
	uint32_t f, k, bf;
	double m, bm;

	memset(rc, 0, ranks * sizeof(*rc));
	for (i = 0; i < n; i++) {
		uint32_t q = b->order[i];

		k = size[q];
		bf = ranks;
		bm = -1;
		for (f = 0; f + k <= ranks; f += k) {
			m = group_max(rc, f, k, NULL);
			if (m + cost[q] <= cap && m > bm) {
				bm = m;
				bf = f;
			}
		}
		if (bf == ranks)
			return 0;
		first[q] = bf;
		group_add(rc, bf, k, cost[q]);
	}
	return 1;
}

/* The maximum of first[]'s placement, rank costs into rc. */
static double
placed(const double *cost, const uint32_t *size, size_t n, uint32_t ranks,
    const uint32_t *first, double *rc)
{
	size_t i;

	memset(rc, 0, ranks * sizeof(*rc));
	for (i = 0; i < n; i++)
		group_add(rc, first[i], size[i], cost[i]);
	return rc[ovl_balance__argmax(rc, ranks)];
}

double
ovl_balance_hybrid(struct ovl_balancer *b, const double *cost,
    const uint32_t *size, size_t n, uint32_t ranks, uint32_t *first,
    double *rank_cost)
{
	size_t i, iter, maxiter = 4 * (size_t)ranks + 64;
	double *work, lo = 0, hi, total = 0, cur, *rc2;
	uint32_t *first2;
	int round;

	memset(rank_cost, 0, ranks * sizeof(*rank_cost));
	if (n == 0 || ranks == 0)
		return 0;
	ovl_balance__grow(b, n, ranks);
	first2 = b->heap;
	rc2 = b->tsum;
	/* the work of each sequence, in b->diff, sorts them */
	work = b->diff;
	for (i = 0; i < n; i++) {
		work[i] = cost[i] * size[i];
		total += work[i];
		if (cost[i] > lo)
			lo = cost[i];
	}
	if (total / ranks > lo)
		lo = total / ranks;
	ovl_balance__sort_by_cost(b->order, n, work);
	for (i = 0; i < n; i++) {
		uint32_t q = b->order[i];

		first[q] = best_group(rank_cost, ranks, size[q]);
		group_add(rank_cost, first[q], size[q], cost[q]);
	}
	for (iter = 0; iter < maxiter; iter++)
		if (!improve(cost, size, n, ranks, first, rank_cost))
			break;
	cur = placed(cost, size, n, ranks, first, rank_cost);
	/*
	 * Then the least cap at which best fit places every sequence, by
	 * bisection between the lower bound and the maximum in hand (as
	 * MULTIFIT), improved the same way, when it lowers the maximum.
	 */
	hi = cur;
	for (round = 0; round < 14 && hi > lo * (1 + 1e-4); round++) {
		double mid = (lo + hi) / 2, m;

		if (!fit(b, cost, size, n, ranks, mid, first2, rc2)) {
			lo = mid;
			continue;
		}
		for (iter = 0; iter < maxiter; iter++)
			if (!improve(cost, size, n, ranks, first2, rc2))
				break;
		m = placed(cost, size, n, ranks, first2, rc2);
		hi = mid < m ? mid : m;
		if (m < cur * (1 - 1e-12)) {
			cur = m;
			memcpy(first, first2, n * sizeof(*first));
		}
	}
	/* the sums again, so equal inputs give equal figures */
	return placed(cost, size, n, ranks, first, rank_cost);
}

double
ovl_balance_hybrid_bound(const double *cost, const uint32_t *size, size_t n,
    uint32_t ranks, double *scratch)
{
	uint32_t k, top = 1, c;
	size_t i, m;
	double lb = 0, v;

	for (i = 0; i < n; i++)
		if (size[i] > top)
			top = size[i];
	for (k = 1; k <= top && k <= ranks; k *= 2) {
		m = 0;
		for (i = 0; i < n; i++)
			for (c = 0; size[i] >= k && c < size[i] / k; c++)
				scratch[m++] = cost[i];
		v = ovl_balance_tight_bound(scratch, m, ranks / k, scratch);
		if (v > lb)
			lb = v;
	}
	return lb;
}
