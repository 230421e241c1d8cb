/*
 * balance-step: balancing with step structure: outliers delayed over a
 * window of steps (ovl_balance_window) and fixed token counts per rank
 * (ovl_balance_exact). See balance.h.
 */
#include "balance.h"

#include <stdlib.h>
#include <string.h>

#include "balance-int.h"
#include "buf.h"

/* ---- outlier delay over a window of steps ------------------------------ */

/* The tight bound of step t's pieces (their costs into tmp). */
static double
wbound(const double *cost, const uint32_t *step, size_t n, uint32_t t,
    uint32_t ranks, double *tmp, uint32_t skip, const uint32_t *add,
    size_t nadd, uint32_t addx, uint32_t skipy, const uint32_t *sety,
    size_t nsety)
{
	double total = 0;
	size_t i, k = 0, j;

	for (i = 0; i < n; i++) {
		if (step[i] != t || i == skip)
			continue;
		for (j = 0; j < nsety && sety[j] != i; j++)
			;
		if (j < nsety)
			continue;
		tmp[k++] = cost[i];
		total += cost[i];
	}
	(void)skipy;
	for (j = 0; j < nadd; j++) {
		tmp[k++] = cost[add[j]];
		total += cost[add[j]];
	}
	if (addx != UINT32_MAX) {
		tmp[k++] = cost[addx];
		total += cost[addx];
	}
	qsort(tmp, k, sizeof(*tmp), ovl_balance__cmp_double_desc);
	return ovl_balance_bound_sorted(tmp, k, ranks, total);
}

/* Piece i may go to step t: its document's pieces stay in step order. */
static int
movable(const uint64_t *group, const uint32_t *step, size_t n, size_t i,
    uint32_t t)
{
	if (group == NULL)
		return 1;
	if (group[i] & OVL_WINDOW_PINNED)
		return step[i] == t;
	if (i > 0 && group[i - 1] == group[i] && step[i - 1] > t)
		return 0;
	if (i + 1 < n && group[i + 1] == group[i] && step[i + 1] < t)
		return 0;
	return 1;
}

static const uint32_t *sort_len32;

static int
cmp_idx_len_desc(const void *a, const void *b)
{
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;

	if (sort_len32[i] != sort_len32[j])
		return sort_len32[i] > sort_len32[j] ? -1 : 1;
	return i < j ? -1 : i > j;
}

