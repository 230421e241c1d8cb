/*
 * parquet-page: the pages of one column chunk (see parquet.h): page
 * headers, CRCs, codecs, definition levels and the value encodings of a
 * BYTE_ARRAY column.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <brotli/decode.h>
#include <lz4.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "parquet-int.h"
#include "dl.h"

/*
 * The codecs only parquet pages use, loaded at the first page that needs
 * one (lib/dl.h): a source of other files maps none of them (libsnappy
 * brings libstdc++).
 */
static struct {
	__typeof__(snappy_uncompressed_length)	*length;
	__typeof__(snappy_uncompress)		*uncompress;
} snappy;
static const struct ovl_dl_sym snappy_syms[] = {
	{ "snappy_uncompressed_length", &snappy.length },
	{ "snappy_uncompress", &snappy.uncompress }, { NULL, NULL }
};
static struct ovl_dl snappy_lib = { OVL_SONAME_SNAPPY,
    "parquet snappy pages", "libsnappy1v5", snappy_syms, 0, "" };

static struct {
	__typeof__(LZ4_decompress_safe)			*block;
	__typeof__(LZ4F_createDecompressionContext)	*fnew;
	__typeof__(LZ4F_decompress)			*frame;
	__typeof__(LZ4F_isError)			*iserr;
	__typeof__(LZ4F_freeDecompressionContext)	*ffree;
} lz4;
static const struct ovl_dl_sym lz4_syms[] = {
	{ "LZ4_decompress_safe", &lz4.block },
	{ "LZ4F_createDecompressionContext", &lz4.fnew },
	{ "LZ4F_decompress", &lz4.frame }, { "LZ4F_isError", &lz4.iserr },
	{ "LZ4F_freeDecompressionContext", &lz4.ffree }, { NULL, NULL }
};
static struct ovl_dl lz4_lib = { OVL_SONAME_LZ4, "parquet lz4 pages",
    "liblz4-1", lz4_syms, 0, "" };

static __typeof__(BrotliDecoderDecompress) *brotli_dec;
static const struct ovl_dl_sym brotli_syms[] = {
	{ "BrotliDecoderDecompress", &brotli_dec }, { NULL, NULL }
};
static struct ovl_dl brotli_lib = { OVL_SONAME_BROTLI,
    "parquet brotli pages", "libbrotli1", brotli_syms, 0, "" };

enum { C_NONE = 0, C_SNAPPY = 1, C_GZIP = 2, C_LZO = 3, C_BROTLI = 4,
	C_LZ4 = 5, C_ZSTD = 6, C_LZ4_RAW = 7 };

static const char *const codec_names[] = { "UNCOMPRESSED", "SNAPPY", "GZIP",
	"LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW" };

/* An error in the current page: row group, column, page, byte offset. */
static int
page_err(struct ovl_pq_reader *r, const char *fmt, ...)
{
	char msg[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(r->err, sizeof(r->err), "row group %" PRIu32 ", column '%s', "
	    "page %" PRIu32 " (byte %" PRIu64 "): %s", r->rg, r->f->column,
	    r->page, r->page_off, msg);
	return -2;
}

/* ---- codecs --------------------------------------------------------- */

static int
gunzip(const uint8_t *in, size_t n, uint8_t *out, size_t want)
{
	z_stream z;
	int k;
	size_t got;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 32) != Z_OK)
		return -1;
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)want;
	for (;;) {
		k = inflate(&z, Z_FINISH);
		if (k == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0) {
			inflateReset(&z);	/* another gzip member */
			continue;
		}
		break;
	}
	got = want - z.avail_out;
	inflateEnd(&z);
	return (k == Z_STREAM_END && got == want) ? 0 : -1;
}

