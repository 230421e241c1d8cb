#include "tok.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "bpe.h"
#include "cli.h"
#include "hash64.h"
#include "hf.h"
#include "io.h"
#include "pretok.h"
#include "spm.h"
#include "num.h"

size_t
ovl_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		unsigned c = p[i];

		if (c < 0x80) {
			/* ASCII fast path, 8 bytes at a time. */
			while (i + 8 <= n) {
				uint64_t w;
				memcpy(&w, p + i, 8);
				if ((w & 0x8080808080808080ull) != 0)
					break;
				i += 8;
			}
			while (i < n && p[i] < 0x80)
				i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			if (i + 1 >= n || (p[i + 1] & 0xc0) != 0x80)
				return i;
			i += 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			unsigned lo = c == 0xe0 ? 0xa0 : 0x80;
			unsigned hi = c == 0xed ? 0x9f : 0xbf;
			if (i + 2 >= n || p[i + 1] < lo || p[i + 1] > hi ||
			    (p[i + 2] & 0xc0) != 0x80)
				return i;
			i += 3;
		} else if (c >= 0xf0 && c <= 0xf4) {
			unsigned lo = c == 0xf0 ? 0x90 : 0x80;
			unsigned hi = c == 0xf4 ? 0x8f : 0xbf;
			if (i + 3 >= n || p[i + 1] < lo || p[i + 1] > hi ||
			    (p[i + 2] & 0xc0) != 0x80 || (p[i + 3] & 0xc0) != 0x80)
				return i;
			i += 4;
		} else
			return i;
	}
	return n;
}

/* ---- bytes: UTF-8 bytes as ids ---- */

#define BYTES_EOD 256

static int
bytes_encode(void *impl, const char *text, size_t n, struct ovl_u32vec *out,
    size_t *bad_off)
{
	const unsigned char *p = (const unsigned char *)text;
	uint32_t *dst;
	size_t ok, i;

	(void)impl;
	ok = ovl_utf8_valid(text, n);
	if (ok != n) {
		*bad_off = ok;
		return -1;
	}
	dst = ovl_u32vec_reserve(out, n);
	for (i = 0; i < n; i++)
		dst[i] = p[i];
	out->len += n;
	return 0;
}

static int64_t
bytes_special(void *impl, const char *name)
{
	(void)impl;
	if (strcmp(name, "<|endoftext|>") == 0 || strcmp(name, "<eod>") == 0)
		return BYTES_EOD;
	return -1;
}

static void
bytes_free(void *impl)
{
	(void)impl;
}

static int
bytes_decode(void *impl, const uint32_t *ids, size_t n, struct ovl_buf *out)
{
	size_t i;

	(void)impl;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)ids[i];
		if (ids[i] > 255)
			return -1;
		ovl_buf_append(out, &c, 1);
	}
	return 0;
}

static const struct ovl_tok_ops bytes_ops = {
	.encode = bytes_encode,
	.decode = bytes_decode,
	.special = bytes_special,
	.free = bytes_free
};

/* ---- tiktoken: BPE over a rank file (bpe.h) ---- */

static int
bpe_encode_op(void *impl, const char *text, size_t n, struct ovl_u32vec *out,
    size_t *bad_off)
{
	return ovl_bpe_encode(impl, text, n, out, bad_off);
}

static int64_t
bpe_special_op(void *impl, const char *name)
{
	return ovl_bpe_special_id(impl, name);
}

static void
bpe_free_op(void *impl)
{
	ovl_bpe_free(impl);
}

/* A special-token policy by name: 0, or -1 with a message. */
static int
policy_of(const char *policy, enum ovl_bpe_special *p, char *err,
    size_t errlen)
{
	char *names;

	if (ovl_bpe_special_parse(policy, p) == 0)
		return 0;
	names = ovl_cli_choices(ovl_bpe_special_names, ", ", ", ");
	snprintf(err, errlen, "unknown special-token policy '%s' (%s)",
	    policy, names);
	free(names);
	return -1;
}

