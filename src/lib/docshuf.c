/*
 * docshuf: documents shuffled in windows of a chunk. See docshuf.h.
 */
#include "docshuf.h"

#include <errno.h>
#include <string.h>

#include "hash64.h"
#include "num.h"
#include "rng.h"

int
ovl_docshuf_parse(const char *s, struct ovl_docshuf_win *w)
{
	uint64_t n;
	size_t len;

	if (s == NULL)
		return (errno = EINVAL), -1;
	if (strcmp(s, "chunk") == 0) {
		w->kind = OVL_DOCSHUF_CHUNKS;
		w->n = 1;
		return 0;
	}
	if (strcmp(s, "none") == 0) {
		w->kind = OVL_DOCSHUF_OFF;
		w->n = 0;
		return 0;
	}
	len = strlen(s);
	if (len > 6 && strcmp(s + len - 6, "chunks") == 0) {
		char num[32];

		if (len - 6 >= sizeof(num))
			return (errno = EINVAL), -1;
		memcpy(num, s, len - 6);
		num[len - 6] = '\0';
		if (ovl_num_u64(num, &n) != 0 || n == 0)
			return (errno = EINVAL), -1;
		if (n > OVL_DOCSHUF_MAX_CHUNKS)
			return (errno = ERANGE), -1;
		w->kind = OVL_DOCSHUF_CHUNKS;
		w->n = n;
		return 0;
	}
	if (ovl_num_size(s, &n) != 0)
		return (errno = EINVAL), -1;
	if (n > OVL_DOCSHUF_MAX_DOCS)
		return (errno = ERANGE), -1;
	w->kind = n == 0 ? OVL_DOCSHUF_OFF : OVL_DOCSHUF_DOCS;
	w->n = n;
	return 0;
}

uint32_t
ovl_docshuf_group(const struct ovl_docshuf_win *w)
{
	return w->kind == OVL_DOCSHUF_CHUNKS ? (uint32_t)w->n : 1;
}

uint32_t
ovl_docshuf_part(const struct ovl_docshuf_win *w, uint32_t k, uint32_t nparts)
{
	return k / ovl_docshuf_group(w) % nparts;
}

uint64_t
ovl_docshuf_split(const struct ovl_docshuf_win *win, uint64_t p, uint64_t *w,
    uint64_t *j)
{
	if (win->kind != OVL_DOCSHUF_DOCS) {
		*w = 0;
		*j = p;
		return 0;
	}
	*w = p / (win->n + 1);
	*j = p % (win->n + 1);
	return *w * win->n;
}

uint64_t
ovl_docshuf_pos(const struct ovl_docshuf_win *win, uint64_t w, uint64_t j)
{
	return win->kind == OVL_DOCSHUF_DOCS ? w * (win->n + 1) + j : j;
}

uint64_t
ovl_docshuf_window(const struct ovl_docshuf_win *win, uint64_t i)
{
	return win->kind == OVL_DOCSHUF_DOCS ? i / win->n : 0;
}

void
ovl_docshuf_perm(uint64_t seed, uint32_t epoch, uint32_t k, uint64_t w,
    uint32_t *perm, size_t n)
{
	uint64_t key[3];
	struct ovl_rng r;
	size_t i;

	for (i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	if (n < 2)
		return;
	key[0] = epoch;
	key[1] = k;
	key[2] = w;
	ovl_rng_seed2(&r, seed, ovl_hash64(key, sizeof(key), 0x6f766c2d646f6373ull));
	ovl_rng_shuffle_u32(&r, perm, n);
}
