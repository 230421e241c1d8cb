/*
 * ovl-ckpt: the WebDataset output (--format wds): a tar shard per rank and
 * step, PREFIX-rRRRRR-sSSSSSSSS.tar, each sample one sequence: KEY.tokens.npy
 * (<u2 or <u4, the stream's token width), KEY.positions.npy (<i4), KEY.cu_seqlens.npy (<i4), KEY.json (step,
 * rank, micro-batch, pieces, images) and its inline images KEY.imgN.EXT.
 *
 * A rank's shard of a step is made in memory and written whole when the
 * rank's STEP frame comes (ovl_atomic_write: a temporary file, fsync,
 * rename, fsync of the directory), so a shard is there whole or not at
 * all; checkpoints sit at step boundaries, every shard before one is
 * durable when it commits, and a resumed run writes the later steps' shards
 * again, the same bytes. Nothing of them goes in the checkpoint log.
 */
#include "ckpt.h"

#define TAR_BLOCK	512u

struct wds_rank {
	struct ovl_buf	 tar;		/* the shard of step `step` so far */
	uint64_t	 step;
	int		 open;
	unsigned	 calm;		/* small shards in a row */
};

struct ckpt_wds {
	struct wds_rank	*r;
	size_t		 nr;
	/* the sample being made: a SEQ waiting for its images */
	struct ovl_buf	 seq;		/* the SEQ payload */
	uint32_t	 due;
	uint8_t		 seq_flags;	/* its frame's flags (widths) */
	struct ovl_buf	 json;
	struct ovl_buf	 scratch;
	struct ovl_u32vec pos;		/* a sequence's position ids */
	uint32_t	 nimg;
	uint64_t	 shards, samples;
};

static void
put_octal(char *dst, size_t width, uint64_t v)
{
	/* width - 1 digits and a NUL, as ustar has them */
	snprintf(dst, width, "%0*" PRIo64, (int)width - 1, v);
}

