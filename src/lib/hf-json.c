/*
 * hf-json: reading a tokenizer.json (hf.h) without a JSON tree of its two
 * large members: model.vocab and model.merges are scanned in place, every
 * other member is parsed by jansson from its own bytes. Only well-formed
 * JSON passes: the members jansson parses are checked by it, the rest
 * here, with the same rules (strict numbers, valid UTF-8, escapes,
 * surrogate pairs, no duplicate keys).
 */
#include "hf-int.h"

#include <string.h>

#include "err.h"
#include "tok.h"

#define JFLAGS	(JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)

static const unsigned char *
ws(const unsigned char *p, const unsigned char *e)
{
	while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

static int
hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int
hex4(const unsigned char *p, const unsigned char *e, uint32_t *v)
{
	int i, d;

	if (e - p < 4)
		return -1;
	for (*v = 0, i = 0; i < 4; i++) {
		if ((d = hexval(p[i])) < 0)
			return -1;
		*v = *v << 4 | (uint32_t)d;
	}
	return 0;
}

static size_t
put_cp(uint32_t c, unsigned char *d)
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
	if (c < 0x10000) {
		d[0] = (unsigned char)(0xe0 | c >> 12);
		d[1] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
		d[2] = (unsigned char)(0x80 | (c & 0x3f));
		return 3;
	}
	d[0] = (unsigned char)(0xf0 | c >> 18);
	d[1] = (unsigned char)(0x80 | (c >> 12 & 0x3f));
	d[2] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
	d[3] = (unsigned char)(0x80 | (c & 0x3f));
	return 4;
}

/*
 * The string at *pp (its opening quote): its text in [*out, *out + *n),
 * the file's own bytes when it has no escape, else decoded into buf.
 * *pp moves past the closing quote. 0, or -1 when it is not a valid
 * JSON string.
 */
static int
string(const unsigned char **pp, const unsigned char *e, struct ovl_buf *buf,
    const unsigned char **out, size_t *n)
{
	const unsigned char *p = *pp + 1, *s = p;
	unsigned hi = 0;
	uint32_t c, lo;
	unsigned char *d;

	if (*pp >= e || **pp != '"')
		return -1;
	while (p < e && *p != '"' && *p != '\\' && *p >= 0x20)
		hi |= *p++;
	if (p < e && *p == '"') {
		if (hi >= 0x80 && ovl_utf8_valid((const char *)s,
		    (size_t)(p - s)) != (size_t)(p - s))
			return -1;
		*out = s;
		*n = (size_t)(p - s);
		*pp = p + 1;
		return 0;
	}
	buf->len = 0;
	ovl_buf_append(buf, s, (size_t)(p - s));
	while (p < e && *p != '"') {
		if (*p < 0x20)
			return -1;
		if (*p != '\\') {
			ovl_buf_append(buf, p++, 1);
			continue;
		}
		if (++p >= e)
			return -1;
		switch (*p++) {
		case '"': c = '"'; break;
		case '\\': c = '\\'; break;
		case '/': c = '/'; break;
		case 'b': c = '\b'; break;
		case 'f': c = '\f'; break;
		case 'n': c = '\n'; break;
		case 'r': c = '\r'; break;
		case 't': c = '\t'; break;
		case 'u':
			if (hex4(p, e, &c) != 0)
				return -1;
			p += 4;
			if (c >= 0xdc00 && c <= 0xdfff)
				return -1;
			if (c >= 0xd800 && c <= 0xdbff) {
				if (e - p < 6 || p[0] != '\\' || p[1] != 'u' ||
				    hex4(p + 2, e, &lo) != 0 ||
				    lo < 0xdc00 || lo > 0xdfff)
					return -1;
				c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
				p += 6;
			}
			break;
		default:
			return -1;
		}
		d = ovl_buf_reserve(buf, 4);
		buf->len += put_cp(c, d);
	}
	if (p >= e || ovl_utf8_valid((const char *)buf->p, buf->len) != buf->len)
		return -1;
	*out = buf->p;
	*n = buf->len;
	*pp = p + 1;
	return 0;
}

/*
 * A JSON number at *pp, moved past it: 1 when it is an integer of at
 * most 18 digits (in *v), 0 another number, -1 not a number.
 */
static int
number(const unsigned char **pp, const unsigned char *e, int64_t *v)
{
	const unsigned char *p = *pp, *d;
	int neg = 0, plain = 1;

	if (p < e && *p == '-')
		neg = 1, p++;
	d = p;
	if (p < e && *p == '0')
		p++;
	else if (p < e && *p >= '1' && *p <= '9')
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	else
		return -1;
	if (p - d > 18)
		plain = 0;
	if (plain)
		for (*v = 0; d < p; d++)
			*v = *v * 10 + (*d - '0');
	if (p < e && *p == '.') {
		plain = 0;
		if (++p >= e || *p < '0' || *p > '9')
			return -1;
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		plain = 0;
		if (++p < e && (*p == '+' || *p == '-'))
			p++;
		if (p >= e || *p < '0' || *p > '9')
			return -1;
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	}
	*pp = p;
	if (neg)
		*v = -*v;
	return plain;
}

