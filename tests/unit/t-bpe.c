/*
 * BPE: rank-file loading, the merge order, both merge algorithms against a
 * naive one, special-token policies, invalid UTF-8.
 *
 * With arguments it is also the tokenizer driver of tests/t70-bpe*.bats:
 *   t-bpe encode [--special=POLICY] SPEC FILE...   one line of ids per file
 *   t-bpe bench SPEC FILE...     encode speed in process (CPU time),
 *                                documents separated by NUL bytes
 *   --general: the tokenizer's general way (ovl_tok_set_fast 0)
 *   --general-to=F: each document also the general way, its line to F
 *   --decode-to=F: each document's ids also decoded, NUL-terminated, to F
 * (one load of the tokenizer for the three: a large tokenizer.json takes
 * seconds to load under the sanitizers)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bpe.h"
#include "buf.h"
#include "hf.h"
#include "pretok.h"
#include "tok.h"
#include "unit.h"
#include "hf-models.h"

static char tmpdir[256];

static const char b64chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void
b64(const unsigned char *p, size_t n, char *out)
{
	size_t i, o = 0;
	unsigned v;

	for (i = 0; i < n; i += 3) {
		v = (unsigned)p[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		out[o++] = b64chars[v >> 18 & 63];
		out[o++] = b64chars[v >> 12 & 63];
		out[o++] = i + 1 < n ? b64chars[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? b64chars[v & 63] : '=';
	}
	out[o] = '\0';
}

/* A rank file: the 256 bytes (rank = byte), then tokens[i] with rank 256 + i. */
static char *
write_ranks(const char *name, const char *const *tokens, size_t ntok,
    const char *extra)
{
	static char path[512];
	FILE *f;
	char enc[64];
	unsigned char c;
	size_t i;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	if (f == NULL)
		abort();
	for (i = 0; i < 256; i++) {
		c = (unsigned char)i;
		b64(&c, 1, enc);
		fprintf(f, "%s %zu\n", enc, i);
	}
	for (i = 0; i < ntok; i++) {
		b64((const unsigned char *)tokens[i], strlen(tokens[i]), enc);
		fprintf(f, "%s %zu\n", enc, 256 + i);
	}
	if (extra != NULL)
		fputs(extra, f);
	fclose(f);
	return path;
}

static const char *const tiny[] = {
	"ab",		/* 256 */
	"cd",		/* 257 */
	"abcd",		/* 258 */
	"bc",		/* 259 */
	"aa",		/* 260 */
	"hello",	/* 261 */
	"aaa",		/* 262 */
	"he",		/* 263 */
	"ll",		/* 264 */
	"hell",		/* 265 */
	" w",		/* 266 */
};

static int
ids_are(const struct ovl_u32vec *v, const uint32_t *want, size_t n)
{
	size_t i;

	if (v->len != n)
		return 0;
	for (i = 0; i < n; i++)
		if (v->p[i] != want[i])
			return 0;
	return 1;
}

static void
test_tiny_merges(void)
{
	char err[256] = "";
	struct ovl_bpe *b;
	struct ovl_u32vec v = { 0 };
	const char *path = write_ranks("tiny.tiktoken", tiny, 11, NULL);
	int large;

	b = ovl_bpe_open(path, "r50k", err, sizeof(err));
	CHECK(b != NULL);
	if (b == NULL) {
		printf("# %s\n", err);
		return;
	}
	CHECK(ovl_bpe_ntokens(b) == 256 + 11);
	CHECK(ovl_bpe_vocab(b) == 50257);	/* r50k's <|endoftext|> */
	CHECK(ovl_bpe_special_id(b, "<|endoftext|>") == 50256);
	CHECK(strcmp(ovl_bpe_name(b), "r50k") == 0);
	for (large = 0; large < 2; large++) {
		/* ab (256) first, then cd (257), then abcd (258). */
		v.len = 0;
		ovl_bpe_merge(b, (const unsigned char *)"abcd", 4, large, &v);
		CHECK(ids_are(&v, (const uint32_t[]){ 258 }, 1));
		/* cd (257) beats bc (259); "bcd" is no token. */
		v.len = 0;
		ovl_bpe_merge(b, (const unsigned char *)"bcd", 3, large, &v);
		CHECK(ids_are(&v, (const uint32_t[]){ 'b', 257 }, 2));
		/* Equal ranks: leftmost first, so aa|a, then aaa. */
		v.len = 0;
		ovl_bpe_merge(b, (const unsigned char *)"aaa", 3, large, &v);
		CHECK(ids_are(&v, (const uint32_t[]){ 262 }, 1));
		/* aa|a|a: aa (260) at 1 beats aaa (262) at 0; aaaa is no token. */
		v.len = 0;
		ovl_bpe_merge(b, (const unsigned char *)"aaaa", 4, large, &v);
		CHECK(ids_are(&v, (const uint32_t[]){ 260, 260 }, 2));
		/* hello: he (263), ll (264), hell (265), hello (261). */
		v.len = 0;
		ovl_bpe_merge(b, (const unsigned char *)"hello", 5, large, &v);
		CHECK(ids_are(&v, (const uint32_t[]){ 261 }, 1));
		/* hellos: the same path, then s stays. */
		v.len = 0;
		ovl_bpe_merge(b, (const unsigned char *)"hellos", 6, large, &v);
		CHECK(ids_are(&v, (const uint32_t[]){ 261, 's' }, 2));
	}
	/* Through the pre-tokenizer a piece that is a token maps directly. */
	v.len = 0;
	CHECK(ovl_bpe_encode(b, "hello world", 11, &v, &(size_t){ 0 }) == 0);
	CHECK(ids_are(&v, (const uint32_t[]){ 261, 266, 'o', 'r', 'l', 'd' }, 6));
	ovl_u32vec_free(&v);
	ovl_bpe_free(b);
}

/* ---- the merge order against a naive, obviously-right implementation ---- */

struct naive_vocab {
	char	tok[600][16];
	size_t	n;
};

