/*
 * cp: context parallelism's padded layout of a sequence (plan keys cp
 * and cp-pad, ovl-plan(5); a stream says them in its META, ovl-frame(5)).
 * A SEQ frame holds its real tokens one after the other; the layout a
 * context-parallel trainer takes (Megatron-LM's THD batches:
 * cu_seqlens_padded, max_seqlen) follows from its cu_seqlens, cp and the
 * policy alone. ovl-construct packs by it and ovl-ckpt writes it; the
 * Python package computes the same (python/overlord/cp.py).
 */
#ifndef OVL_CP_H
#define OVL_CP_H

#include <stdint.h>

/*
 * A segment of len tokens padded as policy (enum ovl_cp_pad, plan.h)
 * pads each one: to a multiple of 2 x cp under document, else len. cp 0:
 * len.
 */
uint32_t ovl_cp_padded(uint32_t cp, int policy, uint32_t len);

/*
 * The padded bounds of a sequence of ntok tokens (trailing padding
 * included) whose segments are cu[0..nseg], into out[0..nseg]
 * (cu_seqlens_padded): document, every segment rounded up to a multiple
 * of 2 x cp; sequence, the segments as they are and the last bound at
 * ntok rounded up to one; none, the last bound at ntok. Returns
 * max_seqlen, the longest padded segment (0 without segments). The
 * caller keeps the padded total within seq-len (ovl-construct does).
 */
uint32_t ovl_cp_layout(uint32_t cp, int policy, const uint32_t *cu,
	    uint32_t nseg, uint32_t ntok, uint32_t *out);

#endif
