/*
 * ckptlog: base and diff records replay to the same state, a torn tail at
 * any byte is ignored, a flipped bit before the tail is an error with its
 * offset, and a failed append leaves the previous record last.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "ckptlog.h"
#include "unit.h"

static char dir[] = "/tmp/t-ckptlog.XXXXXX";
static char path[600];

static void
write_file(const void *p, size_t n)
{
	FILE *fp = fopen(path, "wb");

	CHECK(fp != NULL);
	if (fp == NULL)
		return;
	CHECK(fwrite(p, 1, n, fp) == n);
	fclose(fp);
}

/* Five checkpoints: cursors move, a key is added, the construct text shrinks. */
static void
make_state(struct ovl_ckstate *st, int i)
{
	char text[512];
	int len;

	len = snprintf(text, sizeof(text),
	    "source.web.cursor 0:%d:%d:%d\nsource.web.partitions 2\n"
	    "source.code.cursor 0:0:%d:0\n%s", i, i * 100, i * 3, i < 3 ? 0 : 7,
	    i >= 2 ? "tokens 12345\n" : "");
	CHECK(ovl_kvsec_parse(&st->sec[OVL_SEC_MIX], text, (size_t)len) == 0);
	len = snprintf(text, sizeof(text), "step %d\nskip %d\n", i * 2,
	    i == 4 ? 0 : 17);
	CHECK(ovl_kvsec_parse(&st->sec[OVL_SEC_CONSTRUCT], text, (size_t)len) == 0);
	snprintf(text, sizeof(text), "%d %016x 3", i * 4096, i * 77);
	ovl_kvsec_set(&st->sec[OVL_SEC_OUT], "rank0", text);
	ovl_kvsec_set(&st->sec[OVL_SEC_OUT], "rank0.path", "/x/rank 0");
	ovl_kvsec_set(&st->sec[OVL_SEC_CKPT], "valueless", NULL);
}

static int
same_state(const struct ovl_ckstate *a, const struct ovl_ckstate *b)
{
	struct ovl_buf x = { 0 }, y = { 0 };
	int i, same = 1;

	for (i = 0; i < OVL_NSEC; i++) {
		x.len = y.len = 0;
		ovl_kvsec_text(&a->sec[i], &x);
		ovl_kvsec_text(&b->sec[i], &y);
		if (x.len != y.len || memcmp(x.p, y.p, x.len) != 0)
			same = 0;
	}
	ovl_buf_free(&x);
	ovl_buf_free(&y);
	return same;
}

static struct ovl_buf logbuf;
static size_t rec_end[6];

static void
test_roundtrip(void)
{
	struct ovl_ckstate st[5], got = { 0 };
	struct ovl_ckptlog log;
	uint8_t hdr[OVL_CKPTLOG_HDR_LEN];
	char err[256];
	size_t before;
	int i;

	memset(st, 0, sizeof(st));
	ovl_ckptlog_header(hdr);
	ovl_buf_append(&logbuf, hdr, sizeof(hdr));
	for (i = 0; i < 5; i++) {
		make_state(&st[i], i);
		before = logbuf.len;
		ovl_ckrec_encode(&logbuf, (uint64_t)i + 1, i == 4 ?
		    OVL_CKPTREC_END : 0, i == 0 || i == 3 ? NULL : &st[i - 1],
		    &st[i]);
		rec_end[i] = logbuf.len;
		if (i == 1)	/* only changed values: much smaller than a base */
			CHECK(logbuf.len - before < rec_end[0] - OVL_CKPTLOG_HDR_LEN);
	}
	write_file(logbuf.p, logbuf.len);
	CHECK(ovl_ckptlog_read(path, &log, err, sizeof(err)) == 0);
	CHECK(log.nrec == 5 && log.valid == logbuf.len);
	for (i = 0; i < 5 && (size_t)i < log.nrec; i++) {
		CHECK(log.rec[i].n == (uint64_t)i + 1);
		CHECK(ovl_ckptlog_state(&log, (size_t)i, &got, err,
		    sizeof(err)) == 0);
		CHECK(same_state(&got, &st[i]));
	}
	CHECK(log.nrec == 5 && log.rec[4].flags == OVL_CKPTREC_END);
	CHECK(ovl_ckptlog_find(&log, 3) == 2);
	CHECK(ovl_ckptlog_find(&log, 9) == -1);
	CHECK(strcmp(ovl_kvsec_get(&got.sec[OVL_SEC_OUT], "rank0.path"),
	    "/x/rank 0") == 0);
	CHECK(ovl_kvsec_find(&got.sec[OVL_SEC_CKPT], "valueless") == 0 &&
	    ovl_kvsec_get(&got.sec[OVL_SEC_CKPT], "valueless") == NULL);
	ovl_ckptlog_free(&log);
	ovl_ckstate_clear(&got);
	for (i = 0; i < 5; i++)
		ovl_ckstate_clear(&st[i]);
}

