/*
 * hf: the model side of a tokenizer.json (hf.h): vocabulary, merges,
 * added tokens, BPE as HF's tokenizers library merges, and decoding.
 */
#include "hf.h"
#include "hf-int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash64.h"
#include "tok.h"

#define FILE_MAX	(1u << 30)
#define ADDED_MAX	(1u << 20)

struct added {
	char		*s;
	size_t		 n;
	uint32_t	 id;
	uint8_t		 special, normalized;
};

/* A byte trie over the added tokens' texts. */
struct tnode {
	uint32_t	child, sib;	/* 0: none (node 0 is the root) */
	uint32_t	added;		/* index + 1 of the token ending here */
	unsigned char	c;
};

struct sym {
	uint32_t	id, prev, next, len;
};

struct hentry {
	uint32_t	rank, pos, id;
};

struct ovl_hf {
	char		 name[40];
	uint32_t	 nids;
	uint32_t	*toff, *tlen;	/* id -> bytes in arena */
	struct ovl_buf	 arena;
	uint32_t	*slot;		/* vocab bytes -> id + 1 */
	size_t		 smask;
	uint64_t	*mkey;		/* merge pair -> rank, new id */
	uint32_t	*mrank, *mid;
	size_t		 mmask;
	int		 bytelevel, byte_fallback, fuse_unk, ignore_merges;
	uint32_t	 unk;
	uint32_t	 byte_id[256];
	struct added	*added;
	size_t		 nadded;
	struct tnode	*trie;
	size_t		 ntrie;
	unsigned char	 first[256];	/* 1: an added token starts with it */
	int		 any_normalized;
	struct hf_text	 text;
	enum ovl_bpe_special special;
	struct sym	*sym;
	size_t		 symcap;
	struct hentry	*heap;
	size_t		 heapcap;
	const char	*error;
	char		 errbuf[240];
};

/* ---- GPT-2's byte <-> printable character map ------------------------ */

static uint32_t
byte_cp(unsigned b)
{
	unsigned k = 0, i;

	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
		return b;
	for (i = 0; i < b; i++)
		if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174))
			k++;
	return 256 + k;
}

/* The inverse: code point -> byte, or -1. */
static int cp_byte_tab[324];

static void
init_cp_byte(void)
{
	unsigned b;

	if (cp_byte_tab[0] != 0)
		return;
	for (b = 0; b < 324; b++)
		cp_byte_tab[b] = -1;
	for (b = 0; b < 256; b++)
		cp_byte_tab[byte_cp(b)] = (int)b;
}

static size_t
put_utf8(uint32_t c, unsigned char *d)
{
	if (c < 0x80) {
		d[0] = (unsigned char)c;
		return 1;
	}
	if (c < 0x800) {
		d[0] = (unsigned char)(0xc0 | c >> 6);
		d[1] = (unsigned char)(0x80 | (c & 0x3f));
		return 2;
	}
	d[0] = (unsigned char)(0xe0 | c >> 12);
	d[1] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
	d[2] = (unsigned char)(0x80 | (c & 0x3f));
	return 3;
}

