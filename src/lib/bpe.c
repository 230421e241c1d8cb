#include "bpe.h"
#include "bpe-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "err.h"
#include "num.h"
#include "pretok.h"
#include "tok.h"

#define NONE		UINT32_MAX
#define FILE_MAX	(1u << 30)	/* a rank file larger than this is refused */
#define SPECIAL_MAX	16
#define SMALL_PIECE	64		/* longer pieces merge with a heap */

/* A slot of the token table: len 0 is empty. */
struct tslot {
	uint32_t	tag;		/* high half of the hash */
	uint32_t	len;
	uint32_t	off;		/* in arena */
	uint32_t	rank;
};

struct bpe_entry {
	uint32_t	off;		/* in arena */
	uint32_t	len;
	uint32_t	rank;
};

struct bpe_special {
	char		*text;
	size_t		 len;
	uint32_t	 id;
};

struct ovl_bpe {
	char		 name[32];
	unsigned char	*arena;		/* token bytes, back to back */
	size_t		 arena_len, arena_cap;
	struct bpe_entry *ent;
	size_t		 nent, ent_cap;
	struct tslot	*slot;		/* open addressing, linear probing */
	uint64_t	 mask;
	uint32_t	*byid;		/* rank -> entry index + 1, 0: none */
	size_t		 nbyid;
	uint32_t	 maxrank;
	uint32_t	 byte_rank[256];
	uint32_t	*pair_rank;	/* 65536: rank of a two-byte token */
	struct bpe_special sp[SPECIAL_MAX];
	size_t		 nsp;
	uint32_t	 vocab;
	enum ovl_bpe_special policy;

	struct ovl_pretok *pt;

	struct ovl_bpe_cslot *cache;

	/* Scratch for the heap merge of long pieces. */
	uint32_t	*s_nxt, *s_prv, *s_rk, *s_tk;
	uint64_t	*s_heap;
	size_t		 s_cap;

	unsigned char	*conv;		/* a JSON encoder's ranks as rank-file lines */
	size_t		 conv_len;

	char		 err[256];
};

/* ---- the encodings tiktoken ships ---------------------------------- */

struct encoding {
	const char	*name;
	enum ovl_pretok_kind kind;
	struct { const char *text; uint32_t id; } sp[6];
};

static const struct encoding encodings[] = {
	{ "o200k", OVL_PRETOK_O200K,
	  { { "<|endoftext|>", 199999 }, { "<|endofprompt|>", 200018 } } },
	{ "cl100k", OVL_PRETOK_CL100K,
	  { { "<|endoftext|>", 100257 }, { "<|fim_prefix|>", 100258 },
	    { "<|fim_middle|>", 100259 }, { "<|fim_suffix|>", 100260 },
	    { "<|endofprompt|>", 100276 } } },
	{ "p50k", OVL_PRETOK_R50K, { { "<|endoftext|>", 50256 } } },
	{ "r50k", OVL_PRETOK_R50K, { { "<|endoftext|>", 50256 } } },
	{ "gpt2", OVL_PRETOK_R50K, { { "<|endoftext|>", 50256 } } },
};
#define NENCODINGS (sizeof(encodings) / sizeof(encodings[0]))

/* The encoding a name denotes ("cl100k" or "cl100k_base"), or NULL. */
static const struct encoding *
encoding_named(const char *s)
{
	size_t i, k;

	for (i = 0; i < NENCODINGS; i++) {
		k = strlen(encodings[i].name);
		if (strncmp(s, encodings[i].name, k) == 0 &&
		    (s[k] == '\0' || strcmp(s + k, "_base") == 0))
			return &encodings[i];
	}
	return NULL;
}

/* The encoding a file's base name mentions, or NULL. */
static const struct encoding *
encoding_guess(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t i;

	base = base != NULL ? base + 1 : path;
	for (i = 0; i < NENCODINGS; i++)
		if (strstr(base, encodings[i].name) != NULL)
			return &encodings[i];
	return NULL;
}

/* ---- hashing and look-up ------------------------------------------- */

/* Rank of the token with these bytes (hash h), or NONE. */
static inline uint32_t
find_rank(const struct ovl_bpe *b, const unsigned char *p, size_t n,
    uint64_t h)
{
	uint64_t i = h & b->mask;
	uint32_t tag = (uint32_t)(h >> 32);
	const struct tslot *e;

	for (;; i = (i + 1) & b->mask) {
		e = &b->slot[i];
		if (e->len == 0)
			return NONE;
		if (e->tag == tag && e->len == n &&
		    ovl_bpe__eq(b->arena + e->off, p, n))
			return e->rank;
	}
}

