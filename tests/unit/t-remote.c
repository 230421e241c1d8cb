/*
 * remote: one page of an S3 listing (ovl_remote__s3_page, remote-int.h):
 * the keys a pattern takes, and how a page asks for the next one.
 */
#include <stdlib.h>
#include <string.h>

#include "remote-int.h"
#include "unit.h"

#define HEAD	"<?xml version=\"1.0\"?><ListBucketResult><Name>b</Name>"

static int
page(const char *body, const char *kpat, struct ovl_remote__keys *k,
    char **token)
{
	return ovl_remote__s3_page(body, strlen(body), "bkt/x", 3, kpat, k,
	    token);
}

static void
keys_free(struct ovl_remote__keys *k)
{
	while (k->n > 0)
		free(k->v[--k->n]);
	free(k->v);
	k->v = NULL;
	k->cap = 0;
}

static void
test_keys(void)
{
	struct ovl_remote__keys k = { NULL, 0, 0 };
	char *token = NULL;

	/* entities decoded; folders, empty keys and other names left out */
	CHECK(page(HEAD "<IsTruncated>false</IsTruncated>"
	    "<Contents><Key>web/a&amp;b.jsonl</Key></Contents>"
	    "<Contents><Key>web/</Key></Contents>"
	    "<Contents><Key></Key></Contents>"
	    "<Contents><Key>web/&#x63;.jsonl</Key></Contents>"
	    "<Contents><Key>web/sub/d.jsonl</Key></Contents>"
	    "<Contents><Key>web/e.txt</Key></Contents>"
	    "</ListBucketResult>", "web/*.jsonl", &k, &token) == 0);
	CHECK(token == NULL);
	CHECK(k.n == 2);
	CHECK(k.n == 2 && strcmp(k.v[0], "s3://bkt/web/a&b.jsonl") == 0);
	CHECK(k.n == 2 && strcmp(k.v[1], "s3://bkt/web/c.jsonl") == 0);
	keys_free(&k);
	/* an empty key never matches, not even "*" */
	CHECK(page(HEAD "<Contents><Key></Key></Contents></ListBucketResult>",
	    "*", &k, &token) == 0 && k.n == 0);
	keys_free(&k);
	/* an error document is no listing */
	CHECK(page("<Error><Code>AccessDenied</Code></Error>", "*", &k,
	    &token) == -1);
	keys_free(&k);
}

static void
test_pages(void)
{
	struct ovl_remote__keys k = { NULL, 0, 0 };
	char *token = NULL;

	CHECK(page(HEAD "<IsTruncated>true</IsTruncated>"
	    "<NextContinuationToken>t1</NextContinuationToken>"
	    "</ListBucketResult>", "*", &k, &token) == 0);
	CHECK(token != NULL && strcmp(token, "t1") == 0);
	/* the same token again would ask for the same page for ever */
	CHECK(page(HEAD "<IsTruncated>true</IsTruncated>"
	    "<NextContinuationToken>t1</NextContinuationToken>"
	    "</ListBucketResult>", "*", &k, &token) == -2);
	CHECK(token != NULL && strcmp(token, "t1") == 0);
	/* truncated without a token: the rest could not be listed */
	CHECK(page(HEAD "<IsTruncated>true</IsTruncated></ListBucketResult>",
	    "*", &k, &token) == -2);
	CHECK(page(HEAD "<IsTruncated>true</IsTruncated><NextContinuationToken>"
	    "</NextContinuationToken></ListBucketResult>", "*", &k,
	    &token) == -2);
	CHECK(page(HEAD "<IsTruncated>false</IsTruncated></ListBucketResult>",
	    "*", &k, &token) == 0);
	CHECK(token == NULL);
	keys_free(&k);
}

int
main(void)
{
	RUN(test_keys);
	RUN(test_pages);
	UNIT_DONE();
}
