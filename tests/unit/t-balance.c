/*
 * The packer and the balance scheduler: every piece placed once, no bin
 * over its capacity, rank costs add up, the maximum never below the lower
 * bound and close to it on long-tailed steps, fixed token counts hold
 * exactly, the window keeps every step's budget; hybrid CP groups stay
 * aligned inside their data-parallel rank, near their bound.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "balance-int.h"
#include "pack.h"
#include "rng.h"
#include "unit.h"

#define N 3000

static uint32_t len[N], bin[N], rank_[N], step_[N];
static double cost[N], scratch[N];

/* Long-tailed lengths: lognormal around 500, 5% of 8k..64k, cut at cap. */
static size_t
gen(struct ovl_rng *rng, size_t n, uint32_t cap)
{
	size_t i;

	for (i = 0; i < n; i++) {
		double u1 = ovl_rng_double(rng) + 1e-12, u2 = ovl_rng_double(rng);
		double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
		double l = exp(log(500) + z);

		if (ovl_rng_below(rng, 100) < 5)
			l = 8192 * exp(ovl_rng_double(rng) * log(8));
		if (l < 1)
			l = 1;
		if (l > cap)
			l = cap;
		len[i] = (uint32_t)l;
	}
	return n;
}

static int
check_bins(const uint32_t *l, size_t n, uint32_t cap, const uint32_t *b,
    size_t nb, int in_order)
{
	uint64_t load[N];
	size_t i;
	uint32_t seen = 0;

	memset(load, 0, sizeof(load));
	for (i = 0; i < n; i++) {
		if (b[i] >= nb)
			return 0;
		/* bins are numbered in the order they were opened */
		if (in_order && b[i] > seen)
			return 0;
		if (b[i] == seen)
			seen++;
		load[b[i]] += l[i];
	}
	for (i = 0; i < nb; i++)
		if (load[i] == 0 || load[i] > cap)
			return 0;
	return 1;
}

static void
test_pack_small(void)
{
	static const uint32_t l[] = { 6, 5, 4, 5, 3, 7 };
	struct ovl_packer *p = ovl_packer_new();
	uint32_t b[6];
	size_t nb;

	nb = ovl_pack(p, OVL_PACK_BFD, l, 6, 10, b);
	CHECK(nb == 3);
	/* 7 and 3, 6 and 4, 5 and 5; bin 0 opened by the 7 */
	CHECK(b[5] == 0 && b[4] == 0 && b[0] == 1 && b[2] == 1 && b[1] == 2 &&
	    b[3] == 2);
	nb = ovl_pack(p, OVL_PACK_CONCAT, l, 6, 10, b);
	CHECK(nb == 4);
	CHECK(b[0] == 0 && b[1] == 1 && b[2] == 1 && b[3] == 2 && b[4] == 2 &&
	    b[5] == 3);
	nb = ovl_pack(p, OVL_PACK_FIRST_FIT, l, 6, 10, b);
	CHECK(nb == 3);
	CHECK(b[0] == 0 && b[1] == 1 && b[2] == 0 && b[3] == 1 && b[4] == 2 &&
	    b[5] == 2);
	CHECK(ovl_pack_parse("bfd") == OVL_PACK_BFD);
	CHECK(ovl_pack_parse("first-fit") == OVL_PACK_FIRST_FIT);
	CHECK(ovl_pack_parse("best") == -1);
	CHECK(ovl_pack(p, OVL_PACK_BFD, l, 0, 10, b) == 0);
	ovl_packer_free(p);
}

