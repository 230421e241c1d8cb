/*
 * ovl-source: the chunks this partition owns, in canonical order, each
 * read by its format's reader (in-*.c, tokfile.c), CHUNK_END after each.
 * See source.h.
 */
#include <sys/stat.h>

#include "source.h"

/* ---- the run -------------------------------------------------------- */

int
chunk_same(struct src *s, int fd, const struct ovl_remote *r)
{
	const struct ovl_chunk_file *id = ovl_chunks_file(&s->cs, s->cx.ci);
	struct stat st;
	char why[512];

	if (r != NULL) {
		if (ovl_chunks_file_same_remote(id, r, why, sizeof(why)) == 0)
			return 0;
		bad(s, R_INPUT, NULL, "the object %s since it was listed", why);
		return -1;
	}
	if (fstat(fd, &st) == -1) {
		bad(s, R_INPUT, NULL, "cannot stat: %s", strerror(errno));
		return -1;
	}
	if (ovl_chunks_file_same(id, &st, why, sizeof(why)) == 0)
		return 0;
	bad(s, R_INPUT, NULL, "the file %s since it was listed", why);
	return -1;
}

static void
chunk_end(struct src *s, uint64_t bytes)
{
	const struct src_opts *o = s->o;
	double t = ovl_io_since(&s->cx.t0);

	s->bytes += bytes;
	ovl_info(1, "%s: chunk %" PRIu32 ":%" PRIu32 " '%s': %" PRIu64
	    " docs, %" PRIu64 " tokens, %" PRIu64 " bytes, %.1f MB/s", o->name,
	    s->cx.epoch, s->cx.k, s->cx.name, s->cx.docs, s->cx.tokens, bytes,
	    t > 0 ? (double)bytes / t / 1e6 : 0.0);
	if (o->json)
		return;
	{
		struct ovl_chunk_end ce;
		uint8_t *p = ovl_writer_begin(s->w, OVL_CHUNK_END_LEN);

		ce.source = o->id;
		ce.epoch = s->cx.epoch;
		ce.chunk = s->cx.k;
		ce.nchunks = s->cs.n;
		ce.ndocs = s->cx.docs;
		ce.nbytes = bytes;
		ovl_chunk_end_encode(p, &ce);
		ovl_writer_finish(s->w, OVL_CHUNK_END, 0);
	}
}

/* Make canonical chunk k of epoch the current one (s->cx). */
static void
chunk_open(struct src *s, uint32_t epoch, uint32_t k)
{
	memset(&s->cx, 0, sizeof(s->cx));
	s->cx.epoch = epoch;
	s->cx.k = k;
	s->cx.ci = s->perm[k];
	s->cx.c = &s->cs.v[s->cx.ci];
	s->cx.path = ovl_chunks_path(&s->cs, s->cx.ci);
	/* messages never show a URL's query or password */
	s->cx.name = ovl_remote_is(s->cx.path) ? ovl_remote_shown(s->cx.path,
	    s->cx.shown, sizeof(s->cx.shown)) : s->cx.path;
	clock_gettime(CLOCK_MONOTONIC, &s->cx.t0);
}

static void
run_chunk(struct src *s, uint32_t epoch, uint32_t k, uint64_t off0,
    uint64_t rec0)
{
	uint64_t bytes;

	chunk_open(s, epoch, k);
	shuf_chunk_begin(s, &rec0);
	bytes = src_formats[s->o->format]->run(s, off0, rec0);
	shuf_chunk_end(s);
	chunk_end(s, bytes);
}

/*
 * Group g of chunks (--shuffle-window Gchunks, lib/docshuf.h) from chunk
 * from (its first, or one whose documents were all sent before: only the
 * CHUNK_END frames from there on), skip of its documents sent: read
 * whole, sent as one window, then each chunk's CHUNK_END (the documents
 * all counted on its first chunk, whose number they carry).
 */
static void
run_group(struct src *s, uint32_t epoch, uint32_t g, uint32_t from,
    uint64_t skip)
{
	uint32_t gs = ovl_docshuf_group(&s->o->window), first = g * gs;
	uint32_t last = first + gs < s->cs.n ? first + gs : s->cs.n, k;
	uint64_t tokens0 = s->tokens, sent = 0, toks = 0;

	if (s->gbytes == NULL)
		s->gbytes = ovl_xcalloc(gs, sizeof(*s->gbytes));
	memset(s->gbytes, 0, gs * sizeof(*s->gbytes));
	if (from == first) {
		shuf_group_begin(s, epoch, first, skip);
		for (k = first; k < last; k++) {
			chunk_open(s, epoch, k);
			s->gbytes[k - first] = src_formats[s->o->format]->run(s,
			    0, 0);
		}
		sent = shuf_flush(s);
		toks = s->tokens - tokens0;
	}
	for (k = from; k < last; k++) {
		chunk_open(s, epoch, k);
		s->cx.docs = k == first ? sent : 0;
		s->cx.tokens = k == first ? toks : 0;
		chunk_end(s, s->gbytes[k - first]);
	}
}

