/*
 * CRC-32C: the three-stream hardware path and the tables agree with a
 * bitwise reference at every length and alignment, and split anywhere;
 * combine and patch agree with a pass over the bytes.
 */
#include <stdint.h>
#include <stdlib.h>

#include "crc32c.h"
#include "rng.h"
#include "unit.h"

static uint32_t
ref(uint32_t crc, const unsigned char *p, size_t n)
{
	int k;

	crc = ~crc;
	while (n-- > 0) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
	}
	return ~crc;
}

static void
test_vectors(void)
{
	CHECK(ovl_crc32c(0, "123456789", 9) == 0xe3069283u);
	CHECK(ovl_crc32c(0, "", 0) == 0);
}

/* n random bytes from r (the caller frees them) */
static unsigned char *
random_bytes(struct ovl_rng *r, uint64_t seed, size_t n)
{
	unsigned char *b = malloc(n);
	size_t i;

	ovl_rng_seed(r, seed);
	for (i = 0; i < n; i++)
		b[i] = (unsigned char)ovl_rng_next(r);
	return b;
}

static void
test_random(void)
{
	enum { N = 40000 };
	struct ovl_rng r;
	unsigned char *b = random_bytes(&r, 7, N);
	int t, bad = 0;
	for (t = 0; t < 2000; t++) {
		size_t off = ovl_rng_below(&r, 64);
		size_t n = ovl_rng_below(&r, t < 1000 ? 3000 : N - 64);
		size_t cut = n > 0 ? ovl_rng_below(&r, n) : 0;
		uint32_t want = ref(0, b + off, n);

		if (ovl_crc32c(0, b + off, n) != want)
			bad++;
		if (ovl_crc32c(ovl_crc32c(0, b + off, cut), b + off + cut,
		    n - cut) != want)
			bad++;
	}
	CHECK(bad == 0);
	free(b);
}

/* combine(crc(a), crc(b), |b|) == crc(a||b), at every split. */
static void
test_combine(void)
{
	enum { N = 20000 };
	struct ovl_rng r;
	unsigned char *b = random_bytes(&r, 11, N);
	int t, bad = 0;
	for (t = 0; t < 3000; t++) {
		size_t n = ovl_rng_below(&r, N), cut = n > 0 ?
		    ovl_rng_below(&r, n + 1) : 0;

		if (ovl_crc32c_combine(ovl_crc32c(0, b, cut),
		    ovl_crc32c(0, b + cut, n - cut), n - cut) !=
		    ovl_crc32c(0, b, n))
			bad++;
	}
	CHECK(bad == 0);
	CHECK(ovl_crc32c_combine(0x12345678u, 0, 0) == 0x12345678u);
	free(b);
}

/*
 * Lengths beyond the tables (2^31 bytes and more) agree with the table
 * path: the CRC of 2^k zero bytes, doubled by combining, and a crc joined
 * to 2^33 zeros at once or in two halves.
 */
static void
test_long(void)
{
	static const unsigned char zeros[4096];
	uint32_t z = ovl_crc32c(0, zeros, sizeof(zeros));	/* 2^12 zeros */
	uint64_t len = sizeof(zeros);
	uint32_t a = ovl_crc32c(0, "overlord", 8);

	while (len < ((uint64_t)1 << 33)) {
		z = ovl_crc32c_combine(z, z, len);
		len *= 2;
		if (len == 1u << 14)
			CHECK(z == ovl_crc32c(ovl_crc32c(ovl_crc32c(ovl_crc32c(0,
			    zeros, 4096), zeros, 4096), zeros, 4096), zeros,
			    4096));
	}
	/* z is the CRC of 2^33 zero bytes */
	{
		uint32_t half = ovl_crc32c(0, zeros, sizeof(zeros));
		uint64_t l = sizeof(zeros);

		while (l < ((uint64_t)1 << 32)) {
			half = ovl_crc32c_combine(half, half, l);
			l *= 2;
		}
		CHECK(ovl_crc32c_combine(a, z, len) == ovl_crc32c_combine(
		    ovl_crc32c_combine(a, half, l), half, l));
	}
}

/* patch: xoring bytes of a message, the CRC follows without a new pass. */
static void
test_patch(void)
{
	enum { N = 5000 };
	struct ovl_rng r;
	unsigned char *b = random_bytes(&r, 13, N), delta[100];
	size_t i;
	int t, bad = 0;
	for (t = 0; t < 1000; t++) {
		size_t n = 1 + ovl_rng_below(&r, sizeof(delta));
		size_t at = ovl_rng_below(&r, N - n);
		uint32_t before = ovl_crc32c(0, b, N), after;

		for (i = 0; i < n; i++) {
			delta[i] = (unsigned char)ovl_rng_next(&r);
			b[at + i] ^= delta[i];
		}
		after = ovl_crc32c_patch(before, delta, n, N - at - n);
		if (after != ovl_crc32c(0, b, N))
			bad++;
	}
	CHECK(bad == 0);
	free(b);
}

int
main(void)
{
	RUN(test_vectors);
	RUN(test_random);
	RUN(test_combine);
	RUN(test_long);
	RUN(test_patch);
	UNIT_DONE();
}
