/*
 * The Python reader's helper in C, beside the CRC-32C in libovlcrc.so:
 * the position ids of a SEQ sent without them (ovl-frame(5) NOPOS), from
 * its cu_seqlens, in one pass (numpy takes four). Loaded through ctypes
 * (overlord/_crc.py); never sanitized (it is loaded into python3).
 */
#include <stdint.h>

/*
 * out[0..ntok): 0, 1, ... from every piece's start (cu[0..npieces]), 0
 * in the padding; every element written once, whatever cu holds.
 */
#define POSITIONS(NAME, T)						\
void NAME(const uint32_t *, uint32_t, T *, uint32_t);			\
void									\
NAME(const uint32_t *cu, uint32_t npieces, T *out, uint32_t ntok)	\
{									\
	uint32_t i, k = 0, a, b;					\
									\
	for (i = 0; i < npieces; i++) {					\
		a = cu[i] < ntok ? cu[i] : ntok;			\
		b = cu[i + 1] < ntok ? cu[i + 1] : ntok;		\
		for (; k < a; k++)					\
			out[k] = 0;					\
		for (; k < b; k++)					\
			out[k] = (T)(k - a);				\
	}								\
	for (; k < ntok; k++)						\
		out[k] = 0;						\
}

POSITIONS(ovl_py_positions64, int64_t)
POSITIONS(ovl_py_positions32, uint32_t)