static void
test_torn(void)
{
	struct ovl_ckptlog log;
	char err[256];
	size_t cut, want;
	int ok = 1, r;

	for (cut = 0; cut <= logbuf.len; cut++) {
		write_file(logbuf.p, cut);
		r = ovl_ckptlog_read(path, &log, err, sizeof(err));
		for (want = 0; want < 5 && rec_end[want] <= cut; want++)
			;
		if (r != 0 || log.nrec != want)
			ok = 0;
		ovl_ckptlog_free(&log);
	}
	CHECK(ok);
	/* a torn tail of zeros (a crash after the size grew) */
	ovl_buf_reserve(&logbuf, 100);
	memset(logbuf.p + logbuf.len, 0, 100);
	write_file(logbuf.p, logbuf.len + 100);
	CHECK(ovl_ckptlog_read(path, &log, err, sizeof(err)) == 0 &&
	    log.nrec == 5 && log.valid == logbuf.len);
	ovl_ckptlog_free(&log);
}

static void
test_corrupt(void)
{
	struct ovl_ckptlog log;
	char err[256], want[64];
	size_t at;

	/* a flipped payload byte in record 2: error naming its offset */
	at = rec_end[1] - 3;
	logbuf.p[at] ^= 0x10;
	write_file(logbuf.p, logbuf.len);
	CHECK(ovl_ckptlog_read(path, &log, err, sizeof(err)) == -3);
	snprintf(want, sizeof(want), "byte offset %zu", rec_end[0]);
	CHECK(strstr(err, want) != NULL);
	ovl_ckptlog_free(&log);
	logbuf.p[at] ^= 0x10;
	/* a flipped length in a header: its header CRC catches it */
	logbuf.p[rec_end[2] + 5] ^= 0x01;
	write_file(logbuf.p, logbuf.len);
	CHECK(ovl_ckptlog_read(path, &log, err, sizeof(err)) == -3);
	ovl_ckptlog_free(&log);
	logbuf.p[rec_end[2] + 5] ^= 0x01;
	/* the last record failing its CRC at the very end: torn */
	logbuf.p[rec_end[4] - 1] ^= 0x01;
	write_file(logbuf.p, rec_end[4]);
	CHECK(ovl_ckptlog_read(path, &log, err, sizeof(err)) == 0 &&
	    log.nrec == 4);
	ovl_ckptlog_free(&log);
	logbuf.p[rec_end[4] - 1] ^= 0x01;
	/* bad file header */
	write_file("OVLCKLOX0000000000000000", 24);
	CHECK(ovl_ckptlog_read(path, &log, err, sizeof(err)) == -3);
	ovl_ckptlog_free(&log);
}

/* An empty section's text (an empty ovl_buf: NULL, 0) is an empty section. */
static void
test_empty_text(void)
{
	struct ovl_kvsec s = { 0 };

	ovl_kvsec_set(&s, "k", "v");
	CHECK(ovl_kvsec_parse(&s, NULL, 0) == 0);
	CHECK(s.n == 0);
	CHECK(ovl_kvsec_parse(&s, "k v\n\nx", 7) == -1);
	CHECK(s.n == 0);
	ovl_kvsec_clear(&s);
}

