#include "frame.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "crc32c.h"
#include "num.h"

const char *
ovl_frame_strerror(int rc)
{
	switch (rc) {
	case OVL_F_OK:
		return "ok";
	case OVL_F_NEED:
		return "incomplete frame";
	case OVL_F_EMAGIC:
		return "bad magic (not an overlord stream)";
	case OVL_F_EVERSION:
		return "unknown major version";
	case OVL_F_ETOOBIG:
		return "oversized frame";
	case OVL_F_ECRC:
		return "bad CRC";
	case OVL_F_EHEADER:
		return "bad frame header";
	case OVL_F_EPAYLOAD:
		return "malformed payload";
	case OVL_F_ETRUNC:
		return "truncated stream (end of file without END)";
	case OVL_F_EGRAMMAR:
		return "frame out of place";
	default:
		return "unknown error";
	}
}

const char *
ovl_kind_name(unsigned kind)
{
	static const char *names[] = { NULL, "META", "DOC", "CHUNK_END", "SEQ",
	    "BARRIER", "STATE", "END", "STEP", "IMAGE" };

	if (kind >= 1 && kind < sizeof(names) / sizeof(names[0]))
		return names[kind];
	return "UNKNOWN";
}

void
ovl_stream_hdr_encode(uint8_t out[OVL_STREAM_HDR_LEN])
{
	memcpy(out, OVL_MAGIC, OVL_MAGIC_LEN);
	out[8] = OVL_VERSION_MAJOR & 0xff;
	out[9] = OVL_VERSION_MAJOR >> 8;
	out[10] = OVL_VERSION_MINOR & 0xff;
	out[11] = OVL_VERSION_MINOR >> 8;
	ovl_put32(out + 12, ovl_crc32c(0, out, 12));
}

int
ovl_stream_hdr_check(const uint8_t *buf, size_t n, uint16_t *minor)
{
	size_t m = n < OVL_MAGIC_LEN ? n : OVL_MAGIC_LEN;

	if (memcmp(buf, OVL_MAGIC, m) != 0)
		return OVL_F_EMAGIC;
	if (n < OVL_STREAM_HDR_LEN)
		return OVL_F_NEED;
	if (ovl_crc32c(0, buf, 12) != ovl_le32(buf + 12))
		return OVL_F_ECRC;
	if ((unsigned)(buf[8] | buf[9] << 8) != OVL_VERSION_MAJOR)
		return OVL_F_EVERSION;
	if (minor != NULL)
		*minor = (uint16_t)(buf[10] | buf[11] << 8);
	return OVL_F_OK;
}

int
ovl_frame_parse(const uint8_t *buf, size_t n, uint32_t max, struct ovl_frame *f)
{
	uint32_t len, crc;

	f->size = OVL_FRAME_HDR_LEN;
	if (n < OVL_FRAME_HDR_LEN)
		return OVL_F_NEED;
	len = ovl_le32(buf);
	if (max > OVL_FRAME_LIMIT)
		max = OVL_FRAME_LIMIT;
	if (len > max)
		return OVL_F_ETOOBIG;
	if ((len & 3) != 0 || buf[6] != 0 || buf[7] != 0)
		return OVL_F_EHEADER;
	f->size = (size_t)OVL_FRAME_HDR_LEN + len;
	if (n < f->size)
		return OVL_F_NEED;
	crc = ovl_crc32c(0, buf, 8);
	crc = ovl_crc32c(crc, buf + OVL_FRAME_HDR_LEN, len);
	if (crc != ovl_le32(buf + 8))
		return OVL_F_ECRC;
	f->len = len;
	f->kind = buf[4];
	f->flags = buf[5];
	f->payload = buf + OVL_FRAME_HDR_LEN;
	return OVL_F_OK;
}

void
ovl_frame_seal(uint8_t *frame, uint8_t kind, uint8_t flags, uint32_t len)
{
	uint32_t crc;

	ovl_put32(frame, len);
	frame[4] = kind;
	frame[5] = flags;
	frame[6] = frame[7] = 0;
	crc = ovl_crc32c(0, frame, 8);
	crc = ovl_crc32c(crc, frame + OVL_FRAME_HDR_LEN, len);
	ovl_put32(frame + 8, crc);
}

/* ---- cursors ---- */

char *
ovl_cursor_format(const struct ovl_cursor *c, char *buf)
{
	snprintf(buf, OVL_CURSOR_STRLEN, "%" PRIu32 ":%" PRIu32 ":%" PRIu64
	    ":%" PRIu64, c->epoch, c->chunk, c->off, c->rec);
	return buf;
}

