/*
 * ovl-ckpt: the table of output formats, indexed by the plan's names
 * (enum ovl_out_format). A format is a file (fmt-NAME.c) and a row here.
 */
#include "ckpt.h"

extern const struct ckpt_format ckpt_fmt_megatron, ckpt_fmt_npy,
	ckpt_fmt_jsonl, ckpt_fmt_frames, ckpt_fmt_wds;

const struct ckpt_format *const ckpt_formats[] = {
	[OVL_OUT_MEGATRON] = &ckpt_fmt_megatron,
	[OVL_OUT_NPY] = &ckpt_fmt_npy,
	[OVL_OUT_JSONL] = &ckpt_fmt_jsonl,
	[OVL_OUT_FRAMES] = &ckpt_fmt_frames,
	[OVL_OUT_WDS] = &ckpt_fmt_wds,
};
_Static_assert(sizeof(ckpt_formats) / sizeof(ckpt_formats[0]) ==
    OVL_OUT_NFORMATS, "a row per output format of the plan");

const char *
fmt_label(int f)
{
	return f < 0 || f >= OVL_OUT_NFORMATS ? "none" :
	    ovl_plan_out_formats[f];
}

int
parse_format(const char *s)
{
	return ovl_cli_choice(ovl_plan_out_formats, s);
}
