/*
 * ovl-ckpt --format frames: one frame stream of every rank (ovl-frame(5)):
 * the META, each SEQ, IMAGE and STEP as it came, END; a file, a FIFO or
 * an endpoint (a stream, not a file, is flushed at every step end).
 */
#include "ckpt.h"

static void *
frames_open(struct ckpt_run *R)
{
	return out_add(R, "frames", R->o->prefix, OT_FRAMES);
}

static void
frames_seq(struct ckpt_run *R, void *state, const struct ovl_seq *s,
    const struct ovl_frame *f)
{
	(void)R;
	(void)s;
	out_frame(state, f);
}

static void
frames_image(struct ckpt_run *R, void *state, const struct ovl_image *im,
    const struct ovl_frame *f)
{
	(void)R;
	(void)im;
	out_frame(state, f);
}

static void
frames_step_end(struct ckpt_run *R, void *state, const struct ovl_step *st,
    const struct ovl_frame *f)
{
	struct out *o = state;

	(void)R;
	out_frame(o, f);
	if (!o->regular)
		out_flush(o);
	out_step_end(o, st->step);
}

const struct ckpt_format ckpt_fmt_frames = {
	.flags = CKPT_FMT_STREAM,
	.tok16_vocab = 65536,
	.open = frames_open,
	.seq = frames_seq,
	.image = frames_image,
	.step_end = frames_step_end,
};
