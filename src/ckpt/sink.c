/*
 * ovl-ckpt: the committing sink. Reads the constructor's frames, writes
 * every SEQ to the outputs and commits a checkpoint at every BARRIER.
 */
#include "ckpt.h"
#include "committer.h"

static volatile sig_atomic_t stop_requested;

int
ckpt_stopping(void)
{
	return stop_requested;
}


static void
on_term(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* ---- SEQ ---- */

static char *
put_u64(char *p, uint64_t v)
{
	char t[24];
	int n = 0;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (n > 0)
		*p++ = t[--n];
	return p;
}

static void
json_array(struct ovl_buf *b, const char *key, const void *a, uint32_t width,
    size_t n)
{
	char *p;
	size_t i;

	p = (char *)ovl_buf_reserve(b, strlen(key) + 6 + n * 11);
	p += sprintf(p, ",\"%s\":[", key);
	for (i = 0; i < n; i++) {
		if (i > 0)
			*p++ = ',';
		p = put_u64(p, ovl_tok_at(a, width, i));
	}
	*p++ = ']';
	b->len = (size_t)(p - (char *)b->p);
}

static void
json_seq_head(struct ovl_buf *b, const struct ovl_seq *s, uint64_t index)
{
	char t[160];

	snprintf(t, sizeof(t), "{\"seq\":%" PRIu64 ",\"step\":%" PRIu64
	    ",\"rank\":%" PRIu32 ",\"mb\":%" PRIu32, index, s->step, s->rank,
	    s->mb);
	ovl_buf_append(b, t, strlen(t));
}

/*
 * The positions of s and their width: its own array, or (none sent,
 * ovl-frame(5) NOPOS) derived from cu_seqlens into a buffer of this file.
 */
static const void *
seq_positions(const struct ovl_seq *s, uint32_t *width)
{
	static struct ovl_u32vec derived;

	if (s->positions != NULL) {
		*width = s->pos_width;
		return s->positions;
	}
	derived.len = 0;
	ovl_seq_position_ids(s, ovl_u32vec_reserve(&derived, s->ntokens));
	*width = 4;
	return derived.p;
}

static void
write_jsonl(struct ckpt_run *R, struct out *o, const struct ovl_seq *s)
{
	const void *pos;
	uint32_t pw;
	struct ovl_buf *b = &R->scratch;

	b->len = 0;
	json_seq_head(b, s, R->nseqs);
	json_array(b, "tokens", s->tokens, s->width, s->ntokens);
	pos = seq_positions(s, &pw);
	json_array(b, "positions", pos, pw, s->ntokens);
	json_array(b, "cu_seqlens", s->cu_seqlens, 4, (size_t)s->npieces + 1);
	ovl_buf_append(b, "}\n", 2);
	out_put(o, b->p, b->len);
}

static void
write_manifest(struct ckpt_run *R, const struct ovl_seq *s)
{
	struct ovl_buf *b = &R->scratch;
	struct ovl_piece pc;
	char t[256];
	const char *name, *file;
	uint64_t foff, flen;
	uint32_t i;

	b->len = 0;
	json_seq_head(b, s, R->nseqs);
	ovl_buf_append(b, ",\"pieces\":[", 11);
	for (i = 0; i < s->npieces; i++) {
		ovl_seq_piece(s, i, &pc);
		name = pc.source < R->nsrc && R->srcname[pc.source] != NULL ?
		    R->srcname[pc.source] : NULL;
		if (i > 0)
			ovl_buf_append(b, ",", 1);
		snprintf(t, sizeof(t), "{\"source\":%" PRIu32, pc.source);
		ovl_buf_append(b, t, strlen(t));
		if (name != NULL) {	/* META names are [A-Za-z0-9_-] */
			snprintf(t, sizeof(t), ",\"name\":\"%s\"", name);
			ovl_buf_append(b, t, strlen(t));
		}
		snprintf(t, sizeof(t), ",\"epoch\":%" PRIu32 ",\"chunk\":%"
		    PRIu32 ",\"record\":%" PRIu64 ",\"mix_pos\":%" PRIu64
		    ",\"offset\":%" PRIu32 ",\"length\":%" PRIu32, pc.epoch,
		    pc.chunk, pc.record, pc.mix_pos, pc.offset, pc.length);
		ovl_buf_append(b, t, strlen(t));
		if (pc.nimages > 0) {
			snprintf(t, sizeof(t), ",\"images\":%" PRIu32,
			    pc.nimages);
			ovl_buf_append(b, t, strlen(t));
		}
		/* the file the piece's chunk is (and its byte range, if cut) */
		file = src_file(R, pc.source, pc.epoch, pc.chunk, &foff, &flen);
		if (file != NULL) {
			ovl_buf_append(b, ",\"file\":", 8);
			ovl_json_string_buf(b, file, strlen(file));
			if (flen != UINT64_MAX) {
				snprintf(t, sizeof(t), ",\"file_range\":[%" PRIu64
				    ",%" PRIu64 "]", foff, flen);
				ovl_buf_append(b, t, strlen(t));
			}
		}
		ovl_buf_append(b, "}", 1);
	}
	ovl_buf_append(b, "]", 1);
	if (R->wds != NULL)
		wds_shard_name(R, s->step, s->rank, s->mb, b);
	ovl_buf_append(b, "}\n", 2);
	out_put(R->man, b->p, b->len);
}

/*
 * The tokens of s into o, 16 or 32 bits as the output's (bits16), each at
 * most limit. A SEQ of the output's width goes out from the frame as it
 * is (16-bit ids always fit); otherwise one widening or narrowing pass.
 */
static void
write_tokens(struct ckpt_run *R, struct out *o, const struct ovl_seq *s,
    int bits16, uint32_t limit)
{
	uint32_t w = bits16 ? 2 : 4, max = 0;
	void *t;

	if (w == s->width) {
		if (w == 4 && limit < UINT32_MAX)
			max = ovl_tok_max(s->tokens, 4, s->ntokens);
		if (max <= limit) {
			out_put(o, s->tokens, (size_t)s->ntokens * w);
			return;
		}
	} else {
		R->scratch.len = 0;	/* storage from malloc: aligned */
		t = ovl_buf_reserve(&R->scratch, (size_t)s->ntokens * w);
		max = ovl_tok_copy(t, w, s->tokens, s->width, s->ntokens);
		if (max <= limit) {
			out_put(o, t, (size_t)s->ntokens * w);
			return;
		}
	}
	ovl_errx(OVL_EXIT_DATA, "SEQ of step %" PRIu64 " rank %" PRIu32
	    ": token id %" PRIu32 " does not fit %s (META vocab %" PRIu64
	    ")", s->step, s->rank, max, bits16 ? "uint16" : "int32",
	    R->vocab);
}

/* The positions of s as int32 (the npy output's). */
static void
write_positions(struct ckpt_run *R, struct out *o, const struct ovl_seq *s)
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

/* A frame as it came, to the frame output and to its rank's stream. */
static void
pass_frame(struct ckpt_run *R, const struct ovl_frame *f, uint32_t rank)
{
	if (R->frames != NULL) {
		out_put(R->frames, f->payload - OVL_FRAME_HDR_LEN, f->size);
		R->frames->nframes++;
	}
	if (R->o->per_rank != NULL) {
		struct out *o = rank_out(R, rank);

		out_put(o, f->payload - OVL_FRAME_HDR_LEN, f->size);
		o->nframes++;
	}
}

static void
on_seq(struct ckpt_run *R, const struct ovl_frame *f)
{
	struct ovl_seq s;
	size_t i;

	/* the reader checked it: rank below ranks, steps in order */
	(void)ovl_seq_decode(f, &s);
	R->seq_dropped = 1;
	if (R->o->rank_set && s.rank != R->o->rank)
		return;
	if (s.step + 1 != R->cur_step) {
		/* a step is complete: a trainer on a pipe gets it now */
		for (i = 0; i < R->nouts; i++)
			if (!R->outs[i]->regular)
				out_flush(R->outs[i]);
		R->cur_step = s.step + 1;
	}
	if (skipped(R, s.step)) {
		R->nskipped++;
		return;
	}
	R->seq_dropped = 0;
	if (R->std != NULL) {
		if (R->o->json) {
			const void *pos;
			uint32_t pw;

			R->scratch.len = 0;
			json_seq_head(&R->scratch, &s, R->nseqs);
			json_array(&R->scratch, "tokens", s.tokens, s.width,
			    s.ntokens);
			pos = seq_positions(&s, &pw);
			json_array(&R->scratch, "positions", pos, pw,
			    s.ntokens);
			json_array(&R->scratch, "cu_seqlens", s.cu_seqlens, 4,
			    (size_t)s.npieces + 1);
			ovl_buf_append(&R->scratch, "}\n", 2);
			out_put(R->std, R->scratch.p, R->scratch.len);
		} else {
			out_put(R->std, f->payload - OVL_FRAME_HDR_LEN, f->size);
			R->std->nframes++;
		}
	}
	pass_frame(R, f, s.rank);
	if (R->bin != NULL) {
		int32_t n = (int32_t)s.ntokens;

		write_tokens(R, R->bin, &s, R->tok16, R->tok16 ? 65535 :
		    INT32_MAX);
		out_put(R->sizes, &n, 4);
	}
	if (R->tok != NULL) {
		int64_t row[SEQS_COLS], c;
		uint64_t first = R->ncu - 1;

		write_tokens(R, R->tok, &s, R->tok16, R->tok16 ? 65535 :
		    UINT32_MAX);
		write_positions(R, R->pos, &s);
		row[0] = (int64_t)s.step;
		row[1] = s.rank;
		row[2] = s.mb;
		row[3] = (int64_t)((R->tok->len - NPY_HDR) / R->tok->itemsize) -
		    s.ntokens;
		row[4] = s.ntokens;
		row[5] = (int64_t)first;
		for (i = 1; i <= s.npieces; i++) {
			c = row[3] + s.cu_seqlens[i];
			out_put(R->cu, &c, 8);
			R->ncu++;
		}
		if (s.cu_seqlens[s.npieces] < s.ntokens) {	/* padding */
			c = row[3] + s.ntokens;
			out_put(R->cu, &c, 8);
			R->ncu++;
		}
		row[6] = (int64_t)(R->ncu - 1 - first);
		out_put(R->seqs, row, sizeof(row));
	}
	if (R->jsonl != NULL)
		write_jsonl(R, R->jsonl, &s);
	if (R->wds != NULL)
		wds_seq(R, &s, f);
	if (R->man != NULL)
		write_manifest(R, &s);
	R->nseqs++;
}

/*
 * An image of the SEQ before (ovl-frame(5) IMAGE): it goes where its
 * sequence went, right after it. Files of tokens (Megatron, npy, jsonl)
 * have no place for it; the manifest counts each piece's.
 */
static void
on_image(struct ckpt_run *R, const struct ovl_frame *f)
{
	struct ovl_image im;

	if (R->seq_dropped)
		return;
	(void)ovl_image_decode(f, &im);	/* the reader checked it */
	R->nimages++;
	if (R->std != NULL) {
		if (R->o->json) {
			struct ovl_buf *b = &R->scratch;
			char t[256];

			b->len = 0;
			snprintf(t, sizeof(t), "{\"image\":%" PRIu32 ",\"step\":%"
			    PRIu64 ",\"rank\":%" PRIu32 ",\"mb\":%" PRIu32
			    ",\"piece\":%" PRIu32 ",\"seq_pos\":%" PRIu32
			    ",\"ntokens\":%" PRIu32 ",\"length\":%" PRIu64
			    ",\"member\":", im.index, im.step, im.rank, im.mb,
			    im.piece, im.seq_pos, im.ntokens, im.length);
			ovl_buf_append(b, t, strlen(t));
			ovl_json_string_buf(b, im.name, im.name_len);
			ovl_buf_append(b, "}\n", 2);
			out_put(R->std, b->p, b->len);
		} else {
			out_put(R->std, f->payload - OVL_FRAME_HDR_LEN, f->size);
			R->std->nframes++;
		}
	}
	pass_frame(R, f, im.rank);
	if (R->wds != NULL)
		wds_image(R, &im);
}

/* ---- commits ---- */

static void
set_u64(struct ovl_kvsec *s, const char *key, uint64_t v)
{
	char t[32];

	snprintf(t, sizeof(t), "%" PRIu64, v);
	ovl_kvsec_set(s, key, t);
}

static void
build_state(struct ckpt_run *R, const struct ovl_barrier *b)
{
	struct ovl_kvsec *c = &R->cur.sec[OVL_SEC_CKPT];
	struct ovl_kvsec *os = &R->cur.sec[OVL_SEC_OUT];
	const struct ckpt_opts *o = R->o;
	char key[256], val[128];
	size_t i;

	ovl_kvsec_clear(c);
	ovl_kvsec_clear(os);
	set_u64(c, "step", b->step);
	/* where this log was written: a copy of the directory knows it is one */
	ovl_kvsec_set(c, "dir", R->dir);
	set_u64(c, "mix-pos", b->mix_pos);
	set_u64(c, "tokens", b->tokens);
	set_u64(c, "offset", b->offset);
	set_u64(c, "seqs", R->nseqs);
	set_u64(c, "skipped", R->nskipped);
	skips_format(R->skips, R->nskips, &R->scratch);
	ovl_kvsec_set(c, "skip-steps", (char *)R->scratch.p);
	ovl_kvsec_set(c, "format", fmt_label(o->format));
	if (o->rank_set)
		set_u64(c, "rank", o->rank);
	ovl_kvsec_set(c, "token-bits", R->tok16 ? "16" : "32");
	if (R->have_vocab)
		set_u64(c, "vocab", R->vocab);
	for (i = 0; i < R->nouts; i++) {
		struct out *x = R->outs[i];

		snprintf(key, sizeof(key), "%s.path", x->name);
		ovl_kvsec_set(os, key, x->path != NULL ? x->path : "-");
		snprintf(key, sizeof(key), "%s.type", x->name);
		snprintf(val, sizeof(val), "%s %s", type_name(x),
		    x->regular ? "file" : "stream");
		ovl_kvsec_set(os, key, val);
		snprintf(val, sizeof(val), "%" PRIu64 " %016" PRIx64 " %" PRIu64,
		    x->len, x->hash, x->nframes);
		ovl_kvsec_set(os, x->name, val);
	}
}


static void
append_record(struct ckpt_run *R, uint64_t n, unsigned flags)
{
	struct ovl_buf rec = { 0 };
	int base = !R->have_prev || R->since_base + 1 >= R->o->base_every;
	struct ovl_ckstate tmp;

	ovl_ckrec_encode(&rec, n, flags, base ? NULL : &R->prev, &R->cur);
	committer_push(R->logpath, rec.p, rec.len, n);
	R->logend += rec.len;
	R->since_base = base ? 0 : R->since_base + 1;
	ovl_info(1, "checkpoint %" PRIu64 ": %s record of %zu bytes", n,
	    base ? "base" : "diff", rec.len);
	ovl_buf_free(&rec);
	/* prev <- cur, keeping the storage of both */
	tmp = R->prev;
	R->prev = R->cur;
	R->cur = tmp;
	ovl_ckstate_copy(&R->cur, &R->prev);
	R->have_prev = 1;
	R->last_n = n;
	R->have_last = 1;
}

static void finish_idx(struct ckpt_run *R);

/* Before the sink stops early: every output flushed, every commit durable. */
static void
flush_all(struct ckpt_run *R)
{
	size_t i;

	for (i = 0; i < R->nouts; i++)
		out_flush(R->outs[i]);
	finish_idx(R);
	(void)committer_drain(R->logpath, 0);
	committer_join();
}

/*
 * The readers of rank streams ended right after a STEP frame (trainers
 * that finished): end at the checkpoint just committed, exit 0.
 */
static void
finish_by_readers(struct ckpt_run *R, int64_t step)
{
	flush_all(R);
	if (R->have_last)
		ovl_info(0, "stopped by the readers at step %" PRId64
		    " (checkpoint %" PRIu64 "; resume with the lines of "
		    "'ovl-ckpt restore %s')", step, R->last_n, R->dir);
	else
		ovl_info(0, "stopped by the readers at step %" PRId64
		    " (before the first checkpoint)", step);
	exit(OVL_EXIT_OK);
}

static void
commit(struct ckpt_run *R, const struct ovl_barrier *b)
{
	size_t i;

	if (!R->have_mix || R->mix_n != b->n)
		ovl_errx(OVL_EXIT_FRAME, "BARRIER %" PRIu64 " without the "
		    "STATE of mix before it", b->n);
	if (!R->have_con || R->con_n != b->n)
		ovl_errx(OVL_EXIT_FRAME, "BARRIER %" PRIu64 " without the "
		    "STATE of construct before it", b->n);
	for (i = 0; i < R->nouts; i++)
		out_commit(R->outs[i]);
	if (ovl_kvsec_parse(&R->cur.sec[OVL_SEC_MIX], (const char *)R->mixst.p,
	    R->mixst.len) != 0)
		ovl_errx(OVL_EXIT_FRAME, "STATE(mix, %" PRIu64 "): a line is "
		    "not \"key value\"", b->n);
	if (ovl_kvsec_parse(&R->cur.sec[OVL_SEC_CONSTRUCT],
	    (const char *)R->cst.p, R->cst.len) != 0)
		ovl_errx(OVL_EXIT_FRAME, "STATE(construct, %" PRIu64 "): a line "
		    "is not \"key value\"", b->n);
	build_state(R, b);
	append_record(R, b->n, 0);
	R->have_mix = R->have_con = 0;
	if (R->o->json && R->std != NULL) {
		char t[128];

		out_flush(R->std);
		snprintf(t, sizeof(t), "{\"checkpoint\":%" PRIu64 ",\"step\":%"
		    PRIu64 "}\n", b->n, b->step);
		out_put(R->std, t, strlen(t));
	}
	if (readers_stopped(R) >= 0)
		finish_by_readers(R, readers_stopped(R));
}

/*
 * The Megatron index from the sizes file, atomically, a block of sequences
 * at a time (issue 18: 20 bytes a sequence held whole grew ovl-ckpt with
 * the corpus).
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

void
write_idx(const char *sizes_path, uint64_t nseq, const char *idx_path,
    int tok16)
{
	struct idxgen g = { sizes_path, nseq, tok16 };

	if (ovl_atomic_write_gen(idx_path, idx_gen, &g) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot write '%s'", idx_path);
}

static void
finish_idx(struct ckpt_run *R)
{
	char *idx;

	if (R->bin == NULL)
		return;
	out_flush(R->sizes);
	idx = xasprintf("%s.idx", R->o->prefix);
	write_idx(R->sizes->path, R->sizes->len / 4, idx, R->tok16);
	free(idx);
}

static void
on_end(struct ckpt_run *R)
{
	struct ovl_barrier b;
	size_t i;
	uint8_t *p, fr[OVL_FRAME_HDR_LEN + OVL_END_LEN];

	for (i = 0; i < R->nouts; i++) {
		struct out *o = R->outs[i];

		if (o->type != OT_FRAMES)
			continue;
		memset(fr, 0, sizeof(fr));
		p = fr + OVL_FRAME_HDR_LEN;
		ovl_end_encode(p, o->nframes);
		ovl_frame_seal(fr, OVL_END, 0, OVL_END_LEN);
		out_put(o, fr, sizeof(fr));
	}
	memset(&b, 0, sizeof(b));
	{
		const struct ovl_kvsec *c = &R->prev.sec[OVL_SEC_CKPT];
		const char *v;

		if (R->have_prev && (v = ovl_kvsec_get(c, "step")) != NULL)
			(void)ovl_num_u64(v, &b.step);
	}
	b.n = R->have_last ? R->last_n + 1 : 1;
	for (i = 0; i < R->nouts; i++)
		out_commit(R->outs[i]);
	/* every byte reached its reader before the run is called done */
	for (i = 0; i < R->nouts; i++)
		if (!R->outs[i]->regular && R->outs[i]->path != NULL)
			fifo_drain(R, R->outs[i]);
	/* a reader that ended before the last step: not the end of the run */
	if (readers_stopped(R) >= 0)
		finish_by_readers(R, readers_stopped(R));
	finish_idx(R);
	build_state(R, &b);
	append_record(R, b.n, OVL_CKPTREC_END);
}

