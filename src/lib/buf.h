/*
 * buf: growable byte and uint32 arrays for hot loops that must not
 * allocate per item: reset the length, keep the storage.
 *
 * Growth failures exit with status 1 ("out of memory"): every caller would
 * do the same. Callers bound sizes before growing (never from an untrusted
 * length without a check).
 */
#ifndef OVL_BUF_H
#define OVL_BUF_H

#include <stddef.h>
#include <stdint.h>

struct ovl_buf {
	unsigned char	*p;
	size_t		 len;
	size_t		 cap;
};

struct ovl_u32vec {
	uint32_t	*p;
	size_t		 len;
	size_t		 cap;
};

/* Make room for at least extra more bytes beyond len; returns p + len. */
unsigned char *ovl_buf_reserve(struct ovl_buf *b, size_t extra);
void	ovl_buf_append(struct ovl_buf *b, const void *data, size_t n);
void	ovl_buf_free(struct ovl_buf *b);
/*
 * Give back storage grown for an outlier: when cap is above 2 * keep and
 * len at most keep, the storage becomes keep bytes (contents kept). The
 * caller decides when (with some hysteresis: not after every item).
 */
void	ovl_buf_trim(struct ovl_buf *b, size_t keep);

uint32_t *ovl_u32vec_reserve(struct ovl_u32vec *v, size_t extra);
void	ovl_u32vec_push(struct ovl_u32vec *v, uint32_t x);
void	ovl_u32vec_free(struct ovl_u32vec *v);
/* As ovl_buf_trim, keep counted in elements. */
void	ovl_u32vec_trim(struct ovl_u32vec *v, size_t keep);

/*
 * A large block: buffers grown for an outlier. glibc maps each on its own
 * (ovl_cli_init sets the mmap threshold here, so freeing one gives it
 * back), and ovl_buf_huge makes them of huge pages.
 */
#define OVL_BUF_LARGE	(1u << 20)

/*
 * on = 1: from now on, blocks of OVL_BUF_LARGE and more from ovl_xmalloc and
 * ovl_xrealloc are whole transparent huge pages (2 MiB aligned, rounded
 * up to 2 MiB; buf.c says why), still freed with free(3). Off by default:
 * see ovl_cli_stage_memory for who turns it on.
 */
void	ovl_buf_huge(int on);

/*
 * A block of n bytes of transparent huge pages whatever ovl_buf_huge says
 * (a smaller one: ovl_xmalloc's), freed with free(3): for a large table
 * made once and filled whole (a tokenizer's), which costs no more memory
 * so and is faulted in 2 MiB at a time. Exits 1 on failure.
 */
void	*ovl_xmalloc_huge(size_t n);

/* malloc/realloc/strdup that exit 1 on failure. */
void	*ovl_xmalloc(size_t n);
void	*ovl_xcalloc(size_t n, size_t size);
void	*ovl_xrealloc(void *p, size_t n);
char	*ovl_xstrdup(const char *s);

#endif
