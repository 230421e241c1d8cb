/*
 * CRC-32C: the three-stream hardware path and the tables agree with a
 * bitwise reference at every length and alignment, and split anywhere.
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

static void
test_random(void)
{
	enum { N = 40000 };
	unsigned char *b = malloc(N);
	struct ovl_rng r;
	size_t i;
	int t, bad = 0;

	ovl_rng_seed(&r, 7);
	for (i = 0; i < N; i++)
		b[i] = (unsigned char)ovl_rng_next(&r);
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

int
main(void)
{
	RUN(test_vectors);
	RUN(test_random);
	UNIT_DONE();
}
