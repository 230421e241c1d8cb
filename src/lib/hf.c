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
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

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

/* The id of a vocabulary token by its text in the file, or HF_NONE. */
static uint32_t
text_id(const struct ovl_hf *h, const unsigned char *s, size_t n)
{
	unsigned char tmp[4096];
	long k;

	if (!h->bytelevel)
		return ovl_hf__vocab_find(h, s, n, 0);
	if (n <= sizeof(tmp) && (k = unmap_bytelevel(s, n, tmp)) > 0)
		return ovl_hf__vocab_find(h, tmp, (size_t)k, 0);
	return ovl_hf__vocab_find(h, s, n, 1);
}

/* A vocabulary entry read: its bytes (raw: its text) in the arena. */
struct vent {
	uint32_t	id, off, len, raw;
};

/* The largest id of the added tokens (-1: none) into *max. */
/*
 * An array of n elements of size bytes, full at *cap, with room for more:
 * at first for first (the most a section of the file can hold, at once:
 * the pages never touched are never faulted in), then twice as many.
 */
static void *
grow_huge(void *old, size_t n, size_t *cap, size_t first, size_t size)
{
	void *g;

	*cap = *cap != 0 ? *cap * 2 : first;
	g = ovl_xmalloc_huge(*cap * size);
	if (n > 0)
		memcpy(g, old, n * size);
	free(old);
	return g;
}

static int
check_added(json_t *added, int64_t *max, char *msg, size_t msglen)
{
	size_t i;
	json_t *v;

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
		if (json_integer_value(id) > *max)
			*max = json_integer_value(id);
	}
	return 0;
}

/*
 * model.vocab, scanned in place: the tokens' bytes in the arena, indexed.
 * 0, -1 with msg, or -2 when the text is not well-formed.
 */
static int
load_vocab(struct ovl_hf *h, struct hf_doc *d, json_t *added, char *msg,
    size_t msglen)
{
	struct vent *v = NULL;
	size_t nv = 0, cap = 0, i, kn;
	const unsigned char *key;
	unsigned char tmp[4096];
	int64_t id, max = -1;
	long k;
	int rc;

	if (d->vocab.p == NULL) {
		snprintf(msg, msglen, "model.vocab is missing or empty");
		return -1;
	}
	while ((rc = ovl_hf__vocab_next(d, &key, &kn, &id)) == 1) {
		if (id < 0 || id > OVL_BPE_RANK_MAX) {
			snprintf(msg, msglen, "model.vocab: bad id for '%.*s'",
			    (int)(kn > 200 ? 200 : kn), (const char *)key);
			goto fail;
		}
		if (kn == 0) {
			snprintf(msg, msglen, "model.vocab: an empty token");
			goto fail;
		}
		/* an entry takes six bytes or more */
		if (nv == cap)
			v = grow_huge(v, nv, &cap, d->vocab.n / 6 + 16,
			    sizeof(*v));
		v[nv].id = (uint32_t)id;
		v[nv].off = (uint32_t)h->arena.len;
		if (h->bytelevel && kn <= sizeof(tmp) &&
		    (k = unmap_bytelevel(key, kn, tmp)) > 0) {
			ovl_buf_append(&h->arena, tmp, (size_t)k);
			v[nv].raw = 0;
		} else {
			/* outside the byte map: by its text */
			ovl_buf_append(&h->arena, key, kn);
			v[nv].raw = (uint32_t)h->bytelevel;
		}
		v[nv].len = (uint32_t)h->arena.len - v[nv].off;
		nv++;
		if (id > max)
			max = id;
	}
	if (rc < 0) {
		free(v);
		return -2;
	}
	if (nv == 0) {
		snprintf(msg, msglen, "model.vocab is missing or empty");
		goto fail;
	}
	if (check_added(added, &max, msg, msglen) != 0)
		goto fail;
	h->nids = (uint32_t)max + 1;
	h->toff = ovl_xcalloc(h->nids, sizeof(*h->toff));
	h->tlen = ovl_xcalloc(h->nids, sizeof(*h->tlen));
	ovl_hf__vocab_init(h, nv);
	for (i = 0; i < nv; i++) {
		uint32_t t = v[i].id;

		if (h->tlen[t] != 0) {
			snprintf(msg, msglen, "model.vocab: id %" PRIu32
			    " given twice", t);
			goto fail;
		}
		h->toff[t] = v[i].off;
		h->tlen[t] = v[i].len;
		if (ovl_hf__vocab_index(h, t, (int)v[i].raw) != 0) {
			snprintf(msg, msglen, "model.vocab: the token of id %"
			    PRIu32 " is given twice", t);
			goto fail;
		}
	}
	free(v);
	return 0;
fail:
	free(v);
	return -1;
}