static int
bpe_set_special_op(void *impl, const char *policy, char *err, size_t errlen)
{
	enum ovl_bpe_special p;

	if (policy_of(policy, &p, err, errlen) != 0)
		return -1;
	ovl_bpe_set_special(impl, p);
	return 0;
}

static const char *
bpe_error_op(void *impl)
{
	return ovl_bpe_error(impl);
}

static int
bpe_decode_op(void *impl, const uint32_t *ids, size_t n, struct ovl_buf *out)
{
	size_t i, l;

	for (i = 0; i < n; i++) {
		const unsigned char *t = ovl_bpe_token(impl, ids[i], &l);
		if (t == NULL)
			return -1;
		ovl_buf_append(out, t, l);
	}
	return 0;
}

static void
bpe_set_fast_op(void *impl, int on)
{
	ovl_bpe_set_scanner(impl, on);
}

static const struct ovl_tok_ops bpe_ops = {
	.set_fast = bpe_set_fast_op,
	.encode = bpe_encode_op,
	.decode = bpe_decode_op,
	.special = bpe_special_op,
	.free = bpe_free_op,
	.set_special = bpe_set_special_op,
	.error = bpe_error_op
};

/* ---- hf: a tokenizer.json (hf.h) ---- */

static int
hf_encode_op(void *impl, const char *text, size_t n, struct ovl_u32vec *out,
    size_t *bad_off)
{
	return ovl_hf_encode(impl, text, n, out, bad_off);
}

static int
hf_decode_op(void *impl, const uint32_t *ids, size_t n, struct ovl_buf *out)
{
	return ovl_hf_decode(impl, ids, n, out);
}

static int64_t
hf_special_op(void *impl, const char *name)
{
	return ovl_hf_token_id(impl, name);
}

static void
hf_free_op(void *impl)
{
	ovl_hf_free(impl);
}

static const char *
hf_error_op(void *impl)
{
	return ovl_hf_error(impl);
}

static int
hf_set_special_op(void *impl, const char *policy, char *err, size_t errlen)
{
	enum ovl_bpe_special p;

	if (policy_of(policy, &p, err, errlen) != 0)
		return -1;
	ovl_hf_set_special(impl, p);
	return 0;
}

static void
hf_set_fast_op(void *impl, int on)
{
	ovl_hf_set_fast(impl, on);
}

static const struct ovl_tok_ops hf_ops = {
	.set_fast = hf_set_fast_op,
	.encode = hf_encode_op,
	.decode = hf_decode_op,
	.special = hf_special_op,
	.free = hf_free_op,
	.set_special = hf_set_special_op,
	.error = hf_error_op
};

/* ---- sentencepiece: a tokenizer.model through libsentencepiece ---- */

struct spm_tok {
	struct ovl_spm	*s;
	char		 err[256];
};

static int
spm_encode_op(void *impl, const char *text, size_t n, struct ovl_u32vec *out,
    size_t *bad_off)
{
	struct spm_tok *st = impl;
	size_t ok = ovl_utf8_valid(text, n), len = out->len;

	st->err[0] = '\0';
	if (ok != n) {
		*bad_off = ok;
		return -1;
	}
	if (ovl_spm_encode(st->s, text, n, &out->p, &len, &out->cap, st->err,
	    sizeof(st->err)) != 0) {
		*bad_off = 0;
		return -1;
	}
	out->len = len;
	return 0;
}

static int
spm_decode_op(void *impl, const uint32_t *ids, size_t n, struct ovl_buf *out)
{
	struct spm_tok *st = impl;
	size_t len;
	char *s = ovl_spm_decode(st->s, ids, n, &len);

	if (s == NULL)
		return -1;
	ovl_buf_append(out, s, len);
	free(s);
	return 0;
}

static int64_t
spm_special_op(void *impl, const char *name)
{
	return ovl_spm_piece_id(((struct spm_tok *)impl)->s, name);
}