/* A member: a ustar header, the bytes, padding to the block. */
static void
tar_member(struct ovl_buf *b, const char *name, const void *p, size_t n)
{
	uint8_t *h = ovl_buf_reserve(b, TAR_BLOCK);
	unsigned sum = 0, i;

	memset(h, 0, TAR_BLOCK);
	snprintf((char *)h, 100, "%s", name);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	put_octal((char *)h + 124, 12, n);
	memcpy(h + 136, "00000000000", 12);
	memset(h + 148, ' ', 8);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	for (i = 0; i < TAR_BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	b->len += TAR_BLOCK;
	ovl_buf_append(b, p, n);
	if (n % TAR_BLOCK != 0) {
		size_t pad = TAR_BLOCK - n % TAR_BLOCK;

		memset(ovl_buf_reserve(b, pad), 0, pad);
		b->len += pad;
	}
}

/* An npy (version 1.0) of n items of descr (size bytes each) into b. */
static void
npy(struct ovl_buf *b, const char *descr, const void *p, size_t n,
    size_t size)
{
	uint8_t hdr[NPY_HDR];

	npy_header(hdr, descr, n, 1);
	b->len = 0;
	ovl_buf_append(b, hdr, NPY_HDR);
	ovl_buf_append(b, p, n * size);
}

static const char *
ext_of(uint32_t format)
{
	return format == 1 ? "png" : format == 2 ? "jpg" : format == 3 ?
	    "webp" : "bin";
}

static struct wds_rank *
wds_rank(struct ckpt_wds *W, uint32_t r)
{
	if (r >= W->nr) {
		W->r = ovl_xrealloc(W->r, ((size_t)r + 1) * sizeof(*W->r));
		memset(W->r + W->nr, 0, ((size_t)r + 1 - W->nr) * sizeof(*W->r));
		W->nr = (size_t)r + 1;
	}
	return &W->r[r];
}

static void
key_of(char *key, size_t n, uint64_t step, uint32_t rank, uint32_t mb)
{
	snprintf(key, n, "s%08" PRIu64 "-r%05" PRIu32 "-m%05" PRIu32, step,
	    rank, mb);
}

/* The sample of the SEQ held, now that its images are in. */
static void
sample_end(struct ckpt_wds *W)
{
	struct ovl_frame f = { OVL_SEQ, W->seq_flags, (uint32_t)W->seq.len,
	    W->seq.p, 0 };
	struct ovl_seq s;
	struct wds_rank *wr;
	char key[64], name[128];

	(void)ovl_seq_decode(&f, &s);
	wr = wds_rank(W, s.rank);
	if (!wr->open || wr->step != s.step) {
		wr->tar.len = 0;
		wr->step = s.step;
		wr->open = 1;
	}
	key_of(key, sizeof(key), s.step, s.rank, s.mb);
	snprintf(name, sizeof(name), "%s.tokens.npy", key);
	/* tokens in the stream's width (uint16 or uint32) */
	npy(&W->scratch, s.width == 2 ? "<u2" : "<u4", s.tokens, s.ntokens,
	    s.width);
	tar_member(&wr->tar, name, W->scratch.p, W->scratch.len);
	/* positions as int32, whatever the stream sent (ovl-frame(5)) */
	W->pos.len = 0;
	ovl_seq_position_ids(&s, ovl_u32vec_reserve(&W->pos, s.ntokens));
	snprintf(name, sizeof(name), "%s.positions.npy", key);
	npy(&W->scratch, "<i4", W->pos.p, s.ntokens, 4);
	tar_member(&wr->tar, name, W->scratch.p, W->scratch.len);
	snprintf(name, sizeof(name), "%s.cu_seqlens.npy", key);
	npy(&W->scratch, "<i4", s.cu_seqlens, (size_t)s.npieces + 1, 4);
	tar_member(&wr->tar, name, W->scratch.p, W->scratch.len);
	ovl_buf_append(&W->json, "]}\n", 3);
	snprintf(name, sizeof(name), "%s.json", key);
	tar_member(&wr->tar, name, W->json.p, W->json.len);
	W->samples++;
}

/* A SEQ written: its sample, once its images are in. */
static void
wds_seq(struct ckpt_run *R, void *state, const struct ovl_seq *s,
    const struct ovl_frame *f)
{
	struct ckpt_wds *W = state;
	struct ovl_piece pc;
	char t[256];
	uint32_t i;

	(void)R;
	W->seq.len = 0;
	ovl_buf_append(&W->seq, f->payload, f->len);
	W->seq_flags = f->flags;
	W->due = 0;
	W->nimg = 0;
	W->json.len = 0;
	snprintf(t, sizeof(t), "{\"step\":%" PRIu64 ",\"rank\":%" PRIu32
	    ",\"mb\":%" PRIu32 ",\"seq_len\":%" PRIu32 ",\"pieces\":[", s->step,
	    s->rank, s->mb, s->seq_len);
	ovl_buf_append(&W->json, t, strlen(t));
	for (i = 0; i < s->npieces; i++) {
		ovl_seq_piece(s, i, &pc);
		snprintf(t, sizeof(t), "%s{\"source\":%" PRIu32 ",\"epoch\":%"
		    PRIu32 ",\"chunk\":%" PRIu32 ",\"record\":%" PRIu64
		    ",\"offset\":%" PRIu32 ",\"length\":%" PRIu32 "}", i > 0 ?
		    "," : "", pc.source, pc.epoch, pc.chunk, pc.record,
		    pc.offset, pc.length);
		ovl_buf_append(&W->json, t, strlen(t));
		W->due += pc.nimages;
	}
	ovl_buf_append(&W->json, "],\"images\":[", 12);
	if (W->due == 0)
		sample_end(W);
}

static void
wds_image(struct ckpt_run *R, void *state, const struct ovl_image *im,
    const struct ovl_frame *f)
{
	struct ckpt_wds *W = state;
	struct wds_rank *wr;
	char t[512], key[64], name[128];

	(void)R;
	(void)f;
	if (W->due == 0)
		return;		/* the reader counts them: not reached */
	snprintf(t, sizeof(t), "%s{\"index\":%" PRIu32 ",\"seq_pos\":%" PRIu32
	    ",\"ntokens\":%" PRIu32 ",\"format\":\"%s\",\"width\":%" PRIu32
	    ",\"height\":%" PRIu32 ",\"length\":%" PRIu64 ",\"member\":",
	    W->nimg > 0 ? "," : "", im->index, im->seq_pos, im->ntokens,
	    ext_of(im->format), im->width, im->height, im->length);
	ovl_buf_append(&W->json, t, strlen(t));
	ovl_json_string_buf(&W->json, im->name, im->name_len);
	key_of(key, sizeof(key), im->step, im->rank, im->mb);
	if (im->flags == OVL_IMAGE_REF) {
		ovl_buf_append(&W->json, ",\"path\":", 8);
		ovl_json_string_buf(&W->json, im->path, im->path_len);
		snprintf(t, sizeof(t), ",\"offset\":%" PRIu64 "}", im->offset);
		ovl_buf_append(&W->json, t, strlen(t));
	} else {
		snprintf(name, sizeof(name), "%s.img%" PRIu32 ".%s", key,
		    W->nimg, ext_of(im->format));
		snprintf(t, sizeof(t), ",\"file\":\"%s\"}", name + strlen(key) +
		    1);
		ovl_buf_append(&W->json, t, strlen(t));
		/* the image goes in before the sequence's own members */
		wr = wds_rank(W, im->rank);
		if (!wr->open || wr->step != im->step) {
			wr->tar.len = 0;
			wr->step = im->step;
			wr->open = 1;
		}
		tar_member(&wr->tar, name, im->data, im->data_len);
	}
	W->nimg++;
	if (--W->due == 0)
		sample_end(W);
}

/* Rank rank's step is complete: its shard written whole (atomically). */
static void
wds_step(struct ckpt_run *R, void *state, const struct ovl_step *st,
    const struct ovl_frame *f)
{
	struct ckpt_wds *W = state;
	uint64_t step = st->step;
	uint32_t rank = st->rank;
	struct wds_rank *wr = wds_rank(W, rank);
	char *path;

	(void)f;
	if (!wr->open || wr->step != step) {
		wr->tar.len = 0;	/* a step without sequences: an empty shard */
		wr->step = step;
	}
	memset(ovl_buf_reserve(&wr->tar, 2 * TAR_BLOCK), 0, 2 * TAR_BLOCK);
	wr->tar.len += 2 * TAR_BLOCK;
	path = xasprintf("%s-r%05" PRIu32 "-s%08" PRIu64 ".tar", R->o->prefix,
	    rank, step);
	if (ovl_atomic_write(path, wr->tar.p, wr->tar.len) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot write '%s'", path);
	free(path);
	W->shards++;
	wr->open = 0;
	/* a buffer grown for large shards shrinks after 8 small ones */
	wr->calm = wr->tar.len <= (4u << 20) ? wr->calm + 1 : 0;
	wr->tar.len = 0;
	if (wr->calm >= 8)
		ovl_buf_trim(&wr->tar, 4u << 20);
}

static void *
wds_new(struct ckpt_run *R)
{
	char *dir = xasprintf("%s.", R->o->prefix), *slash;
	struct ckpt_wds *W = ovl_xcalloc(1, sizeof(*W));

	/* the prefix's directory is made, as the other formats do */
	slash = strrchr(dir, '/');
	if (slash != NULL) {
		*slash = '\0';
		if (ovl_mkdir_p(dir, 0777) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot create '%s'", dir);
	}
	free(dir);
	return W;
}

static void
wds_free(struct ckpt_run *R, void *state)
{
	struct ckpt_wds *W = state;
	size_t i;

	(void)R;
	if (W->shards > 0)
		ovl_info(1, "%" PRIu64 " samples in %" PRIu64 " WebDataset "
		    "shards", W->samples, W->shards);
	for (i = 0; i < W->nr; i++)
		ovl_buf_free(&W->r[i].tar);
	free(W->r);
	ovl_buf_free(&W->seq);
	ovl_buf_free(&W->json);
	ovl_buf_free(&W->scratch);
	ovl_u32vec_free(&W->pos);
	free(W);
}

/* The shard and key of a sequence, for its manifest line. */
static void
wds_manifest(const struct ckpt_run *R, void *state, const struct ovl_seq *s,
    struct ovl_buf *b)
{
	char t[96], *p;
	const char *base = strrchr(R->o->prefix, '/');
	uint64_t step = s->step;
	uint32_t rank = s->rank, mb = s->mb;

	(void)state;
	base = base != NULL ? base + 1 : R->o->prefix;
	p = xasprintf("%s-r%05" PRIu32 "-s%08" PRIu64 ".tar", base, rank,
	    step);
	ovl_buf_append(b, ",\"shard\":", 9);
	ovl_json_string_buf(b, p, strlen(p));
	free(p);
	key_of(t, sizeof(t), step, rank, mb);
	ovl_buf_append(b, ",\"key\":\"", 8);
	ovl_buf_append(b, t, strlen(t));
	ovl_buf_append(b, "\"", 1);
}

const struct ckpt_format ckpt_fmt_wds = {
	.tok16_vocab = 65536,
	.open = wds_new,
	.seq = wds_seq,
	.image = wds_image,
	.step_end = wds_step,
	.manifest = wds_manifest,
	.free = wds_free,
};