/*
 * A merge read: its sides' bytes (byte level: unmapped; else their text)
 * back to back in a buffer (raw 0: x the offset, y and z the lengths), or,
 * when a side is outside the byte map, its ids found at once (raw 1: x, y
 * and z the ids of a, b and a + b).
 */
struct mrec {
	uint32_t	x, y, z, raw;
};

#define MERGE_AHEAD	8	/* merges whose slots are fetched ahead */

/* The text of merge k in the file, for a message. */
static void
merge_text(struct hf_doc *d, size_t k, char *out, size_t outlen)
{
	const unsigned char *a = NULL, *b = NULL;
	size_t an = 0, bn = 0, i;

	ovl_hf__doc_rewind(d);
	for (i = 0; i <= k; i++)
		if (ovl_hf__merges_next(d, &a, &an, &b, &bn) != 2)
			break;
	snprintf(out, outlen, "'%.*s' + '%.*s'", (int)(an > 80 ? 80 : an),
	    (const char *)a, (int)(bn > 80 ? 80 : bn), (const char *)b);
}

/*
 * model.merges, scanned in place, into the merge table: read first, then
 * their tokens looked up, the table slots of a few merges ahead fetched
 * (a file has hundreds of thousands, and each look-up is a cache miss).
 * 0, -1 with msg, or -2 when the text is not well-formed.
 */
