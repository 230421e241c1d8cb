/*
 * balance: the balance scheduler. Assign the pieces of a training step to
 * data-parallel ranks so that the slowest rank finishes as early as
 * possible. Pure algorithms: no I/O.
 *
 * The cost of a piece of L tokens is a*L^2 + b*L: attention grows with the
 * square of the piece (varlen attention never crosses pieces), the dense
 * layers linearly. A rank's cost is the sum of its pieces' costs.
 *
 *   none  arrival order, cut into ranks of equal tokens (the baseline)
 *         (lpt and kk below never return a plan worse than none's)
 *   lpt   greedy longest processing time: costliest piece first, to the
 *         rank with the least cost so far
 *   kk    Karmarkar-Karp largest differencing for R ways, then a local
 *         improvement (moves and swaps between the costliest rank and
 *         the others; then, two ranks at a time, a swap of pieces followed
 *         by single moves) while it lowers the maximum; the same from
 *         MULTIFIT (first-fit decreasing at the least capacity found by
 *         bisection), keeping the better of the two; on a step of more
 *         than 65,536 pieces x ranks, LPT then the same improvements
 *         between the costliest rank and the cheapest few (balance.c,
 *         balance_kk_wide): O(n log n + ranks^2) where the exact path is
 *         O(n ranks^2)
 *
 * A balancer keeps its working storage between calls: balancing step
 * after step allocates nothing once it has grown.
 */
#ifndef OVL_BALANCE_H
#define OVL_BALANCE_H

#include <stddef.h>
#include <stdint.h>

enum ovl_balance_method {
	OVL_BAL_NONE = 0,
	OVL_BAL_LPT = 1,
	OVL_BAL_KK = 2
};

/* The method named name ("none", "lpt", "kk"), or -1. */
/* The method names, NULL-terminated, in enum order (the plan uses them). */
extern const char *const ovl_balance_names[];
int	ovl_balance_parse(const char *name);
/* The name of a method, or "?". */
const char *ovl_balance_name(int method);

struct ovl_cost {
	double	a;	/* per squared token */
	double	b;	/* per token */
};

/* a*len^2 + b*len. */
double	ovl_cost_of(const struct ovl_cost *c, uint64_t len);
/*
 * Coefficients from a transformer's shape, forward FLOPs per layer of a
 * piece of L tokens (Megatron-LM's count): attention scores and values
 * 4*L^2*h, projections 8*L*h^2, MLP 4*L*h*ffn (ffn 0: 4*h); plus the
 * output logits 2*L*h*vocab once (vocab may be 0). So a = 4*layers*h and
 * b = layers*(8*h^2 + 4*h*ffn) + 2*h*vocab.
 */
void	ovl_cost_model(struct ovl_cost *c, uint64_t layers, uint64_t hidden,
	    uint64_t ffn, uint64_t vocab);

/*
 * The step's lower bound on the maximum rank cost over ranks ranks: the
 * largest of the mean rank cost, the costliest piece, and the sum of the
 * R-th and (R+1)-th costliest pieces (two of the R+1 costliest share a
 * rank). scratch holds n doubles (overwritten).
 */
double	ovl_balance_lower_bound(const double *cost, size_t n, uint32_t ranks,
	    double *scratch);

/*
 * A tighter bound (the pigeonhole bound): the largest of the mean rank
 * cost and, for k = 0, 1, ..., the sum of the k+1 cheapest of the k*R+1
 * costliest pieces (k+1 of them share a rank). k = 0 and 1 give the
 * costliest piece and the R-th plus (R+1)-th; so this bound is never
 * below ovl_balance_lower_bound. scratch holds n doubles (overwritten).
 */
double	ovl_balance_tight_bound(const double *cost, size_t n, uint32_t ranks,
	    double *scratch);
/* The same over costs sorted costliest first, whose sum is total. */
double	ovl_balance_bound_sorted(const double *desc, size_t n, uint32_t ranks,
	    double total);

struct ovl_balancer;

struct ovl_balancer *ovl_balancer_new(void);
void	ovl_balancer_free(struct ovl_balancer *b);

/*
 * Assign n pieces (cost[i] >= 0, len[i] tokens, in arrival order) to
 * ranks 0..ranks-1: rank[i]. rank_cost receives each rank's total cost.
 * Returns the maximum rank cost. Deterministic. lpt and kk are never
 * worse than none: when none's maximum is lower, none's assignment is
 * the one returned.
 */
double	ovl_balance(struct ovl_balancer *b, int method, const double *cost,
	    const uint32_t *len, size_t n, uint32_t ranks, uint32_t *rank,
	    double *rank_cost);

/*
 * The unbalanced baseline of data-parallel loaders: every rank takes the
 * same number of pieces (samples), not the same number of tokens; piece
 * i goes to rank i % ranks (a distributed sampler's stride). ranks > 0.
 */
void	ovl_balance_by_count(size_t n, uint32_t ranks, uint32_t *rank);

