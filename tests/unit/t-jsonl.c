/*
 * The fast JSON field extractor (src/lib/jsonl.c) held against jansson as
 * the oracle: on hand-picked edge cases, on random JSON lines and on
 * random mutations of them, both must give the same field value or the
 * same rejection. OVL_FUZZ_ITERS scales the random part (default 60000);
 * OVL_FUZZ_SEED picks another seed.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "jsonl.h"
#include "rng.h"
#include "unit.h"

static const char *const paths[] = { "text", "meta.title", "a.b.c", "k" };
#define NPATHS (sizeof(paths) / sizeof(paths[0]))

static struct ovl_jsonl_path cpaths[NPATHS];
static struct ovl_buf scratch;
static unsigned long mismatches;

/* The oracle: jansson's verdict on line for path. */
static int
oracle(const char *line, size_t n, size_t pi, const char **val, size_t *len,
    json_t **keep)
{
	json_error_t je;
	json_t *root = json_loadb(line, n, 0, &je), *v;
	size_t i;

	*keep = root;
	if (root == NULL)
		return OVL_JSONL_INVALID;
	v = root;
	for (i = 0; i < cpaths[pi].n && v != NULL; i++)
		v = json_is_object(v) ? json_object_get(v, cpaths[pi].key[i]) :
		    NULL;
	if (v == NULL)
		return OVL_JSONL_MISSING;
	if (!json_is_string(v))
		return OVL_JSONL_NOTSTRING;
	*val = json_string_value(v);
	*len = json_string_length(v);
	return OVL_JSONL_OK;
}

