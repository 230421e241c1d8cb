/*
 * pack: put pieces of known length into sequences (bins) of a fixed
 * capacity, as few as the method manages. Pure algorithms: no I/O.
 *
 *   bfd        best-fit decreasing: longest piece first, into the open bin
 *              it fills most tightly, else a new bin
 *   first-fit  pieces in the order given, into the first bin with room
 *   concat     pieces in the order given, into the last bin opened when
 *              they fit, else a new bin (plain concatenation)
 *
 * A packer keeps its working storage between calls, so packing step after
 * step allocates nothing once it has grown.
 */
#ifndef OVL_PACK_H
#define OVL_PACK_H

#include <stddef.h>
#include <stdint.h>

enum ovl_pack_method {
	OVL_PACK_BFD = 0,
	OVL_PACK_FIRST_FIT = 1,
	OVL_PACK_CONCAT = 2
};

/* The largest capacity a packer accepts (tokens per sequence). */
#define OVL_PACK_CAP_MAX (1u << 24)

/* The method named name ("bfd", "first-fit", "concat"), or -1. */
/* The method names, NULL-terminated, in enum order (the plan uses them). */
extern const char *const ovl_pack_names[];
int	ovl_pack_parse(const char *name);
/* The name of a method, or "?". */
const char *ovl_pack_name(int method);

struct ovl_packer;

/* A new packer (exits 1 when out of memory). */
struct ovl_packer *ovl_packer_new(void);
void	ovl_packer_free(struct ovl_packer *p);

/*
 * Pack n pieces of lengths len[0..n) (each 1 .. cap; cap at most
 * OVL_PACK_CAP_MAX) into bins of capacity cap. Writes the bin index of
 * piece i to bin[i]; bins are numbered 0.. in the order they were opened,
 * and none is empty. Returns the number of bins. Deterministic: equal
 * inputs give equal outputs.
 */
size_t	ovl_pack(struct ovl_packer *p, int method, const uint32_t *len,
	    size_t n, uint32_t cap, uint32_t *bin);

/*
 * Fill exactly nbins bins of capacity cap with n pieces whose lengths add
 * up to at most nbins x cap, cutting pieces at bin boundaries where they
 * do not fit whole (fixed shapes: no padding but at the end). bfd and
 * first-fit place whole pieces as in ovl_pack while a bin has room for
 * them, then cut the rest, longest first, into the bins with the most
 * room; concat fills bin after bin in order, cutting at every boundary.
 * Writes the fragments to frag[] (room for n + nbins) and returns their
 * number; the fragments of a piece cover it, in order of offset. Every
 * fragment but a piece's last fills its bin.
 */
struct ovl_frag {
	uint32_t	item;	/* the piece */
	uint32_t	off;	/* first token within the piece */
	uint32_t	len;
	uint32_t	bin;
};

size_t	ovl_pack_fill(struct ovl_packer *p, int method, const uint32_t *len,
	    size_t n, uint32_t cap, size_t nbins, struct ovl_frag *frag);

/*
 * Fixed shapes for a reader that sees a document end only at its end
 * token (Megatron): as ovl_pack_fill with bfd, but a piece with open[i]
 * != 0 (it lacks its end token) and every cut piece's head is the last
 * fragment of its bin, at most one per bin. Open pieces go whole by best
 * fit into bins without a last fragment, then closed ones anywhere, then the
 * rest, longest first, whole where they can, else cut at the room of the
 * open bin with the most. Writes the fragments to frag[] (room for n +
 * nbins) bin by bin, each bin's in its order (its last fragment last);
 * returns their number, or SIZE_MAX when the pieces cannot be laid out so.
 */
size_t	ovl_pack_fill_ends(struct ovl_packer *p, const uint32_t *len,
	    const uint8_t *open, size_t n, uint32_t cap, size_t nbins,
	    struct ovl_frag *frag);

/*
 * Sort the indices idx[0..n) by len[idx] descending, then by index: the
 * order in which best-fit decreasing takes pieces. Not reentrant.
 */
void	ovl_pack_sort_desc(uint32_t *idx, size_t n, const uint32_t *len);

#endif