/* Rank of the token with bytes p[0..n), or NONE. */
static inline uint32_t
rank_of(const struct ovl_bpe *b, const unsigned char *p, size_t n)
{
	if (n == 2)
		return b->pair_rank[p[0] << 8 | p[1]];
	if (n == 1)
		return b->byte_rank[p[0]];
	return find_rank(b, p, n, ovl_bpe__hash(p, n));
}

/* ---- loading --------------------------------------------------------- */

static int
b64val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * Strict base64 (standard alphabet, padded) of s[0..n) into out; returns
 * the decoded length or -1.
 */
static long
b64decode(const unsigned char *s, size_t n, unsigned char *out)
{
	size_t i, o = 0;
	int v[4], k;

	if (n == 0 || n % 4 != 0)
		return -1;
	for (i = 0; i < n; i += 4) {
		for (k = 0; k < 4; k++) {
			v[k] = b64val(s[i + k]);
			if (v[k] < 0 && !(s[i + k] == '=' && i + 4 == n && k >= 2))
				return -1;
		}
		if (v[2] < 0 && v[3] >= 0)
			return -1;
		out[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (v[2] >= 0) {
			out[o++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
			if (v[3] >= 0)
				out[o++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
			else if ((v[2] & 3) != 0)
				return -1;
		} else if ((v[1] & 15) != 0)
			return -1;
	}
	return (long)o;
}

static void
grow_byid(struct ovl_bpe *b, uint32_t rank)
{
	size_t n = b->nbyid != 0 ? b->nbyid : 1024;

	if (rank < b->nbyid)
		return;
	while (n <= rank)
		n *= 2;
	b->byid = ovl_xrealloc(b->byid, n * sizeof(*b->byid));
	memset(b->byid + b->nbyid, 0, (n - b->nbyid) * sizeof(*b->byid));
	b->nbyid = n;
}

/* Add a token; -1 when its bytes are already a token (its rank in *dup). */
static int
add_token(struct ovl_bpe *b, const unsigned char *p, size_t n, uint32_t rank,
    uint32_t *dup)
{
	uint64_t h = ovl_bpe__hash(p, n), i;
	uint32_t r = find_rank(b, p, n, h);

	if (r != NONE) {
		*dup = r;
		return -1;
	}
	if (b->arena_len + n > b->arena_cap) {
		while (b->arena_len + n > b->arena_cap)
			b->arena_cap = b->arena_cap != 0 ? b->arena_cap * 2 : 1 << 20;
		b->arena = ovl_xrealloc(b->arena, b->arena_cap);
	}
	if (b->nent == b->ent_cap) {
		b->ent_cap = b->ent_cap != 0 ? b->ent_cap * 2 : 4096;
		b->ent = ovl_xrealloc(b->ent, b->ent_cap * sizeof(*b->ent));
	}
	memcpy(b->arena + b->arena_len, p, n);
	b->ent[b->nent].off = (uint32_t)b->arena_len;
	b->ent[b->nent].len = (uint32_t)n;
	b->ent[b->nent].rank = rank;
	b->arena_len += n;
	for (i = h & b->mask; b->slot[i].len != 0; i = (i + 1) & b->mask)
		;
	b->slot[i].tag = (uint32_t)(h >> 32);
	b->slot[i].len = (uint32_t)n;
	b->slot[i].off = (uint32_t)b->arena_len - (uint32_t)n;
	b->slot[i].rank = rank;
	b->nent++;
	return 0;
}

static unsigned char *
read_file(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f;
	struct stat st;
	unsigned char *buf;
	size_t got;

	if ((f = fopen(path, "rb")) == NULL) {
		ovl_errbuf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		ovl_errbuf(err, errlen, "'%s': not a regular file", path);
		fclose(f);
		return NULL;
	}
	if ((uint64_t)st.st_size > FILE_MAX) {
		ovl_errbuf(err, errlen, "'%s': rank file larger than %u bytes", path,
		    FILE_MAX);
		fclose(f);
		return NULL;
	}
	buf = ovl_xmalloc((size_t)st.st_size + 1);
	got = fread(buf, 1, (size_t)st.st_size, f);
	if (ferror(f) || got != (size_t)st.st_size) {
		ovl_errbuf(err, errlen, "cannot read '%s': %s", path,
		    ferror(f) ? strerror(errno) : "file changed size");
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	buf[got] = '\0';
	*len = got;
	return buf;
}

static int
is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static int
load_ranks(struct ovl_bpe *b, const char *path, char *err, size_t errlen)
{
	unsigned char *data, *p, *end, *eol, *f1, *f2, *q;
	unsigned char tok[OVL_BPE_TOKEN_MAX + 3];
	char rankbuf[16];
	size_t len, nlines = 0, slots, line = 0, l1, l2;
	uint64_t rank;
	uint32_t dup;
	long tl;
	int rc = -1;

	if (b->conv != NULL) {
		data = b->conv;
		len = b->conv_len;
		b->conv = NULL;
	} else if ((data = read_file(path, &len, err, errlen)) == NULL)
		return -1;
	end = data + len;
	for (p = data; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
		nlines++;
	for (slots = 1024; slots < 2 * (nlines + 1); slots *= 2)
		;
	b->slot = ovl_xcalloc(slots, sizeof(*b->slot));
	b->mask = slots - 1;
	for (p = data; p < end; p = eol + 1) {
		line++;
		if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL)
			eol = end;
		q = p;
		while (q < eol && is_space(*q))
			q++;
		if (q == eol)
			continue;	/* blank lines are skipped, as tiktoken does */
		f1 = q;
		while (q < eol && !is_space(*q))
			q++;
		l1 = (size_t)(q - f1);
		while (q < eol && is_space(*q))
			q++;
		f2 = q;
		while (q < eol && !is_space(*q))
			q++;
		l2 = (size_t)(q - f2);
		while (q < eol && is_space(*q))
			q++;
		if (l2 == 0 || q != eol) {
			ovl_errbuf(err, errlen, "%s:%zu: expected 'BASE64-TOKEN RANK'",
			    path, line);
			goto out;
		}
		if (l1 > (OVL_BPE_TOKEN_MAX + 2) / 3 * 4 ||
		    (tl = b64decode(f1, l1, tok)) < 0) {
			ovl_errbuf(err, errlen, "%s:%zu: bad base64 token '%.*s'", path,
			    line, (int)(l1 > 40 ? 40 : l1), (const char *)f1);
			goto out;
		}
		if (tl > OVL_BPE_TOKEN_MAX) {
			ovl_errbuf(err, errlen, "%s:%zu: token longer than %d bytes",
			    path, line, OVL_BPE_TOKEN_MAX);
			goto out;
		}
		if (l2 >= sizeof(rankbuf)) {
			ovl_errbuf(err, errlen, "%s:%zu: bad rank '%.15s...'", path,
			    line, (const char *)f2);
			goto out;
		}
		memcpy(rankbuf, f2, l2);
		rankbuf[l2] = '\0';
		if (ovl_num_u64_max(rankbuf, OVL_BPE_RANK_MAX, &rank) != 0) {
			ovl_errbuf(err, errlen, "%s:%zu: bad rank '%s' (a number up "
			    "to %u)", path, line, rankbuf, OVL_BPE_RANK_MAX);
			goto out;
		}
		grow_byid(b, (uint32_t)rank);
		if (b->byid[rank] != 0) {
			ovl_errbuf(err, errlen, "%s:%zu: rank %" PRIu64 " given twice",
			    path, line, rank);
			goto out;
		}
		if (add_token(b, tok, (size_t)tl, (uint32_t)rank, &dup) != 0) {
			ovl_errbuf(err, errlen, "%s:%zu: token '%.*s' given twice "
			    "(ranks %" PRIu32 " and %" PRIu64 ")", path, line,
			    (int)(l1 > 40 ? 40 : l1), (const char *)f1,
			    dup, rank);
			goto out;
		}
		b->byid[rank] = (uint32_t)b->nent;
		if (rank > b->maxrank || b->nent == 1)
			b->maxrank = (uint32_t)rank;
	}
	if (b->nent == 0) {
		ovl_errbuf(err, errlen, "%s: no tokens", path);
		goto out;
	}
	rc = 0;
out:
	free(data);
	return rc;
}

static int
index_small(struct ovl_bpe *b, const char *path, char *err, size_t errlen)
{
	size_t i;
	const struct bpe_entry *e;
	const unsigned char *p;

	b->pair_rank = ovl_xmalloc(65536 * sizeof(*b->pair_rank));
	memset(b->pair_rank, 0xff, 65536 * sizeof(*b->pair_rank));
	memset(b->byte_rank, 0xff, sizeof(b->byte_rank));
	for (i = 0; i < b->nent; i++) {
		e = &b->ent[i];
		p = b->arena + e->off;
		if (e->len == 1)
			b->byte_rank[p[0]] = e->rank;
		else if (e->len == 2)
			b->pair_rank[p[0] << 8 | p[1]] = e->rank;
	}
	for (i = 0; i < 256; i++)
		if (b->byte_rank[i] == NONE)
			return ovl_errbuf(err, errlen, "%s: no token for byte 0x%02zx "
			    "(every byte needs one)", path, i);
	return 0;
}

static int
add_special(struct ovl_bpe *b, const char *text, uint32_t id, char *err,
    size_t errlen)
{
	if (id < b->nbyid && b->byid[id] != 0)
		return ovl_errbuf(err, errlen, "special token %s has id %" PRIu32
		    ", a rank of the file", text, id);
	b->sp[b->nsp].text = ovl_xstrdup(text);
	b->sp[b->nsp].len = strlen(text);
	b->sp[b->nsp].id = id;
	b->nsp++;
	return 0;
}

/* 1 when the file's first non-blank byte is '{': a JSON encoder. */
static int
is_json(const char *path)
{
	FILE *f = fopen(path, "rb");
	int c;

	if (f == NULL)
		return 0;
	while ((c = getc(f)) == ' ' || c == '\n' || c == '\t' || c == '\r')
		;
	fclose(f);
	return c == '{';
}

/*
 * The npm package tiktoken's JSON encoders: {"pat_str": P,
 * "special_tokens": {TEXT: ID}, "bpe_ranks": "! FIRST TOKEN TOKEN ..."}
 * (base64 tokens with consecutive ranks from FIRST; "!" starts a group).
 * The ranks become rank-file lines in b->conv; *root keeps the rest.
 */
static int
json_encoder(struct ovl_bpe *b, const char *path, json_t **root, char *err,
    size_t errlen)
{
	json_error_t je;
	const char *r, *p, *e;
	struct ovl_buf out = { 0 };
	uint64_t rank = 0;
	char num[24];
	int want_first = 0;

	if ((*root = json_load_file(path, 0, &je)) == NULL)
		return ovl_errbuf(err, errlen, "%s:%d: %s", path, je.line, je.text), -1;
	r = json_string_value(json_object_get(*root, "bpe_ranks"));
	if (r == NULL || !json_is_object(json_object_get(*root, "special_tokens")))
		return ovl_errbuf(err, errlen, "%s: a JSON encoder needs \"bpe_ranks\" "
		    "and \"special_tokens\" (the npm package tiktoken's form); "
		    "a rank file has one \"BASE64-TOKEN RANK\" per line", path), -1;
	for (p = r; *p != '\0'; p = e) {
		while (*p == ' ' || *p == '\n')
			p++;
		for (e = p; *e != '\0' && *e != ' ' && *e != '\n'; e++)
			;
		if (e == p)
			break;
		if (e - p == 1 && *p == '!') {
			want_first = 1;
			continue;
		}
		if (want_first) {
			char tmp[24];
			if (e - p >= (long)sizeof(tmp))
				goto bad;
			memcpy(tmp, p, (size_t)(e - p));
			tmp[e - p] = '\0';
			if (ovl_num_u64(tmp, &rank) != 0)
				goto bad;
			want_first = 0;
			continue;
		}
		ovl_buf_append(&out, p, (size_t)(e - p));
		snprintf(num, sizeof(num), " %" PRIu64 "\n", rank++);
		ovl_buf_append(&out, num, strlen(num));
	}
	ovl_buf_append(&out, "", 1);
	b->conv = out.p;
	b->conv_len = out.len - 1;
	return 0;
bad:
	free(out.p);
	return ovl_errbuf(err, errlen, "%s: bpe_ranks: a group must start \"! RANK\"",
	    path), -1;
}

struct ovl_bpe *
ovl_bpe_open(const char *path, const char *pattern, char *err, size_t errlen)
{
	struct ovl_bpe *b = ovl_xcalloc(1, sizeof(*b));
	const struct encoding *enc = NULL, *guess = encoding_guess(path);
	json_t *js = NULL;
	const char *key;
	json_t *v;
	size_t i;

	/* A file that cannot be read says so before any guess at its name. */
	if (access(path, R_OK) != 0) {
		ovl_errbuf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		goto bad;
	}
	if (is_json(path) && json_encoder(b, path, &js, err, errlen) != 0)
		goto bad;
	if ((pattern == NULL || *pattern == '\0') && guess == NULL && js != NULL &&
	    json_is_string(json_object_get(js, "pat_str"))) {
		b->pt = ovl_pretok_open(OVL_PRETOK_ONIG, json_string_value(
		    json_object_get(js, "pat_str")), err, errlen);
		if (b->pt == NULL)
			goto bad;
		snprintf(b->name, sizeof(b->name), "custom");
	} else if (pattern == NULL || *pattern == '\0') {
		if ((enc = guess) == NULL) {
			ovl_errbuf(err, errlen, "cannot tell the encoding from the "
			    "name '%s': name it (tiktoken:FILE:cl100k) or give a "
			    "pattern", path);
			goto bad;
		}
	} else
		enc = encoding_named(pattern);
	if (b->pt == NULL) {
		if (enc != NULL)
			b->pt = ovl_pretok_open(enc->kind, NULL, err, errlen);
		else
			b->pt = ovl_pretok_open(OVL_PRETOK_REGEX, pattern, err,
			    errlen);
		if (b->pt == NULL)
			goto bad;
		snprintf(b->name, sizeof(b->name), "%s", enc != NULL ?
		    (strcmp(enc->name, "gpt2") == 0 ? "r50k" : enc->name) :
		    "custom");
	}
	if (load_ranks(b, path, err, errlen) != 0 ||
	    index_small(b, path, err, errlen) != 0)
		goto bad;
	if (enc == NULL)
		enc = guess;
	if (enc != NULL) {
		for (i = 0; i < 6 && enc->sp[i].text != NULL; i++)
			if (add_special(b, enc->sp[i].text, enc->sp[i].id, err,
			    errlen) != 0)
				goto bad;
	} else if (js != NULL) {
		json_object_foreach(json_object_get(js, "special_tokens"), key, v)
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > OVL_BPE_RANK_MAX ||
			    add_special(b, key, (uint32_t)json_integer_value(v),
			    err, errlen) != 0) {
				if (json_is_integer(v))
					goto bad;
				ovl_errbuf(err, errlen, "%s: special token '%s' has no "
				    "id", path, key);
				goto bad;
			}
	} else if (b->maxrank >= OVL_BPE_RANK_MAX ||
	    add_special(b, "<|endoftext|>", b->maxrank + 1, err, errlen) != 0)
		goto bad;
	b->vocab = b->maxrank + 1;
	for (i = 0; i < b->nsp; i++)
		if (b->sp[i].id >= b->vocab)
			b->vocab = b->sp[i].id + 1;
	b->cache = ovl_xcalloc((size_t)1 << OVL_BPE_CACHE_BITS, sizeof(*b->cache));
	json_decref(js);
	return b;
bad:
	json_decref(js);
	ovl_bpe_free(b);
	return NULL;
}

void
ovl_bpe_free(struct ovl_bpe *b)
{
	size_t i;

	if (b == NULL)
		return;
	for (i = 0; i < b->nsp; i++)
		free(b->sp[i].text);
	ovl_pretok_free(b->pt);
	free(b->arena);
	free(b->ent);
	free(b->slot);
	free(b->byid);
	free(b->pair_rank);
	free(b->cache);
	free(b->s_nxt);
	free(b->s_prv);
	free(b->s_rk);
	free(b->s_tk);
	free(b->s_heap);
	free(b->conv);
	free(b);
}

const char *
ovl_bpe_name(const struct ovl_bpe *b)
{
	return b->name;
}

uint32_t
ovl_bpe_vocab(const struct ovl_bpe *b)
{
	return b->vocab;
}

size_t
ovl_bpe_ntokens(const struct ovl_bpe *b)
{
	return b->nent;
}

int64_t
ovl_bpe_special_id(const struct ovl_bpe *b, const char *text)
{
	size_t i;

	for (i = 0; i < b->nsp; i++)
		if (strcmp(b->sp[i].text, text) == 0)
			return b->sp[i].id;
	return -1;
}

const char *
ovl_bpe_special_at(const struct ovl_bpe *b, size_t i, uint32_t *id)
{
	if (i >= b->nsp)
		return NULL;
	*id = b->sp[i].id;
	return b->sp[i].text;
}

const unsigned char *
ovl_bpe_token(const struct ovl_bpe *b, uint32_t id, size_t *len)
{
	size_t i;

	if (id < b->nbyid && b->byid[id] != 0) {
		const struct bpe_entry *e = &b->ent[b->byid[id] - 1];
		*len = e->len;
		return b->arena + e->off;
	}
	for (i = 0; i < b->nsp; i++)
		if (b->sp[i].id == id) {
			*len = b->sp[i].len;
			return (const unsigned char *)b->sp[i].text;
		}
	return NULL;
}

void
ovl_bpe_set_scanner(struct ovl_bpe *b, int on)
{
	ovl_pretok_set_scanner(b->pt, on);
}

void
ovl_bpe_set_special(struct ovl_bpe *b, enum ovl_bpe_special policy)
{
	b->policy = policy;
}

const char *const ovl_bpe_special_names[] = { "plain", "error", "allow",
	"strip", NULL };

int
ovl_bpe_special_parse(const char *s, enum ovl_bpe_special *out)
{
	int i = ovl_cli_choice(ovl_bpe_special_names, s);

	if (i < 0)
		return -1;
	*out = (enum ovl_bpe_special)i;
	return 0;
}

const char *
ovl_bpe_error(const struct ovl_bpe *b)
{
	return b->err;
}

/* ---- merging ----------------------------------------------------------- */

/*
 * tiktoken's own algorithm for short pieces: parts in an array, the lowest
 * pair rank found by a scan (leftmost on ties), merged in place. Writes the
 * ids to dst and returns their count.
 */
static size_t
merge_small(const struct ovl_bpe *b, const unsigned char *p, size_t n,
    uint32_t *dst)
{
	uint32_t st[SMALL_PIECE + 1], rk[SMALL_PIECE + 1], tk[SMALL_PIECE + 1];
	size_t m = n + 1, i, j, best;
	uint32_t min;

	for (i = 0; i + 1 < n; i++) {
		st[i] = (uint32_t)i;
		rk[i] = b->pair_rank[p[i] << 8 | p[i + 1]];
		tk[i] = b->byte_rank[p[i]];
	}
	st[n - 1] = (uint32_t)(n - 1);
	rk[n - 1] = NONE;
	tk[n - 1] = b->byte_rank[p[n - 1]];
	st[n] = (uint32_t)n;
	rk[n] = NONE;
	for (;;) {
		min = NONE;
		best = 0;
		for (i = 0; i + 1 < m; i++)
			if (rk[i] < min) {
				min = rk[i];
				best = i;
			}
		if (min == NONE)
			break;
		i = best;
		/* Parts i and i + 1 become one, with token min. */
		tk[i] = min;
		if (i > 0)
			rk[i - 1] = i + 2 < m ? rank_of(b, p + st[i - 1],
			    st[i + 2] - st[i - 1]) : NONE;
		rk[i] = i + 3 < m ? rank_of(b, p + st[i], st[i + 3] - st[i]) :
		    NONE;
		for (j = i + 1; j + 1 < m; j++) {
			st[j] = st[j + 1];
			rk[j] = rk[j + 1];
			tk[j] = tk[j + 1];
		}
		m--;
	}
	for (i = 0; i + 1 < m; i++)
		dst[i] = tk[i];
	return m - 1;
}

static void
heap_push(uint64_t *h, size_t *n, uint64_t v)
{
	size_t i = (*n)++, parent;

	while (i > 0) {
		parent = (i - 1) / 2;
		if (h[parent] <= v)
			break;
		h[i] = h[parent];
		i = parent;
	}
	h[i] = v;
}

static uint64_t
heap_pop(uint64_t *h, size_t *n)
{
	uint64_t top = h[0], v = h[--(*n)];
	size_t i = 0, c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1] < h[c])
			c++;
		if (v <= h[c])
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n > 0)
		h[i] = v;
	return top;
}