int
ovl_cursor_parse(const char *s, struct ovl_cursor *c)
{
	char tmp[OVL_CURSOR_STRLEN], *field[4], *p;
	uint64_t v[4];
	int i;

	if (s == NULL || strlen(s) >= sizeof(tmp))
		return (errno = EINVAL), -1;
	strcpy(tmp, s);
	p = tmp;
	for (i = 0; i < 4; i++) {
		field[i] = p;
		p = strchr(p, ':');
		if (i < 3) {
			if (p == NULL)
				return (errno = EINVAL), -1;
			*p++ = '\0';
		} else if (p != NULL)
			return (errno = EINVAL), -1;
	}
	for (i = 0; i < 4; i++)
		if (ovl_num_u64(field[i], &v[i]) != 0)
			return -1;
	if (v[0] > UINT32_MAX || v[1] > UINT32_MAX)
		return (errno = ERANGE), -1;
	c->epoch = (uint32_t)v[0];
	c->chunk = (uint32_t)v[1];
	c->off = v[2];
	c->rec = v[3];
	return 0;
}

int
ovl_cursor_cmp(const struct ovl_cursor *a, const struct ovl_cursor *b)
{
	if (a->epoch != b->epoch)
		return a->epoch < b->epoch ? -1 : 1;
	if (a->chunk != b->chunk)
		return a->chunk < b->chunk ? -1 : 1;
	if (a->rec != b->rec)
		return a->rec < b->rec ? -1 : 1;
	return 0;
}

/* ---- DOC ---- */

uint32_t
ovl_doc_payload_len(uint32_t ntokens, uint32_t text_len, uint32_t width)
{
	uint64_t n = OVL_DOC_FIXED + (uint64_t)ntokens * width + text_len;

	if (n > OVL_FRAME_LIMIT)
		return 0;
	return ovl_align4(n);
}

void
ovl_doc_encode(uint8_t *p, const struct ovl_doc *d)
{
	uint32_t w = d->width == 2 ? 2 : 4;
	uint32_t len = ovl_doc_payload_len(d->ntokens, d->text_len, w);
	uint32_t end = OVL_DOC_FIXED + d->ntokens * w + d->text_len;
	uint32_t flags = d->flags & ~OVL_DOC_TEXT;

	if (d->text_len > 0)
		flags |= OVL_DOC_TEXT;
	ovl_put32(p + 0, d->source);
	ovl_put32(p + 4, flags);
	ovl_put32(p + 8, d->epoch);
	ovl_put32(p + 12, d->chunk);
	ovl_put32(p + 16, d->nchunks);
	ovl_put32(p + 20, d->nimages);
	ovl_put64(p + 24, d->record);
	ovl_put64(p + 32, d->next_off);
	ovl_put64(p + 40, d->next_rec);
	ovl_put64(p + 48, d->mix_pos);
	ovl_put64(p + 56, d->mix_tokens);
	ovl_put32(p + 64, d->ntokens);
	ovl_put32(p + 68, d->text_len);
	ovl_put64(p + 72, d->start_off);
	if (d->tokens != NULL && d->ntokens > 0)
		memcpy(p + OVL_DOC_FIXED, d->tokens, (size_t)d->ntokens * w);
	if (d->text_len > 0)
		memcpy(p + OVL_DOC_FIXED + d->ntokens * w, d->text, d->text_len);
	memset(p + end, 0, len - end);
}

int
ovl_doc_decode(const struct ovl_frame *f, struct ovl_doc *d)
{
	const uint8_t *p = f->payload;
	uint32_t w = (f->flags & OVL_FL_U16) ? 2 : 4;

	if (f->kind != OVL_DOC || f->len < OVL_DOC_FIXED ||
	    (f->flags & ~OVL_FL_U16) != 0)
		return OVL_F_EPAYLOAD;
	d->source = ovl_le32(p + 0);
	d->flags = ovl_le32(p + 4);
	d->epoch = ovl_le32(p + 8);
	d->chunk = ovl_le32(p + 12);
	d->nchunks = ovl_le32(p + 16);
	d->nimages = ovl_le32(p + 20);
	d->record = ovl_le64(p + 24);
	d->next_off = ovl_le64(p + 32);
	d->next_rec = ovl_le64(p + 40);
	d->mix_pos = ovl_le64(p + 48);
	d->mix_tokens = ovl_le64(p + 56);
	d->ntokens = ovl_le32(p + 64);
	d->text_len = ovl_le32(p + 68);
	d->start_off = ovl_le64(p + 72);
	d->width = w;
	if (d->ntokens > (f->len - OVL_DOC_FIXED) / w ||
	    ovl_doc_payload_len(d->ntokens, d->text_len, w) != f->len)
		return OVL_F_EPAYLOAD;
	if (((d->flags & OVL_DOC_TEXT) != 0) != (d->text_len > 0))
		return OVL_F_EPAYLOAD;
	if (d->nchunks != 0 && d->chunk >= d->nchunks)
		return OVL_F_EPAYLOAD;
	d->tokens = p + OVL_DOC_FIXED;
	d->text = (const char *)(p + OVL_DOC_FIXED + (size_t)d->ntokens * w);
	return OVL_F_OK;
}