static size_t
utf8_len(unsigned char c)
{
	return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

/*
 * A byte-level vocabulary string to its bytes (into out, at most n): the
 * byte count, or -1 when a character is outside the map.
 */
static long
unmap_bytelevel(const unsigned char *s, size_t n, unsigned char *out)
{
	size_t i = 0, k = 0;

	while (i < n) {
		uint32_t c;
		size_t l = utf8_len(s[i]);

		if (l == 1)
			c = s[i];
		else if (l == 2 && i + 1 < n)
			c = (uint32_t)(s[i] & 0x1f) << 6 | (s[i + 1] & 0x3f);
		else
			return -1;
		if (c >= 324 || cp_byte_tab[c] < 0)
			return -1;
		out[k++] = (unsigned char)cp_byte_tab[c];
		i += l;
	}
	return (long)k;
}

/* ---- tables ------------------------------------------------------------ */

static uint32_t
vocab_find(const struct ovl_hf *h, const unsigned char *p, size_t n)
{
	size_t i = (size_t)ovl_hash64(p, n, 0) & h->smask;
	uint32_t v;

	while ((v = h->slot[i]) != 0) {
		uint32_t id = v - 1;
		if (h->tlen[id] == n &&
		    memcmp(h->arena.p + h->toff[id], p, n) == 0)
			return id;
		i = (i + 1) & h->smask;
	}
	return HF_NONE;
}

static void
vocab_index(struct ovl_hf *h, uint32_t id)
{
	size_t i = (size_t)ovl_hash64(h->arena.p + h->toff[id], h->tlen[id], 0) &
	    h->smask;

	while (h->slot[i] != 0)
		i = (i + 1) & h->smask;
	h->slot[i] = id + 1;
}

static inline size_t
pair_hash(uint64_t k, size_t mask)
{
	k *= 0x9e3779b97f4a7c15ull;
	return (size_t)(k >> 29) & mask;
}

static inline int
merge_find(const struct ovl_hf *h, uint32_t a, uint32_t b, uint32_t *rank,
    uint32_t *id)
{
	uint64_t k = (uint64_t)a << 32 | b;
	size_t i = pair_hash(k, h->mmask);

	for (;;) {
		if (h->mkey[i] == UINT64_MAX)
			return 0;
		if (h->mkey[i] == k) {
			*rank = h->mrank[i];
			*id = h->mid[i];
			return 1;
		}
		i = (i + 1) & h->mmask;
	}
}

static void
merge_put(struct ovl_hf *h, uint32_t a, uint32_t b, uint32_t rank, uint32_t id)
{
	uint64_t k = (uint64_t)a << 32 | b;
	size_t i = pair_hash(k, h->mmask);

	while (h->mkey[i] != UINT64_MAX && h->mkey[i] != k)
		i = (i + 1) & h->mmask;
	h->mkey[i] = k;		/* a later duplicate wins, as in HF */
	h->mrank[i] = rank;
	h->mid[i] = id;
}

static size_t
pow2_above(size_t n)
{
	size_t s = 64;

	while (s < n * 2)
		s *= 2;
	return s;
}

/* ---- loading ------------------------------------------------------------ */

static int
fail(struct ovl_hf *h, char *err, size_t errlen, const char *path,
    const char *msg)
{
	snprintf(err, errlen, "%s: %s", path, msg);
	ovl_hf_free(h);
	return -1;
}

static void
set_token(struct ovl_hf *h, uint32_t id, const unsigned char *p, size_t n)
{
	h->toff[id] = (uint32_t)h->arena.len;
	h->tlen[id] = (uint32_t)n;
	ovl_buf_append(&h->arena, p, n);
}

static int
load_vocab(struct ovl_hf *h, json_t *vocab, uint32_t nids, char *msg,
    size_t msglen)
{
	const char *key;
	json_t *v;
	unsigned char tmp[4096];

	h->nids = nids;
	h->toff = ovl_xcalloc(nids, sizeof(*h->toff));
	h->tlen = ovl_xcalloc(nids, sizeof(*h->tlen));
	h->smask = pow2_above(json_object_size(vocab)) - 1;
	h->slot = ovl_xcalloc(h->smask + 1, sizeof(*h->slot));
	json_object_foreach(vocab, key, v) {
		uint32_t id = (uint32_t)json_integer_value(v);
		size_t n = strlen(key);
		long k;

		if (h->tlen[id] != 0) {
			snprintf(msg, msglen, "model.vocab: id %" PRIu32
			    " given twice", id);
			return -1;
		}
		if (h->bytelevel && n <= sizeof(tmp) &&
		    (k = unmap_bytelevel((const unsigned char *)key, n, tmp)) > 0) {
			set_token(h, id, tmp, (size_t)k);
			vocab_index(h, id);
		} else {
			/* outside the byte map: kept for decoding only */
			set_token(h, id, (const unsigned char *)key, n);
			if (!h->bytelevel)
				vocab_index(h, id);
		}
	}
	return 0;
}

static int
check_vocab(json_t *vocab, json_t *added, uint32_t *nids, char *msg,
    size_t msglen)
{
	const char *key;
	json_t *v;
	size_t i;
	json_int_t max = -1;

	if (!json_is_object(vocab) || json_object_size(vocab) == 0) {
		snprintf(msg, msglen, "model.vocab is missing or empty");
		return -1;
	}
	json_object_foreach(vocab, key, v) {
		json_int_t id = json_integer_value(v);
		if (!json_is_integer(v) || id < 0 || id > OVL_BPE_RANK_MAX) {
			snprintf(msg, msglen, "model.vocab: bad id for '%s'", key);
			return -1;
		}
		if (*key == '\0') {
			snprintf(msg, msglen, "model.vocab: an empty token");
			return -1;
		}
		if (id > max)
			max = id;
	}
	json_array_foreach(added, i, v) {
		json_t *id = json_object_get(v, "id");
		if (!json_is_integer(id) || json_integer_value(id) < 0 ||
		    json_integer_value(id) > OVL_BPE_RANK_MAX ||
		    !json_is_string(json_object_get(v, "content")) ||
		    json_string_length(json_object_get(v, "content")) == 0) {
			snprintf(msg, msglen, "added_tokens[%zu]: needs an id "
			    "and a non-empty content", i);
			return -1;
		}
		if (json_integer_value(id) > max)
			max = json_integer_value(id);
	}
	*nids = (uint32_t)max + 1;
	return 0;
}

static int
merge_sides(json_t *m, const char **a, size_t *an, const char **b, size_t *bn)
{
	if (json_is_array(m)) {
		if (json_array_size(m) != 2 ||
		    !json_is_string(json_array_get(m, 0)) ||
		    !json_is_string(json_array_get(m, 1)))
			return -1;
		*a = json_string_value(json_array_get(m, 0));
		*an = json_string_length(json_array_get(m, 0));
		*b = json_string_value(json_array_get(m, 1));
		*bn = json_string_length(json_array_get(m, 1));
		return 0;
	}
	if (json_is_string(m)) {
		const char *s = json_string_value(m);
		const char *sp = strchr(s, ' ');

		if (sp == NULL || strchr(sp + 1, ' ') != NULL)
			return -1;
		*a = s;
		*an = (size_t)(sp - s);
		*b = sp + 1;
		*bn = strlen(sp + 1);
		return 0;
	}
	return -1;
}

static int
load_merges(struct ovl_hf *h, json_t *vocab, json_t *merges, char *msg,
    size_t msglen)
{
	size_t i, n = json_array_size(merges);
	char *cat = NULL;
	size_t catcap = 0;
	json_t *m;

	h->mmask = pow2_above(n) - 1;
	h->mkey = ovl_xmalloc((h->mmask + 1) * sizeof(*h->mkey));
	h->mrank = ovl_xmalloc((h->mmask + 1) * sizeof(*h->mrank));
	h->mid = ovl_xmalloc((h->mmask + 1) * sizeof(*h->mid));
	memset(h->mkey, 0xff, (h->mmask + 1) * sizeof(*h->mkey));
	json_array_foreach(merges, i, m) {
		const char *a, *b;
		size_t an, bn;
		json_t *ja, *jb, *jc;

		if (merge_sides(m, &a, &an, &b, &bn) != 0) {
			snprintf(msg, msglen, "model.merges[%zu]: expected \"A B\" "
			    "or [\"A\", \"B\"]", i);
			free(cat);
			return -1;
		}
		if (an + bn + 1 > catcap) {
			catcap = an + bn + 64;
			cat = ovl_xrealloc(cat, catcap);
		}
		memcpy(cat, a, an);
		cat[an] = '\0';
		ja = json_object_getn(vocab, cat, an);
		memcpy(cat, b, bn);
		cat[bn] = '\0';
		jb = json_object_getn(vocab, cat, bn);
		memcpy(cat, a, an);
		memcpy(cat + an, b, bn);
		cat[an + bn] = '\0';
		jc = json_object_getn(vocab, cat, an + bn);
		if (ja == NULL || jb == NULL || jc == NULL) {
			snprintf(msg, msglen, "model.merges[%zu]: '%.*s' + '%.*s': "
			    "a token is not in the vocabulary", i, (int)an, a,
			    (int)bn, b);
			free(cat);
			return -1;
		}
		merge_put(h, (uint32_t)json_integer_value(ja),
		    (uint32_t)json_integer_value(jb), (uint32_t)i,
		    (uint32_t)json_integer_value(jc));
	}
	free(cat);
	return 0;
}

static void
trie_add(struct ovl_hf *h, const unsigned char *s, size_t n, uint32_t idx)
{
	uint32_t node = 0;
	size_t i;

	if (n > 0)
		h->first[s[0]] = 1;
	for (i = 0; i < n; i++) {
		uint32_t c = h->trie[node].child;

		while (c != 0 && h->trie[c].c != s[i])
			c = h->trie[c].sib;
		if (c == 0) {
			h->trie = ovl_xrealloc(h->trie,
			    (h->ntrie + 1) * sizeof(*h->trie));
			c = (uint32_t)h->ntrie++;
			memset(&h->trie[c], 0, sizeof(h->trie[c]));
			h->trie[c].c = s[i];
			h->trie[c].sib = h->trie[node].child;
			h->trie[node].child = c;
		}
		node = c;
	}
	if (h->trie[node].added == 0)
		h->trie[node].added = idx + 1;
}

static int
load_added(struct ovl_hf *h, json_t *added, char *msg, size_t msglen)
{
	size_t i;
	json_t *a;

	h->nadded = json_array_size(added);
	if (h->nadded > ADDED_MAX) {
		snprintf(msg, msglen, "added_tokens: more than %u", ADDED_MAX);
		return -1;
	}
	h->added = ovl_xcalloc(h->nadded + 1, sizeof(*h->added));
	h->trie = ovl_xcalloc(1, sizeof(*h->trie));
	h->ntrie = 1;
	json_array_foreach(added, i, a) {
		struct added *t = &h->added[i];
		static const char *const opts[] = { "lstrip", "rstrip",
		    "single_word" };
		size_t k;

		for (k = 0; k < 3; k++)
			if (json_is_true(json_object_get(a, opts[k]))) {
				snprintf(msg, msglen, "added token '%s': %s is "
				    "not supported", json_string_value(
				    json_object_get(a, "content")), opts[k]);
				return -1;
			}
		t->s = ovl_xstrdup(json_string_value(json_object_get(a, "content")));
		t->n = strlen(t->s);
		t->id = (uint32_t)json_integer_value(json_object_get(a, "id"));
		t->special = json_is_true(json_object_get(a, "special"));
		t->normalized = json_is_true(json_object_get(a, "normalized"));
		if (t->normalized) {
			if (!ovl_hf__text_no_norm(&h->text)) {
				snprintf(msg, msglen, "added token '%s': normalized "
				    "with a normalizer is not supported", t->s);
				return -1;
			}
			h->any_normalized = 1;
		}
		if (h->tlen[t->id] == 0)
			set_token(h, t->id, (const unsigned char *)t->s, t->n);
		trie_add(h, (const unsigned char *)t->s, t->n, (uint32_t)i);
	}
	return 0;
}

static int
load_model(struct ovl_hf *h, json_t *root, char *msg, size_t msglen)
{
	json_t *model = json_object_get(root, "model");
	json_t *vocab = json_object_get(model, "vocab");
	json_t *added = json_object_get(root, "added_tokens");
	const char *ty = json_string_value(json_object_get(model, "type"));
	static const char *const empty_ok[] = { "continuing_subword_prefix",
	    "end_of_word_suffix" };
	json_t *dec = json_object_get(root, "decoder");
	json_t *unk;
	uint32_t nids;
	size_t i;

	if (ty == NULL || strcmp(ty, "BPE") != 0) {
		snprintf(msg, msglen, "model '%s' is not supported (BPE is)",
		    ty != NULL ? ty : "(no type)");
		return -1;
	}
	for (i = 0; i < 2; i++) {
		json_t *v = json_object_get(model, empty_ok[i]);
		if (v != NULL && !json_is_null(v) &&
		    !(json_is_string(v) && json_string_length(v) == 0)) {
			snprintf(msg, msglen, "BPE %s '%s' is not supported",
			    empty_ok[i], json_is_string(v) ?
			    json_string_value(v) : "?");
			return -1;
		}
	}
	if (json_is_number(json_object_get(model, "dropout"))) {
		snprintf(msg, msglen, "BPE dropout is not supported");
		return -1;
	}
	if (added != NULL && !json_is_array(added)) {
		snprintf(msg, msglen, "added_tokens is not an array");
		return -1;
	}
	if (check_vocab(vocab, added, &nids, msg, msglen) != 0)
		return -1;
	h->bytelevel = h->text.bytelevel ||
	    (dec != NULL && json_is_string(json_object_get(dec, "type")) &&
	    strcmp(json_string_value(json_object_get(dec, "type")),
	    "ByteLevel") == 0);
	h->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
	h->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
	h->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
	if (load_vocab(h, vocab, nids, msg, msglen) != 0)
		return -1;
	if (!json_is_array(json_object_get(model, "merges"))) {
		snprintf(msg, msglen, "model.merges is missing");
		return -1;
	}
	if (load_merges(h, vocab, json_object_get(model, "merges"), msg,
	    msglen) != 0)
		return -1;
	h->unk = HF_NONE;
	unk = json_object_get(model, "unk_token");
	if (json_is_string(unk)) {
		json_t *u = json_object_get(vocab, json_string_value(unk));
		if (u == NULL) {
			snprintf(msg, msglen, "unk_token '%s' is not in the "
			    "vocabulary", json_string_value(unk));
			return -1;
		}
		h->unk = (uint32_t)json_integer_value(u);
	}
	for (i = 0; i < 256; i++) {
		unsigned char k[8];
		char fb[8];
		json_t *v;

		h->byte_id[i] = HF_NONE;
		if (h->bytelevel) {
			k[put_utf8(byte_cp((unsigned)i), k)] = '\0';
			v = json_object_get(vocab, (const char *)k);
		} else {
			snprintf(fb, sizeof(fb), "<0x%02X>", (unsigned)i);
			v = json_object_get(vocab, fb);
		}
		if (v != NULL)
			h->byte_id[i] = (uint32_t)json_integer_value(v);
	}
	return added != NULL ? load_added(h, added, msg, msglen) : 0;
}

struct ovl_hf *
ovl_hf_open(const char *path, char *err, size_t errlen)
{
	struct ovl_hf *h = ovl_xcalloc(1, sizeof(*h));
	json_error_t je;
	json_t *root;
	char msg[300];
	unsigned char *data;
	size_t len = 0;
	FILE *fp;
	int rc;

	init_cp_byte();
	if ((fp = fopen(path, "rb")) == NULL) {
		snprintf(msg, sizeof(msg), "%s", strerror(errno));
		return fail(h, err, errlen, path, msg), NULL;
	}
	data = NULL;
	for (;;) {
		size_t got;
		data = ovl_xrealloc(data, len + (1u << 20) + 1);
		got = fread(data + len, 1, 1u << 20, fp);
		len += got;
		if (got == 0 || len > FILE_MAX)
			break;
	}
	rc = ferror(fp) ? errno : 0;
	fclose(fp);
	if (rc != 0 || len > FILE_MAX) {
		free(data);
		return fail(h, err, errlen, path, rc != 0 ? strerror(rc) :
		    "larger than 1 GiB"), NULL;
	}
	snprintf(h->name, sizeof(h->name), "hf:%016" PRIx64,
	    ovl_hash64(data, len, 0));
	root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES |
	    JSON_ALLOW_NUL, &je);
	free(data);
	if (root == NULL) {
		snprintf(msg, sizeof(msg), "line %d, column %d: %s (is it a "
		    "tokenizer.json?)", je.line, je.column, je.text);
		return fail(h, err, errlen, path, msg), NULL;
	}
	if (!json_is_object(root) || json_object_get(root, "model") == NULL) {
		json_decref(root);
		return fail(h, err, errlen, path, "not a tokenizer.json "
		    "(no \"model\")"), NULL;
	}
	if (ovl_hf__text_load(&h->text, json_object_get(root, "normalizer"),
	    json_object_get(root, "pre_tokenizer"), msg, sizeof(msg)) != 0 ||
	    load_model(h, root, msg, sizeof(msg)) != 0) {
		json_decref(root);
		return fail(h, err, errlen, path, msg), NULL;
	}
	json_decref(root);
	h->special = OVL_BPE_PLAIN;
	return h;
}

