/*
 * Bounded memory in the frame reader and writer (issue 18): a frame made in
 * pieces is byte for byte the frame made whole; a reader that defers long
 * frames leaves them whole for a later call; buffers that shrink after an
 * outlier keep every frame intact; ovl_buf_trim keeps the contents.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "frame.h"
#include "frameio.h"
#include "testframes.h"
#include "unit.h"

static void
gen(void *arg, uint8_t *dst, uint32_t off, uint32_t n)
{
	uint32_t len = *(const uint32_t *)arg, i;

	for (i = 0; i < n; i++)
		dst[i] = pbyte(len, off + i);
}

/* The frames of lens[] written to a temporary file; its fd, at offset 0. */
static int
write_stream(const uint32_t *lens, size_t n, int pieces)
{
	FILE *fp = tmpfile();
	struct ovl_writer *w = ovl_writer_new(fileno(fp), "test");
	size_t k;
	uint32_t len;
	int fd;

	for (k = 0; k < n; k++) {
		if (pieces) {
			len = lens[k];
			ovl_writer_frame_gen(w, OVL_STATE, 0, len, gen, &len);
			continue;
		}
		put_frame(w, lens[k]);
	}
	ovl_writer_end(w);
	ovl_writer_free(w);
	fflush(fp);
	fd = dup(fileno(fp));
	fclose(fp);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The whole contents of fd. */
static uint8_t *
slurp(int fd, size_t *n)
{
	off_t end = lseek(fd, 0, SEEK_END);
	uint8_t *b = malloc((size_t)end + 1);

	lseek(fd, 0, SEEK_SET);
	*n = (size_t)read(fd, b, (size_t)end);
	lseek(fd, 0, SEEK_SET);
	return b;
}

static const uint32_t lens[] = { 64, 4 << 20, 100, 128 << 10, (128 << 10) + 4,
	3 << 20, 8, 16, 24, 32, 40, 48, 56, 64, 72, 1 << 20, 12 };
#define NLENS	(sizeof(lens) / sizeof(lens[0]))

static void
test_gen_same_bytes(void)
{
	int a = write_stream(lens, NLENS, 0), b = write_stream(lens, NLENS, 1);
	size_t na, nb;
	uint8_t *pa = slurp(a, &na), *pb = slurp(b, &nb);

	CHECK(na == nb);
	CHECK(na == nb && memcmp(pa, pb, na) == 0);
	free(pa);
	free(pb);
	close(a);
	close(b);
}

/* Read every frame back, 64 KiB at a time (buffers grow and shrink). */
static void
test_shrink_keeps_frames(void)
{
	int fd = write_stream(lens, NLENS, 1), rc;
	struct ovl_reader *r = ovl_reader_new(fd, "test", 0);
	struct ovl_frame f;
	size_t k = 0;

	ovl_reader_set_chunk(r, 64 << 10);
	while ((rc = ovl_reader_next(r, &f)) == OVL_RD_FRAME &&
	    f.kind != OVL_END) {
		CHECK(k < NLENS && frame_ok(&f, lens[k]));
		k++;
		if (k % 2 == 0)
			ovl_reader_done(r);
	}
	CHECK(rc == OVL_RD_FRAME && f.kind == OVL_END);
	CHECK(k == NLENS);
	ovl_reader_free(r);
	close(fd);
}

/* Deferred: a long frame is left for a call without the defer. */
static void
test_defer(void)
{
	int fd = write_stream(lens, NLENS, 0), rc, deferred = 0;
	struct ovl_reader *r = ovl_reader_new(fd, "test", 0);
	struct ovl_frame f;
	size_t k = 0;

	ovl_reader_set_chunk(r, 64 << 10);
	for (;;) {
		ovl_reader_defer(r, 256 << 10);
		rc = ovl_reader_next(r, &f);
		if (rc == OVL_RD_DEFER) {
			CHECK(k < NLENS && lens[k] > (256 << 10));
			deferred++;
			ovl_reader_defer(r, 0);
			rc = ovl_reader_next(r, &f);
		}
		if (rc != OVL_RD_FRAME || f.kind == OVL_END)
			break;
		CHECK(k < NLENS && frame_ok(&f, lens[k]));
		k++;
	}
	CHECK(rc == OVL_RD_FRAME && f.kind == OVL_END);
	CHECK(k == NLENS);
	CHECK(deferred == 3);
	ovl_reader_free(r);
	close(fd);
}

static void
test_buf_trim(void)
{
	struct ovl_buf b = { 0 };
	struct ovl_u32vec v = { 0 };

	ovl_buf_reserve(&b, 1 << 20);
	ovl_buf_append(&b, "abc", 3);
	ovl_buf_trim(&b, 4096);
	CHECK(b.cap == 4096 && b.len == 3 && memcmp(b.p, "abc", 3) == 0);
	ovl_buf_trim(&b, 4096);
	CHECK(b.cap == 4096);
	b.len = 5000;	/* more than keep: kept whole */
	ovl_buf_reserve(&b, 1 << 20);
	ovl_buf_trim(&b, 4096);
	CHECK(b.cap > 4096);
	ovl_u32vec_reserve(&v, 1 << 18);
	ovl_u32vec_push(&v, 7);
	ovl_u32vec_trim(&v, 1024);
	CHECK(v.cap == 1024 && v.len == 1 && v.p[0] == 7);
	ovl_buf_free(&b);
	ovl_u32vec_free(&v);
}

/*
 * Huge pages for large blocks (ovl_buf_huge, as ovl-mix, ovl-construct
 * and ovl-ckpt ask): a large block is 2 MiB aligned; growing from small
 * to large, large to larger, and trimming back keep the contents.
 */
static void
test_buf_huge(void)
{
	struct ovl_buf b = { 0 };
	size_t i, ok = 1;
	void *p;

	ovl_buf_huge(1);
	p = ovl_xmalloc(1 << 20);
	CHECK(((uintptr_t)p & ((2u << 20) - 1)) == 0);
	free(p);
	p = ovl_xmalloc((1 << 20) - 1);	/* below: an ordinary block */
	free(p);
	for (i = 0; i < 5000000; i++) {	/* through 1 MiB, then past 4 */
		*ovl_buf_reserve(&b, 1) = (unsigned char)(i * 7 + i / 4096);
		b.len++;
	}
	for (i = 0; i < b.len; i++)
		ok &= b.p[i] == (unsigned char)(i * 7 + i / 4096);
	CHECK(ok);
	b.len = 3000;
	ovl_buf_trim(&b, 4096);
	CHECK(b.cap == 4096);
	for (i = 0, ok = 1; i < b.len; i++)
		ok &= b.p[i] == (unsigned char)(i * 7 + i / 4096);
	CHECK(ok);
	ovl_buf_free(&b);
	ovl_buf_huge(0);
}

int
main(void)
{
	RUN(test_gen_same_bytes);
	RUN(test_shrink_keeps_frames);
	RUN(test_defer);
	RUN(test_buf_trim);
	RUN(test_buf_huge);
	UNIT_DONE();
}