static int
load_merges(struct ovl_hf *h, struct hf_doc *d, char *msg, size_t msglen)
{
	struct mrec *r = NULL;
	uint64_t hv[MERGE_AHEAD][3];
	size_t n = 0, cap = 0, an, bn, i, used = 0;
	const unsigned char *a, *b;
	unsigned char *bytes;
	struct ovl_buf raw = { 0 };
	char what[200];
	long ka, kb;
	int rc = 0;

	if (d->merges.p == NULL) {
		snprintf(msg, msglen, "model.merges is missing");
		return -1;
	}
	/* the bytes are never more than their text */
	bytes = ovl_xmalloc_huge(d->merges.n + 1);
	ovl_hf__doc_rewind(d);
	while ((rc = ovl_hf__merges_next(d, &a, &an, &b, &bn)) > 0) {
		struct mrec *m;

		if (rc == 1) {
			snprintf(msg, msglen, "model.merges[%zu]: expected \"A B\" "
			    "or [\"A\", \"B\"]", n);
			rc = -1;
			goto out;
		}
		/* a merge takes six bytes or more */
		if (n == cap)
			r = grow_huge(r, n, &cap, d->merges.n / 6 + 16,
			    sizeof(*r));
		m = &r[n++];
		m->raw = 0;
		m->x = (uint32_t)used;
		if (!h->bytelevel) {
			memcpy(bytes + used, a, an);
			memcpy(bytes + used + an, b, bn);
			m->y = (uint32_t)an;
			m->z = (uint32_t)bn;
		} else if ((ka = unmap_bytelevel(a, an, bytes + used)) > 0 &&
		    (kb = unmap_bytelevel(b, bn, bytes + used + ka)) > 0) {
			m->y = (uint32_t)ka;
			m->z = (uint32_t)kb;
		} else {
			m->raw = 1;
			m->x = text_id(h, a, an);
			m->y = text_id(h, b, bn);
			raw.len = 0;
			ovl_buf_append(&raw, a, an);
			ovl_buf_append(&raw, b, bn);
			m->z = text_id(h, raw.p, raw.len);
			continue;
		}
		used += m->y + m->z;
	}
	if (rc < 0) {
		rc = -2;
		goto out;
	}
	for (i = 0; i < n + MERGE_AHEAD; i++) {
		struct mrec *m;
		uint64_t *v;

		/* merge i - MERGE_AHEAD looked up, then merge i's hashes */
		if (i >= MERGE_AHEAD) {
			m = &r[i - MERGE_AHEAD];
			if (!m->raw) {
				const unsigned char *p = bytes + m->x;
				size_t la = m->y, lb = m->z;

				v = hv[i % MERGE_AHEAD];
				m->x = ovl_hf__vocab_findh(h, p, la, v[0]);
				m->y = ovl_hf__vocab_findh(h, p + la, lb, v[1]);
				m->z = ovl_hf__vocab_findh(h, p, la + lb, v[2]);
			}
			if (m->x == HF_NONE || m->y == HF_NONE ||
			    m->z == HF_NONE) {
				merge_text(d, i - MERGE_AHEAD, what,
				    sizeof(what));
				snprintf(msg, msglen, "model.merges[%zu]: %s: a "
				    "token is not in the vocabulary",
				    i - MERGE_AHEAD, what);
				rc = -1;
				goto out;
			}
		}
		if (i < n && !r[i].raw) {
			const unsigned char *p = bytes + r[i].x;

			m = &r[i];
			v = hv[i % MERGE_AHEAD];
			v[0] = ovl_hf__vocab_hash(h, p, m->y);
			v[1] = ovl_hf__vocab_hash(h, p + m->y, m->z);
			v[2] = ovl_hf__vocab_hash(h, p, m->y + m->z);
		}
	}
	ovl_hf__merge_init(h, n);
	for (i = 0; i < n; i++)
		ovl_hf__merge_put(h, r[i].x, r[i].y, (uint32_t)i, r[i].z);
	rc = 0;
out:
	free(r);
	free(bytes);
	ovl_buf_free(&raw);
	return rc;
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
	for (i = 0, h->first1 = 256; i < 256; i++)
		if (h->first[i])
			h->first1 = h->first1 == 256 ? (int)i : -1;
	return 0;
}

#define METASPACE	"\xe2\x96\x81"

/* The start of the character that ends p[0..k) (k > 0). */
static size_t
char_before(const unsigned char *p, size_t k)
{
	size_t i = k - 1;

	while (i > 0 && k - i < 4 && (p[i] & 0xc0) == 0x80)
		i--;
	return i;
}

/* Which characters a "\u2581" may be cut after (ovl_hf's mseg). */
static void
metaspace_cuts(struct ovl_hf *h)
{
	uint32_t id;
	size_t k, i, u;

	for (id = 0; id < h->nids; id++) {
		const unsigned char *t = h->arena.p + h->toff[id], *q;
		size_t n = h->tlen[id];

		for (k = 1; k < n && (q = memmem(t + k, n - k, METASPACE, 3)) !=
		    NULL; k = (size_t)(q - t) + 3) {
			k = (size_t)(q - t);
			i = char_before(t, k);
			if (k - i == 3 && memcmp(t + i, METASPACE, 3) == 0)
				continue;
			for (u = 0; u < h->nunsafe; u++)
				if (strlen(h->unsafe[u]) == k - i &&
				    memcmp(h->unsafe[u], t + i, k - i) == 0)
					break;
			if (u < h->nunsafe)
				continue;
			if (h->nunsafe == HF_UNSAFE_MAX)
				return;		/* too many: never cut */
			memcpy(h->unsafe[h->nunsafe], t + i, k - i);
			h->unsafe[h->nunsafe++][k - i] = '\0';
		}
	}
	for (i = 0; i < 128; i++) {
		unsigned char c = (unsigned char)i;

		h->mascii[i] = ovl_hf__vocab_find(h, &c, 1, 0) != HF_NONE;
		for (u = 0; u < h->nunsafe; u++)
			if (h->unsafe[u][0] == (char)c && h->unsafe[u][1] == '\0')
				h->mascii[i] = 0;
	}
	h->mseg = 1;
}

