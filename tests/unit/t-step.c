/*
 * The step cutter: pieces never exceed seq_len, steps never exceed their
 * budget, a step closes only when the next piece does not fit, and the
 * sequence length follows the schedule at each step's start.
 */
#include <stdint.h>

#include "rng.h"
#include "step.h"
#include "unit.h"

static void
test_basic(void)
{
	static const uint64_t at[] = { 0 };
	static const uint32_t sl[] = { 4 };
	struct ovl_stepcfg cfg = { 2, 0, 1, at, sl, 0 };	/* budget 8 */
	struct ovl_stepcut s;
	int opened;

	ovl_stepcut_init(&s, &cfg);
	CHECK(ovl_stepcut_next(&s, 10, &opened) == 4 && !opened);
	CHECK(ovl_stepcut_next(&s, 6, &opened) == 4 && !opened);
	/* Step 0 is full (8): the next piece opens step 1. */
	CHECK(ovl_stepcut_next(&s, 2, &opened) == 2 && opened && s.step == 1);
	CHECK(s.start == 8 && s.used == 2);
	/* 2 used, a 4-token piece fits (6), then 3 does not fit (9 > 8). */
	CHECK(ovl_stepcut_next(&s, 4, &opened) == 4 && !opened);
	CHECK(ovl_stepcut_next(&s, 3, &opened) == 3 && opened && s.step == 2);
}

static void
test_random_invariants(void)
{
	static const uint64_t at[] = { 0, 5000, 20000 };
	static const uint32_t sl[] = { 64, 256, 32 };
	struct ovl_stepcfg cfg = { 3, 0, 3, at, sl, 0 };
	struct ovl_stepcut s;
	struct ovl_rng rng;
	uint64_t total = 0, step_tokens = 0, cur_step = 0, step_start = 0;
	int i, opened, bad = 0;

	ovl_rng_seed(&rng, 42);
	ovl_stepcut_init(&s, &cfg);
	for (i = 0; i < 5000; i++) {
		uint64_t left = 1 + ovl_rng_below(&rng, 700);
		while (left > 0) {
			uint64_t prev_budget = s.budget, prev_used = s.used;
			uint32_t prev_sl = s.seq_len;
			uint32_t p = ovl_stepcut_next(&s, left, &opened);
			if (opened) {
				/* closed only because the piece did not fit */
				uint64_t want = left < prev_sl ? left : prev_sl;
				if (prev_used + want <= prev_budget)
					bad++;
				if (s.step != cur_step + 1 || s.start != total)
					bad++;
				cur_step = s.step;
				step_start = total;
				step_tokens = 0;
			}
			if (p == 0 || p > s.seq_len || p > left)
				bad++;
			if (s.seq_len != ovl_stepcfg_seq_len(&cfg, step_start))
				bad++;
			step_tokens += p;
			if (step_tokens > s.budget)
				bad++;
			total += p;
			left -= p;
		}
	}
	CHECK(bad == 0);
	CHECK(total > 20000 && s.seq_len == 32);
}

static void
test_restore(void)
{
	static const uint64_t at[] = { 0 };
	static const uint32_t sl[] = { 16 };
	struct ovl_stepcfg cfg = { 4, 0, 1, at, sl, 0 };
	struct ovl_stepcut a, b;
	struct ovl_rng rng;
	int i, opened_a, opened_b, same = 1;

	ovl_rng_seed(&rng, 7);
	ovl_stepcut_init(&a, &cfg);
	for (i = 0; i < 100; i++)
		(void)ovl_stepcut_next(&a, 1 + ovl_rng_below(&rng, 16), &opened_a);
	ovl_stepcut_restore(&b, &cfg, a.step, a.start, a.used);
	for (i = 0; i < 1000; i++) {
		uint64_t left = 1 + ovl_rng_below(&rng, 40);
		if (ovl_stepcut_next(&a, left, &opened_a) !=
		    ovl_stepcut_next(&b, left, &opened_b) || opened_a != opened_b)
			same = 0;
	}
	CHECK(same && a.step == b.step && a.used == b.used);
}

