/*
 * wds: documents of a tar archive, one per member group (see wds.h).
 */
#include "wds.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <archive_entry.h>

#include "image.h"
#include "input.h"

int
ovl_wds_ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && strcmp(s + n - m, suf) == 0;
}

static int
is_text_member(const struct ovl_wds_opts *o, const char *name)
{
	size_t i;

	if (o->next == 0)
		return o->wds ? ovl_wds_ends_with(name, ".txt") : 1;
	for (i = 0; i < o->next; i++)
		if (ovl_wds_ends_with(name, o->ext[i]))
			return 1;
	return 0;
}

static int
is_image(const char *name)
{
	static const char *const exts[] = { ".jpg", ".jpeg", ".png", ".webp",
	    ".gif", ".bmp", ".tif", ".tiff" };
	size_t n = strlen(name), i;

	for (i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		size_t m = strlen(exts[i]);
		if (n >= m && strcasecmp(name + n - m, exts[i]) == 0)
			return 1;
	}
	return 0;
}

size_t
ovl_wds_keylen(const char *name)
{
	const char *base = strrchr(name, '/'), *dot;

	base = base != NULL ? base + 1 : name;
	dot = strchr(base, '.');
	return dot != NULL ? (size_t)(dot - name) : strlen(name);
}

struct group {
	uint64_t	 index;		/* group number in the archive */
	int		 open;
	int		 has_text;
	int		 text_bad;	/* text member skipped (too long) */
	int		 img_bad;	/* an image refused: no document */
	uint32_t	 nimages;
	char		 member[256];
};

struct rd {
	const struct ovl_wds_opts *o;
	const struct ovl_wds_cb *cb;
	struct ovl_wds_result *res;
	struct ovl_buf	*buf;
	uint64_t	 g0, idx;
	struct ovl_buf	 img;		/* an image member's bytes (probe), or
					   the group's (keep) */
	unsigned	 calm;		/* small groups in a row (keep) */
	struct ovl_wds_image *images;	/* OVL_WDS_MAX_IMAGES (probe) */
};

static void
finish_group(struct rd *r, struct group *g)
{
	struct ovl_wds_group d;

	if (!g->open)
		return;
	g->open = 0;
	if (g->index < r->g0)
		return;
	if (!g->has_text) {
		if (!g->text_bad && !g->img_bad && r->o->wds)
			r->res->no_text++;
		return;
	}
	if (g->img_bad)
		return;
	memset(&d, 0, sizeof(d));
	d.index = g->index;
	d.record = r->idx++;
	d.nimages = g->nimages;
	d.images = r->o->probe ? r->images : NULL;
	d.image_data = r->o->keep ? r->img.p : NULL;
	d.member = g->member;
	d.text = (const char *)r->buf->p;
	d.len = r->buf->len;
	r->cb->doc(r->cb->arg, &d);
	/* bounded memory: a buffer grown for a large group goes */
	if (r->o->keep) {
		r->calm = r->img.len <= (1u << 20) ? r->calm + 1 : 0;
		if (r->calm == 8)
			ovl_buf_trim(&r->img, 1u << 20);
	}
}

