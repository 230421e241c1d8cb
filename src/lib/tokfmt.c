/*
 * tokfmt: .npy and Megatron index headers (tokfmt.h).
 */
#include "tokfmt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int ovl_dt_size[8] = { 1, 1, 2, 2, 4, 4, 8, 8 };

/* ---- numpy .npy ------------------------------------------------------ */

/* The value of 'key': in the header h: a pointer past the colon, or NULL. */
static const char *
npy_key(const char *h, const char *key)
{
	const char *k = strstr(h, key);

	return k != NULL ? k + strlen(key) : NULL;
}

int
ovl_npy_header(const uint8_t *p, size_t n, int *dt, size_t *off,
    uint64_t *len, char *err, size_t errlen)
{
	static const char *const names[8] = { "u1", "i1", "i2", "u2", "i4",
	    "u4", "i8", "u8" };
	char h[1024];
	const char *d, *sh;
	unsigned long long l;
	size_t hl, o;
	int k, used = 0;

	if (n < 10 || memcmp(p, "\x93NUMPY", 6) != 0) {
		snprintf(err, errlen, "not a .npy file");
		return -1;
	}
	if (p[6] == 1) {
		hl = (size_t)p[8] | (size_t)p[9] << 8;
		o = 10;
	} else if (p[6] == 2 || p[6] == 3) {
		if (n < 12) {
			snprintf(err, errlen, "a .npy header cut short");
			return -1;
		}
		hl = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 |
		    (size_t)p[11] << 24;
		o = 12;
	} else {
		snprintf(err, errlen, ".npy format version %u", p[6]);
		return -1;
	}
	if (hl >= sizeof(h) || hl > n - o) {
		snprintf(err, errlen, "a .npy header of %zu bytes", hl);
		return -1;
	}
	memcpy(h, p + o, hl);
	h[hl] = '\0';
	if (memchr(h, '\0', hl) != NULL) {
		snprintf(err, errlen, "a NUL byte in the .npy header");
		return -1;
	}
	d = npy_key(h, "'descr':");
	sh = npy_key(h, "'shape':");
	if (d == NULL || sh == NULL || strstr(h, "'fortran_order': False") ==
	    NULL) {
		snprintf(err, errlen, "header '%s' is not a C-order array", h);
		return -1;
	}
	d = strchr(d, '\'');
	for (k = 0; d != NULL && k < 8; k++)
		if ((d[1] == '<' || d[1] == '|') && strncmp(d + 2, names[k],
		    2) == 0 && d[4] == '\'')
			break;
	if (d == NULL || k == 8 || (ovl_dt_size[k] > 1 && d[1] != '<')) {
		snprintf(err, errlen, "dtype in '%s' is not a little-endian "
		    "integer", h);
		return -1;
	}
	/* shape: "(N,)", spaces allowed around the number */
	if (sscanf(sh, " (%llu ,)%n", &l, &used) != 1 || used == 0) {
		snprintf(err, errlen, "shape in '%s' is not one-dimensional", h);
		return -1;
	}
	o += hl;
	if (l > (n - o) / (uint64_t)ovl_dt_size[k]) {
		snprintf(err, errlen, "%llu ids do not fit its %zu bytes", l, n);
		return -1;
	}
	*dt = k;
	*off = o;
	*len = l;
	return 0;
}

/* ---- Megatron .idx ----------------------------------------------------- */

/* megatron/core/datasets/indexed_dataset.py, DType: the integer ones */
static int
mm_dtype(uint8_t code)
{
	switch (code) {
	case 1: return OVL_DT_U8;
	case 2: return OVL_DT_I8;
	case 3: return OVL_DT_I16;
	case 4: return OVL_DT_I32;
	case 5: return OVL_DT_I64;
	case 8: return OVL_DT_U16;
	default: return -1;	/* 6, 7: floats are not token ids */
	}
}

static uint64_t
le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

#define MM_HDR	(9 + 8 + 1 + 8 + 8)

int
ovl_mmidx_parse(const uint8_t *p, size_t n, struct ovl_mmidx *ix, char *err,
    size_t errlen)
{
	uint64_t version, ndi, d, e, prev;

	memset(ix, 0, sizeof(*ix));
	if (n < MM_HDR || memcmp(p, "MMIDIDX\0\0", 9) != 0) {
		snprintf(err, errlen, "not a Megatron index (no MMIDIDX "
		    "header)");
		return -1;
	}
	version = le64(p + 9);
	if (version != 1 || (ix->dt = mm_dtype(p[17])) < 0) {
		snprintf(err, errlen, "index version %" PRIu64 ", dtype code "
		    "%u: not a Megatron index of integer token ids", version,
		    p[17]);
		return -1;
	}
	ix->count = le64(p + 18);
	ndi = le64(p + 26);
	if (ix->count > (n - MM_HDR) / 12 ||
	    ndi > (n - MM_HDR - 12 * ix->count) / 8) {
		snprintf(err, errlen, "%" PRIu64 " entries and %" PRIu64
		    " document indices do not fit its %zu bytes", ix->count,
		    ndi, n);
		return -1;
	}
	ix->sizes = p + MM_HDR;
	ix->ptrs = ix->sizes + 4 * ix->count;
	/* document_indices: 0, then each document's end, the last = count */
	ix->doc = ndi > 0 ? ix->ptrs + 8 * ix->count : NULL;
	ix->ndocs = ndi > 0 ? ndi - 1 : ix->count;
	for (d = 0, prev = 0; d < ndi; d++) {
		e = le64(ix->doc + 8 * d);
		if ((d == 0 && e != 0) || e < prev || e > ix->count ||
		    (d == ndi - 1 && e != ix->count)) {
			snprintf(err, errlen, "document index %" PRIu64 " is %"
			    PRIu64 ": not from 0 up to its %" PRIu64 " entries",
			    d, e, ix->count);
			return -1;
		}
		prev = e;
	}
	return 0;
}

void
ovl_mmidx_doc(const struct ovl_mmidx *ix, uint64_t d, uint64_t *e0,
    uint64_t *e1)
{
	if (ix->doc == NULL) {
		*e0 = d;
		*e1 = d + 1;
		return;
	}
	*e0 = le64(ix->doc + 8 * d);
	*e1 = le64(ix->doc + 8 * (d + 1));
}

int
ovl_mmidx_entry(const struct ovl_mmidx *ix, uint64_t i, size_t binlen,
    uint64_t *at, uint64_t *len, char *err, size_t errlen)
{
	int32_t l;
	int64_t a;
	uint64_t w = (uint64_t)ovl_dt_size[ix->dt];

	memcpy(&l, ix->sizes + 4 * i, 4);
	memcpy(&a, ix->ptrs + 8 * i, 8);
	if (l < 0 || a < 0 || (uint64_t)a % w != 0 || (uint64_t)a > binlen ||
	    (uint64_t)l > (binlen - (uint64_t)a) / w) {
		snprintf(err, errlen, "entry %" PRIu64 " of %" PRId32 " tokens "
		    "at byte %" PRId64 " does not fit the .bin (%zu bytes)", i,
		    l, a, binlen);
		return -1;
	}
	*at = (uint64_t)a;
	*len = (uint64_t)l;
	return 0;
}
