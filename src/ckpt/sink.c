/*
 * ovl-ckpt: the committing sink. Reads the constructor's frames, writes
 * every SEQ to the outputs and commits a checkpoint at every BARRIER.
 */
#include "ckpt.h"
#include "committer.h"

/* ---- SEQ ---- */

static void
write_manifest(struct ckpt_run *R, const struct ovl_seq *s)
{
	struct ovl_buf *b = &R->scratch;
	struct ovl_piece pc;
	char t[256];
	const char *name, *file;
	uint64_t foff, flen;
	size_t i;

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
	for (i = 0; i < R->nact; i++)
		if (R->act[i].f->manifest != NULL)
			R->act[i].f->manifest(R, R->act[i].state, s, b);
	ovl_buf_append(b, "}\n", 2);
	out_put(R->man, b->p, b->len);
}

/* A frame as it came, to its rank's stream, within the run-ahead bound. */
static void
pass_frame(struct ckpt_run *R, const struct ovl_frame *f, uint32_t rank)
{
	struct out *o;

	if (R->o->per_rank != NULL) {
		o = rank_out(R, rank);
		out_run_ahead(o);
		out_frame(o, f);
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
		if (R->o->json)
			seq_json(R, R->std, &s);
		else
			out_frame(R->std, f);
	}
	pass_frame(R, f, s.rank);
	for (i = 0; i < R->nact; i++)
		if (R->act[i].f->seq != NULL)
			R->act[i].f->seq(R, R->act[i].state, &s, f);
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
	size_t i;

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
		} else
			out_frame(R->std, f);
	}
	pass_frame(R, f, im.rank);
	for (i = 0; i < R->nact; i++)
		if (R->act[i].f->image != NULL)
			R->act[i].f->image(R, R->act[i].state, &im, f);
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

/* What the formats derive from their outputs, written whole. */
static void
formats_end(struct ckpt_run *R)
{
	size_t i;

	for (i = 0; i < R->nact; i++)
		if (R->act[i].f->end != NULL)
			R->act[i].f->end(R, R->act[i].state);
}

