/*
 * image: image sizes from headers, and placeholder token costs. See image.h.
 */
#include "image.h"

#include "num.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "err.h"
#include "num.h"

#define DIM_MAX		(1u << 24)	/* a side longer than this is absurd */

static uint32_t
be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

static uint32_t
le24(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

static int
sized(struct ovl_image_info *out, enum ovl_image_format f, uint32_t w,
    uint32_t h, char *err, size_t errlen)
{
	if (w == 0 || h == 0 || w > DIM_MAX || h > DIM_MAX)
		return ovl_errbuf(err, errlen, "%s: a size of %" PRIu32 "x%" PRIu32
		    " pixels", ovl_image_format_name(f), w, h);
	out->format = f;
	out->width = w;
	out->height = h;
	return 0;
}

/* PNG: the signature, then IHDR (13 bytes, its CRC checked). */
static int
png(const uint8_t *p, size_t n, struct ovl_image_info *out, char *err,
    size_t errlen)
{
	if (n < 33)
		return ovl_errbuf(err, errlen, "png: truncated header (%zu bytes)", n);
	if (be32(p + 8) != 13 || memcmp(p + 12, "IHDR", 4) != 0)
		return ovl_errbuf(err, errlen, "png: no IHDR chunk at byte offset 8");
	if ((uint32_t)crc32(0L, p + 12, 17) != be32(p + 29))
		return ovl_errbuf(err, errlen, "png: IHDR CRC mismatch at byte "
		    "offset 29");
	return sized(out, OVL_IMAGE_PNG, be32(p + 16), be32(p + 20), err,
	    errlen);
}

/*
 * JPEG: markers from SOI on, each with its length, until a start of frame
 * (SOF0..SOF15 but DHT, JPG and DAC, which share the range).
 */
static int
jpeg(const uint8_t *p, size_t n, struct ovl_image_info *out, char *err,
    size_t errlen)
{
	size_t i = 2, len;
	uint8_t m;

	for (;;) {
		while (i < n && p[i] == 0xff && i + 1 < n && p[i + 1] == 0xff)
			i++;	/* fill bytes */
		if (i + 4 > n)
			return ovl_errbuf(err, errlen, "jpeg: no frame header before "
			    "the end (byte offset %zu)", i);
		if (p[i] != 0xff)
			return ovl_errbuf(err, errlen, "jpeg: no marker at byte "
			    "offset %zu", i);
		m = p[i + 1];
		if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
			i += 2;	/* markers without a length */
			continue;
		}
		if (m == 0xd9 || m == 0xda)
			return ovl_errbuf(err, errlen, "jpeg: %s before a frame "
			    "header (byte offset %zu)", m == 0xd9 ?
			    "end of image" : "scan", i);
		len = (size_t)p[i + 2] << 8 | p[i + 3];
		if (len < 2)
			return ovl_errbuf(err, errlen, "jpeg: a marker length of %zu "
			    "at byte offset %zu", len, i + 2);
		if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 &&
		    m != 0xcc) {
			if (len < 8 || i + 9 > n)
				return ovl_errbuf(err, errlen, "jpeg: truncated frame "
				    "header at byte offset %zu", i);
			return sized(out, OVL_IMAGE_JPEG,
			    (uint32_t)p[i + 7] << 8 | p[i + 8],
			    (uint32_t)p[i + 5] << 8 | p[i + 6], err, errlen);
		}
		i += 2 + len;
	}
}

