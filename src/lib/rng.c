#include "rng.h"

static uint64_t
splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void
ovl_rng_seed(struct ovl_rng *r, uint64_t seed)
{
	uint64_t x = seed;
	int i;

	for (i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

void
ovl_rng_seed2(struct ovl_rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed;

	ovl_rng_seed(r, splitmix64(&x) ^ (stream * 0xd1342543de82ef95ull + 1));
}

static inline uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t
ovl_rng_next(struct ovl_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t
ovl_rng_below(struct ovl_rng *r, uint64_t n)
{
	uint64_t x, limit;

	if (n <= 1)
		return 0;
	limit = UINT64_MAX - UINT64_MAX % n;
	do
		x = ovl_rng_next(r);
	while (x >= limit);
	return x % n;
}

double
ovl_rng_double(struct ovl_rng *r)
{
	return (double)(ovl_rng_next(r) >> 11) * 0x1.0p-53;
}

void
ovl_rng_shuffle_u32(struct ovl_rng *r, uint32_t *a, size_t n)
{
	size_t i, j;
	uint32_t t;

	for (i = n; i > 1; i--) {
		j = (size_t)ovl_rng_below(r, i);
		t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}
