/*
 * bpe-int: what the two BPE models share, tiktoken's rank files (bpe.c)
 * and Hugging Face's merges (hf-bpe.c): the hash of a piece's bytes, a
 * byte comparison, and the cache of merged pieces. Not for tools.
 */
#ifndef OVL_BPE_INT_H
#define OVL_BPE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * The cache of merged pieces: direct-mapped by the piece's hash, a piece of
 * at most OVL_BPE_CACHE_KEY bytes that merges into at most
 * OVL_BPE_CACHE_TOK ids. Pieces that are tokens themselves never get here
 * (one table look-up finds them).
 */
#define OVL_BPE_CACHE_BITS	14
#define OVL_BPE_CACHE_KEY	22
#define OVL_BPE_CACHE_TOK	8

struct ovl_bpe_cslot {
	uint64_t	hash;
	uint8_t		klen;		/* 0: empty */
	uint8_t		ntok;
	unsigned char	key[OVL_BPE_CACHE_KEY];
	uint32_t	tok[OVL_BPE_CACHE_TOK];
};

static inline uint64_t
ovl_bpe__hash(const unsigned char *p, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
	uint64_t w;

	while (n >= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
		p += 8;
		n -= 8;
	}
	if (n >= 4) {
		uint32_t a, c;
		memcpy(&a, p, 4);
		memcpy(&c, p + n - 4, 4);
		w = (uint64_t)a << 32 | c;
	} else if (n > 0) {
		w = (uint64_t)p[0] << 16 | (uint64_t)p[n / 2] << 8 | p[n - 1];
	} else
		w = 0;
	h = (h ^ w) * 0x94d049bb133111ebull;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return h;
}

static inline int
ovl_bpe__eq(const unsigned char *a, const unsigned char *b, size_t n)
{
	uint64_t x, y;
	uint32_t x4, y4, z4, w4;

	while (n >= 8) {
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y)
			return 0;
		a += 8;
		b += 8;
		n -= 8;
	}
	if (n >= 4) {
		memcpy(&x4, a, 4);
		memcpy(&y4, b, 4);
		memcpy(&z4, a + n - 4, 4);
		memcpy(&w4, b + n - 4, 4);
		return x4 == y4 && z4 == w4;
	}
	while (n-- > 0)
		if (*a++ != *b++)
			return 0;
	return 1;
}

/* The slot of piece p[0..n) (hash h) in a cache of 1 << OVL_BPE_CACHE_BITS. */
static inline struct ovl_bpe_cslot *
ovl_bpe__cslot(struct ovl_bpe_cslot *cache, uint64_t h)
{
	return &cache[h >> (64 - OVL_BPE_CACHE_BITS)];
}

/* 1 when slot c holds piece p[0..n) (hash h, n <= OVL_BPE_CACHE_KEY). */
static inline int
ovl_bpe__chit(const struct ovl_bpe_cslot *c, uint64_t h,
    const unsigned char *p, size_t n)
{
	return c->hash == h && c->klen == n && ovl_bpe__eq(c->key, p, n);
}

/* Remember that piece p[0..n) (hash h) merges into tok[0..k). */
static inline void
ovl_bpe__cput(struct ovl_bpe_cslot *c, uint64_t h, const unsigned char *p,
    size_t n, const uint32_t *tok, size_t k)
{
	if (n == 0 || n > OVL_BPE_CACHE_KEY || k > OVL_BPE_CACHE_TOK)
		return;
	c->hash = h;
	c->klen = (uint8_t)n;
	c->ntok = (uint8_t)k;
	memcpy(c->key, p, n);
	memcpy(c->tok, tok, k * sizeof(uint32_t));
}

#endif
