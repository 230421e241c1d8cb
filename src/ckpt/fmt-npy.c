/*
 * ovl-ckpt --format npy: four arrays under the prefix, their npy headers
 * rewritten at every commit: PREFIX.tokens.npy (uint16 up to 65536 ids in
 * the vocabulary, else uint32), PREFIX.positions.npy (int32),
 * PREFIX.cu_seqlens.npy (int64, the pieces' bounds over all tokens, from 0)
 * and PREFIX.seqs.npy (int64, SEQS_COLS columns a sequence: step, rank,
 * micro-batch, first token, tokens, first cu_seqlens entry, pieces).
 *
 * A stream of a plan with cp (its META's cp and cp-pad, cp.h) adds two:
 * PREFIX.cu_seqlens_padded.npy (int64, entry for entry with cu_seqlens:
 * the same bounds in the padded layout, every sequence laid out padded
 * one after the other, from 0; a sequence's last bound is its padded end)
 * and PREFIX.max_seqlen.npy (int64, one a sequence); one of cp-balance
 * hybrid two more, int64, one a sequence: PREFIX.local_cp_size.npy (its
 * CP size, the one its padded layout is made with) and
 * PREFIX.cp_first.npy (the first CP rank of its group), from its flags
 * word (cp.h).
 */
#include "ckpt.h"

#include "cp.h"

enum { NPY_TOKENS, NPY_POSITIONS, NPY_CU, NPY_SEQS, NPY_CUP, NPY_MAXSEQ,
	NPY_LCP, NPY_CPFIRST, NPY_NOUTS };

/*
 * The arrays: output name (and file suffix), dtype, item size, columns,
 * and which streams have it: 0 all, 1 those with cp, 2 hybrid ones.
 */
static const struct {
	const char	*name;
	const char	*descr, *descr16;	/* descr16: with 16-bit tokens */
	uint32_t	 itemsize, itemsize16, cols;
	int		 cp;
} arrays[NPY_NOUTS] = {
	[NPY_TOKENS] = { "tokens", "<u4", "<u2", 4, 2, 1, 0 },
	[NPY_POSITIONS] = { "positions", "<i4", "<i4", 4, 4, 1, 0 },
	[NPY_CU] = { "cu_seqlens", "<i8", "<i8", 8, 8, 1, 0 },
	[NPY_SEQS] = { "seqs", "<i8", "<i8", 8, 8, SEQS_COLS, 0 },
	[NPY_CUP] = { "cu_seqlens_padded", "<i8", "<i8", 8, 8, 1, 1 },
	[NPY_MAXSEQ] = { "max_seqlen", "<i8", "<i8", 8, 8, 1, 1 },
	[NPY_LCP] = { "local_cp_size", "<i8", "<i8", 8, 8, 1, 2 },
	[NPY_CPFIRST] = { "cp_first", "<i8", "<i8", 8, 8, 1, 2 },
};

struct npy {
	struct out	*o[NPY_NOUTS];	/* NULL: not written (cp) */
	uint64_t	 ncu;		/* entries of cu_seqlens */
	int64_t		 pend;		/* cp: the padded layout's end */
	struct ovl_u32vec cup;		/* cp: a sequence's padded bounds */
};

static void
npy_shape(struct out *o, int a, int tok16)
{
	o->descr = tok16 ? arrays[a].descr16 : arrays[a].descr;
	o->itemsize = tok16 ? arrays[a].itemsize16 : arrays[a].itemsize;
	o->cols = arrays[a].cols;
}

static void *
npy_open(struct ckpt_run *R)
{
	struct npy *N = ovl_xcalloc(1, sizeof(*N));
	char *p;
	int a;

	for (a = 0; a < NPY_NOUTS; a++) {
		if ((arrays[a].cp == 1 && R->cp == 0) ||
		    (arrays[a].cp == 2 && !R->cp_hybrid))
			continue;
		p = xasprintf("%s.%s.npy", R->o->prefix, arrays[a].name);
		N->o[a] = out_new(R, arrays[a].name, p, OT_NPY);
		free(p);
		npy_shape(N->o[a], a, R->tok16);
	}
	for (a = 0; a < NPY_NOUTS; a++) {
		if (N->o[a] == NULL)
			continue;
		out_open(R, N->o[a]);
		if ((a == NPY_CU || a == NPY_CUP) && N->o[a]->fresh) {
			int64_t zero = 0;	/* cu_seqlens starts at 0 */

			out_put(N->o[a], &zero, sizeof(zero));
		}
	}
	N->ncu = (N->o[NPY_CU]->len - NPY_HDR) / 8;
	if (N->o[NPY_CUP] != NULL) {
		struct out *o = N->o[NPY_CUP];

		/* a resumed run goes on from the last bound written */
		if (o->len > NPY_HDR && !o->fresh && pread(o->fd, &N->pend,
		    8, (off_t)(o->len - 8)) != 8)
			ovl_err(OVL_EXIT_DATA, "cannot read '%s'", o->path);
	}
	return N;
}

/*
 * cp: s's bounds in the padded layout, entry for entry with the
 * cu_seqlens entries npy_seq wrote (ends, the padding's last), and its
 * max_seqlen.
 */