static void
scratch_grow(struct ovl_bpe *b, size_t n)
{
	size_t c = b->s_cap != 0 ? b->s_cap : 1024;

	if (n + 1 <= b->s_cap)
		return;
	while (c < n + 1)
		c *= 2;
	b->s_nxt = ovl_xrealloc(b->s_nxt, c * sizeof(uint32_t));
	b->s_prv = ovl_xrealloc(b->s_prv, c * sizeof(uint32_t));
	b->s_rk = ovl_xrealloc(b->s_rk, c * sizeof(uint32_t));
	b->s_tk = ovl_xrealloc(b->s_tk, c * sizeof(uint32_t));
	b->s_heap = ovl_xrealloc(b->s_heap, 3 * c * sizeof(uint64_t));
	b->s_cap = c;
}

/*
 * The same merge order for long pieces in O(n log n): parts are a linked
 * list over start offsets, candidate pairs sit in a heap keyed by (rank,
 * start), stale entries are dropped when popped (a part's pair rank never
 * returns to an old value: its bytes only grow, and ranks are unique).
 */
static size_t
merge_large(struct ovl_bpe *b, const unsigned char *p, size_t n,
    uint32_t *dst)
{
	uint32_t *nxt, *prv, *rk, *tk, s, t, u, q, r;
	uint64_t *heap, e;
	size_t nh = 0, i, k;

	scratch_grow(b, n);
	nxt = b->s_nxt;
	prv = b->s_prv;
	rk = b->s_rk;
	tk = b->s_tk;
	heap = b->s_heap;
	for (i = 0; i < n; i++) {
		nxt[i] = (uint32_t)i + 1;
		prv[i] = (uint32_t)i - 1;
		tk[i] = b->byte_rank[p[i]];
		rk[i] = i + 1 < n ? b->pair_rank[p[i] << 8 | p[i + 1]] : NONE;
		if (rk[i] != NONE)
			heap_push(heap, &nh, (uint64_t)rk[i] << 32 | i);
	}
	while (nh > 0) {
		e = heap_pop(heap, &nh);
		s = (uint32_t)e;
		r = (uint32_t)(e >> 32);
		if (rk[s] != r)
			continue;
		t = nxt[s];
		u = nxt[t];
		tk[s] = r;
		tk[t] = NONE;
		rk[t] = NONE;
		nxt[s] = u;
		if (u < n) {
			prv[u] = s;
			rk[s] = rank_of(b, p + s, nxt[u] - s);
			if (rk[s] != NONE)
				heap_push(heap, &nh, (uint64_t)rk[s] << 32 | s);
		} else
			rk[s] = NONE;
		if (s > 0) {
			q = prv[s];
			rk[q] = rank_of(b, p + q, u - q);
			if (rk[q] != NONE)
				heap_push(heap, &nh, (uint64_t)rk[q] << 32 | q);
		}
	}
	for (s = 0, k = 0; s < n; s = nxt[s])
		dst[k++] = tk[s];
	return k;
}

