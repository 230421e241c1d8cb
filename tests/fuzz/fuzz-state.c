/*
 * libFuzzer target: the text of STATE and META payloads as the stages
 * read them, beside the frame decoders of fuzz-frame: a stage's state
 * as ovl-ckpt's sink takes it (ovl_kvsec_parse), values of a META
 * (ovl_meta_value, ovl_step_run_token), and the specs a state or a META
 * repeats (ovl_docshuf_parse, ovl_split_parse). The first byte picks one.
 *
 * Nothing is read past the text; a state that parses prints back (one
 * line per entry) to a text that parses to the same entries; a META
 * value found is the rest of its line, cut to the room given; a split
 * that parses prints back to the same split.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "ckptlog.h"
#include "docshuf.h"
#include "frame.h"
#include "split.h"
#include "step.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static int
same(const char *a, const char *b)
{
	return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

static void
kvsec(const char *p, size_t n)
{
	struct ovl_kvsec s = { 0 }, t = { 0 };
	struct ovl_buf out = { 0 };
	size_t i;

	if (ovl_kvsec_parse(&s, p, n) != 0) {
		if (s.n != 0)
			abort();	/* cleared on error */
		return;
	}
	ovl_kvsec_text(&s, &out);
	if (ovl_kvsec_parse(&t, (const char *)out.p, out.len) != 0 ||
	    t.n != s.n)
		abort();
	for (i = 0; i < s.n; i++)
		if (!same(s.kv[i].key, t.kv[i].key) ||
		    !same(s.kv[i].val, t.kv[i].val) ||
		    ovl_kvsec_find(&s, s.kv[i].key) < 0)
			abort();
	ovl_buf_free(&out);
	ovl_kvsec_clear(&s);
	ovl_kvsec_clear(&t);
}

/* The first line is the key, the rest the META text. */
static void
meta(const char *p, size_t n)
{
	const char *nl = memchr(p, '\n', n);
	char key[64], val[16];
	size_t kl;

	if (nl == NULL || (kl = (size_t)(nl - p)) >= sizeof(key))
		return;
	memcpy(key, p, kl);
	key[kl] = '\0';
	if (memchr(key, '\0', kl) != NULL)
		return;
	n -= kl + 1;
	p = nl + 1;
	if (ovl_meta_value(p, n, key, val, sizeof(val))) {
		const char *at = NULL, *q;

		/* a line of the text is "key " and what val starts with */
		for (q = p; q < p + n && at == NULL; q++)
			if ((q == p || q[-1] == '\n') && (size_t)(p + n - q) >
			    kl && memcmp(q, key, kl) == 0 && q[kl] == ' ')
				at = q + kl + 1;
		if (at == NULL || memcmp(at, val, strlen(val)) != 0)
			abort();
	}
	(void)ovl_step_run_token(p, n, key);
}

static void
specs(const char *p, size_t n, int which)
{
	char s[128], back[128];
	struct ovl_docshuf_win w;
	struct ovl_split sp, sp2;
	const char *why = NULL;

	if (n >= sizeof(s))
		n = sizeof(s) - 1;
	memcpy(s, p, n);
	s[n] = '\0';
	errno = 0;
	if (which == 0) {
		if (ovl_docshuf_parse(s, &w) != 0) {
			if (errno != EINVAL && errno != ERANGE)
				abort();
		} else if ((w.kind == OVL_DOCSHUF_DOCS && (w.n == 0 ||
		    w.n > OVL_DOCSHUF_MAX_DOCS)) || (w.kind ==
		    OVL_DOCSHUF_CHUNKS && (w.n == 0 ||
		    w.n > OVL_DOCSHUF_MAX_CHUNKS)))
			abort();
		return;
	}
	if (ovl_split_parse(s, &sp, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	ovl_split_format(&sp, back, sizeof(back));
	if (ovl_split_parse(back, &sp2, &why) != 0 || sp2.n != sp.n ||
	    sp2.total != sp.total || memcmp(sp2.w, sp.w, sp.n *
	    sizeof(*sp.w)) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	char *copy;

	if (n == 0)
		return 0;
	/* an exact-size copy, so ASan sees a read past the end */
	copy = malloc(n - 1 > 0 ? n - 1 : 1);
	if (copy == NULL)
		abort();
	memcpy(copy, data + 1, n - 1);
	switch (data[0] % 4) {
	case 0:
		kvsec(copy, n - 1);
		break;
	case 1:
		meta(copy, n - 1);
		break;
	default:
		specs(copy, n - 1, data[0] % 4 - 2);
	}
	free(copy);
	return 0;
}
