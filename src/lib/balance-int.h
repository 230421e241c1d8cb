/*
 * balance-int: what balance.c (one step, any method) and balance-step.c
 * (outlier delay over a window of steps, fixed token counts) share. Private
 * to the library.
 */
#ifndef OVL_BALANCE_INT_H
#define OVL_BALANCE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "balance.h"

struct ovl_kkwide;

struct ovl_balancer {
	uint32_t	*order;		/* pieces (or bins) sorted by cost */
	size_t		 order_cap;
	/* KK: one tuple of `ranks` subsets per piece */
	double		*sum;
	int32_t		*head, *tail;
	size_t		 cells_cap;
	int32_t		*next;		/* piece lists */
	uint32_t	*heap;		/* tuple ids */
	double		*diff;		/* per tuple: max - min */
	uint32_t	*mf_rank;	/* MULTIFIT: the best fit found */
	uint32_t	*pr_order, *pr_side;	/* pairs: order, side */
	size_t		 items_cap;
	/* per rank */
	double		*rcost;
	uint32_t	*rcount;
	struct pair	*pairs;
	double		*tsum;		/* KK: one tuple being merged */
	int32_t		*thead, *ttail;
	size_t		 ranks_cap;
	double		*slot;		/* window: cost per (step, rank) */
	uint64_t	*wused;		/* window: tokens per step */
	size_t		 slots_cap;
	/* exact: per part */
	double		*xcost, *xcumc;
	uint64_t	*xcum;
	uint32_t	*xpos;
	size_t		 xcap;
	size_t		*xgrp;		/* per rank + 1 */
	size_t		 xgrp_cap;
	struct ovl_kkwide *kkw;		/* kk above its exact size (balance.c) */
};

struct pair {
	double		v;
	uint32_t	i;
};

/*
 * kk runs its exact path (Karmarkar-Karp, every improvement, MULTIFIT) on
 * steps of at most this many pieces x ranks (65,536), and the wide path
 * above it (balance-wide.c). A variable only so that a unit test can run
 * both paths on one input.
 */
extern size_t ovl_balance__kk_exact_cells;
/*
 * kk's wide path: LPT, then refine, the two-rank repartition and MULTIFIT
 * between the costliest rank and the cheapest few, over per-rank lists.
 * Writes rank[] and rank_cost[]. Deterministic.
 */
void	ovl_balance__kk_wide(struct ovl_balancer *b, const double *cost,
	    size_t n, uint32_t ranks, uint32_t *rank, double *rank_cost);
/*
 * refine, the two-rank repartition (pair_repart) and refine again over
 * the lists of rank[]; b->order holds the pieces costliest first.
 */
void	ovl_balance__polish_wide(struct ovl_balancer *b, const double *cost,
	    size_t n, uint32_t ranks, uint32_t *rank, double *rc);
/*
 * First-fit decreasing of the pieces (b->order, costliest first) into
 * ranks of capacity cap over a tree of the ranks' costs (the least of
 * each subtree): O(n log ranks). 1 when all fit (rank2[], rc set), else
 * 0. Needs b->kkw (made by ovl_balance__polish_wide).
 */
int	ovl_balance__ffd_wide(struct ovl_balancer *b, const double *cost,
	    size_t n, uint32_t ranks, double cap, uint32_t *rank2, double *rc);
/* balance.c's MULTIFIT; wide: with the two functions above. */
void	ovl_balance__multifit(struct ovl_balancer *b, const double *cost,
	    size_t n, uint32_t ranks, uint32_t *rank, double *rank_cost,
	    int wide);
/* Free the wide path's storage (NULL: nothing). */
void	ovl_balance__kk_wide_free(struct ovl_kkwide *w);

/*
 * refine's best step so far: piece bi (-1: none) of the costliest rank to
 * rank bB, and piece bj (-1: none) of bB back; best, the maximum of the
 * two ranks after it.
 */
struct ovl_balance_step {
	double		best;
	long		bi, bj;
	uint32_t	bB;
};
/* Take moving piece k from the costliest rank (cost cA) to rank r (cost
 * cr) when it lowers st->best. */
void	ovl_balance__consider_move(struct ovl_balance_step *st,
	    const double *cost, uint32_t k, double cA, double cr, uint32_t r);
/* Take swapping piece k of the costliest rank with the cheaper piece q
 * of rank r when the difference is below the gap and it lowers best. */
void	ovl_balance__consider_swap(struct ovl_balance_step *st,
	    const double *cost, uint32_t k, uint32_t q, double cA, double cr,
	    uint32_t r);

/* balance.c's steps, for the wide path. */
/* LPT: costliest piece first to the cheapest rank; leaves b->order sorted
 * costliest first when n >= ranks. */
void	ovl_balance__lpt(struct ovl_balancer *b, const double *cost, size_t n,
	    uint32_t ranks, uint32_t *rank);
/* Each rank's cost into rank_cost; returns the largest. */
double	ovl_balance__rank_costs(const double *cost, size_t n,
	    const uint32_t *rank, uint32_t ranks, double *rank_cost);
/*
 * Two ranks A (side 0) and B (side 1), their pieces pooled costliest
 * first: pair_try the outcome of swapping pieces x and y (x -1: none) and
 * then greedy single moves (left in side[] with apply); pair_best the
 * best of a few such swaps, its pieces in *bx, *by. Both return the
 * pair's maximum.
 */
double	ovl_balance__pair_try(const double *cost, const uint32_t *pool,
	    size_t m, uint32_t *side, double sA, double sB, long x, long y,
	    int apply);
double	ovl_balance__pair_best(const double *cost, const uint32_t *pool,
	    size_t m, uint32_t *side, double sA, double sB, long *bx, long *by);

/* Room for n pieces and ranks ranks in b's scratch arrays. */
void	ovl_balance__grow(struct ovl_balancer *b, size_t n, uint32_t ranks);
/* idx[0..n) sorted by cost, costliest first, earlier first among equals. */
void	ovl_balance__sort_by_cost(uint32_t *idx, size_t n, const double *cost);
/* qsort: doubles, largest first. */
int	ovl_balance__cmp_double_desc(const void *a, const void *b);
/* Index of the largest of v[0..n), the first among equals. */
uint32_t ovl_balance__argmax(const double *v, uint32_t n);

#endif