void
ovl_bpe_merge(struct ovl_bpe *b, const unsigned char *piece, size_t n,
    int large, struct ovl_u32vec *out)
{
	uint32_t *dst;

	if (n == 0)
		return;
	dst = ovl_u32vec_reserve(out, n);
	if (n == 1)
		dst[0] = b->byte_rank[piece[0]], out->len++;
	else if (large || n > SMALL_PIECE)
		out->len += merge_large(b, piece, n, dst);
	else
		out->len += merge_small(b, piece, n, dst);
}

/* ---- encoding ---------------------------------------------------------- */

/* Ids of one piece into dst (room for n); returns their count. */
static inline size_t
encode_piece(struct ovl_bpe *b, const unsigned char *p, size_t n,
    uint32_t *dst)
{
	uint64_t h;
	uint32_t e;
	struct ovl_bpe_cslot *c;
	size_t k;

	if (n == 1) {
		dst[0] = b->byte_rank[p[0]];
		return 1;
	}
	if (n == 2 && b->pair_rank[p[0] << 8 | p[1]] != NONE) {
		dst[0] = b->pair_rank[p[0] << 8 | p[1]];
		return 1;
	}
	h = ovl_bpe__hash(p, n);
	if ((e = find_rank(b, p, n, h)) != NONE) {
		dst[0] = e;
		return 1;
	}
	if (n > OVL_BPE_CACHE_KEY)
		return n > SMALL_PIECE ? merge_large(b, p, n, dst) :
		    merge_small(b, p, n, dst);
	c = ovl_bpe__cslot(b->cache, h);
	if (ovl_bpe__chit(c, h, p, n)) {
		memcpy(dst, c->tok, c->ntok * sizeof(uint32_t));
		return c->ntok;
	}
	k = merge_small(b, p, n, dst);
	ovl_bpe__cput(c, h, p, n, dst, k);
	return k;
}

