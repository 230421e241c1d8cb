/*
 * libFuzzer target: the parquet reader (src/lib/parquet.c, parquet-page.c)
 * on files held in memory. The footer is read for listing and for the
 * columns "text" and "meta.body"; every row group is read to its end, then
 * again from its middle row, which must give the same values as the first
 * reading from there (what a resumed source relies on). Errors are fine;
 * crashes, sanitizer reports, reads past the file and disagreements are
 * not.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash64.h"
#include "parquet.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

struct mem {
	const uint8_t	*p;
	size_t		 n;
};

static int
mem_pread(void *arg, void *buf, size_t n, uint64_t off)
{
	const struct mem *m = arg;

	if (off > m->n || n > m->n - off) {
		errno = EIO;
		return -1;
	}
	memcpy(buf, m->p + off, n);
	return 0;
}

#define MAXROWS	4096

static void
read_column(const struct ovl_pq_io *io, const char *column)
{
	static uint64_t h[MAXROWS];
	static int kind[MAXROWS];
	char err[512];
	struct ovl_pq_file *f = ovl_pq_open(io, column, err, sizeof(err));
	uint32_t g;

	if (f == NULL)
		return;
	for (g = 0; g < ovl_pq_row_groups(f); g++) {
		struct ovl_pq_reader r;
		const uint8_t *p;
		size_t len;
		uint64_t rows = ovl_pq_rows(f, g), i = 0, mid;
		int k = -1;

		if (ovl_pq_reader_open(&r, f, g, 0) != 0)
			continue;
		while (i < MAXROWS && (k = ovl_pq_next(&r, &p, &len)) >= 0) {
			kind[i] = k;
			h[i] = k == 1 ? ovl_hash64(p, len, len) : 0;
			i++;
		}
		ovl_pq_reader_close(&r);
		if (k == -1 && i != rows)
			abort();	/* the end before all rows */
		if (k != -1 || i < 2)
			continue;	/* an error, or nothing to resume into */
		mid = i / 2;
		if (ovl_pq_reader_open(&r, f, g, mid) != 0)
			abort();	/* the pages before mid read fine once */
		for (; mid < i; mid++) {
			k = ovl_pq_next(&r, &p, &len);
			if (k != kind[mid] ||
			    (k == 1 && ovl_hash64(p, len, len) != h[mid]))
				abort();
		}
		if (ovl_pq_next(&r, &p, &len) != -1)
			abort();
		ovl_pq_reader_close(&r);
	}
	ovl_pq_close(f);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct mem m = { data, n };
	struct ovl_pq_io io;
	char err[512];
	struct ovl_pq_file *f;

	memset(&io, 0, sizeof(io));
	io.pread = mem_pread;
	io.arg = &m;
	io.size = n;
	if ((f = ovl_pq_open(&io, NULL, err, sizeof(err))) != NULL)
		ovl_pq_close(f);
	read_column(&io, "text");
	read_column(&io, "meta.body");
	return 0;
}
