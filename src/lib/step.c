#include "step.h"

#include <inttypes.h>
#include <stdio.h>

#include "buf.h"
#include "frame.h"
#include "num.h"

uint32_t
ovl_stepcfg_seq_len(const struct ovl_stepcfg *cfg, uint64_t start)
{
	size_t i = 0;

	while (i + 1 < cfg->nstages && cfg->at[i + 1] <= start)
		i++;
	return cfg->seq_len[i];
}

char *
ovl_stepcfg_text(const struct ovl_stepcfg *cfg)
{
	/* a stage is at most ",4294967295@18446744073709551615" */
	size_t size = 32 * (cfg->nstages + 1), k = 0, i;
	char *t = ovl_xmalloc(size);

	t[0] = '\0';
	for (i = 0; i < cfg->nstages; i++) {
		if (i == 0)
			k += (size_t)snprintf(t + k, size - k, "%" PRIu32,
			    cfg->seq_len[0]);
		else
			k += (size_t)snprintf(t + k, size - k, ",%" PRIu32
			    "@%" PRIu64, cfg->seq_len[i], cfg->at[i]);
	}
	return t;
}

uint64_t
ovl_stepcfg_budget(const struct ovl_stepcfg *cfg, uint64_t start)
{
	uint32_t sl = ovl_stepcfg_seq_len(cfg, start);
	uint64_t b = cfg->budget != 0 ? cfg->budget :
	    (uint64_t)cfg->nseq * sl;

	return b < sl ? sl : b;
}

void
ovl_stepcut_restore(struct ovl_stepcut *s, const struct ovl_stepcfg *cfg,
    uint64_t step, uint64_t start, uint64_t used)
{
	s->cfg = cfg;
	s->step = step;
	s->start = start;
	s->used = used;
	s->seq_len = ovl_stepcfg_seq_len(cfg, start);
	s->budget = ovl_stepcfg_budget(cfg, start);
	s->pad = 0;
}

void
ovl_stepcut_init(struct ovl_stepcut *s, const struct ovl_stepcfg *cfg)
{
	ovl_stepcut_restore(s, cfg, 0, 0, 0);
}

uint32_t
ovl_stepcut_next(struct ovl_stepcut *s, uint64_t left, int *opened)
{
	return ovl_stepcut_next_runs(s, left, NULL, 4, OVL_STEP_NORUN, opened);
}

uint32_t
ovl_step_run_token(const char *meta, size_t len, const char *name)
{
	char key[300], val[32];
	uint64_t v;

	if ((size_t)snprintf(key, sizeof(key), "source.%s.image-token", name) >=
	    sizeof(key) || !ovl_meta_value(meta, len, key, val, sizeof(val)) ||
	    ovl_num_u64(val, &v) != 0 || v >= OVL_STEP_NORUN)
		return OVL_STEP_NORUN;
	return (uint32_t)v;
}

/*
 * The next piece's longest length: seq-len or what is left, opening the
 * next step first when this one is full (*opened); in exact mode cut at
 * the step's budget (*cut set).
 */
static uint64_t
piece_open(struct ovl_stepcut *s, uint64_t left, int *opened, int *cut)
{
	uint64_t plen = left < s->seq_len ? left : s->seq_len;
	int full;

	*opened = 0;
	*cut = 0;
	if (s->cfg->exact)
		full = s->used >= s->budget;
	else
		full = s->used > 0 && s->used + plen > s->budget;
	if (full) {
		s->start += s->used;
		s->step++;
		s->used = 0;
		s->seq_len = ovl_stepcfg_seq_len(s->cfg, s->start);
		s->budget = ovl_stepcfg_budget(s->cfg, s->start);
		plen = left < s->seq_len ? left : s->seq_len;
		*opened = 1;
	}
	if (s->cfg->exact && s->used + plen > s->budget) {
		plen = s->budget - s->used;
		*cut = 1;
	}
	return plen;
}

/* Where a document's image runs are (ovl_stepcut_next_runs, _bounds). */
struct runsrc {
	const void	*toks;		/* the next left tokens, or NULL */
	uint32_t	 width, run_id;
	uint64_t	 off;		/* document offset of toks[0] */
	const uint32_t	*runs;		/* first token, length; or NULL */
	size_t		 nruns;
};