int
ovl_balance_window(struct ovl_balancer *b, const double *cost,
    const uint32_t *len, const uint32_t *src, const uint64_t *group, size_t n,
    uint32_t *step, size_t k, const uint64_t *lo, const uint64_t *hi,
    uint32_t ranks, size_t maxmoves)
{
	uint64_t *used;
	double *bnd, *tmp;
	uint32_t *byl, *ybuf, *best_y;
	size_t i, moves = 0, t, u, nbyl, nby = 0;
	double eps;

	if (n == 0 || k <= 1 || ranks == 0)
		return 0;
	ovl_balance__grow(b, 4 * n + 8, ranks);
	if (k + 1 > b->slots_cap || n + 8 > b->slots_cap) {
		size_t m = (k > n ? k : n) + 8;
		b->slot = ovl_xrealloc(b->slot, m * sizeof(*b->slot));
		b->wused = ovl_xrealloc(b->wused, m * sizeof(*b->wused));
		b->slots_cap = m;
	}
	if (n + 1 > b->xcap) {
		b->xcost = ovl_xrealloc(b->xcost, (n + 1) * sizeof(*b->xcost));
		b->xcumc = ovl_xrealloc(b->xcumc, (n + 1) * sizeof(*b->xcumc));
		b->xcum = ovl_xrealloc(b->xcum, (n + 1) * sizeof(*b->xcum));
		b->xpos = ovl_xrealloc(b->xpos, (n + 1) * sizeof(*b->xpos));
		b->xcap = n + 1;
	}
	used = b->wused;
	bnd = b->slot;
	tmp = b->xcost;
	byl = b->order;			/* pieces by length, longest first */
	ybuf = b->heap;			/* the trade being built */
	best_y = (uint32_t *)b->next;	/* the best trade so far */
	for (t = 0; t < k; t++)
		used[t] = 0;
	for (i = 0; i < n; i++) {
		if (step[i] >= k)
			return -1;
		used[step[i]] += len[i];
	}
	for (t = 0; t < k; t++)
		bnd[t] = wbound(cost, step, n, (uint32_t)t, ranks, tmp,
		    UINT32_MAX, NULL, 0, UINT32_MAX, UINT32_MAX, NULL, 0);
	for (i = 0; i < n; i++)
		byl[i] = (uint32_t)i;
	sort_len32 = len;
	qsort(byl, n, sizeof(*byl), cmp_idx_len_desc);
	sort_len32 = NULL;
	nbyl = n;
	eps = 0;
	for (t = 0; t < k; t++)
		eps += bnd[t];
	eps *= 1e-9;
	while (moves < maxmoves) {
		double gain_best = eps, nbt = 0, nbu = 0;
		uint32_t bx = UINT32_MAX, bu = 0;

		for (i = 0; i < nbyl; i++) {
			uint32_t x = byl[i], tx = step[x];
			int tries = 0;

			/* the costliest pieces only: those that make steps uneven */
			if (i >= 16 * (size_t)k)
				break;
			for (u = 0; u < k; u++) {
				uint64_t ylo, yhi, sum;
				size_t q, ny, pass;
				double bt, bu2, gain;

				if (u == tx || !movable(group, step, n, x,
				    (uint32_t)u))
					continue;
				/* tokens of the trade: both steps in [lo, hi] */
				ylo = lo[tx] + len[x] > used[tx] ?
				    lo[tx] + len[x] - used[tx] : 0;
				yhi = hi[tx] + len[x] - used[tx];
				if (used[u] + len[x] > hi[u] &&
				    used[u] + len[x] - hi[u] > ylo)
					ylo = used[u] + len[x] - hi[u];
				if (used[u] + len[x] < lo[u])
					continue;
				if (used[u] + len[x] - lo[u] < yhi)
					yhi = used[u] + len[x] - lo[u];
				if (ylo > yhi)
					continue;
				/* light pieces of u, same source first, longest first */
				ny = 0;
				sum = 0;
				for (pass = 0; pass < 2 && sum < ylo; pass++) {
					for (q = 0; q < nbyl && sum < ylo; q++) {
						uint32_t y = byl[q];
						int same = src == NULL ||
						    src[y] == src[x];

						if (step[y] != u || len[y] * 4 >
						    len[x] || sum + len[y] > yhi ||
						    (pass == 0) != same)
							continue;
						if (!movable(group, step, n, y,
						    (uint32_t)tx) || (group != NULL &&
						    group[y] == group[x]))
							continue;
						ybuf[ny++] = y;
						sum += len[y];
					}
				}
				if (sum < ylo || sum > yhi)
					continue;
				tries++;
				bt = wbound(cost, step, n, (uint32_t)tx, ranks, tmp,
				    x, ybuf, ny, UINT32_MAX, 0, NULL, 0);
				bu2 = wbound(cost, step, n, (uint32_t)u, ranks, tmp,
				    UINT32_MAX, NULL, 0, x, 0, ybuf, ny);
				gain = bnd[tx] + bnd[u] - bt - bu2;
				if (gain > gain_best) {
					gain_best = gain;
					bx = x;
					bu = (uint32_t)u;
					nbt = bt;
					nbu = bu2;
					memcpy(best_y, ybuf, ny * sizeof(*ybuf));
					nby = ny;
				}
			}
			(void)tries;
		}
		if (bx == UINT32_MAX)
			break;
		{
			uint32_t tx = step[bx];

			used[tx] -= len[bx];
			used[bu] += len[bx];
			step[bx] = bu;
			for (i = 0; i < nby; i++) {
				step[best_y[i]] = tx;
				used[tx] += len[best_y[i]];
				used[bu] -= len[best_y[i]];
			}
			bnd[tx] = nbt;
			bnd[bu] = nbu;
		}
		moves++;
	}
	return (int)moves;
}

/* ---- fixed token counts --------------------------------------------- */

static double
part_cost(const struct ovl_cost *c, const uint32_t *extra, uint32_t item,
    uint32_t off, uint32_t len)
{
	return ovl_cost_of(c, (uint64_t)len +
	    (extra != NULL && off == 0 ? extra[item] : 0));
}

/* Parts grouped by rank, each group cheapest first. */
static const struct ovl_part *sort_part;
static const double *sort_pc;

static int
cmp_part_rank_cost(const void *x, const void *y)
{
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;

	if (sort_part[i].rank != sort_part[j].rank)
		return sort_part[i].rank < sort_part[j].rank ? -1 : 1;
	if (sort_pc[i] != sort_pc[j])
		return sort_pc[i] < sort_pc[j] ? -1 : 1;
	return i < j ? -1 : i > j;
}