static void
test_pack_random(void)
{
	struct ovl_packer *p = ovl_packer_new();
	struct ovl_rng rng;
	uint64_t total = 0;
	size_t i, n, nb[3];
	int m;

	ovl_rng_seed(&rng, 7);
	n = gen(&rng, 2000, 4096);
	for (i = 0; i < n; i++)
		total += len[i];
	for (m = 0; m < 3; m++) {
		nb[m] = ovl_pack(p, m, len, n, 4096, bin);
		CHECK(check_bins(len, n, 4096, bin, nb[m], m != OVL_PACK_BFD));
		CHECK(nb[m] >= (total + 4095) / 4096);
	}
	/* bfd needs at most one sequence more than the tokens do here */
	CHECK(nb[OVL_PACK_BFD] <= (total + 4095) / 4096 + 1);
	CHECK(nb[OVL_PACK_BFD] <= nb[OVL_PACK_FIRST_FIT]);
	CHECK(nb[OVL_PACK_FIRST_FIT] <= nb[OVL_PACK_CONCAT]);
	ovl_packer_free(p);
}

static void
test_cost(void)
{
	struct ovl_cost c = { 1, 0 }, m;

	CHECK(ovl_cost_of(&c, 3) == 9);
	c.b = 2;
	CHECK(ovl_cost_of(&c, 3) == 15);
	ovl_cost_model(&m, 32, 4096, 0, 0);
	CHECK(m.a == 4.0 * 32 * 4096);
	CHECK(m.b == 32 * 24.0 * 4096 * 4096);
	ovl_cost_model(&m, 2, 10, 30, 100);
	CHECK(m.b == 2 * (800.0 + 1200.0) + 2000.0);
}

static void
test_lower_bound(void)
{
	static const double c1[] = { 1, 1, 1, 1 };
	static const double c2[] = { 10, 1, 1 };
	static const double c3[] = { 6, 5, 5, 1 };

	CHECK(ovl_balance_lower_bound(c1, 4, 2, scratch) == 2);
	CHECK(ovl_balance_lower_bound(c2, 3, 2, scratch) == 10);
	/* two of the three largest share a rank: 5 + 5 */
	CHECK(ovl_balance_lower_bound(c3, 4, 2, scratch) == 10);
	CHECK(ovl_balance_lower_bound(c1, 0, 2, scratch) == 0);
}

static void
test_known(void)
{
	static const double c[] = { 8, 7, 6, 5, 4 };
	static const uint32_t l[] = { 8, 7, 6, 5, 4 };
	struct ovl_balancer *b = ovl_balancer_new();
	uint32_t r[5];
	double rc[2];

	/* greedy LPT makes 8+5+4 against 7+6; none's 15 + 15 is kept */
	CHECK(ovl_balance(b, OVL_BAL_LPT, c, l, 5, 2, r, rc) == 15);
	/* KK and its improvement find 15 + 15 */
	CHECK(ovl_balance(b, OVL_BAL_KK, c, l, 5, 2, r, rc) == 15);
	CHECK(rc[0] == 15 && rc[1] == 15);
	/* none: arrival order, tokens cut in half (15 each) */
	CHECK(ovl_balance(b, OVL_BAL_NONE, c, l, 5, 2, r, rc) == 15);
	CHECK(r[0] == 0 && r[1] == 0 && r[2] == 1 && r[3] == 1 && r[4] == 1);
	CHECK(ovl_balance_parse("kk") == OVL_BAL_KK);
	CHECK(ovl_balance_parse("greedy") == -1);
	ovl_balancer_free(b);
}