static void
show(const char *what, const char *line, size_t n)
{
	size_t i;

	printf("# %s: \"", what);
	for (i = 0; i < n && i < 300; i++) {
		unsigned char c = (unsigned char)line[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			putchar(c);
		else
			printf("\\x%02x", c);
	}
	printf("\"%s\n", n > 300 ? "..." : "");
}

/* Compare both on one line, every path; returns 1 when they agree. */
static int
agree(const char *line, size_t n)
{
	size_t pi;
	int ok = 1;

	for (pi = 0; pi < NPATHS; pi++) {
		struct ovl_jsonl_result r;
		const char *ov = NULL;
		size_t olen = 0;
		json_t *keep;
		int got = ovl_jsonl_extract(&cpaths[pi], line, n, &scratch, &r);
		int want = oracle(line, n, pi, &ov, &olen, &keep);

		/* in place (issue 18): the same answer, over a copy */
		char *cp = malloc(n + 1);
		struct ovl_jsonl_result ri;
		int goti;

		memcpy(cp, line, n);
		goti = ovl_jsonl_extract_inplace(&cpaths[pi], cp, n, &ri);
		if (goti != got || (got == OVL_JSONL_OK && (ri.len != r.len ||
		    memcmp(ri.val, r.val, r.len) != 0 || ri.val < cp ||
		    ri.val + ri.len > cp + n)))
			got = -1;
		free(cp);
		if (got != want || (got == OVL_JSONL_OK && (r.len != olen ||
		    memcmp(r.val, ov, olen) != 0))) {
			if (mismatches++ < 10) {
				printf("# path %s: extractor %d (%s), jansson %d\n",
				    paths[pi], got, got == OVL_JSONL_INVALID ?
				    r.err : "", want);
				show("line", line, n);
			}
			ok = 0;
		}
		json_decref(keep);
	}
	return ok;
}

static int
agree_s(const char *s)
{
	return agree(s, strlen(s));
}

static void
test_edge_cases(void)
{
	static const char *const lines[] = {
		"{\"text\":\"hello\"}",
		"  {\"text\" : \"a\\nb\\t\\\"c\\\\d\\/e\\b\\f\\r\"} \r",
		"{\"text\":\"caf\\u00e9 \\u4e2d \\ud83d\\ude80\"}",
		"{\"text\":\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x9a\x80\"}",
		"{\"text\":\"\\u0000\"}",
		"{\"other\":\"\\u0000\",\"text\":\"x\"}",
		"{\"text\":\"\\ud800\"}",
		"{\"text\":\"\\udc00\"}",
		"{\"text\":\"\\ud800\\u0041\"}",
		"{\"text\":\"\\ud800x\"}",
		"{\"text\":\"\\uDBFF\\uDFFF\"}",
		"{\"text\":\"\\u12\"}",
		"{\"text\":\"\\x41\"}",
		"{\"text\":\"a\tb\"}",
		"{\"text\":\"\xff\"}",
		"{\"text\":\"\xc0\xaf\"}",
		"{\"text\":\"\xed\xa0\x80\"}",
		"{\"text\":\"\xf4\x90\x80\x80\"}",
		"{\"text\":\"\xe4\xb8\"}",
		"{\"x\":\"\xe4\xb8\",\"text\":\"a\"}",
		"{\"text\":1}", "{\"text\":-0}", "{\"text\":1.5e3}",
		"{\"text\":true}", "{\"text\":false}", "{\"text\":null}",
		"{\"text\":{}}", "{\"text\":[]}", "{\"text\":[\"a\"]}",
		"{\"k\":9223372036854775807}", "{\"k\":9223372036854775808}",
		"{\"k\":-9223372036854775808}", "{\"k\":-9223372036854775809}",
		"{\"k\":12345678901234567890123}", "{\"k\":1e308}",
		"{\"k\":1e309}", "{\"k\":-1e309}", "{\"k\":1.7976931348623157e308}",
		"{\"k\":1.8e308}", "{\"k\":1e-400}", "{\"k\":0.0000001}",
		"{\"k\":01}", "{\"k\":1.}", "{\"k\":.5}", "{\"k\":+1}", "{\"k\":1e}",
		"{\"k\":1e+}", "{\"k\":-}", "{\"k\":-a}", "{\"k\":0x10}",
		"{\"k\":1E5}", "{\"k\":1e-5}", "{\"k\":-0.0e-0}",
		"{\"k\":tru}", "{\"k\":truex}", "{\"k\":nul}", "{\"k\":NaN}",
		"{\"k\":Infinity}",
		"\"text\"", "123", "true", "null", "", "   ", "[]", "{}",
		"[{\"text\":\"in array\"}]", "{\"text\":\"a\"} x", "{\"text\":\"a\"}}",
		"{\"text\":\"a\",}", "{,\"text\":\"a\"}", "{\"text\" \"a\"}",
		"{\"text\":\"a\" \"b\":1}", "{text:\"a\"}", "{'text':'a'}",
		"\xef\xbb\xbf{\"text\":\"bom\"}",
		"{\"text\":\"first\",\"text\":\"second\"}",
		"{\"text\":\"first\",\"text\":2}",
		"{\"text\":2,\"text\":\"second\"}",
		"{\"te\\u0078t\":\"escaped key\"}",
		"{\"te\\u0000xt\":\"nul key\"}",
		"{\"meta\":{\"title\":\"T\"}}",
		"{\"meta\":{\"title\":\"T\"},\"meta\":{\"other\":1}}",
		"{\"meta\":{\"other\":1},\"meta\":{\"title\":\"T2\"}}",
		"{\"meta\":\"title\"}", "{\"meta\":[{\"title\":\"x\"}]}",
		"{\"a\":{\"b\":{\"c\":\"deep\"}}}", "{\"a\":{\"b\":{\"c\":{}}}}",
		"{\"a\":{\"b\":1}}",
		"{\"text\":\"a\"}\n", "\n{\"text\":\"a\"}", "{\"text\":\"a\"}\f",
		"{\"text\":\"a\"}\x00", "{\"text\":\"a\x00\"}",
		"{\"text\":\"a\"", "{\"text\":", "{\"text\"", "{\"", "{", "[",
		"[1,2,]", "[,]", "[1 2]", "{\"a\":[1,{\"b\":[]}],\"text\":\"z\"}",
	};
	size_t i;

	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		CHECK(agree_s(lines[i]));
	/* embedded NUL bytes, given by length */
	CHECK(agree("{\"text\":\"a\"}\0", 13));
	CHECK(agree("{\"text\":\"a\0b\"}", 14));
	CHECK(agree("\0", 1));
	/* jansson's lexer swallows one NUL just after a number or literal */
	CHECK(agree("[1\0]", 4));
	CHECK(agree("[1\0\0]", 5));
	CHECK(agree("{\"k\":true\0}", 12));
	CHECK(agree("{\"k\":\"s\"\0}", 11));
	CHECK(agree("[1.5e3\0,2]", 10));
}

static void
test_depth(void)
{
	static char buf[2 * 2100 + 64];
	int depths[] = { 2046, 2047, 2048, 2049, 2050 };
	size_t d, i, n;

	for (d = 0; d < sizeof(depths) / sizeof(depths[0]); d++) {
		/* arrays nested depth deep around a scalar, and empty */
		n = 0;
		for (i = 0; i < (size_t)depths[d]; i++)
			buf[n++] = '[';
		buf[n++] = '1';
		for (i = 0; i < (size_t)depths[d]; i++)
			buf[n++] = ']';
		CHECK(agree(buf, n));
		n = 0;
		for (i = 0; i < (size_t)depths[d]; i++)
			buf[n++] = '[';
		for (i = 0; i < (size_t)depths[d]; i++)
			buf[n++] = ']';
		CHECK(agree(buf, n));
	}
	{
		/* objects: {"a":{"a":...}} */
		size_t cap = 2100 * 6 + 16;
		char *o = malloc(cap);

		for (d = 0; d < sizeof(depths) / sizeof(depths[0]); d++) {
			n = 0;
			for (i = 0; i < (size_t)depths[d]; i++) {
				memcpy(o + n, "{\"a\":", 5);
				n += 5;
			}
			o[n++] = '1';
			for (i = 0; i < (size_t)depths[d]; i++)
				o[n++] = '}';
			CHECK(agree(o, n));
		}
		free(o);
	}
}

/* ---- random JSON ----------------------------------------------------- */

static struct ovl_rng rng;

static unsigned
pick(unsigned n)
{
	return (unsigned)ovl_rng_below(&rng, n);
}

static void
gen_string_body(struct ovl_buf *b)
{
	static const char *const atoms[] = {
		"a", "b", "z", " ", "text", "title", "meta", "\\n", "\\t", "\\\"",
		"\\\\", "\\/", "\\b", "\\f", "\\r", "\\u0041", "\\u00e9",
		"\\u4e2d", "\\ud83d\\ude80", "\xc3\xa9", "\xe4\xb8\xad",
		"\xf0\x9f\x98\x80", "\\u0000", "\\ud800", "\\udc00", "\\uZZZZ",
		"\\x", "\xff", "\xc3", "\x01", "\t", "'", "{", "}", "[", ":", ",",
	};
	unsigned n = pick(8), i;

	for (i = 0; i < n; i++) {
		/* mostly good atoms, sometimes a bad one */
		unsigned k = pick(100) < 93 ? pick(22) :
		    pick(sizeof(atoms) / sizeof(atoms[0]));
		ovl_buf_append(b, atoms[k], strlen(atoms[k]));
	}
}

static void
gen_key(struct ovl_buf *b)
{
	static const char *const keys[] = { "text", "meta", "title", "a", "b",
	    "c", "k", "te\\u0078t", "id", "" };

	ovl_buf_append(b, "\"", 1);
	if (pick(10) < 8) {
		const char *k = keys[pick(sizeof(keys) / sizeof(keys[0]))];
		ovl_buf_append(b, k, strlen(k));
	} else
		gen_string_body(b);
	ovl_buf_append(b, "\"", 1);
}

static void
gen_number(struct ovl_buf *b)
{
	static const char *const nums[] = { "0", "-0", "1", "42", "-17",
	    "3.25", "1e5", "-2.5E-3", "9223372036854775807",
	    "9223372036854775808", "-9223372036854775808",
	    "-9223372036854775809", "1e308", "1e309", "0.1e-999",
	    "123456789012345678901234567890", "01", "1.", ".5", "-", "1e" };
	unsigned k = pick(100) < 90 ? pick(12) :
	    pick(sizeof(nums) / sizeof(nums[0]));

	ovl_buf_append(b, nums[k], strlen(nums[k]));
}

static void gen_value(struct ovl_buf *b, int depth);

static void
ws(struct ovl_buf *b)
{
	static const char *const w[] = { "", "", "", " ", "\t", "\r", "\n", "  " };
	const char *s = w[pick(sizeof(w) / sizeof(w[0]))];

	ovl_buf_append(b, s, strlen(s));
}

static void
gen_object(struct ovl_buf *b, int depth)
{
	unsigned n = pick(5), i;

	ovl_buf_append(b, "{", 1);
	for (i = 0; i < n; i++) {
		if (i > 0)
			ovl_buf_append(b, ",", 1);
		ws(b);
		gen_key(b);
		ws(b);
		ovl_buf_append(b, ":", 1);
		ws(b);
		gen_value(b, depth + 1);
		ws(b);
	}
	ovl_buf_append(b, "}", 1);
}

static void
gen_value(struct ovl_buf *b, int depth)
{
	unsigned k = pick(depth > 4 ? 6 : 9);
	unsigned i, n;

	switch (k) {
	case 0: case 1: case 2:
		ovl_buf_append(b, "\"", 1);
		gen_string_body(b);
		ovl_buf_append(b, "\"", 1);
		break;
	case 3:
		gen_number(b);
		break;
	case 4:
		ovl_buf_append(b, pick(2) ? "true" : "null", pick(2) ? 4 : 4);
		break;
	case 5:
		ovl_buf_append(b, "false", 5);
		break;
	case 6: case 7:
		gen_object(b, depth);
		break;
	default:
		n = pick(4);
		ovl_buf_append(b, "[", 1);
		for (i = 0; i < n; i++) {
			if (i > 0)
				ovl_buf_append(b, ",", 1);
			ws(b);
			gen_value(b, depth + 1);
		}
		ovl_buf_append(b, "]", 1);
		break;
	}
}

static void
gen_line(struct ovl_buf *b)
{
	b->len = 0;
	ws(b);
	if (pick(20) == 0)
		gen_value(b, 0);
	else
		gen_object(b, 0);
	ws(b);
}

static void
mutate(struct ovl_buf *b)
{
	static const char specials[] = "\"\\{}[],: \t\n0-e.u\x00\xff\xc3\x80";
	unsigned n = 1 + pick(3), i;

	for (i = 0; i < n && b->len > 0; i++) {
		size_t at = ovl_rng_below(&rng, b->len);
		switch (pick(5)) {
		case 0:		/* flip a bit */
			b->p[at] ^= (unsigned char)(1u << pick(8));
			break;
		case 1:		/* replace with a special byte */
			b->p[at] = (unsigned char)specials[pick(sizeof(specials) - 1)];
			break;
		case 2:		/* delete a byte */
			memmove(b->p + at, b->p + at + 1, b->len - at - 1);
			b->len--;
			break;
		case 3:		/* insert a special byte */
			ovl_buf_reserve(b, 1);
			memmove(b->p + at + 1, b->p + at, b->len - at);
			b->p[at] = (unsigned char)specials[pick(sizeof(specials) - 1)];
			b->len++;
			break;
		default:	/* truncate */
			b->len = at;
			break;
		}
	}
}

static void
test_random(void)
{
	struct ovl_buf line = { NULL, 0, 0 };
	const char *e = getenv("OVL_FUZZ_ITERS"), *s = getenv("OVL_FUZZ_SEED");
	unsigned long iters = e != NULL ? strtoul(e, NULL, 10) : 60000, i;
	uint64_t seed = s != NULL ? strtoull(s, NULL, 10) : 20261122;
	unsigned long valid = 0, invalid = 0, found = 0, bad = 0;

	ovl_rng_seed(&rng, seed);
	for (i = 0; i < iters; i++) {
		struct ovl_jsonl_result r;
		int rc;

		gen_line(&line);
		if (i % 2 == 1)
			mutate(&line);
		if (!agree((const char *)line.p, line.len))
			bad++;
		rc = ovl_jsonl_extract(&cpaths[0], (const char *)line.p,
		    line.len, &scratch, &r);
		if (rc == OVL_JSONL_INVALID)
			invalid++;
		else
			valid++;
		if (rc == OVL_JSONL_OK)
			found++;
	}
	printf("# seed %" PRIu64 ": %lu lines, %lu valid, %lu invalid, %lu with "
	    "a string 'text', %lu disagreements\n", seed, iters, valid, invalid,
	    found, bad);
	CHECK(bad == 0);
	/* the generator must exercise both sides */
	CHECK(valid > iters / 5 && invalid > iters / 5 && found > iters / 50);
	ovl_buf_free(&line);
}

static void
test_path_spec(void)
{
	struct ovl_jsonl_path p;

	CHECK(ovl_jsonl_path_init(&p, "a.b") == 0 && p.n == 2);
	ovl_jsonl_path_free(&p);
	CHECK(ovl_jsonl_path_init(&p, "") == -1);
	CHECK(ovl_jsonl_path_init(&p, "a..b") == -1);
	CHECK(ovl_jsonl_path_init(&p, ".a") == -1);
	CHECK(ovl_jsonl_path_init(&p, "a.") == -1);
	CHECK(ovl_jsonl_path_init(&p,
	    "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q") == -1);
}

int
main(void)
{
	size_t i;

	for (i = 0; i < NPATHS; i++)
		if (ovl_jsonl_path_init(&cpaths[i], paths[i]) != 0)
			return 2;
	RUN(test_path_spec);
	RUN(test_edge_cases);
	RUN(test_depth);
	RUN(test_random);
	for (i = 0; i < NPATHS; i++)
		ovl_jsonl_path_free(&cpaths[i]);
	ovl_buf_free(&scratch);
	UNIT_DONE();
}