void
ovl_hf_free(struct ovl_hf *h)
{
	size_t i;

	if (h == NULL)
		return;
	for (i = 0; i < h->nadded; i++)
		free(h->added[i].s);
	free(h->added);
	free(h->trie);
	free(h->toff);
	free(h->tlen);
	ovl_buf_free(&h->arena);
	free(h->slot);
	free(h->mkey);
	free(h->mrank);
	free(h->mid);
	ovl_hf__text_free(&h->text);
	free(h->sym);
	free(h->heap);
	free(h);
}

const char *
ovl_hf_name(const struct ovl_hf *h)
{
	return h->name;
}

uint32_t
ovl_hf_vocab(const struct ovl_hf *h)
{
	return h->nids;
}

int64_t
ovl_hf_token_id(const struct ovl_hf *h, const char *text)
{
	size_t i, n = strlen(text);
	unsigned char tmp[4096];
	long k;

	for (i = 0; i < h->nadded; i++)
		if (strcmp(h->added[i].s, text) == 0)
			return h->added[i].id;
	if (h->bytelevel) {
		if (n > sizeof(tmp) ||
		    (k = unmap_bytelevel((const unsigned char *)text, n, tmp)) <= 0)
			return -1;
		i = vocab_find(h, tmp, (size_t)k);
	} else
		i = vocab_find(h, (const unsigned char *)text, n);
	return i == HF_NONE ? -1 : (int64_t)i;
}