static void
test_random_steps(void)
{
	struct ovl_balancer *b = ovl_balancer_new();
	struct ovl_cost cm[2] = { { 1, 0 }, { 0, 0 } };
	struct ovl_rng rng;
	double rc[8], lb, mx[3], total;
	size_t i, n;
	int m, round, bad = 0, within = 0, rounds = 0;

	ovl_cost_model(&cm[1], 32, 4096, 0, 0);
	ovl_rng_seed(&rng, 11);
	for (round = 0; round < 40; round++) {
		const struct ovl_cost *c = &cm[round % 2];

		n = 200 + ovl_rng_below(&rng, 1500);
		gen(&rng, n, 8192);
		total = 0;
		for (i = 0; i < n; i++) {
			cost[i] = ovl_cost_of(c, len[i]);
			total += cost[i];
		}
		lb = ovl_balance_lower_bound(cost, n, 8, scratch);
		for (m = 0; m < 3; m++) {
			double sum = 0;
			mx[m] = ovl_balance(b, m, cost, len, n, 8, rank_, rc);
			for (i = 0; i < 8; i++)
				sum += rc[i];
			for (i = 0; i < n; i++)
				if (rank_[i] >= 8)
					bad++;
			if (fabs(sum - total) > total * 1e-9)
				bad++;
			if (mx[m] < lb * (1 - 1e-9))
				bad++;
		}
		/* none is contiguous */
		mx[0] = ovl_balance(b, OVL_BAL_NONE, cost, len, n, 8, rank_, rc);
		for (i = 1; i < n; i++)
			if (rank_[i] < rank_[i - 1])
				bad++;
		rounds++;
		if (mx[2] <= lb * 1.02)
			within++;
		if (mx[2] > mx[1] * (1 + 1e-9))
			bad++;
	}
	CHECK(bad == 0);
	/* KK with its improvement reaches 2% of the bound on nearly every step */
	CHECK(within >= rounds * 9 / 10);
	ovl_balancer_free(b);
}

/* Fragments or parts cover every piece once, in order. */
static int
covers(const uint32_t *l, size_t n, const uint32_t *item, const uint32_t *off,
    const uint32_t *fl, size_t nf)
{
	static uint32_t next[N];
	size_t i;

	memset(next, 0, sizeof(next));
	for (i = 0; i < nf; i++) {
		if (item[i] >= n || off[i] != next[item[i]] || fl[i] == 0)
			return 0;
		next[item[i]] += fl[i];
	}
	for (i = 0; i < n; i++)
		if (next[i] != l[i])
			return 0;
	return 1;
}

/* Fragments (item, off, len) by item, then offset (insertion sort). */
static void
sort_item_off(uint32_t *it, uint32_t *of, uint32_t *fl, size_t nf)
{
	size_t i;

	for (i = 1; i < nf; i++) {
		size_t q = i;
		while (q > 0 && (it[q - 1] > it[q] || (it[q - 1] == it[q] &&
		    of[q - 1] > of[q]))) {
			uint32_t t;
			t = it[q]; it[q] = it[q - 1]; it[q - 1] = t;
			t = of[q]; of[q] = of[q - 1]; of[q - 1] = t;
			t = fl[q]; fl[q] = fl[q - 1]; fl[q - 1] = t;
			q--;
		}
	}
}

static void
test_fill(void)
{
	static struct ovl_frag fr[N + 64];
	static uint32_t it[N + 64], of[N + 64], fl[N + 64];
	struct ovl_packer *p = ovl_packer_new();
	struct ovl_rng rng;
	uint64_t total, load[64];
	size_t i, n, nf, cuts;
	int m, bad = 0;

	ovl_rng_seed(&rng, 9);
	for (m = 0; m < 3; m++) {
		/* 16 bins of 4096 filled exactly by pieces of at most 4096 */
		gen(&rng, N, 4096);
		for (n = 0, total = 0; total < 16 * 4096; n++) {
			if (total + len[n] > 16 * 4096)
				len[n] = (uint32_t)(16 * 4096 - total);
			total += len[n];
		}
		nf = ovl_pack_fill(p, m, len, n, 4096, 16, fr);
		memset(load, 0, sizeof(load));
		for (i = 0, cuts = 0; i < nf; i++) {
			it[i] = fr[i].item;
			of[i] = fr[i].off;
			fl[i] = fr[i].len;
			if (fr[i].bin >= 16)
				bad++;
			else
				load[fr[i].bin] += fr[i].len;
			if (fr[i].len != len[fr[i].item])
				cuts++;
		}
		/* fragments of a piece in order: sort by (item, off) */
		sort_item_off(it, of, fl, nf);
		CHECK(covers(len, n, it, of, fl, nf));
		for (i = 0; i < 16; i++)
			if (load[i] != 4096)
				bad++;
		/* at most one cut per bin boundary */
		CHECK(nf <= n + 15);
	}
	CHECK(bad == 0);
	ovl_packer_free(p);
}