/* LZ4 as Hadoop frames it: [u32be raw][u32be packed][block]... */
static int
lz4_hadoop(const uint8_t *in, size_t n, uint8_t *out, size_t want)
{
	size_t o = 0;

	while (n > 0) {
		uint32_t raw, packed;
		int k;

		if (n < 8)
			return -1;
		raw = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 |
		    (uint32_t)in[2] << 8 | in[3];
		packed = (uint32_t)in[4] << 24 | (uint32_t)in[5] << 16 |
		    (uint32_t)in[6] << 8 | in[7];
		in += 8;
		n -= 8;
		if (packed > n || raw > want - o || packed > INT32_MAX)
			return -1;
		k = lz4.block((const char *)in, (char *)out + o,
		    (int)packed, (int)raw);
		if (k < 0 || (uint32_t)k != raw)
			return -1;
		o += raw;
		in += packed;
		n -= packed;
	}
	return o == want ? 0 : -1;
}

static int
lz4_frame(const uint8_t *in, size_t n, uint8_t *out, size_t want)
{
	LZ4F_dctx *d;
	size_t o = 0, r = 1;

	if (lz4.iserr(lz4.fnew(&d, LZ4F_VERSION)))
		return -1;
	while (n > 0 && r != 0) {
		size_t si = n, so = want - o;

		r = lz4.frame(d, out + o, &so, in, &si, NULL);
		if (lz4.iserr(r) || (si == 0 && so == 0))
			break;
		in += si;
		n -= si;
		o += so;
	}
	lz4.ffree(d);
	return !lz4.iserr(r) && r == 0 && o == want ? 0 : -1;
}

static int
lz4_raw(const uint8_t *in, size_t n, uint8_t *out, size_t want)
{
	int k;

	if (n > INT32_MAX || want > INT32_MAX)
		return -1;
	k = lz4.block((const char *)in, (char *)out, (int)n,
	    (int)want);
	return k >= 0 && (size_t)k == want ? 0 : -1;
}

/* Decompress in[0..n) into exactly want bytes at out. */
static int
decompress(struct ovl_pq_reader *r, int codec, const uint8_t *in, size_t n,
    uint8_t *out, size_t want)
{
	struct ovl_dl *lib;
	size_t got;
	int ok = -1;

	lib = codec == C_SNAPPY ? &snappy_lib : codec == C_BROTLI ? &brotli_lib :
	    codec == C_LZ4 || codec == C_LZ4_RAW ? &lz4_lib : NULL;
	if (lib != NULL && ovl_dl_load(lib) != 0)
		return page_err(r, "%s", lib->err);
	switch (codec) {
	case C_NONE:
		if (n != want)
			return page_err(r, "uncompressed page of %zu bytes "
			    "announced as %zu", n, want);
		memcpy(out, in, n);
		return 0;
	case C_SNAPPY:
		if (snappy.length((const char *)in, n, &got) ==
		    SNAPPY_OK && got == want) {
			got = want;
			ok = snappy.uncompress((const char *)in, n, (char *)out,
			    &got) == SNAPPY_OK && got == want ? 0 : -1;
		}
		break;
	case C_GZIP:
		ok = gunzip(in, n, out, want);
		break;
	case C_BROTLI:
		got = want;
		ok = brotli_dec(n, in, &got, out) ==
		    BROTLI_DECODER_RESULT_SUCCESS && got == want ? 0 : -1;
		break;
	case C_ZSTD:
		got = ZSTD_decompress(out, want, in, n);
		ok = !ZSTD_isError(got) && got == want ? 0 : -1;
		break;
	case C_LZ4:
		/* writers disagree: Hadoop framing, an LZ4 frame, a raw block */
		ok = lz4_hadoop(in, n, out, want);
		if (ok != 0)
			ok = lz4_frame(in, n, out, want);
		if (ok != 0)
			ok = lz4_raw(in, n, out, want);
		break;
	case C_LZ4_RAW:
		ok = lz4_raw(in, n, out, want);
		break;
	default:
		return page_err(r, "compression codec %s is not supported",
		    codec >= 0 && codec <= C_LZ4_RAW ? codec_names[codec] :
		    "(unknown)");
	}
	if (ok != 0)
		return page_err(r, "corrupt %s data (%zu bytes, %zu expected "
		    "once decompressed)", codec_names[codec], n, want);
	return 0;
}

