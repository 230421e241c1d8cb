/*
 * remote: files behind http://, https:// and s3:// URLs, read through
 * libcurl with HTTP range requests.
 *
 * Two ways to read one object:
 *   - random access, ovl_remote_pread: one ranged GET per call (a parquet
 *     footer, a column chunk, a record boundary probe);
 *   - sequential, ovl_remote_seek then ovl_remote_read: the body of ONE
 *     ranged GET streamed into the caller's buffers (curl multi), never a
 *     request per small read.
 * Both retry, with exponential backoff, a connection that could not be
 * made, was reset or ended early, and answers 5xx and 429; a GET that
 * broke off resumes from the first byte not yet received, so the bytes
 * delivered are those of one uninterrupted read. HTTP 404, 403 and 401
 * are "cannot open" errors: errno ENOENT or EACCES. Every message names
 * the URL (without its query string or user:password, which may hold
 * secrets) and, when reading, the byte offset.
 *
 * s3://BUCKET/KEY is signed with AWS SigV4 (curl's CURLOPT_AWS_SIGV4)
 * when credentials are found: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN, else the profile AWS_PROFILE (default "default") of
 * AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials); without any,
 * requests are anonymous. Region: AWS_REGION, AWS_DEFAULT_REGION, else
 * us-east-1. The endpoint: ovl_remote_conf's s3_endpoint, else
 * AWS_ENDPOINT_URL, addressed path-style (ENDPOINT/BUCKET/KEY); else
 * https://BUCKET.s3.REGION.amazonaws.com/KEY.
 *
 * Not thread-safe per object: one thread at a time uses an ovl_remote
 * (the read-ahead thread may take it over from the opener).
 */
#ifndef OVL_REMOTE_H
#define OVL_REMOTE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ovl_remote;

/* Process-wide settings; ovl_remote_configure before the first open. */
struct ovl_remote_conf {
	int		 retries;	/* attempts after a failure with no byte
					   received in between (default 8) */
	double		 retry_wait;	/* seconds before the first retry, doubled
					   each time, at most 30 s (default 0.5) */
	double		 timeout;	/* seconds without a byte: a failure
					   (default 60) */
	const char	*s3_endpoint;	/* NULL: AWS_ENDPOINT_URL or AWS's */
};

/*
 * The defaults above, overridden by the environment: OVL_REMOTE_RETRIES,
 * OVL_REMOTE_RETRY_WAIT, OVL_REMOTE_TIMEOUT. Returns 0, or -1 with a
 * message in err when one of them is malformed.
 */
int	ovl_remote_conf_env(struct ovl_remote_conf *c, char *err, size_t errlen);
/* Use *c from now on (copied; the endpoint string must outlive the use). */
void	ovl_remote_configure(const struct ovl_remote_conf *c);

/* 1 when path names a remote file (http://, https://, s3://). */
int	ovl_remote_is(const char *path);
/* 1 for an s3:// path. */
int	ovl_remote_is_s3(const char *path);
/*
 * url for messages: without its query string and user:password, in
 * buf[0..n) (always terminated). Returns buf.
 */
const char *ovl_remote_shown(const char *url, char *buf, size_t n);

/*
 * Open url: a HEAD request gives its size. Returns the object, or NULL
 * with a message (no program prefix) in err and errno ENOENT (404),
 * EACCES (401, 403) or EIO (anything else). Free with ovl_remote_close.
 */
struct ovl_remote *ovl_remote_open(const char *url, char *err, size_t errlen);
/* Its size in bytes. */
uint64_t ovl_remote_size(const struct ovl_remote *r);
/*
 * Its version from the HEAD, never NULL: the strong ETag, else the
 * Last-Modified date, else "" (the server gives neither). Every ranged
 * GET is conditional on it (If-Range), and an answer of another version
 * is an error.
 */
const char *ovl_remote_version(const struct ovl_remote *r);
/*
 * Up to n bytes at offset off (fewer only at the end of the object, 0 at
 * or past it). Returns the count, or -1 with ovl_remote_err(r) set. A
 * sequential read in progress is not disturbed, beyond its GET being
 * started again where it was.
 */
ssize_t	ovl_remote_pread(struct ovl_remote *r, void *buf, size_t n,
	    uint64_t off);
/*
 * Sequential reading of bytes [off, end) (end UINT64_MAX: to the end of
 * the object): nothing is requested until the first ovl_remote_read.
 */
void	ovl_remote_seek(struct ovl_remote *r, uint64_t off, uint64_t end);
/* The next bytes: count (at most n), 0 at the end, -1 with the message. */
ssize_t	ovl_remote_read(struct ovl_remote *r, void *buf, size_t n);
/* The last error, never NULL. */
const char *ovl_remote_err(const struct ovl_remote *r);
/* The URL for messages (as ovl_remote_shown). */
const char *ovl_remote_name(const struct ovl_remote *r);
void	ovl_remote_close(struct ovl_remote *r);

/*
 * Expand an s3:// pattern with glob characters (*, ?, [...]) in its key:
 * ListObjectsV2 over the key's literal prefix, continuation tokens
 * followed, keys matched as glob(3) matches names (FNM_PATHNAME: '*' stops
 * at '/'), sorted bytewise. *out gets a malloc'd array of malloc'd
 * s3:// URLs, *n their count (0 is not an error here). Returns 0, or -1
 * with a message in err. An http(s) pattern is refused (HTTP cannot list).
 */
int	ovl_remote_glob(const char *pattern, char ***out, size_t *n, char *err,
	    size_t errlen);

#endif