/*
 * ovl_pack_fill_ends: exact fills where pieces without their end token
 * (and every cut's head) end their bin: each bin holds its fragments in
 * order, all but the last closed; or SIZE_MAX when it cannot be done.
 */
static void
test_fill_ends(void)
{
	static struct ovl_frag fr[N + 64];
	static uint32_t it[N + 64], of[N + 64], fl[N + 64];
	static uint8_t open[N];
	struct ovl_packer *p = ovl_packer_new();
	struct ovl_rng rng;
	uint64_t total, load[16];
	size_t i, n, nf, done = 0, round;
	int bad = 0;
	uint32_t l3[3] = { 7, 7, 6 };
	uint8_t o3[3] = { 1, 1, 1 };

	ovl_rng_seed(&rng, 21);
	for (round = 0; round < 200; round++) {
		uint32_t bins = 1 + (uint32_t)(round % 16), k;

		gen(&rng, N, 4096);
		for (n = 0, total = 0; total < (uint64_t)bins * 4096; n++) {
			if (total + len[n] > (uint64_t)bins * 4096)
				len[n] = (uint32_t)(bins * 4096 - total);
			total += len[n];
			open[n] = 0;
		}
		/*
		 * one piece without its end token (as a step's last piece):
		 * always done; up to half the bins' worth: mostly
		 */
		for (k = 0; k < (round < 100 ? 1 : (bins + 1) / 2); k++)
			open[ovl_rng_next(&rng) % n] = 1;
		nf = ovl_pack_fill_ends(p, len, open, n, 4096, bins, fr);
		if (nf == SIZE_MAX && round < 100)
			bad++;
		if (nf == SIZE_MAX)
			continue;
		done++;
		memset(load, 0, sizeof(load));
		for (i = 0; i < nf; i++) {
			const struct ovl_frag *f = &fr[i];
			int closed = !open[f->item] && f->off + f->len ==
			    len[f->item];

			if (f->bin >= bins || (i > 0 && f->bin < fr[i - 1].bin))
				bad++;
			else
				load[f->bin] += f->len;
			/* a fragment followed in its bin is closed */
			if (i + 1 < nf && fr[i + 1].bin == f->bin && !closed)
				bad++;
			it[i] = f->item;
			of[i] = f->off;
			fl[i] = f->len;
		}
		sort_item_off(it, of, fl, nf);
		CHECK(covers(len, n, it, of, fl, nf));
		for (i = 0; i < bins; i++)
			if (load[i] != 4096)
				bad++;
	}
	CHECK(bad == 0);
	/* all with one, most with many */
	CHECK(done >= 160);
	/* three pieces without an end token, two bins: cannot */
	CHECK(ovl_pack_fill_ends(p, l3, o3, 3, 10, 2, fr) == SIZE_MAX);
	/* two can, one ending each bin, the closed piece before its bin's */
	l3[1] = 3;
	l3[2] = 10;
	o3[1] = 0;
	nf = ovl_pack_fill_ends(p, l3, o3, 3, 10, 2, fr);
	CHECK(nf == 3 && fr[0].item == 2 && fr[0].bin == 0 && fr[1].item == 1 &&
	    fr[1].bin == 1 && fr[2].item == 0 && fr[2].bin == 1);
	ovl_packer_free(p);
}

