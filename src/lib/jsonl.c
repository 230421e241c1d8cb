#include "jsonl.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum { T_STRING, T_NUMBER, T_OBJECT, T_ARRAY, T_TRUE, T_FALSE, T_NULL };

static const char *const type_names[] = {
	"string", "number", "object", "array", "true", "false", "null"
};

#define KEYBUF	1024	/* longest path component compared after unescaping */

struct hit {
	int			 found;
	int			 type;
	int			 escaped;
	const unsigned char	*s, *e;
};

struct jp {
	const unsigned char	*p, *end, *start;
	const struct ovl_jsonl_path *path;
	int			 depth;
	const char		*err;
	const unsigned char	*errp;
	unsigned char		*out;		/* the field, unescaped */
	size_t			 olen;
	int			 inplace;	/* out: the string's own bytes */
	unsigned char		 kb[KEYBUF];
};

int
ovl_jsonl_path_init(struct ovl_jsonl_path *p, const char *spec)
{
	const char *s = spec, *dot;

	memset(p, 0, sizeof(*p));
	for (;;) {
		size_t len;

		dot = strchr(s, '.');
		len = dot != NULL ? (size_t)(dot - s) : strlen(s);
		if (len == 0 || len > KEYBUF - 8 || p->n == OVL_JSONL_MAX_KEYS) {
			ovl_jsonl_path_free(p);
			errno = EINVAL;
			return -1;
		}
		p->key[p->n] = ovl_xmalloc(len + 1);
		memcpy(p->key[p->n], s, len);
		p->key[p->n][len] = '\0';
		p->klen[p->n] = len;
		if (len > p->maxklen)
			p->maxklen = len;
		p->n++;
		if (dot == NULL)
			break;
		s = dot + 1;
	}
	return 0;
}

void
ovl_jsonl_path_free(struct ovl_jsonl_path *p)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		free(p->key[i]);
	memset(p, 0, sizeof(*p));
}

static int
fail(struct jp *j, const unsigned char *at, const char *msg)
{
	if (j->err == NULL) {
		j->err = msg;
		j->errp = at;
	}
	return -1;
}

static inline void
ws(struct jp *j)
{
	const unsigned char *p = j->p, *end = j->end;

	while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	j->p = p;
}

/* Length of the valid UTF-8 sequence at q, or 0. */
static inline size_t
utf8_seq(const unsigned char *q, const unsigned char *end)
{
	unsigned c = q[0];
	size_t avail = (size_t)(end - q);

	if (c >= 0xc2 && c <= 0xdf) {
		if (avail < 2 || (q[1] & 0xc0) != 0x80)
			return 0;
		return 2;
	}
	if (c >= 0xe0 && c <= 0xef) {
		unsigned lo = c == 0xe0 ? 0xa0 : 0x80;
		unsigned hi = c == 0xed ? 0x9f : 0xbf;
		if (avail < 3 || q[1] < lo || q[1] > hi || (q[2] & 0xc0) != 0x80)
			return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned lo = c == 0xf0 ? 0x90 : 0x80;
		unsigned hi = c == 0xf4 ? 0x8f : 0xbf;
		if (avail < 4 || q[1] < lo || q[1] > hi ||
		    (q[2] & 0xc0) != 0x80 || (q[3] & 0xc0) != 0x80)
			return 0;
		return 4;
	}
	return 0;
}

/* The first byte of p[..end) that is '"', '\\', a control or non-ASCII. */
static inline const unsigned char *
scan_plain(const unsigned char *p, const unsigned char *end)
{
#ifdef __SSE2__
	const __m128i q = _mm_set1_epi8('"');
	const __m128i bs = _mm_set1_epi8('\\');
	const __m128i sp = _mm_set1_epi8(0x20);

	while (end - p >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
		/* Signed: bytes >= 0x80 are negative, so below 0x20 too. */
		__m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q),
		    _mm_cmpeq_epi8(v, bs)), _mm_cmplt_epi8(v, sp));
		int mask = _mm_movemask_epi8(m);

		if (mask != 0)
			return p + __builtin_ctz((unsigned)mask);
		p += 16;
	}
#endif
	while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
		p++;
	return p;
}