static void
put_padded(struct npy *N, const struct ckpt_run *R, const struct ovl_seq *s)
{
	uint32_t np = s->npieces, real = s->cu_seqlens[np], i, *b;
	uint32_t k = ovl_cp_seq_size(R->cp, R->cp_hybrid, s->flags);
	int64_t m, v, end, g;

	N->cup.len = 0;
	b = ovl_u32vec_reserve(&N->cup, (size_t)np + 1);
	m = ovl_cp_layout(k, R->cp_pad, s->cu_seqlens, np, s->ntokens, b);
	g = 2 * (int64_t)k;
	end = R->cp_pad == OVL_CP_PAD_DOCUMENT ? (int64_t)b[np] +
	    (s->ntokens - real) : R->cp_pad == OVL_CP_PAD_SEQUENCE ?
	    ((int64_t)s->ntokens + g - 1) / g * g : (int64_t)s->ntokens;
	for (i = 1; i <= np; i++) {
		v = b[i];
		if (i == np && real < s->ntokens)
			v = R->cp_pad == OVL_CP_PAD_DOCUMENT ? b[i] : real;
		v += N->pend;
		out_put(N->o[NPY_CUP], &v, 8);
	}
	if (real < s->ntokens) {
		v = N->pend + end;
		out_put(N->o[NPY_CUP], &v, 8);
	}
	N->pend += end;
	out_put(N->o[NPY_MAXSEQ], &m, 8);
	if (N->o[NPY_LCP] != NULL) {
		v = OVL_CP_GROUP_SIZE(s->flags);
		out_put(N->o[NPY_LCP], &v, 8);
		v = OVL_CP_GROUP_FIRST(s->flags);
		out_put(N->o[NPY_CPFIRST], &v, 8);
	}
}

static void
npy_free(struct ckpt_run *R, void *state)
{
	struct npy *N = state;

	if (N != NULL)
		ovl_u32vec_free(&N->cup);
	fmt_free_state(R, state);
}

/* The positions of s as int32. */
static void
put_positions(struct ckpt_run *R, struct out *o, const struct ovl_seq *s)
{
	void *t;

	if (s->pos_width == 4) {
		out_put(o, s->positions, (size_t)s->ntokens * 4);
		return;
	}
	R->scratch.len = 0;
	t = ovl_buf_reserve(&R->scratch, (size_t)s->ntokens * 4);
	ovl_seq_position_ids(s, t);
	out_put(o, t, (size_t)s->ntokens * 4);
}

static void
npy_seq(struct ckpt_run *R, void *state, const struct ovl_seq *s,
    const struct ovl_frame *f)
{
	struct npy *N = state;
	struct out *tok = N->o[NPY_TOKENS], *cu = N->o[NPY_CU];
	int64_t row[SEQS_COLS], c;
	uint64_t first = N->ncu - 1;
	uint32_t i;

	(void)f;
	out_tokens(R, tok, s, R->tok16, R->tok16 ? 65535 : UINT32_MAX);
	put_positions(R, N->o[NPY_POSITIONS], s);
	row[0] = (int64_t)s->step;
	row[1] = s->rank;
	row[2] = s->mb;
	row[3] = (int64_t)((tok->len - NPY_HDR) / tok->itemsize) - s->ntokens;
	row[4] = s->ntokens;
	row[5] = (int64_t)first;
	for (i = 1; i <= s->npieces; i++) {
		c = row[3] + s->cu_seqlens[i];
		out_put(cu, &c, 8);
		N->ncu++;
	}
	if (s->cu_seqlens[s->npieces] < s->ntokens) {	/* padding */
		c = row[3] + s->ntokens;
		out_put(cu, &c, 8);
		N->ncu++;
	}
	row[6] = (int64_t)(N->ncu - 1 - first);
	out_put(N->o[NPY_SEQS], row, sizeof(row));
	if (N->o[NPY_CUP] != NULL)
		put_padded(N, R, s);
}

/* The headers of the arrays cut back to checkpoint n, for their lengths. */
static void
npy_restore(const struct ovl_ckstate *st, uint64_t n)
{
	const char *bits = ovl_kvsec_get(&st->sec[OVL_SEC_CKPT], "token-bits");
	struct outrec r;
	struct out o;
	int a;

	(void)n;
	for (a = 0; a < NPY_NOUTS; a++) {
		if (out_lookup(st, arrays[a].name, &r) != 0 || !r.file ||
		    r.type != OT_NPY)
			continue;
		memset(&o, 0, sizeof(o));
		o.fd = open(r.path, O_RDWR | O_CLOEXEC);
		if (o.fd < 0)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", r.path);
		o.path = (char *)r.path;
		o.len = r.len;
		o.hdr = NPY_HDR;
		npy_shape(&o, a, bits != NULL && strcmp(bits, "16") == 0);
		npy_rewrite(&o);
		if (fsync(o.fd) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot sync '%s'", r.path);
		close(o.fd);
	}
}

const struct ckpt_format ckpt_fmt_npy = {
	.tok16_vocab = 65536,
	.open = npy_open,
	.seq = npy_seq,
	.restore = npy_restore,
	.free = npy_free,
};
