/*
 * hf-pre: the text side of a tokenizer.json, normalizers and
 * pre-tokenizers, run as HF's tokenizers library runs them (hf.h).
 */
#include "hf-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "err.h"

void
ovl_hf__pieces_push(struct hf_pieces *v, uint32_t off, uint32_t len,
    uint32_t first)
{
	if (v->len == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 64;
		v->p = ovl_xrealloc(v->p, v->cap * sizeof(*v->p));
	}
	v->p[v->len].off = off;
	v->p[v->len].len = len;
	v->p[v->len].first = first;
	v->len++;
}

/* ---- loading ---------------------------------------------------------- */

static int
bad(char *err, size_t errlen, const char *what, const char *type)
{
	snprintf(err, errlen, "%s '%s' is not supported", what, type);
	return -1;
}

static const char *
type_of(json_t *o)
{
	json_t *t = json_object_get(o, "type");

	return json_is_string(t) ? json_string_value(t) : NULL;
}

static char *
dup_str(json_t *s, size_t *len)
{
	size_t n = json_string_length(s);
	char *p = ovl_xmalloc(n + 1);

	memcpy(p, json_string_value(s), n);
	p[n] = '\0';
	*len = n;
	return p;
}

/* A pattern: {"String": s} (lit) or {"Regex": r} (re). */
static int
load_pattern(json_t *pat, char **lit, size_t *litlen, struct ovl_pretok **re,
    const char *what, char *err, size_t errlen)
{
	json_t *s = json_object_get(pat, "String");
	json_t *r = json_object_get(pat, "Regex");
	char e[160];

	if (json_is_string(s)) {
		*lit = dup_str(s, litlen);
		return 0;
	}
	if (!json_is_string(r)) {
		snprintf(err, errlen, "%s: pattern is neither String nor Regex",
		    what);
		return -1;
	}
	*re = ovl_pretok_open(OVL_PRETOK_ONIG, json_string_value(r), e,
	    sizeof(e));
	if (*re == NULL) {
		snprintf(err, errlen, "%s: regex: %s", what, e);
		return -1;
	}
	return 0;
}

static int
add_norm(struct hf_text *t, json_t *o, char *err, size_t errlen)
{
	const char *ty = type_of(o);
	struct hf_norm *n;
	size_t i;

	if (ty == NULL)
		return bad(err, errlen, "normalizer", "(no type)");
	if (strcmp(ty, "Sequence") == 0) {
		json_t *a = json_object_get(o, "normalizers");
		json_t *e;

		json_array_foreach(a, i, e)
			if (add_norm(t, e, err, errlen) != 0)
				return -1;
		return 0;
	}
	t->norm = ovl_xrealloc(t->norm, (t->nnorm + 1) * sizeof(*t->norm));
	n = &t->norm[t->nnorm];
	memset(n, 0, sizeof(*n));
	if (strcmp(ty, "NFC") == 0)
		n->kind = HN_NFC;
	else if (strcmp(ty, "NFD") == 0)
		n->kind = HN_NFD;
	else if (strcmp(ty, "NFKC") == 0)
		n->kind = HN_NFKC;
	else if (strcmp(ty, "NFKD") == 0)
		n->kind = HN_NFKD;
	else if (strcmp(ty, "Prepend") == 0) {
		json_t *p = json_object_get(o, "prepend");
		if (!json_is_string(p))
			return bad(err, errlen, "normalizer Prepend without", "prepend");
		n->kind = HN_PREPEND;
		n->a = dup_str(p, &n->alen);
		if (strcmp(n->a, "\xe2\x96\x81") == 0)
			t->prepends = 1;
	} else if (strcmp(ty, "Replace") == 0) {
		json_t *pat = json_object_get(o, "pattern");
		json_t *c = json_object_get(o, "content");
		if (!json_is_string(json_object_get(pat, "String")))
			return bad(err, errlen, "normalizer Replace with pattern",
			    "Regex");
		if (!json_is_string(c))
			return bad(err, errlen, "normalizer Replace without", "content");
		n->kind = HN_REPLACE;
		n->a = dup_str(json_object_get(pat, "String"), &n->alen);
		n->b = dup_str(c, &n->blen);
		if (n->alen == 0)
			return bad(err, errlen, "normalizer Replace with", "an empty pattern");
	} else if (strcmp(ty, "Strip") == 0) {
		n->kind = HN_STRIP;
		n->left = json_is_true(json_object_get(o, "strip_left"));
		n->right = json_is_true(json_object_get(o, "strip_right"));
	} else
		return bad(err, errlen, "normalizer", ty);
	t->nnorm++;
	return 0;
}