/* Bytes value_end stops at: 1 a quote, 2 an opening, 3 a closing bracket. */
static const unsigned char vclass[256] = {
	['"'] = 1, ['{'] = 2, ['['] = 2, ['}'] = 3, [']'] = 3
};

/*
 * The end of the value at p, found by its brackets and strings alone (the
 * parser of the value checks the rest): NULL when it does not end.
 */
static const unsigned char *
value_end(const unsigned char *p, const unsigned char *e)
{
	size_t depth = 0;

	if (p < e && vclass[*p] == 0) {
		/* a number or a literal */
		while (p < e && *p != ',' && *p != '}' && *p != ']' &&
		    *p != ' ' && *p != '\n' && *p != '\r' && *p != '\t')
			p++;
		return p;
	}
	while (p < e) {
		switch (vclass[*p]) {
		case 1:
			for (p++; p < e && *p != '"'; p++)
				if (*p == '\\')
					p++;
			if (p >= e)
				return NULL;
			if (depth == 0)
				return p + 1;
			break;
		case 2:
			depth++;
			break;
		case 3:
			if (depth == 0)
				return NULL;
			if (--depth == 0)
				return p + 1;
			break;
		}
		p++;
		while (p < e && vclass[*p] == 0)
			p++;
	}
	return NULL;
}

/*
 * Step *p past a value that must be well-formed JSON (jansson says so)
 * but is not used: 0, or -1 when it is not.
 */
static int
skip_value(const unsigned char **p, const unsigned char *e)
{
	const unsigned char *v = value_end(*p, e);
	json_t *j;

	if (v == NULL || (j = json_loadb((const char *)*p, (size_t)(v - *p),
	    JFLAGS, NULL)) == NULL)
		return -1;
	json_decref(j);
	*p = v;
	return 0;
}

/*
 * The members of the object at *pp into obj (a new jansson object), each
 * value parsed by jansson, but for those named skip[0..nskip): their text
 * in span[k] (not parsed), and a "model" that is an object (obj NULL: the
 * file's top), whose members are read at once into d (model_members).
 * 0, or -1 when the text is not such an object.
 */
static int model_members(struct hf_doc *d, const unsigned char **pp,
    const unsigned char *e);

static int
members(const unsigned char **pp, const unsigned char *e, json_t *obj,
    const char *const *skip, struct hf_span *span, size_t nskip,
    struct hf_doc *d)
{
	struct ovl_buf *buf = &d->buf;
	int top = obj == NULL;
	const unsigned char *p = ws(*pp, e), *k, *v;
	size_t kn, i;
	json_t *val;

	if (top)
		obj = d->root;
	if (p >= e || *p != '{')
		return -1;
	p = ws(p + 1, e);
	if (p < e && *p == '}') {
		*pp = p + 1;
		return 0;
	}
	for (;;) {
		char key[64];

		if (string(&p, e, buf, &k, &kn) != 0)
			return -1;
		p = ws(p, e);
		if (p >= e || *p != ':')
			return -1;
		p = ws(p + 1, e);
		if (top && kn == 5 && memcmp(k, "model", 5) == 0 &&
		    p < e && *p == '{') {
			if (json_object_get(d->root, "model") != NULL ||
			    model_members(d, &p, e) != 0)
				return -1;
			goto next;
		}
		if ((v = value_end(p, e)) == NULL)
			return -1;
		for (i = 0; i < nskip; i++)
			if (strlen(skip[i]) == kn && memcmp(skip[i], k, kn) == 0)
				break;
		if (i < nskip) {
			if (span[i].p != NULL)
				return -1;	/* twice */
			span[i].p = (const char *)p;
			span[i].n = (size_t)(v - p);
		} else {
			/* keys are short: a long one is no member read here */
			if (kn >= sizeof(key) || memchr(k, '\0', kn) != NULL)
				kn = 0;
			memcpy(key, k, kn);
			key[kn] = '\0';
			if ((val = json_loadb((const char *)p, (size_t)(v - p),
			    JFLAGS, NULL)) == NULL)
				return -1;
			if (kn > 0 && json_object_get(obj, key) != NULL) {
				json_decref(val);
				return -1;
			}
			if (kn > 0)
				json_object_set_new(obj, key, val);
			else
				json_decref(val);
		}
		p = v;
next:
		p = ws(p, e);
		if (p < e && *p == ',') {
			p = ws(p + 1, e);
			continue;
		}
		if (p < e && *p == '}') {
			*pp = p + 1;
			return 0;
		}
		return -1;
	}
}

static int
model_members(struct hf_doc *d, const unsigned char **pp,
    const unsigned char *e)
{
	static const char *const big[] = { "vocab", "merges" };
	struct hf_span sp[2] = { { NULL, 0 }, { NULL, 0 } };
	json_t *m = json_object();

	json_object_set_new(d->root, "model", m);
	if (members(pp, e, m, big, sp, 2, d) != 0)
		return -1;
	/* not an object or an array: jansson's, for the model's checks */
	if (sp[0].p != NULL && *sp[0].p != '{')
		json_object_set_new(m, "vocab", json_loadb(sp[0].p, sp[0].n,
		    JFLAGS, NULL));
	else
		d->vocab = sp[0];
	if (sp[1].p != NULL && *sp[1].p != '[')
		json_object_set_new(m, "merges", json_loadb(sp[1].p, sp[1].n,
		    JFLAGS, NULL));
	else
		d->merges = sp[1];
	return 0;
}

