/*
 * The stream format: encode every frame kind, decode it back, and hold the
 * reader to its contract on every truncation and every single-bit flip of
 * a small stream.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "crc32c.h"
#include "frame.h"
#include "frameio.h"
#include "unit.h"

static struct ovl_buf stream;

static uint8_t *
add(uint8_t kind, uint32_t len)
{
	uint8_t *f = ovl_buf_reserve(&stream, OVL_FRAME_HDR_LEN + len);

	memset(f, 0, OVL_FRAME_HDR_LEN + len);
	(void)kind;
	return f;
}

static void
seal_flags(uint8_t *f, uint8_t kind, uint8_t flags, uint32_t len)
{
	ovl_frame_seal(f, kind, flags, len);
	stream.len += OVL_FRAME_HDR_LEN + len;
}

static void
seal(uint8_t *f, uint8_t kind, uint32_t len)
{
	seal_flags(f, kind, 0, len);
}

static const uint32_t toks[] = { 72, 105, 256 };
static const uint16_t toks16[] = { 72, 105, 256 };
static const uint16_t pos16[] = { 5, 6, 7 };

static void
build(void)
{
	struct ovl_doc d = { 0 };
	struct ovl_chunk_end ce = { 3, 1, 2, 5, 17, 4096 };
	struct ovl_barrier b = { 2, 16, 99, 65536, 7 };
	struct ovl_state st = { OVL_STAGE_MIX, 5, 4, "a 1\n" };
	struct ovl_seq sq = { 0 };
	struct ovl_piece pc = { 1, 0, 2, 5, 9, 99, 3, 0 };
	uint32_t pos[] = { 0, 1, 2 }, cu[] = { 0, 3 };
	uint8_t *f;
	uint32_t len, frames = 0;
	const char meta[] = "vocab 257\n";

	stream.len = 0;
	ovl_stream_hdr_encode(ovl_buf_reserve(&stream, OVL_STREAM_HDR_LEN));
	stream.len += OVL_STREAM_HDR_LEN;

	len = ovl_meta_payload_len(sizeof(meta) - 1);
	f = add(OVL_META, len);
	ovl_meta_encode(f + OVL_FRAME_HDR_LEN, meta, sizeof(meta) - 1);
	seal(f, OVL_META, len), frames++;

	d.source = 1; d.epoch = 0; d.chunk = 2; d.nchunks = 5; d.record = 9;
	d.next_off = 123; d.next_rec = 10; d.ntokens = 3; d.tokens = toks;
	d.text = "Hi"; d.text_len = 2; d.start_off = 100;
	d.width = 4;
	len = ovl_doc_payload_len(d.ntokens, d.text_len, 4);
	f = add(OVL_DOC, len);
	ovl_doc_encode(f + OVL_FRAME_HDR_LEN, &d);
	seal(f, OVL_DOC, len), frames++;

	f = add(OVL_CHUNK_END, OVL_CHUNK_END_LEN);
	ovl_chunk_end_encode(f + OVL_FRAME_HDR_LEN, &ce);
	seal(f, OVL_CHUNK_END, OVL_CHUNK_END_LEN), frames++;

	f = add(OVL_BARRIER, OVL_BARRIER_LEN);
	ovl_barrier_encode(f + OVL_FRAME_HDR_LEN, &b);
	seal(f, OVL_BARRIER, OVL_BARRIER_LEN), frames++;

	len = ovl_state_payload_len(st.text_len);
	f = add(OVL_STATE, len);
	ovl_state_encode(f + OVL_FRAME_HDR_LEN, &st);
	seal(f, OVL_STATE, len), frames++;

	sq.step = 4; sq.rank = 1; sq.mb = 0; sq.ntokens = 3; sq.npieces = 1;
	sq.seq_len = 8; sq.tokens = toks; sq.positions = pos; sq.cu_seqlens = cu;
	sq.width = sq.pos_width = 4;
	len = ovl_seq_payload_len(3, 1, 4, 4);
	f = add(OVL_SEQ, len);
	ovl_seq_encode(f + OVL_FRAME_HDR_LEN, &sq);
	ovl_seq_put_piece(f + OVL_FRAME_HDR_LEN, &sq, 0, &pc);
	seal(f, OVL_SEQ, len), frames++;

	/* the same DOC with 16-bit ids (an odd count: padded) */
	d.width = 2;
	d.tokens = toks16;
	len = ovl_doc_payload_len(d.ntokens, d.text_len, 2);
	f = add(OVL_DOC, len);
	ovl_doc_encode(f + OVL_FRAME_HDR_LEN, &d);
	seal_flags(f, OVL_DOC, ovl_width_flags(2), len), frames++;

	/* a SEQ of 16-bit tokens and 16-bit positions */
	sq.width = sq.pos_width = 2;
	sq.tokens = toks16;
	sq.positions = pos16;
	len = ovl_seq_payload_len(3, 1, 2, 2);
	f = add(OVL_SEQ, len);
	ovl_seq_encode(f + OVL_FRAME_HDR_LEN, &sq);
	ovl_seq_put_piece(f + OVL_FRAME_HDR_LEN, &sq, 0, &pc);
	seal_flags(f, OVL_SEQ, ovl_seq_flags(&sq), len), frames++;

	f = add(OVL_END, OVL_END_LEN);
	ovl_end_encode(f + OVL_FRAME_HDR_LEN, frames);
	seal(f, OVL_END, OVL_END_LEN);
}

