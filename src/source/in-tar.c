/*
 * ovl-source --format tar and wds: a chunk is a tar file whose member
 * groups (lib/wds.c) are the records; a WebDataset sample may carry
 * images (--image-cost).
 */
#include "source.h"

static void
tar_doc(void *arg, const struct ovl_wds_group *g)
{
	struct src *s = arg;
	struct rec rc;

	memset(&rc, 0, sizeof(rc));
	rc.start_off = g->index;
	rc.next_off = g->index + 1;
	rc.index = g->record;
	rc.nimages = g->nimages;
	rc.images = g->images;
	rc.image_data = g->image_data;
	rc.member = g->member;
	if (!images_fit(s, &rc))
		return;
	if (s->o->field_set && s->o->format == FMT_WDS && ovl_wds_ends_with(
	    g->member, ".json"))
		wds_json_record(s, &rc, g->text, g->len);
	else
		record(s, &rc, g->text, g->len);
}

static void
tar_bad(void *arg, int what, uint64_t index, const char *member,
    const char *msg)
{
	struct src *s = arg;
	struct rec rr;

	memset(&rr, 0, sizeof(rr));
	rr.start_off = index;
	rr.member = member;
	bad(s, what == OVL_WDS_DUP ? R_DUP : what == OVL_WDS_TOOLONG ?
	    R_TOOLONG : what == OVL_WDS_IMAGE ? R_IMAGE : R_INPUT, &rr, "%s",
	    msg);
}

static uint64_t
run_tar(struct src *s, uint64_t g0, uint64_t rec0)
{
	const struct src_opts *o = s->o;
	struct ovl_wds_opts wo = { o->format == FMT_WDS, o->ext,
	    (size_t)o->next, o->max_doc, o->image_cost.kind != 0,
	    o->image_cost.kind != 0 && o->images == IMG_INLINE };
	struct ovl_wds_cb cb = { tar_doc, tar_bad, s };
	struct ovl_wds_result res;
	struct ovl_input in;

	if (ovl_input_open(&s->inx, &in, s->cx.c, s->cx.path, 1,
	    ovl_chunks_file(&s->cs, s->cx.ci)) != 0) {
		bad(s, in.unopened ? R_OPEN : R_INPUT, NULL, "%s", in.err);
		ovl_input_close(&in);
		return 0;
	}
	ovl_wds_read(in.a, &wo, g0, rec0, &s->doc, &cb, &res);
	s->no_text_groups += res.no_text;
	ovl_input_close(&in);
	if (!res.failed && g0 > res.groups)
		resume_error(s, g0, "is beyond the last member group");
	return res.bytes;
}

static const char *const tar_exts[] = { ".tar", ".tgz", NULL };

const struct src_format src_fmt_tar = {
	.exts = tar_exts,
	.run = run_tar,
};

const struct src_format src_fmt_wds = {
	.flags = SRC_FMT_IMAGES,
	.run = run_tar,
};
