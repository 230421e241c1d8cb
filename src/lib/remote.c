/*
 * remote: ranged HTTP reads with retries (see remote.h). S3 addresses,
 * credentials and listings are in remote-s3.c.
 */
#include "remote-int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"
#include "dl.h"
#include "num.h"

#define OV_MAX		(64u << 20)	/* a listing's body, at most */
#define WAIT_MAX	30.0

static struct ovl_remote_conf conf = { 8, 0.5, 60.0, NULL };
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;

struct ovl_curl ovl_curl;
#define SYM(f)	{ "curl_" #f, &ovl_curl.f }
static const struct ovl_dl_sym curl_syms[] = {
	SYM(global_init), SYM(easy_init), SYM(easy_setopt),
	SYM(easy_getinfo), SYM(easy_strerror), SYM(easy_cleanup),
	SYM(multi_init), SYM(multi_add_handle), SYM(multi_remove_handle),
	SYM(multi_perform), SYM(multi_info_read), SYM(multi_poll),
	SYM(multi_cleanup), SYM(slist_append), SYM(slist_free_all),
	{ NULL, NULL }
};
#undef SYM
static struct ovl_dl curl_lib = { OVL_SONAME_CURL,
    "http(s):// and s3:// inputs", "libcurl4", curl_syms, 0, "" };

static void
curl_init_once(void)
{
	curl_ok = ovl_dl_load(&curl_lib) == 0 &&
	    ovl_curl.global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

const char *
ovl_remote__nocurl(void)
{
	return curl_lib.state < 0 ? curl_lib.err : "cannot start libcurl";
}

int
ovl_remote_conf_env(struct ovl_remote_conf *c, char *err, size_t errlen)
{
	const char *v;
	uint64_t u;
	double d;

	*c = (struct ovl_remote_conf){ 8, 0.5, 60.0, NULL };
	if ((v = getenv("OVL_REMOTE_RETRIES")) != NULL && *v != '\0') {
		if (ovl_num_u64_max(v, 1000, &u) != 0) {
			snprintf(err, errlen, "bad OVL_REMOTE_RETRIES '%s'", v);
			return -1;
		}
		c->retries = (int)u;
	}
	if ((v = getenv("OVL_REMOTE_RETRY_WAIT")) != NULL && *v != '\0') {
		if (ovl_num_double(v, &d) != 0 || !(d >= 0 && d <= 3600)) {
			snprintf(err, errlen, "bad OVL_REMOTE_RETRY_WAIT '%s'", v);
			return -1;
		}
		c->retry_wait = d;
	}
	if ((v = getenv("OVL_REMOTE_TIMEOUT")) != NULL && *v != '\0') {
		if (ovl_num_double(v, &d) != 0 || !(d >= 1 && d <= 86400)) {
			snprintf(err, errlen, "bad OVL_REMOTE_TIMEOUT '%s'", v);
			return -1;
		}
		c->timeout = d;
	}
	return 0;
}

void
ovl_remote_configure(const struct ovl_remote_conf *c)
{
	conf = *c;
}

const struct ovl_remote_conf *
ovl_remote__conf(void)
{
	return &conf;
}

int
ovl_remote_is(const char *path)
{
	return strncasecmp(path, "http://", 7) == 0 ||
	    strncasecmp(path, "https://", 8) == 0 || ovl_remote_is_s3(path);
}

int
ovl_remote_is_s3(const char *path)
{
	return strncasecmp(path, "s3://", 5) == 0;
}

const char *
ovl_remote_shown(const char *url, char *buf, size_t n)
{
	const char *host = strstr(url, "://"), *at, *slash;
	size_t len;

	host = host != NULL ? host + 3 : url;
	slash = host + strcspn(host, "/?#");
	at = memchr(host, '@', (size_t)(slash - host));
	len = (size_t)(host - url);
	if (at != NULL) {
		snprintf(buf, n, "%.*s%s", (int)len, url,
		    at + 1);
	} else
		snprintf(buf, n, "%s", url);
	buf[strcspn(buf, "?#")] = '\0';
	return buf;
}

/* ---- callbacks ------------------------------------------------------- */

/* A header's value, blanks and CRLF trimmed, into dst (cut to n - 1). */
static void
header_value(char *dst, size_t n, const char *p, size_t len)
{
	while (len > 0 && (*p == ' ' || *p == '\t'))
		p++, len--;
	while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == '\n' ||
	    p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	if (len >= n)
		len = n - 1;
	memcpy(dst, p, len);
	dst[len] = '\0';
}

static size_t
on_header(char *p, size_t sz, size_t nm, void *arg)
{
	struct ovl_remote *r = arg;
	size_t len = sz * nm;
	unsigned long long a, b, t;

	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		/* a new response (after a redirect or a 100) */
		r->checked = 0;
		r->have_cr = 0;
		r->eblen = 0;
		r->r_etag[0] = r->r_lastmod[0] = '\0';
	} else if (len > 5 && strncasecmp(p, "etag:", 5) == 0)
		header_value(r->r_etag, sizeof(r->r_etag), p + 5, len - 5);
	else if (len > 14 && strncasecmp(p, "last-modified:", 14) == 0)
		header_value(r->r_lastmod, sizeof(r->r_lastmod), p + 14,
		    len - 14);
	else if (len > 14 && strncasecmp(p, "content-range:", 14) == 0) {
		char tmp[128];

		snprintf(tmp, sizeof(tmp), "%.*s", (int)(len - 14), p + 14);
		if (sscanf(tmp, " bytes %llu-%llu/%llu", &a, &b, &t) == 3) {
			r->cr_start = a;
			r->cr_end = b;
			r->cr_total = t;
			r->have_cr = 1;
		}
	}
	return len;
}