/* ---- page headers --------------------------------------------------- */

struct pq_page {
	int32_t		 type;
	int32_t		 usize, csize;
	int64_t		 crc;		/* -1: none */
	int32_t		 nvals, nnulls, nrows;
	int32_t		 enc;
	int32_t		 def_enc;		/* v1: RLE (3) or BIT_PACKED */
	int32_t		 def_len, rep_len;	/* v2 */
	int		 compressed;		/* v2 */
	size_t		 hlen;
};

static void
read_sub(struct tr *t, struct pq_page *pg, int v2)
{
	int16_t id = 0;
	int ty;

	while (!t->err && (ty = tr_field(t, &id)) != TT_STOP) {
		if (ty == TT_TRUE || ty == TT_FALSE) {
			if (v2 && id == 7)
				pg->compressed = ty == TT_TRUE;
			continue;
		}
		if (ty != TT_I32) {
			ovl_pq_tr_skip(t, ty, 1);
			continue;
		}
		if (!v2) {	/* DataPageHeader, DictionaryPageHeader */
			if (id == 1)
				pg->nvals = (int32_t)tr_int(t);
			else if (id == 2)
				pg->enc = (int32_t)tr_int(t);
			else if (id == 3)
				pg->def_enc = (int32_t)tr_int(t);
			else
				(void)tr_int(t);
			continue;
		}
		switch (id) {
		case 1: pg->nvals = (int32_t)tr_int(t); break;
		case 2: pg->nnulls = (int32_t)tr_int(t); break;
		case 3: pg->nrows = (int32_t)tr_int(t); break;
		case 4: pg->enc = (int32_t)tr_int(t); break;
		case 5: pg->def_len = (int32_t)tr_int(t); break;
		case 6: pg->rep_len = (int32_t)tr_int(t); break;
		default: (void)tr_int(t); break;
		}
	}
}

/* Parse a page header from h[0..n): 0, 1 when it needs more bytes, -1. */
static int
parse_header(const uint8_t *h, size_t n, struct pq_page *pg)
{
	struct tr t = { h, h, h + n, 0 };
	int16_t id = 0;
	int ty;

	memset(pg, 0, sizeof(*pg));
	pg->type = -1;
	pg->crc = -1;
	pg->compressed = 1;
	pg->nrows = -1;
	while (!t.err && (ty = tr_field(&t, &id)) != TT_STOP) {
		if (id == 1 && ty == TT_I32)
			pg->type = (int32_t)tr_int(&t);
		else if (id == 2 && ty == TT_I32)
			pg->usize = (int32_t)tr_int(&t);
		else if (id == 3 && ty == TT_I32)
			pg->csize = (int32_t)tr_int(&t);
		else if (id == 4 && ty == TT_I32)
			pg->crc = (uint32_t)tr_int(&t);
		else if ((id == 5 || id == 7 || id == 8) && ty == TT_STRUCT)
			read_sub(&t, pg, id == 8);
		else
			ovl_pq_tr_skip(&t, ty, 1);
	}
	if (t.err)
		return 1;	/* cut short, or corrupt: the caller decides */
	pg->hlen = (size_t)(t.p - t.b);
	return 0;
}

/* Read the next page header at r->pos. */
static int
next_header(struct ovl_pq_reader *r, struct pq_page *pg)
{
	size_t want = 256;
	uint64_t left = r->end - r->pos;

	r->page_off = r->pos;
	for (;;) {
		size_t n = want < left ? want : (size_t)left;
		int k;

		ovl_buf_reserve(&r->hdr, n);
		if (ovl_pq_io_read(&r->f->io, r->hdr.p, n, r->pos) != 0)
			return page_err(r, "cannot read: %s", strerror(errno));
		k = parse_header(r->hdr.p, n, pg);
		if (k == 0)
			break;
		if (n == left || want >= PQ_MAX_HEADER)
			return page_err(r, "corrupt page header");
		want *= 4;
	}
	if (pg->csize < 0 || pg->usize < 0 || (uint32_t)pg->usize > PQ_MAX_PAGE ||
	    (uint64_t)pg->csize > left - pg->hlen)
		return page_err(r, "page sizes (%" PRId32 " compressed, %" PRId32
		    " decompressed) do not fit the column chunk", pg->csize,
		    pg->usize);
	return 0;
}