/*
 * Is piece offset x (0 < x) strictly inside a run that a piece can hold
 * (at most seq_len tokens) and that begins at or after the piece's
 * start? Its start into *r.
 */
static int
run_at(const struct runsrc *rs, uint64_t left, uint32_t seq_len, uint64_t x,
    uint64_t *r)
{
#define TOK(i)	ovl_tok_at(rs->toks, rs->width, (i))
	uint64_t y = rs->off + x, a, n, e;
	size_t i;

	if (rs->runs != NULL) {
		for (i = 0; i < rs->nruns; i++) {
			a = rs->runs[2 * i];
			n = rs->runs[2 * i + 1];
			if (a >= y)
				break;
			if (a + n > y && a >= rs->off && n <= seq_len) {
				*r = a - rs->off;
				return 1;
			}
		}
		return 0;
	}
	if (rs->toks == NULL || rs->run_id == OVL_STEP_NORUN || x >= left ||
	    TOK(x - 1) != rs->run_id || TOK(x) != rs->run_id)
		return 0;
	a = x - 1;
	e = x + 1;
	while (a > 0 && TOK(a - 1) == rs->run_id)
		a--;
	while (e < left && e - a <= seq_len && TOK(e) == rs->run_id)
		e++;
	*r = a;
	return e - a <= seq_len;
#undef TOK
}

/*
 * Exact mode: the sequence boundaries (multiples of seq_len from the
 * step's start) and the budget a piece of plen tokens reaches keep the
 * runs whole: a piece ends where such a run begins, or, when the run
 * begins the piece, the step pads up to the boundary (s->pad) and the
 * run opens the next sequence or step (*opened). Returns the piece's
 * length.
 */
static uint64_t
pad_runs(struct ovl_stepcut *s, uint64_t left, const struct runsrc *rs,
    uint64_t plen, int *opened, int *cut)
{
	for (;;) {
		uint64_t m = (s->used / s->seq_len + 1) * s->seq_len, x, r;
		int hit = 0, op;

		x = m < s->budget ? m - s->used : s->budget - s->used;
		if (x > 0 && x <= plen)
			hit = run_at(rs, left, s->seq_len, x, &r);
		if (!hit && x < s->budget - s->used && s->budget - s->used <=
		    plen) {
			x = s->budget - s->used;
			hit = run_at(rs, left, s->seq_len, x, &r);
		}
		if (!hit)
			return plen;
		if (r > 0) {
			*cut = 1;	/* the run opens the next piece */
			return r;
		}
		s->used += x;
		s->pad += x;
		plen = piece_open(s, left, &op, cut);
		if (op) {
			/* the padding closed the step: it is the step's */
			*opened = 1;
			s->pad = 0;
		}
	}
}

/* The next piece, its image runs kept whole (step.h). */
static uint32_t
cut_next(struct ovl_stepcut *s, uint64_t left, const struct runsrc *rs,
    int *opened)
{
	int cut;
	uint64_t plen = piece_open(s, left, opened, &cut), r;

	s->pad = 0;
	if (s->cfg->exact && (rs->runs != NULL || (rs->toks != NULL &&
	    rs->run_id != OVL_STEP_NORUN)))
		plen = pad_runs(s, left, rs, plen, opened, &cut);
	/* a piece's end inside a run: the run opens the next piece */
	if (!cut && plen < left && run_at(rs, left, s->seq_len, plen, &r) &&
	    r > 0)
		plen = r;
	s->used += plen;
	return (uint32_t)plen;
}

uint32_t
ovl_stepcut_next_runs(struct ovl_stepcut *s, uint64_t left,
    const void *toks, uint32_t width, uint32_t run_id, int *opened)
{
	struct runsrc rs = { toks, width, run_id, 0, NULL, 0 };

	return cut_next(s, left, &rs, opened);
}

uint32_t
ovl_stepcut_next_bounds(struct ovl_stepcut *s, uint64_t left,
    const void *toks, uint32_t width, uint32_t run_id, uint64_t off,
    const uint32_t *runs, size_t nruns, int *opened)
{
	struct runsrc rs = { toks, width, run_id, off, runs, nruns };

	if (runs == NULL)
		rs.nruns = 0;
	return cut_next(s, left, &rs, opened);
}