void
ovl_doc_cursor(const struct ovl_doc *d, struct ovl_cursor *c)
{
	c->epoch = d->epoch;
	c->chunk = d->chunk;
	c->off = d->next_off;
	c->rec = d->next_rec;
}

void
ovl_doc_set_mixed(uint8_t *p, uint32_t source, uint64_t mix_pos,
    uint64_t mix_tokens)
{
	ovl_put32(p + 0, source);
	ovl_put32(p + 4, ovl_le32(p + 4) | OVL_DOC_MIXED);
	ovl_put64(p + 48, mix_pos);
	ovl_put64(p + 56, mix_tokens);
}

/* ---- CHUNK_END ---- */

void
ovl_chunk_end_encode(uint8_t *p, const struct ovl_chunk_end *c)
{
	ovl_put32(p + 0, c->source);
	ovl_put32(p + 4, c->epoch);
	ovl_put32(p + 8, c->chunk);
	ovl_put32(p + 12, c->nchunks);
	ovl_put64(p + 16, c->ndocs);
	ovl_put64(p + 24, c->nbytes);
}

int
ovl_chunk_end_decode(const struct ovl_frame *f, struct ovl_chunk_end *c)
{
	const uint8_t *p = f->payload;

	if (f->kind != OVL_CHUNK_END || f->len != OVL_CHUNK_END_LEN)
		return OVL_F_EPAYLOAD;
	c->source = ovl_le32(p + 0);
	c->epoch = ovl_le32(p + 4);
	c->chunk = ovl_le32(p + 8);
	c->nchunks = ovl_le32(p + 12);
	c->ndocs = ovl_le64(p + 16);
	c->nbytes = ovl_le64(p + 24);
	if (c->chunk >= c->nchunks)
		return OVL_F_EPAYLOAD;
	return OVL_F_OK;
}

/* ---- SEQ ---- */

/* The widths of a SEQ, from its struct: 2, 4, or 0 (no positions). */
static uint32_t
wid(uint32_t w)
{
	return w == 2 || w == 0 ? w : 4;
}

uint32_t
ovl_seq_payload_len(uint32_t ntokens, uint32_t npieces, uint32_t width,
    uint32_t pos_width)
{
	uint64_t n = OVL_SEQ_FIXED + ovl_tok_bytes(ntokens, wid(width)) +
	    ovl_tok_bytes(ntokens, wid(pos_width)) +
	    ((uint64_t)npieces + 1) * 4 + (uint64_t)npieces * OVL_PIECE_LEN;

	if (n > OVL_FRAME_LIMIT)
		return 0;
	return ovl_align4(n);
}

void *
ovl_seq_tokens(uint8_t *p)
{
	return p + OVL_SEQ_FIXED;
}

void *
ovl_seq_positions(uint8_t *p, uint32_t ntokens, uint32_t width)
{
	return p + OVL_SEQ_FIXED + ovl_tok_bytes(ntokens, wid(width));
}

uint32_t *
ovl_seq_cu(uint8_t *p, uint32_t ntokens, uint32_t width, uint32_t pos_width)
{
	return (uint32_t *)(void *)(p + OVL_SEQ_FIXED +
	    ovl_tok_bytes(ntokens, wid(width)) +
	    ovl_tok_bytes(ntokens, wid(pos_width)));
}

static size_t
piece_off(uint32_t ntokens, uint32_t npieces, uint32_t width,
    uint32_t pos_width, uint32_t i)
{
	return OVL_SEQ_FIXED + ovl_tok_bytes(ntokens, wid(width)) +
	    ovl_tok_bytes(ntokens, wid(pos_width)) +
	    ((size_t)npieces + 1) * 4 + (size_t)i * OVL_PIECE_LEN;
}