static struct hf_pre *
new_pre(struct hf_text *t, enum hf_pre_kind kind)
{
	struct hf_pre *p;

	t->pre = ovl_xrealloc(t->pre, (t->npre + 1) * sizeof(*t->pre));
	p = &t->pre[t->npre++];
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->behavior = HB_ISOLATED;
	return p;
}

static int
regex_pre(struct hf_text *t, const char *rx, enum hf_behavior b, int invert,
    char *err, size_t errlen)
{
	struct hf_pre *p = new_pre(t, HP_SPLIT);
	char e[160];

	p->behavior = b;
	p->invert = invert;
	if ((p->re = ovl_pretok_open(OVL_PRETOK_ONIG, rx, e, sizeof(e))) == NULL) {
		snprintf(err, errlen, "regex: %s", e);
		return -1;
	}
	return 0;
}

static int
add_pre(struct hf_text *t, json_t *o, char *err, size_t errlen)
{
	const char *ty = type_of(o);
	struct hf_pre *p;
	size_t i;

	if (ty == NULL)
		return bad(err, errlen, "pre-tokenizer", "(no type)");
	if (strcmp(ty, "Sequence") == 0) {
		json_t *a = json_object_get(o, "pretokenizers");
		json_t *e;

		json_array_foreach(a, i, e)
			if (add_pre(t, e, err, errlen) != 0)
				return -1;
		return 0;
	}
	if (strcmp(ty, "Split") == 0) {
		static const char *const names[] = { "Removed", "Isolated",
		    "MergedWithPrevious", "MergedWithNext", "Contiguous" };
		const char *bh = json_string_value(json_object_get(o, "behavior"));

		p = new_pre(t, HP_SPLIT);
		for (i = 0; i < 5; i++)
			if (bh != NULL && strcmp(bh, names[i]) == 0)
				break;
		if (i == 5)
			return bad(err, errlen, "Split behavior",
			    bh != NULL ? bh : "(none)");
		p->behavior = (enum hf_behavior)i;
		p->invert = json_is_true(json_object_get(o, "invert"));
		return load_pattern(json_object_get(o, "pattern"), &p->lit,
		    &p->litlen, &p->re, "pre-tokenizer Split", err, errlen);
	}
	if (strcmp(ty, "ByteLevel") == 0) {
		char e[160];
		json_t *ur = json_object_get(o, "use_regex");

		p = new_pre(t, HP_BYTELEVEL);
		t->bytelevel = 1;
		p->prefix_space = json_is_true(json_object_get(o, "add_prefix_space"));
		/* use_regex defaults to true: GPT-2's pattern, r50k's. */
		if (ur == NULL || json_is_true(ur)) {
			p->re = ovl_pretok_open(OVL_PRETOK_R50K, NULL, e, sizeof(e));
			if (p->re == NULL) {
				snprintf(err, errlen, "ByteLevel: %s", e);
				return -1;
			}
		}
		return 0;
	}
	if (strcmp(ty, "Metaspace") == 0) {
		json_t *r = json_object_get(o, "replacement");
		const char *ps = json_string_value(json_object_get(o,
		    "prepend_scheme"));
		json_t *sp = json_object_get(o, "split");

		p = new_pre(t, HP_METASPACE);
		if (json_is_string(r))
			p->lit = dup_str(r, &p->litlen);
		else
			p->lit = ovl_xstrdup("\xe2\x96\x81"), p->litlen = 3;
		if (ps == NULL) {
			/* older files: add_prefix_space */
			json_t *aps = json_object_get(o, "add_prefix_space");
			p->prepend = aps == NULL || json_is_true(aps) ? 2 : 0;
		} else if (strcmp(ps, "always") == 0)
			p->prepend = 2;
		else if (strcmp(ps, "first") == 0)
			p->prepend = 1;
		else if (strcmp(ps, "never") == 0)
			p->prepend = 0;
		else
			return bad(err, errlen, "Metaspace prepend_scheme", ps);
		p->msplit = sp == NULL || json_is_true(sp);
		if (p->prepend != 0)
			t->prepends = 1;
		return 0;
	}
	if (strcmp(ty, "Digits") == 0)
		return regex_pre(t, "\\p{N}",
		    json_is_true(json_object_get(o, "individual_digits")) ?
		    HB_ISOLATED : HB_CONTIGUOUS, 0, err, errlen);
	if (strcmp(ty, "Whitespace") == 0)
		return regex_pre(t, "\\w+|[^\\w\\s]+", HB_REMOVED, 1, err, errlen);
	if (strcmp(ty, "WhitespaceSplit") == 0)
		return regex_pre(t, "\\s+", HB_REMOVED, 0, err, errlen);
	return bad(err, errlen, "pre-tokenizer", ty);
}