int64_t
ovl_hf_default_eod(const struct ovl_hf *h)
{
	static const char *const names[] = { "<|end_of_text|>",
	    "<|endoftext|>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81"
	    "sentence\xef\xbd\x9c>", "<eos>", "</s>", "<|end|>" };
	size_t i;
	int64_t id;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((id = ovl_hf_token_id(h, names[i])) >= 0)
			return id;
	return -1;
}

void
ovl_hf_set_special(struct ovl_hf *h, enum ovl_bpe_special policy)
{
	h->special = policy;
}

const char *
ovl_hf_error(const struct ovl_hf *h)
{
	return h->error;
}

/* ---- BPE ---------------------------------------------------------------- */

static void
sym_add(struct ovl_hf *h, size_t *n, uint32_t id, uint32_t len)
{
	struct sym *s;

	if (*n == h->symcap) {
		h->symcap = h->symcap ? h->symcap * 2 : 256;
		h->sym = ovl_xrealloc(h->sym, h->symcap * sizeof(*h->sym));
	}
	s = &h->sym[*n];
	s->id = id;
	s->len = len;
	s->prev = *n > 0 ? (uint32_t)*n - 1 : HF_NONE;
	s->next = HF_NONE;
	if (*n > 0)
		h->sym[*n - 1].next = (uint32_t)*n;
	(*n)++;
}

