/*
 * Bounded memory in the frame reader and writer (issue 18): a frame made in
 * pieces is byte for byte the frame made whole; a reader that defers long
 * frames leaves them whole for a later call; buffers that shrink after an
 * outlier keep every frame intact; ovl_buf_trim keeps the contents.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "frame.h"
#include "frameio.h"
#include "relink.h"
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

/* A META frame "t 1" in w's stream. */
static void
put_meta(struct ovl_writer *w)
{
	uint8_t meta[OVL_FRAME_HDR_LEN + 64];

	memset(meta, 0, sizeof(meta));
	ovl_meta_encode(meta, "t 1\n", 4);
	ovl_writer_frame(w, OVL_META, 0, meta, ovl_meta_payload_len(4));
}

/* A BARRIER n in w's stream. */
static void
put_barrier(struct ovl_writer *w, uint64_t n)
{
	struct ovl_barrier b = { .n = n, .step = n };

	ovl_barrier_encode(ovl_writer_begin(w, OVL_BARRIER_LEN), &b);
	ovl_writer_finish(w, OVL_BARRIER, 0);
}

/* The frames of the stream on fd read to its END (fd closed): frames, or -1. */
static long
read_to_end(int fd, const char *path)
{
	struct ovl_reader *r;
	struct ovl_frame f;
	long n = 0;
	int rc;

	if (fd < 0)
		return -1;
	r = ovl_reader_new(fd, path, OVL_FRAME_LIMIT);
	while ((rc = ovl_reader_next(r, &f)) == OVL_RD_FRAME &&
	    f.kind != OVL_END)
		n++;
	if (rc != OVL_RD_FRAME) {
		printf("# %s: %s\n", path, ovl_reader_error(r));
		n = -1;
	}
	ovl_reader_free(r);
	close(fd);
	return n;
}

/*
 * A backed-up writer whose reader leaves after its END, before the end is
 * committed: the successor gets the replay since the committed checkpoint,
 * and its END counts the frames of that stream, not of the first.
 */
static void
test_replay_after_end(void)
{
	char dir[] = "/tmp/t-frameio.XXXXXX", fifo[64], next[80], spill[64];
	char committed[64];
	struct ovl_writer *w;
	FILE *fp;
	int fd, st;
	pid_t pid;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(fifo, sizeof(fifo), "%s/link", dir);
	snprintf(next, sizeof(next), "%s/link@1", dir);
	snprintf(spill, sizeof(spill), "%s/backup", dir);
	snprintf(committed, sizeof(committed), "%s/committed", dir);
	CHECK(mkfifo(fifo, 0600) == 0);
	CHECK(mkfifo(next, 0600) == 0);
	fp = fopen(committed, "w");
	fputs("1\n", fp);
	fclose(fp);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		fd = open(fifo, O_WRONLY);
		w = ovl_writer_new(fd, fifo);
		ovl_writer_backup(w, spill, committed, 1u << 30);
		put_meta(w);
		put_frame(w, 64);
		put_barrier(w, 1);
		put_frame(w, 128);
		put_frame(w, 256);
		put_barrier(w, 2);
		put_frame(w, 32);
		ovl_writer_end(w);	/* waits until the end is committed */
		ovl_writer_free(w);
		_exit(0);
	}
	/* META, 64, B1, 128, 256, B2, 32 */
	CHECK(read_to_end(open(fifo, O_RDONLY), fifo) == 7);
	/* the replay, once the end is committed: META "resumed 1", 128, 256, B2, 32 */
	fd = open(next, O_RDONLY);
	fp = fopen(committed, "w");
	fputs("3\n", fp);
	fclose(fp);
	CHECK(read_to_end(fd, next) == 5);
	/* the writer sees the reader gone and the end committed */
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	    WEXITSTATUS(st) == 0);
	unlink(fifo);
	unlink(next);
	unlink(spill);
	unlink(committed);
	rmdir(dir);
}

/*
 * A child that opens path for writing, marks it when mark, writes a META,
 * n test frames and END (nothing when n is 0: it closes at once).
 */
static pid_t
writer_child(const char *path, int mark, int n)
{
	struct ovl_writer *w;
	struct ovl_link l;
	pid_t pid;
	int fd, i;

	fflush(stdout);
	if ((pid = fork()) != 0)
		return pid;
	fd = open(path, O_WRONLY);
	if (mark && (ovl_link_of_fd(fd, &l) != 0 || ovl_link_mark(&l) != 0))
		_exit(1);
	if (n > 0) {
		w = ovl_writer_new(fd, path);
		put_meta(w);
		for (i = 0; i < n; i++)
			put_frame(w, 16);
		ovl_writer_end(w);
		ovl_writer_free(w);
	}
	_exit(0);
}

/*
 * A relinked reader whose writer left without a byte: it waits on the
 * same generation when the writer had not marked it, on the next when it
 * had; the successor writes there (relink.h), and its stream is read whole.
 */
static void
test_relink_after_nothing(void)
{
	char dir[] = "/tmp/t-frameio.XXXXXX", fifo[64], next[80];
	struct ovl_reader *r;
	struct ovl_frame f;
	int mark, fd, st, n;
	pid_t a, b;

	for (mark = 0; mark <= 1; mark++) {
		CHECK(mkdtemp(strcpy(dir, "/tmp/t-frameio.XXXXXX")) != NULL);
		snprintf(fifo, sizeof(fifo), "%s/link", dir);
		snprintf(next, sizeof(next), "%s/link@1", dir);
		CHECK(mkfifo(fifo, 0600) == 0);
		CHECK(mkfifo(next, 0600) == 0);
		a = writer_child(fifo, mark, 0);
		fd = open(fifo, O_RDONLY);
		r = ovl_reader_new(fd, fifo, OVL_FRAME_LIMIT);
		ovl_reader_relink(r);
		CHECK(waitpid(a, &st, 0) == a && WIFEXITED(st) &&
		    WEXITSTATUS(st) == 0);
		/* the successor, where both sides look for it; its stream is
		 * the first the stage gets: its META too */
		b = writer_child(mark ? next : fifo, 0, 3);
		CHECK(ovl_reader_next(r, &f) == OVL_RD_FRAME && f.kind == OVL_META);
		n = 0;
		while (ovl_reader_next(r, &f) == OVL_RD_FRAME && f.kind != OVL_END)
			CHECK(frame_ok(&f, 16) && ++n > 0);
		CHECK(n == 3);
		CHECK(waitpid(b, &st, 0) == b && WIFEXITED(st) &&
		    WEXITSTATUS(st) == 0);
		ovl_reader_free(r);
		close(fd);
		unlink(fifo);
		unlink(next);
		strcat(fifo, OVL_LINK_MARK);
		unlink(fifo);
		rmdir(dir);
	}
}

int
main(void)
{
	RUN(test_gen_same_bytes);
	RUN(test_shrink_keeps_frames);
	RUN(test_defer);
	RUN(test_buf_trim);
	RUN(test_buf_huge);
	RUN(test_replay_after_end);
	RUN(test_relink_after_nothing);
	UNIT_DONE();
}