uint8_t
ovl_seq_flags(const struct ovl_seq *s)
{
	return (uint8_t)((wid(s->width) == 2 ? OVL_FL_U16 : 0) |
	    (wid(s->pos_width) == 2 ? OVL_FL_POS16 : 0) |
	    (wid(s->pos_width) == 0 ? OVL_FL_NOPOS : 0));
}

/* The zero padding after a 16-bit array of n ids at p. */
static void
pad16(uint8_t *p, uint32_t n, uint32_t w)
{
	size_t b = (size_t)n * w;

	memset(p + b, 0, ovl_tok_bytes(n, w) - b);
}

void
ovl_seq_encode(uint8_t *p, const struct ovl_seq *s)
{
	uint32_t w = wid(s->width), pw = wid(s->pos_width);
	uint8_t *tp = ovl_seq_tokens(p);
	uint8_t *pp = ovl_seq_positions(p, s->ntokens, w);

	ovl_put64(p + 0, s->step);
	ovl_put32(p + 8, s->rank);
	ovl_put32(p + 12, s->mb);
	ovl_put32(p + 16, s->ntokens);
	ovl_put32(p + 20, s->npieces);
	ovl_put32(p + 24, s->seq_len);
	ovl_put32(p + 28, s->flags);
	if (s->tokens != NULL)
		memcpy(tp, s->tokens, (size_t)s->ntokens * w);
	pad16(tp, s->ntokens, w);
	if (s->positions != NULL && pw > 0)
		memcpy(pp, s->positions, (size_t)s->ntokens * pw);
	pad16(pp, s->ntokens, pw);
	if (s->cu_seqlens != NULL)
		memcpy(ovl_seq_cu(p, s->ntokens, w, pw), s->cu_seqlens,
		    ((size_t)s->npieces + 1) * 4);
}

void
ovl_seq_put_piece(uint8_t *p, const struct ovl_seq *s, uint32_t i,
    const struct ovl_piece *pc)
{
	uint8_t *q = p + piece_off(s->ntokens, s->npieces, s->width,
	    s->pos_width, i);

	ovl_put32(q + 0, pc->source);
	ovl_put32(q + 4, pc->epoch);
	ovl_put32(q + 8, pc->chunk);
	ovl_put32(q + 12, pc->offset);
	ovl_put64(q + 16, pc->record);
	ovl_put64(q + 24, pc->mix_pos);
	ovl_put32(q + 32, pc->length);
	ovl_put32(q + 36, pc->nimages);
}

int
ovl_seq_decode(const struct ovl_frame *f, struct ovl_seq *s)
{
	const uint8_t *p = f->payload;
	uint32_t i, len;

	if (f->kind != OVL_SEQ || f->len < OVL_SEQ_FIXED ||
	    (f->flags & ~(OVL_FL_U16 | OVL_FL_POS16 | OVL_FL_NOPOS)) != 0 ||
	    (f->flags & (OVL_FL_POS16 | OVL_FL_NOPOS)) ==
	    (OVL_FL_POS16 | OVL_FL_NOPOS))
		return OVL_F_EPAYLOAD;
	s->step = ovl_le64(p + 0);
	s->rank = ovl_le32(p + 8);
	s->mb = ovl_le32(p + 12);
	s->ntokens = ovl_le32(p + 16);
	s->npieces = ovl_le32(p + 20);
	s->seq_len = ovl_le32(p + 24);
	s->flags = ovl_le32(p + 28);
	s->width = (f->flags & OVL_FL_U16) ? 2 : 4;
	s->pos_width = (f->flags & OVL_FL_POS16) ? 2 :
	    (f->flags & OVL_FL_NOPOS) ? 0 : 4;
	if (s->ntokens > f->len / 2 || s->npieces > f->len / OVL_PIECE_LEN)
		return OVL_F_EPAYLOAD;
	len = ovl_seq_payload_len(s->ntokens, s->npieces, s->width,
	    s->pos_width);
	if (len == 0 || len != f->len)
		return OVL_F_EPAYLOAD;
	s->tokens = p + OVL_SEQ_FIXED;
	s->positions = p + OVL_SEQ_FIXED + ovl_tok_bytes(s->ntokens, s->width);
	s->cu_seqlens = (const uint32_t *)(const void *)((const uint8_t *)
	    s->positions + ovl_tok_bytes(s->ntokens, s->pos_width));
	if (s->pos_width == 0)
		s->positions = NULL;
	s->pieces = p + piece_off(s->ntokens, s->npieces, s->width,
	    s->pos_width, 0);
	if (s->cu_seqlens[0] != 0)
		return OVL_F_EPAYLOAD;
	for (i = 0; i < s->npieces; i++)
		if (s->cu_seqlens[i + 1] < s->cu_seqlens[i])
			return OVL_F_EPAYLOAD;
	if (s->cu_seqlens[s->npieces] > s->ntokens)
		return OVL_F_EPAYLOAD;
	return OVL_F_OK;
}

