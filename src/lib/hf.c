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
	ovl_hf__vocab_init(h, json_object_size(vocab));
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
			ovl_hf__vocab_index(h, id);
		} else {
			/* outside the byte map: kept for decoding only */
			set_token(h, id, (const unsigned char *)key, n);
			if (!h->bytelevel)
				ovl_hf__vocab_index(h, id);
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

	ovl_hf__merge_init(h, n);
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
		ovl_hf__merge_put(h, (uint32_t)json_integer_value(ja),
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
			if (h->ntrie == h->trie_cap) {
				h->trie_cap *= 2;
				h->trie = ovl_xrealloc(h->trie,
				    h->trie_cap * sizeof(*h->trie));
			}
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
	h->ntrie = h->trie_cap = 1;
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
	for (size_t cap = 0;;) {
		size_t got;
		if (len == cap) {	/* doubled: a 30 MB file is copied twice at most */
			cap = cap == 0 ? 1u << 20 : cap * 2;
			data = ovl_xrealloc(data, cap + 1);
		}
		got = fread(data + len, 1, cap - len, fp);
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
	h->fast = 1;
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
	ovl_hf__tables_free(h);
	ovl_hf__text_free(&h->text);
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
		i = ovl_hf__vocab_find(h, tmp, (size_t)k);
	} else
		i = ovl_hf__vocab_find(h, (const unsigned char *)text, n);
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

void
ovl_hf_set_fast(struct ovl_hf *h, int on)
{
	size_t i;

	h->fast = on;
	for (i = 0; i < h->text.npre; i++)
		if (h->text.pre[i].re != NULL)
			ovl_pretok_set_scanner(h->text.pre[i].re, on);
}

const char *
ovl_hf_error(const struct ovl_hf *h)
{
	return h->error;
}

/* ---- BPE ---------------------------------------------------------------- */

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

/* encode_text when the pieces are one regex's matches and gaps. */
static int
encode_direct(struct ovl_hf *h, const unsigned char *s, size_t n,
    struct ovl_u32vec *out, size_t base, size_t *bad_off)
{
	size_t pos = 0, prev = 0, ms, me;
	int rc;

	ovl_hf__text_norm(&h->text, s, n, &s, &n);
	while ((rc = ovl_pretok_next(h->text.direct, s, n, pos, &ms, &me,
	    h->errbuf, sizeof(h->errbuf))) > 0) {
		if (ms > prev)
			ovl_hf__piece(h, s + prev, ms - prev, out);
		ovl_hf__piece(h, s + ms, me - ms, out);
		prev = pos = me;
	}
	if (rc < 0) {
		h->error = h->errbuf;
		*bad_off = base;
		return -1;
	}
	if (prev < n)
		ovl_hf__piece(h, s + prev, n - prev, out);
	return 0;
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
	if (h->fast && h->text.direct != NULL)
		return encode_direct(h, s, n, out, base, bad_off);
	if (ovl_hf__text_run(&h->text, s, n, first, &b, &pc) != 0) {
		snprintf(h->errbuf, sizeof(h->errbuf), "%s", h->text.err);
		h->error = h->errbuf;
		*bad_off = base;
		return -1;
	}
	for (i = 0; i < pc->len; i++)
		ovl_hf__piece(h, b + pc->p[i].off, pc->p[i].len, out);
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