/* Read the page's body and decompress it into r->data. */
static int
read_body(struct ovl_pq_reader *r, const struct pq_page *pg)
{
	const struct pq_chunk *c = &r->f->rg[r->rg];
	size_t cs = (size_t)pg->csize, us = (size_t)pg->usize, pre = 0;

	r->comp.len = 0;
	ovl_buf_reserve(&r->comp, cs + 1);
	if (ovl_pq_io_read(&r->f->io, r->comp.p, cs, r->pos + pg->hlen) != 0)
		return page_err(r, "cannot read: %s", strerror(errno));
	if (pg->crc >= 0 && (uint32_t)crc32(0, r->comp.p, (uInt)cs) !=
	    (uint32_t)pg->crc)
		return page_err(r, "CRC mismatch");
	r->data.len = 0;
	ovl_buf_reserve(&r->data, us + 1);
	if (pg->type == PQ_DATA_PAGE_V2) {
		/* levels are never compressed in a v2 page */
		if (pg->def_len < 0 || pg->rep_len < 0 ||
		    (uint64_t)pg->def_len + (uint64_t)pg->rep_len > cs ||
		    (uint64_t)pg->def_len + (uint64_t)pg->rep_len > us)
			return page_err(r, "level sizes do not fit the page");
		pre = (size_t)pg->def_len + (size_t)pg->rep_len;
		memcpy(r->data.p, r->comp.p, pre);
		if (!pg->compressed) {
			if (cs != us)
				return page_err(r, "uncompressed page of %zu "
				    "bytes announced as %zu", cs, us);
			memcpy(r->data.p + pre, r->comp.p + pre, cs - pre);
			r->data.len = us;
			return 0;
		}
	}
	if (decompress(r, c->codec, r->comp.p + pre, cs - pre, r->data.p + pre,
	    us - pre) != 0)
		return -2;
	r->data.len = us;
	return 0;
}

/* ---- RLE / bit-packed hybrid ---------------------------------------- */

static void
rle_init(struct ovl_pq_reader *r, const uint8_t *p, const uint8_t *e, int bw)
{
	r->vp = p;
	r->ve = e;
	r->bw = bw;
	r->rle_left = 0;
	r->bp_n = r->bp_i = 0;
	r->rle_bp = 0;
}

static int
rle_next(struct ovl_pq_reader *r, uint32_t *v)
{
	if (r->rle_left == 0 && (!r->rle_bp || r->bp_i >= r->bp_n)) {
		struct tr t = { r->vp, r->vp, r->ve, 0 };
		uint64_t h = tr_varint(&t);

		if (t.err)
			return -1;
		r->vp = t.p;
		if (h & 1) {
			uint64_t groups = h >> 1, bytes = groups * (uint64_t)r->bw;

			if (groups == 0 || groups > (1u << 28))
				return -1;
			r->rle_bp = 1;
			r->bp = r->vp;
			r->bp_i = 0;
			r->bp_n = (uint32_t)(groups * 8);
			/* a last run may be cut short; values past it fail */
			r->vp += bytes < (uint64_t)(r->ve - r->vp) ? bytes :
			    (uint64_t)(r->ve - r->vp);
		} else {
			uint32_t i, nb = (uint32_t)(r->bw + 7) / 8;

			r->rle_bp = 0;
			r->rle_left = (uint32_t)(h >> 1 > UINT32_MAX ? UINT32_MAX :
			    h >> 1);
			if (r->rle_left == 0 || (size_t)(r->ve - r->vp) < nb)
				return -1;
			r->rle_val = 0;
			for (i = 0; i < nb; i++)
				r->rle_val |= (uint32_t)r->vp[i] << (8 * i);
			r->vp += nb;
		}
	}
	if (!r->rle_bp) {
		r->rle_left--;
		*v = r->rle_val;
		return 0;
	} else {
		uint64_t bit = (uint64_t)r->bp_i * (uint64_t)r->bw;
		uint64_t x = 0;
		size_t byte = (size_t)(bit >> 3), k;
		size_t need = (size_t)((bit & 7) + (uint64_t)r->bw + 7) / 8;

		if (byte + need > (size_t)(r->vp - r->bp))
			return -1;
		for (k = 0; k < need; k++)
			x |= (uint64_t)r->bp[byte + k] << (8 * k);
		*v = (uint32_t)((x >> (bit & 7)) & (r->bw == 32 ? 0xffffffffu :
		    ((1u << r->bw) - 1)));
		r->bp_i++;
		return 0;
	}
}