static void
test_exact(void)
{
	static const uint64_t at[] = { 0 };
	static const uint32_t sl[] = { 4 };
	struct ovl_stepcfg cfg = { 2, 0, 1, at, sl, 1 };	/* budget 8, exact */
	struct ovl_stepcut s;
	struct ovl_rng rng;
	uint64_t in_step = 0;
	int i, opened, bad = 0;

	ovl_stepcut_init(&s, &cfg);
	CHECK(ovl_stepcut_next(&s, 3, &opened) == 3 && !opened);
	CHECK(ovl_stepcut_next(&s, 4, &opened) == 4 && !opened);
	/* 7 used: the next piece is cut at the budget... */
	CHECK(ovl_stepcut_next(&s, 4, &opened) == 1 && !opened && s.used == 8);
	/* ...and the rest of the document opens step 1. */
	CHECK(ovl_stepcut_next(&s, 3, &opened) == 3 && opened && s.step == 1);
	/* Every closed step holds exactly its budget. */
	ovl_rng_seed(&rng, 9);
	ovl_stepcut_init(&s, &cfg);
	for (i = 0; i < 2000; i++) {
		uint64_t left = 1 + ovl_rng_below(&rng, 30);
		while (left > 0) {
			uint32_t p = ovl_stepcut_next(&s, left, &opened);
			if (opened) {
				if (in_step != 8)
					bad++;
				in_step = 0;
			}
			in_step += p;
			left -= p;
		}
	}
	CHECK(bad == 0);
}

/*
 * Runs of an image's placeholder (token 7) stay in one piece when one can
 * hold them: a cut that would fall inside moves to the run's start; a run
 * longer than seq-len is cut as other tokens are; without a run token the
 * pieces are those of ovl_stepcut_next.
 */
static void
test_runs(void)
{
	static const uint64_t at[] = { 0 };
	static const uint32_t sl[] = { 10 };
	struct ovl_stepcfg cfg = { 2, 0, 1, at, sl, 0 };
	struct ovl_stepcut s, t;
	uint32_t doc[40], p, q;
	uint64_t left, off;
	struct ovl_rng rng;
	int opened, o2, i, k, cut_inside = 0;

	/* text 0..5, a run 6..13, text 14..19: the first piece ends at 6 */
	for (i = 0; i < 20; i++)
		doc[i] = i >= 6 && i < 14 ? 7 : 1;
	ovl_stepcut_init(&s, &cfg);
	CHECK(ovl_stepcut_next_runs(&s, 20, doc, 4, 7, &opened) == 6);
	CHECK(ovl_stepcut_next_runs(&s, 14, doc + 6, 4, 7, &opened) == 10);
	CHECK(ovl_stepcut_next_runs(&s, 4, doc + 16, 4, 7, &opened) == 4);
	/* a run of 12 > seq-len 10 after 3 tokens: cut at 10, as ever */
	for (i = 0; i < 20; i++)
		doc[i] = i >= 3 && i < 15 ? 7 : 1;
	ovl_stepcut_init(&s, &cfg);
	CHECK(ovl_stepcut_next_runs(&s, 20, doc, 4, 7, &opened) == 10);
	/* the same ids in 16 bits cut the same (ovl-frame(5) minor 2) */
	{
		uint16_t d16[20];

		for (i = 0; i < 20; i++)
			d16[i] = (uint16_t)doc[i];
		ovl_stepcut_init(&s, &cfg);
		CHECK(ovl_stepcut_next_runs(&s, 20, d16, 2, 7, &opened) == 10);
		for (i = 0; i < 20; i++)
			d16[i] = i >= 6 && i < 14 ? 7 : 1;
		ovl_stepcut_init(&s, &cfg);
		CHECK(ovl_stepcut_next_runs(&s, 20, d16, 2, 7, &opened) == 6);
		CHECK(ovl_stepcut_next_runs(&s, 14, d16 + 6, 2, 7, &opened) ==
		    10);
	}
	/* random documents: no cut inside a run that fits, no change without
	   a run token, every token placed once */
	ovl_rng_seed(&rng, 5);
	ovl_stepcut_init(&s, &cfg);
	ovl_stepcut_init(&t, &cfg);
	for (k = 0; k < 3000; k++) {
		int n = 1 + (int)ovl_rng_below(&rng, 40);

		for (i = 0; i < n; i++)
			doc[i] = ovl_rng_below(&rng, 3) == 0 ? 7 : 1;
		for (left = (uint64_t)n, off = 0; left > 0; left -= p, off += p) {
			p = ovl_stepcut_next_runs(&s, left, doc + off, 4, 7, &opened);
			if (p == 0 || p > left || p > 10)
				cut_inside++;
			if (p < left && doc[off + p - 1] == 7 &&
			    doc[off + p] == 7) {
				/* allowed only for a run longer than 10 */
				uint64_t r = off + p - 1, e = off + p;
				while (r > 0 && doc[r - 1] == 7)
					r--;
				while (e < (uint64_t)n && doc[e] == 7)
					e++;
				if (e - r <= 10)
					cut_inside++;
			}
		}
		for (left = (uint64_t)n, off = 0; left > 0; left -= q, off += q) {
			q = ovl_stepcut_next_runs(&t, left, doc + off, 4,
			    OVL_STEP_NORUN, &o2);
			if (q != (left < 10 ? left : 10))
				cut_inside++;
		}
	}
	CHECK(cut_inside == 0);
}

