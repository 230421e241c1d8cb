/*
 * ovl-ckpt: the table of output formats, indexed by the plan's names
 * (enum ovl_out_format). A format is a file (fmt-NAME.c) and a row here.
 */
#include "ckpt.h"

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
	return ovl_plan_choice(ovl_plan_out_formats, s);
}

char *
format_names(const char *sep, const char *last)
{
	struct ovl_buf b = { 0 };
	int i;

	for (i = 0; i < OVL_OUT_NFORMATS; i++) {
		if (i > 0) {
			const char *s = i + 1 == OVL_OUT_NFORMATS ? last : sep;

			ovl_buf_append(&b, s, strlen(s));
		}
		ovl_buf_append(&b, ovl_plan_out_formats[i],
		    strlen(ovl_plan_out_formats[i]));
	}
	ovl_buf_append(&b, "", 1);
	return (char *)b.p;
}