/*
 * Whole micro-batches to ranks: nbins bins of cost bcost[i] to ranks
 * 0..ranks-1, at most per bins each (nbins <= ranks x per; with nbins ==
 * ranks x per every rank gets exactly per), minimizing the maximum rank
 * cost: costliest bin first to the cheapest rank with room, then moves
 * and swaps of one bin of the costliest rank while they lower the
 * maximum. Writes bin_rank[i] and rank_cost[r]; returns the maximum.
 * Deterministic.
 */
double	ovl_balance_bins(struct ovl_balancer *b, const double *bcost,
	    size_t nbins, uint32_t ranks, uint32_t per, uint32_t *bin_rank,
	    double *rank_cost);

/*
 * Fixed token counts (uniform shapes, where steps are cut exactly): give
 * every rank at most cap tokens, cutting pieces where they do not fit
 * whole. Piece i has len[i] tokens and cost[i] (= ovl_cost_of(c, len[i] +
 * extra[i]); extra may be NULL: image tokens, counted with a piece's
 * first part only). Writes the parts to part[] (room for OVL_BALANCE_EXACT_PARTS) and
 * returns their number; the parts of a piece cover it, in order, and a
 * part is a whole piece unless it filled its rank to cap.
 *   none     arrival order, every rank up to min(cap, ceil(tokens/ranks))
 *   lpt, kk  costliest piece first, to the cheapest rank with room for
 *            it whole, else cut at the room of the rank with the most;
 *            kk then trades a piece of the costliest rank for a shorter
 *            one of another rank plus as many of that rank's shortest
 *            tokens as keep both token counts, while that lowers the
 *            maximum
 * rank_cost receives each rank's cost over its parts.
 */
struct ovl_part {
	uint32_t	item;	/* the piece */
	uint32_t	off;	/* first token of the part within the piece */
	uint32_t	len;
	uint32_t	rank;
};

#define OVL_BALANCE_EXACT_PARTS(n, ranks) ((n) + 3 * (size_t)(ranks) + 8)

size_t	ovl_balance_exact(struct ovl_balancer *b, int method,
	    const struct ovl_cost *c, const double *cost, const uint32_t *len,
	    const uint32_t *extra, size_t n, uint32_t ranks, uint64_t cap,
	    struct ovl_part *part, double *rank_cost);

/*
 * Hybrid context parallelism: n sequences over ranks ranks (data- x
 * context-parallel ranks, cp of them a data-parallel rank's), sequence i
 * over size[i] of them, a power of two dividing cp: the aligned group
 * first[i] .. first[i] + size[i] - 1 (first[i] a multiple of size[i]),
 * each member paying cost[i]. The most work (cost x size) first, to the
 * group whose costliest member costs least (the least total, then the
 * lowest rank, among equals); then, while it lowers the costliest rank,
 * a sequence of that rank moves to another group of its size or trades
 * groups with a cheaper one of its size. Writes first[] and rank_cost[];
 * returns the maximum. Deterministic.
 */
double	ovl_balance_hybrid(struct ovl_balancer *b, const double *cost,
	    const uint32_t *size, size_t n, uint32_t ranks, uint32_t *first,
	    double *rank_cost);
/*
 * A lower bound on ovl_balance_hybrid's maximum: for every group size k,
 * the tight bound (ovl_balance_tight_bound) of the sequences of size k
 * and more over the ranks / k groups of k, a sequence of size s counted
 * as s / k sequences of its cost (its groups of k are all loaded by it);
 * k = 1 holds the mean over the ranks. scratch holds n x the largest
 * size doubles.
 */
double	ovl_balance_hybrid_bound(const double *cost, const uint32_t *size,
	    size_t n, uint32_t ranks, double *scratch);

/*
 * Outlier delay over a window of k steps (WLB-LLM): trade pieces between
 * the steps of the window so that each step can be balanced better.
 * Piece i (len[i], cost[i], source src[i]) is in step step[i] (0..k-1).
 * A trade moves one of the window's costliest pieces x from its step t to
 * another step u and a set Y of u's light pieces (each at most a quarter
 * of x's length; of x's source first, so the mixture moves little) back
 * to t, such that every step's tokens stay within [lo[s], hi[s]]. The
 * trade taken is the one that lowers the sum over the window of each
 * step's tight bound (ovl_balance_tight_bound) the most; trades go on
 * while one lowers it, at most maxmoves. When group is not NULL,
 * consecutive pieces of equal group[i] (the pieces of one document, in
 * order) keep their order: no piece moves to a step before its
 * predecessor's or after its successor's; a piece whose group has
 * OVL_WINDOW_PINNED set does not move. Writes the new steps to
 * step[]; returns the number of trades, or -1 (step[] untouched) when a
 * step is out of range.
 */
#define OVL_WINDOW_PINNED	((uint64_t)1 << 63)

int	ovl_balance_window(struct ovl_balancer *b, const double *cost,
	    const uint32_t *len, const uint32_t *src, const uint64_t *group,
	    size_t n, uint32_t *step, size_t k, const uint64_t *lo,
	    const uint64_t *hi, uint32_t ranks, size_t maxmoves);

#endif