static void
bad(struct rd *r, int what, uint64_t index, const char *member,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void
bad(struct rd *r, int what, uint64_t index, const char *member,
    const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->cb->bad(r->cb->arg, what, index, member, msg);
}

/* The text member's data into r->buf: 0, 1 too long, -1 read error. */
static int
read_text(struct rd *r, struct archive *a, struct archive_entry *e)
{
	la_int64_t size = ovl_arc.entry_size_is_set(e) ? ovl_arc.entry_size(e) :
	    0;
	uint64_t max = r->o->max_doc;
	la_ssize_t n = 0;

	r->buf->len = 0;
	while (size >= 0 && (uint64_t)size <= max && r->buf->len <= max) {
		unsigned char *p = ovl_buf_reserve(r->buf, 64u << 10);

		n = ovl_arc.read_data(a, p, r->buf->cap - r->buf->len);
		if (n <= 0)
			break;
		r->buf->len += (size_t)n;
	}
	if (n < 0)
		return -1;
	return size < 0 || (uint64_t)size > max || r->buf->len > max;
}

/*
 * An image member (opts.probe): its bytes into r->img, its size from its
 * header into the group's next image. 0, or -1 after reporting it (the
 * group is refused); -2 on a read error of the archive.
 */
static int
probe_image(struct rd *r, struct group *g, struct archive *a,
    struct archive_entry *e, const char *name)
{
	la_int64_t size = ovl_arc.entry_size_is_set(e) ? ovl_arc.entry_size(e) :
	    -1;
	struct ovl_wds_image *im;
	struct ovl_image_info info;
	char err[256];
	la_ssize_t n = 0;
	uint64_t data_off;

	if (g->nimages >= OVL_WDS_MAX_IMAGES) {
		bad(r, OVL_WDS_IMAGE, g->index, name, "more than %d images in "
		    "one sample", OVL_WDS_MAX_IMAGES);
		return -1;
	}
	if (size < 0 || (uint64_t)size > r->o->max_doc) {
		bad(r, OVL_WDS_IMAGE, g->index, name, "image member larger "
		    "than --max-doc-bytes (%" PRIu64 ")", r->o->max_doc);
		return -1;
	}
	/* with keep, the group's images one after the other */
	size_t at = r->o->keep && g->nimages > 0 ? r->img.len : 0;

	r->img.len = at;
	data_off = (uint64_t)ovl_arc.filter_bytes(a, 0);
	while (r->img.len - at <= r->o->max_doc) {
		unsigned char *p = ovl_buf_reserve(&r->img, 64u << 10);

		n = ovl_arc.read_data(a, p, r->img.cap - r->img.len);
		if (n <= 0)
			break;
		r->img.len += (size_t)n;
	}
	if (n < 0)
		return -2;
	if (ovl_image_probe(r->img.p + at, r->img.len - at, &info, err,
	    sizeof(err)) != 0) {
		bad(r, OVL_WDS_IMAGE, g->index, name, "%s", err);
		return -1;
	}
	im = &r->images[g->nimages];
	memset(im, 0, sizeof(*im));
	im->width = info.width;
	im->height = info.height;
	im->format = (int)info.format;
	im->size = r->img.len - at;
	im->data_off = data_off;
	im->at = at;
	snprintf(im->member, sizeof(im->member), "%s", name);
	return 0;
}

void
ovl_wds_read(struct archive *a, const struct ovl_wds_opts *o, uint64_t g0,
    uint64_t rec0, struct ovl_buf *buf, const struct ovl_wds_cb *cb,
    struct ovl_wds_result *res)
{
	struct rd r = { o, cb, res, buf, g0, rec0, { 0 }, 0, NULL };
	struct ovl_buf key = { 0 };
	struct archive_entry *e;
	struct group g;
	const char *name;
	size_t klen;
	int rc;

	memset(res, 0, sizeof(*res));
	memset(&g, 0, sizeof(g));
	if (o->probe)
		r.images = ovl_xcalloc(OVL_WDS_MAX_IMAGES, sizeof(*r.images));
	for (;;) {
		rc = ovl_arc.read_next_header(a, &e);
		if (rc == ARCHIVE_EOF)
			break;
		if (rc == ARCHIVE_RETRY || rc < ARCHIVE_WARN) {
			/* a damaged header: libarchive may resynchronize */
			bad(&r, OVL_WDS_INPUT, g.open ? g.index : 0,
			    g.open ? g.member : "(none)", "%s near byte offset "
			    "%" PRId64 " after this member: %s", rc ==
			    ARCHIVE_RETRY ? "damaged tar header" :
			    "corrupt archive", (int64_t)ovl_arc.filter_bytes(a,
			    0), ovl_arc.error_string(a) != NULL ?
			    ovl_arc.error_string(a) : "unknown archive error");
			if (rc == ARCHIVE_RETRY)
				continue;
			res->failed = 1;
			break;
		}
		if (ovl_arc.entry_filetype(e) != AE_IFREG)
			continue;
		name = ovl_arc.entry_pathname(e);
		if (name == NULL)
			name = "";
		klen = o->wds ? ovl_wds_keylen(name) : strlen(name);
		if (!o->wds || !g.open || key.len != klen ||
		    (klen > 0 && memcmp(key.p, name, klen) != 0)) {
			finish_group(&r, &g);
			memset(&g, 0, sizeof(g));
			g.open = 1;
			g.index = res->groups++;
			key.len = 0;
			ovl_buf_append(&key, name, klen);
			snprintf(g.member, sizeof(g.member), "%s", name);
		}
		if (g.index < g0)
			continue;
		if (is_text_member(o, name)) {
			if (g.has_text) {
				bad(&r, OVL_WDS_DUP, g.index, name, "a second "
				    "text member in group");
				continue;
			}
			snprintf(g.member, sizeof(g.member), "%s", name);
			rc = read_text(&r, a, e);
			if (rc < 0) {
				bad(&r, OVL_WDS_INPUT, g.index, name, "cannot "
				    "read member: %s", ovl_arc.error_string(a) !=
				    NULL ? ovl_arc.error_string(a) :
				    "unknown archive error");
				res->failed = 1;
				break;
			}
			if (rc > 0) {
				bad(&r, OVL_WDS_TOOLONG, g.index, name, "member "
				    "longer than --max-doc-bytes (%" PRIu64 ")",
				    o->max_doc);
				g.text_bad = 1;
				continue;
			}
			g.has_text = 1;
		} else if (is_image(name)) {
			if (o->probe && !g.img_bad) {
				rc = probe_image(&r, &g, a, e, name);
				if (rc == -2) {
					bad(&r, OVL_WDS_INPUT, g.index, name,
					    "cannot read member: %s",
					    ovl_arc.error_string(a) != NULL ?
					    ovl_arc.error_string(a) :
					    "unknown archive error");
					res->failed = 1;
					break;
				}
				if (rc < 0) {
					g.img_bad = 1;
					continue;
				}
			}
			g.nimages++;
		}
	}
	if (!res->failed)
		finish_group(&r, &g);
	res->bytes = (uint64_t)ovl_arc.filter_bytes(a, 0);
	ovl_buf_free(&key);
	ovl_buf_free(&r.img);
	free(r.images);
}