/* Is the response of another version than the HEAD? 0, or -1 with r->err. */
static int
changed(struct ovl_remote *r)
{
	const char *was, *now;

	if (r->etag[0] != '\0' && r->r_etag[0] != '\0')
		was = r->etag, now = r->r_etag;
	else if (r->lastmod[0] != '\0' && r->r_lastmod[0] != '\0')
		was = r->lastmod, now = r->r_lastmod;
	else
		return 0;
	if (strcmp(was, now) == 0)
		return 0;
	snprintf(r->err, sizeof(r->err), "'%s' changed while reading (version "
	    "%.200s, now %.200s) at byte offset %" PRIu64, r->shown, was, now,
	    r->recv);
	return -1;
}

/* The first body byte of a response: may it be taken? 0, or -1 (fatal). */
static int
judge(struct ovl_remote *r)
{
	curl_off_t len = -1;

	ovl_curl.easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
	r->checked = 1;
	if (r->status == 206) {
		/* exactly the range asked for: bytes recv..rq_end-1 */
		if (!r->have_cr || r->cr_start != r->recv ||
		    r->cr_end != r->rq_end - 1) {
			if (r->have_cr)
				snprintf(r->err, sizeof(r->err), "'%s': the "
				    "server answered another range (bytes %"
				    PRIu64 "-%" PRIu64 ") than bytes %" PRIu64
				    "-%" PRIu64, r->shown, r->cr_start,
				    r->cr_end, r->recv, r->rq_end - 1);
			else
				snprintf(r->err, sizeof(r->err), "'%s': the "
				    "server answered bytes %" PRIu64 "-%" PRIu64
				    " without a Content-Range", r->shown,
				    r->recv, r->rq_end - 1);
			return -1;
		}
		ovl_curl.easy_getinfo(r->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
		    &len);
		if (len >= 0 && (uint64_t)len != r->cr_end - r->cr_start + 1) {
			snprintf(r->err, sizeof(r->err), "'%s': the server "
			    "answered bytes %" PRIu64 "-%" PRIu64 " with %" PRId64
			    " bytes", r->shown, r->cr_start, r->cr_end,
			    (int64_t)len);
			return -1;
		}
		if (r->sized && r->cr_total != r->size) {
			snprintf(r->err, sizeof(r->err), "'%s' changed while "
			    "reading (%" PRIu64 " bytes, now %" PRIu64 ") at "
			    "byte offset %" PRIu64, r->shown, r->size,
			    r->cr_total, r->recv);
			return -1;
		}
		r->skip = 0;
	} else if (r->status == 200 && !r->collect) {
		/* the whole object, or it is not what was asked for */
		ovl_curl.easy_getinfo(r->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
		    &len);
		if (r->sized && len >= 0 && (uint64_t)len != r->size) {
			snprintf(r->err, sizeof(r->err), "'%s': the server "
			    "answered a range request with %" PRId64 " bytes, "
			    "not the whole object of %" PRIu64 " (HTTP 200 at "
			    "byte offset %" PRIu64 ")", r->shown, (int64_t)len,
			    r->size, r->recv);
			return -1;
		}
		r->skip = r->recv;
	}
	if (r->status >= 200 && r->status <= 299 && !r->collect &&
	    changed(r) != 0)
		return -1;
	return 0;
}

