/*
 * ovl-source: pre-tokenized token files as sources. See source.h.
 *
 * Megatron indexed datasets (PREFIX.bin with PREFIX.idx: a document is
 * the entries its document_indices give it) and numpy .npy token arrays (one dimension,
 * documents ended by the end-of-document token, or bounded by an offsets
 * array PATH.offsets.npy, or the whole file). Ids of any integer dtype,
 * every one checked below the vocabulary of the stream's tokenizer. A
 * document's own trailing end-of-document token is dropped, since every
 * document gets one appended. A chunk is a file; a cursor's offset is the
 * document's number in it.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <signal.h>

#include "source.h"
#include "tokfmt.h"

/* A file mapped whole. */
struct map {
	const uint8_t	*p;
	size_t		 n;
};

/*
 * The files mapped now (a token file and its index or offsets), for the
 * SIGBUS that a file shrunk under the run raises at a page past its new
 * end: the run ends with an error naming the file (exit 1), not killed
 * without a word. A fault elsewhere keeps the default action.
 */
#define MAPS_MAX	2
static struct {
	const uint8_t	*volatile p;
	size_t		 n;
	char		 msg[PATH_MAX + 128];
	size_t		 msglen;
} maps[MAPS_MAX];

static void
on_sigbus(int sig, siginfo_t *si, void *uc)
{
	const uint8_t *a = si->si_addr;
	int i;

	(void)uc;
	for (i = 0; i < MAPS_MAX; i++)
		if (maps[i].p != NULL && a >= maps[i].p &&
		    a < maps[i].p + maps[i].n) {
			(void)!write(STDERR_FILENO, maps[i].msg, maps[i].msglen);
			_exit(OVL_EXIT_DATA);
		}
	signal(sig, SIG_DFL);	/* not ours: the fault comes back, fatal */
}

static void
maps_add(const char *path, const uint8_t *p, size_t n)
{
	static int installed;
	int i, k;

	if (!installed) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, NULL);
		installed = 1;
	}
	for (i = 0; i < MAPS_MAX && maps[i].p != NULL; i++)
		;
	if (i == MAPS_MAX)
		return;
	k = snprintf(maps[i].msg, sizeof(maps[i].msg), "%s: '%s' shrank below "
	    "its %zu bytes while being read\n", ovl_err_prog(), path, n);
	maps[i].msglen = k < 0 ? 0 : (size_t)k < sizeof(maps[i].msg) ?
	    (size_t)k : sizeof(maps[i].msg) - 1;
	maps[i].n = n;
	maps[i].p = p;
}

static void
maps_del(const uint8_t *p)
{
	int i;

	for (i = 0; i < MAPS_MAX; i++)
		if (maps[i].p == p)
			maps[i].p = NULL;
}

static int
map_file(struct src *s, const char *path, struct map *m)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	m->p = NULL;
	m->n = 0;
	if (fd == -1 || fstat(fd, &st) != 0) {
		bad(s, R_OPEN, NULL, "cannot open '%s': %s", path,
		    strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (strcmp(path, s->cx.path) == 0 && chunk_same(s, fd, NULL) != 0) {
		close(fd);
		return -1;
	}
	m->n = (size_t)st.st_size;
	if (m->n > 0) {
		void *p = mmap(NULL, m->n, PROT_READ, MAP_PRIVATE, fd, 0);

		if (p == MAP_FAILED) {
			bad(s, R_OPEN, NULL, "cannot map '%s': %s", path,
			    strerror(errno));
			close(fd);
			return -1;
		}
		(void)madvise(p, m->n, MADV_SEQUENTIAL);
		m->p = p;
		maps_add(path, p, m->n);
	}
	close(fd);
	return 0;
}

static void
unmap(struct map *m)
{
	if (m->p != NULL)
		maps_del(m->p);
	if (m->p != NULL)
		munmap((void *)(uintptr_t)m->p, m->n);
	m->p = NULL;
}

/* Id i of ids in dtype dt (enum ovl_dt, tokfmt.h). */
static int64_t
id_at(const uint8_t *p, int dt, uint64_t i)
{
	int64_t v = 0;

	switch (dt) {
	case OVL_DT_U8: return p[i];
	case OVL_DT_I8: return (int8_t)p[i];
	case OVL_DT_I16: { int16_t x; memcpy(&x, p + 2 * i, 2); return x; }
	case OVL_DT_U16: { uint16_t x; memcpy(&x, p + 2 * i, 2); return x; }
	case OVL_DT_I32: { int32_t x; memcpy(&x, p + 4 * i, 4); return x; }
	case OVL_DT_U32: { uint32_t x; memcpy(&x, p + 4 * i, 4); return x; }
	case OVL_DT_I64: memcpy(&v, p + 8 * i, 8); return v;
	default: {
		uint64_t x;

		memcpy(&x, p + 8 * i, 8);
		return x > INT64_MAX ? -1 : (int64_t)x;
	}
	}
}

/* Value i of the array as its dtype has it, for messages (into buf). */
static const char *
id_text(const uint8_t *p, int dt, uint64_t i, char *buf, size_t len)
{
	uint64_t x;

	if (dt != OVL_DT_U64) {
		snprintf(buf, len, "%" PRId64, id_at(p, dt, i));
		return buf;
	}
	memcpy(&x, p + 8 * i, 8);
	snprintf(buf, len, "%" PRIu64, x);
	return buf;
}

/*
 * ids [a, b) as uint32 into out, in one loop per dtype that the compiler
 * vectorizes (no branch per id: the ids out of range are or-ed into one
 * flag); returns b, or the index of the first id outside [0, vocab).
 */
#define IDS_COPY(T) do {						\
	uint64_t over = 0;						\
	for (i = a; i < b; i++) {					\
		T x;							\
		memcpy(&x, p + sizeof(T) * i, sizeof(T));		\
		over |= (uint64_t)(int64_t)x >= vocab;			\
		out[i - a] = (uint32_t)x;				\
	}								\
	if (!over)							\
		return b;						\
} while (0)

