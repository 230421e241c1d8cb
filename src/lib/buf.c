#include "buf.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "err.h"

/*
 * Blocks of OVL_BUF_LARGE bytes and more (buffers grown for an outlier)
 * are whole transparent huge pages, 2 MiB aligned and rounded up to 2 MiB,
 * where the kernel offers them (madvise mode), once ovl_buf_huge(1) asked
 * for it: a fresh block is then faulted in 2 MiB at a time instead of 4
 * KiB. Such a buffer is new memory every time (the mmap threshold, cli.c,
 * gives it back on free), and 4 KiB faults cost far more per byte than
 * huge pages' (make bench BENCH_ARGS=downstream). free() takes them as
 * any other block.
 */
#define HUGE_PAGE	(2u << 20)

static int huge;

void
ovl_buf_huge(int on)
{
	huge = on;
}

static void *
huge_alloc(size_t n)
{
	size_t m;
	void *p;

	if (n > SIZE_MAX - HUGE_PAGE)
		return NULL;
	m = (n + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
	if (posix_memalign(&p, HUGE_PAGE, m) != 0)
		return NULL;
	(void)madvise(p, m, MADV_HUGEPAGE);
	return p;
}

void *
ovl_xmalloc_huge(size_t n)
{
	void *p = n >= OVL_BUF_LARGE ? huge_alloc(n) : malloc(n != 0 ? n : 1);

	if (p == NULL)
		ovl_errx(OVL_EXIT_DATA, "out of memory (%zu bytes)", n);
	return p;
}

void *
ovl_xmalloc(size_t n)
{
	void *p = huge && n >= OVL_BUF_LARGE ? huge_alloc(n) :
	    malloc(n != 0 ? n : 1);

	if (p == NULL)
		ovl_errx(OVL_EXIT_DATA, "out of memory (%zu bytes)", n);
	return p;
}

void *
ovl_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n != 0 ? n : 1, size != 0 ? size : 1);

	if (p == NULL)
		ovl_errx(OVL_EXIT_DATA, "out of memory (%zu x %zu bytes)", n, size);
	return p;
}

void *
ovl_xrealloc(void *p, size_t n)
{
	size_t have;
	void *q;

	if (huge && n >= OVL_BUF_LARGE && (have = p != NULL ?
	    malloc_usable_size(p) : 0) < OVL_BUF_LARGE) {
		/*
		 * A small block grown into a large one: huge pages, as
		 * ovl_xmalloc. A large block grows by realloc (mremap: no
		 * copy, no second block at the peak; the mapping keeps its
		 * huge-page advice).
		 */
		q = huge_alloc(n);
		if (q != NULL) {
			if (have > 0)
				memcpy(q, p, have);
			free(p);
			return q;
		}
	} else
		q = realloc(p, n != 0 ? n : 1);

	if (q == NULL)
		ovl_errx(OVL_EXIT_DATA, "out of memory (%zu bytes)", n);
	return q;
}

char *
ovl_xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(ovl_xmalloc(n), s, n);
}

static size_t
grow(size_t cap, size_t need)
{
	size_t c = cap != 0 ? cap : 64;

	while (c < need) {
		if (c > SIZE_MAX / 2)
			ovl_errx(OVL_EXIT_DATA, "out of memory");
		c *= 2;
	}
	return c;
}

unsigned char *
ovl_buf_reserve(struct ovl_buf *b, size_t extra)
{
	if (extra > SIZE_MAX - b->len)
		ovl_errx(OVL_EXIT_DATA, "out of memory");
	if (b->len + extra > b->cap) {
		b->cap = grow(b->cap, b->len + extra);
		b->p = ovl_xrealloc(b->p, b->cap);
	}
	return b->p + b->len;
}

void
ovl_buf_append(struct ovl_buf *b, const void *data, size_t n)
{
	if (n == 0)
		return;
	memcpy(ovl_buf_reserve(b, n), data, n);
	b->len += n;
}

void
ovl_buf_free(struct ovl_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

void
ovl_buf_trim(struct ovl_buf *b, size_t keep)
{
	if (b->cap / 2 <= keep || b->len > keep)
		return;
	b->p = ovl_xrealloc(b->p, keep);
	b->cap = keep;
}

uint32_t *
ovl_u32vec_reserve(struct ovl_u32vec *v, size_t extra)
{
	if (extra > SIZE_MAX / 4 - v->len)
		ovl_errx(OVL_EXIT_DATA, "out of memory");
	if (v->len + extra > v->cap) {
		v->cap = grow(v->cap, v->len + extra);
		v->p = ovl_xrealloc(v->p, v->cap * sizeof(uint32_t));
	}
	return v->p + v->len;
}

void
ovl_u32vec_push(struct ovl_u32vec *v, uint32_t x)
{
	if (v->len == v->cap)
		ovl_u32vec_reserve(v, 1);
	v->p[v->len++] = x;
}

void
ovl_u32vec_free(struct ovl_u32vec *v)
{
	free(v->p);
	v->p = NULL;
	v->len = v->cap = 0;
}

void
ovl_u32vec_trim(struct ovl_u32vec *v, size_t keep)
{
	if (v->cap / 2 <= keep || v->len > keep)
		return;
	v->p = ovl_xrealloc(v->p, keep * sizeof(uint32_t));
	v->cap = keep;
}