static size_t
on_body(char *p, size_t sz, size_t nm, void *arg)
{
	struct ovl_remote *r = arg;
	size_t len = sz * nm, k;

	if (!r->checked && judge(r) != 0) {
		r->fatal = 1;
		return 0;
	}
	if (r->status < 200 || r->status > 299) {
		k = sizeof(r->ebody) - 1 - r->eblen;
		k = k < len ? k : len;
		memcpy(r->ebody + r->eblen, p, k);
		r->eblen += k;
		r->ebody[r->eblen] = '\0';
		return len;
	}
	if (r->skip > 0) {
		k = r->skip < len ? (size_t)r->skip : len;
		r->skip -= k;
		p += k;
		len -= k;
	}
	if (r->collect) {
		if (r->ovlen + len > OV_MAX) {
			snprintf(r->err, sizeof(r->err), "'%s': answer larger "
			    "than %u bytes", r->shown, OV_MAX);
			r->fatal = 1;
			return 0;
		}
		goto overflow;
	}
	if (len > r->rq_end - r->recv) {
		if (r->sized && r->rq_end >= r->size) {
			/* a 200 of unknown length past the size from HEAD */
			snprintf(r->err, sizeof(r->err), "'%s': the object is "
			    "longer than its %" PRIu64 " bytes (from HEAD): "
			    "the server sent more", r->shown, r->size);
			r->fatal = 1;
			return 0;
		}
		len = (size_t)(r->rq_end - r->recv);
		r->atend = 1;	/* a 200 going past the range: enough */
	}
	if (r->dst != NULL) {
		k = r->dstn - r->dstgot < len ? r->dstn - r->dstgot : len;
		memcpy(r->dst + r->dstgot, p, k);
		r->dstgot += k;
		r->recv += k;
		p += k;
		len -= k;
	}
overflow:
	if (len > 0) {
		if (r->ovpos == r->ovlen)
			r->ovpos = r->ovlen = 0;
		if (r->ovlen + len > r->ovcap) {
			r->ovcap = (r->ovlen + len) * 2;
			r->ov = ovl_xrealloc(r->ov, r->ovcap);
		}
		memcpy(r->ov + r->ovlen, p, len);
		r->ovlen += len;
		r->recv += len;
	}
	return r->atend ? 0 : sz * nm;
}

/* ---- one request ----------------------------------------------------- */

struct ovl_remote *
ovl_remote__new(const char *url, const char *shown)
{
	struct ovl_remote *r;

	pthread_once(&curl_once, curl_init_once);
	if (!curl_ok)
		return NULL;
	r = ovl_xcalloc(1, sizeof(*r));
	r->url = ovl_xstrdup(url);
	ovl_remote_shown(shown != NULL ? shown : url, r->shown, sizeof(r->shown));
	r->h = ovl_curl.easy_init();
	r->m = ovl_curl.multi_init();
	if (r->h == NULL || r->m == NULL) {
		ovl_remote_close(r);
		return NULL;
	}
	r->end = UINT64_MAX;
	return r;
}

static void
stop(struct ovl_remote *r)
{
	if (r->active)
		ovl_curl.multi_remove_handle(r->m, r->h);
	r->active = 0;
	r->done = 0;
}