void
ovl_seq_position_ids(const struct ovl_seq *s, uint32_t *out)
{
	uint32_t i, k, n;

	if (s->positions != NULL) {
		(void)ovl_tok_copy(out, 4, s->positions, s->pos_width,
		    s->ntokens);
		return;
	}
	for (i = 0; i < s->npieces; i++) {
		n = s->cu_seqlens[i + 1] - s->cu_seqlens[i];
		for (k = 0; k < n; k++)
			out[s->cu_seqlens[i] + k] = k;
	}
	for (k = s->cu_seqlens[s->npieces]; k < s->ntokens; k++)
		out[k] = 0;
}

void
ovl_seq_piece(const struct ovl_seq *s, uint32_t i, struct ovl_piece *pc)
{
	const uint8_t *q = s->pieces + (size_t)i * OVL_PIECE_LEN;

	pc->source = ovl_le32(q + 0);
	pc->epoch = ovl_le32(q + 4);
	pc->chunk = ovl_le32(q + 8);
	pc->offset = ovl_le32(q + 12);
	pc->record = ovl_le64(q + 16);
	pc->mix_pos = ovl_le64(q + 24);
	pc->length = ovl_le32(q + 32);
	pc->nimages = ovl_le32(q + 36);
}

/* ---- token arrays ---- */

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* u16 to u32, 16 at a time where SSE2 is. */
static void
tok_widen(uint32_t *d, const uint16_t *s, size_t n)
{
	size_t i = 0;

#ifdef __SSE2__
	const __m128i z = _mm_setzero_si128();

	for (; i + 16 <= n; i += 16) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 8));

		_mm_storeu_si128((__m128i *)(void *)(d + i), _mm_unpacklo_epi16(a, z));
		_mm_storeu_si128((__m128i *)(void *)(d + i + 4), _mm_unpackhi_epi16(a, z));
		_mm_storeu_si128((__m128i *)(void *)(d + i + 8), _mm_unpacklo_epi16(b, z));
		_mm_storeu_si128((__m128i *)(void *)(d + i + 12), _mm_unpackhi_epi16(b, z));
	}
#endif
	for (; i < n; i++)
		d[i] = s[i];
}

/*
 * u32 to u16 (the low halves), 16 at a time where SSE2 is; returns the or
 * of all ids, over 0xffff exactly when one did not fit. SSE2 packs with
 * signed saturation: ids biased by -32768 pack exactly when they fit.
 */
static uint32_t
tok_narrow(uint16_t *d, const uint32_t *s, size_t n)
{
	uint32_t hi = 0;
	size_t i = 0;

#ifdef __SSE2__
	const __m128i bias = _mm_set1_epi32(0x8000), bias16 = _mm_set1_epi16(-32768);
	__m128i acc = _mm_setzero_si128();

	for (; i + 16 <= n; i += 16) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 4));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 8));
		__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 12));

		acc = _mm_or_si128(acc, _mm_or_si128(_mm_or_si128(a, b),
		    _mm_or_si128(c, e)));
		a = _mm_packs_epi32(_mm_sub_epi32(a, bias), _mm_sub_epi32(b, bias));
		c = _mm_packs_epi32(_mm_sub_epi32(c, bias), _mm_sub_epi32(e, bias));
		_mm_storeu_si128((__m128i *)(void *)(d + i), _mm_xor_si128(a, bias16));
		_mm_storeu_si128((__m128i *)(void *)(d + i + 8), _mm_xor_si128(c, bias16));
	}
	acc = _mm_or_si128(acc, _mm_srli_si128(acc, 8));
	acc = _mm_or_si128(acc, _mm_srli_si128(acc, 4));
	hi = (uint32_t)_mm_cvtsi128_si32(acc);
#endif
	for (; i < n; i++) {
		hi |= s[i];
		d[i] = (uint16_t)s[i];
	}
	return hi;
}