/*
 * Ordinary text: pre-tokenize s[0..n) (the regex sees only this span, as
 * tiktoken's does) and merge every piece. out has room for n more ids.
 */
static int
encode_ordinary(struct ovl_bpe *b, const char *s, size_t n, size_t base,
    struct ovl_u32vec *out, size_t *bad_off)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t pos = 0, ms, me;
	uint32_t *dst = out->p + out->len;
	int rc;

	while ((rc = ovl_pretok_next(b->pt, u, n, pos, &ms, &me, b->err,
	    sizeof(b->err))) > 0) {
		dst += encode_piece(b, u + ms, me - ms, dst);
		pos = me;
	}
	if (rc < 0) {
		*bad_off = base + pos;
		return -1;
	}
	out->len = (size_t)(dst - out->p);
	return 0;
}

/*
 * The next special token in s[from..n): its index (SIZE_MAX: none), its
 * position in *at. next[] caches each special's next position (SIZE_MAX:
 * none left, UNSEARCHED to begin with).
 */
#define UNSEARCHED (SIZE_MAX - 1)
static size_t
next_special(const struct ovl_bpe *b, const char *s, size_t n, size_t from,
    size_t *next, size_t *at)
{
	size_t i, best = SIZE_MAX, bestat = SIZE_MAX;
	const char *f;

	for (i = 0; i < b->nsp; i++) {
		if (next[i] == UNSEARCHED || (next[i] != SIZE_MAX &&
		    next[i] < from)) {
			f = memmem(s + from, n - from, b->sp[i].text, b->sp[i].len);
			next[i] = f != NULL ? (size_t)(f - s) : SIZE_MAX;
		}
		if (next[i] < bestat || (next[i] == bestat && next[i] != SIZE_MAX &&
		    b->sp[i].len > b->sp[best].len)) {
			best = i;
			bestat = next[i];
		}
	}
	*at = bestat;
	return best;
}