/* WebP: RIFF, then the first chunk: VP8 (lossy), VP8L or VP8X. */
static int
webp(const uint8_t *p, size_t n, struct ovl_image_info *out, char *err,
    size_t errlen)
{
	const uint8_t *c = p + 12, *d = p + 20;

	if (n < 30)
		return ovl_errbuf(err, errlen, "webp: truncated header (%zu bytes)",
		    n);
	if (memcmp(c, "VP8 ", 4) == 0) {
		/* frame tag (3 bytes), start code 9d 01 2a, 14-bit sizes */
		if (d[3] != 0x9d || d[4] != 0x01 || d[5] != 0x2a)
			return ovl_errbuf(err, errlen, "webp: VP8 start code missing "
			    "at byte offset 23");
		return sized(out, OVL_IMAGE_WEBP,
		    ((uint32_t)d[6] | (uint32_t)d[7] << 8) & 0x3fff,
		    ((uint32_t)d[8] | (uint32_t)d[9] << 8) & 0x3fff, err,
		    errlen);
	}
	if (memcmp(c, "VP8L", 4) == 0) {
		uint32_t b;

		if (d[0] != 0x2f)
			return ovl_errbuf(err, errlen, "webp: VP8L signature missing "
			    "at byte offset 20");
		b = (uint32_t)d[1] | (uint32_t)d[2] << 8 | (uint32_t)d[3] << 16 |
		    (uint32_t)d[4] << 24;
		return sized(out, OVL_IMAGE_WEBP, (b & 0x3fff) + 1,
		    ((b >> 14) & 0x3fff) + 1, err, errlen);
	}
	if (memcmp(c, "VP8X", 4) == 0)
		return sized(out, OVL_IMAGE_WEBP, le24(d + 4) + 1,
		    le24(d + 7) + 1, err, errlen);
	return ovl_errbuf(err, errlen, "webp: unknown first chunk '%c%c%c%c' at byte "
	    "offset 12", c[0] >= 32 && c[0] < 127 ? c[0] : '?',
	    c[1] >= 32 && c[1] < 127 ? c[1] : '?',
	    c[2] >= 32 && c[2] < 127 ? c[2] : '?',
	    c[3] >= 32 && c[3] < 127 ? c[3] : '?');
}

int
ovl_image_probe(const uint8_t *p, size_t n, struct ovl_image_info *out,
    char *err, size_t errlen)
{
	static const uint8_t sig_png[8] = { 0x89, 'P', 'N', 'G', '\r', '\n',
	    0x1a, '\n' };

	memset(out, 0, sizeof(*out));
	if (n >= 8 && memcmp(p, sig_png, 8) == 0)
		return png(p, n, out, err, errlen);
	if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
		return jpeg(p, n, out, err, errlen);
	if (n >= 12 && memcmp(p, "RIFF", 4) == 0 && memcmp(p + 8, "WEBP", 4) == 0)
		return webp(p, n, out, err, errlen);
	return ovl_errbuf(err, errlen, "not a PNG, JPEG or WebP image (%zu bytes)", n);
}

const char *
ovl_image_format_name(enum ovl_image_format f)
{
	switch (f) {
	case OVL_IMAGE_PNG:
		return "png";
	case OVL_IMAGE_JPEG:
		return "jpeg";
	case OVL_IMAGE_WEBP:
		return "webp";
	}
	return "image";
}

/* ---- cost models ---- */

/* The next ":"-separated number of s into v, within [lo, hi]. */
static int
field(const char **s, uint64_t lo, uint64_t hi, uint64_t *v)
{
	char *end;

	if (**s < '0' || **s > '9')
		return -1;
	errno = 0;
	*v = strtoull(*s, &end, 10);
	if (errno != 0 || *v < lo || *v > hi || (*end != ':' && *end != '\0'))
		return -1;
	*s = *end == ':' ? end + 1 : end;
	return 0;
}

int
ovl_image_cost_parse(const char *spec, struct ovl_image_cost *c, char *err,
    size_t errlen)
{
	const char *s;
	uint64_t a, b, lo, hi;

	memset(c, 0, sizeof(*c));
	if (strncmp(spec, "fixed:", 6) == 0) {
		s = spec + 6;
		if (field(&s, 0, 65536, &a) != 0 || *s != '\0')
			goto bad;
		c->kind = OVL_IMAGE_COST_FIXED;
		c->tokens = (uint32_t)a;
	} else if (strncmp(spec, "patch:", 6) == 0) {
		s = spec + 6;
		if (field(&s, 1, 65536, &a) != 0 || *s != '\0')
			goto bad;
		c->kind = OVL_IMAGE_COST_PATCH;
		c->patch = (uint32_t)a;
	} else if (strncmp(spec, "dynamic:", 8) == 0) {
		s = spec + 8;
		if (field(&s, 1, 65536, &a) != 0 || field(&s, 1, 65536, &b) ||
		    field(&s, 1, (uint64_t)1 << 40, &lo) != 0 ||
		    field(&s, 1, (uint64_t)1 << 40, &hi) != 0 || *s != '\0' ||
		    lo > hi)
			goto bad;
		c->kind = OVL_IMAGE_COST_DYNAMIC;
		c->patch = (uint32_t)a;
		c->merge = (uint32_t)b;
		c->min_pixels = lo;
		c->max_pixels = hi;
	} else
		goto bad;
	return 0;
bad:
	return ovl_errbuf(err, errlen, "bad image cost '%s' (fixed:N, patch:P or "
	    "dynamic:P:MERGE:MIN_PIXELS:MAX_PIXELS)", spec);
}

