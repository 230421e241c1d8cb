/*
 * libFuzzer target: the S3 ListObjectsV2 answer (src/lib/remote-s3.c,
 * ovl_remote__s3_page). The input's first line is the key pattern, the
 * rest the answer's body; the first byte's low bit says whether the page
 * was asked for with a continuation token. Nothing is read past the body;
 * every URL taken is of the bucket, for a key that is not empty, is no
 * folder and matches the pattern; a page that asks for more names a new,
 * non-empty token; a page refused leaves the token as it was.
 */
#include <fnmatch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "remote-int.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct ovl_remote__keys keys = { NULL, 0, 0 };
	char kpat[256], *token = NULL, *body;
	const uint8_t *nl;
	size_t plen, i;
	int rc;

	if (n == 0)
		return 0;
	if (data[0] & 1)
		token = strdup("token-1");
	data++;
	n--;
	nl = memchr(data, '\n', n < sizeof(kpat) ? n : sizeof(kpat) - 1);
	plen = nl != NULL ? (size_t)(nl - data) : 0;
	memcpy(kpat, data, plen);
	kpat[plen] = '\0';
	if (nl != NULL)
		plen++;
	/* an exact-size copy, so ASan sees a read past the end */
	body = malloc(n - plen > 0 ? n - plen : 1);
	if (body == NULL)
		abort();
	memcpy(body, data + plen, n - plen);
	rc = ovl_remote__s3_page(body, n - plen, "bucket-x", 6, kpat, &keys,
	    &token);
	for (i = 0; i < keys.n; i++) {
		const char *k = keys.v[i] + 12;

		if (strncmp(keys.v[i], "s3://bucket/", 12) != 0 ||
		    k[0] == '\0' || k[strlen(k) - 1] == '/' ||
		    fnmatch(kpat, k, FNM_PATHNAME | FNM_PERIOD) != 0)
			abort();
		free(keys.v[i]);
	}
	free(keys.v);
	if (rc == -2 && (data[-1] & 1) && (token == NULL ||
	    strcmp(token, "token-1") != 0))
		abort();
	if (rc == 0 && token != NULL && (token[0] == '\0' ||
	    strcmp(token, "token-1") == 0))
		abort();
	if (rc != 0 && rc != -1 && rc != -2)
		abort();
	free(token);
	free(body);
	return 0;
}
