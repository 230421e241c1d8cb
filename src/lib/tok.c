#include "tok.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "num.h"

size_t
ovl_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		unsigned c = p[i];

		if (c < 0x80) {
			/* ASCII fast path, 8 bytes at a time. */
			while (i + 8 <= n) {
				uint64_t w;
				memcpy(&w, p + i, 8);
				if ((w & 0x8080808080808080ull) != 0)
					break;
				i += 8;
			}
			while (i < n && p[i] < 0x80)
				i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			if (i + 1 >= n || (p[i + 1] & 0xc0) != 0x80)
				return i;
			i += 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			unsigned lo = c == 0xe0 ? 0xa0 : 0x80;
			unsigned hi = c == 0xed ? 0x9f : 0xbf;
			if (i + 2 >= n || p[i + 1] < lo || p[i + 1] > hi ||
			    (p[i + 2] & 0xc0) != 0x80)
				return i;
			i += 3;
		} else if (c >= 0xf0 && c <= 0xf4) {
			unsigned lo = c == 0xf0 ? 0x90 : 0x80;
			unsigned hi = c == 0xf4 ? 0x8f : 0xbf;
			if (i + 3 >= n || p[i + 1] < lo || p[i + 1] > hi ||
			    (p[i + 2] & 0xc0) != 0x80 || (p[i + 3] & 0xc0) != 0x80)
				return i;
			i += 4;
		} else
			return i;
	}
	return n;
}

/* ---- bytes: UTF-8 bytes as ids ---- */

#define BYTES_EOD 256

static int
bytes_encode(void *impl, const char *text, size_t n, struct ovl_u32vec *out,
    size_t *bad_off)
{
	const unsigned char *p = (const unsigned char *)text;
	uint32_t *dst;
	size_t ok, i;

	(void)impl;
	ok = ovl_utf8_valid(text, n);
	if (ok != n) {
		*bad_off = ok;
		return -1;
	}
	dst = ovl_u32vec_reserve(out, n);
	for (i = 0; i < n; i++)
		dst[i] = p[i];
	out->len += n;
	return 0;
}

static int64_t
bytes_special(void *impl, const char *name)
{
	(void)impl;
	if (strcmp(name, "<|endoftext|>") == 0 || strcmp(name, "<eod>") == 0)
		return BYTES_EOD;
	return -1;
}

static void
bytes_free(void *impl)
{
	(void)impl;
}

static const struct ovl_tok_ops bytes_ops = {
	bytes_encode, bytes_special, bytes_free
};

static struct ovl_tok *
tok_new(const struct ovl_tok_ops *ops, void *impl, const char *name,
    uint32_t vocab, uint32_t eod)
{
	struct ovl_tok *t = ovl_xcalloc(1, sizeof(*t));

	t->ops = ops;
	t->impl = impl;
	t->name = ovl_xstrdup(name);
	t->vocab = vocab;
	t->eod = eod;
	return t;
}

struct ovl_tok *
ovl_tok_open(const char *spec, char *err, size_t errlen)
{
	if (spec == NULL || strcmp(spec, "bytes") == 0)
		return tok_new(&bytes_ops, NULL, "bytes", 257, BYTES_EOD);
	snprintf(err, errlen, "unknown tokenizer '%s' (known: bytes)", spec);
	return NULL;
}

void
ovl_tok_free(struct ovl_tok *t)
{
	if (t == NULL)
		return;
	t->ops->free(t->impl);
	free(t->name);
	free(t);
}

const char *
ovl_tok_name(const struct ovl_tok *t)
{
	return t->name;
}

uint32_t
ovl_tok_vocab(const struct ovl_tok *t)
{
	return t->vocab;
}

uint32_t
ovl_tok_eod(const struct ovl_tok *t)
{
	return t->eod;
}

int
ovl_tok_set_eod(struct ovl_tok *t, const char *name, char *err, size_t errlen)
{
	uint64_t id;
	int64_t sid = -1;

	if (ovl_num_u64(name, &id) == 0) {
		if (id >= t->vocab) {
			snprintf(err, errlen, "end-of-document id %" PRIu64
			    " is not below the vocabulary size %" PRIu32, id,
			    t->vocab);
			return -1;
		}
		t->eod = (uint32_t)id;
		return 0;
	}
	if (t->ops->special != NULL)
		sid = t->ops->special(t->impl, name);
	if (sid < 0) {
		snprintf(err, errlen, "unknown special token '%s' for tokenizer %s",
		    name, t->name);
		return -1;
	}
	t->eod = (uint32_t)sid;
	return 0;
}

int
ovl_tok_encode(struct ovl_tok *t, const char *text, size_t n,
    struct ovl_u32vec *out, size_t *bad_off)
{
	return t->ops->encode(t->impl, text, n, out, bad_off);
}
