/*
 * hash64: XXH64, a fast 64-bit non-cryptographic hash, written from its
 * public specification, with a streaming interface. Feeding the same bytes
 * in any number of pieces gives the same value as one call.
 *
 * ovl-ckpt chains it per output file and per checkpoint:
 * H_i = XXH64(bytes written since checkpoint i-1, seed H_{i-1}), H_0 = 0,
 * so a resumed run continues the chain from 8 bytes of state.
 */
#ifndef OVL_HASH64_H
#define OVL_HASH64_H

#include <stddef.h>
#include <stdint.h>

struct ovl_hash64 {
	uint64_t	v[4];		/* the four lanes */
	uint64_t	total;		/* bytes fed so far */
	uint64_t	seed;
	uint8_t		mem[32];	/* bytes not yet folded into a lane */
	uint32_t	memlen;
};

/* Start a hash with seed. */
void	ovl_hash64_init(struct ovl_hash64 *h, uint64_t seed);
/* Feed n more bytes. */
void	ovl_hash64_update(struct ovl_hash64 *h, const void *p, size_t n);
/* The hash of everything fed so far (h is unchanged; feeding may continue). */
uint64_t ovl_hash64_digest(const struct ovl_hash64 *h);
/* One-shot: XXH64(p[0..n), seed). */
uint64_t ovl_hash64(const void *p, size_t n, uint64_t seed);

#endif