static void
spm_free_op(void *impl)
{
	struct spm_tok *st = impl;

	ovl_spm_free(st->s);
	free(st);
}

static const char *
spm_error_op(void *impl)
{
	return ((struct spm_tok *)impl)->err;
}

static const struct ovl_tok_ops spm_ops = {
	.encode = spm_encode_op,
	.decode = spm_decode_op,
	.special = spm_special_op,
	.free = spm_free_op,
	.error = spm_error_op
};

static struct ovl_tok *tok_new(const struct ovl_tok_ops *ops, void *impl,
    const char *name, uint32_t vocab, uint32_t eod);

/* A tokenizer file as it was hashed (see ovl_tok_file). */
struct tok_file {
	struct stat	 st;
	uint64_t	 hash;
};

/*
 * Hash the file at path whole, into *f: 0, or -1 with a message. A file
 * that cannot be opened is left to the loader to name (f is zeroed, so
 * file_bind refuses a load that finds one).
 */
static int
file_hash(const char *path, struct tok_file *f, char *err, size_t errlen)
{
	struct ovl_hash64 h;
	unsigned char *blk;
	ssize_t r;
	int fd;

	memset(f, 0, sizeof(*f));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	if (fstat(fd, &f->st) != 0) {
		snprintf(err, errlen, "cannot stat '%s': %s", path,
		    strerror(errno));
		close(fd);
		return -1;
	}
	blk = ovl_xmalloc(1 << 16);
	ovl_hash64_init(&h, 0);
	while ((r = ovl_io_read_full(fd, blk, 1 << 16)) > 0)
		ovl_hash64_update(&h, blk, (size_t)r);
	if (r < 0)
		snprintf(err, errlen, "cannot read '%s': %s", path,
		    strerror(errno));
	free(blk);
	close(fd);
	f->hash = ovl_hash64_digest(&h);
	return r < 0 ? -1 : 0;
}

/*
 * Bind t to the file it was loaded from: the file must still be the one
 * hashed before the load (same inode, size and mtime). 0, or -1 with a
 * message (t is then freed).
 */
static int
file_bind(struct ovl_tok *t, const char *path, const struct tok_file *f,
    char *err, size_t errlen)
{
	struct stat now;

	if (stat(path, &now) != 0 || now.st_ino != f->st.st_ino ||
	    now.st_dev != f->st.st_dev || now.st_size != f->st.st_size ||
	    now.st_mtim.tv_sec != f->st.st_mtim.tv_sec ||
	    now.st_mtim.tv_nsec != f->st.st_mtim.tv_nsec) {
		snprintf(err, errlen, "tokenizer file '%s' changed while it "
		    "was loaded", path);
		ovl_tok_free(t);
		return -1;
	}
	t->file = ovl_xstrdup(path);
	t->file_size = (uint64_t)f->st.st_size;
	t->file_hash = f->hash;
	return 0;
}

static struct ovl_tok *
spm_open(const char *path, char *err, size_t errlen)
{
	struct spm_tok *st;
	struct ovl_spm *s;
	struct ovl_tok *t;
	struct tok_file f;
	int64_t eos;

	if (*path == '\0') {
		snprintf(err, errlen, "sentencepiece: no file given "
		    "(sentencepiece:PATH/tokenizer.model)");
		return NULL;
	}
	if (file_hash(path, &f, err, errlen) != 0 ||
	    (s = ovl_spm_open(path, err, errlen)) == NULL)
		return NULL;
	st = ovl_xcalloc(1, sizeof(*st));
	st->s = s;
	eos = ovl_spm_eos(s);
	t = tok_new(&spm_ops, st, ovl_spm_name(s), ovl_spm_vocab(s),
	    eos >= 0 ? (uint32_t)eos : OVL_TOK_NONE);
	return file_bind(t, path, &f, err, errlen) == 0 ? t : NULL;
}