/* ---- the run ---- */

/*
 * --resume auto, under the directory's lock (no other sink can be
 * committing): resume after the last checkpoint, or start fresh when the
 * log holds none. Says which.
 */
static void
resume_decide(struct ckpt_run *R, const struct ovl_ckptlog *log)
{
	if (log->nrec == 0) {
		ovl_info(0, "'%s' holds no checkpoint: starting fresh", R->dir);
		return;
	}
	R->o->resume = log->rec[log->nrec - 1].n;
	R->o->resume_set = 1;
	ovl_info(0, "resuming after checkpoint %" PRIu64 " of '%s'",
	    R->o->resume, R->dir);
}

static void
open_log(struct ckpt_run *R)
{
	struct ovl_ckptlog log;
	uint8_t hdr[OVL_CKPTLOG_HDR_LEN];
	size_t i, b;

	R->logpath = xasprintf("%s/ckpt.log", R->dir);
	R->committed = xasprintf("%s/" OVL_RELINK_COMMITTED, R->dir);
	read_log(R->dir, &log);
	if (R->o->resume_auto)
		resume_decide(R, &log);
	if (!R->o->resume_set) {
		if (log.nrec > 0)
			ovl_errx(OVL_EXIT_USAGE, "'%s' already holds checkpoints: "
			    "resume with the options 'ovl-ckpt restore %s' "
			    "prints, or use a new directory", R->dir, R->dir);
		ovl_ckptlog_header(hdr);
		if (ovl_atomic_write(R->logpath, hdr, sizeof(hdr)) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot create '%s'", R->logpath);
		if (unlink(R->committed) != 0 && errno != ENOENT)
			ovl_err(OVL_EXIT_DATA, "cannot remove '%s'", R->committed);
		{	/* a fresh run has restored nothing yet */
			char *rl = xasprintf("%s/" RESTORES_LOG, R->dir);

			if (unlink(rl) != 0 && errno != ENOENT)
				ovl_err(OVL_EXIT_DATA, "cannot remove '%s'", rl);
			free(rl);
		}
		R->logend = sizeof(hdr);
	} else {
		long r = ovl_ckptlog_find(&log, R->o->resume);

		if (r < 0)
			ovl_errx(OVL_EXIT_USAGE, "no checkpoint %" PRIu64 " in '%s'",
			    R->o->resume, R->dir);
		i = (size_t)r;
		if (log.rec[i].flags & OVL_CKPTREC_END)
			ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64 " ends the "
			    "run: nothing to resume", R->o->resume);
		cut_log(R->dir, &log, i);
		if (ovl_link_set_committed(R->committed, log.rec[i].n) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot write '%s'", R->committed);
		log_state(R->dir, &log, i, &R->prev);
		R->have_prev = 1;
		R->last_n = log.rec[i].n;
		R->have_last = 1;
		R->logend = log.rec[i].offset + OVL_CKPTREC_HDR_LEN +
		    log.rec[i].len;
		for (b = i; log.rec[b].type != OVL_CKPTREC_BASE; b--)
			;
		R->since_base = i - b;
		ovl_ckstate_copy(&R->cur, &R->prev);
		{
			const struct ovl_kvsec *c = &R->prev.sec[OVL_SEC_CKPT];
			const char *v;
			struct skip sk[MAX_SKIPS];
			size_t nsk, k;

			if ((v = ovl_kvsec_get(c, "seqs")) != NULL)
				(void)ovl_num_u64(v, &R->nseqs);
			if ((v = ovl_kvsec_get(c, "skipped")) != NULL)
				(void)ovl_num_u64(v, &R->nskipped);
			if (skips_parse(ovl_kvsec_get(c, "skip-steps"), sk,
			    &nsk) != 0)
				ovl_errx(OVL_EXIT_FRAME, "checkpoint %" PRIu64
				    ": bad skip-steps", R->last_n);
			for (k = 0; k < nsk && R->nskips < MAX_SKIPS; k++)
				R->skips[R->nskips++] = sk[k];
			v = ovl_kvsec_get(c, "format");
			if (v != NULL && strcmp(v, fmt_label(R->o->format)) != 0)
				ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64
				    " wrote format %s, not %s", R->last_n, v,
				    fmt_label(R->o->format));
		}
	}
	ovl_ckptlog_free(&log);
	R->logfd = open(R->logpath, O_WRONLY | O_CLOEXEC);
	if (R->logfd < 0)
		ovl_err(OVL_EXIT_DATA, "cannot open '%s'", R->logpath);
}