/* runs known by their bounds (IMAGE frames): touching runs stay apart */
/*
 * A random document of text (token 1) and image runs (token 7) of 1 to
 * maxrun tokens into doc[0..40), runs touching unless apart (text between
 * any two); their bounds (first token, length) into runs[0..2 * *nr).
 * Returns its length.
 */
static uint32_t
random_doc(struct ovl_rng *rng, uint32_t maxrun, int apart, uint32_t *doc,
    uint32_t *runs, size_t *nr)
{
	uint32_t n = 0, i;

	*nr = 0;
	while (n < 30 && *nr < 8) {
		uint32_t len = 1 + (uint32_t)ovl_rng_below(rng, maxrun);
		int img = ovl_rng_below(rng, 2) == 0;

		if (img && apart && n > 0 && doc[n - 1] == 7)
			doc[n++] = 1;
		for (i = 0; i < len && n < 40; i++)
			doc[n++] = img ? 7 : 1;
		if (img) {
			runs[2 * *nr] = n - i;
			runs[2 * *nr + 1] = i;
			(*nr)++;
		}
	}
	return n;
}

static void
test_bounds(void)
{
	static const uint64_t at[] = { 0 };
	static const uint32_t sl[] = { 10 };
	struct ovl_stepcfg cfg = { 2, 0, 1, at, sl, 0 };
	struct ovl_stepcut s;
	uint32_t doc[40], runs[16], p;
	uint64_t left, off;
	struct ovl_rng rng;
	int opened, i, k, bad = 0;
	size_t nr, j;

	/* text 0..1, runs 2..7 and 8..13 touching, text 14..19 */
	for (i = 0; i < 20; i++)
		doc[i] = i >= 2 && i < 14 ? 7 : 1;
	runs[0] = 2; runs[1] = 6; runs[2] = 8; runs[3] = 6;
	/* tokens alone: one block of 12 > 10, cut at 10 inside the second */
	ovl_stepcut_init(&s, &cfg);
	CHECK(ovl_stepcut_next_runs(&s, 20, doc, 4, 7, &opened) == 10);
	/* with the bounds: the cut moves to 8, where the second run begins */
	ovl_stepcut_init(&s, &cfg);
	CHECK(ovl_stepcut_next_bounds(&s, 20, doc, 4, 7, 0, runs, 2, &opened) == 8);
	CHECK(ovl_stepcut_next_bounds(&s, 12, doc + 8, 4, 7, 8, runs, 2,
	    &opened) == 10);
	/* a run longer than a piece is cut as any tokens are */
	runs[0] = 1; runs[1] = 12;
	ovl_stepcut_init(&s, &cfg);
	CHECK(ovl_stepcut_next_bounds(&s, 20, doc, 4, 7, 0, runs, 1, &opened) == 10);
	/* random documents of touching runs: no cut inside a run that fits */
	ovl_rng_seed(&rng, 9);
	ovl_stepcut_init(&s, &cfg);
	for (k = 0; k < 3000; k++) {
		uint32_t n = random_doc(&rng, 12, 0, doc, runs, &nr);

		for (left = n, off = 0; left > 0; left -= p, off += p) {
			p = ovl_stepcut_next_bounds(&s, left, doc + off, 4, 7, off,
			    runs, nr, &opened);
			if (p == 0 || p > left || p > 10)
				bad++;
			for (j = 0; j < nr && p < left; j++)
				if (runs[2 * j] < off + p && runs[2 * j] +
				    runs[2 * j + 1] > off + p &&
				    runs[2 * j + 1] <= 10 && runs[2 * j] > off)
					bad++;
		}
	}
	CHECK(bad == 0);
}

