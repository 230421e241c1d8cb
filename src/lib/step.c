#include "step.h"

#include <stdio.h>

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

uint32_t
ovl_stepcut_next_runs(struct ovl_stepcut *s, uint64_t left,
    const void *toks, uint32_t width, uint32_t run_id, int *opened)
{
#define TOK(i)	ovl_tok_at(toks, width, (i))
	int cut;
	uint64_t plen = piece_open(s, left, opened, &cut);

	if (!cut && toks != NULL && run_id != OVL_STEP_NORUN && plen < left &&
	    TOK(plen - 1) == run_id && TOK(plen) == run_id) {
		uint64_t r = plen - 1, e = plen + 1;

		while (r > 0 && TOK(r - 1) == run_id)
			r--;
		while (e < left && e - r <= s->seq_len && TOK(e) == run_id)
			e++;
		/* the run opens the next piece, unless no piece holds it */
		if (r > 0 && e - r <= s->seq_len)
			plen = r;
	}
	s->used += plen;
	return (uint32_t)plen;
#undef TOK
}

uint32_t
ovl_stepcut_next_bounds(struct ovl_stepcut *s, uint64_t left,
    const void *toks, uint32_t width, uint32_t run_id, uint64_t off,
    const uint32_t *runs, size_t nruns, int *opened)
{
	uint64_t plen, x, a, n;
	size_t i;
	int cut;

	if (runs == NULL)
		return ovl_stepcut_next_runs(s, left, toks, width, run_id,
		    opened);
	plen = piece_open(s, left, opened, &cut);
	if (!cut && plen < left) {
		/* the run the cut falls inside, if any */
		x = off + plen;
		for (i = 0; i < nruns; i++) {
			a = runs[2 * i];
			n = runs[2 * i + 1];
			if (a >= x)
				break;
			/* the run opens the next piece, unless no piece holds it */
			if (a + n > x && a > off && n <= s->seq_len) {
				plen = a - off;
				break;
			}
		}
	}
	s->used += plen;
	return (uint32_t)plen;
}