uint32_t
ovl_tok_copy(void *dst, uint32_t dwidth, const void *src, uint32_t swidth,
    size_t n)
{
	uint32_t hi;

	if (dwidth == swidth) {
		memcpy(dst, src, n * swidth);
		return 0;
	}
	if (dwidth == 4) {
		tok_widen(dst, src, n);
		return 0;
	}
	/* the high halves or'ed: one compare for the whole array */
	hi = tok_narrow(dst, src, n);
	return hi > 0xffff ? ovl_tok_max(src, 4, n) : hi;
}

/*
 * Unsigned maxima with SSE2's signed compares: ids biased by -2^31 (-2^15
 * for 16 bits) compare as signed in the order they have unsigned. Four
 * accumulators, 16 ids a step (ckpt checks every 32-bit SEQ against its
 * output's type: the scalar loop was 17% of ovl-ckpt with cl100k).
 */
uint32_t
ovl_tok_max(const void *p, uint32_t width, size_t n)
{
	uint32_t m = 0;
	size_t i = 0;

	if (width == 2) {
		const uint16_t *t = p;
		uint16_t m16 = 0;
#ifdef __SSE2__
		const __m128i b16 = _mm_set1_epi16(-32768);
		__m128i a0 = b16, a1 = b16;

		for (; i + 16 <= n; i += 16) {
			a0 = _mm_max_epi16(a0, _mm_xor_si128(b16, _mm_loadu_si128(
			    (const __m128i *)(const void *)(t + i))));
			a1 = _mm_max_epi16(a1, _mm_xor_si128(b16, _mm_loadu_si128(
			    (const __m128i *)(const void *)(t + i + 8))));
		}
		a0 = _mm_max_epi16(a0, a1);
		a0 = _mm_max_epi16(a0, _mm_srli_si128(a0, 8));
		a0 = _mm_max_epi16(a0, _mm_srli_si128(a0, 4));
		a0 = _mm_max_epi16(a0, _mm_srli_si128(a0, 2));
		m16 = (uint16_t)((uint16_t)_mm_cvtsi128_si32(a0) ^ 0x8000);
#endif
		for (; i < n; i++)
			m16 = t[i] > m16 ? t[i] : m16;
		return m16;
	}
#ifdef __SSE2__
	{
		const uint32_t *t = p;
		const __m128i b = _mm_set1_epi32(INT32_MIN);
		__m128i a[4] = { b, b, b, b }, x, gt;
		uint32_t l[4];
		int k;

		for (; i + 16 <= n; i += 16)
			for (k = 0; k < 4; k++) {
				x = _mm_xor_si128(b, _mm_loadu_si128((const __m128i *)
				    (const void *)(t + i + 4 * k)));
				gt = _mm_cmpgt_epi32(x, a[k]);
				a[k] = _mm_or_si128(_mm_and_si128(gt, x),
				    _mm_andnot_si128(gt, a[k]));
			}
		for (k = 0; k < 4; k++) {
			_mm_storeu_si128((__m128i *)(void *)l, a[k]);
			for (int j = 0; j < 4; j++)
				m = (l[j] ^ 0x80000000u) > m ? l[j] ^ 0x80000000u : m;
		}
	}
#endif
	for (; i < n; i++)
		m = ((const uint32_t *)p)[i] > m ? ((const uint32_t *)p)[i] : m;
	return m;
}

/* ---- BARRIER ---- */

void
ovl_barrier_encode(uint8_t *p, const struct ovl_barrier *b)
{
	ovl_put64(p + 0, b->n);
	ovl_put64(p + 8, b->step);
	ovl_put64(p + 16, b->mix_pos);
	ovl_put64(p + 24, b->tokens);
	ovl_put32(p + 32, b->offset);
	ovl_put32(p + 36, 0);
}

int
ovl_barrier_decode(const struct ovl_frame *f, struct ovl_barrier *b)
{
	const uint8_t *p = f->payload;

	if (f->kind != OVL_BARRIER || f->len != OVL_BARRIER_LEN)
		return OVL_F_EPAYLOAD;
	b->n = ovl_le64(p + 0);
	b->step = ovl_le64(p + 8);
	b->mix_pos = ovl_le64(p + 16);
	b->tokens = ovl_le64(p + 24);
	b->offset = ovl_le32(p + 32);
	return OVL_F_OK;
}

/* ---- STATE, META ---- */

/*
 * STATE and META carry text after a fixed part (fixed bytes), padded to 4
 * with zeros: the payload length for text_len bytes, or 0 when too long.
 */
