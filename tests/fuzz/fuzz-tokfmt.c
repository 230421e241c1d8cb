/*
 * libFuzzer target: the headers of pre-tokenized files (src/lib/tokfmt.c)
 * and the cursor strings that resume a source (ovl_cursor_parse). The
 * first byte picks what the rest is: a .npy file, a Megatron index (with
 * a .bin of the size the next 4 bytes say), or a cursor. Nothing is read
 * past the bytes given; what is accepted fits them (the data of a .npy
 * inside the file, every document's entries in order and within the
 * index (empty documents may be), an entry inside the .bin); a cursor
 * that parses prints back to the same cursor.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "tokfmt.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static void
npy(const uint8_t *p, size_t n)
{
	char err[1300];
	size_t off;
	uint64_t len;
	int dt;

	if (ovl_npy_header(p, n, &dt, &off, &len, err, sizeof(err)) != 0)
		return;
	if (dt < 0 || dt > 7 || off > n ||
	    len > (n - off) / (uint64_t)ovl_dt_size[dt])
		abort();
}

static void
mmidx(const uint8_t *p, size_t n)
{
	struct ovl_mmidx ix;
	char err[300];
	uint64_t d, e0, e1, prev = 0, i, at, len, binlen;
	uint32_t b;

	if (n < 4)
		return;
	memcpy(&b, p, 4);
	binlen = b % (1u << 20);
	p += 4;
	n -= 4;
	if (ovl_mmidx_parse(p, n, &ix, err, sizeof(err)) != 0)
		return;
	if (ix.count > n || ix.ndocs > n || ix.dt < 0 || ix.dt > 7)
		abort();
	for (d = 0; d < ix.ndocs && d < 4096; d++) {
		ovl_mmidx_doc(&ix, d, &e0, &e1);
		if (e0 != prev || e1 < e0 || e1 > ix.count)
			abort();
		prev = e1;
		for (i = e0; i < e1 && i < 4096; i++)
			if (ovl_mmidx_entry(&ix, i, binlen, &at, &len, err,
			    sizeof(err)) == 0 && (at > binlen || len >
			    (binlen - at) / (uint64_t)ovl_dt_size[ix.dt]))
				abort();
	}
}

static void
cursor(const uint8_t *p, size_t n)
{
	char s[256], back[OVL_CURSOR_STRLEN];
	struct ovl_cursor c, c2;

	if (n >= sizeof(s))
		n = sizeof(s) - 1;
	memcpy(s, p, n);
	s[n] = '\0';
	errno = 0;
	if (ovl_cursor_parse(s, &c) != 0) {
		if (errno != EINVAL && errno != ERANGE)
			abort();
		return;
	}
	ovl_cursor_format(&c, back);
	if (ovl_cursor_parse(back, &c2) != 0 || ovl_cursor_cmp(&c, &c2) != 0 ||
	    c.off != c2.off || c.rec != c2.rec)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	uint8_t *copy;

	if (n == 0)
		return 0;
	/* an exact-size copy, so ASan sees a read past the end */
	copy = malloc(n - 1 > 0 ? n - 1 : 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data + 1, n - 1);
	switch (data[0] % 3) {
	case 0:
		npy(copy, n - 1);
		break;
	case 1:
		mmidx(copy, n - 1);
		break;
	default:
		cursor(copy, n - 1);
	}
	free(copy);
	return 0;
}