static inline int
hexval(unsigned c)
{
	if (c >= '0' && c <= '9')
		return (int)(c - '0');
	if (c >= 'a' && c <= 'f')
		return (int)(c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (int)(c - 'A' + 10);
	return -1;
}

/* Four hex digits at q (q + 4 <= end checked by the caller): value or -1. */
static inline long
hex4(const unsigned char *q)
{
	int a = hexval(q[0]), b = hexval(q[1]), c = hexval(q[2]),
	    d = hexval(q[3]);

	if ((a | b | c | d) < 0)
		return -1;
	return (long)a << 12 | (long)b << 8 | (long)c << 4 | (long)d;
}

/*
 * Check the escape at q (q[0] == '\\'). Returns its length, or -1 after
 * recording the error.
 */
static int
escape(struct jp *j, const unsigned char *q)
{
	long u, u2;

	if (j->end - q < 2)
		return fail(j, q, "premature end of input");
	switch (q[1]) {
	case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r':
	case 't':
		return 2;
	case 'u':
		break;
	default:
		return fail(j, q, "invalid escape");
	}
	if (j->end - q < 6 || (u = hex4(q + 2)) < 0)
		return fail(j, q, "invalid escape");
	if (u == 0)
		return fail(j, q, "\\u0000 is not allowed");
	if (u >= 0xdc00 && u <= 0xdfff)
		return fail(j, q, "invalid Unicode escape (lone low surrogate)");
	if (u < 0xd800 || u > 0xdbff)
		return 6;
	if (j->end - q < 12 || q[6] != '\\' || q[7] != 'u')
		return fail(j, q, "invalid Unicode escape (lone high surrogate)");
	if ((u2 = hex4(q + 8)) < 0)
		return fail(j, q + 6, "invalid escape");
	if (u2 < 0xdc00 || u2 > 0xdfff)
		return fail(j, q, "invalid Unicode escape (bad surrogate pair)");
	return 12;
}

static size_t put_utf8(unsigned char *o, unsigned long cp);

/* Write the bytes of the validated escape q[0..n) to o; returns how many. */
static size_t
decode_escape(const unsigned char *q, int n, unsigned char *o)
{
	unsigned long cp;

	switch (q[1]) {
	case 'b': *o = '\b'; return 1;
	case 'f': *o = '\f'; return 1;
	case 'n': *o = '\n'; return 1;
	case 'r': *o = '\r'; return 1;
	case 't': *o = '\t'; return 1;
	case 'u': break;
	default: *o = q[1]; return 1;
	}
	cp = (unsigned long)hex4(q + 2);
	if (n == 12)
		cp = 0x10000 + ((cp - 0xd800) << 10) +
		    ((unsigned long)hex4(q + 8) - 0xdc00);
	return put_utf8(o, cp);
}

/*
 * Scan the string at j->p (at its '"'); [*s, *e) is its raw body. With out
 * (room for the rest of the line), a string with escapes is also written
 * there unescaped, its length in *olen.
 */
static int
string(struct jp *j, const unsigned char **s, const unsigned char **e,
    int *escaped, unsigned char *out, size_t *olen)
{
	const unsigned char *p = j->p + 1, *end = j->end, *run = p;
	size_t o = 0;
	int esc = 0;

	*s = p;
	for (;;) {
		const unsigned char *q = scan_plain(p, end);
		int n;

		if (q == end)
			return fail(j, j->p, "premature end of input in a string");
		if (*q == '"') {
			*e = q;
			j->p = q + 1;
			*escaped = esc;
			if (out != NULL && esc) {
				/* in place, out + o never passes run */
				memmove(out + o, run, (size_t)(q - run));
				*olen = o + (size_t)(q - run);
			}
			return 0;
		}
		if (*q == '\\') {
			if ((n = escape(j, q)) < 0)
				return -1;
			esc = 1;
			if (out != NULL) {
				memmove(out + o, run, (size_t)(q - run));
				o += (size_t)(q - run);
				o += decode_escape(q, n, out + o);
				run = q + n;
			}
			p = q + n;
		} else if (*q < 0x20) {
			return fail(j, q, "control character in a string");
		} else {
			/* A run of multibyte sequences. */
			do {
				size_t len = utf8_seq(q, end);
				if (len == 0)
					return fail(j, q, "invalid UTF-8");
				q += len;
			} while (q < end && *q >= 0x80);
			p = q;
		}
	}
}

static size_t
put_utf8(unsigned char *o, unsigned long cp)
{
	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xc0 | cp >> 6);
		o[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xe0 | cp >> 12);
		o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | cp >> 18);
	o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * Unescape a validated string body [s, e) into out (cap bytes). Returns the
 * length, or SIZE_MAX when it would exceed cap.
 */