/*
 * The index (test_roundtrip's log: bases at checkpoints 1 and 4): a read
 * from the last base holds checkpoints 4 and 5 with the states of a whole
 * read; from the second last, all; an entry failing its CRC, or cut with
 * the log, leaves the earlier base; no index, the whole log.
 */
static void
test_tail(void)
{
	struct ovl_ckptidx x;
	struct ovl_ckptlog log;
	struct ovl_ckstate want = { 0 }, got = { 0 };
	char idx[640], err[256];
	uint8_t b;
	FILE *fp;

	snprintf(idx, sizeof(idx), "%s/ckpt.idx", dir);
	write_file(logbuf.p, logbuf.len);
	CHECK(ovl_ckptlog_read_tail(path, idx, 1, &log, err, sizeof(err)) == 0);
	CHECK(log.from == 0 && log.nrec == 5);
	ovl_ckptlog_free(&log);
	CHECK(ovl_ckptidx_open(&x, idx) == 0);
	ovl_ckptidx_note(&x, logbuf.p + OVL_CKPTLOG_HDR_LEN, logbuf.len -
	    OVL_CKPTLOG_HDR_LEN, OVL_CKPTLOG_HDR_LEN);
	ovl_ckptidx_close(&x);
	CHECK(ovl_ckptlog_read_tail(path, idx, 1, &log, err, sizeof(err)) == 0);
	CHECK(log.from == rec_end[2] && log.nrec == 2 &&
	    log.rec[0].n == 4 && log.valid == logbuf.len);
	make_state(&want, 4);
	CHECK(log.nrec == 2 && ovl_ckptlog_state(&log, 1, &got, err,
	    sizeof(err)) == 0 && same_state(&got, &want));
	ovl_ckptlog_free(&log);
	CHECK(ovl_ckptlog_read_tail(path, idx, 2, &log, err, sizeof(err)) == 0);
	CHECK(log.from == OVL_CKPTLOG_HDR_LEN && log.nrec == 5);
	ovl_ckptlog_free(&log);
	/* the last entry's CRC fails: the base before it */
	fp = fopen(idx, "r+b");
	CHECK(fp != NULL);
	if (fp != NULL) {
		CHECK(fseek(fp, -5, SEEK_END) == 0 && fread(&b, 1, 1, fp) == 1);
		b ^= 0x40;
		CHECK(fseek(fp, -5, SEEK_END) == 0 && fwrite(&b, 1, 1, fp) == 1);
		fclose(fp);
	}
	CHECK(ovl_ckptlog_read_tail(path, idx, 1, &log, err, sizeof(err)) == 0);
	CHECK(log.from == OVL_CKPTLOG_HDR_LEN && log.nrec == 5);
	ovl_ckptlog_free(&log);
	/* cut with the log before checkpoint 4: one entry left */
	CHECK(ovl_ckptidx_cut(idx, rec_end[2]) == 0);
	CHECK(ovl_ckptidx_open(&x, idx) == 0 && x.end == OVL_CKPTIDX_HDR_LEN +
	    OVL_CKPTIDX_ENT_LEN);
	ovl_ckptidx_close(&x);
	unlink(idx);
	ovl_ckstate_clear(&want);
	ovl_ckstate_clear(&got);
}

static void
test_append_full(void)
{
	int fd = open("/dev/full", O_WRONLY);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	errno = 0;
	CHECK(ovl_ckptlog_append(fd, 0, logbuf.p, logbuf.len) == -1 &&
	    errno == ENOSPC);
	close(fd);
}

int
main(void)
{
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/ckpt.log", dir);
	RUN(test_roundtrip);
	RUN(test_torn);
	RUN(test_corrupt);
	RUN(test_tail);
	RUN(test_append_full);
	RUN(test_empty_text);
	unlink(path);
	rmdir(dir);
	ovl_buf_free(&logbuf);
	UNIT_DONE();
}
