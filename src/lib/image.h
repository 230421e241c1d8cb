/*
 * image: the size of an image from its header, and what it costs in
 * placeholder tokens.
 *
 * Only headers are read (PNG's IHDR, JPEG's start-of-frame marker, WebP's
 * VP8, VP8L or VP8X chunk): no pixel is decoded, so the whole image need
 * not be valid beyond its header. The parser is bounded by the bytes it is
 * given and has a fuzz target (tests/fuzz/fuzz-image.c).
 *
 * The cost models (ovl-plan(5) image-cost, ovl-source --image-cost):
 *   fixed:N                    N tokens per image
 *   patch:P                    ceil(h/P) * ceil(w/P), one token per ViT patch
 *   dynamic:P:M:MIN:MAX        Qwen2-VL's dynamic resolution: the image is
 *                              resized to multiples of P*M keeping its aspect,
 *                              within MIN..MAX pixels, and every M x M patches
 *                              merge into one token: (h'/P) * (w'/P) / M^2
 */
#ifndef OVL_IMAGE_H
#define OVL_IMAGE_H

#include <stddef.h>
#include <stdint.h>

enum ovl_image_format { OVL_IMAGE_PNG = 1, OVL_IMAGE_JPEG, OVL_IMAGE_WEBP };

struct ovl_image_info {
	enum ovl_image_format format;
	uint32_t	 width, height;
};

/*
 * The format and size of the image in p[0..n). Returns 0, or -1 with a
 * reason in err (not an image of the three formats, a truncated or
 * damaged header, a zero or absurd size) naming the byte offset.
 */
int	ovl_image_probe(const uint8_t *p, size_t n, struct ovl_image_info *out,
	    char *err, size_t errlen);
/* "png", "jpeg" or "webp". */
const char *ovl_image_format_name(enum ovl_image_format f);

enum { OVL_IMAGE_COST_FIXED = 1, OVL_IMAGE_COST_PATCH, OVL_IMAGE_COST_DYNAMIC };

struct ovl_image_cost {
	int		 kind;		/* OVL_IMAGE_COST_* */
	uint32_t	 tokens;	/* fixed */
	uint32_t	 patch;		/* patch, dynamic */
	uint32_t	 merge;		/* dynamic */
	uint64_t	 min_pixels, max_pixels;	/* dynamic */
};

/*
 * Parse a cost model (see above). Returns 0, or -1 with the reason in err.
 * Bounds: N, P and M from 1 (N from 0) to 65536, MIN <= MAX <= 2^40.
 */
int	ovl_image_cost_parse(const char *spec, struct ovl_image_cost *c,
	    char *err, size_t errlen);
/* The spec again, canonical ("patch:14"), into buf. */
void	ovl_image_cost_format(const struct ovl_image_cost *c, char *buf,
	    size_t len);
/*
 * Placeholder tokens of a width x height image under c; with the dynamic
 * model also the size it is resized to (rw, rh may be NULL). At most
 * UINT32_MAX (saturated).
 */
uint64_t ovl_image_tokens(const struct ovl_image_cost *c, uint32_t width,
	    uint32_t height, uint32_t *rw, uint32_t *rh);

/*
 * The vision encoder's own cost of an image whose run is n placeholder
 * tokens, for the balance (ovl-plan(5) image-encoder-cost A[:B]): A*n +
 * B*n^2, in the units of the balance's cost (a*L^2 + b*L per piece): its
 * layers over the image's patches, linear, and their attention,
 * quadratic. Parse "A" or "A:B" (each a number >= 0): 0, or -1 with the
 * reason in err.
 */
int	ovl_image_enc_parse(const char *spec, double *a, double *b, char *err,
	    size_t errlen);
static inline double
ovl_image_enc_cost(double a, double b, uint32_t n)
{
	return a * n + b * (double)n * n;
}

#endif