static size_t
unescape(const unsigned char *s, const unsigned char *e, unsigned char *out,
    size_t cap)
{
	size_t o = 0;

	while (s < e) {
		const unsigned char *bsl = memchr(s, '\\', (size_t)(e - s));
		size_t run = (bsl != NULL ? bsl : e) - s;
		unsigned long cp;

		if (run > cap - o)
			return SIZE_MAX;
		memcpy(out + o, s, run);
		o += run;
		s += run;
		if (bsl == NULL)
			break;
		if (cap - o < 4)
			return SIZE_MAX;
		switch (s[1]) {
		case 'b': out[o++] = '\b'; s += 2; continue;
		case 'f': out[o++] = '\f'; s += 2; continue;
		case 'n': out[o++] = '\n'; s += 2; continue;
		case 'r': out[o++] = '\r'; s += 2; continue;
		case 't': out[o++] = '\t'; s += 2; continue;
		case 'u': break;
		default: out[o++] = s[1]; s += 2; continue;
		}
		cp = (unsigned long)hex4(s + 2);
		s += 6;
		if (cp >= 0xd800 && cp <= 0xdbff) {
			unsigned long lo = (unsigned long)hex4(s + 2);
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			s += 6;
		}
		o += put_utf8(out + o, cp);
	}
	return o;
}

static int
key_eq(struct jp *j, const unsigned char *s, const unsigned char *e,
    int escaped, const char *key, size_t klen)
{
	size_t n;

	if (!escaped)
		return (size_t)(e - s) == klen && memcmp(s, key, klen) == 0;
	if ((size_t)(e - s) < klen)
		return 0;
	n = unescape(s, e, j->kb, KEYBUF);
	return n == klen && memcmp(j->kb, key, klen) == 0;
}

static int
number(struct jp *j)
{
	const unsigned char *p = j->p, *end = j->end, *s = j->p, *ds;
	size_t intdigits;
	int real = 0, expo = 0;

	if (*p == '-')
		p++;
	ds = p;
	if (p == end)
		return fail(j, s, "invalid number");
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9') {
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	} else
		return fail(j, s, "invalid number");
	intdigits = (size_t)(p - ds);
	if (p < end && *p == '.') {
		p++;
		if (p == end || *p < '0' || *p > '9')
			return fail(j, s, "invalid number");
		while (p < end && *p >= '0' && *p <= '9')
			p++;
		real = 1;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (p == end || *p < '0' || *p > '9')
			return fail(j, s, "invalid number");
		while (p < end && *p >= '0' && *p <= '9')
			p++;
		real = expo = 1;
	}
	/* jansson's lexer swallows one NUL byte just after a number. */
	j->p = p < end && *p == '\0' ? p + 1 : p;
	if (!real) {
		/* jansson keeps integers in int64 and refuses larger ones. */
		const char *lim = *s == '-' ? "9223372036854775808" :
		    "9223372036854775807";
		if (intdigits > 19 ||
		    (intdigits == 19 && memcmp(ds, lim, 19) > 0))
			return fail(j, s, "too big integer");
		return 0;
	}
	if (expo || intdigits > 300) {
		/* Only strtod knows for sure whether it overflows a double. */
		char small[128], *buf = small;
		size_t len = (size_t)(p - s);
		double v;

		if (len >= sizeof(small))
			buf = ovl_xmalloc(len + 1);
		memcpy(buf, s, len);
		buf[len] = '\0';
		errno = 0;
		v = strtod(buf, NULL);
		if (buf != small)
			free(buf);
		if ((v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE)
			return fail(j, s, "real number overflow");
	}
	return 0;
}

static int value(struct jp *j, int lvl, struct hit *h);

/*
 * After an object member or array element: skip white space, then ',' (1:
 * another item follows), the closing bracket (0: done) or an error (-1).
 */
static int
after_item(struct jp *j, char close, const char *expected)
{
	ws(j);
	if (j->p < j->end && *j->p == ',') {
		j->p++;
		ws(j);
		return 1;
	}
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return 0;
	}
	return fail(j, j->p, expected);
}

static int
object(struct jp *j, int lvl, struct hit *h)
{
	const struct ovl_jsonl_path *path = j->path;
	int track = lvl >= 0 && (size_t)lvl < path->n, more;

	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return 0;
	}
	for (;;) {
		const unsigned char *ks, *ke;
		int kesc;

		if (j->p == j->end || *j->p != '"')
			return fail(j, j->p, "string or '}' expected");
		if (string(j, &ks, &ke, &kesc, NULL, NULL) != 0)
			return -1;
		ws(j);
		if (j->p == j->end || *j->p != ':')
			return fail(j, j->p, "':' expected");
		j->p++;
		ws(j);
		if (track && key_eq(j, ks, ke, kesc, path->key[lvl],
		    path->klen[lvl])) {
			struct hit sub = { 0, 0, 0, NULL, NULL };
			if (value(j, lvl + 1, &sub) != 0)
				return -1;
			*h = sub;	/* the last duplicate wins */
		} else if (value(j, -1, NULL) != 0)
			return -1;
		if ((more = after_item(j, '}', "',' or '}' expected")) <= 0)
			return more;
	}
}