static void
test_crc32c(void)
{
	CHECK(ovl_crc32c(0, "123456789", 9) == 0xe3069283u);
	CHECK(ovl_crc32c(ovl_crc32c(0, "1234", 4), "56789", 5) == 0xe3069283u);
	CHECK(ovl_crc32c(0, "", 0) == 0);
}

static void
test_roundtrip(void)
{
	const uint8_t *p;
	size_t n;
	struct ovl_frame f;
	struct ovl_doc d;
	struct ovl_chunk_end ce;
	struct ovl_barrier b;
	struct ovl_state st;
	struct ovl_seq sq;
	struct ovl_piece pc;
	uint64_t nf;
	const char *text;
	uint32_t tl;
	uint16_t minor;

	build();
	p = stream.p;
	n = stream.len;
	CHECK(ovl_stream_hdr_check(p, n, &minor) == OVL_F_OK &&
	    minor == OVL_VERSION_MINOR);
	p += OVL_STREAM_HDR_LEN, n -= OVL_STREAM_HDR_LEN;

	CHECK(ovl_frame_parse(p, n, OVL_FRAME_MAX_DEFAULT, &f) == OVL_F_OK);
	CHECK(ovl_meta_decode(&f, &text, &tl) == OVL_F_OK && tl == 10 &&
	    memcmp(text, "vocab 257\n", 10) == 0);
	p += f.size, n -= f.size;

	CHECK(ovl_frame_parse(p, n, OVL_FRAME_MAX_DEFAULT, &f) == OVL_F_OK);
	CHECK(ovl_doc_decode(&f, &d) == OVL_F_OK);
	CHECK(d.source == 1 && d.chunk == 2 && d.nchunks == 5 && d.record == 9);
	CHECK(d.next_off == 123 && d.next_rec == 10 && d.start_off == 100);
	CHECK(d.ntokens == 3 && memcmp(d.tokens, toks, 12) == 0);
	CHECK(d.text_len == 2 && memcmp(d.text, "Hi", 2) == 0);
	CHECK(((uintptr_t)d.tokens & 3) == 0);
	p += f.size, n -= f.size;

	CHECK(ovl_frame_parse(p, n, OVL_FRAME_MAX_DEFAULT, &f) == OVL_F_OK);
	CHECK(ovl_chunk_end_decode(&f, &ce) == OVL_F_OK && ce.source == 3 &&
	    ce.chunk == 2 && ce.nchunks == 5 && ce.ndocs == 17 && ce.nbytes == 4096);
	p += f.size, n -= f.size;

	CHECK(ovl_frame_parse(p, n, OVL_FRAME_MAX_DEFAULT, &f) == OVL_F_OK);
	CHECK(ovl_barrier_decode(&f, &b) == OVL_F_OK && b.n == 2 && b.step == 16 &&
	    b.mix_pos == 99 && b.tokens == 65536 && b.offset == 7);
	p += f.size, n -= f.size;

	CHECK(ovl_frame_parse(p, n, OVL_FRAME_MAX_DEFAULT, &f) == OVL_F_OK);
	CHECK(ovl_state_decode(&f, &st) == OVL_F_OK && st.stage == OVL_STAGE_MIX &&
	    st.n == 5 && st.text_len == 4 && memcmp(st.text, "a 1\n", 4) == 0);
	p += f.size, n -= f.size;

	CHECK(ovl_frame_parse(p, n, OVL_FRAME_MAX_DEFAULT, &f) == OVL_F_OK);
	CHECK(ovl_seq_decode(&f, &sq) == OVL_F_OK && sq.step == 4 && sq.rank == 1 &&
	    sq.ntokens == 3 && sq.npieces == 1 && sq.cu_seqlens[1] == 3 &&
	    sq.width == 4 && sq.pos_width == 4 &&
	    ovl_tok_at(sq.positions, 4, 2) == 2 &&
	    ovl_tok_at(sq.tokens, 4, 2) == 256);
	ovl_seq_piece(&sq, 0, &pc);
	CHECK(pc.source == 1 && pc.chunk == 2 && pc.offset == 5 &&
	    pc.record == 9 && pc.mix_pos == 99 && pc.length == 3);
	p += f.size, n -= f.size;

	/* 16-bit DOC: 80 + 6 bytes of ids + 2 of text, no padding */
	CHECK(ovl_frame_parse(p, n, OVL_FRAME_MAX_DEFAULT, &f) == OVL_F_OK);
	CHECK(f.flags == OVL_FL_U16 && f.len == 88);
	CHECK(ovl_doc_decode(&f, &d) == OVL_F_OK && d.width == 2);
	CHECK(d.ntokens == 3 && memcmp(d.tokens, toks16, 6) == 0);
	CHECK(ovl_tok_at(d.tokens, d.width, 2) == 256);
	CHECK(d.text_len == 2 && memcmp(d.text, "Hi", 2) == 0);
	CHECK(((uintptr_t)d.tokens & 3) == 0);
	p += f.size, n -= f.size;

	/* 16-bit SEQ: each array padded to 4 bytes, cu_seqlens aligned */
	CHECK(ovl_frame_parse(p, n, OVL_FRAME_MAX_DEFAULT, &f) == OVL_F_OK);
	CHECK(f.flags == (OVL_FL_U16 | OVL_FL_POS16));
	CHECK(f.len == OVL_SEQ_FIXED + 8 + 8 + 8 + OVL_PIECE_LEN);
	CHECK(ovl_seq_decode(&f, &sq) == OVL_F_OK && sq.width == 2 &&
	    sq.pos_width == 2 && sq.ntokens == 3 && sq.cu_seqlens[1] == 3 &&
	    ((uintptr_t)sq.cu_seqlens & 3) == 0);
	CHECK(ovl_tok_at(sq.tokens, 2, 2) == 256 &&
	    ovl_tok_at(sq.positions, 2, 0) == 5 &&
	    ovl_tok_at(sq.positions, 2, 2) == 7);
	/* the padding after each array is zero */
	CHECK(((const uint16_t *)sq.tokens)[3] == 0 &&
	    ((const uint16_t *)sq.positions)[3] == 0);
	ovl_seq_piece(&sq, 0, &pc);
	CHECK(pc.source == 1 && pc.mix_pos == 99 && pc.length == 3);
	p += f.size, n -= f.size;

	CHECK(ovl_frame_parse(p, n, OVL_FRAME_MAX_DEFAULT, &f) == OVL_F_OK);
	CHECK(ovl_end_decode(&f, &nf) == OVL_F_OK && nf == 8);
	p += f.size, n -= f.size;
	CHECK(n == 0);
}

