#include "crc32c.h"

#include <string.h>

#define POLY 0x82f63b78u	/* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static int have_table;
static int use_hw = -1;

static void
make_table(void)
{
	uint32_t c;
	int i, j, k;

	for (i = 0; i < 256; i++) {
		c = (uint32_t)i;
		for (k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (j = 1; j < 8; j++)
			table[j][i] = (table[j - 1][i] >> 8) ^
			    table[0][table[j - 1][i] & 0xff];
	have_table = 1;
}

static uint32_t
crc_sw(uint32_t crc, const unsigned char *p, size_t n)
{
	uint64_t w;

	if (!have_table)
		make_table();
	while (n > 0 && ((uintptr_t)p & 7) != 0) {
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
		n--;
	}
	while (n >= 8) {
		memcpy(&w, p, 8);
		w ^= crc;
		crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		    table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		    table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		    table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n-- > 0)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/*
 * Three independent streams over blocks of 3 x STRIDE bytes keep the crc32
 * instruction's pipeline full (one stream waits on its 3-cycle latency).
 * The streams are joined by linearity: feeding B after register r gives
 * crc(0, B) ^ shift(r, |B|), where shift (feeding zeros) is a linear map
 * kept as four byte tables per distance.
 */
#define STRIDE 256
static uint32_t shift1[4][256], shift2[4][256];	/* by STRIDE, 2 x STRIDE bytes */
static int have_shift;

__attribute__((target("sse4.2")))
static uint32_t
zeros(uint32_t c, size_t n)
{
	uint64_t r = c;

	for (; n >= 8; n -= 8)
		r = __builtin_ia32_crc32di(r, 0);
	return (uint32_t)r;
}

__attribute__((target("sse4.2")))
static void
make_shift(void)
{
	uint32_t b1[32], b2[32];
	int i, j, k;

	for (k = 0; k < 32; k++) {
		b1[k] = zeros(1u << k, STRIDE);
		b2[k] = zeros(1u << k, 2 * STRIDE);
	}
	for (i = 0; i < 4; i++)
		for (j = 0; j < 256; j++) {
			uint32_t v1 = 0, v2 = 0;
			for (k = 0; k < 8; k++)
				if (j & (1 << k)) {
					v1 ^= b1[i * 8 + k];
					v2 ^= b2[i * 8 + k];
				}
			shift1[i][j] = v1;
			shift2[i][j] = v2;
		}
	have_shift = 1;
}

static inline uint32_t
shift_by(uint32_t t[4][256], uint32_t c)
{
	return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^
	    t[3][c >> 24];
}

__attribute__((target("sse4.2")))
static uint32_t
crc_hw(uint32_t crc, const unsigned char *p, size_t n)
{
	uint64_t c = crc, w;

	while (n > 0 && ((uintptr_t)p & 7) != 0) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
	if (n >= 3 * STRIDE && !have_shift)
		make_shift();
	while (n >= 3 * STRIDE) {
		uint64_t c1 = 0, c2 = 0, w1, w2;
		size_t i;

		for (i = 0; i < STRIDE; i += 8) {
			memcpy(&w, p + i, 8);
			memcpy(&w1, p + STRIDE + i, 8);
			memcpy(&w2, p + 2 * STRIDE + i, 8);
			c = __builtin_ia32_crc32di(c, w);
			c1 = __builtin_ia32_crc32di(c1, w1);
			c2 = __builtin_ia32_crc32di(c2, w2);
		}
		c = shift_by(shift2, (uint32_t)c) ^ shift_by(shift1, (uint32_t)c1) ^
		    (uint32_t)c2;
		p += 3 * STRIDE;
		n -= 3 * STRIDE;
	}
	while (n >= 8) {
		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
		p += 8;
		n -= 8;
	}
	while (n-- > 0)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t
ovl_crc32c(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	crc = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
	if (use_hw < 0) {
		__builtin_cpu_init();
		use_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
	}
	if (use_hw)
		return ~crc_hw(crc, p, n);
#else
	(void)use_hw;
#endif
	return ~crc_sw(crc, p, n);
}