int
ovl_hf__doc_parse(struct hf_doc *d, const char *data, size_t len)
{
	const unsigned char *p = (const unsigned char *)data, *e = p + len;

	memset(d, 0, sizeof(*d));
	d->root = json_object();
	if (members(&p, e, NULL, NULL, NULL, 0, d) != 0 || ws(p, e) != e)
		return -1;
	return 0;
}

void
ovl_hf__doc_free(struct hf_doc *d)
{
	json_decref(d->root);
	ovl_buf_free(&d->buf);
	ovl_buf_free(&d->buf2);
	d->root = NULL;
}

/* A separator after an element: 1 another follows, 0 the end, -1 bad. */
static int
next_sep(const unsigned char **pp, const unsigned char *e, unsigned char close)
{
	const unsigned char *p = ws(*pp, e);

	if (p < e && *p == ',') {
		*pp = ws(p + 1, e);
		return 1;
	}
	if (p < e && *p == close) {
		*pp = p + 1;
		return 0;
	}
	return -1;
}

/*
 * A scan's first call over member m, an object or array that close ends:
 * 1 with [*pp, *ep) from its first entry (the scan's end set), 0 when it
 * is empty, -1 when what follows it is not white space.
 */
static int
scan_start(struct hf_doc *d, const struct hf_span *m, unsigned char close,
    const unsigned char **pp, const unsigned char **ep)
{
	const unsigned char *p = (const unsigned char *)m->p, *e = p + m->n;

	d->end = e;
	p = ws(p + 1, e);
	if (p < e && *p == close) {
		d->pos = e;
		return ws(p + 1, e) == e ? 0 : -1;
	}
	*pp = p;
	*ep = e;
	return 1;
}

int
ovl_hf__vocab_next(struct hf_doc *d, const unsigned char **key, size_t *kn,
    int64_t *id)
{
	const unsigned char *p = d->pos, *e = d->end;
	int rc;

	if (p == NULL) {	/* the first call */
		if ((rc = scan_start(d, &d->vocab, '}', &p, &e)) <= 0)
			return rc;
	} else if (p == e)
		return 0;
	if (string(&p, e, &d->buf, key, kn) != 0)
		return -1;
	p = ws(p, e);
	if (p >= e || *p != ':')
		return -1;
	p = ws(p + 1, e);
	if (p < e && (*p == '-' || (*p >= '0' && *p <= '9'))) {
		if ((rc = number(&p, e, id)) < 0)
			return -1;
		if (rc == 0)
			*id = -1;
	} else {
		/* another kind of value: well-formed, and no id */
		if (skip_value(&p, e) != 0)
			return -1;
		*id = -1;
	}
	if ((rc = next_sep(&p, e, '}')) < 0 || (rc == 0 && ws(p, e) != e))
		return -1;
	d->pos = rc == 0 ? e : p;
	return 1;
}

int
ovl_hf__merges_next(struct hf_doc *d, const unsigned char **a, size_t *an,
    const unsigned char **b, size_t *bn)
{
	const unsigned char *p = d->pos, *e = d->end, *s, *sp, *start;
	size_t n;
	int rc;

	if (p == NULL) {
		if ((rc = scan_start(d, &d->merges, ']', &p, &e)) <= 0)
			return rc;
	} else if (p == e)
		return 0;
	start = p;
	rc = 2;
	if (p < e && *p == '"') {
		/* "A B": one space */
		if (string(&p, e, &d->buf, &s, &n) != 0)
			return -1;
		sp = memchr(s, ' ', n);
		if (sp == NULL || memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1)
		    != NULL)
			rc = 1;
		else {
			*a = s;
			*an = (size_t)(sp - s);
			*b = sp + 1;
			*bn = n - *an - 1;
		}
	} else if (p < e && *p == '[') {
		/* ["A", "B"]: the first side in buf2 if it has escapes */
		p = ws(p + 1, e);
		if (p < e && *p == '"' && string(&p, e, &d->buf2, a, an) == 0 &&
		    next_sep(&p, e, ']') == 1 && *p == '"' &&
		    string(&p, e, &d->buf, b, bn) == 0 &&
		    next_sep(&p, e, ']') == 0)
			;
		else
			rc = 1;
		if (rc == 1) {
			/* rescan it as a value: well-formed, but not a pair */
			p = start;
			if (skip_value(&p, e) != 0)
				return -1;
		}
	} else {
		if (skip_value(&p, e) != 0)
			return -1;
		rc = 1;
	}
	if ((n = (size_t)next_sep(&p, e, ']')) == (size_t)-1 ||
	    (n == 0 && ws(p, e) != e))
		return -1;
	d->pos = n == 0 ? e : p;
	return rc;
}

void
ovl_hf__doc_rewind(struct hf_doc *d)
{
	d->pos = d->end = NULL;
}