/* Before the sink stops early: every output flushed, every commit durable. */
static void
flush_all(struct ckpt_run *R)
{
	size_t i;

	for (i = 0; i < R->nouts; i++)
		out_flush(R->outs[i]);
	formats_end(R);
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
	formats_end(R);
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
	R->idxpath = xasprintf("%s/" CKPT_INDEX, R->dir);
	R->committed = xasprintf("%s/" OVL_RELINK_COMMITTED, R->dir);
	read_log_tail(R->dir, &log);
	if (R->o->resume_auto)
		resume_decide(R, &log);
	if (!R->o->resume_set) {
		if (log.nrec > 0)
			ovl_errx(OVL_EXIT_USAGE, "'%s' already holds checkpoints: "
			    "resume with the options 'ovl-ckpt restore %s' "
			    "prints, or use a new directory", R->dir, R->dir);
		if (unlink(R->idxpath) != 0 && errno != ENOENT)
			ovl_err(OVL_EXIT_DATA, "cannot remove '%s'", R->idxpath);
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

		if (r < 0 && log.from > 0 && log.nrec > 0) {
			/* a checkpoint before the records read */
			(void)read_log_widen(R->dir, &log, 0);
			r = ovl_ckptlog_find(&log, R->o->resume);
		}
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

/* After the META: standard output or the formats' outputs, the manifest,
 * the rank streams. */
static void
open_outputs(struct ckpt_run *R)
{
	const struct ckpt_opts *o = R->o;
	const struct ckpt_format *f = o->format >= 0 ?
	    ckpt_formats[o->format] : NULL;
	size_t i;

	R->tok16 = R->have_vocab && R->vocab <= (f != NULL ? f->tok16_vocab :
	    65536);
	if (R->have_prev) {
		const char *t = ovl_kvsec_get(&R->prev.sec[OVL_SEC_CKPT],
		    "token-bits");
		if (t != NULL && strcmp(t, R->tok16 ? "16" : "32") != 0)
			ovl_errx(OVL_EXIT_USAGE, "the stream's vocabulary gives "
			    "%s-bit tokens, checkpoint %" PRIu64 " has %s-bit",
			    R->tok16 ? "16" : "32", R->last_n, t);
	}
	if (o->per_rank == NULL && o->format == FMT_NONE) {
		if (!o->json)
			ovl_io_refuse_tty(STDOUT_FILENO);
		R->std = out_add(R, "stdout", NULL, o->json ? OT_RAW : OT_FRAMES);
	}
	if (f != NULL) {
		R->act[R->nact].f = f;
		R->act[R->nact++].state = f->open(R);
	}
	if (o->manifest != NULL) {
		R->man = out_add(R, "manifest", o->manifest, OT_RAW);
	}
	if (o->per_rank != NULL) {
		uint32_t n = R->meta_ranks ? R->meta_ranks : o->plan_ranks;
		const struct ovl_kvsec *os = &R->prev.sec[OVL_SEC_OUT];
		char key[32];

		if (n > 0) {
			char what[64];

			snprintf(what, sizeof(what), "%" PRIu32 " per-rank "
			    "outputs", n);
			ovl_io_want_fds(n, what);
		}
		rank_streams(R, n);	/* every rank's socket at once */
		for (i = 0; i < n; i++)
			rank_out(R, (uint32_t)i);
		/* ranks the checkpoint had beyond those */
		for (i = n; R->have_prev && i < MAX_RANKS; i++) {
			snprintf(key, sizeof(key), "rank%zu", i);
			if (ovl_kvsec_find(os, key) < 0)
				break;
			rank_out(R, (uint32_t)i);
		}
	}
	if (R->have_prev) {	/* every output of the checkpoint must be ours */
		const struct ovl_kvsec *os = &R->prev.sec[OVL_SEC_OUT];
		size_t j;

		for (i = 0; i < os->n; i++) {
			if (strchr(os->kv[i].key, '.') != NULL)
				continue;
			for (j = 0; j < R->nouts; j++)
				if (strcmp(R->outs[j]->name, os->kv[i].key) == 0)
					break;
			if (j == R->nouts)
				ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64
				    " has output '%s' that this command line "
				    "does not write", R->last_n, os->kv[i].key);
		}
	}
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
	inputs_bind(R, text, len);
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

	for (r = 0; r < R->nrank; r++)
		if (R->rank[r] != NULL)
			out_frame(R->rank[r], f);
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
	struct out *targets[2];
	size_t i, n = 0;

	(void)ovl_step_decode(f, &st);	/* the reader checked it */
	/* a skipped step is skipped whole: its sequences and its end */
	if ((R->o->rank_set && st.rank != R->o->rank) || skipped(R, st.step))
		return;
	if (R->std != NULL && !R->o->json)
		targets[n++] = R->std;
	if (R->o->per_rank != NULL)
		targets[n++] = rank_out(R, st.rank);
	for (i = 0; i < R->nact; i++)
		if (R->act[i].f->step_end != NULL)
			R->act[i].f->step_end(R, R->act[i].state, &st, f);
	for (i = 0; i < n; i++) {
		out_frame(targets[i], f);
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
	for (i = 0; i < R->nact; i++)
		if (R->act[i].f->free != NULL)
			R->act[i].f->free(R, R->act[i].state);
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
	free(R->idxpath);
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
	sa.sa_handler = ckpt_on_term;
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
	committer_start(R.logfd, R.logend, R.have_last, R.committed,
	    R.idxpath);

	/*
	 * a SIGTERM while the input's endpoint waits for its writer, or an
	 * output for its peer, stops the sink
	 */
	ovl_net_set_stop(ckpt_stopping);
	if (ovl_net_redirect(o->input != NULL ? o->input : "-", OVL_NET_READ,
	    STDIN_FILENO, inname, sizeof(inname)) != 0)
		finish_stop(&R);
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
			if (ckpt_stopping()) {
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
			if (ckpt_stopping())
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