static long
naive_rank(const struct naive_vocab *nv, const unsigned char *p, size_t n)
{
	size_t i;

	if (n == 1)
		return p[0];
	for (i = 0; i < nv->n; i++)
		if (strlen(nv->tok[i]) == n && memcmp(nv->tok[i], p, n) == 0)
			return 256 + (long)i;
	return -1;
}

/* tiktoken's loop, literally: merge the leftmost lowest-rank pair. */
static size_t
naive_merge(const struct naive_vocab *nv, const unsigned char *p, size_t n,
    uint32_t *out)
{
	size_t st[300], m = n, i, best;
	long r, min;

	for (i = 0; i <= n; i++)
		st[i] = i;
	for (;;) {
		min = -1;
		best = 0;
		for (i = 0; i + 1 < m; i++) {
			r = naive_rank(nv, p + st[i], st[i + 2] - st[i]);
			if (r >= 0 && (min < 0 || r < min)) {
				min = r;
				best = i;
			}
		}
		if (min < 0)
			break;
		memmove(st + best + 1, st + best + 2, (m - best - 1) * sizeof(st[0]));
		m--;
	}
	for (i = 0; i < m; i++)
		out[i] = (uint32_t)naive_rank(nv, p + st[i], st[i + 1] - st[i]);
	return m;
}

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint32_t
rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

static void
test_merge_random(void)
{
	static struct naive_vocab nv;
	static const char alpha[] = "abcd ";
	const char *toks[600];
	char err[256] = "", cand[16];
	unsigned char s[260];
	uint32_t want[260];
	struct ovl_u32vec v1 = { 0 }, v2 = { 0 };
	struct ovl_bpe *b;
	size_t i, j, n, k, bad = 0;
	const char *path;

	/* Tokens built as BPE builds them (joins of earlier tokens), plus
	 * some that no merge path reaches. */
	nv.n = 0;
	while (nv.n < 500) {
		if (rnd(5) == 0 || nv.n < 5) {
			n = 2 + rnd(6);
			for (i = 0; i < n; i++)
				cand[i] = alpha[rnd(5)];
			cand[n] = '\0';
		} else {
			const char *x = nv.tok[rnd((uint32_t)nv.n)];
			const char *y = rnd(3) == 0 ? (char[2]){ alpha[rnd(5)], 0 } :
			    nv.tok[rnd((uint32_t)nv.n)];
			size_t lx = strlen(x), ly = strlen(y);
			if (lx + ly >= sizeof(cand))
				continue;
			memcpy(cand, x, lx);
			memcpy(cand + lx, y, ly + 1);
		}
		if (naive_rank(&nv, (const unsigned char *)cand, strlen(cand)) >= 0)
			continue;
		snprintf(nv.tok[nv.n], sizeof(nv.tok[0]), "%s", cand);
		nv.n++;
	}
	for (i = 0; i < nv.n; i++)
		toks[i] = nv.tok[i];
	path = write_ranks("random.tiktoken", toks, nv.n, NULL);
	b = ovl_bpe_open(path, "r50k", err, sizeof(err));
	CHECK(b != NULL);
	if (b == NULL)
		return;
	for (k = 0; k < 3000; k++) {
		n = 1 + rnd(k < 2500 ? 40 : 250);
		for (i = 0; i < n; i++)
			s[i] = (unsigned char)alpha[rnd(k % 2 ? 2 : 5)];
		v1.len = v2.len = 0;
		ovl_bpe_merge(b, s, n, 0, &v1);
		ovl_bpe_merge(b, s, n, 1, &v2);
		j = naive_merge(&nv, s, n, want);
		if (!ids_are(&v1, want, j) || !ids_are(&v2, want, j)) {
			if (bad++ < 3)
				printf("# mismatch on '%.*s'\n", (int)n, s);
		}
	}
	CHECK(bad == 0);
	ovl_u32vec_free(&v1);
	ovl_u32vec_free(&v2);
	ovl_bpe_free(b);
}

/* ---- rank-file errors ---- */

static void
expect_open_error(const char *path, const char *pattern, const char *want)
{
	char err[512] = "";
	struct ovl_bpe *b = ovl_bpe_open(path, pattern, err, sizeof(err));

	CHECK(b == NULL);
	ovl_bpe_free(b);
	if (strstr(err, want) == NULL) {
		printf("# error '%s' lacks '%s'\n", err, want);
		CHECK(strstr(err, want) != NULL);
	}
}

static void
test_load_errors(void)
{
	char want[600];
	const char *p;

	p = write_ranks("none.tiktoken", tiny, 0, NULL);
	unlink(p);
	expect_open_error(p, "r50k", "No such file or directory");

	p = write_ranks("badb64.tiktoken", tiny, 2, "YW*= 300\n");
	snprintf(want, sizeof(want), "%s:259: bad base64 token 'YW*='", p);
	expect_open_error(p, "r50k", want);

	p = write_ranks("badpad.tiktoken", tiny, 2, "YWJ 300\n");
	expect_open_error(p, "r50k", ":259: bad base64");

	p = write_ranks("badrank.tiktoken", tiny, 2, "eHl6 3x0\n");
	snprintf(want, sizeof(want), "%s:259: bad rank '3x0'", p);
	expect_open_error(p, "r50k", want);

	p = write_ranks("bigrank.tiktoken", tiny, 2, "eHl6 99999999999\n");
	expect_open_error(p, "r50k", ":259: bad rank '99999999999'");

	p = write_ranks("fields.tiktoken", tiny, 2, "eHl6\n");
	expect_open_error(p, "r50k", ":259: expected 'BASE64-TOKEN RANK'");

	p = write_ranks("three.tiktoken", tiny, 2, "eHl6 300 1\n");
	expect_open_error(p, "r50k", ":259: expected");

	p = write_ranks("duprank.tiktoken", tiny, 2, "eHl6 257\n");
	expect_open_error(p, "r50k", ":259: rank 257 given twice");

	p = write_ranks("duptok.tiktoken", tiny, 2, "YWI= 300\n");
	expect_open_error(p, "r50k", ":259: token 'YWI=' given twice");

	p = write_ranks("collide.tiktoken", tiny, 2, "eHl6 50256\n");
	expect_open_error(p, "r50k", "special token <|endoftext|> has id 50256");

	p = write_ranks("unknown.tiktoken", tiny, 2, NULL);
	expect_open_error(p, NULL, "cannot tell the encoding");
	expect_open_error(p, "(?<bad", "bad pre-tokenizer pattern at offset");
}