/*
 * The cost of rank B's first d tokens, cheapest parts first, without
 * part y (at py of ord): whole parts, the last one perhaps cut. B's group
 * is [lo, hi) of ord; xcum/xcumc hold the tokens and cost of the group's
 * parts up to and including each position. Sets *cut (the position of
 * the last part taken) and *cutlen (the tokens taken from it); returns
 * -1 when B has fewer than d tokens besides y.
 */
static double
filler(const struct ovl_balancer *b, const struct ovl_cost *c,
    const uint32_t *extra, const struct ovl_part *part, size_t lo, size_t hi,
    size_t py, uint64_t d, size_t *cut, uint32_t *cutlen)
{
	const uint64_t *cl = b->xcum;
	const double *cc = b->xcumc;
	uint64_t ly = part[b->order[py]].len, before;
	size_t a = lo, z = hi, k;
	const struct ovl_part *f;
	double sum;

	/* the first k whose tokens up to it, less y, reach d */
	while (a < z) {
		size_t m = a + (z - a) / 2;
		if (cl[m] - (py <= m ? ly : 0) < d)
			a = m + 1;
		else
			z = m;
	}
	k = a;
	if (k >= hi)
		return -1;
	f = &part[b->order[k]];
	before = cl[k] - (py <= k ? ly : 0) - f->len;
	sum = cc[k] - (py <= k ? b->xcost[b->order[py]] : 0) -
	    b->xcost[b->order[k]];
	*cut = k;
	*cutlen = (uint32_t)(d - before);
	if (*cutlen == f->len)
		return sum + b->xcost[b->order[k]];
	return sum + part_cost(c, extra, f->item, f->off, *cutlen);
}

/*
 * kk's improvement: rank A (the costliest) gives part x to rank B and
 * takes back B's part y (shorter) plus d = len x - len y of B's other
 * tokens, cheapest parts first, the last one cut, so both keep their
 * token counts. Applies the best such trade over all x, y, B (returns 1)
 * or finds none (returns 0).
 */
static int
improve_exact(struct ovl_balancer *b, const struct ovl_cost *c,
    const uint32_t *extra, struct ovl_part *part, size_t *np, uint32_t ranks,
    double *rc)
{
	uint32_t A = ovl_balance__argmax(rc, ranks), B, *ord = b->order;
	double cA = rc[A], best = cA * (1 - 1e-9);
	size_t i, j, n = *np, bx = 0, by = 0, *gs = b->xgrp;
	uint32_t bB = ranks;
	double *pc = b->xcost;

	for (i = 0; i < n; i++) {
		pc[i] = part_cost(c, extra, part[i].item, part[i].off,
		    part[i].len);
		ord[i] = (uint32_t)i;
	}
	sort_part = part;
	sort_pc = pc;
	qsort(ord, n, sizeof(*ord), cmp_part_rank_cost);
	sort_part = NULL;
	sort_pc = NULL;
	for (i = 0; i <= ranks; i++)
		gs[i] = 0;
	for (i = 0; i < n; i++)
		gs[part[i].rank + 1]++;
	for (i = 0; i < ranks; i++)
		gs[i + 1] += gs[i];
	for (i = 0; i < n; i++) {
		int g = i == 0 || part[ord[i]].rank != part[ord[i - 1]].rank;

		b->xpos[ord[i]] = (uint32_t)i;
		b->xcum[i] = (g ? 0 : b->xcum[i - 1]) + part[ord[i]].len;
		b->xcumc[i] = (g ? 0 : b->xcumc[i - 1]) + pc[ord[i]];
	}
	for (i = 0; i < n; i++) {
		if (part[i].rank != A)
			continue;
		for (j = 0; j < n; j++) {
			size_t cut;
			uint32_t cutlen;
			double fill, nA, nB, m;

			B = part[j].rank;
			if (B == A || part[j].len >= part[i].len ||
			    pc[i] - pc[j] <= 0)
				continue;
			fill = filler(b, c, extra, part, gs[B], gs[B + 1],
			    b->xpos[j], part[i].len - part[j].len, &cut,
			    &cutlen);
			if (fill < 0)
				continue;
			nA = cA - pc[i] + pc[j] + fill;
			nB = rc[B] + pc[i] - pc[j] - fill;
			m = nA > nB ? nA : nB;
			if (m < best) {
				best = m;
				bx = i;
				by = j;
				bB = B;
			}
		}
	}
	if (bB == ranks)
		return 0;
	{
		size_t cut, k, py = b->xpos[by];
		uint32_t cutlen;

		B = bB;
		(void)filler(b, c, extra, part, gs[B], gs[B + 1], py,
		    part[bx].len - part[by].len, &cut, &cutlen);
		for (k = gs[B]; k < cut; k++)
			if (k != py)
				part[ord[k]].rank = A;
		if (cutlen == part[ord[cut]].len) {
			part[ord[cut]].rank = A;
		} else {
			/* the cut part's first cutlen tokens go to A */
			struct ovl_part *f = &part[ord[cut]];

			part[*np] = *f;
			part[*np].off = f->off + cutlen;
			part[*np].len = f->len - cutlen;
			(*np)++;
			f->len = cutlen;
			f->rank = A;
		}
		part[bx].rank = B;
		part[by].rank = A;
	}
	memset(rc, 0, ranks * sizeof(*rc));
	for (i = 0; i < *np; i++)
		rc[part[i].rank] += part_cost(c, extra, part[i].item,
		    part[i].off, part[i].len);
	return 1;
}

