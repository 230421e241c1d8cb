/*
 * tokfmt: the headers of pre-tokenized files, read from their bytes
 * alone: numpy's .npy (one-dimensional, C order, a little-endian integer
 * dtype) and Megatron's indexed dataset index (PREFIX.idx, version 1,
 * with its document_indices). Nothing here reads past the bytes given.
 */
#ifndef OVL_TOKFMT_H
#define OVL_TOKFMT_H

#include <stddef.h>
#include <stdint.h>

/* Integer dtypes of token ids, in this order; their sizes in bytes. */
enum ovl_dt { OVL_DT_U8, OVL_DT_I8, OVL_DT_I16, OVL_DT_U16, OVL_DT_I32,
	OVL_DT_U32, OVL_DT_I64, OVL_DT_U64 };
extern const int ovl_dt_size[8];

/*
 * A .npy file's header (p: its first n bytes, the whole file): 0 with the
 * dtype, the data's byte offset and its length in ids, which fit in n; or
 * -1 with a message (no file name) in err.
 */
int	ovl_npy_header(const uint8_t *p, size_t n, int *dt, size_t *off,
	    uint64_t *len, char *err, size_t errlen);

/*
 * A Megatron index: count entries (each sizes[i] tokens at byte ptrs[i]
 * of the .bin), and ndocs documents, document d the entries from doc[d]
 * to doc[d + 1] (each entry one document when the index has no
 * document_indices: doc is NULL). The arrays point into the index's
 * bytes, read with ovl_mmidx_entry and ovl_mmidx_doc.
 */
struct ovl_mmidx {
	int		 dt;		/* enum ovl_dt of the .bin's ids */
	uint64_t	 count, ndocs;
	const uint8_t	*sizes, *ptrs, *doc;
};
/*
 * Read the index of n bytes at p: 0, or -1 with a message in err; the
 * document_indices are checked whole (from 0, never down, up to count).
 */
int	ovl_mmidx_parse(const uint8_t *p, size_t n, struct ovl_mmidx *ix,
	    char *err, size_t errlen);
/* The entries [*e0, *e1) of document d (d < ndocs). */
void	ovl_mmidx_doc(const struct ovl_mmidx *ix, uint64_t d, uint64_t *e0,
	    uint64_t *e1);
/*
 * Entry i (i < count) in a .bin of binlen bytes: 0 with its byte offset
 * and length in ids, which fit in the .bin; or -1 with a message in err.
 */
int	ovl_mmidx_entry(const struct ovl_mmidx *ix, uint64_t i, size_t binlen,
	    uint64_t *at, uint64_t *len, char *err, size_t errlen);

#endif