static uint64_t
ids_copy(const uint8_t *p, int dt, uint64_t a, uint64_t b, uint32_t *out,
    uint32_t vocab)
{
	uint64_t i;

	switch (dt) {
	case OVL_DT_U8: IDS_COPY(uint8_t); break;
	case OVL_DT_I8: IDS_COPY(int8_t); break;
	case OVL_DT_I16: IDS_COPY(int16_t); break;
	case OVL_DT_U16: IDS_COPY(uint16_t); break;
	case OVL_DT_I32: IDS_COPY(int32_t); break;
	case OVL_DT_U32: IDS_COPY(uint32_t); break;
	default: break;
	}
	for (i = a; i < b; i++) {
		int64_t id = id_at(p, dt, i);

		if (id < 0 || id >= vocab)
			return i;
		out[i - a] = (uint32_t)id;
	}
	return b;
}

/*
 * The index of the first id equal to eod in [i, n), or n: blocks of 64
 * ids are compared whole (vectorized), then the block holding one is
 * searched.
 */
#define EOD_SCAN(T) do {						\
	const T e = (T)eod;						\
	for (; i + 64 <= n; i += 64) {					\
		unsigned hit = 0, j;					\
		for (j = 0; j < 64; j++) {				\
			T x;						\
			memcpy(&x, p + sizeof(T) * (i + j), sizeof(T));	\
			hit |= x == e;					\
		}							\
		if (hit)						\
			break;						\
	}								\
} while (0)

static uint64_t
next_eod(const uint8_t *p, int dt, uint64_t i, uint64_t n, int64_t eod)
{
	switch (dt) {
	case OVL_DT_U16: if (eod >= 0 && eod <= UINT16_MAX) EOD_SCAN(uint16_t); break;
	case OVL_DT_I32: if (eod >= 0 && eod <= INT32_MAX) EOD_SCAN(int32_t); break;
	case OVL_DT_U32: if (eod >= 0 && eod <= UINT32_MAX) EOD_SCAN(uint32_t); break;
	default: break;
	}
	while (i < n && id_at(p, dt, i) != eod)
		i++;
	return i;
}

/* Document doc's record: its number is its offset. */
static void
tok_rec(struct rec *rc, uint64_t doc)
{
	memset(rc, 0, sizeof(*rc));
	rc->row = 2;
	rc->start_off = doc;
	rc->next_off = doc + 1;
	rc->index = doc;
}

/*
 * Append ids [a, b) of the token array to the document being built in
 * s->toks: 1, or 0 after reporting an id outside the vocabulary (the
 * document's token number counted from its first id).
 */