static struct ovl_tok *
tok_new(const struct ovl_tok_ops *ops, void *impl, const char *name,
    uint32_t vocab, uint32_t eod)
{
	struct ovl_tok *t = ovl_xcalloc(1, sizeof(*t));

	t->ops = ops;
	t->impl = impl;
	t->name = ovl_xstrdup(name);
	t->vocab = vocab;
	t->eod = eod;
	t->bos = OVL_TOK_NONE;
	t->add_special = 1;
	return t;
}

/*
 * "FILE[:PATTERN]": FILE is the whole rest when such a file exists (a path
 * may hold ':'), else everything before the first ':'.
 */
static struct ovl_tok *
tiktoken_open(const char *rest, char *err, size_t errlen)
{
	struct ovl_bpe *b;
	struct ovl_tok *t;
	const char *colon = strchr(rest, ':');
	char *path, name[64];
	struct tok_file f;
	struct stat st;

	if (colon == NULL || stat(rest, &st) == 0) {
		path = ovl_xstrdup(rest);
		colon = NULL;
	} else {
		path = ovl_xmalloc((size_t)(colon - rest) + 1);
		memcpy(path, rest, (size_t)(colon - rest));
		path[colon - rest] = '\0';
	}
	if (*path == '\0') {
		snprintf(err, errlen, "tiktoken: no rank file given "
		    "(tiktoken:FILE[:PATTERN])");
		free(path);
		return NULL;
	}
	b = NULL;
	if (file_hash(path, &f, err, errlen) == 0)
		b = ovl_bpe_open(path, colon != NULL ? colon + 1 : NULL, err,
		    errlen);
	if (b == NULL) {
		free(path);
		return NULL;
	}
	snprintf(name, sizeof(name), "tiktoken:%s", ovl_bpe_name(b));
	t = tok_new(&bpe_ops, b, name, ovl_bpe_vocab(b),
	    (uint32_t)ovl_bpe_special_id(b, "<|endoftext|>"));
	if (file_bind(t, path, &f, err, errlen) != 0)
		t = NULL;
	free(path);
	return t;
}

static struct ovl_tok *
hf_open(const char *path, char *err, size_t errlen)
{
	struct ovl_hf *h;
	struct ovl_tok *t;
	struct tok_file f;
	int64_t eod;

	if (*path == '\0') {
		snprintf(err, errlen, "hf: no file given (hf:PATH/tokenizer.json)");
		return NULL;
	}
	if (file_hash(path, &f, err, errlen) != 0 ||
	    (h = ovl_hf_open(path, err, errlen)) == NULL)
		return NULL;
	eod = ovl_hf_default_eod(h);
	t = tok_new(&hf_ops, h, ovl_hf_name(h), ovl_hf_vocab(h),
	    eod >= 0 ? (uint32_t)eod : OVL_TOK_NONE);
	t->ntpre = ovl_hf_template(h, 0, &t->tpre);
	t->ntsuf = ovl_hf_template(h, 1, &t->tsuf);
	return file_bind(t, path, &f, err, errlen) == 0 ? t : NULL;
}

struct ovl_tok *
ovl_tok_open(const char *spec, char *err, size_t errlen)
{
	if (spec == NULL || strcmp(spec, "bytes") == 0)
		return tok_new(&bytes_ops, NULL, "bytes", 257, BYTES_EOD);
	if (strncmp(spec, "tiktoken:", 9) == 0)
		return tiktoken_open(spec + 9, err, errlen);
	if (strncmp(spec, "hf:", 3) == 0)
		return hf_open(spec + 3, err, errlen);
	if (strncmp(spec, "sentencepiece:", 14) == 0)
		return spm_open(spec + 14, err, errlen);
	snprintf(err, errlen, "unknown tokenizer '%s' (known: bytes, "
	    "tiktoken:FILE[:PATTERN], hf:FILE, sentencepiece:FILE)", spec);
	return NULL;
}

