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

/*
 * Hybrid context parallelism (cp-balance hybrid): every sequence runs on
 * its own group of k CP ranks of its data-parallel rank, k a power of two
 * up to cp (its local_cp_size), the group the aligned one Megatron-LM
 * makes for size k (ranks first .. first + k - 1, first a multiple of k).
 * A hybrid stream's SEQ frame says both in its u32 flags word
 * (ovl-frame(5)): k in bits 0-15, first in bits 16-31.
 */
#define OVL_CP_GROUP(k, first)	((uint32_t)(k) | (uint32_t)(first) << 16)
#define OVL_CP_GROUP_SIZE(w)	((uint32_t)(w) & 0xffffu)
#define OVL_CP_GROUP_FIRST(w)	((uint32_t)(w) >> 16)

/*
 * A sequence's CP size, Megatron-LM's rule (hybrid_cp_schedule.py,
 * gpus_needed): the next power of two of len over the tokens one CP
 * rank holds (per_rank), at least 1, at most cp.
 */
uint32_t ovl_cp_hybrid_size(uint32_t len, uint32_t per_rank, uint32_t cp);

/*
 * The CP size a SEQ's padded layout is computed with: its group's under
 * hybrid (its flags word), else the plan's cp.
 */
uint32_t ovl_cp_seq_size(uint32_t cp, int hybrid, uint32_t flags);

#endif
