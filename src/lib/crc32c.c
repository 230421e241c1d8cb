#include "crc32c.h"

#include <pthread.h>
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

/* ---- joining and patching: multiplications by x^(8t) ---- */

/*
 * Feeding t zero bytes through the CRC register multiplies it by x^(8t)
 * modulo the polynomial. The multiplications by x^(8 * 2^k) are byte-sliced
 * tables, so a shift costs a few lookups however long t is.
 */
#define SH_K 31		/* up to 2^31 - 1 bytes at a time */

static uint32_t sh_tab[SH_K][4][256];
static uint32_t sh_pow[64 - SH_K];	/* x^(8 * 2^k) for k >= SH_K */
static pthread_once_t sh_once = PTHREAD_ONCE_INIT;

static uint32_t
multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = (uint32_t)1 << 31, p = 0;

	if (a == 0)
		return 0;
	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
	}
	return p;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SH_CLMUL 1
/*
 * With PCLMULQDQ and SSE4.2, a multiplication by x^(8 * 2^k) is one
 * carry-less multiply and one crc32 instruction instead of four lookups in
 * tables that do not stay in the cache: for reflected 32-bit a and b,
 * clmul(a, b) read as 64 bits of data is a * b * x, and crc32 of it from 0
 * is that times x^32 modulo the polynomial; so the constant for k is
 * x^(8 * 2^k - 33) (k >= 3; below, the tables).
 */
static uint32_t sh_kx[SH_K];
static int sh_clmul;

static uint32_t
xpow(uint64_t n)
{
	uint32_t r = (uint32_t)1 << 31, b = (uint32_t)1 << 30;	/* 1, x */

	for (; n != 0; n >>= 1) {
		if (n & 1)
			r = multmodp(r, b);
		b = multmodp(b, b);
	}
	return r;
}

__attribute__((target("pclmul,sse4.2")))
static uint32_t
shift_clmul(uint32_t s, uint64_t t)
{
	__m128i p;
	int k;

	for (k = 3; t != 0 && k < SH_K; k++, t >>= 1)
		if (t & 1) {
			p = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)s),
			    _mm_cvtsi32_si128((int)sh_kx[k]), 0);
			s = (uint32_t)_mm_crc32_u64(0,
			    (uint64_t)_mm_cvtsi128_si64(p));
		}
	return s;
}
#endif

static void
shift_init(void)
{
	uint32_t p = (uint32_t)1 << 30;	/* x^1 */
	int n, k, j, b;

	/* x^(2^n) for n = 3 .. SH_K + 2: x^(8 * 2^k) */
	for (n = 1; n < 3; n++)
		p = multmodp(p, p);
	for (k = 0; k < SH_K; k++) {
		p = multmodp(p, p);
		for (j = 0; j < 4; j++)
			for (b = 0; b < 256; b++)
				sh_tab[k][j][b] = multmodp((uint32_t)b << (8 * j),
				    p);
	}
	for (k = 0; k < 64 - SH_K; k++) {
		p = multmodp(p, p);
		sh_pow[k] = p;
	}
#ifdef SH_CLMUL
	__builtin_cpu_init();
	sh_clmul = __builtin_cpu_supports("pclmul") &&
	    __builtin_cpu_supports("sse4.2");
	for (k = 3; k < SH_K; k++)
		sh_kx[k] = xpow(((uint64_t)8 << k) - 33);
#endif
}

static inline uint32_t
shift_k(int k, uint32_t s)
{
	return sh_tab[k][0][s & 0xff] ^ sh_tab[k][1][(s >> 8) & 0xff] ^
	    sh_tab[k][2][(s >> 16) & 0xff] ^ sh_tab[k][3][s >> 24];
}

/* s * x^(8t) modulo the polynomial. */
static uint32_t
shift(uint32_t s, uint64_t t)
{
	uint64_t lo = t & (((uint64_t)1 << SH_K) - 1), hi = t >> SH_K;
	int k;

	pthread_once(&sh_once, shift_init);
#ifdef SH_CLMUL
	if (sh_clmul) {
		for (k = 0; k < 3; k++, lo >>= 1)
			if (lo & 1)
				s = shift_k(k, s);
		s = shift_clmul(s, lo);
	} else
#endif
	for (k = 0; lo != 0; k++, lo >>= 1)
		if (lo & 1)
			s = shift_k(k, s);
	/* 2^31 bytes and more: rare, a bitwise multiplication each */
	for (k = SH_K; hi != 0; k++, hi >>= 1)
		if (hi & 1)
			s = multmodp(sh_pow[k - SH_K], s);
	return s;
}

uint32_t
ovl_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	return shift(crc_a, len_b) ^ crc_b;
}

uint32_t
ovl_crc32c_patch(uint32_t crc, const void *delta, size_t n, uint64_t after)
{
	static const uint8_t zeros[64];
	uint32_t r = ovl_crc32c(0, delta, n), z = 0;
	size_t left, k;

	/* the raw (unconditioned) CRC of delta: minus that of n zero bytes */
	for (left = n; left > 0; left -= k) {
		k = left < sizeof(zeros) ? left : sizeof(zeros);
		z = ovl_crc32c(z, zeros, k);
	}
	return crc ^ shift(r ^ z, after);
}