int
ovl_hf__text_load(struct hf_text *t, json_t *norm, json_t *pre, char *err,
    size_t errlen)
{
	size_t i, nsplit = 0, nother = 0;

	if (norm != NULL && !json_is_null(norm) &&
	    add_norm(t, norm, err, errlen) != 0)
		return -1;
	if (pre != NULL && !json_is_null(pre) && add_pre(t, pre, err, errlen) != 0)
		return -1;
	for (i = 0; i < t->npre; i++) {
		const struct hf_pre *p = &t->pre[i];

		if (p->kind == HP_SPLIT && p->re != NULL &&
		    p->behavior == HB_ISOLATED) {
			if (nsplit < HF_CHAIN_MAX)
				t->chain[nsplit] = p->re;
			nsplit++;
		} else if (!(p->kind == HP_BYTELEVEL && !p->prefix_space &&
		    p->re == NULL))
			nother++;
	}
	t->nchain = nsplit <= HF_CHAIN_MAX && nother == 0 ? nsplit : 0;
	return 0;
}

void
ovl_hf__text_free(struct hf_text *t)
{
	size_t i;

	for (i = 0; i < t->nnorm; i++) {
		free(t->norm[i].a);
		free(t->norm[i].b);
	}
	for (i = 0; i < t->npre; i++) {
		ovl_pretok_free(t->pre[i].re);
		free(t->pre[i].lit);
	}
	free(t->norm);
	free(t->pre);
	ovl_buf_free(&t->buf[0]);
	ovl_buf_free(&t->buf[1]);
	free(t->pc[0].p);
	free(t->pc[1].p);
	free(t->cut.p);
	free(t->cps);
}

int
ovl_hf__text_no_norm(const struct hf_text *t)
{
	return t->nnorm == 0;
}

/* ---- normalizers ------------------------------------------------------ */

/* Unicode normalization of s[0..n), appended to out (utf8proc). */
static void
norm_segment(struct hf_text *t, enum hf_norm_kind k, const unsigned char *s,
    size_t n, struct ovl_buf *out)
{
	utf8proc_option_t opt = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
	utf8proc_ssize_t m, i;
	unsigned char *d;

	if (k == HN_NFKC || k == HN_NFKD)
		opt |= UTF8PROC_COMPAT;
	for (;;) {
		m = utf8proc_decompose_custom(s, (utf8proc_ssize_t)n, t->cps,
		    (utf8proc_ssize_t)t->cpcap, opt, NULL, NULL);
		if (m < 0)
			ovl_errx(1, "utf8proc: %s", utf8proc_errmsg(m));
		if ((size_t)m <= t->cpcap)
			break;
		t->cpcap = (size_t)m + 64;
		t->cps = ovl_xrealloc(t->cps, t->cpcap * sizeof(*t->cps));
	}
	if (k == HN_NFC || k == HN_NFKC)
		opt |= UTF8PROC_COMPOSE;
	m = utf8proc_normalize_utf32(t->cps, m, opt);
	if (m < 0)
		ovl_errx(1, "utf8proc: %s", utf8proc_errmsg(m));
	d = ovl_buf_reserve(out, (size_t)m * 4);
	for (i = 0; i < m; i++)
		d += utf8proc_encode_char(t->cps[i], d);
	out->len = (size_t)(d - out->p);
}