/* Start a request for bytes [from, to) (HEAD: nobody; a listing: collect). */
static int
start(struct ovl_remote *r, uint64_t from, uint64_t to)
{
	CURL *h;
	char range[64];
	int ok = 1;

	stop(r);
	/*
	 * A new handle for each request (its connections stay in r->m's
	 * pool), never easy_reset: libcurl before 8.1.0 keeps across a reset
	 * a pointer into the freed headers of the last answer, and follows
	 * it when the next answer opens with a folded header line.
	 */
	if ((h = ovl_curl.easy_init()) == NULL) {
		snprintf(r->err, sizeof(r->err), "'%s': cannot start a request",
		    r->shown);
		return -1;
	}
	ovl_curl.easy_cleanup(r->h);
	r->h = h;
	r->recv = r->att_from = from;
	r->rq_end = to;
	r->checked = r->have_cr = r->fatal = r->atend = 0;
	r->status = 0;
	r->eblen = 0;
	r->skip = 0;
	r->curlerr[0] = '\0';
	ok &= ovl_curl.easy_setopt(h, CURLOPT_URL, r->url) == CURLE_OK;
	ovl_curl.easy_setopt(h, CURLOPT_ERRORBUFFER, r->curlerr);
	ovl_curl.easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	ovl_curl.easy_setopt(h, CURLOPT_HEADERDATA, r);
	ovl_curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	ovl_curl.easy_setopt(h, CURLOPT_WRITEDATA, r);
	ovl_curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	ovl_curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
	    (long)(conf.timeout * 1000));
	ovl_curl.easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	ovl_curl.easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)ceil(conf.timeout));
	/* small pieces: few bytes land past dst, in ov, to be copied twice */
	ovl_curl.easy_setopt(h, CURLOPT_BUFFERSIZE, 64L << 10);
	ovl_curl.easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	ovl_curl.easy_setopt(h, CURLOPT_USERAGENT, "overlord/" OVL_VERSION);
	if (r->sigv4 == NULL) {
		/* a signed request names its host: redirects would break it */
		ovl_curl.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
		ovl_curl.easy_setopt(h, CURLOPT_MAXREDIRS, 8L);
	} else {
		ovl_curl.easy_setopt(h, CURLOPT_AWS_SIGV4, r->sigv4);
		ovl_curl.easy_setopt(h, CURLOPT_USERPWD, r->userpwd);
	}
	ovl_curl.slist_free_all(r->rqhdrs);
	r->rqhdrs = NULL;
	if (!r->nobody && !r->collect && (r->etag[0] != '\0' ||
	    r->lastmod[0] != '\0')) {
		/* another version answers 200 with its ETag: refused in judge */
		char ir[300];
		struct curl_slist *l;

		for (l = r->hdrs; l != NULL; l = l->next)
			r->rqhdrs = ovl_curl.slist_append(r->rqhdrs, l->data);
		snprintf(ir, sizeof(ir), "If-Range: %s", r->etag[0] != '\0' ?
		    r->etag : r->lastmod);
		r->rqhdrs = ovl_curl.slist_append(r->rqhdrs, ir);
		ovl_curl.easy_setopt(h, CURLOPT_HTTPHEADER, r->rqhdrs);
	} else if (r->hdrs != NULL)
		ovl_curl.easy_setopt(h, CURLOPT_HTTPHEADER, r->hdrs);
	if (r->nobody)
		ovl_curl.easy_setopt(h, CURLOPT_NOBODY, 1L);
	else if (!r->collect) {
		snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, from,
		    to - 1);
		ovl_curl.easy_setopt(h, CURLOPT_RANGE, range);
	}
	if (!ok || ovl_curl.multi_add_handle(r->m, h) != CURLM_OK) {
		snprintf(r->err, sizeof(r->err), "'%s': cannot start a request",
		    r->shown);
		return -1;
	}
	r->active = 1;
	return 0;
}

/* Run the request until more than since bytes are in dst, or it ends. */
static void
pump(struct ovl_remote *r, size_t since)
{
	while (!r->done) {
		CURLMsg *msg;
		int running, left;

		ovl_curl.multi_perform(r->m, &running);
		while ((msg = ovl_curl.multi_info_read(r->m, &left)) != NULL)
			if (msg->msg == CURLMSG_DONE) {
				r->done = 1;
				r->res = msg->data.result;
			}
		if (r->done || (r->dst != NULL && (r->dstgot > since ||
		    r->ovpos < r->ovlen)))
			break;
		ovl_curl.multi_poll(r->m, NULL, 0, 1000, NULL);
	}
}

