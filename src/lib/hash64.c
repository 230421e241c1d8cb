#include "hash64.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t
rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t
rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);	/* the host is little-endian (configure checks) */
	return v;
}

static inline uint32_t
rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline uint64_t
round1(uint64_t acc, uint64_t in)
{
	acc += in * P2;
	acc = rotl(acc, 31);
	return acc * P1;
}

static inline uint64_t
merge(uint64_t acc, uint64_t v)
{
	acc ^= round1(0, v);
	return acc * P1 + P4;
}

void
ovl_hash64_init(struct ovl_hash64 *h, uint64_t seed)
{
	memset(h, 0, sizeof(*h));
	h->seed = seed;
	h->v[0] = seed + P1 + P2;
	h->v[1] = seed + P2;
	h->v[2] = seed;
	h->v[3] = seed - P1;
}

/* Fold whole 32-byte stripes; returns the bytes consumed. */
static size_t
stripes(uint64_t v[4], const uint8_t *p, size_t n)
{
	uint64_t a = v[0], b = v[1], c = v[2], d = v[3];
	size_t i;

	for (i = 0; i + 32 <= n; i += 32) {
		a = round1(a, rd64(p + i));
		b = round1(b, rd64(p + i + 8));
		c = round1(c, rd64(p + i + 16));
		d = round1(d, rd64(p + i + 24));
	}
	v[0] = a, v[1] = b, v[2] = c, v[3] = d;
	return i;
}

void
ovl_hash64_update(struct ovl_hash64 *h, const void *data, size_t n)
{
	const uint8_t *p = data;
	size_t take;

	h->total += n;
	if (h->memlen > 0) {
		take = 32 - h->memlen;
		if (take > n)
			take = n;
		memcpy(h->mem + h->memlen, p, take);
		h->memlen += (uint32_t)take;
		p += take;
		n -= take;
		if (h->memlen < 32)
			return;
		stripes(h->v, h->mem, 32);
		h->memlen = 0;
	}
	take = stripes(h->v, p, n);
	p += take;
	n -= take;
	if (n > 0) {
		memcpy(h->mem, p, n);
		h->memlen = (uint32_t)n;
	}
}

uint64_t
ovl_hash64_digest(const struct ovl_hash64 *h)
{
	const uint8_t *p = h->mem, *end = h->mem + h->memlen;
	uint64_t acc;

	if (h->total >= 32) {
		acc = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) +
		    rotl(h->v[3], 18);
		acc = merge(acc, h->v[0]);
		acc = merge(acc, h->v[1]);
		acc = merge(acc, h->v[2]);
		acc = merge(acc, h->v[3]);
	} else
		acc = h->seed + P5;
	acc += h->total;
	for (; p + 8 <= end; p += 8) {
		acc ^= round1(0, rd64(p));
		acc = rotl(acc, 27) * P1 + P4;
	}
	if (p + 4 <= end) {
		acc ^= (uint64_t)rd32(p) * P1;
		acc = rotl(acc, 23) * P2 + P3;
		p += 4;
	}
	for (; p < end; p++) {
		acc ^= (uint64_t)*p * P5;
		acc = rotl(acc, 11) * P1;
	}
	acc ^= acc >> 33;
	acc *= P2;
	acc ^= acc >> 29;
	acc *= P3;
	acc ^= acc >> 32;
	return acc;
}

uint64_t
ovl_hash64(const void *p, size_t n, uint64_t seed)
{
	struct ovl_hash64 h;

	ovl_hash64_init(&h, seed);
	ovl_hash64_update(&h, p, n);
	return ovl_hash64_digest(&h);
}
