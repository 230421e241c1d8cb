/*
 * remote-s3: s3:// URLs (see remote.h): their HTTP address, SigV4
 * credentials from the environment or the shared credentials file, and
 * globs over a bucket's keys through ListObjectsV2.
 */
#include "remote-int.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

struct creds {
	char	 key[256];
	char	 secret[256];
	char	 token[4096];
};

char *
ovl_remote__aws_enc(const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = ovl_xmalloc(strlen(s) * 3 + 1), *o = out;

	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~' || (keep_slash && c == '/'))
			*o++ = (char)c;
		else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}

static char *
trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
	    e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/*
 * The profile's keys from the shared credentials file. 0 (found, or no
 * file and no profile asked for), or -1 with a message.
 */
static int
creds_file(struct creds *c, char *err, size_t errlen)
{
	const char *file = getenv("AWS_SHARED_CREDENTIALS_FILE");
	const char *prof = getenv("AWS_PROFILE"), *home = getenv("HOME");
	char path[4096], line[4608];
	int in = 0, found = 0;
	FILE *f;

	if (file == NULL || *file == '\0') {
		if (home == NULL)
			return 0;
		snprintf(path, sizeof(path), "%s/.aws/credentials", home);
		file = path;
	}
	if (prof == NULL || *prof == '\0')
		prof = "default";
	if ((f = fopen(file, "r")) == NULL) {
		if (errno == ENOENT && getenv("AWS_PROFILE") == NULL)
			return 0;
		snprintf(err, errlen, "cannot open AWS credentials '%s': %s",
		    file, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		char *s = trim(line), *eq;

		if (*s == '[') {
			char *e = strchr(s, ']');

			if (e != NULL)
				*e = '\0';
			in = strcmp(trim(s + 1), prof) == 0;
			found |= in;
			continue;
		}
		if (!in || *s == '#' || *s == ';' || (eq = strchr(s, '=')) == NULL)
			continue;
		*eq = '\0';
		s = trim(s);
		if (strcmp(s, "aws_access_key_id") == 0)
			snprintf(c->key, sizeof(c->key), "%s", trim(eq + 1));
		else if (strcmp(s, "aws_secret_access_key") == 0)
			snprintf(c->secret, sizeof(c->secret), "%s", trim(eq + 1));
		else if (strcmp(s, "aws_session_token") == 0)
			snprintf(c->token, sizeof(c->token), "%s", trim(eq + 1));
	}
	fclose(f);
	if (!found && getenv("AWS_PROFILE") != NULL) {
		snprintf(err, errlen, "AWS profile '%s' not found in '%s'", prof,
		    file);
		return -1;
	}
	return 0;
}

static int
creds_load(struct creds *c, char *err, size_t errlen)
{
	const char *k = getenv("AWS_ACCESS_KEY_ID");
	const char *s = getenv("AWS_SECRET_ACCESS_KEY");
	const char *t = getenv("AWS_SESSION_TOKEN");

	memset(c, 0, sizeof(*c));
	if (k != NULL && *k != '\0' && s != NULL && *s != '\0') {
		snprintf(c->key, sizeof(c->key), "%s", k);
		snprintf(c->secret, sizeof(c->secret), "%s", s);
		if (t != NULL)
			snprintf(c->token, sizeof(c->token), "%s", t);
		return 0;
	}
	return creds_file(c, err, errlen);
}

static const char *
region(void)
{
	const char *r = getenv("AWS_REGION");

	if (r == NULL || *r == '\0')
		r = getenv("AWS_DEFAULT_REGION");
	return r != NULL && *r != '\0' ? r : "us-east-1";
}

struct ovl_remote *
ovl_remote__s3(const char *s3url, const char *query, char *err,
    size_t errlen)
{
	const char *ep = ovl_remote__conf()->s3_endpoint, *b = s3url + 5;
	const char *slash = strchr(b, '/');
	char *key, *url;
	size_t blen = slash != NULL ? (size_t)(slash - b) : strlen(b), n;
	struct ovl_remote *r;
	struct creds c;

	if (blen == 0 || strcspn(b, "?#") < blen) {
		snprintf(err, errlen, "bad S3 URL '%s' (s3://BUCKET/KEY)", s3url);
		return NULL;
	}
	if (creds_load(&c, err, errlen) != 0)
		return NULL;
	if (ep == NULL || *ep == '\0')
		ep = getenv("AWS_ENDPOINT_URL");
	key = ovl_remote__aws_enc(slash != NULL ? slash + 1 : "", 1);
	n = strlen(key) + blen + (query != NULL ? strlen(query) : 0) +
	    (ep != NULL ? strlen(ep) : 64) + strlen(region()) + 64;
	url = ovl_xmalloc(n);
	if (ep != NULL && *ep != '\0') {
		size_t el = strlen(ep);

		while (el > 0 && ep[el - 1] == '/')
			el--;
		/* path-style: what local and other S3-compatible servers take */
		snprintf(url, n, "%.*s/%.*s%s%s", (int)el, ep, (int)blen, b,
		    *key != '\0' ? "/" : "", key);
	} else
		snprintf(url, n, "https://%.*s.s3.%s.amazonaws.com/%s", (int)blen,
		    b, region(), key);
	if (query != NULL) {
		strcat(url, "?");
		strcat(url, query);
	}
	free(key);
	r = ovl_remote__new(url, s3url);
	free(url);
	if (r == NULL) {
		snprintf(err, errlen, "cannot open '%s': %s", s3url,
		    ovl_remote__nocurl());
		return NULL;
	}
	if (c.key[0] != '\0') {
		char sig[128];

		r->userpwd = ovl_xmalloc(strlen(c.key) + strlen(c.secret) + 2);
		sprintf(r->userpwd, "%s:%s", c.key, c.secret);
		snprintf(sig, sizeof(sig), "aws:amz:%s:s3", region());
		r->sigv4 = ovl_xstrdup(sig);
		/* S3 wants the body's hash (here: of no body), signed; curl
		   7.88 does not add it */
		r->hdrs = ovl_curl.slist_append(r->hdrs, "x-amz-content-sha256: "
		    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
		if (c.token[0] != '\0') {
			char *h = ovl_xmalloc(strlen(c.token) + 32);

			sprintf(h, "x-amz-security-token: %s", c.token);
			r->hdrs = ovl_curl.slist_append(r->hdrs, h);
			free(h);
		}
	}
	memset(&c, 0, sizeof(c));
	return r;
}

/* ---- ListObjectsV2 --------------------------------------------------- */

/* The text of the first <tag>...</tag> in [p, e), entities decoded. */
static char *
xml_text(const char *p, const char *e, const char *tag, const char **after)
{
	char open[64], close[64], *out, *o;
	const char *a, *b;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	a = memmem(p, (size_t)(e - p), open, strlen(open));
	if (a == NULL)
		return NULL;
	a += strlen(open);
	if ((b = memmem(a, (size_t)(e - a), close, strlen(close))) == NULL)
		return NULL;
	if (after != NULL)
		*after = b + strlen(close);
	out = o = ovl_xmalloc((size_t)(b - a) + 1);
	while (a < b) {
		static const struct { const char *e; char c; } ents[] = {
			{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' },
			{ "&quot;", '"' }, { "&apos;", '\'' } };
		size_t i;

		if (*a == '&') {
			for (i = 0; i < sizeof(ents) / sizeof(ents[0]); i++)
				if (strncmp(a, ents[i].e, strlen(ents[i].e)) == 0)
					break;
			if (i < sizeof(ents) / sizeof(ents[0])) {
				*o++ = ents[i].c;
				a += strlen(ents[i].e);
				continue;
			}
			if (a[1] == '#') {
				char *end;
				long v = a[2] == 'x' ? strtol(a + 3, &end, 16) :
				    strtol(a + 2, &end, 10);

				if (*end == ';' && v > 0 && v < 128) {
					*o++ = (char)v;
					a = end + 1;
					continue;
				}
			}
		}
		*o++ = *a++;
	}
	*o = '\0';
	return out;
}

/*
 * Grow keys by one slot for a URL of ulen bytes (terminator included);
 * returns it.
 */
static char *
keys_add(struct ovl_remote__keys *keys, size_t ulen)
{
	if (keys->n == keys->cap) {
		keys->cap = keys->cap ? keys->cap * 2 : 64;
		keys->v = ovl_xrealloc(keys->v, keys->cap * sizeof(*keys->v));
	}
	return keys->v[keys->n++] = ovl_xmalloc(ulen);
}

int
ovl_remote__s3_page(const char *body, size_t len, const char *bucket,
    size_t blen, const char *kpat, struct ovl_remote__keys *keys,
    char **token)
{
	const char *p = body, *e = body + len, *ce;
	char *key, *trunc, *next = NULL;
	int more;

	if (memmem(body, len, "<ListBucketResult", 17) == NULL)
		return -1;
	for (;;) {
		p = memmem(p, (size_t)(e - p), "<Contents>", 10);
		if (p == NULL || (ce = memmem(p, (size_t)(e - p),
		    "</Contents>", 11)) == NULL)
			break;
		key = xml_text(p, ce, "Key", NULL);
		p = ce + 11;
		if (key == NULL)
			continue;
		/* no object has an empty key; a key ending in '/' is a folder */
		if (key[0] != '\0' && key[strlen(key) - 1] != '/' &&
		    fnmatch(kpat, key, FNM_PATHNAME | FNM_PERIOD) == 0)
			sprintf(keys_add(keys, blen + strlen(key) + 8),
			    "s3://%.*s/%s", (int)blen, bucket, key);
		free(key);
	}
	trunc = xml_text(body, e, "IsTruncated", NULL);
	more = trunc != NULL && strcmp(trunc, "true") == 0;
	free(trunc);
	if (more)
		next = xml_text(body, e, "NextContinuationToken", NULL);
	if (more && (next == NULL || next[0] == '\0' || (*token != NULL &&
	    strcmp(next, *token) == 0))) {
		free(next);
		return -2;
	}
	free(*token);
	*token = next;
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
ovl_remote_glob(const char *pattern, char ***out, size_t *n, char *err,
    size_t errlen)
{
	const char *b, *slash, *kpat;
	char *prefix, *token = NULL, shown[512];
	const char *mk = getenv("OVL_S3_MAX_KEYS");
	struct ovl_remote__keys keys = { NULL, 0, 0 };
	size_t plen, blen;
	int rc = -1;

	*out = NULL;
	*n = 0;
	ovl_remote_shown(pattern, shown, sizeof(shown));
	if (!ovl_remote_is_s3(pattern)) {
		snprintf(err, errlen, "'%s': HTTP cannot list files: name each "
		    "URL (globs work for s3:// and local paths)", shown);
		return -1;
	}
	b = pattern + 5;
	if ((slash = strchr(b, '/')) == NULL || slash == b) {
		snprintf(err, errlen, "bad S3 URL '%s' (s3://BUCKET/KEY)", shown);
		return -1;
	}
	blen = (size_t)(slash - b);
	kpat = slash + 1;
	plen = strcspn(kpat, "*?[");
	{
		char *lit = ovl_xmalloc(plen + 1);

		memcpy(lit, kpat, plen);
		lit[plen] = '\0';
		prefix = ovl_remote__aws_enc(lit, 0);
		free(lit);
	}
	if (mk != NULL && strspn(mk, "0123456789") != strlen(mk))
		mk = NULL;
	for (;;) {
		char *q, *bucket, *tok_enc = NULL;
		struct ovl_remote *r;

		/* the query in AWS canonical form: names sorted, values encoded */
		if (token != NULL)
			tok_enc = ovl_remote__aws_enc(token, 0);
		q = ovl_xmalloc(strlen(prefix) + (tok_enc ? strlen(tok_enc) : 0) +
		    128);
		sprintf(q, "%s%s%slist-type=2%s%s&prefix=%s",
		    tok_enc ? "continuation-token=" : "", tok_enc ? tok_enc : "",
		    tok_enc ? "&" : "", mk != NULL && *mk != '\0' ? "&max-keys=" : "",
		    mk != NULL && *mk != '\0' ? mk : "", prefix);
		free(tok_enc);
		bucket = ovl_xmalloc(blen + 8);
		snprintf(bucket, blen + 8, "s3://%.*s", (int)blen, b);
		r = ovl_remote__s3(bucket, q, err, errlen);
		free(bucket);
		free(q);
		if (r == NULL)
			goto out;
		snprintf(r->shown, sizeof(r->shown), "%s", shown);
		if (ovl_remote__get_all(r) != 0) {
			snprintf(err, errlen, "cannot list '%s': %s", shown,
			    strstr(r->err, ": ") ? strstr(r->err, ": ") + 2 :
			    r->err);
			ovl_remote_close(r);
			goto out;
		}
		rc = ovl_remote__s3_page((const char *)r->ov, r->ovlen, b, blen,
		    kpat, &keys, &token);
		ovl_remote_close(r);
		if (rc != 0) {
			snprintf(err, errlen, "cannot list '%s': %s", shown,
			    rc == -1 ? "not a ListObjectsV2 answer" : "a truncated "
			    "answer without a continuation token");
			rc = -1;
			goto out;
		}
		if (token == NULL)
			break;
	}
	if (keys.n > 1)
		qsort(keys.v, keys.n, sizeof(*keys.v), cmp_str);
	*out = keys.v;
	*n = keys.n;
	keys.v = NULL;
	keys.n = 0;
	rc = 0;
out:
	while (keys.n > 0)
		free(keys.v[--keys.n]);
	free(keys.v);
	free(token);
	free(prefix);
	return rc;
}