static void
test_exact(void)
{
	static struct ovl_part pt[N + 64];
	static uint32_t it[N + 64], of[N + 64], fl[N + 64];
	struct ovl_balancer *b = ovl_balancer_new();
	struct ovl_cost c = { 1, 0 };
	struct ovl_rng rng;
	uint64_t total, load[8];
	double rc[8], mx[3], sum;
	size_t i, n, np;
	int m, round, bad = 0, better = 0;

	ovl_rng_seed(&rng, 13);
	for (round = 0; round < 10; round++) {
		/* 8 ranks of 4 x 4096 tokens, exactly */
		gen(&rng, N, 4096);
		for (n = 0, total = 0; total < 8 * 4 * 4096; n++) {
			if (total + len[n] > 8 * 4 * 4096)
				len[n] = (uint32_t)(8 * 4 * 4096 - total);
			total += len[n];
		}
		for (i = 0; i < n; i++)
			cost[i] = ovl_cost_of(&c, len[i]);
		for (m = 0; m < 3; m++) {
			np = ovl_balance_exact(b, m, &c, cost, len, NULL, n, 8,
			    4 * 4096, pt, rc);
			if (np > OVL_BALANCE_EXACT_PARTS(n, 8))
				bad++;
			memset(load, 0, sizeof(load));
			for (i = 0; i < np; i++) {
				it[i] = pt[i].item;
				of[i] = pt[i].off;
				fl[i] = pt[i].len;
				load[pt[i].rank < 8 ? pt[i].rank : 0] += pt[i].len;
			}
			for (i = 1; i < np; i++) {
				size_t q = i;
				while (q > 0 && (it[q - 1] > it[q] ||
				    (it[q - 1] == it[q] && of[q - 1] > of[q]))) {
					uint32_t t;
					t = it[q]; it[q] = it[q - 1]; it[q - 1] = t;
					t = of[q]; of[q] = of[q - 1]; of[q - 1] = t;
					t = fl[q]; fl[q] = fl[q - 1]; fl[q - 1] = t;
					q--;
				}
			}
			if (!covers(len, n, it, of, fl, np))
				bad++;
			for (i = 0, sum = 0, mx[m] = 0; i < 8; i++) {
				if (load[i] != 4 * 4096)
					bad++;
				sum += rc[i];
				if (rc[i] > mx[m])
					mx[m] = rc[i];
			}
		}
		if (mx[2] > mx[1] * (1 + 1e-9))
			bad++;
		if (mx[2] < mx[1] * (1 - 1e-6))
			better++;
	}
	CHECK(bad == 0);
	/* the trades improve on the greedy deal now and then */
	CHECK(better > 0);
	ovl_balancer_free(b);
}

static void
test_tight_bound(void)
{
	/* 5 pieces of 10 on 2 ranks: three share a rank */
	static const double c[] = { 10, 10, 10, 10, 10, 1 };

	CHECK(ovl_balance_lower_bound(c, 6, 2, scratch) == 25.5);
	CHECK(ovl_balance_tight_bound(c, 6, 2, scratch) == 30);
	CHECK(ovl_balance_tight_bound(c, 0, 2, scratch) == 0);
}

static double
step_ratio(size_t n, uint32_t t, uint32_t ranks)
{
	static double c[N];
	double total = 0;
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		if (step_[i] == t) {
			c[k++] = cost[i];
			total += cost[i];
		}
	if (k == 0)
		return 1;
	return ovl_balance_lower_bound(c, k, ranks, scratch) / (total / ranks);
}