static int
retryable_code(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

/* What the failed attempt was, for messages. */
static void
describe(struct ovl_remote *r, char *buf, size_t n)
{
	if (r->res != CURLE_OK && !(r->res == CURLE_WRITE_ERROR && r->atend))
		snprintf(buf, n, "%s", r->curlerr[0] != '\0' ? r->curlerr :
		    ovl_curl.easy_strerror(r->res));
	else if (r->status >= 300 || r->status < 200) {
		const char *c = strstr(r->ebody, "<Code>"), *e;

		if (c != NULL && (e = strstr(c, "</Code>")) != NULL)
			snprintf(buf, n, "HTTP %ld (%.*s)", r->status,
			    (int)(e - c - 6), c + 6);
		else
			snprintf(buf, n, "HTTP %ld", r->status);
	} else
		snprintf(buf, n, "the answer ended early");
}

/*
 * The request ended: 0 when all was received, 1 to retry (after the
 * backoff), -1 with r->err (errno set) when it failed for good.
 */
static int
finish(struct ovl_remote *r)
{
	char why[300];
	int retry = 0;

	stop(r);
	if (!r->checked)	/* no body came (a HEAD, an empty answer) */
		ovl_curl.easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->fatal) {
		errno = EIO;
		return -1;
	}
	if (r->recv > r->att_from)
		r->fails = 0;
	if (r->res == CURLE_OK || (r->res == CURLE_WRITE_ERROR && r->atend)) {
		if (r->status == 404 || r->status == 410) {
			errno = ENOENT;
			describe(r, why, sizeof(why));
			snprintf(r->err, sizeof(r->err), "cannot open '%s': %s",
			    r->shown, why);
			return -1;
		}
		if (r->status == 401 || r->status == 403) {
			errno = EACCES;
			describe(r, why, sizeof(why));
			snprintf(r->err, sizeof(r->err), "cannot open '%s': %s "
			    "(access denied: check the credentials)", r->shown,
			    why);
			return -1;
		}
		if (r->status >= 200 && r->status <= 299) {
			if (r->nobody || r->collect || r->recv >= r->rq_end)
				return 0;
			retry = 1;	/* the body ended early */
		} else
			retry = r->status >= 500 || r->status == 429 ||
			    r->status == 408;
	} else
		retry = retryable_code(r->res);
	describe(r, why, sizeof(why));
	if (!retry || r->fails >= conf.retries) {
		errno = EIO;
		if (r->nobody || r->collect)
			snprintf(r->err, sizeof(r->err), "cannot open '%s': %s%s",
			    r->shown, why, retry ? " (retries exhausted)" : "");
		else
			snprintf(r->err, sizeof(r->err), "'%s': read error at "
			    "byte offset %" PRIu64 ": %s%s", r->shown, r->recv,
			    why, retry ? " (retries exhausted)" : "");
		return -1;
	}
	{
		double w = conf.retry_wait * ldexp(1.0, r->fails);
		struct timespec ts;

		if (w > WAIT_MAX)
			w = WAIT_MAX;
		r->fails++;
		ts.tv_sec = (time_t)w;
		ts.tv_nsec = (long)((w - (double)ts.tv_sec) * 1e9);
		while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
			;
	}
	return 1;
}

/* A request without a body to stream (HEAD, a listing): to its end. */
static int
complete(struct ovl_remote *r)
{
	int k;

	r->fails = 0;
	do {
		r->ovpos = r->ovlen = 0;
		if (start(r, 0, UINT64_MAX) != 0)
			return -1;
		while (!r->done)
			pump(r, 0);
	} while ((k = finish(r)) == 1);
	return k;
}

int
ovl_remote__get_all(struct ovl_remote *r)
{
	int k;

	r->collect = 1;
	k = complete(r);
	r->collect = 0;
	return k;
}

/* ---- the interface --------------------------------------------------- */