static void
test_limits(void)
{
	uint8_t hdr[OVL_FRAME_HDR_LEN] = { 0 };
	struct ovl_frame f;

	ovl_put32(hdr, 1024);
	CHECK(ovl_frame_parse(hdr, sizeof(hdr), 512, &f) == OVL_F_ETOOBIG);
	ovl_put32(hdr, 6);
	CHECK(ovl_frame_parse(hdr, sizeof(hdr), 512, &f) == OVL_F_EHEADER);
	ovl_put32(hdr, 8);
	CHECK(ovl_frame_parse(hdr, sizeof(hdr), 512, &f) == OVL_F_NEED &&
	    f.size == 20);
	ovl_put32(hdr, 0xfffffffcu);
	CHECK(ovl_frame_parse(hdr, sizeof(hdr), UINT32_MAX, &f) == OVL_F_ETOOBIG);
	CHECK(ovl_doc_payload_len(UINT32_MAX, 0, 4) == 0);
	CHECK(ovl_doc_payload_len(UINT32_MAX, 0, 2) == 0);
	CHECK(ovl_doc_payload_len(1u << 28, 0, 2) == OVL_DOC_FIXED + (1u << 29));
	CHECK(ovl_seq_payload_len(UINT32_MAX / 4, 2, 4, 4) == 0);
	CHECK(ovl_seq_payload_len(UINT32_MAX / 4, 2, 2, 2) == 0);
	CHECK(ovl_seq_payload_len(1, 0, 2, 2) == OVL_SEQ_FIXED + 4 + 4 + 4);
	CHECK(ovl_seq_payload_len(1, 0, 2, 4) == OVL_SEQ_FIXED + 4 + 4 + 4);
	CHECK(ovl_seq_payload_len(2, 0, 4, 2) == OVL_SEQ_FIXED + 8 + 4 + 4);
}