static inline int
hless(const struct hentry *a, const struct hentry *b)
{
	return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void
hpush(struct ovl_hf *h, size_t *n, uint32_t rank, uint32_t pos, uint32_t id)
{
	struct hentry e = { rank, pos, id };
	size_t i;

	if (*n == h->heapcap) {
		h->heapcap = h->heapcap ? h->heapcap * 2 : 256;
		h->heap = ovl_xrealloc(h->heap, h->heapcap * sizeof(*h->heap));
	}
	i = (*n)++;
	while (i > 0 && hless(&e, &h->heap[(i - 1) / 2])) {
		h->heap[i] = h->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->heap[i] = e;
}

static struct hentry
hpop(struct ovl_hf *h, size_t *n)
{
	struct hentry top = h->heap[0], last = h->heap[--(*n)];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && hless(&h->heap[c + 1], &h->heap[c]))
			c++;
		if (!hless(&h->heap[c], &last))
			break;
		h->heap[i] = h->heap[c];
		i = c;
	}
	if (*n > 0)
		h->heap[i] = last;
	return top;
}

/* The first symbols of a piece, as HF's BPE::merge_word makes them. */
static size_t
initial_symbols(struct ovl_hf *h, const unsigned char *p, size_t n)
{
	size_t ns = 0, i, l, k;
	uint32_t unk_len = 0;
	int have_unk = 0;

	for (i = 0; i < n; i += l) {
		uint32_t id;

		if (h->bytelevel) {
			l = 1;
			id = h->byte_id[p[i]];
		} else {
			l = utf8_len(p[i]);
			if (l > n - i)
				l = n - i;
			id = vocab_find(h, p + i, l);
		}
		if (id != HF_NONE) {
			if (have_unk) {
				sym_add(h, &ns, h->unk, unk_len);
				have_unk = 0;
			}
			sym_add(h, &ns, id, (uint32_t)l);
			continue;
		}
		if (h->byte_fallback && !h->bytelevel) {
			for (k = 0; k < l && h->byte_id[p[i + k]] != HF_NONE; k++)
				;
			if (k == l) {
				for (k = 0; k < l; k++)
					sym_add(h, &ns, h->byte_id[p[i + k]], 1);
				continue;
			}
		}
		if (h->unk == HF_NONE)
			continue;	/* HF drops it too */
		if (have_unk && h->fuse_unk)
			unk_len += (uint32_t)l;
		else {
			if (have_unk)
				sym_add(h, &ns, h->unk, unk_len);
			have_unk = 1;
			unk_len = (uint32_t)l;
		}
	}
	if (have_unk)
		sym_add(h, &ns, h->unk, unk_len);
	return ns;
}