int
ovl_tok_set_special(struct ovl_tok *t, const char *policy, char *err,
    size_t errlen)
{
	if (t->ops->set_special != NULL)
		return t->ops->set_special(t->impl, policy, err, errlen);
	if (strcmp(policy, "plain") == 0)
		return 0;
	snprintf(err, errlen, "tokenizer %s has no special tokens in text: "
	    "special-token policy '%s' needs tiktoken", t->name, policy);
	return -1;
}

void
ovl_tok_set_fast(struct ovl_tok *t, int on)
{
	if (t->ops->set_fast != NULL)
		t->ops->set_fast(t->impl, on);
}

const char *
ovl_tok_error(const struct ovl_tok *t)
{
	const char *e = NULL;

	if (t->ops->error != NULL)
		e = t->ops->error(t->impl);
	return e != NULL && *e != '\0' ? e : "invalid UTF-8";
}

int
ovl_tok_fatal(const struct ovl_tok *t)
{
	return strncmp(ovl_tok_error(t), OVL_PRETOK_FAILED,
	    strlen(OVL_PRETOK_FAILED)) == 0;
}

/* The probe's kinds of text: a paragraph of many scripts, then long runs. */
static const char probe_text[] =
    "The quick brown fox jumps over the lazy dog. It's 2024-11-29, "
    "12:30 \xe2\x80\x94 3.14159 \xc3\x97 42 = 131.9!\n  \xc3\x9cn\xc3\xaf" "c"
    "\xc3\xb6" "d\xc3\xa9 na\xc3\xaf" "ve caf\xc3\xa9; \xe4\xb8\xad\xe6\x96\x87"
    "\xe5\xad\x97\xe7\xac\xa6\xef\xbc\x8c \xd0\x9f\xd1\x80\xd0\xb8"
    "\xd0\xb2\xd0\xb5\xd1\x82 \xd0\xbc\xd0\xb8\xd1\x80. \xf0\x9f\x99\x82"
    "\tTabs\tand  double  spaces.\r\nx=f(y[0]){return a&&b||c;}  \n\n";
static const struct {
	const char	*unit;
	size_t		 times;
} probe_runs[] = {
	{ "a", 16384 }, { " ", 8192 }, { "7", 8192 }, { "\n", 4096 },
	{ "!", 4096 }, { "\xc3\xa9", 4096 }, { "\xe4\xb8\xad", 2048 },
};

int
ovl_tok_probe(struct ovl_tok *t, char *err, size_t errlen)
{
	struct ovl_buf text = { 0 };
	struct ovl_u32vec ids = { 0 };
	size_t i, k, bad_off;
	int rc = 0;

	if (t->file == NULL)
		return 0;	/* "bytes": no pattern */
	for (i = 0; i < 64; i++)
		ovl_buf_append(&text, probe_text, sizeof(probe_text) - 1);
	for (i = 0; i < sizeof(probe_runs) / sizeof(probe_runs[0]); i++) {
		for (k = 0; k < probe_runs[i].times; k++)
			ovl_buf_append(&text, probe_runs[i].unit,
			    strlen(probe_runs[i].unit));
		ovl_buf_append(&text, " ", 1);
	}
	if (ovl_tok_encode(t, (const char *)text.p, text.len, &ids,
	    &bad_off) != 0 && ovl_tok_fatal(t)) {
		snprintf(err, errlen, "tokenizer %s cannot encode a probe text: "
		    "%s at byte %zu of its %zu", t->name, ovl_tok_error(t),
		    bad_off, text.len);
		rc = -1;
	}
	ovl_buf_free(&text);
	ovl_u32vec_free(&ids);
	return rc;
}

void
ovl_tok_free(struct ovl_tok *t)
{
	if (t == NULL)
		return;
	t->ops->free(t->impl);
	free(t->name);
	free(t->file);
	free(t);
}