static void
on_meta(struct ckpt_run *R, const struct ovl_frame *f)
{
	const char *text;
	uint32_t len;

	/* the reader checked it: the only one, first, with a vocab */
	(void)ovl_meta_decode(f, &text, &len);
	/* where the stream resumed is not the outputs' business */
	ovl_meta_frame_without(f, "resumed", &R->meta);
	R->have_meta = 1;
	meta_parse(R, text, len);
	open_outputs(R);
}

/*
 * Checkpoint boundaries in every rank's stream: the BARRIER frame goes to
 * each rank stream opened so far, before the commit, so it is part of the
 * committed bytes (a resumed run continues after it).
 */
static void
mark_barrier(struct ckpt_run *R, const struct ovl_frame *f)
{
	size_t r;

	for (r = 0; r < R->nrank; r++) {
		if (R->rank[r] == NULL)
			continue;
		out_put(R->rank[r], f->payload - OVL_FRAME_HDR_LEN, f->size);
		R->rank[r]->nframes++;
	}
}

/*
 * A rank's step is complete: the STEP frame goes to that rank's stream and
 * to the frame streams, and streams are flushed (a trainer gets the step
 * now, an empty one too).
 */
static void
on_step(struct ckpt_run *R, const struct ovl_frame *f)
{
	struct ovl_step st;
	struct out *targets[3];
	size_t i, n = 0;

	(void)ovl_step_decode(f, &st);	/* the reader checked it */
	/* a skipped step is skipped whole: its sequences and its end */
	if ((R->o->rank_set && st.rank != R->o->rank) || skipped(R, st.step))
		return;
	if (R->std != NULL && !R->o->json)
		targets[n++] = R->std;
	if (R->frames != NULL)
		targets[n++] = R->frames;
	if (R->o->per_rank != NULL)
		targets[n++] = rank_out(R, st.rank);
	if (R->wds != NULL)
		wds_step(R, st.step, st.rank);
	for (i = 0; i < n; i++) {
		out_put(targets[i], f->payload - OVL_FRAME_HDR_LEN, f->size);
		targets[i]->nframes++;
		if (!targets[i]->regular)
			out_flush(targets[i]);
		out_step_end(targets[i], st.step);
	}
}