/* 16- and 32-bit id arrays: copies both ways, what does not fit is said. */
static void
test_widths(void)
{
	uint32_t w32[37], back[37];
	uint16_t w16[37];
	struct ovl_frame f;
	struct ovl_doc d;
	struct ovl_seq sq;
	size_t i;

	for (i = 0; i < 37; i++)
		w32[i] = (uint32_t)(i * 1771 % 65536);
	CHECK(ovl_tok_copy(w16, 2, w32, 4, 37) <= 0xffff);
	for (i = 0; i < 37; i++)
		CHECK(w16[i] == w32[i] && ovl_tok_at(w16, 2, i) == w32[i]);
	CHECK(ovl_tok_copy(back, 4, w16, 2, 37) == 0);
	CHECK(memcmp(back, w32, sizeof(w32)) == 0);
	CHECK(ovl_tok_copy(back, 4, w32, 4, 37) == 0 &&
	    memcmp(back, w32, sizeof(w32)) == 0);
	CHECK(ovl_tok_max(w32, 4, 37) == ovl_tok_max(w16, 2, 37));
	CHECK(ovl_tok_max(w32, 4, 0) == 0);
	/* 65,536 does not fit 16 bits: the largest id comes back */
	w32[20] = 65536;
	w32[30] = 100000;
	CHECK(ovl_tok_copy(w16, 2, w32, 4, 37) == 100000);
	w32[30] = 0;
	CHECK(ovl_tok_copy(w16, 2, w32, 4, 37) == 65536);
	CHECK(ovl_tok_bytes(3, 2) == 8 && ovl_tok_bytes(4, 2) == 8 &&
	    ovl_tok_bytes(3, 4) == 12);
	CHECK(ovl_width_flags(2) == OVL_FL_U16 && ovl_width_flags(4) == 0);
	CHECK(ovl_tok_from(w16, 2, 3) == (const void *)(w16 + 3));

	/* a SEQ without positions: derived from cu_seqlens, 0 in padding */
	{
		static const uint32_t cu2[] = { 0, 2, 5 };
		uint8_t pl[128];
		uint32_t got[6];
		struct ovl_frame g;

		memset(&sq, 0, sizeof(sq));
		sq.ntokens = 6;
		sq.npieces = 2;
		sq.width = 2;
		sq.pos_width = 0;
		sq.cu_seqlens = cu2;
		g.len = ovl_seq_payload_len(6, 2, 2, 0);
		CHECK(g.len == OVL_SEQ_FIXED + 12 + 12 + 2 * OVL_PIECE_LEN);
		CHECK(ovl_seq_flags(&sq) == (OVL_FL_U16 | OVL_FL_NOPOS));
		memset(pl, 0, sizeof(pl));
		sq.tokens = NULL;
		ovl_seq_encode(pl, &sq);
		g.kind = OVL_SEQ;
		g.flags = ovl_seq_flags(&sq);
		g.payload = pl;
		CHECK(ovl_seq_decode(&g, &sq) == OVL_F_OK && sq.positions == NULL &&
		    sq.pos_width == 0 && sq.cu_seqlens[2] == 5);
		ovl_seq_position_ids(&sq, got);
		CHECK(got[0] == 0 && got[1] == 1 && got[2] == 0 && got[3] == 1 &&
		    got[4] == 2 && got[5] == 0);
		/* POS16 and NOPOS together say two things: refused */
		g.flags |= OVL_FL_POS16;
		CHECK(ovl_seq_decode(&g, &sq) == OVL_F_EPAYLOAD);
	}

	/* a flag this reader does not know: a payload it cannot view */
	build();
	f.kind = OVL_DOC;
	f.flags = 0x04;
	f.len = 88;
	f.payload = stream.p + 16;
	CHECK(ovl_doc_decode(&f, &d) == OVL_F_EPAYLOAD);
	f.kind = OVL_SEQ;
	f.flags = 0x08;
	CHECK(ovl_seq_decode(&f, &sq) == OVL_F_EPAYLOAD);
}