static uint32_t
text_payload_len(uint32_t fixed, uint32_t text_len)
{
	if (text_len > OVL_FRAME_LIMIT - fixed - 3)
		return 0;
	return ovl_align4((uint64_t)fixed + text_len);
}

/* The text after the fixed part, and the zero padding after it. */
static void
text_put(uint8_t *p, uint32_t fixed, const void *text, uint32_t text_len)
{
	uint32_t len = text_payload_len(fixed, text_len);

	memcpy(p + fixed, text, text_len);
	memset(p + fixed + text_len, 0, len - fixed - text_len);
}

/* A text of n bytes fits the payload of f exactly (with its padding). */
static int
text_fits(const struct ovl_frame *f, uint32_t fixed, uint32_t n)
{
	return n <= f->len - fixed && text_payload_len(fixed, n) == f->len;
}

uint32_t
ovl_state_payload_len(uint32_t text_len)
{
	return text_payload_len(OVL_STATE_FIXED, text_len);
}

void
ovl_state_encode(uint8_t *p, const struct ovl_state *s)
{
	ovl_put32(p + 0, s->stage);
	ovl_put32(p + 4, s->text_len);
	ovl_put64(p + 8, s->n);
	text_put(p, OVL_STATE_FIXED, s->text, s->text_len);
}

int
ovl_state_decode(const struct ovl_frame *f, struct ovl_state *s)
{
	const uint8_t *p = f->payload;

	if (f->kind != OVL_STATE || f->len < OVL_STATE_FIXED)
		return OVL_F_EPAYLOAD;
	s->stage = ovl_le32(p + 0);
	s->text_len = ovl_le32(p + 4);
	s->n = ovl_le64(p + 8);
	if (!text_fits(f, OVL_STATE_FIXED, s->text_len))
		return OVL_F_EPAYLOAD;
	s->text = (const char *)(p + OVL_STATE_FIXED);
	return OVL_F_OK;
}

uint32_t
ovl_meta_payload_len(uint32_t text_len)
{
	return text_payload_len(OVL_META_FIXED, text_len);
}

void
ovl_meta_encode(uint8_t *p, const char *text, uint32_t text_len)
{
	ovl_put32(p + 0, text_len);
	ovl_put32(p + 4, 0);
	text_put(p, OVL_META_FIXED, text, text_len);
}

int
ovl_meta_decode(const struct ovl_frame *f, const char **text, uint32_t *text_len)
{
	const uint8_t *p = f->payload;
	uint32_t n;

	if (f->kind != OVL_META || f->len < OVL_META_FIXED)
		return OVL_F_EPAYLOAD;
	n = ovl_le32(p);
	if (!text_fits(f, OVL_META_FIXED, n))
		return OVL_F_EPAYLOAD;
	*text = (const char *)(p + OVL_META_FIXED);
	*text_len = n;
	return OVL_F_OK;
}

/* ---- END ---- */

void
ovl_end_encode(uint8_t *p, uint64_t nframes)
{
	ovl_put64(p, nframes);
	ovl_put64(p + 8, 0);
}

int
ovl_end_decode(const struct ovl_frame *f, uint64_t *nframes)
{
	if (f->kind != OVL_END || f->len != OVL_END_LEN)
		return OVL_F_EPAYLOAD;
	*nframes = ovl_le64(f->payload);
	return OVL_F_OK;
}

int
ovl_meta_value(const char *text, size_t len, const char *key, char *out,
    size_t outlen)
{
	const char *p = text, *end = text + len, *nl;
	size_t kl = strlen(key), vl;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		if ((size_t)(nl - p) > kl && memcmp(p, key, kl) == 0 &&
		    p[kl] == ' ') {
			vl = (size_t)(nl - p) - kl - 1;
			if (vl >= outlen)
				vl = outlen - 1;
			memcpy(out, p + kl + 1, vl);
			out[vl] = '\0';
			return 1;
		}
		p = nl + 1;
	}
	return 0;
}

void
ovl_step_encode(uint8_t *p, const struct ovl_step *s)
{
	ovl_put64(p, s->step);
	ovl_put32(p + 8, s->rank);
	ovl_put32(p + 12, s->seqs);
}

int
ovl_step_decode(const struct ovl_frame *f, struct ovl_step *s)
{
	const uint8_t *p = f->payload;

	if (f->kind != OVL_STEP || f->len != OVL_STEP_LEN)
		return OVL_F_EPAYLOAD;
	s->step = ovl_le64(p);
	s->rank = ovl_le32(p + 8);
	s->seqs = ovl_le32(p + 12);
	return OVL_F_OK;
}