static void
test_missing_byte(void)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/short-r50k.tiktoken", tmpdir);
	f = fopen(path, "w");
	if (f == NULL)
		abort();
	fputs("YQ== 0\nYg== 1\n\n", f);	/* a, b, and a blank line */
	fclose(f);
	expect_open_error(path, NULL, "no token for byte 0x00");
}

/* ---- encoding ---- */

static void
test_invalid_utf8(void)
{
	char err[256];
	struct ovl_bpe *b;
	struct ovl_u32vec v = { 0 };
	size_t off = 0;
	const char *path = write_ranks("utf8-cl100k.tiktoken", tiny, 11, NULL);

	b = ovl_bpe_open(path, NULL, err, sizeof(err));
	CHECK(b != NULL);
	if (b == NULL)
		return;
	CHECK(strcmp(ovl_bpe_name(b), "cl100k") == 0);
	ovl_u32vec_push(&v, 7);
	CHECK(ovl_bpe_encode(b, "ab\xc3(cd", 6, &v, &off) == -1);
	CHECK(off == 2 && v.len == 1);
	CHECK(strcmp(ovl_bpe_error(b), "invalid UTF-8") == 0);
	CHECK(ovl_bpe_encode(b, "caf\xc3\xa9 \xed\xa0\x80", 9, &v, &off) == -1);
	CHECK(off == 6);	/* a surrogate */
	CHECK(ovl_bpe_encode(b, "\xf8", 1, &v, &off) == -1 && off == 0);
	CHECK(ovl_bpe_encode(b, "ok \xe2\x82", 5, &v, &off) == -1 && off == 3);
	CHECK(ovl_bpe_encode(b, "", 0, &v, &off) == 0 && v.len == 1);
	ovl_u32vec_free(&v);
	ovl_bpe_free(b);
}

static void
test_special_policies(void)
{
	char err[256];
	struct ovl_bpe *b;
	struct ovl_u32vec v = { 0 };
	size_t off = 0, i, len;
	const char *path = write_ranks("sp-cl100k.tiktoken", tiny, 11, NULL);
	const char *text = "ab<|endoftext|>cd<|fim_prefix|>";
	const unsigned char *t;
	char back[64];
	enum ovl_bpe_special pol;

	b = ovl_bpe_open(path, NULL, err, sizeof(err));
	CHECK(b != NULL);
	if (b == NULL)
		return;
	CHECK(ovl_bpe_vocab(b) == 100277);
	CHECK(ovl_bpe_special_id(b, "<|endofprompt|>") == 100276);
	CHECK(ovl_bpe_special_id(b, "<|nothing|>") == -1);
	/* plain: the text of the special is ordinary text. */
	CHECK(ovl_bpe_encode(b, text, strlen(text), &v, &off) == 0);
	for (i = 0, len = 0; i < v.len; i++) {
		CHECK(v.p[i] < 256 + 11);
		t = ovl_bpe_token(b, v.p[i], &(size_t){ 0 });
		CHECK(t != NULL);
	}
	/* Decoding gives the text back. */
	for (i = 0, len = 0; i < v.len && len < sizeof(back) - 16; i++) {
		size_t l;
		t = ovl_bpe_token(b, v.p[i], &l);
		memcpy(back + len, t, l);
		len += l;
	}
	CHECK(len == strlen(text) && memcmp(back, text, len) == 0);

	CHECK(ovl_bpe_special_parse("allow", &pol) == 0 && pol == OVL_BPE_ALLOW);
	CHECK(ovl_bpe_special_parse("skip", &pol) == -1);
	ovl_bpe_set_special(b, OVL_BPE_ALLOW);
	v.len = 0;
	CHECK(ovl_bpe_encode(b, text, strlen(text), &v, &off) == 0);
	CHECK(ids_are(&v, (const uint32_t[]){ 256, 100257, 257, 100258 }, 4));

	ovl_bpe_set_special(b, OVL_BPE_STRIP);
	v.len = 0;
	CHECK(ovl_bpe_encode(b, text, strlen(text), &v, &off) == 0);
	CHECK(ids_are(&v, (const uint32_t[]){ 256, 257 }, 2));

	ovl_bpe_set_special(b, OVL_BPE_ERROR);
	v.len = 0;
	CHECK(ovl_bpe_encode(b, text, strlen(text), &v, &off) == -1);
	CHECK(off == 2 && v.len == 0);
	CHECK(strcmp(ovl_bpe_error(b), "special token text '<|endoftext|>'") == 0);
	CHECK(ovl_bpe_encode(b, "abcd", 4, &v, &off) == 0 && v.len == 1);
	ovl_u32vec_free(&v);
	ovl_bpe_free(b);
}