static int
array(struct jp *j)
{
	int more;

	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == ']') {
		j->p++;
		return 0;
	}
	for (;;) {
		if (value(j, -1, NULL) != 0)
			return -1;
		if ((more = after_item(j, ']', "',' or ']' expected")) <= 0)
			return more;
	}
}

static int
literal(struct jp *j, const char *word, size_t len)
{
	if ((size_t)(j->end - j->p) < len || memcmp(j->p, word, len) != 0)
		return fail(j, j->p, "invalid token");
	j->p += len;
	/* jansson's lexer swallows one NUL byte just after a literal. */
	if (j->p < j->end && *j->p == '\0')
		j->p++;
	return 0;
}

/*
 * Parse one value at j->p (whitespace skipped). lvl is the path level the
 * value sits at (path->n: it is the field), or -1 when no field can be
 * inside it; h receives what was found.
 */
static int
value(struct jp *j, int lvl, struct hit *h)
{
	const unsigned char *s, *e;
	int rc, type, esc = 0, target;

	if (j->p == j->end)
		return fail(j, j->p, "unexpected end of input");
	if (++j->depth > OVL_JSONL_MAX_DEPTH)
		return fail(j, j->p, "maximum parsing depth reached");
	target = lvl >= 0 && (size_t)lvl == j->path->n;
	s = e = j->p;
	switch (*j->p) {
	case '{':
		type = T_OBJECT;
		rc = object(j, target ? -1 : lvl, h);
		break;
	case '[':
		type = T_ARRAY;
		rc = array(j);
		break;
	case '"':
		type = T_STRING;
		rc = string(j, &s, &e, &esc, !target ? NULL : j->inplace ?
		    (unsigned char *)(uintptr_t)(j->p + 1) : j->out, &j->olen);
		break;
	case 't':
		type = T_TRUE;
		rc = literal(j, "true", 4);
		break;
	case 'f':
		type = T_FALSE;
		rc = literal(j, "false", 5);
		break;
	case 'n':
		type = T_NULL;
		rc = literal(j, "null", 4);
		break;
	default:
		if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
			type = T_NUMBER;
			rc = number(j);
		} else
			return fail(j, j->p, "invalid token");
		break;
	}
	j->depth--;
	if (rc == 0 && target) {
		h->found = 1;
		h->type = type;
		h->escaped = esc;
		h->s = s;
		h->e = e;
	}
	return rc;
}

/*
 * Parse line[0..n) and find the field (h); the field, when escaped, is
 * unescaped as it is scanned into out (room for n bytes), or with out
 * NULL over its own bytes (behind the scan: nothing not yet read changes).
 */
static int
extract(const struct ovl_jsonl_path *path, const char *line, size_t n,
    unsigned char *out, struct ovl_jsonl_result *r, struct hit *h)
{
	struct jp j;

	j.out = out;
	j.inplace = out == NULL;
	j.olen = 0;
	j.start = j.p = (const unsigned char *)line;
	j.end = j.p + n;
	j.path = path;
	j.depth = 0;
	j.err = NULL;
	j.errp = NULL;
	memset(r, 0, sizeof(*r));
	ws(&j);
	if (j.p == j.end || (*j.p != '{' && *j.p != '['))
		fail(&j, j.p, "'[' or '{' expected");
	else if (value(&j, 0, h) == 0) {
		ws(&j);
		if (j.p != j.end)
			fail(&j, j.p, "end of file expected");
	}
	if (j.err != NULL) {
		r->err = j.err;
		r->err_off = (size_t)(j.errp - j.start);
		return OVL_JSONL_INVALID;
	}
	if (!h->found)
		return OVL_JSONL_MISSING;
	if (h->type != T_STRING) {
		r->type = type_names[h->type];
		return OVL_JSONL_NOTSTRING;
	}
	r->val = (const char *)h->s;
	r->len = (size_t)(h->e - h->s);
	if (h->escaped) {
		/* The last string at the path was unescaped into out. */
		if (out != NULL)
			r->val = (const char *)out;
		r->len = j.olen;
	}
	return OVL_JSONL_OK;
}

int
ovl_jsonl_extract(const struct ovl_jsonl_path *path, const char *line,
    size_t n, struct ovl_buf *scratch, struct ovl_jsonl_result *r)
{
	struct hit h = { 0, 0, 0, NULL, NULL };

	/* Room for the field unescaped: never longer than the line. */
	scratch->len = 0;
	return extract(path, line, n, ovl_buf_reserve(scratch, n + 4), r, &h);
}

int
ovl_jsonl_extract_inplace(const struct ovl_jsonl_path *path, char *line,
    size_t n, struct ovl_jsonl_result *r)
{
	struct hit h = { 0, 0, 0, NULL, NULL };

	/* never longer than its escaped form: written over it */
	return extract(path, line, n, NULL, r, &h);
}