/*
 * Unicode normalization of s[0..n) into out. An ASCII character is a
 * starter that no decomposition reorders across and no composition joins
 * to what precedes it, so the text normalizes piecewise: ASCII as it is,
 * each run of other characters with the character before it.
 */
static void
unicode_norm(struct hf_text *t, enum hf_norm_kind k, const unsigned char *s,
    size_t n, struct ovl_buf *out)
{
	size_t i = 0, j, a, e;

	out->len = 0;
	while (i < n) {
		for (j = i; j < n && s[j] < 0x80; j++)
			;
		a = j > i ? j - 1 : j;
		ovl_buf_append(out, s + i, a - i);
		if (j == n) {
			ovl_buf_append(out, s + a, n - a);
			break;
		}
		for (e = j; e < n && s[e] >= 0x80; e++)
			;
		norm_segment(t, k, s + a, e - a, out);
		i = e;
	}
}

static int
is_ws(const unsigned char *s, size_t n, size_t *clen)
{
	utf8proc_int32_t c;
	utf8proc_ssize_t l = utf8proc_iterate(s, (utf8proc_ssize_t)n, &c);

	*clen = l > 0 ? (size_t)l : 1;
	switch (c) {
	case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x20:
	case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029:
	case 0x202f: case 0x205f: case 0x3000:
		return 1;
	default:
		return c >= 0x2000 && c <= 0x200a;
	}
}

static void
norm_one(struct hf_text *t, const struct hf_norm *nm, const unsigned char *s,
    size_t n, struct ovl_buf *out)
{
	size_t i, a, b, cl;

	out->len = 0;
	switch (nm->kind) {
	case HN_PREPEND:
		if (n > 0)
			ovl_buf_append(out, nm->a, nm->alen);
		ovl_buf_append(out, s, n);
		return;
	case HN_REPLACE:
		for (i = 0; i < n;) {
			const unsigned char *hit = memmem(s + i, n - i, nm->a,
			    nm->alen);
			size_t j = hit != NULL ? (size_t)(hit - s) : n;

			ovl_buf_append(out, s + i, j - i);
			if (hit == NULL)
				break;
			ovl_buf_append(out, nm->b, nm->blen);
			i = j + nm->alen;
		}
		return;
	case HN_STRIP:
		a = 0;
		b = n;
		if (nm->left)
			while (a < b && is_ws(s + a, b - a, &cl))
				a += cl;
		if (nm->right)
			while (b > a) {
				size_t k = b - 1;
				while (k > a && (s[k] & 0xc0) == 0x80)
					k--;
				if (!is_ws(s + k, b - k, &cl))
					break;
				b = k;
			}
		ovl_buf_append(out, s + a, b - a);
		return;
	default:
		unicode_norm(t, nm->kind, s, n, out);
		return;
	}
}

/* ---- pre-tokenizers --------------------------------------------------- */

/*
 * Matches and gaps of piece s[0..n) into v, in order. Not isolated: v is
 * emptied first, offsets are from s, first says the part is a match.
 * Isolated: appended as pieces of their own, offsets plus base, first
 * when first and the part starts s.
 */
