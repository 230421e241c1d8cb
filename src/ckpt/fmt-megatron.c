/*
 * ovl-ckpt --format megatron: PREFIX.bin, the tokens of every sequence
 * (uint16 below 65500 ids in the vocabulary, else int32), and PREFIX.idx,
 * Megatron's MMIDIDX index, written whole from the sizes file
 * (CKPTDIR/megatron.sizes, an int32 per sequence) whenever the sink stops
 * and when a checkpoint is restored.
 */
#include "ckpt.h"

struct megatron {
	struct out	*bin, *sizes;
};

/*
 * The Megatron index from the sizes file, written whole (atomically), a
 * block of sequences at a time: memory does not grow with the corpus.
 */
struct idxgen {
	const char	*sizes_path;
	uint64_t	 nseq;
	int		 tok16;
};

#define IDX_BLOCK	8192	/* sequences per read and write */

static int
idx_gen(int fd, void *arg)
{
	const struct idxgen *g = arg;
	uint8_t hdr[34], *in = ovl_xmalloc(IDX_BLOCK * 4);
	uint8_t *out = ovl_xmalloc(IDX_BLOCK * 8);
	uint64_t i, j, k, ptr = 0;
	int pass, sfd, rc = -1;

	memcpy(hdr, "MMIDIDX\x00\x00", 9);
	ovl_put64(hdr + 9, 1);
	hdr[17] = g->tok16 ? 8 : 4;	/* numpy uint16 : int32 */
	ovl_put64(hdr + 18, g->nseq);
	ovl_put64(hdr + 26, g->nseq + 1);
	if (ovl_io_write_full(fd, hdr, sizeof(hdr)) != 0)
		goto out;
	/* int32 sizes straight from the sizes file, then int64 pointers */
	for (pass = 0; pass < 2; pass++) {
		sfd = open(g->sizes_path, O_RDONLY | O_CLOEXEC);
		for (i = 0; i < g->nseq; i += k) {
			k = g->nseq - i < IDX_BLOCK ? g->nseq - i : IDX_BLOCK;
			if (sfd < 0 || ovl_io_read_full(sfd, in, k * 4) !=
			    (ssize_t)(k * 4))
				ovl_err(OVL_EXIT_DATA, "cannot read %" PRIu64
				    " sizes from '%s'", g->nseq, g->sizes_path);
			if (pass == 0) {
				if (ovl_io_write_full(fd, in, k * 4) != 0)
					goto out_sfd;
				continue;
			}
			for (j = 0; j < k; j++) {
				ovl_put64(out + j * 8, ptr);
				ptr += (uint64_t)ovl_le32(in + j * 4) *
				    (g->tok16 ? 2 : 4);
			}
			if (ovl_io_write_full(fd, out, k * 8) != 0)
				goto out_sfd;
		}
		if (sfd >= 0)
			close(sfd);
	}
	/* int64 document index: 0..nseq */
	for (i = 0; i <= g->nseq; i += k) {
		k = g->nseq + 1 - i < IDX_BLOCK ? g->nseq + 1 - i : IDX_BLOCK;
		for (j = 0; j < k; j++)
			ovl_put64(out + j * 8, i + j);
		if (ovl_io_write_full(fd, out, k * 8) != 0)
			goto out;
	}
	rc = 0;
	goto out;
out_sfd:
	close(sfd);
out:
	free(in);
	free(out);
	return rc;
}

static void
write_idx(const char *sizes_path, uint64_t nseq, const char *idx_path,
    int tok16)
{
	struct idxgen g = { sizes_path, nseq, tok16 };

	if (ovl_atomic_write_gen(idx_path, idx_gen, &g) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot write '%s'", idx_path);
}

static void *
megatron_open(struct ckpt_run *R)
{
	struct megatron *M = ovl_xcalloc(1, sizeof(*M));
	char *p;

	p = xasprintf("%s.bin", R->o->prefix);
	M->bin = out_add(R, "bin", p, OT_RAW);
	free(p);
	p = xasprintf("%s/megatron.sizes", R->dir);
	M->sizes = out_add(R, "sizes", p, OT_RAW);
	free(p);
	return M;
}

static void
megatron_seq(struct ckpt_run *R, void *state, const struct ovl_seq *s,
    const struct ovl_frame *f)
{
	struct megatron *M = state;
	int32_t n = (int32_t)s->ntokens;

	(void)f;
	out_tokens(R, M->bin, s, R->tok16, R->tok16 ? 65535 : INT32_MAX);
	out_put(M->sizes, &n, 4);
}

static void
megatron_end(struct ckpt_run *R, void *state)
{
	struct megatron *M = state;
	char *idx;

	out_flush(M->sizes);
	idx = xasprintf("%s.idx", R->o->prefix);
	write_idx(M->sizes->path, M->sizes->len / 4, idx, R->tok16);
	free(idx);
}

/* PREFIX.idx again, for the sizes of checkpoint n. */
static void
megatron_restore(const struct ovl_ckstate *st, uint64_t n)
{
	struct outrec bin, sizes;
	const char *v;
	char *idx;

	(void)n;
	if (out_lookup(st, "bin", &bin) != 0 || out_lookup(st, "sizes",
	    &sizes) != 0 || !bin.file || !sizes.file || strlen(bin.path) <= 4)
		return;
	v = ovl_kvsec_get(&st->sec[OVL_SEC_CKPT], "token-bits");
	idx = xasprintf("%.*s.idx", (int)(strlen(bin.path) - 4), bin.path);
	write_idx(sizes.path, sizes.len / 4, idx, v != NULL &&
	    strcmp(v, "16") == 0);
	free(idx);
}

const struct ckpt_format ckpt_fmt_megatron = {
	.tok16_vocab = 65499,
	.open = megatron_open,
	.seq = megatron_seq,
	.end = megatron_end,
	.restore = megatron_restore,
	.free = fmt_free_state,
};