static void
test_tok_interface(void)
{
	char err[512], spec[600];
	struct ovl_tok *t;
	struct ovl_u32vec v = { 0 };
	size_t off;
	const char *path = write_ranks("iface.tiktoken", tiny, 11, NULL);

	snprintf(spec, sizeof(spec), "tiktoken:%s:o200k", path);
	t = ovl_tok_open(spec, err, sizeof(err));
	CHECK(t != NULL);
	if (t == NULL)
		return;
	CHECK(strcmp(ovl_tok_name(t), "tiktoken:o200k") == 0);
	CHECK(ovl_tok_vocab(t) == 200019);
	CHECK(ovl_tok_eod(t) == 199999);
	CHECK(ovl_tok_set_eod(t, "<|endofprompt|>", err, sizeof(err)) == 0);
	CHECK(ovl_tok_eod(t) == 200018);
	CHECK(ovl_tok_set_special(t, "error", err, sizeof(err)) == 0);
	CHECK(ovl_tok_set_special(t, "bogus", err, sizeof(err)) == -1);
	CHECK(ovl_tok_encode(t, "x<|endofprompt|>", 16, &v, &off) == -1);
	CHECK(off == 1);
	CHECK(strcmp(ovl_tok_error(t), "special token text '<|endofprompt|>'") == 0);
	ovl_tok_free(t);

	/* A custom pattern: one special, <|endoftext|> after the last rank. */
	snprintf(spec, sizeof(spec), "tiktoken:%s:[a-z]+|[^a-z]", path);
	t = ovl_tok_open(spec, err, sizeof(err));
	CHECK(t != NULL);
	if (t == NULL)
		return;
	CHECK(strcmp(ovl_tok_name(t), "tiktoken:custom") == 0);
	CHECK(ovl_tok_vocab(t) == 256 + 11 + 1 && ovl_tok_eod(t) == 256 + 11);
	CHECK(ovl_tok_encode(t, "hello world", 11, &v, &off) == 0);
	CHECK(ids_are(&v, (const uint32_t[]){ 261, ' ', 'w', 'o', 'r', 'l', 'd' }, 7));
	ovl_tok_free(t);

	t = ovl_tok_open("tiktoken:", err, sizeof(err));
	CHECK(t == NULL && strstr(err, "no rank file") != NULL);
	t = ovl_tok_open("bytes", err, sizeof(err));
	CHECK(t != NULL);
	CHECK(ovl_tok_set_special(t, "plain", err, sizeof(err)) == 0);
	CHECK(ovl_tok_set_special(t, "allow", err, sizeof(err)) == -1);
	ovl_tok_free(t);
	ovl_u32vec_free(&v);
}

/*
 * Random texts, mostly ASCII: fast and slow cut each into the same pieces.
 * The number of pieces compared is added to *pieces; the differences are
 * returned (the first few printed).
 */
static size_t
same_pieces(struct ovl_pretok *fast, struct ovl_pretok *slow, int kind,
    size_t *pieces)
{
	static const char *const alpha[] = {
		"a", "b", "Z", "Q", "s", "S", "t", "re", "RE", "ve", "ll", "LL",
		"d", "m", "'", "'", "'", "0", "1", "9", " ", " ", " ", "  ",
		"\t", "\n", "\r", "\r\n", "\v", "\f", ".", "/", "//", "-",
		"(", "\"", "#", "\x01", "\x1c", "\x7f",
		"\xc3\xa9", "\xc3\x89", "\xc2\xa0", "\xc5\xbf", "\xc2\x85",
		"\xe4\xb8\xad", "\xd9\xa1", "\xcc\x81", "\xe2\x80\x83",
		"\xf0\x9f\x98\x80", "\xe1\xa0\x8e", "\xc2\xb2", "\xe2\x80\x99",
		"\xe3\x81\x82", "\xe3\x82\xa2", "\xe9\xbe\xa5", "\xe9\xbe\xa6",
		"\xef\xbc\x81", "\xe2\x82\xac", "\xe3\x80\x82"
	};
	char err[256], text[2048];
	size_t k, i, n, pos1, pos2, a1, e1, a2, e2, bad = 0;
	int r1, r2;

	for (k = 0; k < 4000; k++) {
		size_t want = 1 + rnd(k % 4 == 0 ? 400 : 30);
		n = 0;
		for (i = 0; i < want; i++) {
			/* Mostly ASCII, as real text is. */
			const char *p = alpha[rnd(k % 3 == 0 ?
			    sizeof(alpha) / sizeof(alpha[0]) : 40)];
			size_t l = strlen(p);
			if (n + l >= sizeof(text))
				break;
			memcpy(text + n, p, l);
			n += l;
		}
		pos1 = pos2 = 0;
		for (;;) {
			r1 = ovl_pretok_next(fast, (unsigned char *)text, n,
			    pos1, &a1, &e1, err, sizeof(err));
			r2 = ovl_pretok_next(slow, (unsigned char *)text, n,
			    pos2, &a2, &e2, err, sizeof(err));
			if (r1 != r2 || (r1 == 1 && (a1 != a2 || e1 != e2))) {
				if (bad++ < 5)
					printf("# kind %d: '%.*s': piece at %zu: "
					    "fast %zu-%zu, slow %zu-%zu\n", kind,
					    (int)n, text, pos1, a1, e1, a2, e2);
				break;
			}
			if (r1 != 1)
				break;
			(*pieces)++;
			pos1 = e1;
			pos2 = e2;
		}
	}
	return bad;
}

/* The ASCII scanners cut exactly where PCRE2 does. */
static void
test_scanner(void)
{
	static const enum ovl_pretok_kind kinds[] = {
		OVL_PRETOK_R50K, OVL_PRETOK_CL100K, OVL_PRETOK_O200K,
		OVL_PRETOK_QWEN
	};
	char err[256];
	struct ovl_pretok *fast, *slow;
	size_t bad = 0, pieces = 0;
	int kk;

	for (kk = 0; kk < 4; kk++) {
		fast = ovl_pretok_open(kinds[kk], NULL, err, sizeof(err));
		slow = ovl_pretok_open(kinds[kk], NULL, err, sizeof(err));
		CHECK(fast != NULL && slow != NULL);
		if (fast == NULL || slow == NULL)
			return;
		ovl_pretok_set_scanner(slow, 0);
		bad += same_pieces(fast, slow, kk, &pieces);
		ovl_pretok_free(fast);
		ovl_pretok_free(slow);
	}
	CHECK(bad == 0);
	CHECK(pieces > 100000);
}

/*
 * A tokenizer.json Split regex that is tiktoken's cl100k or o200k text
 * (Llama 3, GPT-OSS), or Qwen's variant of cl100k, takes the built-in
 * kind's scanner: it cuts as the
 * same regex read the general way (Oniguruma translated for PCRE2; the
 * regex in a group, so that it is not recognized).
 */