static int
tok_doc_add(struct src *s, const struct rec *rc, const uint8_t *p, int dt,
    uint64_t a, uint64_t b)
{
	uint32_t vocab = ovl_tok_vocab(s->tok);
	size_t lead = s->bos != OVL_TOK_NONE ? 1 : 0;
	uint64_t at;
	char v[24];

	ovl_u32vec_reserve(&s->toks, (size_t)(b - a));
	at = ids_copy(p, dt, a, b, s->toks.p + s->toks.len, vocab);
	if (at < b) {
		bad(s, R_TOK, rc, "token %" PRIu64 " is %s: not an id of %s "
		    "(vocabulary %" PRIu32 ")", s->toks.len - lead + (at - a),
		    id_text(p, dt, at, v, sizeof(v)), ovl_tok_name(s->tok),
		    vocab);
		return 0;
	}
	s->toks.len += (size_t)(b - a);
	return 1;
}

/* The document built in s->toks: its own trailing end dropped, recorded. */
static void
tok_doc_record(struct src *s, const struct rec *rc)
{
	size_t lead = s->bos != OVL_TOK_NONE ? 1 : 0;

	if (s->toks.len > lead && s->toks.p[s->toks.len - 1] == s->eod)
		s->toks.len--;	/* its own end; one is appended */
	s->pre = 1;
	record(s, rc, "", 0);
}

/* Document doc: ids [a, b) of the token array; checked, then recorded. */
static void
tok_doc(struct src *s, const uint8_t *p, int dt, uint64_t a, uint64_t b,
    uint64_t doc)
{
	struct rec rc;

	tok_rec(&rc, doc);
	s->toks.len = 0;
	if (s->bos != OVL_TOK_NONE)
		ovl_u32vec_push(&s->toks, s->bos);
	if (tok_doc_add(s, &rc, p, dt, a, b))
		tok_doc_record(s, &rc);
}

/* ---- Megatron .bin/.idx --------------------------------------------- */

/* The .bin and .idx names of a path naming either, or their prefix. */
static void
megatron_names(const char *path, char **bin, char **idx)
{
	size_t n = strlen(path);

	if (n > 4 && (strcmp(path + n - 4, ".bin") == 0 ||
	    strcmp(path + n - 4, ".idx") == 0))
		n -= 4;
	if (asprintf(bin, "%.*s.bin", (int)n, path) < 0 ||
	    asprintf(idx, "%.*s.idx", (int)n, path) < 0)
		ovl_errx(OVL_EXIT_DATA, "out of memory");
}

/*
 * The documents of the current chunk (a file) from document doc0 on. The
 * index's document_indices (Megatron's: a document is the entries from
 * one to the next; --split-sentences makes an entry of each sentence)
 * say which entries make each document, read in the order given; an
 * index with none, each entry is one.
 */
static uint64_t
run_megatron(struct src *s, uint64_t doc0,
    uint64_t rec0 __attribute__((unused)))
{
	struct map mi = { NULL, 0 }, mb = { NULL, 0 };
	struct ovl_mmidx ix;
	char *bin, *idx, err[300];
	uint64_t i, d, e0, e1, at, len;
	struct rec rc;

	megatron_names(s->cx.path, &bin, &idx);
	if (map_file(s, idx, &mi) != 0)
		goto out0;
	if (map_file(s, bin, &mb) != 0)
		goto out1;
	if (ovl_mmidx_parse(mi.p, mi.n, &ix, err, sizeof(err)) != 0) {
		bad(s, R_INPUT, NULL, "'%s': %s", idx, err);
		goto out;
	}
	if (doc0 > ix.ndocs)
		ovl_errx(OVL_EXIT_USAGE, "'%s': --resume offset %" PRIu64 " is "
		    "beyond its %" PRIu64 " documents", s->cx.path, doc0,
		    ix.ndocs);
	for (d = doc0; d < ix.ndocs; d++) {
		ovl_mmidx_doc(&ix, d, &e0, &e1);
		tok_rec(&rc, d);
		s->toks.len = 0;
		if (s->bos != OVL_TOK_NONE)
			ovl_u32vec_push(&s->toks, s->bos);
		for (i = e0; i < e1; i++) {
			if (ovl_mmidx_entry(&ix, i, mb.n, &at, &len, err,
			    sizeof(err)) != 0) {
				bad(s, R_INPUT, &rc, "'%s': %s", bin, err);
				goto out;
			}
			if (!tok_doc_add(s, &rc, mb.p + at, ix.dt, 0, len))
				break;
		}
		if (i == e1)
			tok_doc_record(s, &rc);
	}
out:
	unmap(&mb);
out1:
	unmap(&mi);
out0:
	free(bin);
	free(idx);
	return mb.n;
}