static void
bpe_piece(struct ovl_hf *h, const unsigned char *p, size_t n,
    struct ovl_u32vec *out)
{
	size_t ns, nh = 0, i;
	uint32_t rank, id;

	if (h->ignore_merges && (id = vocab_find(h, p, n)) != HF_NONE) {
		ovl_u32vec_push(out, id);
		return;
	}
	ns = initial_symbols(h, p, n);
	for (i = 0; i + 1 < ns; i++)
		if (merge_find(h, h->sym[i].id, h->sym[i + 1].id, &rank, &id))
			hpush(h, &nh, rank, (uint32_t)i, id);
	while (nh > 0) {
		struct hentry top = hpop(h, &nh);
		struct sym *s = &h->sym[top.pos], *r;
		uint32_t nx;

		if (s->len == 0 || s->next == HF_NONE)
			continue;
		nx = s->next;
		r = &h->sym[nx];
		/* an expired entry: the pair there now makes another token */
		if (!merge_find(h, s->id, r->id, &rank, &id) || id != top.id)
			continue;
		s->id = top.id;
		s->len += r->len;
		s->next = r->next;
		r->len = 0;
		if (s->next != HF_NONE)
			h->sym[s->next].prev = top.pos;
		if (s->prev != HF_NONE &&
		    merge_find(h, h->sym[s->prev].id, s->id, &rank, &id))
			hpush(h, &nh, rank, s->prev, id);
		if (s->next != HF_NONE &&
		    merge_find(h, s->id, h->sym[s->next].id, &rank, &id))
			hpush(h, &nh, rank, top.pos, id);
	}
	for (i = 0; i < ns; i++)
		if (h->sym[i].len != 0)
			ovl_u32vec_push(out, h->sym[i].id);
}