void
ovl_image_cost_format(const struct ovl_image_cost *c, char *buf, size_t len)
{
	switch (c->kind) {
	case OVL_IMAGE_COST_FIXED:
		snprintf(buf, len, "fixed:%" PRIu32, c->tokens);
		break;
	case OVL_IMAGE_COST_PATCH:
		snprintf(buf, len, "patch:%" PRIu32, c->patch);
		break;
	case OVL_IMAGE_COST_DYNAMIC:
		snprintf(buf, len, "dynamic:%" PRIu32 ":%" PRIu32 ":%" PRIu64
		    ":%" PRIu64, c->patch, c->merge, c->min_pixels,
		    c->max_pixels);
		break;
	default:
		snprintf(buf, len, "none");
	}
}

/*
 * Qwen2-VL's resize: each side rounded to a multiple of f = patch * merge
 * (half to even, as Python's round), at least f; then scaled down into
 * max_pixels (floor) or up to min_pixels (ceil), keeping the aspect.
 */
static void
dynamic_size(const struct ovl_image_cost *c, uint32_t w, uint32_t h,
    uint64_t *rw, uint64_t *rh)
{
	double f = (double)c->patch * c->merge, beta;
	double hb = fmax(f, nearbyint(h / f) * f);
	double wb = fmax(f, nearbyint(w / f) * f);

	if (hb * wb > (double)c->max_pixels) {
		beta = sqrt((double)h * w / (double)c->max_pixels);
		hb = fmax(f, floor(h / beta / f) * f);
		wb = fmax(f, floor(w / beta / f) * f);
	} else if (hb * wb < (double)c->min_pixels) {
		beta = sqrt((double)c->min_pixels / ((double)h * w));
		hb = ceil(h * beta / f) * f;
		wb = ceil(w * beta / f) * f;
	}
	*rh = (uint64_t)hb;
	*rw = (uint64_t)wb;
}

uint64_t
ovl_image_tokens(const struct ovl_image_cost *c, uint32_t width,
    uint32_t height, uint32_t *rw, uint32_t *rh)
{
	uint64_t t = 0, w = width, h = height;

	switch (c->kind) {
	case OVL_IMAGE_COST_FIXED:
		t = c->tokens;
		break;
	case OVL_IMAGE_COST_PATCH:
		t = ((w + c->patch - 1) / c->patch) *
		    ((h + c->patch - 1) / c->patch);
		break;
	case OVL_IMAGE_COST_DYNAMIC:
		dynamic_size(c, width, height, &w, &h);
		t = (w / c->patch) * (h / c->patch) /
		    ((uint64_t)c->merge * c->merge);
		break;
	}
	if (rw != NULL)
		*rw = w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
	if (rh != NULL)
		*rh = h > UINT32_MAX ? UINT32_MAX : (uint32_t)h;
	return t > UINT32_MAX ? UINT32_MAX : t;
}

int
ovl_image_enc_parse(const char *spec, double *a, double *b, char *err,
    size_t errlen)
{
	char x[64];
	const char *colon = strchr(spec, ':');
	size_t n = colon != NULL ? (size_t)(colon - spec) : strlen(spec);

	*a = *b = 0;
	if (n == 0 || n >= sizeof(x))
		goto bad;
	memcpy(x, spec, n);
	x[n] = '\0';
	if (ovl_num_double(x, a) != 0 || !(*a >= 0) || *a > 1e30)
		goto bad;
	if (colon != NULL && (ovl_num_double(colon + 1, b) != 0 ||
	    !(*b >= 0) || *b > 1e30))
		goto bad;
	return 0;
bad:
	snprintf(err, errlen, "bad encoder cost '%s' (A or A:B, numbers from "
	    "0: A*n + B*n^2 per image of n tokens)", spec);
	return -1;
}