static void
test_hf_regex(void)
{
	static const char *const rx[] = {
		"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
		"\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
		"\\s+(?!\\S)|\\s+",
		"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
		"\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
		"\\s+(?!\\S)|\\s+",
		"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"
		"[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
		"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
		"[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
		"\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
		"\\s+(?!\\S)|\\s+",
		/* DeepSeek V3's three */
		"\\p{N}{1,3}",
		"[\xe4\xb8\x80" "-" "\xe9\xbe\xa5" "\xe3\x81\x80" "-" "\xe3\x82\x9f"
		"\xe3\x82\xa0" "-" "\xe3\x83\xbf" "]+",
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
		"[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
		" ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
	};
	static const enum ovl_pretok_kind want[] = {
		OVL_PRETOK_CL100K, OVL_PRETOK_QWEN, OVL_PRETOK_O200K,
		OVL_PRETOK_DIGITS3, OVL_PRETOK_DS_CJK, OVL_PRETOK_DEEPSEEK
	};
	char err[256], grouped[1024];
	struct ovl_pretok *fast, *slow;
	size_t bad = 0, pieces = 0, i;

	for (i = 0; i < sizeof(rx) / sizeof(rx[0]); i++) {
		snprintf(grouped, sizeof(grouped), "(?:%s)", rx[i]);
		fast = ovl_pretok_open(OVL_PRETOK_ONIG, rx[i], err, sizeof(err));
		slow = ovl_pretok_open(OVL_PRETOK_ONIG, grouped, err,
		    sizeof(err));
		CHECK(fast != NULL && slow != NULL);
		if (fast == NULL || slow == NULL)
			return;
		CHECK(ovl_pretok_kind(fast) == want[i]);
		CHECK(ovl_pretok_kind(slow) == OVL_PRETOK_ONIG);
		bad += same_pieces(fast, slow, (int)i, &pieces);
		ovl_pretok_free(fast);
		ovl_pretok_free(slow);
	}
	CHECK(bad == 0);
	CHECK(pieces > 50000);
}

/* GPT-2's printable character of byte b, UTF-8 into d: its length. */
static size_t
byte_char(unsigned b, char *d)
{
	unsigned k = 0, i, c;

	if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
		c = b;
	else {
		for (i = 0; i < b; i++)
			if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) ||
			    i >= 174))
				k++;
		c = 256 + k;
	}
	if (c < 0x80) {
		d[0] = (char)c;
		return 1;
	}
	d[0] = (char)(0xc0 | c >> 6);
	d[1] = (char)(0x80 | (c & 0x3f));
	return 2;
}

/* A token's bytes as a JSON string of byte-level characters. */
static void
json_token(struct ovl_buf *j, const char *t, size_t n)
{
	char d[2];
	size_t i, l;

	ovl_buf_append(j, "\"", 1);
	for (i = 0; i < n; i++) {
		l = byte_char((unsigned char)t[i], d);
		if (l == 1 && (d[0] == '"' || d[0] == '\\'))
			ovl_buf_append(j, "\\", 1);
		ovl_buf_append(j, d, l);
	}
	ovl_buf_append(j, "\"", 1);
}

/*
 * The fast way of a tokenizer.json (token look-up, cache, byte tables,
 * scan merge) gives the general way's ids (every piece merged with a
 * heap, as HF merges): random byte-level merges over a small alphabet,
 * some tokens made by more than one merge (as Llama 3's file has them),
 * with and without ignore_merges, the whole document one piece (long
 * pieces: the heap against the scan), and with Qwen's Split regex.
 */
static void
puts_buf(struct ovl_buf *b, const char *s)
{
	ovl_buf_append(b, s, strlen(s));
}

static void
test_hf_fast(void)
{
	static const char *const alpha[] = { "a", "b", "c", " ", "\xc3\xa9",
	    "\n", "1" };
	char tok[600][12], path[300], err[256], text[200];
	size_t len[600], ntok = 0, i, k, n, bad = 0, docs = 0;
	struct ovl_buf j = { 0 };
	struct ovl_u32vec f = { 0 }, g = { 0 };
	struct ovl_hf *fast, *gen;
	int im, pre;
	FILE *fp;

	for (i = 0; i < 256; i++) {
		tok[ntok][0] = (char)i;
		len[ntok++] = 1;
	}
	for (im = 0; im < 2; im++)
		for (pre = 0; pre < 2; pre++) {
			struct ovl_buf merges = { 0 };
			size_t nt = 256, nm = 0;

			j.len = 0;
			/* merges over the alphabet's bytes and what they made */
			while (nm < 400) {
				size_t a = rnd(3) == 0 ? (size_t)(unsigned char)
				    "abc \xc3\xa9\n1"[rnd(8)] : 256 + rnd((uint32_t)
				    (nt > 256 ? nt - 256 : 1));
				size_t b = rnd(3) == 0 ? (size_t)(unsigned char)
				    "abc \xc3\xa9\n1"[rnd(8)] : 256 + rnd((uint32_t)
				    (nt > 256 ? nt - 256 : 1));
				size_t c;

				if (a >= nt || b >= nt || len[a] + len[b] > 10)
					continue;
				memcpy(tok[nt], tok[a], len[a]);
				memcpy(tok[nt] + len[a], tok[b], len[b]);
				len[nt] = len[a] + len[b];
				for (c = 0; c < nt; c++)
					if (len[c] == len[nt] &&
					    memcmp(tok[c], tok[nt], len[c]) == 0)
						break;
				if (c < 256 || (c == nt && nt + 1 >= 600))
					continue;
				/* c < nt: one more merge that makes token c */
				puts_buf(&merges, nm ? ",[" : "[");
				json_token(&merges, tok[a], len[a]);
				puts_buf(&merges, ",");
				json_token(&merges, tok[b], len[b]);
				puts_buf(&merges, "]");
				nm++;
				if (c == nt)
					nt++;
			}
			puts_buf(&j, "{\"model\":{\"type\":\"BPE\",\"ignore_merges\":");
			puts_buf(&j, im ? "true" : "false");
			puts_buf(&j, ",\"vocab\":{");
			for (i = 0; i < nt; i++) {
				char num[24];
				if (i > 0)
					puts_buf(&j, ",");
				json_token(&j, tok[i], len[i]);
				snprintf(num, sizeof(num), ":%zu", i);
				ovl_buf_append(&j, num, strlen(num));
			}
			puts_buf(&j, "},\"merges\":[");
			ovl_buf_append(&j, merges.p, merges.len);
			puts_buf(&j, "]},\"pre_tokenizer\":{\"type\":\"Sequence\","
			    "\"pretokenizers\":[");
			if (pre) {
				const char *q = "{\"type\":\"Split\",\"behavior\":"
				    "\"Isolated\",\"pattern\":{\"Regex\":\"(?i:'s|'t|"
				    "'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?"
				    "\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
				    "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|"
				    "\\\\s+\"}},";
				ovl_buf_append(&j, q, strlen(q));
			}
			puts_buf(&j, "{\"type\":\"ByteLevel\",\"add_prefix_space\":"
			    "false,\"use_regex\":false}]}}");
			ovl_buf_free(&merges);
			snprintf(path, sizeof(path), "%s/hf-%d%d.json", tmpdir, im, pre);
			fp = fopen(path, "w");
			CHECK(fp != NULL);
			if (fp == NULL)
				break;
			fwrite(j.p, 1, j.len, fp);
			fclose(fp);
			fast = ovl_hf_open(path, err, sizeof(err));
			gen = ovl_hf_open(path, err, sizeof(err));
			if (fast == NULL || gen == NULL)
				printf("# %s\n", err);
			CHECK(fast != NULL && gen != NULL);
			if (fast == NULL || gen == NULL) {
				ovl_hf_free(fast);
				ovl_hf_free(gen);
				break;
			}
			ovl_hf_set_fast(gen, 0);
			for (k = 0; k < 3000; k++) {
				size_t want = 1 + rnd(k % 5 == 0 ? 90 : 25);
				for (n = 0; n + 2 < sizeof(text) && want-- > 0;) {
					const char *p = alpha[rnd(7)];
					memcpy(text + n, p, strlen(p));
					n += strlen(p);
				}
				f.len = g.len = 0;
				CHECK(ovl_hf_encode(fast, text, n, &f, &i) == 0);
				CHECK(ovl_hf_encode(gen, text, n, &g, &i) == 0);
				docs++;
				if (f.len != g.len || memcmp(f.p, g.p, f.len *
				    sizeof(*f.p)) != 0) {
					if (bad++ < 3)
						printf("# ignore_merges %d split %d: "
						    "'%.*s': %zu ids fast, %zu general\n",
						    im, pre, (int)n, text, f.len, g.len);
				}
			}
			ovl_hf_free(fast);
			ovl_hf_free(gen);
		}
	CHECK(bad == 0);
	CHECK(docs == 12000);
	ovl_buf_free(&j);
	ovl_u32vec_free(&f);
	ovl_u32vec_free(&g);
}