static void
test_window(void)
{
	struct ovl_balancer *b = ovl_balancer_new();
	uint64_t lo[4], hi[4], used[4] = { 0 }, cut[4] = { 0 };
	uint64_t group[N];
	size_t i, n = 0;
	uint32_t t;
	int bad = 0, moves;

	/*
	 * Step 0 holds three huge pieces (8000) and 8 medium ones (2000),
	 * the other steps 20 medium ones: step 0 cannot be balanced alone.
	 */
	for (i = 0; i < 3; i++) {
		len[n] = 8000;
		step_[n++] = 0;
	}
	for (; n < 71; n++) {
		len[n] = 2000;
		step_[n] = (uint32_t)(n < 11 ? 0 : 1 + (n - 11) / 20);
	}
	for (i = 0; i < n; i++) {
		cost[i] = (double)len[i] * len[i];
		cut[step_[i]] += len[i];
		group[i] = i;
	}
	/* exact token counts: the trades must match lengths exactly */
	for (t = 0; t < 4; t++)
		lo[t] = hi[t] = cut[t];
	CHECK(step_ratio(n, 0, 2) > 1.1);
	moves = ovl_balance_window(b, cost, len, NULL, group, n, step_, 4, lo,
	    hi, 2, 64);
	CHECK(moves >= 1);
	for (i = 0; i < n; i++) {
		if (step_[i] >= 4)
			bad++;
		else
			used[step_[i]] += len[i];
	}
	for (t = 0; t < 4; t++) {
		if (used[t] != cut[t])
			bad++;
		if (step_ratio(n, t, 2) > 1.05)
			bad++;
	}
	CHECK(bad == 0);
	/* the pieces of one document keep their order: nothing moves */
	for (i = 0; i < n; i++) {
		step_[i] = i < 11 ? 0 : (uint32_t)(1 + (i - 11) / 20);
		group[i] = 1;
	}
	CHECK(ovl_balance_window(b, cost, len, NULL, group, n, step_, 4, lo,
	    hi, 2, 64) == 0);
	/* a step out of range: refused, steps untouched */
	step_[0] = 7;
	CHECK(ovl_balance_window(b, cost, len, NULL, NULL, n, step_, 4, lo,
	    hi, 2, 64) == -1);
	CHECK(step_[0] == 7);
	ovl_balancer_free(b);
}

/*
 * Never worse than none: lpt and kk against none on many seeded steps of
 * every size (fewer pieces than ranks too), 1 to 16 ranks, both costs.
 */
static void
test_never_worse(void)
{
	static const double c5[] = { 3, 3, 2, 2, 2 };
	static const uint32_t l5[] = { 3, 3, 2, 2, 2 };
	struct ovl_balancer *b = ovl_balancer_new();
	struct ovl_cost cm[2] = { { 1, 0 }, { 0, 0 } };
	struct ovl_rng rng;
	double rc[16], none, mx;
	uint32_t r5[5], ranks;
	size_t i, n;
	int m, round, worse = 0, better = 0;

	/* LPT alone: 3+2+2 against 3+2; none: 3+3 against 2+2+2 */
	CHECK(ovl_balance(b, OVL_BAL_LPT, c5, l5, 5, 2, r5, rc) == 6);
	ovl_cost_model(&cm[1], 32, 4096, 0, 0);
	ovl_rng_seed(&rng, 18);
	for (round = 0; round < 600; round++) {
		const struct ovl_cost *c = &cm[round % 2];

		ranks = 1 + (uint32_t)ovl_rng_below(&rng, 16);
		n = 1 + ovl_rng_below(&rng, round % 3 == 0 ? 3 * ranks : 800);
		gen(&rng, n, 1024u << ovl_rng_below(&rng, 5));
		for (i = 0; i < n; i++)
			cost[i] = ovl_cost_of(c, len[i]);
		none = ovl_balance(b, OVL_BAL_NONE, cost, len, n, ranks, rank_,
		    rc);
		for (m = OVL_BAL_LPT; m <= OVL_BAL_KK; m++) {
			mx = ovl_balance(b, m, cost, len, n, ranks, rank_, rc);
			if (mx > none)
				worse++;
			if (mx < none * (1 - 1e-9))
				better++;
			for (i = 0; i < n; i++)
				if (rank_[i] >= ranks)
					worse++;
		}
	}
	CHECK(worse == 0);
	CHECK(better > 600);
	/* the loaders' baseline: a stride of equal counts */
	ovl_balance_by_count(10, 4, rank_);
	CHECK(rank_[0] == 0 && rank_[3] == 3 && rank_[4] == 0 && rank_[9] == 1);
	ovl_balancer_free(b);
}