/*
 * Exact mode keeps runs whole by padding: no run that a sequence can hold
 * crosses a sequence boundary (a multiple of seq-len from its step's
 * start) or the step's budget; the padding comes only before a piece that
 * begins with a run, is less than seq-len, and every step holds its
 * budget (tokens and padding). Runs given by their bounds (touching
 * ones too) and by their tokens, budgets a multiple of seq-len and not.
 */
static void
exact_runs(uint64_t budget, int bounds, int *bad, uint64_t *npad)
{
	static const uint64_t at[] = { 0 };
	static const uint32_t sl[] = { 10 };
	struct ovl_stepcfg cfg = { 3, budget, 1, at, sl, 1 };
	struct ovl_stepcut s;
	uint32_t doc[40], runs[16], p, n;
	uint64_t left, off, pos = 0, B;
	struct ovl_rng rng;
	int opened, k;
	size_t nr, j;

	ovl_rng_seed(&rng, 11 + budget);
	ovl_stepcut_init(&s, &cfg);
	B = s.budget;
	for (k = 0; k < 3000; k++) {
		/* text between runs when the runs come from tokens */
		n = random_doc(&rng, 9, !bounds, doc, runs, &nr);
		for (left = n, off = 0; left > 0; left -= p, off += p) {
			p = ovl_stepcut_next_bounds(&s, left, doc + off, 4, 7, off,
			    bounds ? runs : NULL, nr, &opened);
			if (opened) {
				/* a step short of its budget: padding before a run */
				if (pos > B || (pos < B && doc[off] != 7))
					(*bad)++;
				pos = 0;
				B = s.budget;
			}
			if (s.pad >= 10 || (s.pad > 0 && doc[off] != 7))
				(*bad)++;
			*npad += s.pad;
			pos += s.pad;
			if (p == 0 || p > left || p > 10 || pos + p > B)
				(*bad)++;
			for (j = 0; j < nr; j++) {
				uint64_t a = runs[2 * j], e = a + runs[2 * j + 1];

				if (a < off || a >= off + p)
					continue;
				/* whole in the piece, in one sequence */
				if (e > off + p || (pos + a - off) / 10 !=
				    (pos + e - off - 1) / 10)
					(*bad)++;
			}
			pos += p;
		}
	}
}

static void
test_exact_runs(void)
{
	int bad = 0;
	uint64_t npad = 0;

	exact_runs(0, 1, &bad, &npad);
	exact_runs(0, 0, &bad, &npad);
	exact_runs(25, 1, &bad, &npad);
	exact_runs(25, 0, &bad, &npad);
	CHECK(bad == 0);
	CHECK(npad > 1000);	/* the check met runs to move */
}

int
main(void)
{
	RUN(test_basic);
	RUN(test_runs);
	RUN(test_bounds);
	RUN(test_random_invariants);
	RUN(test_restore);
	RUN(test_exact);
	RUN(test_exact_runs);
	UNIT_DONE();
}