int
ovl_bpe_encode(struct ovl_bpe *b, const char *text, size_t n,
    struct ovl_u32vec *out, size_t *bad_off)
{
	size_t ok, save = out->len, pos, at, i, next[SPECIAL_MAX];
	int rc;

	b->err[0] = '\0';
	if ((ok = ovl_utf8_valid(text, n)) != n) {
		snprintf(b->err, sizeof(b->err), "invalid UTF-8");
		*bad_off = ok;
		return -1;
	}
	if (n >= UINT32_MAX) {
		snprintf(b->err, sizeof(b->err), "document longer than 4 GiB");
		*bad_off = 0;
		return -1;
	}
	/* At most one id per byte: reserve once, write in place. */
	ovl_u32vec_reserve(out, n);
	if (b->policy == OVL_BPE_PLAIN || b->nsp == 0)
		return encode_ordinary(b, text, n, 0, out, bad_off);
	for (i = 0; i < b->nsp; i++)
		next[i] = UNSEARCHED;
	if (b->policy == OVL_BPE_ERROR) {
		if ((i = next_special(b, text, n, 0, next, &at)) != SIZE_MAX) {
			snprintf(b->err, sizeof(b->err), "special token text '%s'",
			    b->sp[i].text);
			*bad_off = at;
			return -1;
		}
		return encode_ordinary(b, text, n, 0, out, bad_off);
	}
	for (pos = 0;;) {
		if ((i = next_special(b, text, n, pos, next, &at)) == SIZE_MAX)
			at = n;
		rc = encode_ordinary(b, text + pos, at - pos, pos, out, bad_off);
		if (rc != 0) {
			out->len = save;
			return rc;
		}
		if (i == SIZE_MAX)
			break;
		if (b->policy == OVL_BPE_ALLOW)
			out->p[out->len++] = b->sp[i].id;
		pos = at + b->sp[i].len;
	}
	return 0;
}