size_t
ovl_balance_exact(struct ovl_balancer *b, int method, const struct ovl_cost *c,
    const double *cost, const uint32_t *len, const uint32_t *extra, size_t n,
    uint32_t ranks, uint64_t cap, struct ovl_part *part, double *rank_cost)
{
	uint64_t *room, total = 0;
	size_t i, np = 0, iter, maxiter;
	uint32_t r;

	memset(rank_cost, 0, ranks * sizeof(*rank_cost));
	if (n == 0)
		return 0;
	ovl_balance__grow(b, OVL_BALANCE_EXACT_PARTS(n, ranks), ranks);
	if (OVL_BALANCE_EXACT_PARTS(n, ranks) + 1 > b->xcap) {
		size_t k = OVL_BALANCE_EXACT_PARTS(n, ranks) + 1;
		b->xcost = ovl_xrealloc(b->xcost, k * sizeof(*b->xcost));
		b->xcumc = ovl_xrealloc(b->xcumc, k * sizeof(*b->xcumc));
		b->xcum = ovl_xrealloc(b->xcum, k * sizeof(*b->xcum));
		b->xpos = ovl_xrealloc(b->xpos, k * sizeof(*b->xpos));
		b->xcap = k;
	}
	if (ranks + 1 > b->xgrp_cap) {
		b->xgrp = ovl_xrealloc(b->xgrp, (ranks + 1) * sizeof(*b->xgrp));
		b->xgrp_cap = ranks + 1;
	}
	if (ranks > b->slots_cap) {
		b->slot = ovl_xrealloc(b->slot, ranks * sizeof(*b->slot));
		b->wused = ovl_xrealloc(b->wused, ranks * sizeof(*b->wused));
		b->slots_cap = ranks;
	}
	room = b->wused;
	for (i = 0; i < n; i++)
		total += len[i];
	if (method == OVL_BAL_NONE || ranks == 1) {
		uint64_t share = (total + ranks - 1) / ranks;

		if (share > cap)
			share = cap;
		for (r = 0; r < ranks; r++)
			room[r] = share;
		for (i = 0, r = 0; i < n; i++) {
			uint32_t off = 0;

			while (off < len[i]) {
				uint32_t t = len[i] - off;

				while (r + 1 < ranks && room[r] == 0)
					r++;
				if (t > room[r] && r + 1 < ranks)
					t = (uint32_t)room[r];
				part[np].item = (uint32_t)i;
				part[np].off = off;
				part[np].len = t;
				part[np].rank = r;
				np++;
				room[r] -= t < room[r] ? t : room[r];
				off += t;
			}
		}
	} else {
		ovl_balance__sort_by_cost(b->order, n, cost);
		for (r = 0; r < ranks; r++)
			room[r] = cap;
		for (i = 0; i < n; i++) {
			uint32_t k = b->order[i], off = 0;

			while (off < len[k]) {
				uint32_t t = len[k] - off, m = ranks;

				for (r = 0; r < ranks; r++)
					if (room[r] >= t && (m == ranks ||
					    rank_cost[r] < rank_cost[m]))
						m = r;
				if (m == ranks) {
					m = 0;
					for (r = 1; r < ranks; r++)
						if (room[r] > room[m])
							m = r;
					if (room[m] > 0)
						t = (uint32_t)room[m];
				}
				part[np].item = k;
				part[np].off = off;
				part[np].len = t;
				part[np].rank = m;
				np++;
				room[m] -= t < room[m] ? t : room[m];
				rank_cost[m] += part_cost(c, extra, k, off, t);
				off += t;
			}
		}
		if (method == OVL_BAL_KK) {
			maxiter = 2 * (size_t)ranks + 8;
			if ((double)np * np > 4e7)
				maxiter = 0;
			for (iter = 0; iter < maxiter &&
			    np < OVL_BALANCE_EXACT_PARTS(n, ranks); iter++)
				if (!improve_exact(b, c, extra, part, &np, ranks,
				    rank_cost))
					break;
		}
	}
	memset(rank_cost, 0, ranks * sizeof(*rank_cost));
	for (i = 0; i < np; i++)
		rank_cost[part[i].rank] += part_cost(c, extra, part[i].item,
		    part[i].off, part[i].len);
	return np;
}

