/*
 * hash64 (XXH64): published vectors, streaming in any split, and an
 * independent oracle: libzstd stores the low 32 bits of XXH64 (seed 0) of
 * the content as the frame checksum.
 */
#include <stdint.h>
#include <string.h>
#include <zstd.h>

#include "hash64.h"
#include "rng.h"
#include "unit.h"

static void
test_vectors(void)
{
	const char *spam = "Nobody inspects the spammish repetition";

	CHECK(ovl_hash64("", 0, 0) == 0xEF46DB3751D8E999ULL);
	CHECK(ovl_hash64("a", 1, 0) == 0xD24EC4F1A98C6E5BULL);
	CHECK(ovl_hash64("abc", 3, 0) == 0x44BC2CF5AD770999ULL);
	CHECK(ovl_hash64(spam, strlen(spam), 0) == 0xFBCEA83C8A378BF1ULL);
	CHECK(ovl_hash64("abc", 3, 1) != ovl_hash64("abc", 3, 0));
}

static uint8_t data[100000];

static void
test_streaming(void)
{
	struct ovl_rng r;
	struct ovl_hash64 h;
	size_t n, off, step;
	uint64_t want;
	int k, ok = 1;

	ovl_rng_seed(&r, 42);
	for (n = 0; n < sizeof(data); n++)
		data[n] = (uint8_t)ovl_rng_next(&r);
	for (k = 0; k < 200; k++) {
		n = (size_t)ovl_rng_below(&r, k < 100 ? 200 : sizeof(data));
		want = ovl_hash64(data, n, (uint64_t)k);
		ovl_hash64_init(&h, (uint64_t)k);
		for (off = 0; off < n; off += step) {
			step = 1 + (size_t)ovl_rng_below(&r, 70);
			if (step > n - off)
				step = n - off;
			ovl_hash64_update(&h, data + off, step);
			/* digest in the middle must not disturb the state */
			(void)ovl_hash64_digest(&h);
		}
		if (ovl_hash64_digest(&h) != want)
			ok = 0;
	}
	CHECK(ok);
}

static void
test_zstd_oracle(void)
{
	static uint8_t z[110000];
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	size_t sizes[] = { 1, 31, 32, 33, 63, 64, 1000, 4097, sizeof(data) };
	size_t i, zn;
	uint32_t want;

	CHECK(cc != NULL);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ZSTD_CCtx_reset(cc, ZSTD_reset_session_and_parameters);
		ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
		zn = ZSTD_compress2(cc, z, sizeof(z), data, sizes[i]);
		CHECK(!ZSTD_isError(zn) && zn >= 4);
		memcpy(&want, z + zn - 4, 4);
		CHECK((uint32_t)ovl_hash64(data, sizes[i], 0) == want);
	}
	ZSTD_freeCCtx(cc);
}

int
main(void)
{
	RUN(test_vectors);
	RUN(test_streaming);
	RUN(test_zstd_oracle);
	UNIT_DONE();
}
