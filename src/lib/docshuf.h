/*
 * docshuf: the order of a source's documents, shuffled in windows
 * (ovl-source --shuffle-window, plan key shuffle-window=). Two kinds:
 *
 * - N records (OVL_DOCSHUF_DOCS): a window is N consecutive records of a
 *   chunk, counted as they reach the filters (records refused as bad are
 *   not counted), the first starting at the chunk's first record. The
 *   document sent j-th (from 0) of window w has the record number
 *   w * (N + 1) + j in its DOC frame, and the cursor after it is the
 *   window's start (the offset of its first record) with the record
 *   number w * (N + 1) + j + 1.
 * - G chunks (OVL_DOCSHUF_CHUNKS; "chunk" is 1): canonical chunks go in
 *   groups of G, [g * G, (g + 1) * G), a group read whole by one
 *   partition (group g by partition g % P) and its documents sent as
 *   one window. Document j of group g is record j of chunk g * G, the
 *   cursor after it g * G, offset 0, record j + 1; the group's chunks'
 *   CHUNK_END frames follow its last document.
 *
 * The permutation of a window is drawn from the seed, the epoch, the
 * canonical chunk where it starts and the window's index: the order is a
 * function of the documents' positions only, the same for every partition
 * count and every shadow, and a cursor resumes exactly by reading the
 * one window again and skipping the j documents sent.
 */
#ifndef OVL_DOCSHUF_H
#define OVL_DOCSHUF_H

#include <stddef.h>
#include <stdint.h>

enum { OVL_DOCSHUF_OFF, OVL_DOCSHUF_DOCS, OVL_DOCSHUF_CHUNKS };
struct ovl_docshuf_win {
	int		 kind;
	uint64_t	 n;		/* records (_DOCS) or chunks (_CHUNKS) */
};

/* The largest window: records, chunks. */
#define OVL_DOCSHUF_MAX_DOCS	(1ull << 32)
#define OVL_DOCSHUF_MAX_CHUNKS	65536u

/*
 * Parse "N" (records; suffixes K, M as counts), "Gchunks" (G chunks),
 * "chunk" (1 chunk) or "none" (also "0"). 0, or -1 with errno EINVAL or
 * ERANGE.
 */
int	ovl_docshuf_parse(const char *s, struct ovl_docshuf_win *w);

/* Chunks per group: G for _CHUNKS, else 1 (every chunk its own). */
uint32_t ovl_docshuf_group(const struct ovl_docshuf_win *w);
/* The partition (of nparts) that reads canonical chunk k. */
uint32_t ovl_docshuf_part(const struct ovl_docshuf_win *w, uint32_t k,
	    uint32_t nparts);

/*
 * _DOCS: split a cursor's record number p into the window w and the
 * documents j of it already sent; returns the record number the window's
 * first record has (where a reader resumed at the window's start counts
 * from).
 */
uint64_t ovl_docshuf_split(const struct ovl_docshuf_win *win, uint64_t p,
	    uint64_t *w, uint64_t *j);
/* _DOCS: the record number of document j of window w. */
uint64_t ovl_docshuf_pos(const struct ovl_docshuf_win *win, uint64_t w,
	    uint64_t j);
/* _DOCS: the window of the record counted i-th (from 0) in its chunk. */
uint64_t ovl_docshuf_window(const struct ovl_docshuf_win *win, uint64_t i);

/*
 * perm[0..n): the order of a window's n documents (perm[j] is the index,
 * in reading order, of the document sent j-th): window w of the chunk
 * (group) starting at canonical chunk k of the epoch.
 */
void	ovl_docshuf_perm(uint64_t seed, uint32_t epoch, uint32_t k, uint64_t w,
	    uint32_t *perm, size_t n);

#endif