static int
load_model(struct ovl_hf *h, struct hf_doc *d, char *msg, size_t msglen)
{
	json_t *root = d->root;
	json_t *model = json_object_get(root, "model");
	json_t *added = json_object_get(root, "added_tokens");
	const char *ty = json_string_value(json_object_get(model, "type"));
	static const char *const empty_ok[] = { "continuing_subword_prefix",
	    "end_of_word_suffix" };
	json_t *dec = json_object_get(root, "decoder");
	json_t *unk;
	size_t i;
	int rc;

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
	h->bytelevel = h->text.bytelevel ||
	    (dec != NULL && json_is_string(json_object_get(dec, "type")) &&
	    strcmp(json_string_value(json_object_get(dec, "type")),
	    "ByteLevel") == 0);
	h->byte_fallback = json_is_true(json_object_get(model, "byte_fallback"));
	h->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
	h->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
	if ((rc = load_vocab(h, d, added, msg, msglen)) != 0 ||
	    (rc = load_merges(h, d, msg, msglen)) != 0)
		return rc;
	h->unk = HF_NONE;
	unk = json_object_get(model, "unk_token");
	if (json_is_string(unk)) {
		h->unk = text_id(h, (const unsigned char *)json_string_value(unk),
		    json_string_length(unk));
		if (h->unk == HF_NONE) {
			snprintf(msg, msglen, "unk_token '%s' is not in the "
			    "vocabulary", json_string_value(unk));
			return -1;
		}
	}
	for (i = 0; i < 256; i++) {
		unsigned char c = (unsigned char)i;
		char fb[8];

		if (h->bytelevel)
			h->byte_id[i] = ovl_hf__vocab_find(h, &c, 1, 0);
		else {
			snprintf(fb, sizeof(fb), "<0x%02X>", (unsigned)i);
			h->byte_id[i] = text_id(h, (const unsigned char *)fb,
			    strlen(fb));
		}
	}
	h->first1 = 256;
	if (!h->bytelevel && !h->ignore_merges)
		metaspace_cuts(h);
	return added != NULL ? load_added(h, added, msg, msglen) : 0;
}

/*
 * The message for a file that is not well-formed JSON, jansson's own (0),
 * or, when it is (1), for one that is not a tokenizer.json (any: 1, when
 * only a file that is not JSON has a message here).
 */
static int
json_msg(const char *data, size_t len, int any, char *msg, size_t msglen)
{
	json_error_t je;
	json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES |
	    JSON_ALLOW_NUL, &je);
	int rc = root != NULL;

	if (root == NULL)
		snprintf(msg, msglen, "line %d, column %d: %s (is it a "
		    "tokenizer.json?)", je.line, je.column, je.text);
	else if (!any)
		;
	else if (!json_is_object(root) || json_object_get(root, "model") == NULL)
		snprintf(msg, msglen, "not a tokenizer.json (no \"model\")");
	else
		snprintf(msg, msglen, "not a tokenizer.json");
	json_decref(root);
	return rc;
}

/*
 * The file's bytes, mapped (populated at once: no page faults one page at
 * a time) or, where that fails, read: *mapped says which, for release.
 */
static char *
read_all(const char *path, size_t *len, int *mapped, char *msg,
    size_t msglen)
{
	struct stat st;
	char *data;
	ssize_t got;
	size_t n = 0;
	int fd;

	*mapped = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(msg, msglen, "%s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > FILE_MAX) {
		snprintf(msg, msglen, "%s", st.st_size > FILE_MAX ?
		    "larger than 1 GiB" : "not a regular file");
		close(fd);
		return NULL;
	}
	*len = (size_t)st.st_size;
	if (*len > 0 && (data = mmap(NULL, *len, PROT_READ, MAP_PRIVATE |
	    MAP_POPULATE, fd, 0)) != MAP_FAILED) {
		close(fd);
		*mapped = 1;
		return data;
	}
	data = ovl_xmalloc(*len + 1);
	while (n < *len && (got = read(fd, data + n, *len - n)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(msg, msglen, "%s", strerror(errno));
			close(fd);
			free(data);
			return NULL;
		}
		n += (size_t)got;
	}
	close(fd);
	*len = n;
	return data;
}

