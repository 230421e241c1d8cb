/*
 * libFuzzer target: the JSON field extractor (src/lib/jsonl.c) against
 * jansson, the library it must agree with: for every line the same field
 * value, or the same verdict (missing, not a string, invalid). A
 * disagreement aborts, so libFuzzer keeps the input. Lines with a NUL byte
 * are left out: jansson's lexer treats a NUL after a number or literal as
 * the end of the text (tests/unit/t-jsonl.c holds that quirk).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buf.h"
#include "jsonl.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static const char *const paths[] = { "text", "a.b", "meta.title" };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	static struct ovl_buf scratch;
	static struct ovl_jsonl_path cp[3];
	static int ready;
	const char *line = (const char *)data;
	size_t pi, i;

	if (memchr(data, '\0', n) != NULL || memchr(data, '\n', n) != NULL)
		return 0;
	if (!ready) {
		for (pi = 0; pi < 3; pi++)
			if (ovl_jsonl_path_init(&cp[pi], paths[pi]) != 0)
				abort();
		ready = 1;
	}
	for (pi = 0; pi < 3; pi++) {
		struct ovl_jsonl_result r;
		json_error_t je;
		json_t *root = json_loadb(line, n, 0, &je), *v = root;
		int got = ovl_jsonl_extract(&cp[pi], line, n, &scratch, &r);
		int want;

		for (i = 0; i < cp[pi].n && v != NULL; i++)
			v = json_is_object(v) ? json_object_get(v,
			    cp[pi].key[i]) : NULL;
		if (root == NULL)
			want = OVL_JSONL_INVALID;
		else if (v == NULL)
			want = OVL_JSONL_MISSING;
		else if (!json_is_string(v))
			want = OVL_JSONL_NOTSTRING;
		else
			want = OVL_JSONL_OK;
		if (got != want || (got == OVL_JSONL_OK &&
		    (r.len != json_string_length(v) ||
		    memcmp(r.val, json_string_value(v), r.len) != 0))) {
			fprintf(stderr, "fuzz-jsonl: path %s: extractor %d, "
			    "jansson %d\n", paths[pi], got, want);
			abort();
		}
		{
			/* in place (issue 18): the same answer over a copy */
			char *cp2 = malloc(n + 1);
			struct ovl_jsonl_result ri;
			int goti;

			memcpy(cp2, line, n);
			goti = ovl_jsonl_extract_inplace(&cp[pi], cp2, n, &ri);
			if (goti != got || (got == OVL_JSONL_OK &&
			    (ri.len != r.len || memcmp(ri.val, r.val, r.len) != 0))) {
				fprintf(stderr, "fuzz-jsonl: path %s: in place "
				    "%d, extractor %d\n", paths[pi], goti, got);
				abort();
			}
			free(cp2);
		}
		json_decref(root);
	}
	return 0;
}