static void
write_meta(struct src *s)
{
	const struct src_opts *o = s->o;
	char *text = NULL;
	size_t len = 0;
	uint32_t k;
	FILE *fp;

	if (o->json)
		return;
	if ((fp = open_memstream(&text, &len)) == NULL)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	fprintf(fp, "tokenizer %s\nvocab %" PRIu32 "\neod %" PRIu32 "\n"
	    "source %" PRIu32 " %s\nsource.%s.chunks %" PRIu32 "\n"
	    "source.%s.partition %" PRIu32 "/%" PRIu32 "\n",
	    ovl_tok_name(s->tok), ovl_tok_vocab(s->tok), s->eod, o->id, o->name,
	    o->name, s->cs.n, o->name, o->part_p, o->part_n);
	if (s->bos != OVL_TOK_NONE)
		fprintf(fp, "bos %" PRIu32 "\n", s->bos);
	if (o->image_cost.kind != 0) {
		char spec[128];

		ovl_image_cost_format(&o->image_cost, spec, sizeof(spec));
		fprintf(fp, "source.%s.image-token %" PRIu32 "\n"
		    "source.%s.image-cost %s\nsource.%s.images %s\n", o->name,
		    s->image_id, o->name, spec, o->name, o->images ==
		    IMG_INLINE ? "inline" : o->images == IMG_REF ? "ref" :
		    "none");
	}
	/*
	 * Where every chunk comes from, in chunk order, and the shuffle that
	 * orders them per epoch: a manifest can name each piece's file.
	 */
	if (o->shuffle)
		fprintf(fp, "source.%s.shuffle %" PRIu64 "\n", o->name, o->seed);
	if (o->split.n != 0) {
		char w[64];

		ovl_split_format(&o->split, w, sizeof(w));
		fprintf(fp, "source.%s.split %s %s %" PRIu64 "\n", o->name,
		    ovl_split_names[o->split_keep], w, o->split_seed);
	}
	/* who reads which chunk: partition P the groups g with g % N == P */
	if (ovl_docshuf_group(&o->window) > 1)
		fprintf(fp, "source.%s.chunk-group %" PRIu32 "\n", o->name,
		    ovl_docshuf_group(&o->window));
	for (k = 0; k < s->cs.n; k++) {
		const struct ovl_chunk *c = &s->cs.v[k];
		const char *path = s->cs.files[c->file];

		if (strchr(path, '\n') != NULL)
			continue;	/* a name META lines cannot carry */
		if (c->len == OVL_CHUNK_WHOLE)
			fprintf(fp, "source.%s.chunk.%" PRIu32 " %" PRIu64 " - %s\n",
			    o->name, k, c->off, path);
		else
			fprintf(fp, "source.%s.chunk.%" PRIu32 " %" PRIu64 " %"
			    PRIu64 " %s\n", o->name, k, c->off, c->len, path);
	}
	/* what each file was when listed: its identity (lib/chunk.h) */
	for (k = 0; k < s->cs.nfiles; k++) {
		char id[1024];

		if (strchr(s->cs.files[k], '\n') != NULL)
			continue;
		ovl_chunks_file_format(&s->cs.ids[k], id, sizeof(id));
		fprintf(fp, "source.%s.file.%" PRIu32 " %s %s\n", o->name, k, id,
		    s->cs.files[k]);
	}
	/* the tokenizer's file by its content: a resume must use the same */
	{
		uint64_t size, hash;
		const char *f = ovl_tok_file(s->tok, &size, &hash);

		if (f != NULL && strchr(f, '\n') == NULL)
			fprintf(fp, "source.%s.tokenizer-file %" PRIu64
			    " xxh64.%016" PRIx64 " %s\n", o->name, size, hash, f);
	}
	if (fclose(fp) != 0)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	{
		uint32_t plen = ovl_meta_payload_len((uint32_t)len);
		uint8_t *p = ovl_writer_begin(s->w, plen);

		ovl_meta_encode(p, text, (uint32_t)len);
		ovl_writer_finish(s->w, OVL_META, 0);
	}
	free(text);
}

void
run(struct src *s)
{
	const struct src_opts *o = s->o;
	uint32_t n = s->cs.n, e = 0, k0 = 0, k;
	uint32_t gs = ovl_docshuf_group(&o->window), ng = (n + gs - 1) / gs;
	int groups = o->window.kind == OVL_DOCSHUF_CHUNKS;
	uint64_t off0 = 0, rec0 = 0;
	int inside = 0;

	write_meta(s);
	if (o->resume) {
		const struct ovl_cursor *c = &o->cursor;

		if (c->chunk == n && c->off == 0 && c->rec == 0 &&
		    c->epoch < UINT32_MAX) {
			/* "the start of chunk n": the next epoch's start */
			e = c->epoch + 1;
			goto epochs;
		}
		if (c->chunk >= n)
			ovl_errx(OVL_EXIT_USAGE, "--resume cursor chunk %" PRIu32
			    " is out of range: the source has %" PRIu32 " chunks",
			    c->chunk, n);
		e = c->epoch;
		if (ovl_chunks_owned(c->chunk / gs, o->part_p, o->part_n)) {
			k0 = c->chunk;
			off0 = c->off;
			rec0 = c->rec;
			inside = 1;
		} else
			k0 = (c->chunk / gs + 1) * gs;
	}
epochs:
	if (o->part_p < ng) {
		for (;; e++) {
			if (!o->repeat && e >= o->epochs)
				break;
			ovl_chunks_perm(n, o->shuffle, o->seed, e, s->perm);
			/* groups of chunks (of one without them) */
			for (k = ovl_chunks_next_owned(k0 / gs, ng, o->part_p,
			    o->part_n); k < ng; k = ovl_chunks_next_owned(k + 1,
			    ng, o->part_p, o->part_n)) {
				if (groups)
					run_group(s, e, k, inside ? k0 : k * gs,
					    inside ? rec0 : 0);
				else
					run_chunk(s, e, k, inside ? off0 : 0,
					    inside ? rec0 : 0);
				inside = 0;
			}
			k0 = 0;
			if (e == UINT32_MAX)
				break;
		}
	}
	if (!o->json)
		ovl_writer_end(s->w);
}