static int
cut_piece(struct hf_text *t, const struct hf_pre *p, const unsigned char *s,
    size_t n, struct hf_pieces *v, uint32_t base, int isolated, int first)
{
	size_t pos = 0, prev = 0, ms, me;
	uint32_t b = isolated ? base : 0;
	int rc;

	if (!isolated)
		v->len = 0;
	for (;;) {
		if (p->re != NULL) {
			rc = ovl_pretok_next(p->re, s, n, pos, &ms, &me, t->err,
			    sizeof(t->err));
			if (rc < 0)
				return -1;
		} else {
			const unsigned char *hit = p->litlen == 0 || pos >= n ? NULL :
			    memmem(s + pos, n - pos, p->lit, p->litlen);
			rc = hit != NULL;
			if (rc) {
				ms = (size_t)(hit - s);
				me = ms + p->litlen;
			}
		}
		if (rc == 0)
			break;
		if (ms > prev)
			ovl_hf__pieces_push(v, b + (uint32_t)prev,
			    (uint32_t)(ms - prev), isolated ? first && prev == 0 :
			    p->invert);
		ovl_hf__pieces_push(v, b + (uint32_t)ms, (uint32_t)(me - ms),
		    isolated ? first && ms == 0 : !p->invert);
		prev = pos = me;
	}
	if (prev < n)
		ovl_hf__pieces_push(v, b + (uint32_t)prev, (uint32_t)(n - prev),
		    isolated ? first && prev == 0 : p->invert);
	return 0;
}

/* Split every piece of in by p into out (same buffer). */
static int
split(struct hf_text *t, const struct hf_pre *p, const unsigned char *base,
    const struct hf_pieces *in, struct hf_pieces *out)
{
	size_t i, j, k0;

	out->len = 0;
	for (i = 0; i < in->len; i++) {
		const struct hf_piece *pc = &in->p[i];
		int prevm = 0;

		if (p->behavior == HB_ISOLATED) {
			/* every match and gap a piece, none empty */
			if (cut_piece(t, p, base + pc->off, pc->len, out,
			    pc->off, 1, (int)pc->first) != 0)
				return -1;
			continue;
		}
		if (cut_piece(t, p, base + pc->off, pc->len, &t->cut, 0, 0,
		    0) != 0)
			return -1;
		k0 = out->len;
		if (p->behavior == HB_NEXT) {
			/* fold from the right, extending starts */
			size_t kend;
			for (j = t->cut.len; j-- > 0;) {
				struct hf_piece *c = &t->cut.p[j];
				int m = (int)c->first;
				if (m && !prevm && out->len > k0) {
					struct hf_piece *l = &out->p[out->len - 1];
					l->len += l->off - c->off;
					l->off = c->off;
				} else
					ovl_hf__pieces_push(out, c->off, c->len, 0);
				prevm = m;
			}
			/* reverse what this piece added */
			for (j = k0, kend = out->len; j + 1 < kend; j++, kend--) {
				struct hf_piece tmp = out->p[j];
				out->p[j] = out->p[kend - 1];
				out->p[kend - 1] = tmp;
			}
		} else {
			for (j = 0; j < t->cut.len; j++) {
				struct hf_piece *c = &t->cut.p[j];
				int m = (int)c->first;
				int merge = 0;

				switch (p->behavior) {
				case HB_REMOVED:
					if (m)
						continue;
					break;
				case HB_PREVIOUS:
					merge = m && !prevm;
					break;
				case HB_CONTIGUOUS:
					merge = m == prevm;
					break;
				default:
					break;
				}
				if (merge && out->len > k0)
					out->p[out->len - 1].len = c->off + c->len -
					    out->p[out->len - 1].off;
				else
					ovl_hf__pieces_push(out, c->off, c->len, 0);
				prevm = m;
			}
		}
		/* offsets were relative to the piece */
		for (j = k0; j < out->len; j++) {
			out->p[j].first = pc->first && out->p[j].off == 0;
			out->p[j].off += pc->off;
		}
		/* drop empty pieces */
		for (j = k0; j < out->len;) {
			if (out->p[j].len == 0) {
				memmove(&out->p[j], &out->p[j + 1],
				    (out->len - j - 1) * sizeof(*out->p));
				out->len--;
			} else
				j++;
		}
	}
	return 0;
}

/*
 * Rewrite every piece into dst: Metaspace (spaces to its char, the char
 * put before as its scheme says) or ByteLevel's prefix space.
 */