/* A tokenizer.json with the text given: its handle, or NULL and err. */
static struct ovl_hf *
hf_text(const char *text, char *err, size_t errlen)
{
	char path[300];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/j.json", tmpdir);
	if ((fp = fopen(path, "w")) == NULL)
		abort();
	fputs(text, fp);
	fclose(fp);
	err[0] = '\0';
	return ovl_hf_open(path, err, errlen);
}

/*
 * The in-place reading of model.vocab and model.merges: escapes,
 * surrogate pairs, both forms of a merge, tokens outside the byte map,
 * and every kind of malformed or unfit text refused with jansson's line
 * and column or a message naming the entry.
 */
static void
test_hf_json(void)
{
	static const char *const bad[][2] = {
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,\n"
		  "\"b\": 1 \"c\": 2}, \"merges\": []}}", "line 2, column" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
		  "\"merges\": [\"a a\",\n[\"a\", \"a\"}]}}", "line 2, column" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\\udc00\": 0}, "
		  "\"merges\": []}}", "line 1, column" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\\q\": 0}, "
		  "\"merges\": []}}", "line 1, column" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\tb\": 0}, "
		  "\"merges\": []}}", "line 1, column" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 01}, "
		  "\"merges\": []}}", "line 1, column" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
		  "\"merges\": []}} x", "line 1, column" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
		  "\"merges\": []}, \"model\": {}}", "line 1, column" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
		  "\"vocab\": {}, \"merges\": []}}", "line 1, column" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, "
		  "\"a\": 1}, \"merges\": []}}", "duplicate object key" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 1.5}, "
		  "\"merges\": []}}", "bad id for 'a'" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"0\"}, "
		  "\"merges\": []}}", "bad id for 'a'" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, "
		  "\"merges\": []}}", "model.vocab is missing or empty" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": [], "
		  "\"merges\": []}}", "model.vocab is missing or empty" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
		  "\"merges\": {}}}", "model.merges is missing" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, "
		  "\"aa\": 1}, \"merges\": [\"a a\", [1, 2]]}}",
		  "model.merges[1]: expected" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
		  "\"merges\": [\"a  a\"]}}", "model.merges[0]: expected" },
		{ "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
		  "\"merges\": [[\"a\", \"b\"]]}}", "'a' + 'b': a token is not" },
		{ "[1, 2]", "not a tokenizer.json" },
		{ "{\"version\": \"1.0\"}", "not a tokenizer.json" },
	};
	/* byte level: Ġ is the space; one token outside the byte map */
	static const char good[] =
	    "{\"version\": \"1.0\", \"added_tokens\": [],\n"
	    " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\":"
	    " false, \"use_regex\": false},\n"
	    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"vocab\": {\n"
	    "  \"\\u0120\": 0, \"a\": 1, \"\\u0120a\": 2, \"b\\\"\": 3,"
	    " \"a\\u0120a\" : 4 , \"\\ud83d\\ude00\": 5, \"\\\"\": 6,"
	    " \"b\": 7},\n"
	    "  \"merges\": [[\"\\u0120\", \"a\"], \"a \\u0120a\","
	    " [ \"b\" , \"\\\"\" ] ]},\n"
	    " \"decoder\": {\"type\": \"ByteLevel\"}}\n";
	static const uint32_t want[] = { 4, 3 };
	struct ovl_u32vec v = { 0 };
	struct ovl_hf *h;
	char err[512];
	size_t i, off;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		h = hf_text(bad[i][0], err, sizeof(err));
		CHECK(h == NULL);
		ovl_hf_free(h);
		if (strstr(err, bad[i][1]) == NULL) {
			printf("# case %zu: error '%s' lacks '%s'\n", i, err,
			    bad[i][1]);
			CHECK(strstr(err, bad[i][1]) != NULL);
		}
	}
	h = hf_text(good, err, sizeof(err));
	CHECK(h != NULL);
	if (h == NULL) {
		printf("# %s\n", err);
		return;
	}
	CHECK(ovl_hf_vocab(h) == 8);
	CHECK(ovl_hf_token_id(h, "\xf0\x9f\x98\x80") == 5);
	CHECK(ovl_hf_token_id(h, "\xc4\xa0" "a") == 2);
	/* "a a" one piece: Ġ+a first, then a+Ġa; b+" */
	CHECK(ovl_hf_encode(h, "a ab\"", 5, &v, &off) == 0);
	CHECK(ids_are(&v, want, 2));
	ovl_hf_free(h);
	ovl_u32vec_free(&v);
}

