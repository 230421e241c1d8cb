/*
 * ovl-construct: context parallelism (plan keys cp and cp-pad). What the
 * CP policy adds to a piece (its padding) and what each of the cp
 * context-parallel ranks of a data-parallel rank computes for it, under
 * Megatron-LM's per-document zigzag split: a document padded to P = 2 x
 * cp x c tokens is cut into 2 x cp chunks of c tokens, and CP rank r
 * gets chunks r and 2cp-1-r. See construct.h.
 */
#include "construct.h"

#include "cp.h"

uint32_t
cp_padded(const struct construct_opts *o, uint32_t len)
{
	return ovl_cp_padded(o->cp, o->cp_pad, len);
}

/* Sum of 2p+1 over the real positions p (p < len) in [from, to). */
static double
pairs(uint64_t from, uint64_t to, uint64_t len)
{
	uint64_t a = from < len ? from : len, b = to < len ? to : len;

	return (double)b * (double)b - (double)a * (double)a;
}

void
cp_rank_costs(const struct construct_opts *o, uint32_t len, double *out)
{
	cp_rank_costs_k(o, o->cp, len, out);
}

void
cp_rank_costs_k(const struct construct_opts *o, uint32_t k, uint32_t len,
    double *out)
{
	uint64_t P = ovl_cp_padded(k, OVL_CP_PAD_DOCUMENT, len);
	uint64_t g = 2 * (uint64_t)k;
	uint64_t ch = P / g;
	uint32_t r;

	for (r = 0; r < k; r++) {
		uint64_t k1 = r, k2 = g - 1 - r;

		out[r] = o->cost.a * (pairs(k1 * ch, (k1 + 1) * ch, len) +
		    pairs(k2 * ch, (k2 + 1) * ch, len)) +
		    o->cost.b * (double)(2 * ch);
	}
}

double
cp_piece_cost(const struct construct *c, const struct piece *p)
{
	double v[OVL_PLAN_MAX_CP], m = 0;
	uint32_t r;

	cp_rank_costs(c->o, p->length, v);
	for (r = 0; r < c->o->cp; r++)
		if (v[r] > m)
			m = v[r];
	return m + p->enc / c->o->cp;
}

double
cp_max_cost(struct construct *c, size_t n, const uint32_t *rank,
    double *lb)
{
	const struct construct_opts *o = c->o;
	struct stepwork *w = &c->sw;
	size_t i, nr = (size_t)o->ranks * o->cp;
	double v[OVL_PLAN_MAX_CP], m = 0, total = 0, lo;
	uint32_t r;

	if (nr > w->cpcap) {
		w->cpcost = ovl_xrealloc(w->cpcost, nr * sizeof(*w->cpcost));
		w->cpcap = nr;
	}
	if (n > w->cpmin_cap) {
		w->cpmin_cap = n + n / 2 + 16;
		w->cpmin = ovl_xrealloc(w->cpmin, w->cpmin_cap *
		    sizeof(*w->cpmin));
	}
	memset(w->cpcost, 0, nr * sizeof(*w->cpcost));
	for (i = 0; i < n; i++) {
		const struct piece *p = &c->pieces[w->idx[i]];

		cp_rank_costs(o, p->length, v);
		lo = v[0] + p->enc / o->cp;
		for (r = 0; r < o->cp; r++) {
			v[r] += p->enc / o->cp;
			w->cpcost[(size_t)rank[i] * o->cp + r] += v[r];
			total += v[r];
			if (v[r] < lo)
				lo = v[r];
		}
		w->cpmin[i] = lo;
	}
	for (i = 0; i < nr; i++)
		if (w->cpcost[i] > m)
			m = w->cpcost[i];
	if (lb != NULL) {
		/*
		 * Every CP rank of a DP rank holds at least the least share
		 * of each of its pieces: the DP bound over those shares holds
		 * for the costliest (DP, CP) rank, and so does the mean.
		 */
		*lb = ovl_balance_lower_bound(w->cpmin, n, o->ranks,
		    w->scratch);
		if (total / (double)nr > *lb)
			*lb = total / (double)nr;
	}
	return m;
}

int
cp_seq_costs(const struct construct_opts *o, const uint32_t *cu,
    uint32_t nseg, uint32_t ntok, double *out)
{
	uint64_t g = 2 * (uint64_t)o->cp, T, ch, k[2], x, y;
	double v[OVL_PLAN_MAX_CP], pr;
	uint32_t i, r, j;

	memset(out, 0, o->cp * sizeof(*out));
	if (o->cp_pad == OVL_CP_PAD_DOCUMENT) {
		for (i = 0; i < nseg; i++) {
			cp_rank_costs(o, cu[i + 1] - cu[i], v);
			for (r = 0; r < o->cp; r++)
				out[r] += v[r];
		}
		return 0;
	}
	T = o->cp_pad == OVL_CP_PAD_SEQUENCE ? (ntok + g - 1) / g * g : ntok;
	if (T % g != 0)
		return -1;
	ch = T / g;
	for (r = 0; r < o->cp; r++) {
		k[0] = r;
		k[1] = g - 1 - r;
		pr = 0;
		for (j = 0; j < 2; j++)
			for (i = 0; i < nseg; i++) {
				x = cu[i] > k[j] * ch ? cu[i] : k[j] * ch;
				y = cu[i + 1] < (k[j] + 1) * ch ? cu[i + 1] :
				    (k[j] + 1) * ch;
				if (x < y)
					pr += pairs(x - cu[i], y - cu[i],
					    UINT64_MAX);
			}
		out[r] = o->cost.a * pr + o->cost.b * (double)(2 * ch);
	}
	return 0;
}

void
cp_check(const struct construct_opts *o)
{
	uint64_t g = 2 * (uint64_t)o->cp;
	size_t k;

	if (o->cp == 0)
		return;
	for (k = 0; k < o->nst; k++) {
		if (o->sl[k] < g)
			ovl_errx(OVL_EXIT_USAGE, "cp %u: seq-len %u cannot hold "
			    "2 x cp = %" PRIu64 " tokens", o->cp, o->sl[k], g);
		if (o->cp_pad != OVL_CP_PAD_NONE && o->sl[k] % g != 0)
			ovl_errx(OVL_EXIT_USAGE, "cp %u: seq-len %u is not a "
			    "multiple of 2 x cp = %" PRIu64 ", which cp-pad %s "
			    "pads to", o->cp, o->sl[k], g,
			    ovl_plan_cp_pads[o->cp_pad]);
	}
	if (o->cp_hybrid && ((o->cp & (o->cp - 1)) != 0 ||
	    o->cp_pad == OVL_CP_PAD_NONE || o->uniform))
		ovl_errx(OVL_EXIT_USAGE, "cp %u, cp-balance hybrid: needs cp a "
		    "power of two, cp-pad document or sequence and no fixed "
		    "shapes (uniform)", o->cp);
	if (o->uniform && o->cp_pad == OVL_CP_PAD_DOCUMENT)
		ovl_errx(OVL_EXIT_USAGE, "cp %u with fixed shapes (uniform): "
		    "cp-pad document cannot fit; use cp-pad sequence or none",
		    o->cp);
}