/* ---- encoding ----------------------------------------------------------- */

/*
 * The longest added token at s[0..n) of the pass (normalized 0 or 1) that
 * the special-token policy lets match: its index, or -1.
 */
static long
added_at(const struct ovl_hf *h, const unsigned char *s, size_t n, int pass)
{
	uint32_t node = 0;
	long best = -1;
	size_t i;

	for (i = 0; i < n; i++) {
		uint32_t c = h->trie[node].child;

		while (c != 0 && h->trie[c].c != s[i])
			c = h->trie[c].sib;
		if (c == 0)
			break;
		node = c;
		if (h->trie[node].added != 0) {
			const struct added *a = &h->added[h->trie[node].added - 1];
			if (a->normalized == pass &&
			    !(a->special && h->special == OVL_BPE_PLAIN))
				best = (long)h->trie[node].added - 1;
		}
	}
	return best;
}

static int
encode_text(struct ovl_hf *h, const unsigned char *s, size_t n, int first,
    struct ovl_u32vec *out, size_t base, size_t *bad_off)
{
	const unsigned char *b;
	const struct hf_pieces *pc;
	size_t i;

	if (n == 0)
		return 0;
	if (ovl_hf__text_run(&h->text, s, n, first, &b, &pc) != 0) {
		snprintf(h->errbuf, sizeof(h->errbuf), "%s", h->text.err);
		h->error = h->errbuf;
		*bad_off = base;
		return -1;
	}
	for (i = 0; i < pc->len; i++)
		bpe_piece(h, b + pc->p[i].off, pc->p[i].len, out);
	return 0;
}