static void
rewrite(const struct hf_pre *p, const unsigned char *base,
    const struct hf_pieces *in, struct ovl_buf *dst, struct hf_pieces *out)
{
	size_t i, j;

	dst->len = 0;
	out->len = 0;
	for (i = 0; i < in->len; i++) {
		const struct hf_piece *pc = &in->p[i];
		const unsigned char *s = base + pc->off;
		size_t start = dst->len;

		if (p->kind == HP_BYTELEVEL) {
			if (pc->len == 0 || s[0] != ' ')
				ovl_buf_append(dst, " ", 1);
			ovl_buf_append(dst, s, pc->len);
		} else {
			/* a leading space turns into the char too */
			int starts = (pc->len > 0 && s[0] == ' ') ||
			    (pc->len >= p->litlen &&
			    memcmp(s, p->lit, p->litlen) == 0);
			if (!starts && (p->prepend == 2 ||
			    (p->prepend == 1 && pc->first)))
				ovl_buf_append(dst, p->lit, p->litlen);
			for (j = 0; j < pc->len; j++) {
				if (s[j] == ' ')
					ovl_buf_append(dst, p->lit, p->litlen);
				else
					ovl_buf_append(dst, s + j, 1);
			}
		}
		ovl_hf__pieces_push(out, (uint32_t)start,
		    (uint32_t)(dst->len - start), pc->first);
	}
}

/* 1 when s[0..n) is ASCII, which Unicode normalization leaves as it is. */
static int
all_ascii(const unsigned char *s, size_t n)
{
	uint64_t w, acc = 0;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, s + i, 8);
		acc |= w;
	}
	for (; i < n; i++)
		acc |= s[i];
	return (acc & 0x8080808080808080ull) == 0;
}

void
ovl_hf__text_norm(struct hf_text *t, const unsigned char *s, size_t n,
    const unsigned char **out, size_t *outlen)
{
	size_t i;
	int b = 0, ascii = -1;

	*out = s;
	*outlen = n;
	for (i = 0; i < t->nnorm; i++) {
		if (t->norm[i].kind <= HN_NFKD) {
			if (ascii < 0)
				ascii = all_ascii(*out, *outlen);
			if (ascii)
				continue;
		} else
			ascii = -1;
		norm_one(t, &t->norm[i], *out, *outlen, &t->buf[b]);
		*out = t->buf[b].p;
		*outlen = t->buf[b].len;
		b ^= 1;
	}
}

int
ovl_hf__text_run(struct hf_text *t, const unsigned char *s, size_t n,
    int first, const unsigned char **base, const struct hf_pieces **pieces)
{
	const unsigned char *cur = s;
	size_t curlen = n, i;
	int b = 0;		/* the buffer not holding cur */
	int pcur = 0;

	for (i = 0; i < t->nnorm; i++) {
		norm_one(t, &t->norm[i], cur, curlen, &t->buf[b]);
		cur = t->buf[b].p;
		curlen = t->buf[b].len;
		b ^= 1;
	}
	t->pc[0].len = 0;
	if (curlen > 0)
		ovl_hf__pieces_push(&t->pc[0], 0, (uint32_t)curlen,
		    (uint32_t)first);
	for (i = 0; i < t->npre; i++) {
		const struct hf_pre *p = &t->pre[i];

		if (p->kind == HP_METASPACE ||
		    (p->kind == HP_BYTELEVEL && p->prefix_space)) {
			rewrite(p, cur, &t->pc[pcur], &t->buf[b],
			    &t->pc[pcur ^ 1]);
			cur = t->buf[b].p;
			b ^= 1;
			pcur ^= 1;
		}
		if (p->kind == HP_METASPACE) {
			struct hf_pre sp;

			if (!p->msplit)
				continue;
			memset(&sp, 0, sizeof(sp));
			sp.kind = HP_SPLIT;
			sp.behavior = HB_NEXT;
			sp.lit = p->lit;
			sp.litlen = p->litlen;
			if (split(t, &sp, cur, &t->pc[pcur], &t->pc[pcur ^ 1]) != 0)
				return -1;
			pcur ^= 1;
			continue;
		}
		if (p->re == NULL && p->kind == HP_BYTELEVEL)
			continue;
		if (split(t, p, cur, &t->pc[pcur], &t->pc[pcur ^ 1]) != 0)
			return -1;
		pcur ^= 1;
	}
	*base = cur;
	*pieces = &t->pc[pcur];
	return 0;
}