static void
release(char *data, size_t len, int mapped)
{
	if (mapped)
		munmap(data, len);
	else
		free(data);
}

struct ovl_hf *
ovl_hf_open(const char *path, char *err, size_t errlen)
{
	struct ovl_hf *h = ovl_xcalloc(1, sizeof(*h));
	struct hf_doc d;
	char msg[300];
	char *data;
	size_t len = 0;
	int rc, mapped;

	init_cp_byte();
	if ((data = read_all(path, &len, &mapped, msg, sizeof(msg))) == NULL)
		return fail(h, err, errlen, path, msg), NULL;
	snprintf(h->name, sizeof(h->name), "hf:%016" PRIx64,
	    ovl_hash64(data, len, 0));
	if (ovl_hf__doc_parse(&d, data, len) != 0) {
		json_msg(data, len, 1, msg, sizeof(msg));
		ovl_hf__doc_free(&d);
		release(data, len, mapped);
		return fail(h, err, errlen, path, msg), NULL;
	}
	if (json_object_get(d.root, "model") == NULL) {
		ovl_hf__doc_free(&d);
		release(data, len, mapped);
		return fail(h, err, errlen, path, "not a tokenizer.json "
		    "(no \"model\")"), NULL;
	}
	if ((rc = ovl_hf__text_load(&h->text, json_object_get(d.root,
	    "normalizer"), json_object_get(d.root, "pre_tokenizer"), msg,
	    sizeof(msg))) == 0)
		rc = load_model(h, &d, msg, sizeof(msg));
	if (rc == 0)
		rc = ovl_hf__post_load(h, json_object_get(d.root,
		    "post_processor"), msg, sizeof(msg));
	/*
	 * vocab and merges are read as they are used: a fault past one that
	 * stopped the reading is still named first, as jansson would
	 */
	if (rc != 0)
		json_msg(data, len, rc == -2, msg, sizeof(msg));
	ovl_hf__doc_free(&d);
	release(data, len, mapped);
	if (rc != 0)
		return fail(h, err, errlen, path, msg), NULL;
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

	for (i = 0; i < h->nadded; i++)
		if (strcmp(h->added[i].s, text) == 0)
			return h->added[i].id;
	i = text_id(h, (const unsigned char *)text, n);
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

size_t
ovl_hf_template(const struct ovl_hf *h, int after, const uint32_t **ids)
{
	*ids = after ? h->suf : h->pre;
	return after ? h->nsuf : h->npre;
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

/*
 * The pieces of s[0..n) cut by pt, the chain's last level: its matches and
 * the gaps between them, merged as they are found, each a piece behind
 * the pre-tokenizer: the table slot of the piece found last is fetched
 * while the one before it merges. out has room for n more ids. 0, or -1
 * when the regex engine fails.
 */
static int
encode_last(struct ovl_hf *h, struct ovl_pretok *pt, const unsigned char *s,
    size_t n, struct ovl_u32vec *out)
{
	size_t pos = 0, ms, me, ws = 0, wn = 0;	/* the piece waiting */
	uint64_t wh = 0;
	uint32_t *dst = out->p + out->len;
	int rc;

#define PIECE(a, len) do {						\
	uint64_t hv_ = (len) > 2 ? ovl_hf__vocab_hash(h, s + (a), (len)) : 0; \
	if (wn > 0)							\
		dst += ovl_hf__piece_h(h, s + ws, wn, wh, dst);		\
	ws = (a);							\
	wn = (len);							\
	wh = hv_;							\
} while (0)
	while ((rc = ovl_pretok_next(pt, s, n, pos, &ms, &me, h->errbuf,
	    sizeof(h->errbuf))) > 0) {
		if (ms > pos)
			PIECE(pos, ms - pos);
		PIECE(ms, me - ms);
		pos = me;
	}
	if (rc == 0 && pos < n)
		PIECE(pos, n - pos);
#undef PIECE
	if (wn > 0)
		dst += ovl_hf__piece_h(h, s + ws, wn, wh, dst);
	out->len = (size_t)(dst - out->p);
	return rc < 0 ? -1 : 0;
}

/*
 * The pieces of s[0..n) from chain level k on (hf_text's chain): the
 * matches of its regex and the gaps between them, each cut by the next
 * level, merged at the last. out has room for n more ids. 0, or -1 when
 * the regex engine fails.
 */
static int
encode_chain(struct ovl_hf *h, size_t k, const unsigned char *s, size_t n,
    struct ovl_u32vec *out)
{
	size_t pos = 0, ms, me;
	int rc;

	if (k + 1 == h->text.nchain)
		return encode_last(h, h->text.chain[k], s, n, out);
	while ((rc = ovl_pretok_next(h->text.chain[k], s, n, pos, &ms, &me,
	    h->errbuf, sizeof(h->errbuf))) > 0) {
		if ((ms > pos && encode_chain(h, k + 1, s + pos, ms - pos,
		    out) != 0) || encode_chain(h, k + 1, s + ms, me - ms,
		    out) != 0)
			return -1;
		pos = me;
	}
	if (rc < 0)
		return -1;
	return pos < n ? encode_chain(h, k + 1, s + pos, n - pos, out) : 0;
}

/* 1 when a piece may be cut before the "\u2581" at p + k (k > 0). */
static int
cut_before(const struct ovl_hf *h, const unsigned char *p, size_t k)
{
	size_t i = char_before(p, k), u;

	if (k - i == 1)
		return p[i] < 128 && h->mascii[p[i]];
	if (k - i == 3 && memcmp(p + i, METASPACE, 3) == 0)
		return 0;
	for (u = 0; u < h->nunsafe; u++)
		if (strlen(h->unsafe[u]) == k - i &&
		    memcmp(h->unsafe[u], p + i, k - i) == 0)
			return 0;
	return ovl_hf__vocab_find(h, p + i, k - i, 0) != HF_NONE;
}

/*
 * One piece of a model that is not byte level, merged in parts cut as
 * mseg allows: the ids of the whole, each part a short piece the cache
 * and the scan merge take.
 */
static void
metaspace_parts(struct ovl_hf *h, const unsigned char *p, size_t n,
    struct ovl_u32vec *out)
{
	const unsigned char *q;
	size_t start = 0, k = 1;

	while (k < n && (q = memmem(p + k, n - k, METASPACE, 3)) != NULL) {
		k = (size_t)(q - p);
		if (cut_before(h, p, k)) {
			ovl_hf__piece(h, p + start, k - start, out);
			start = k;
		}
		k += 3;
	}
	ovl_hf__piece(h, p + start, n - start, out);
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
	if (h->fast && h->text.nchain > 0) {
		ovl_hf__text_norm(&h->text, s, n, &s, &n);
		ovl_u32vec_reserve(out, n);
		if (encode_chain(h, 0, s, n, out) != 0) {
			h->error = h->errbuf;
			*bad_off = base;
			return -1;
		}
		return 0;
	}
	if (ovl_hf__text_run(&h->text, s, n, first, &b, &pc) != 0) {
		snprintf(h->errbuf, sizeof(h->errbuf), "%s", h->text.err);
		h->error = h->errbuf;
		*bad_off = base;
		return -1;
	}
	for (i = 0; i < pc->len; i++)
		if (h->fast && h->mseg)
			metaspace_parts(h, b + pc->p[i].off, pc->p[i].len, out);
		else
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
		const struct added *t;
		long a;

		/* most bytes start no added token: no walk down the trie */
		if (h->first1 < 256) {
			const unsigned char *q = h->first1 < 0 ? NULL :
			    memchr(s + i, h->first1, to - i);

			if (h->first1 >= 0 && q == NULL)
				break;
			if (q != NULL)
				i = (size_t)(q - s);
			else if (!h->first[s[i]]) {
				i++;
				continue;
			}
		} else
			break;
		if ((a = added_at(h, s + i, to - i, pass)) < 0) {
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
	if (h->bytes_all == 0)
		ovl_hf__tables_ready(h);
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
