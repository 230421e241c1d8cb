/*
 * plan-sched: the weight schedule of a plan: the weights in force at a
 * count, and each source's target share integrated over the schedule (see
 * plan.h).
 */
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- schedules ---------------------------------------------------------- */

/*
 * Segment k of the weight function covers [points[k].at, points[k+1].at)
 * (the last one is open-ended); it ramps when points[k+1].ramp.
 */
static double
seg_weight(const struct ovl_plan *p, size_t k, size_t i, double t)
{
	const struct ovl_plan_point *a = &p->points[k], *b;
	double f;

	if (k + 1 >= p->npoints || !p->points[k + 1].ramp)
		return a->w[i];
	b = &p->points[k + 1];
	f = (t - (double)a->at) / ((double)b->at - (double)a->at);
	if (f <= 0)
		return a->w[i];
	if (f >= 1)
		return b->w[i];
	return a->w[i] + (b->w[i] - a->w[i]) * f;
}

static size_t
seg_of(const struct ovl_plan *p, uint64_t T)
{
	size_t lo = 0, hi = p->npoints;

	/* the last k with points[k].at <= T */
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (p->points[mid].at <= T)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

void
ovl_plan_weights_at(const struct ovl_plan *p, uint64_t T, double *w)
{
	size_t k = seg_of(p, T), i;

	for (i = 0; i < p->nsources; i++)
		w[i] = seg_weight(p, k, i, (double)T);
}

/* The integral over [0,1] of (w0 + dw u) / (s0 + ds u) du, s0, s1 > 0. */
static double
ratio_integral(double w0, double w1, double s0, double s1)
{
	double dw = w1 - w0, ds = s1 - s0, r, sum, pw, alpha, beta;
	int n;

	r = ds / s0;
	if (fabs(r) < 1e-3) {
		/* series: sum (-r)^n (w0/(n+1) + dw/(n+2)) / s0 */
		sum = 0;
		pw = 1;
		for (n = 0; n < 10; n++) {
			sum += pw * (w0 / (n + 1) + dw / (n + 2));
			pw *= -r;
		}
		return sum / s0;
	}
	alpha = dw / ds;
	beta = w0 - alpha * s0;
	return alpha + beta * log(s1 / s0) / ds;
}

void
ovl_plan_target_active(const struct ovl_plan *p, uint64_t from, uint64_t to,
    const unsigned char *active, double *acc)
{
	size_t k, i, n = p->nsources;
	int all = 1;
	double x0, x1, L, s0, s1, w0, w1, v, smax;

	if (to <= from)
		return;
	for (i = 0; i < n; i++)
		if (active != NULL && !active[i])
			all = 0;
	for (k = seg_of(p, from); k < p->npoints; k++) {
		uint64_t a = p->points[k].at;
		uint64_t b = k + 1 < p->npoints ? p->points[k + 1].at : UINT64_MAX;
		uint64_t lo = from > a ? from : a, hi = to < b ? to : b;

		if (lo >= to)
			break;
		if (hi <= lo)
			continue;
		x0 = (double)lo;
		x1 = (double)hi;
		L = (double)(hi - lo);
		if (all) {
			for (i = 0; i < n; i++)
				acc[i] += L * 0.5 * (seg_weight(p, k, i, x0) +
				    seg_weight(p, k, i, x1));
			continue;
		}
		s0 = s1 = 0;
		for (i = 0; i < n; i++)
			if (active[i]) {
				s0 += seg_weight(p, k, i, x0);
				s1 += seg_weight(p, k, i, x1);
			}
		smax = s0 > s1 ? s0 : s1;
		if (!(smax > 0))
			continue;
		for (i = 0; i < n; i++) {
			if (!active[i])
				continue;
			w0 = seg_weight(p, k, i, x0);
			w1 = seg_weight(p, k, i, x1);
			if (s0 <= 1e-12 * smax)
				v = w1 / s1;	/* w_i is proportional to s */
			else if (s1 <= 1e-12 * smax)
				v = w0 / s0;
			else
				v = ratio_integral(w0, w1, s0, s1);
			if (v < 0)
				v = 0;
			if (v > 1)
				v = 1;
			acc[i] += L * v;
		}
	}
}

void
ovl_plan_target(const struct ovl_plan *p, uint64_t T, double *target,
    double *share)
{
	size_t i;

	for (i = 0; i < p->nsources; i++)
		target[i] = 0;
	ovl_plan_target_active(p, 0, T, NULL, target);
	if (share != NULL)
		ovl_plan_weights_at(p, T, share);
}

void
ovl_plan_stepcfg(const struct ovl_plan *p, struct ovl_stepcfg *cfg)
{
	cfg->nseq = p->ranks * p->micro_batches;
	cfg->budget = p->step_tokens;
	cfg->nstages = p->nseq;
	cfg->at = p->seq_at;
	cfg->seq_len = p->seq_len;
	cfg->exact = p->uniform == 1;
}
