/*
 * rng: the one seeded generator all randomness comes from (xoshiro256**,
 * seeded through splitmix64). Same seed, same sequence, on every machine.
 */
#ifndef OVL_RNG_H
#define OVL_RNG_H

#include <stddef.h>
#include <stdint.h>

struct ovl_rng {
	uint64_t	s[4];
};

/* Seed from one 64-bit value. */
void	ovl_rng_seed(struct ovl_rng *r, uint64_t seed);
/* Seed from a value and a stream number, for independent sub-streams (e.g. per epoch). */
void	ovl_rng_seed2(struct ovl_rng *r, uint64_t seed, uint64_t stream);
uint64_t ovl_rng_next(struct ovl_rng *r);
/* Uniform in [0, n), n > 0, without modulo bias. */
uint64_t ovl_rng_below(struct ovl_rng *r, uint64_t n);
/* Uniform in [0, 1). */
double	ovl_rng_double(struct ovl_rng *r);
/* Fisher-Yates shuffle of a[0..n). */
void	ovl_rng_shuffle_u32(struct ovl_rng *r, uint32_t *a, size_t n);

#endif