const char *
ovl_tok_file(const struct ovl_tok *t, uint64_t *size, uint64_t *hash)
{
	if (t->file != NULL) {
		*size = t->file_size;
		*hash = t->file_hash;
	}
	return t->file;
}

const char *
ovl_tok_name(const struct ovl_tok *t)
{
	return t->name;
}

uint32_t
ovl_tok_vocab(const struct ovl_tok *t)
{
	return t->vocab;
}

uint32_t
ovl_tok_eod(const struct ovl_tok *t)
{
	return t->eod;
}

/* A token by decimal id or by its text: 0 with *id, or -1 with err. */
static int
tok_resolve(const struct ovl_tok *t, const char *what, const char *name,
    uint32_t *id, char *err, size_t errlen)
{
	uint64_t n;
	int64_t sid = -1;

	if (ovl_num_u64(name, &n) == 0) {
		if (n >= t->vocab) {
			snprintf(err, errlen, "%s id %" PRIu64 " is not below "
			    "the vocabulary size %" PRIu32, what, n, t->vocab);
			return -1;
		}
		*id = (uint32_t)n;
		return 0;
	}
	if (t->ops->special != NULL)
		sid = t->ops->special(t->impl, name);
	if (sid < 0 || sid >= t->vocab) {
		snprintf(err, errlen, "unknown %s token '%s' for tokenizer %s",
		    strcmp(what, "end-of-document") == 0 ? "special" : what,
		    name, t->name);
		return -1;
	}
	*id = (uint32_t)sid;
	return 0;
}

int
ovl_tok_lookup(const struct ovl_tok *t, const char *what, const char *name,
    uint32_t *id, char *err, size_t errlen)
{
	return tok_resolve(t, what, name, id, err, errlen);
}

int
ovl_tok_set_eod(struct ovl_tok *t, const char *name, char *err, size_t errlen)
{
	return tok_resolve(t, "end-of-document", name, &t->eod, err, errlen);
}

int
ovl_tok_set_bos(struct ovl_tok *t, const char *name, char *err, size_t errlen)
{
	return tok_resolve(t, "beginning-of-document", name, &t->bos, err,
	    errlen);
}

uint32_t
ovl_tok_bos(const struct ovl_tok *t)
{
	if (t->bos != OVL_TOK_NONE || !t->add_special || t->ntpre != 1)
		return t->bos;
	return t->tpre[0];
}

void
ovl_tok_set_add_special(struct ovl_tok *t, int on)
{
	t->add_special = on != 0;
}

int
ovl_tok_check_template(const struct ovl_tok *t, char *err, size_t errlen)
{
	if (!t->add_special)
		return 0;
	if (t->bos == OVL_TOK_NONE && t->ntpre > 1) {
		snprintf(err, errlen, "the post_processor of tokenizer %s puts "
		    "%zu tokens before a document, where one goes: name it "
		    "with bos-token, or set add-special-tokens no", t->name,
		    t->ntpre);
		return -1;
	}
	if (t->ntsuf > 1 || (t->ntsuf == 1 && t->tsuf[0] != t->eod)) {
		snprintf(err, errlen, "the post_processor of tokenizer %s puts "
		    "%s%" PRIu32 " after a document, not the end-of-document "
		    "token %" PRIu32 ": name it with eod-token, or set "
		    "add-special-tokens no", t->name, t->ntsuf > 1 ?
		    "tokens from " : "token ", t->tsuf[0], t->eod);
		return -1;
	}
	return 0;
}

int
ovl_tok_decode(const struct ovl_tok *t, const uint32_t *ids, size_t n,
    struct ovl_buf *out)
{
	size_t start = out->len;

	if (t->ops->decode == NULL || t->ops->decode(t->impl, ids, n, out) != 0) {
		out->len = start;
		return -1;
	}
	return 0;
}

int
ovl_tok_encode(struct ovl_tok *t, const char *text, size_t n,
    struct ovl_u32vec *out, size_t *bad_off)
{
	return t->ops->encode(t->impl, text, n, out, bad_off);
}