/* ---- DELTA_BINARY_PACKED (lengths of the DELTA_* byte arrays) ------- */

/* Decode n values from *pp into out[0..n); *pp moves past them. */
static int
delta_ints(const uint8_t **pp, const uint8_t *e, int64_t *out, uint32_t n)
{
	struct tr t = { *pp, *pp, e, 0 };
	uint64_t bs = tr_varint(&t), nmb = tr_varint(&t), total = tr_varint(&t);
	uint64_t per, i = 0, m;
	int64_t v = tr_int(&t);

	if (t.err || bs == 0 || bs % 128 != 0 || nmb == 0 || bs % nmb != 0 ||
	    bs > (1u << 20) || total != n)
		return -1;
	per = bs / nmb;
	if (per % 32 != 0)
		return -1;
	if (n > 0)
		out[i++] = v;
	while (i < n) {
		int64_t mind = tr_int(&t);
		const uint8_t *bw = t.p;

		if (t.err || (uint64_t)(t.e - t.p) < nmb)
			return -1;
		t.p += nmb;
		for (m = 0; m < nmb && i < n; m++) {
			uint64_t w = bw[m], j, bytes = per * w / 8;

			if (w > 64 || bytes > (uint64_t)(t.e - t.p))
				return -1;
			for (j = 0; j < per && i < n; j++) {
				uint64_t bit = j * w, d = 0, b = 0;

				while (b < w) {	/* w bits from bit on, LSB first */
					uint64_t at = bit + b;
					unsigned o = (unsigned)(at & 7);
					uint64_t take = 8 - o < w - b ? 8 - o : w - b;

					d |= (uint64_t)((t.p[at >> 3] >> o) &
					    ((1u << take) - 1)) << b;
					b += take;
				}
				v = (int64_t)((uint64_t)v + (uint64_t)mind + d);
				out[i++] = v;
			}
			t.p += bytes;
		}
	}
	*pp = t.p;
	return 0;
}

/* ---- data pages ----------------------------------------------------- */