/* Read a whole byte string through the reader; returns the final code. */
static int
read_all(const uint8_t *buf, size_t n, int *nframes)
{
	struct ovl_reader *r;
	struct ovl_frame f;
	FILE *fp = tmpfile();
	int rc;

	fwrite(buf, 1, n, fp);
	fflush(fp);
	lseek(fileno(fp), 0, SEEK_SET);
	r = ovl_reader_new(fileno(fp), "test", 0);
	/* small reads: the same frames and errors, and thousands of readers
	 * stay cheap */
	ovl_reader_set_chunk(r, 4096);
	*nframes = 0;
	while ((rc = ovl_reader_next(r, &f)) == OVL_RD_FRAME)
		(*nframes)++;
	ovl_reader_free(r);
	fclose(fp);
	return rc;
}

static void
test_reader_whole(void)
{
	int nf, rc;

	build();
	rc = read_all(stream.p, stream.len, &nf);
	CHECK(rc == OVL_RD_EOF);
	CHECK(nf == 9);
}

static void
test_truncation_every_byte(void)
{
	size_t k;
	int nf, rc, bad = 0;

	build();
	for (k = 0; k < stream.len; k++) {
		rc = read_all(stream.p, k, &nf);
		if (rc != OVL_F_ETRUNC) {
			printf("# truncated at %zu: rc %d\n", k, rc);
			bad++;
		}
	}
	CHECK(bad == 0);
}

static void
test_bitflip_every_bit(void)
{
	uint8_t *copy;
	size_t i;
	int b, nf, rc, bad = 0;

	build();
	copy = ovl_xmalloc(stream.len);
	for (i = 0; i < stream.len; i++) {
		for (b = 0; b < 8; b++) {
			memcpy(copy, stream.p, stream.len);
			copy[i] ^= (uint8_t)(1u << b);
			rc = read_all(copy, stream.len, &nf);
			if (rc >= 0) {
				printf("# flip byte %zu bit %d read clean\n", i, b);
				bad++;
			}
		}
	}
	free(copy);
	CHECK(bad == 0);
}

static void
test_reader_messages(void)
{
	struct ovl_reader *r;
	struct ovl_frame f;
	FILE *fp = tmpfile();
	int rc;

	build();
	stream.p[OVL_STREAM_HDR_LEN + 20] ^= 0x40;	/* inside the META payload */
	fwrite(stream.p, 1, stream.len, fp);
	fflush(fp);
	lseek(fileno(fp), 0, SEEK_SET);
	r = ovl_reader_new(fileno(fp), "in.frames", 0);
	rc = ovl_reader_next(r, &f);
	CHECK(rc == OVL_F_ECRC);
	CHECK(strstr(ovl_reader_error(r), "'in.frames': bad CRC at byte offset 16")
	    != NULL);
	ovl_reader_free(r);
	fclose(fp);
}

static void
test_cursor(void)
{
	struct ovl_cursor c, d;
	char buf[OVL_CURSOR_STRLEN];

	c.epoch = 2; c.chunk = 7; c.off = 123456789012ull; c.rec = 42;
	CHECK(strcmp(ovl_cursor_format(&c, buf), "2:7:123456789012:42") == 0);
	CHECK(ovl_cursor_parse(buf, &d) == 0 && ovl_cursor_cmp(&c, &d) == 0 &&
	    d.off == c.off);
	CHECK(ovl_cursor_parse("1:2:3", &d) == -1);
	CHECK(ovl_cursor_parse("1:2:3:4:5", &d) == -1);
	CHECK(ovl_cursor_parse("1:2:x:4", &d) == -1);
	CHECK(ovl_cursor_parse("4294967296:0:0:0", &d) == -1);
	d = c;
	d.rec = 43;
	CHECK(ovl_cursor_cmp(&c, &d) < 0 && ovl_cursor_cmp(&d, &c) > 0);
}