/* ---- IMAGE ---- */

uint32_t
ovl_image_payload_len(uint32_t name_len, uint32_t path_len, uint32_t data_len)
{
	uint64_t n = (uint64_t)OVL_IMAGE_FIXED + name_len + path_len + data_len;

	if (n > OVL_FRAME_LIMIT)
		return 0;
	return ovl_align4(n);
}

uint8_t *
ovl_image_data(uint8_t *p)
{
	return p + OVL_IMAGE_FIXED + ovl_le32(p + 52) + ovl_le32(p + 72);
}

void
ovl_image_encode(uint8_t *p, const struct ovl_image *im)
{
	uint32_t len = ovl_image_payload_len(im->name_len, im->path_len,
	    im->data_len);
	uint32_t end = OVL_IMAGE_FIXED + im->name_len + im->path_len +
	    im->data_len;
	uint8_t *q = p + OVL_IMAGE_FIXED;

	ovl_put32(p + 0, im->flags);
	ovl_put32(p + 4, im->format);
	ovl_put32(p + 8, im->width);
	ovl_put32(p + 12, im->height);
	ovl_put32(p + 16, im->index);
	ovl_put32(p + 20, im->ntokens);
	ovl_put32(p + 24, im->doc_pos);
	ovl_put32(p + 28, im->seq_pos);
	ovl_put64(p + 32, im->step);
	ovl_put32(p + 40, im->rank);
	ovl_put32(p + 44, im->mb);
	ovl_put32(p + 48, im->piece);
	ovl_put32(p + 52, im->name_len);
	ovl_put64(p + 56, im->offset);
	ovl_put64(p + 64, im->length);
	ovl_put32(p + 72, im->path_len);
	ovl_put32(p + 76, im->data_len);
	if (im->name != NULL && im->name_len > 0)
		memcpy(q, im->name, im->name_len);
	q += im->name_len;
	if (im->path != NULL && im->path_len > 0)
		memcpy(q, im->path, im->path_len);
	q += im->path_len;
	if (im->data != NULL && im->data_len > 0)
		memcpy(q, im->data, im->data_len);
	memset(p + end, 0, len - end);
}

int
ovl_image_decode(const struct ovl_frame *f, struct ovl_image *im)
{
	const uint8_t *p = f->payload;
	uint64_t n;

	if (f->kind != OVL_IMAGE || f->len < OVL_IMAGE_FIXED)
		return OVL_F_EPAYLOAD;
	im->flags = ovl_le32(p + 0);
	im->format = ovl_le32(p + 4);
	im->width = ovl_le32(p + 8);
	im->height = ovl_le32(p + 12);
	im->index = ovl_le32(p + 16);
	im->ntokens = ovl_le32(p + 20);
	im->doc_pos = ovl_le32(p + 24);
	im->seq_pos = ovl_le32(p + 28);
	im->step = ovl_le64(p + 32);
	im->rank = ovl_le32(p + 40);
	im->mb = ovl_le32(p + 44);
	im->piece = ovl_le32(p + 48);
	im->name_len = ovl_le32(p + 52);
	im->offset = ovl_le64(p + 56);
	im->length = ovl_le64(p + 64);
	im->path_len = ovl_le32(p + 72);
	im->data_len = ovl_le32(p + 76);
	n = (uint64_t)OVL_IMAGE_FIXED + im->name_len + im->path_len +
	    im->data_len;
	if (n > f->len || ovl_align4(n) != f->len)
		return OVL_F_EPAYLOAD;
	if (im->flags == OVL_IMAGE_INLINE ? im->data_len != im->length :
	    im->flags == OVL_IMAGE_REF ? im->data_len != 0 : 1)
		return OVL_F_EPAYLOAD;
	im->name = (const char *)(p + OVL_IMAGE_FIXED);
	im->path = im->name + im->name_len;
	im->data = (const uint8_t *)im->path + im->path_len;
	return OVL_F_OK;
}

void
ovl_image_set_seq(uint8_t *p, uint64_t step, uint32_t rank, uint32_t mb,
    uint32_t piece, uint32_t seq_pos)
{
	ovl_put32(p + 28, seq_pos);
	ovl_put64(p + 32, step);
	ovl_put32(p + 40, rank);
	ovl_put32(p + 44, mb);
	ovl_put32(p + 48, piece);
}