struct ovl_remote *
ovl_remote_open(const char *url, char *err, size_t errlen)
{
	struct ovl_remote *r;
	curl_off_t len = -1;

	if (ovl_remote_is_s3(url))
		r = ovl_remote__s3(url, NULL, err, errlen);
	else if ((r = ovl_remote__new(url, NULL)) == NULL)
		snprintf(err, errlen, "cannot open '%s': %s", url,
		    ovl_remote__nocurl());
	if (r == NULL) {
		errno = EIO;
		return NULL;
	}
	r->nobody = 1;
	if (complete(r) != 0) {
		int e = errno;

		snprintf(err, errlen, "%s", r->err);
		ovl_remote_close(r);
		errno = e;
		return NULL;
	}
	r->nobody = 0;
	ovl_curl.easy_getinfo(r->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
	if (len < 0) {
		snprintf(err, errlen, "cannot open '%s': the server gives no "
		    "size (Content-Length)", r->shown);
		ovl_remote_close(r);
		errno = EIO;
		return NULL;
	}
	r->size = (uint64_t)len;
	r->sized = 1;
	/* a weak ETag cannot make a range conditional: Last-Modified can */
	if (strncmp(r->r_etag, "W/", 2) != 0)
		memcpy(r->etag, r->r_etag, sizeof(r->etag));
	memcpy(r->lastmod, r->r_lastmod, sizeof(r->lastmod));
	r->end = r->size;
	return r;
}

uint64_t
ovl_remote_size(const struct ovl_remote *r)
{
	return r->size;
}

const char *
ovl_remote_version(const struct ovl_remote *r)
{
	return r->etag[0] != '\0' ? r->etag : r->lastmod;
}

const char *
ovl_remote_err(const struct ovl_remote *r)
{
	return r->err[0] != '\0' ? r->err : "unknown error";
}

const char *
ovl_remote_name(const struct ovl_remote *r)
{
	return r->shown;
}

ssize_t
ovl_remote_pread(struct ovl_remote *r, void *buf, size_t n, uint64_t off)
{
	uint64_t to;
	int k;

	if (off >= r->size || n == 0)
		return 0;
	to = r->size - off < n ? r->size : off + n;
	/* a sequential GET in flight starts again where it was */
	stop(r);
	r->ovpos = r->ovlen = 0;
	r->dst = buf;
	r->dstn = (size_t)(to - off);
	r->dstgot = 0;
	r->fails = 0;
	do {
		uint64_t from = off + r->dstgot;

		if (from >= to)
			break;
		if (start(r, from, to) != 0) {
			k = -1;
			break;
		}
		r->dst = (unsigned char *)buf;
		while (!r->done)
			pump(r, r->dstgot);
		k = finish(r);
	} while (k == 1);
	n = r->dstgot;
	r->dst = NULL;
	return k < 0 ? -1 : (ssize_t)n;
}

void
ovl_remote_seek(struct ovl_remote *r, uint64_t off, uint64_t end)
{
	stop(r);
	r->ovpos = r->ovlen = 0;
	r->pos = off;
	r->end = end < r->size ? end : r->size;
	r->fails = 0;
}

ssize_t
ovl_remote_read(struct ovl_remote *r, void *buf, size_t n)
{
	size_t k;

	if (n == 0)
		return 0;
	if (r->ovpos < r->ovlen) {
		k = r->ovlen - r->ovpos < n ? r->ovlen - r->ovpos : n;
		memcpy(buf, r->ov + r->ovpos, k);
		r->ovpos += k;
		r->pos += k;
		return (ssize_t)k;
	}
	if (r->end > r->size)
		r->end = r->size;
	while (r->pos < r->end) {
		if (r->active && r->done) {
			int f = finish(r);

			if (f < 0)
				return -1;
			if (f == 0 && r->pos >= r->end)
				break;
			continue;	/* retry, or a range cut short */
		}
		if (!r->active && start(r, r->pos, r->end) != 0)
			return -1;
		r->dst = buf;
		r->dstn = n;
		r->dstgot = 0;
		/* fill buf (a read-ahead block) while the GET goes on */
		while (!r->done && r->dstgot < n && r->ovpos == r->ovlen)
			pump(r, r->dstgot);
		r->dst = NULL;
		if (r->dstgot > 0) {
			r->pos += r->dstgot;
			return (ssize_t)r->dstgot;
		}
	}
	stop(r);
	return 0;
}

void
ovl_remote_close(struct ovl_remote *r)
{
	if (r == NULL)
		return;
	stop(r);
	if (r->m != NULL)
		ovl_curl.multi_cleanup(r->m);
	if (r->h != NULL)
		ovl_curl.easy_cleanup(r->h);
	ovl_curl.slist_free_all(r->hdrs);
	ovl_curl.slist_free_all(r->rqhdrs);
	free(r->url);
	free(r->userpwd);
	free(r->sigv4);
	free(r->ov);
	free(r);
}