static void
on_state(struct ckpt_run *R, const struct ovl_frame *f)
{
	struct ovl_state s;
	struct ovl_buf *b;

	if (ovl_state_decode(f, &s) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "malformed STATE frame");
	if (R->have_last && s.n <= R->last_n)
		ovl_errx(OVL_EXIT_FRAME, "STATE for checkpoint %" PRIu64 " after "
		    "checkpoint %" PRIu64 ": the pipeline does not resume where "
		    "ovl-ckpt does", s.n, R->last_n);
	if (s.stage == OVL_STAGE_MIX) {
		b = &R->mixst;
		R->have_mix = 1;
		R->mix_n = s.n;
	} else if (s.stage == OVL_STAGE_CONSTRUCT) {
		b = &R->cst;
		R->have_con = 1;
		R->con_n = s.n;
	} else
		return;
	b->len = 0;
	ovl_buf_append(b, s.text, s.text_len);
}

static void
finish_stop(struct ckpt_run *R)
{
	flush_all(R);
	ovl_info(0, "stopped at checkpoint %" PRIu64 "; resume with the "
	    "lines of 'ovl-ckpt restore %s'", R->last_n, R->dir);
	exit(EXIT_STOPPED);
}

static void
run_free(struct ckpt_run *R)
{
	size_t i;

	for (i = 0; i < R->nouts; i++) {
		struct out *o = R->outs[i];

		if (o->path != NULL && o->fd >= 0 && close(o->fd) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot close '%s'", o->path);
		free(o->name);
		free(o->path);
		free(o->peer);
		free(o->ends);
		free(o->endstep);
		ovl_buf_free(&o->buf);
		free(o);
	}
	free(R->outs);
	free(R->rank);
	for (i = 0; i < R->npre; i++) {
		if (R->pre_fd[i] >= 0)
			close(R->pre_fd[i]);
		free(R->pre_peer[i]);
	}
	free(R->pre_fd);
	free(R->pre_peer);
	srcfiles_free(R);
	wds_free(R);
	for (i = 0; i < R->nsrc; i++)
		free(R->srcname[i]);
	free(R->srcname);
	ovl_ckstate_clear(&R->prev);
	ovl_ckstate_clear(&R->cur);
	ovl_buf_free(&R->meta);
	ovl_buf_free(&R->mixst);
	ovl_buf_free(&R->cst);
	ovl_buf_free(&R->scratch);
	if (R->logfd >= 0)
		close(R->logfd);
	free(R->logpath);
	free(R->committed);
	free(R->dir);
}

/* The frames that need nothing but their handler (the reader admits only
 * the kinds of a stream of sequences). */
static void (*const on_kind[])(struct ckpt_run *, const struct ovl_frame *) = {
	[OVL_META] = on_meta,
	[OVL_SEQ] = on_seq,
	[OVL_STATE] = on_state,
	[OVL_STEP] = on_step,
	[OVL_IMAGE] = on_image,
};

int
run(struct ckpt_opts *o)
{
	struct ckpt_run R;
	char inname[512];
	struct ovl_reader *rd;
	struct ovl_frame f;
	struct sigaction sa;
	int rc;

	memset(&R, 0, sizeof(R));
	R.o = o;
	if (ovl_mkdir_p(o->dir, 0777) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot create '%s'", o->dir);
	R.dir = realpath(o->dir, NULL);
	if (R.dir == NULL)
		ovl_err(OVL_EXIT_DATA, "cannot resolve '%s'", o->dir);
	(void)lock_dir(R.dir);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	/* a reader that goes away is a write error (EPIPE), said by name */
	signal(SIGPIPE, SIG_IGN);
	if (o->readers_file != NULL) {
		/* a SIGTERM while waiting for the readers stops the sink */
		ovl_net_set_stop(ckpt_stopping);
		ask_readers(&R);
		ovl_net_set_stop(NULL);
	}
	for (rc = 0; rc < o->nskip; rc++) {
		R.skips[R.nskips].a = o->skip[0];
		R.skips[R.nskips++].b = o->skip[1];
	}
	open_log(&R);
	committer_start(R.logfd, R.logend, R.have_last, R.committed);

	ovl_net_redirect(o->input != NULL ? o->input : "-", OVL_NET_READ,
	    STDIN_FILENO, inname, sizeof(inname));
	/* a SIGTERM while an output waits for its peer stops the sink */
	ovl_net_set_stop(ckpt_stopping);
	rd = ovl_reader_new(STDIN_FILENO, inname, 0);
	ovl_reader_expect(rd, &(struct ovl_expect){ .meta_keys = "vocab",
	    .kinds = 1u << OVL_SEQ | 1u << OVL_BARRIER | 1u << OVL_STATE |
	    1u << OVL_STEP | 1u << OVL_IMAGE,
	    .what = "a stream of sequences", .checks = OVL_EXPECT_SEQ,
	    .ranks = o->plan_ranks });
	R.rd = rd;
	if (o->relink.relink) {
		ovl_reader_relink(rd);
		ovl_link_set_stop(ckpt_stopping);
	}
	/* a stream that starts before the checkpoint is read from it on */
	if (R.have_last)
		ovl_reader_resume_at(rd, R.last_n);
	for (;;) {
		rc = ovl_reader_next(rd, &f);
		if (rc < 0) {
			if (stop_requested) {
				ovl_warnx("%s", ovl_reader_error(rd));
				finish_stop(&R);
			}
			/* what was committed before stays committed */
			(void)committer_drain(R.logpath, 1);
			ovl_reader_die(rd);
		}
		if (rc == OVL_RD_EOF)
			break;
		if (f.kind < sizeof(on_kind) / sizeof(on_kind[0]) &&
		    on_kind[f.kind] != NULL) {
			on_kind[f.kind](&R, &f);
			continue;
		}
		switch (f.kind) {
		case OVL_BARRIER:
			(void)ovl_barrier_decode(&f, &R.bar);	/* the reader checked it */
			mark_barrier(&R, &f);
			commit(&R, &R.bar);
			if (stop_requested)
				finish_stop(&R);
			break;
		case OVL_END:
			on_end(&R);
			break;
		}
	}
	ovl_reader_free(rd);
	(void)committer_drain(R.logpath, 0);
	committer_join();
	ovl_info(1, "%" PRIu64 " sequences written, %" PRIu64 " skipped",
	    R.nseqs, R.nskipped);
	if (R.nimages > 0)
		ovl_info(1, "%" PRIu64 " images written", R.nimages);
	if (R.std != NULL && R.std->fd == STDOUT_FILENO)
		ovl_io_close_stdout();
	run_free(&R);
	return OVL_EXIT_OK;
}