/* ---- whole micro-batches to ranks ------------------------------------- */

double
ovl_balance_bins(struct ovl_balancer *b, const double *bcost, size_t nbins,
    uint32_t ranks, uint32_t per, uint32_t *bin_rank, double *rank_cost)
{
	uint32_t *cnt, r, A, bB;
	size_t i, j, iter, maxiter;
	long bx, by;
	double best;

	if (ranks == 0)
		return 0;
	memset(rank_cost, 0, ranks * sizeof(*rank_cost));
	if (nbins == 0)
		return 0;
	ovl_balance__grow(b, nbins, ranks);
	cnt = b->rcount;
	memset(cnt, 0, ranks * sizeof(*cnt));
	/* costliest first, to the cheapest rank with room */
	ovl_balance__sort_by_cost(b->order, nbins, bcost);
	for (i = 0; i < nbins; i++) {
		uint32_t k = b->order[i], m = ranks;

		for (r = 0; r < ranks; r++)
			if (cnt[r] < per && (m == ranks ||
			    rank_cost[r] < rank_cost[m]))
				m = r;
		if (m == ranks)
			m = 0;		/* more bins than ranks x per */
		bin_rank[k] = m;
		cnt[m]++;
		rank_cost[m] += bcost[k];
	}
	/*
	 * Then a bin of the costliest rank moves to a rank with room, or
	 * trades places with a cheaper bin of another rank, while that
	 * lowers the pair's maximum below the costliest rank's cost.
	 */
	maxiter = 4 * (size_t)ranks + 16;
	if (maxiter > 256)
		maxiter = 256;
	for (iter = 0; iter < maxiter; iter++) {
		A = ovl_balance__argmax(rank_cost, ranks);
		best = rank_cost[A] * (1 - 1e-12);
		bx = by = -1;
		bB = ranks;
		for (i = 0; i < nbins; i++) {
			if (bin_rank[i] != A)
				continue;
			for (r = 0; r < ranks; r++) {
				double m;

				if (r == A || cnt[r] >= per)
					continue;
				m = rank_cost[A] - bcost[i];
				if (rank_cost[r] + bcost[i] > m)
					m = rank_cost[r] + bcost[i];
				if (m < best) {
					best = m;
					bx = (long)i;
					by = -1;
					bB = r;
				}
			}
			for (j = 0; j < nbins; j++) {
				double d = bcost[i] - bcost[j], m;

				r = bin_rank[j];
				if (r == A || d <= 0)
					continue;
				m = rank_cost[A] - d;
				if (rank_cost[r] + d > m)
					m = rank_cost[r] + d;
				if (m < best) {
					best = m;
					bx = (long)i;
					by = (long)j;
					bB = r;
				}
			}
		}
		if (bx < 0)
			break;
		bin_rank[bx] = bB;
		rank_cost[A] -= bcost[bx];
		rank_cost[bB] += bcost[bx];
		if (by >= 0) {
			bin_rank[by] = A;
			rank_cost[bB] -= bcost[by];
			rank_cost[A] += bcost[by];
		} else {
			cnt[A]--;
			cnt[bB]++;
		}
	}
	/* the sums again, so equal inputs give equal figures */
	memset(rank_cost, 0, ranks * sizeof(*rank_cost));
	for (i = 0; i < nbins; i++)
		rank_cost[bin_rank[i]] += bcost[i];
	return rank_cost[ovl_balance__argmax(rank_cost, ranks)];
}
