/*
 * remote-int.h: what remote.c (transfers, retries) and remote-s3.c (S3
 * addresses, credentials, listing) share. Private to those two files.
 */
#ifndef OVL_REMOTE_INT_H
#define OVL_REMOTE_INT_H

#include <curl/curl.h>

#include "remote.h"

/*
 * libcurl's functions, loaded at the first remote open (lib/dl.h): a
 * source of local files never maps libcurl and its TLS stack.
 */
struct ovl_curl {
	__typeof__(curl_global_init)		*global_init;
	__typeof__(curl_easy_init)		*easy_init;
	__typeof__(curl_easy_setopt)		*easy_setopt;
	__typeof__(curl_easy_getinfo)		*easy_getinfo;
	__typeof__(curl_easy_strerror)		*easy_strerror;
	__typeof__(curl_easy_cleanup)		*easy_cleanup;
	__typeof__(curl_multi_init)		*multi_init;
	__typeof__(curl_multi_add_handle)	*multi_add_handle;
	__typeof__(curl_multi_remove_handle)	*multi_remove_handle;
	__typeof__(curl_multi_perform)		*multi_perform;
	__typeof__(curl_multi_info_read)	*multi_info_read;
	__typeof__(curl_multi_poll)		*multi_poll;
	__typeof__(curl_multi_cleanup)		*multi_cleanup;
	__typeof__(curl_slist_append)		*slist_append;
	__typeof__(curl_slist_free_all)		*slist_free_all;
};
extern struct ovl_curl ovl_curl;

struct ovl_remote {
	char		*url;		/* what is requested (http or https) */
	char		 shown[512];	/* the name in messages (no secrets) */
	CURL		*h;
	CURLM		*m;
	struct curl_slist *hdrs;
	char		*userpwd;	/* S3: KEY:SECRET for SigV4, or NULL */
	char		*sigv4;		/* S3: "aws:amz:REGION:s3" */
	uint64_t	 size;
	int		 sized;		/* size known (after the HEAD) */
	/* the object's version from the HEAD ("" if not given) */
	char		 etag[256], lastmod[64];
	struct curl_slist *rqhdrs;	/* hdrs and If-Range, for one request */

	/* the transfer in flight */
	int		 active, done, nobody, collect, fatal, atend;
	CURLcode	 res;
	long		 status;	/* of the response being received */
	int		 checked;	/* its status judged (first body byte) */
	uint64_t	 cr_start, cr_end, cr_total;	/* Content-Range */
	int		 have_cr;
	char		 r_etag[256], r_lastmod[64];	/* of the response */
	uint64_t	 rq_end;	/* bytes [recv, rq_end) are wanted */
	uint64_t	 recv;		/* offset of the next byte to arrive */
	uint64_t	 att_from;	/* where this attempt began */
	uint64_t	 skip;		/* bytes to drop (a 200 to a range) */
	unsigned char	*dst;
	size_t		 dstn, dstgot;
	unsigned char	*ov;		/* bytes past dst; a listing's body */
	size_t		 ovpos, ovlen, ovcap;
	char		 ebody[256];	/* the start of an error response */
	size_t		 eblen;
	int		 fails;		/* failures since the last byte */

	/* sequential reading */
	uint64_t	 pos, end;
	char		 curlerr[CURL_ERROR_SIZE];
	char		 err[1024];
};

/* A handle for url (http or https), nothing requested yet; NULL: no memory. */
struct ovl_remote *ovl_remote__new(const char *url, const char *shown);
/*
 * An s3://BUCKET/KEY URL as a handle on its HTTP address, signed when
 * credentials are found, with query (already in AWS canonical form, or
 * NULL) appended. NULL with a message in err.
 */
struct ovl_remote *ovl_remote__s3(const char *s3url, const char *query,
	    char *err, size_t errlen);
/*
 * Why no handle could be made: libcurl could not be loaded (that message)
 * or started.
 */
const char *ovl_remote__nocurl(void);
/* The settings in force (remote.c). */
const struct ovl_remote_conf *ovl_remote__conf(void);
/* GET the whole body into r->ov[0..r->ovlen): 0, or -1 with r->err. */
int	ovl_remote__get_all(struct ovl_remote *r);
/* s3:// URLs of a listing, malloc'd, in a growing array. */
struct ovl_remote__keys {
	char	**v;
	size_t	  n, cap;
};
/*
 * One ListObjectsV2 answer, body[0..len) (not terminated): append to keys
 * "s3://BUCKET/KEY" (bucket: its first blen bytes) for every key of its
 * <Contents> that matches kpat as glob(3) with FNM_PATHNAME | FNM_PERIOD,
 * but for empty keys and keys ending in '/'. *token is the continuation
 * token this answer was asked with (or NULL): it is freed and replaced by
 * the next one (malloc'd), or NULL when the listing is complete. Returns
 * 0; -1 when body is no ListObjectsV2 answer, -2 when it says it is
 * truncated without a continuation token other than *token (*token is
 * then left as it was); keys may have grown in either case.
 */
int	ovl_remote__s3_page(const char *body, size_t len, const char *bucket,
	    size_t blen, const char *kpat, struct ovl_remote__keys *keys,
	    char **token);
/* AWS URI encoding of s (keep '/' when keep_slash) appended to a malloc'd
   string; returns it. */
char	*ovl_remote__aws_enc(const char *s, int keep_slash);

#endif