static int
read_dict(struct ovl_pq_reader *r, const struct pq_page *pg)
{
	const uint8_t *p, *e;
	uint32_t i;

	if (r->have_dict)
		return page_err(r, "a second dictionary page");
	if (pg->enc != PQ_PLAIN && pg->enc != PQ_PLAIN_DICT)
		return page_err(r, "dictionary encoding %" PRId32 " is not "
		    "supported", pg->enc);
	if (read_body(r, pg) != 0)
		return -2;
	if (pg->nvals < 0 || (uint64_t)pg->nvals > r->data.len / 4 + 1)
		return page_err(r, "dictionary of %" PRId32 " values in %zu "
		    "bytes", pg->nvals, r->data.len);
	/* keep the page: the values stay where they are */
	{
		struct ovl_buf tmp = r->dict;

		r->dict = r->data;
		r->data = tmp;
	}
	if ((uint32_t)pg->nvals > r->dcap) {
		r->dcap = (uint32_t)pg->nvals;
		r->doff = ovl_xrealloc(r->doff, ((size_t)r->dcap + 1) *
		    sizeof(*r->doff));
	}
	p = r->dict.p;
	e = p + r->dict.len;
	for (i = 0; i < (uint32_t)pg->nvals; i++) {
		uint32_t n;

		if (e - p < 4)
			return page_err(r, "dictionary value %" PRIu32 " is cut",
			    i);
		n = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
		    (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		if (n > (size_t)(e - p) - 4)
			return page_err(r, "dictionary value %" PRIu32 " is cut",
			    i);
		r->doff[i] = (uint64_t)(p - r->dict.p);
		p += 4 + n;
	}
	r->ndict = (uint32_t)pg->nvals;
	r->have_dict = 1;
	return 0;
}

static int
start_data(struct ovl_pq_reader *r, const struct pq_page *pg)
{
	const uint8_t *p, *e;
	uint32_t nn = 0, i;
	int max_def = r->f->max_def;

	if (read_body(r, pg) != 0)
		return -2;
	p = r->data.p;
	e = p + r->data.len;
	r->nvals = (uint32_t)pg->nvals;
	r->vi = 0;
	if (r->nvals > r->dfcap) {
		r->dfcap = r->nvals;
		r->defs = ovl_xrealloc(r->defs, r->dfcap);
	}
	if (max_def > 0) {
		const uint8_t *le;
		int bw = 0;

		while ((1 << bw) <= max_def)
			bw++;
		if (pg->type == PQ_DATA_PAGE && pg->def_enc != PQ_RLE)
			return page_err(r, "definition level encoding %" PRId32
			    " is not supported (RLE is)", pg->def_enc);
		if (pg->type == PQ_DATA_PAGE_V2) {
			p += pg->rep_len;
			le = p + pg->def_len;
		} else {
			uint32_t n;

			if (e - p < 4)
				return page_err(r, "definition levels are cut");
			n = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
			    (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
			p += 4;
			if (n > (size_t)(e - p))
				return page_err(r, "definition levels are cut");
			le = p + n;
		}
		rle_init(r, p, le, bw);
		for (i = 0; i < r->nvals; i++) {
			uint32_t d;

			if (rle_next(r, &d) != 0 || d > (uint32_t)max_def)
				return page_err(r, "corrupt definition levels");
			r->defs[i] = (uint8_t)d;
			nn += d == (uint32_t)max_def;
		}
		p = le;
	} else {
		if (pg->type == PQ_DATA_PAGE_V2)
			p += pg->rep_len + pg->def_len;
		if (r->nvals > 0)
			memset(r->defs, 0, r->nvals);
		nn = r->nvals;
	}
	r->enc = pg->enc;
	if (pg->enc >= 0 && pg->enc < 32)
		r->encs |= 1u << pg->enc;
	switch (pg->enc) {
	case PQ_PLAIN:
		r->vp = p;
		r->ve = e;
		return 0;
	case PQ_PLAIN_DICT:
	case PQ_RLE_DICT:
		if (!r->have_dict)
			return page_err(r, "dictionary-encoded page without a "
			    "dictionary page");
		if (nn > 0 && (p >= e || *p > 32))
			return page_err(r, "corrupt dictionary indices");
		rle_init(r, p + (p < e), e, p < e ? *p : 0);
		return 0;
	case PQ_DELTA_LENGTH:
	case PQ_DELTA_BYTES:
		if (nn > r->lcap) {
			r->lcap = nn;
			r->lens = ovl_xrealloc(r->lens, nn * sizeof(*r->lens));
			r->pfx = ovl_xrealloc(r->pfx, nn * sizeof(*r->pfx));
		}
		r->li = 0;
		if (pg->enc == PQ_DELTA_BYTES && delta_ints(&p, e, r->pfx, nn) != 0)
			return page_err(r, "corrupt DELTA_BYTE_ARRAY prefixes");
		if (delta_ints(&p, e, r->lens, nn) != 0)
			return page_err(r, "corrupt DELTA lengths");
		r->vp = p;
		r->ve = e;
		r->cur.len = 0;
		return 0;
	default:
		return page_err(r, "value encoding %" PRId32 " is not supported "
		    "for a string column", pg->enc);
	}
}

/* Move to the next data page, reading a dictionary page on the way. */
static int
next_page(struct ovl_pq_reader *r, uint64_t *skip)
{
	struct pq_page pg;

	for (;;) {
		if (r->pos >= r->end)
			return page_err(r, "the column chunk ends after %" PRIu64
			    " of its %" PRIu64 " rows", r->row, r->rows);
		r->page++;
		if (next_header(r, &pg) != 0)
			return -2;
		if (pg.type >= 0 && pg.type < 4)
			r->npages[pg.type]++;
		if (pg.type == PQ_DICT_PAGE) {
			if (read_dict(r, &pg) != 0)
				return -2;
		} else if (pg.type == PQ_DATA_PAGE || pg.type == PQ_DATA_PAGE_V2) {
			uint32_t rows = pg.type == PQ_DATA_PAGE_V2 ? (uint32_t)
			    pg.nrows : (uint32_t)pg.nvals;

			if (pg.nvals < 0 || (pg.type == PQ_DATA_PAGE_V2 &&
			    pg.nvals != pg.nrows))
				return page_err(r, "%" PRId32 " values in %" PRId32
				    " rows", pg.nvals, pg.nrows);
			if ((uint64_t)pg.nvals > r->rows - r->row ||
			    pg.nvals > PQ_MAX_PAGE_ROWS)
				return page_err(r, "%" PRId32 " values in a page, "
				    "with %" PRIu64 " rows left in the row group",
				    pg.nvals, r->rows - r->row);
			if (*skip > 0 && rows <= *skip) {
				*skip -= rows;	/* passed over, never read */
				r->row += rows;
				r->pos += pg.hlen + (uint64_t)pg.csize;
				continue;
			}
			if (start_data(r, &pg) != 0)
				return -2;
			r->pos += pg.hlen + (uint64_t)pg.csize;
			return 0;
		}
		/* index pages and unknown kinds carry nothing we read */
		r->pos += pg.hlen + (uint64_t)pg.csize;
	}
}

/* Free what a failed open holds, keeping its message. */
static int
open_failed(struct ovl_pq_reader *r)
{
	char e[sizeof(r->err)];

	memcpy(e, r->err, sizeof(e));
	ovl_pq_reader_close(r);
	memcpy(r->err, e, sizeof(e));
	return -1;
}

int
ovl_pq_reader_open(struct ovl_pq_reader *r, struct ovl_pq_file *f,
    uint32_t rg, uint64_t skip)
{
	const struct pq_chunk *c = &f->rg[rg];
	uint64_t start;
	const uint8_t *p;
	size_t len;

	memset(r, 0, sizeof(*r));
	r->f = f;
	r->rg = rg;
	r->rows = (uint64_t)c->rows;
	if (c->external) {
		snprintf(r->err, sizeof(r->err), "row group %" PRIu32 ", column "
		    "'%s': the column chunk is in another file (not supported)",
		    rg, f->column);
		return -1;
	}
	start = c->dict_off > 0 && c->dict_off < c->data_off ?
	    (uint64_t)c->dict_off : (uint64_t)c->data_off;
	if (c->data_off < 4 || c->comp_size < 0 || start < 4 ||
	    (uint64_t)c->comp_size > f->fstart - start ||
	    c->type != PQ_BYTE_ARRAY || (uint64_t)c->nvalues != r->rows) {
		snprintf(r->err, sizeof(r->err), "row group %" PRIu32 ", column "
		    "'%s': column chunk metadata do not fit the file (offset %"
		    PRId64 ", %" PRId64 " bytes, %" PRId64 " values in %" PRIu64
		    " rows)", rg, f->column, c->data_off, c->comp_size,
		    c->nvalues, r->rows);
		return -1;
	}
	r->start = r->pos = start;
	r->end = start + (uint64_t)c->comp_size;
	if (skip > r->rows) {
		snprintf(r->err, sizeof(r->err), "row group %" PRIu32 " has %"
		    PRIu64 " rows: row %" PRIu64 " is beyond its end", rg,
		    r->rows, skip);
		return -1;
	}
	/* whole pages before skip are passed over; then values one by one */
	if (skip > 0 && skip < r->rows) {
		uint64_t left = skip;

		if (next_page(r, &left) != 0)
			return open_failed(r);
		while (left > 0) {
			int k = ovl_pq_next(r, &p, &len);

			if (k == -2)
				return open_failed(r);
			left--;
		}
	} else
		r->row = skip;
	return 0;
}

int
ovl_pq_next(struct ovl_pq_reader *r, const uint8_t **pp, size_t *lenp)
{
	uint32_t n, ix;

	if (r->row >= r->rows)
		return -1;
	if (r->vi >= r->nvals) {
		uint64_t none = 0;

		do
			if (next_page(r, &none) != 0)
				return -2;
		while (r->nvals == 0);
	}
	r->row++;
	if (r->defs[r->vi++] != r->f->max_def)
		return 0;
	switch (r->enc) {
	case PQ_PLAIN:
		if (r->ve - r->vp < 4)
			return page_err(r, "value %" PRIu32 " is cut", r->vi - 1);
		n = (uint32_t)r->vp[0] | (uint32_t)r->vp[1] << 8 |
		    (uint32_t)r->vp[2] << 16 | (uint32_t)r->vp[3] << 24;
		if (n > (size_t)(r->ve - r->vp) - 4)
			return page_err(r, "value %" PRIu32 " is cut", r->vi - 1);
		*pp = r->vp + 4;
		*lenp = n;
		r->vp += 4 + (size_t)n;
		return 1;
	case PQ_PLAIN_DICT:
	case PQ_RLE_DICT:
		if (rle_next(r, &ix) != 0 || ix >= r->ndict)
			return page_err(r, "corrupt dictionary index for value %"
			    PRIu32, r->vi - 1);
		{
			const uint8_t *d = r->dict.p + r->doff[ix];

			*lenp = (uint32_t)d[0] | (uint32_t)d[1] << 8 |
			    (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
			*pp = d + 4;
		}
		return 1;
	default: {	/* DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY */
		int64_t l = r->lens[r->li], pf = 0;

		if (r->enc == PQ_DELTA_BYTES)
			pf = r->pfx[r->li];
		r->li++;
		if (l < 0 || (uint64_t)l > (uint64_t)(r->ve - r->vp) || pf < 0 ||
		    (uint64_t)pf > r->cur.len)
			return page_err(r, "corrupt DELTA value %" PRIu32,
			    r->vi - 1);
		if (r->enc == PQ_DELTA_LENGTH) {
			*pp = r->vp;
			*lenp = (size_t)l;
			r->vp += l;
			return 1;
		}
		r->cur.len = (size_t)pf;
		ovl_buf_append(&r->cur, r->vp, (size_t)l);
		r->vp += l;
		*pp = r->cur.p != NULL ? r->cur.p : (const uint8_t *)"";
		*lenp = r->cur.len;
		return 1;
	}
	}
}

void
ovl_pq_reader_close(struct ovl_pq_reader *r)
{
	ovl_buf_free(&r->hdr);
	ovl_buf_free(&r->comp);
	ovl_buf_free(&r->data);
	ovl_buf_free(&r->cur);
	ovl_buf_free(&r->dict);
	free(r->doff);
	free(r->defs);
	free(r->lens);
	free(r->pfx);
	memset(r, 0, sizeof(*r));
}