/*
 * The fast way and the general way give the same ids with the models the
 * conformance test (t73) takes from HF, on its texts that need no node
 * (tests/bpe/texts and README) and seeded documents of tricky pieces (the
 * models' added tokens among them).
 * Models not installed ($OVL_NPM_CACHE/npm-hf, t73's hf_ref) are skipped,
 * saying so.
 */
static void
test_hf_models(void)
{
	static const char *const models[] = { "llama3", "qwen3",
	    "deepseek_v3", "gptoss", "gemma3", "llama2" };
	static const char *const bits[] = { "Hello", " world", "  ", "\n\n",
	    "\t", " \n ", "'s", "'LL", "123", "4567", "\xd9\xa3", "x1y2",
	    "\xe6\x9d\xb1\xe4\xba\xac", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
	    "\xf0\x9f\x98\x80", "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd",
	    "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7", "e\xcc\x81",
	    "\xe2\x84\xaa", "\xe2\x96\x81", "\xe2\x96\x81\xe2\x96\x81", ">",
	    "</", "<0x41>", "<|endoftext|>", "<|begin_of_text|>",
	    "<start_of_turn>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81"
	    "sentence\xef\xbd\x9c>", "{\"a\": [1, 2]}", "int main(void)",
	    "    return 0;", "\xc3\xa9t\xc3\xa9", "\xd0\x9f\xd1\x80\xd0\xb8",
	    "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87",
	    ".", "...", "!!", "?", "--", "__init__", "\r\n" };
	const char *cache = getenv("OVL_NPM_CACHE"), *src = getenv("OVL_SRCDIR");
	char path[600];
	struct ovl_buf docs = { 0 };
	struct ovl_u32vec f = { 0 }, g = { 0 };
	size_t i, k, m, off, ndocs = 0, tested = 0, bad = 0;
	FILE *pp;

	if (cache == NULL || src == NULL) {
		printf("# skip: OVL_NPM_CACHE or OVL_SRCDIR not set (run it "
		    "through make check)\n");
		return;
	}
	/* the texts, one document, then the pieces' */
	snprintf(path, sizeof(path), "cat '%s'/tests/bpe/texts/*.txt "
	    "'%s'/README.md", src, src);
	if ((pp = popen(path, "r")) != NULL) {
		char buf[65536];
		size_t got;

		while ((got = fread(buf, 1, sizeof(buf), pp)) > 0)
			ovl_buf_append(&docs, buf, got);
		pclose(pp);
	}
	ovl_buf_append(&docs, "", 1);
	for (i = 0; i < 400; i++) {
		size_t nb = 1 + rnd(40);

		for (k = 0; k < nb; k++) {
			const char *b = bits[rnd(sizeof(bits) / sizeof(bits[0]))];
			ovl_buf_append(&docs, b, strlen(b));
		}
		ovl_buf_append(&docs, "", 1);
	}
	CHECK(docs.len > 80000);
	for (m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		struct ovl_hf *h = unit_hf_model(cache, models[m]);

		if (h == NULL)
			continue;
		ovl_hf_set_special(h, OVL_BPE_ALLOW);
		for (i = 0, ndocs = 0; i < docs.len; i += k + 1, ndocs++) {
			const char *d = (const char *)docs.p + i;

			k = strlen(d);
			f.len = g.len = 0;
			ovl_hf_set_fast(h, 1);
			CHECK(ovl_hf_encode(h, d, k, &f, &off) == 0);
			ovl_hf_set_fast(h, 0);
			CHECK(ovl_hf_encode(h, d, k, &g, &off) == 0);
			if (f.len != g.len || memcmp(f.p, g.p, f.len *
			    sizeof(*f.p)) != 0) {
				if (bad++ < 5)
					printf("# %s: document %zu differs\n",
					    models[m], ndocs);
			}
		}
		tested++;
		ovl_hf_free(h);
	}
	CHECK(bad == 0);
	printf("# %zu models, %zu documents each\n", tested, ndocs);
	ovl_buf_free(&docs);
	ovl_u32vec_free(&f);
	ovl_u32vec_free(&g);
}

static void
cleanup(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "t-bpe: cannot remove %s\n", tmpdir);
}

/* ---- the driver ---- */

