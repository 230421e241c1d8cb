/*
 * docshuf: the order of documents within a chunk of a source, shuffled in
 * windows (ovl-source --shuffle-window, plan key shuffle-window=).
 *
 * A window is W consecutive records of a chunk, counted as they reach the
 * filters (before them; records refused as bad are not counted), the
 * first window starting at the chunk's first record. Its documents (the
 * records the filters keep) go out in the order of a permutation drawn
 * from the seed, the epoch, the canonical chunk and the window's index,
 * so the order is a function of the documents' positions only: every
 * partition count and every shadow gives the same.
 *
 * Positions: the document sent j-th (from 0) of window w has the record
 * number w * (W + 1) + j in its DOC frame and the cursor after it is the
 * window's start (the byte offset, or group, row or document, of the
 * window's first record) with record number w * (W + 1) + j + 1. A cursor
 * E:C:OFF:P so resumes exactly: read window P / (W + 1) from OFF again,
 * send it from its document P % (W + 1) on. With W "chunk" the whole
 * chunk is one window (w is 0, P is j).
 */
#ifndef OVL_DOCSHUF_H
#define OVL_DOCSHUF_H

#include <stddef.h>
#include <stdint.h>

/* A window: kind OVL_DOCSHUF_OFF (no shuffling), _DOCS (n records), _CHUNK */
enum { OVL_DOCSHUF_OFF, OVL_DOCSHUF_DOCS, OVL_DOCSHUF_CHUNK };
struct ovl_docshuf_win {
	int		 kind;
	uint64_t	 n;		/* records a window (_DOCS) */
};

/* The largest window in records. */
#define OVL_DOCSHUF_MAX_DOCS	(1ull << 32)

/*
 * Parse "N" (records, suffixes K, M as counts), "chunk" or "none" (also
 * "0"). 0, or -1 (errno EINVAL or ERANGE: above OVL_DOCSHUF_MAX_DOCS).
 */
int	ovl_docshuf_parse(const char *s, struct ovl_docshuf_win *w);

/*
 * Split a cursor's record number p into the window w and the documents j
 * of it already sent; returns the record number the window's first
 * record has (where a reader resumed at the window's start counts from).
 */
uint64_t ovl_docshuf_split(const struct ovl_docshuf_win *win, uint64_t p,
	    uint64_t *w, uint64_t *j);
/* The record number of document j of window w (ovl_docshuf_split's inverse). */
uint64_t ovl_docshuf_pos(const struct ovl_docshuf_win *win, uint64_t w,
	    uint64_t j);
/* The window of the record counted i-th (from 0) in its chunk. */
uint64_t ovl_docshuf_window(const struct ovl_docshuf_win *win, uint64_t i);

/*
 * perm[0..n): the order of window w's n documents (perm[j] is the index,
 * in reading order, of the document sent j-th), from seed, epoch and the
 * canonical chunk k.
 */
void	ovl_docshuf_perm(uint64_t seed, uint32_t epoch, uint32_t k, uint64_t w,
	    uint32_t *perm, size_t n);

#endif