/* Whole micro-batches: per bins each, sums kept, at or above the bound. */
static void
test_bins(void)
{
	struct ovl_balancer *b = ovl_balancer_new();
	struct ovl_rng rng;
	double rc[16], grp[16], mx, total, lb, gmax;
	uint32_t cnt[16], ranks, per;
	size_t i, nb;
	int round, bad = 0, above_grouping = 0;

	ovl_rng_seed(&rng, 19);
	for (round = 0; round < 300; round++) {
		ranks = 1 + (uint32_t)ovl_rng_below(&rng, 16);
		per = 1 + (uint32_t)ovl_rng_below(&rng, 16);
		nb = (size_t)ranks * per;
		gen(&rng, nb, 8192);
		total = 0;
		memset(grp, 0, sizeof(grp));
		for (i = 0; i < nb; i++) {
			cost[i] = (double)len[i] * len[i];
			total += cost[i];
			grp[i / per] += cost[i];
		}
		lb = ovl_balance_tight_bound(cost, nb, ranks, scratch);
		mx = ovl_balance_bins(b, cost, nb, ranks, per, rank_, rc);
		memset(cnt, 0, sizeof(cnt));
		for (i = 0; i < nb; i++) {
			if (rank_[i] >= ranks)
				bad++;
			else
				cnt[rank_[i]]++;
		}
		for (i = 0, gmax = 0; i < ranks; i++) {
			if (cnt[i] != per)
				bad++;
			total -= rc[i];
			if (grp[i] > gmax)
				gmax = grp[i];
		}
		if (fabs(total) > mx * 1e-9 || mx < lb * (1 - 1e-9))
			bad++;
		/* better than the bins in arrival order, per to a rank */
		if (mx > gmax * (1 + 1e-9))
			above_grouping++;
	}
	CHECK(bad == 0);
	CHECK(above_grouping == 0);
	ovl_balancer_free(b);
}

/* Hybrid CP: aligned groups inside a DP rank, costs that add up, the bound. */
static void
test_hybrid(void)
{
	struct ovl_balancer *b = ovl_balancer_new();
	struct ovl_rng rng;
	static uint32_t size[N], first[N], first2[N];
	static double bscr[8 * N];
	double rc[64], rc2[64], mx, lb, sum = 0;
	const double kc[] = { 1, 5, 2, 3, 3 };
	const uint32_t ks[] = { 4, 2, 2, 1, 1 };
	int trial, bad = 0, trials = 0;
	size_t i, n;
	uint32_t r, cp;

	/* an exact optimum: the mean, 24 / 4 */
	mx = ovl_balance_hybrid(b, kc, ks, 5, 4, first, rc);
	CHECK(mx == 6);
	CHECK(ovl_balance_hybrid_bound(kc, ks, 5, 4, bscr) == 6);
	ovl_rng_seed(&rng, 32);
	for (trial = 0; trial < 30; trial++) {
		uint32_t ranks, per;

		cp = 2u << (trial % 3);
		ranks = 8 * cp;
		per = 8192 / cp;
		n = gen(&rng, 20 + ovl_rng_below(&rng, 120), 8192);
		for (i = 0; i < n; i++) {
			size[i] = 1;
			while (size[i] < cp && size[i] * per < len[i])
				size[i] *= 2;
			cost[i] = (double)len[i] * len[i] / size[i];
		}
		mx = ovl_balance_hybrid(b, cost, size, n, ranks, first, rc);
		memset(rc2, 0, sizeof(rc2));
		for (i = 0; i < n; i++) {
			if (first[i] % size[i] != 0 || first[i] + size[i] > ranks ||
			    first[i] / cp != (first[i] + size[i] - 1) / cp)
				bad++;
			for (r = first[i]; r < first[i] + size[i]; r++)
				rc2[r] += cost[i];
		}
		for (r = 0; r < ranks; r++)
			if (fabs(rc2[r] - rc[r]) > 1e-6 * mx || rc[r] > mx)
				bad++;
		lb = ovl_balance_hybrid_bound(cost, size, n, ranks, bscr);
		if (lb > mx * (1 + 1e-9))
			bad++;
		/* deterministic */
		(void)ovl_balance_hybrid(b, cost, size, n, ranks, first2, rc2);
		if (memcmp(first, first2, n * sizeof(*first)) != 0)
			bad++;
		sum += mx / lb;
		trials++;
	}
	CHECK(bad == 0);
	/* long-tailed steps: within 5% of the bound on average */
	CHECK(sum / trials <= 1.05);
	printf("# hybrid: max/bound %.4f on average\n", sum / trials);
	ovl_balancer_free(b);
}

