#include "step.h"

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
	uint64_t plen = left < s->seq_len ? left : s->seq_len;
	int full;

	*opened = 0;
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
	if (s->cfg->exact && s->used + plen > s->budget)
		plen = s->budget - s->used;
	s->used += plen;
	return (uint32_t)plen;
}