/* ---- numpy .npy ----------------------------------------------------- */

/* A one-dimensional C-order integer array: its dtype, data and length. */
static int
npy_open(struct src *s, const char *path, const struct map *m, int *dt,
    const uint8_t **data, uint64_t *n)
{
	char err[1200];
	size_t off;

	if (ovl_npy_header(m->p, m->n, dt, &off, n, err, sizeof(err)) != 0) {
		bad(s, R_INPUT, NULL, "'%s': %s", path, err);
		return -1;
	}
	*data = m->p + off;
	return 0;
}

static uint64_t
run_npy(struct src *s, uint64_t doc0,
    uint64_t rec0 __attribute__((unused)))
{
	const struct src_opts *o = s->o;
	struct map m, mo = { NULL, 0 };
	const uint8_t *p, *op = NULL;
	uint64_t n, no = 0, doc = 0, a = 0, i;
	int dt, odt = 0;
	char *opath = NULL;

	if (map_file(s, s->cx.path, &m) != 0)
		return 0;
	if (npy_open(s, s->cx.path, &m, &dt, &p, &n) != 0)
		goto out;
	if (o->per == PER_OFFSETS) {
		size_t l = strlen(s->cx.path);

		if (l > 4 && strcmp(s->cx.path + l - 4, ".npy") == 0)
			l -= 4;
		if (asprintf(&opath, "%.*s.offsets.npy", (int)l, s->cx.path) < 0)
			ovl_errx(OVL_EXIT_DATA, "out of memory");
		if (map_file(s, opath, &mo) != 0 ||
		    npy_open(s, opath, &mo, &odt, &op, &no) != 0)
			goto out;
		if (no == 0 || id_at(op, odt, 0) != 0 ||
		    id_at(op, odt, no - 1) != (int64_t)n) {
			bad(s, R_INPUT, NULL, "'%s' does not run from 0 to the %"
			    PRIu64 " ids of '%s'", opath, n, s->cx.path);
			goto out;
		}
		if (doc0 >= no)
			ovl_errx(OVL_EXIT_USAGE, "'%s': --resume offset %" PRIu64
			    " is beyond its %" PRIu64 " documents", s->cx.path,
			    doc0, no - 1);
		for (doc = doc0; doc + 1 < no; doc++) {
			int64_t x = id_at(op, odt, doc), y = id_at(op, odt, doc + 1);

			if (x < 0 || y < x || (uint64_t)y > n) {
				char xs[24], ys[24];

				bad(s, R_INPUT, NULL, "'%s': offsets %" PRIu64 " and %"
				    PRIu64 " are %s and %s: not increasing within "
				    "the ids", opath, doc, doc + 1, id_text(op, odt,
				    doc, xs, sizeof(xs)), id_text(op, odt, doc + 1,
				    ys, sizeof(ys)));
				break;
			}
			tok_doc(s, p, dt, (uint64_t)x, (uint64_t)y, doc);
		}
		goto out;
	}
	if (o->per == PER_FILE) {
		if (doc0 == 0 && n > 0)
			tok_doc(s, p, dt, 0, n, 0);
		goto out;
	}
	/* documents end at the end-of-document token */
	for (i = 0; i < n; i++) {
		i = next_eod(p, dt, i, n, (int64_t)s->eod);
		if (i == n)
			i = n - 1;	/* the last document, without its end */
		if (doc >= doc0)
			tok_doc(s, p, dt, a, i + 1, doc);
		doc++;
		a = i + 1;
	}
	if (doc0 > doc)
		ovl_errx(OVL_EXIT_USAGE, "'%s': --resume offset %" PRIu64 " is "
		    "beyond its %" PRIu64 " documents", s->cx.path, doc0, doc);
out:
	unmap(&mo);
	unmap(&m);
	free(opath);
	return m.n;
}

static const char *const megatron_exts[] = { ".bin", ".idx", NULL };
static const char *const npy_exts[] = { ".npy", NULL };

const struct src_format src_fmt_megatron = {
	.exts = megatron_exts,
	.run = run_megatron,
};

const struct src_format src_fmt_npy = {
	.exts = npy_exts,
	.flags = SRC_FMT_TOKEN_DOCS,
	.run = run_npy,
};