/* Split s[from..to) on the added tokens of a pass; the rest goes on. */
static int
encode_span(struct ovl_hf *h, const unsigned char *s, size_t from, size_t to,
    int pass, struct ovl_u32vec *out, size_t *bad_off)
{
	size_t i = from, prev = from;

	while (i < to) {
		/* most bytes start no added token: no walk down the trie */
		long a = h->first[s[i]] ? added_at(h, s + i, to - i, pass) : -1;
		const struct added *t;

		if (a < 0) {
			i++;
			continue;
		}
		t = &h->added[a];
		if ((pass == 0 && h->any_normalized ?
		    encode_span(h, s, prev, i, 1, out, bad_off) :
		    encode_text(h, s + prev, i - prev, prev == 0, out, prev,
		    bad_off)) != 0)
			return -1;
		if (t->special && h->special == OVL_BPE_ERROR) {
			snprintf(h->errbuf, sizeof(h->errbuf), "special token "
			    "text '%s'", t->s);
			h->error = h->errbuf;
			*bad_off = i;
			return -1;
		}
		if (!(t->special && h->special == OVL_BPE_STRIP))
			ovl_u32vec_push(out, t->id);
		i += t->n;
		prev = i;
	}
	if (pass == 0 && h->any_normalized)
		return encode_span(h, s, prev, to, 1, out, bad_off);
	return encode_text(h, s + prev, to - prev, prev == 0, out, prev, bad_off);
}

int
ovl_hf_encode(struct ovl_hf *h, const char *text, size_t n,
    struct ovl_u32vec *out, size_t *bad_off)
{
	size_t start = out->len, ok;

	h->error = NULL;
	ok = ovl_utf8_valid(text, n);
	if (ok != n) {
		*bad_off = ok;
		h->error = "invalid UTF-8";
		return -1;
	}
	if (encode_span(h, (const unsigned char *)text, 0, n, 0, out,
	    bad_off) != 0) {
		out->len = start;
		return -1;
	}
	return 0;
}

/* ---- decoding ----------------------------------------------------------- */

int
ovl_hf_decode(const struct ovl_hf *h, const uint32_t *ids, size_t n,
    struct ovl_buf *out)
{
	size_t start = out->len, i, j, k;
	unsigned v;

	for (i = 0; i < n; i++) {
		const unsigned char *t;
		size_t l;

		if (ids[i] >= h->nids || (h->tlen[ids[i]] == 0))
			return -1;
		t = h->arena.p + h->toff[ids[i]];
		l = h->tlen[ids[i]];
		if (!h->bytelevel && h->byte_fallback && l == 6 &&
		    memcmp(t, "<0x", 3) == 0 && t[5] == '>' &&
		    sscanf((const char *)t + 3, "%2X", &v) == 1) {
			unsigned char c = (unsigned char)v;
			ovl_buf_append(out, &c, 1);
			continue;
		}
		ovl_buf_append(out, t, l);
	}
	if (h->bytelevel)
		return 0;
	/* the metaspace back to spaces, and the prepended one dropped */
	for (j = k = start; j < out->len;) {
		if (out->len - j >= 3 && memcmp(out->p + j, "\xe2\x96\x81", 3) == 0) {
			out->p[k++] = ' ';
			j += 3;
		} else
			out->p[k++] = out->p[j++];
	}
	out->len = k;
	if (h->text.prepends && out->len > start && out->p[start] == ' ') {
		memmove(out->p + start, out->p + start + 1, out->len - start - 1);
		out->len--;
	}
	return 0;
}