/* IMAGE: inline and reference round trips; lengths that do not add up */
static void
test_image(void)
{
	uint8_t pl[256], data[11] = "\x89PNG\r\n\x1a\nabc";
	struct ovl_image im, back;
	struct ovl_frame f;
	uint32_t len;

	memset(&im, 0, sizeof(im));
	im.flags = OVL_IMAGE_INLINE;
	im.format = 1;
	im.width = 640;
	im.height = 480;
	im.index = 2;
	im.ntokens = 99;
	im.doc_pos = 7;
	im.offset = 1536;
	im.length = sizeof(data);
	im.name = "k.2.png";
	im.name_len = 7;
	im.data = data;
	im.data_len = sizeof(data);
	len = ovl_image_payload_len(im.name_len, 0, im.data_len);
	CHECK(len == ovl_align4(80 + 7 + 11) && len <= sizeof(pl));
	memset(pl, 0xee, sizeof(pl));
	ovl_image_encode(pl, &im);
	ovl_image_set_seq(pl, 5, 1, 3, 4, 300);
	f.kind = OVL_IMAGE;
	f.flags = 0;
	f.payload = pl;
	f.len = len;
	CHECK(ovl_image_decode(&f, &back) == OVL_F_OK);
	CHECK(back.width == 640 && back.height == 480 && back.index == 2 &&
	    back.ntokens == 99 && back.doc_pos == 7 && back.seq_pos == 300 &&
	    back.step == 5 && back.rank == 1 && back.mb == 3 &&
	    back.piece == 4 && back.offset == 1536 && back.length == 11);
	CHECK(memcmp(back.name, "k.2.png", 7) == 0 &&
	    memcmp(back.data, data, 11) == 0 && back.path_len == 0);
	CHECK(pl[len - 1] == 0);	/* padding zeroed */
	f.len = len + 4;		/* lengths must add up */
	CHECK(ovl_image_decode(&f, &back) == OVL_F_EPAYLOAD);
	f.len = len;
	ovl_put32(pl, OVL_IMAGE_REF);	/* a reference carries no bytes */
	CHECK(ovl_image_decode(&f, &back) == OVL_F_EPAYLOAD);
	ovl_put32(pl, 3);
	CHECK(ovl_image_decode(&f, &back) == OVL_F_EPAYLOAD);
	im.flags = OVL_IMAGE_REF;
	im.data = NULL;
	im.data_len = 0;
	im.path = "/d/s.tar";
	im.path_len = 8;
	len = ovl_image_payload_len(7, 8, 0);
	ovl_image_encode(pl, &im);
	f.len = len;
	CHECK(ovl_image_decode(&f, &back) == OVL_F_OK && back.flags ==
	    OVL_IMAGE_REF && memcmp(back.path, "/d/s.tar", 8) == 0 &&
	    back.length == 11);
	CHECK(strcmp(ovl_kind_name(OVL_IMAGE), "IMAGE") == 0);
}

/*
 * ovl_tok_max against a plain loop: every length to 70 (the vector steps
 * and their tails), the maximum at every place, ids on both sides of the
 * sign bit the vector compares work around (2^31, 2^15).
 */
static void
test_tok_max(void)
{
	static const uint32_t tops[] = { 0, 1, 0x7fff, 0x8000, 0xffff, 0x10000,
	    100276, 0x7fffffff, 0x80000000u, 0xfffffffeu, 0xffffffffu };
	uint32_t t32[70], x = 12345;
	uint16_t t16[70];
	size_t n, at, k, i;

	for (n = 0; n <= 70; n++)
		for (k = 0; k < sizeof(tops) / sizeof(tops[0]); k++)
			for (at = 0; at < (n > 0 ? n : 1); at++) {
				uint32_t m32 = 0, m16 = 0;

				for (i = 0; i < n; i++) {
					x = x * 1103515245u + 12345u;
					t32[i] = (x >> 8) % (tops[k] / 2 + 1);
					if (i == at)
						t32[i] = tops[k];
					t16[i] = (uint16_t)t32[i];
					m32 = t32[i] > m32 ? t32[i] : m32;
					m16 = t16[i] > m16 ? t16[i] : m16;
				}
				CHECK(ovl_tok_max(t32, 4, n) == m32);
				CHECK(ovl_tok_max(t16, 2, n) == m16);
			}
}

int
main(void)
{
	RUN(test_image);
	RUN(test_crc32c);
	RUN(test_roundtrip);
	RUN(test_limits);
	RUN(test_widths);
	RUN(test_tok_max);
	RUN(test_reader_whole);
	RUN(test_truncation_every_byte);
	RUN(test_bitflip_every_bit);
	RUN(test_reader_messages);
	RUN(test_cursor);
	ovl_buf_free(&stream);
	UNIT_DONE();
}
