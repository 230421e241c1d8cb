/*
 * ovl-construct: the images of documents (IMAGE frames, ovl-frame(5)):
 * held with the DOC they follow, attached to the piece that holds the
 * first token of their run, written after that piece's SEQ. See
 * construct.h.
 */
#include "construct.h"

#include "image.h"

void
doc_frame(struct construct *c, const struct ovl_frame *f)
{
	struct ovl_doc d;

	if (ovl_doc_decode(f, &d) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad DOC at byte offset %" PRIu64,
		    ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	/* the previous document's images are done with */
	c->img_doc0 = c->img_next = c->nimgs;
	if ((d.flags & OVL_DOC_IMAGES) && d.nimages > 0) {
		/* placed once its images are in (the reader counts them) */
		c->pdoc.len = 0;
		ovl_buf_append(&c->pdoc, f->payload, f->len);
		c->pdoc_flags = f->flags;	/* its ids' width (minor 2) */
		c->pdoc_due = d.nimages;
		return;
	}
	on_doc(c, f);
}

void
on_image(struct construct *c, const struct ovl_frame *f)
{
	struct ovl_image im;
	struct cimg *ci;
	struct ovl_frame df;

	/* the reader checked that the DOC before announced it */
	if (ovl_image_decode(f, &im) != OVL_F_OK || c->pdoc_due == 0)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad IMAGE at byte offset %"
		    PRIu64, ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	if (c->nimgs > c->img_doc0 &&
	    im.doc_pos < c->imgs[c->nimgs - 1].doc_pos)
		ovl_errx(OVL_EXIT_FRAME, "'%s': IMAGE at byte offset %" PRIu64
		    " has its run at token %" PRIu32 ", before the image before "
		    "it (%" PRIu32 ")", ovl_reader_name(c->rd),
		    ovl_reader_offset(c->rd), im.doc_pos,
		    c->imgs[c->nimgs - 1].doc_pos);
	if (c->nimgs == c->imgcap) {
		c->imgcap = c->imgcap ? 2 * c->imgcap : 64;
		c->imgs = ovl_xrealloc(c->imgs, c->imgcap * sizeof(*c->imgs));
	}
	ci = &c->imgs[c->nimgs++];
	ci->off = c->iarena.len;
	ci->len = f->len;
	ci->doc_pos = im.doc_pos;
	ci->ntokens = im.ntokens;
	ci->ok = 1;
	ovl_buf_append(&c->iarena, f->payload, f->len);
	if (--c->pdoc_due > 0)
		return;
	df.kind = OVL_DOC;
	df.flags = c->pdoc_flags;
	df.len = (uint32_t)c->pdoc.len;
	df.payload = c->pdoc.p;
	df.size = OVL_FRAME_HDR_LEN + c->pdoc.len;
	on_doc(c, &df);
}

void
images_begin(struct construct *c, const struct ovl_doc *d, uint32_t off)
{
	size_t i;

	c->img_next = c->img_doc0;
	c->runs.len = 0;
	for (i = c->img_doc0; i < c->nimgs; i++) {
		struct cimg *ci = &c->imgs[i];

		/* every run, as ovl-mix's cutter sees them */
		ovl_u32vec_push(&c->runs, ci->doc_pos);
		ovl_u32vec_push(&c->runs, ci->ntokens);

		/*
		 * A run past the document's end (ovl-mix truncated it,
		 * long-docs=truncate) has lost its tokens: the image goes.
		 */
		if ((uint64_t)ci->doc_pos + ci->ntokens >= d->ntokens) {
			ci->ok = 0;
			c->img_dropped++;
		}
		/* before a resumed document's first token: sent before */
		if (ci->doc_pos < off) {
			ci->ok = 0;
			c->img_next = i + 1;
		}
	}
}

void
images_attach(struct construct *c, struct piece *p)
{
	uint64_t end = (uint64_t)p->offset + p->length;

	p->img0 = (uint32_t)c->img_next;
	while (c->img_next < c->nimgs && c->imgs[c->img_next].doc_pos < end)
		c->img_next++;
	p->nimg = (uint32_t)(c->img_next - p->img0);
	p->enc = 0;
	for (size_t i = p->img0; i < c->img_next; i++)
		if (c->imgs[i].ok)
			p->enc += ovl_image_enc_cost(c->o->enc_a, c->o->enc_b,
			    c->imgs[i].ntokens);
}

double
piece_cost(const struct construct *c, const struct piece *p)
{
	return ovl_cost_of(&c->o->cost, (uint64_t)p->length + p->images) +
	    p->enc;
}

/* Does image i go out with piece p (its run starts in p)? */
static int
sends(const struct construct *c, const struct piece *p, size_t i)
{
	const struct cimg *ci = &c->imgs[i];

	return ci->ok && ci->doc_pos >= p->offset &&
	    ci->doc_pos < (uint64_t)p->offset + p->length;
}

uint32_t
piece_images(const struct construct *c, const struct piece *p)
{
	uint32_t n = 0;
	size_t i;

	for (i = p->img0; i < (size_t)p->img0 + p->nimg; i++)
		n += (uint32_t)sends(c, p, i);
	return n;
}

void
images_emit(struct construct *c, uint64_t step, uint32_t rank, uint32_t mb,
    const uint32_t *idx, size_t np)
{
	uint32_t k = 0, at, seg = 0;
	size_t j, i;

	for (j = 0; j < np; k += c->pieces[idx[j]].length, j++) {
		const struct piece *p = &c->pieces[idx[j]];

		/* pieces that continue each other are one SEQ segment */
		if (j > 0 && !piece_follows(&c->pieces[idx[j - 1]], p))
			seg++;

		for (i = p->img0; i < (size_t)p->img0 + p->nimg; i++) {
			const struct cimg *ci = &c->imgs[i];
			const uint8_t *src = c->iarena.p + ci->off;

			if (!sends(c, p, i))
				continue;
			at = k + (ci->doc_pos - p->offset);
			c->img_out++;
			if (c->o->json) {
				struct ovl_frame f = { OVL_IMAGE, 0, ci->len,
				    src, 0 };
				struct ovl_image im;

				(void)ovl_image_decode(&f, &im);
				printf("{\"kind\":\"image\",\"step\":%" PRIu64
				    ",\"rank\":%u,\"mb\":%u,\"piece\":%u,"
				    "\"seq_pos\":%u,\"ntokens\":%u,\"width\":%u,"
				    "\"height\":%u,\"length\":%" PRIu64
				    ",\"member\":", step, rank, mb, seg, at,
				    im.ntokens, im.width, im.height, im.length);
				ovl_json_string(stdout, im.name, im.name_len);
				printf("}\n");
			} else {
				uint8_t *pl = ovl_writer_begin(c->wr, ci->len);

				memcpy(pl, src, ci->len);
				ovl_image_set_seq(pl, step, rank, mb, seg, at);
				ovl_writer_finish(c->wr, OVL_IMAGE, 0);
			}
		}
	}
}

void
images_flushed(struct construct *c)
{
	size_t keep = c->nimgs - c->img_next, base, i;

	/* the arena's use this window, for the trim below */
	c->img_calm = c->iarena.len <= (4u << 20) ? c->img_calm + 1 : 0;
	if (c->img_next == 0)
		return;
	base = keep > 0 ? c->imgs[c->img_next].off : c->iarena.len;
	memmove(c->iarena.p, c->iarena.p + base, c->iarena.len - base);
	c->iarena.len -= base;
	memmove(c->imgs, c->imgs + c->img_next, keep * sizeof(*c->imgs));
	for (i = 0; i < keep; i++)
		c->imgs[i].off -= base;
	c->nimgs = keep;
	c->img_doc0 = c->img_doc0 > c->img_next ? c->img_doc0 - c->img_next : 0;
	c->img_next = 0;
	/*
	 * Bounded memory: grown for a window of large images,
	 * the arena shrinks once 8 windows in a row were small (no
	 * allocation per window while they are large).
	 */
	if (c->img_calm >= 8)
		ovl_buf_trim(&c->iarena, 4u << 20);
}

void
images_free(struct construct *c)
{
	free(c->imgs);
	ovl_u32vec_free(&c->runs);
	ovl_buf_free(&c->iarena);
	ovl_buf_free(&c->pdoc);
}