static int
driver(int argc, char **argv)
{
	char err[512];
	const char *special = NULL;
	struct ovl_tok *t;
	struct ovl_u32vec v = { 0 };
	int i = 2, bench = strcmp(argv[1], "bench") == 0, rc = 0, nul = 0;
	int general = 0;
	FILE *gen_to = NULL, *dec_to = NULL;
	struct ovl_u32vec gv = { 0 };
	struct ovl_buf dec = { 0 };
	size_t len, off, j, bytes = 0, toks = 0;
	char *text, *doc, *dend, *end;
	uint32_t h = 2166136261u;
	struct timespec t0, t1;
	double sec = 0;

	for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
		if (strncmp(argv[i], "--special=", 10) == 0)
			special = argv[i] + 10;
		else if (strcmp(argv[i], "--nul") == 0)
			nul = 1;
		else if (strcmp(argv[i], "--general") == 0)
			general = 1;
		else if (strncmp(argv[i], "--general-to=", 13) == 0 &&
		    gen_to == NULL) {
			if ((gen_to = fopen(argv[i] + 13, "w")) == NULL)
				return perror(argv[i] + 13), 2;
		} else if (strncmp(argv[i], "--decode-to=", 12) == 0 &&
		    dec_to == NULL) {
			if ((dec_to = fopen(argv[i] + 12, "w")) == NULL)
				return perror(argv[i] + 12), 2;
		} else
			break;
	}
	if (i + 1 >= argc) {
		fprintf(stderr, "usage: t-bpe encode|bench [--special=P] [--nul] "
		    "[--general] [--general-to=F] [--decode-to=F] SPEC FILE...\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((t = ovl_tok_open(argv[i++], err, sizeof(err))) == NULL) {
		fprintf(stderr, "t-bpe: %s\n", err);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (general)
		ovl_tok_set_fast(t, 0);
	if (bench)
		fprintf(stderr, "load %.3f s\n", (double)(t1.tv_sec - t0.tv_sec) +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	if (special != NULL && ovl_tok_set_special(t, special, err, sizeof(err)) != 0) {
		fprintf(stderr, "t-bpe: %s\n", err);
		ovl_tok_free(t);
		return 2;
	}
	for (; i < argc; i++) {
		if ((text = slurp(argv[i], &len)) == NULL) {
			fprintf(stderr, "t-bpe: cannot read '%s': %s\n", argv[i],
			    strerror(errno));
			ovl_tok_free(t);
			ovl_u32vec_free(&v);
			return 2;
		}
		bytes += len;
		for (doc = text, end = text + len; doc <= end; doc = dend + 1) {
			dend = nul || bench ? memchr(doc, '\0', (size_t)(end - doc)) :
			    NULL;
			if (dend == NULL)
				dend = end;
			v.len = 0;
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
			if (ovl_tok_encode(t, doc, (size_t)(dend - doc), &v,
			    &off) != 0) {
				fprintf(stderr, "t-bpe: '%s': %s at byte %zu\n",
				    argv[i], ovl_tok_error(t),
				    (size_t)(doc - text) + off);
				rc = 1;
				continue;
			}
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
			sec += (double)(t1.tv_sec - t0.tv_sec) +
			    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
			toks += v.len;
			for (j = 0; j < v.len; j++)
				h = (h ^ v.p[j]) * 16777619u;
			if (!bench) {
				for (j = 0; j < v.len; j++)
					printf(j != 0 ? " %u" : "%u", v.p[j]);
				putchar('\n');
			}
			if (gen_to != NULL) {
				gv.len = 0;
				ovl_tok_set_fast(t, 0);
				if (ovl_tok_encode(t, doc, (size_t)(dend - doc),
				    &gv, &off) != 0)
					rc = 1;
				ovl_tok_set_fast(t, !general);
				for (j = 0; j < gv.len; j++)
					fprintf(gen_to, j != 0 ? " %u" : "%u", gv.p[j]);
				putc('\n', gen_to);
			}
			if (dec_to != NULL) {
				dec.len = 0;
				if (ovl_tok_decode(t, v.p, v.len, &dec) != 0)
					rc = 1;
				fwrite(dec.p, 1, dec.len, dec_to);
				putc('\0', dec_to);
			}
		}
		free(text);
	}
	if ((gen_to != NULL && fclose(gen_to) != 0) ||
	    (dec_to != NULL && fclose(dec_to) != 0))
		rc = 2;
	ovl_u32vec_free(&gv);
	ovl_buf_free(&dec);
	if (bench)
		printf("overlord bytes %zu tokens %zu seconds %.3f hash %x\n",
		    bytes, toks, sec, h);
	ovl_u32vec_free(&v);
	ovl_tok_free(t);
	return rc;
}

/* t-bpe decode SPEC FILE: each line of ids to its text, NUL-terminated. */
static int
decode_driver(int argc, char **argv)
{
	char err[512], *line = NULL, *p, *e;
	size_t cap = 0;
	struct ovl_tok *t;
	struct ovl_u32vec v = { 0 };
	struct ovl_buf out = { 0 };
	FILE *fp;
	int rc = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: t-bpe decode SPEC FILE\n");
		return 2;
	}
	if ((t = ovl_tok_open(argv[2], err, sizeof(err))) == NULL) {
		fprintf(stderr, "t-bpe: %s\n", err);
		return 2;
	}
	if ((fp = fopen(argv[3], "r")) == NULL) {
		perror(argv[3]);
		ovl_tok_free(t);
		return 2;
	}
	while (getline(&line, &cap, fp) > 0) {
		v.len = 0;
		for (p = line;; p = e) {
			unsigned long x = strtoul(p, &e, 10);
			if (e == p)
				break;
			ovl_u32vec_push(&v, (uint32_t)x);
		}
		out.len = 0;
		if (ovl_tok_decode(t, v.p, v.len, &out) != 0) {
			fprintf(stderr, "t-bpe: an id is not a token\n");
			rc = 1;
		}
		fwrite(out.p, 1, out.len, stdout);
		putchar('\0');
	}
	free(line);
	fclose(fp);
	ovl_buf_free(&out);
	ovl_u32vec_free(&v);
	ovl_tok_free(t);
	return rc;
}

int
main(int argc, char **argv)
{
	const char *td = getenv("TMPDIR");

	if (argc > 1) {
		if (strcmp(argv[1], "encode") == 0 || strcmp(argv[1], "bench") == 0)
			return driver(argc, argv);
		if (strcmp(argv[1], "decode") == 0)
			return decode_driver(argc, argv);
		fprintf(stderr, "usage: t-bpe [encode|bench [--special=P] SPEC FILE...]\n");
		return 2;
	}
	snprintf(tmpdir, sizeof(tmpdir), "%s/t-bpe.XXXXXX",
	    td != NULL && *td != '\0' ? td : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_tiny_merges);
	RUN(test_merge_random);
	RUN(test_load_errors);
	RUN(test_missing_byte);
	RUN(test_invalid_utf8);
	RUN(test_special_policies);
	RUN(test_tok_interface);
	RUN(test_scanner);
	RUN(test_hf_regex);
	RUN(test_hf_fast);
	RUN(test_hf_json);
	RUN(test_hf_models);
	cleanup();
	UNIT_DONE();
}
