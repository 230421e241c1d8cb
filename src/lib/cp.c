/*
 * cp: context parallelism's padded layout. See cp.h.
 */
#include "cp.h"

#include "plan.h"

uint32_t
ovl_cp_padded(uint32_t cp, int policy, uint32_t len)
{
	uint64_t g = 2 * (uint64_t)cp;

	if (cp == 0 || policy != OVL_CP_PAD_DOCUMENT)
		return len;
	return (uint32_t)((len + g - 1) / g * g);
}

uint32_t
ovl_cp_layout(uint32_t cp, int policy, const uint32_t *cu, uint32_t nseg,
    uint32_t ntok, uint32_t *out)
{
	uint64_t g = 2 * (uint64_t)cp;
	uint32_t i, m = 0;

	out[0] = 0;
	for (i = 0; i < nseg; i++)
		out[i + 1] = policy == OVL_CP_PAD_DOCUMENT ? out[i] +
		    ovl_cp_padded(cp, policy, cu[i + 1] - cu[i]) : cu[i + 1];
	if (nseg > 0 && policy == OVL_CP_PAD_SEQUENCE && cp > 0)
		out[nseg] = (uint32_t)((ntok + g - 1) / g * g);
	else if (nseg > 0 && policy != OVL_CP_PAD_DOCUMENT)
		out[nseg] = ntok;
	for (i = 0; i < nseg; i++)
		if (out[i + 1] - out[i] > m)
			m = out[i + 1] - out[i];
	return m;
}

uint32_t
ovl_cp_hybrid_size(uint32_t len, uint32_t per_rank, uint32_t cp)
{
	uint32_t k = 1;

	while (k < cp && (uint64_t)k * per_rank < len)
		k *= 2;
	return k;
}

uint32_t
ovl_cp_seq_size(uint32_t cp, int hybrid, uint32_t flags)
{
	uint32_t k = OVL_CP_GROUP_SIZE(flags);

	return hybrid && k > 0 ? k : cp;
}