/*
 * kk's wide path (past ovl_balance__kk_exact_cells) against its exact
 * path on the same steps: 4 to 32 ranks, 2 to 40 pieces a rank, both
 * costs. The wide maximum stays within 1e-4 of the exact one on every
 * step and within 1e-5 on the mean, never below the bound nor above
 * none; every piece placed once, rank costs adding up; a balancer that
 * balanced other steps before gives the same assignment.
 */
static void
test_kk_wide(void)
{
	static uint32_t r1[N], r2[N];
	struct ovl_balancer *b = ovl_balancer_new(), *b2 = ovl_balancer_new();
	struct ovl_cost cm[2] = { { 1, 0 }, { 0, 0 } };
	struct ovl_rng rng;
	double rc[64], rc2[64], exact, wide, none, lb, total, sum, q, qsum = 0;
	double qmax = 0;
	size_t saved = ovl_balance__kk_exact_cells, i, n;
	uint32_t ranks;
	int round, bad = 0, rounds = 40;

	ovl_cost_model(&cm[1], 32, 4096, 0, 0);
	ovl_rng_seed(&rng, 31);
	for (round = 0; round < rounds; round++) {
		const struct ovl_cost *c = &cm[round % 2];

		ranks = 4u << ovl_rng_below(&rng, 4);
		n = ranks * (2 + ovl_rng_below(&rng, 39));
		if (n > N)
			n = N;
		gen(&rng, n, 8192);
		total = 0;
		for (i = 0; i < n; i++) {
			cost[i] = ovl_cost_of(c, len[i]);
			total += cost[i];
		}
		lb = ovl_balance_tight_bound(cost, n, ranks, scratch);
		ovl_balance__kk_exact_cells = (size_t)-1;
		exact = ovl_balance(b, OVL_BAL_KK, cost, len, n, ranks, r1, rc);
		none = ovl_balance(b, OVL_BAL_NONE, cost, len, n, ranks, r1, rc);
		ovl_balance__kk_exact_cells = 0;
		wide = ovl_balance(b, OVL_BAL_KK, cost, len, n, ranks, r1, rc);
		/* a fresh balancer: the same assignment */
		if (ovl_balance(b2, OVL_BAL_KK, cost, len, n, ranks, r2, rc2) !=
		    wide || memcmp(r1, r2, n * sizeof(*r1)) != 0)
			bad++;
		for (i = 0, sum = 0; i < ranks; i++)
			sum += rc[i];
		for (i = 0; i < n; i++)
			if (r1[i] >= ranks)
				bad++;
		if (fabs(sum - total) > total * 1e-9 || wide < lb * (1 - 1e-9) ||
		    wide > none)
			bad++;
		q = wide / exact - 1;
		qsum += q;
		if (q > qmax)
			qmax = q;
	}
	ovl_balance__kk_exact_cells = saved;
	printf("# wide over exact: mean %.3g, worst %.3g\n", qsum / rounds,
	    qmax);
	CHECK(bad == 0);
	CHECK(qmax <= 1e-4);
	CHECK(qsum / rounds <= 1e-5);
	ovl_balancer_free(b);
	ovl_balancer_free(b2);
}

int
main(void)
{
	RUN(test_pack_small);
	RUN(test_pack_random);
	RUN(test_cost);
	RUN(test_lower_bound);
	RUN(test_known);
	RUN(test_random_steps);
	RUN(test_window);
	RUN(test_fill);
	RUN(test_fill_ends);
	RUN(test_exact);
	RUN(test_tight_bound);
	RUN(test_never_worse);
	RUN(test_bins);
	RUN(test_hybrid);
	RUN(test_kk_wide);
	UNIT_DONE();
}
