/*
 * net: endpoints, connecting and listening, the handshake. See net.h and
 * ovl-frame(5).
 */
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "atomic.h"
#include "buf.h"
#include "err.h"
#include "num.h"

#define HELLO_MAGIC	"OVLAUTH\n"	/* 8 bytes, first on the wire */
#define HELLO_VERSION	1
#define NONCE_LEN	32
#define HELLO_FIXED	(12 + NONCE_LEN)	/* magic, version, role, id length, 0 */
#define MAC_LEN		32
#define RUNID_MAX	200
#define SECRET_MIN	16
#define SECRET_MAX	4096
#define HANDSHAKE_MAX	10.0	/* seconds a listener gives one peer */
#define BACKOFF_MIN	0.05
#define BACKOFF_MAX	1.0

enum { EP_CONNECT, EP_LISTEN };

struct ovl_net {
	char	*spec;		/* as given, options included */
	char	*shown;		/* the endpoint without its options */
	char	*host;		/* NULL: every address (listen) */
	char	 port[16];
	char	*port_file;
	int	 kind;		/* EP_* */
	int	 dir;		/* OVL_NET_READ or OVL_NET_WRITE */
	int	 lfd;		/* listening socket, or -1 */
	char	 bound[128];	/* "ADDR:PORT" the listener is bound to */
	char	*name;		/* for messages */
};

/* ---- settings: options, then the environment, then defaults ---- */

static struct {
	int	 loaded;
	double	 connect_timeout;
	double	 keepalive;
	double	 send_timeout;
	uint64_t sockbuf;
	char	*secret_file;
	char	*run_id;
	int	 set[OVL_NET_OPT_LAST - OVL_NET_OPT_CONNECT_TIMEOUT + 1];
	uint8_t	*secret;
	size_t	 secret_len;
	int	 (*stop)(void);
} cfg = { 0, 60, 10, 0, 0, NULL, NULL, { 0 }, NULL, 0, NULL };

static int
parse_seconds(const char *v, double *out)
{
	double d;

	if (ovl_num_double(v, &d) != 0 || !(d >= 0) || d > 86400 * 7)
		return -1;
	*out = d;
	return 0;
}

static int
valid_run_id(const char *v)
{
	const char *p;

	if (strlen(v) > RUNID_MAX)
		return 0;
	for (p = v; *p != '\0'; p++)
		if (*p <= ' ' || *p > '~')
			return 0;
	return 1;
}

/* One setting from its option's text: 0, or -1 when the value is bad. */
static int
set_value(int opt, const char *v)
{
	switch (opt) {
	case OVL_NET_OPT_CONNECT_TIMEOUT:
		return parse_seconds(v, &cfg.connect_timeout);
	case OVL_NET_OPT_KEEPALIVE:
		return parse_seconds(v, &cfg.keepalive);
	case OVL_NET_OPT_SEND_TIMEOUT:
		return parse_seconds(v, &cfg.send_timeout);
	case OVL_NET_OPT_SOCKBUF:
		if (ovl_num_size(v, &cfg.sockbuf) != 0 ||
		    cfg.sockbuf > (1u << 30))
			return -1;
		return 0;
	case OVL_NET_OPT_SECRET_FILE:
		if (*v == '\0')
			return -1;
		free(cfg.secret_file);
		cfg.secret_file = ovl_xstrdup(v);
		return 0;
	case OVL_NET_OPT_RUN_ID:
		if (!valid_run_id(v))
			return -1;
		free(cfg.run_id);
		cfg.run_id = ovl_xstrdup(v);
		return 0;
	}
	return -1;
}

static const struct {
	int		 opt;
	const char	*option, *env;
} settings[] = {
	{ OVL_NET_OPT_CONNECT_TIMEOUT, "connect-timeout", "OVL_CONNECT_TIMEOUT" },
	{ OVL_NET_OPT_KEEPALIVE, "keepalive", "OVL_KEEPALIVE" },
	{ OVL_NET_OPT_SEND_TIMEOUT, "send-timeout", "OVL_SEND_TIMEOUT" },
	{ OVL_NET_OPT_SOCKBUF, "sockbuf", "OVL_SOCKBUF" },
	{ OVL_NET_OPT_SECRET_FILE, "secret-file", "OVL_SECRET_FILE" },
	{ OVL_NET_OPT_RUN_ID, "run-id", "OVL_RUN_ID" },
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

int
ovl_net_cli(const struct ovl_cli *cli, int opt, const char *arg)
{
	size_t i;

	for (i = 0; i < NSETTINGS; i++)
		if (settings[i].opt == opt)
			break;
	if (i == NSETTINGS)
		return 0;
	if (set_value(opt, arg) != 0)
		ovl_cli_usagex(cli, "bad --%s '%s'", settings[i].option, arg);
	cfg.set[opt - OVL_NET_OPT_CONNECT_TIMEOUT] = 1;
	return 1;
}

/* The environment's values where no option was given; exits 2 if bad. */
static void
load_env(void)
{
	const char *v;
	size_t i;

	if (cfg.loaded)
		return;
	cfg.loaded = 1;
	for (i = 0; i < NSETTINGS; i++) {
		if (cfg.set[settings[i].opt - OVL_NET_OPT_CONNECT_TIMEOUT])
			continue;
		v = getenv(settings[i].env);
		if (v == NULL || *v == '\0')
			continue;
		if (set_value(settings[i].opt, v) != 0)
			ovl_errx(OVL_EXIT_USAGE, "bad %s '%s'", settings[i].env,
			    v);
	}
}

void
ovl_net_set_stop(int (*stop)(void))
{
	cfg.stop = stop;
}

static int
stopping(void)
{
	return cfg.stop != NULL && cfg.stop();
}

/* ---- the secret ---- */

static void
take_secret(const uint8_t *p, size_t n, const char *from)
{
	if (n > 0 && p[n - 1] == '\n')
		n--;
	if (n > 0 && p[n - 1] == '\r')
		n--;
	if (n < SECRET_MIN || n > SECRET_MAX)
		ovl_errx(OVL_EXIT_USAGE, "the secret in %s has %zu bytes: it "
		    "needs %d to %d", from, n, SECRET_MIN, SECRET_MAX);
	cfg.secret = ovl_xmalloc(n);
	memcpy(cfg.secret, p, n);
	cfg.secret_len = n;
}

/*
 * The run's secret, once: the file (--secret-file, OVL_SECRET_FILE),
 * readable by its owner only, or else OVL_SECRET. Exits 2 without one.
 */
static void
load_secret(const char *spec)
{
	uint8_t buf[SECRET_MAX + 8];
	char from[512];
	struct stat st;
	ssize_t n;
	size_t len = 0;
	const char *env;
	int fd;

	if (cfg.secret != NULL)
		return;
	if (cfg.secret_file != NULL) {
		fd = open(cfg.secret_file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			ovl_err(OVL_EXIT_USAGE, "cannot open secret file '%s'",
			    cfg.secret_file);
		if (fstat(fd, &st) != 0)
			ovl_err(OVL_EXIT_USAGE, "cannot stat '%s'",
			    cfg.secret_file);
		if (!S_ISREG(st.st_mode))
			ovl_errx(OVL_EXIT_USAGE, "secret file '%s' is not a "
			    "regular file", cfg.secret_file);
		if ((st.st_mode & 077) != 0)
			ovl_errx(OVL_EXIT_USAGE, "secret file '%s' has mode %04o: "
			    "it must be readable by its owner only (chmod 600)",
			    cfg.secret_file, (unsigned)(st.st_mode & 07777));
		if (st.st_uid != geteuid())
			ovl_errx(OVL_EXIT_USAGE, "secret file '%s' belongs to "
			    "uid %u, not to this user", cfg.secret_file,
			    (unsigned)st.st_uid);
		while (len < sizeof(buf)) {
			n = read(fd, buf + len, sizeof(buf) - len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				ovl_err(OVL_EXIT_USAGE, "cannot read '%s'",
				    cfg.secret_file);
			if (n == 0)
				break;
			len += (size_t)n;
		}
		close(fd);
		snprintf(from, sizeof(from), "'%s'", cfg.secret_file);
		take_secret(buf, len, from);
		OPENSSL_cleanse(buf, sizeof(buf));
		return;
	}
	env = getenv("OVL_SECRET");
	if (env != NULL && *env != '\0') {
		take_secret((const uint8_t *)env, strlen(env), "OVL_SECRET");
		return;
	}
	ovl_errx(OVL_EXIT_USAGE, "'%s' needs the run's secret: --secret-file "
	    "FILE, OVL_SECRET_FILE or OVL_SECRET", spec);
}

/* ---- endpoints ---- */

int
ovl_net_is_endpoint(const char *spec)
{
	return spec != NULL && (strncmp(spec, "tcp:", 4) == 0 ||
	    strncmp(spec, "tcp-listen:", 11) == 0);
}

/* PORT or N+M into n->port: 0, or -1. */
static int
parse_port(struct ovl_net *n, const char *s, size_t len)
{
	char buf[64], *plus;
	uint64_t a, b = 0;

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if ((plus = strchr(buf, '+')) != NULL) {
		*plus++ = '\0';
		if (ovl_num_u64(plus, &b) != 0)
			return -1;
	}
	if (ovl_num_u64(buf, &a) != 0 || a > 65535 || b > 65535 || a + b > 65535)
		return -1;
	if (a + b == 0 && n->kind == EP_CONNECT)
		return -1;
	snprintf(n->port, sizeof(n->port), "%" PRIu64, a + b);
	return 0;
}

/* Options after the address: ",port-file=FILE". 0, or -1. */
static int
parse_options(struct ovl_net *n, const char *p)
{
	const char *end;

	while (*p == ',') {
		p++;
		end = p + strcspn(p, ",");
		if (strncmp(p, "port-file=", 10) == 0 && end > p + 10 &&
		    n->kind == EP_LISTEN) {
			free(n->port_file);
			n->port_file = ovl_xstrdup(p + 10);
			n->port_file[end - p - 10] = '\0';
		} else
			return -1;
		p = end;
	}
	return *p == '\0' ? 0 : -1;
}

/* tcp:HOST:PORT or tcp-listen:[HOST]:PORT with options: 0, or -1. */
static int
parse_spec(struct ovl_net *n, const char *spec)
{
	const char *p, *hend, *pend;
	size_t addrlen;

	if (strncmp(spec, "tcp:", 4) == 0) {
		n->kind = EP_CONNECT;
		p = spec + 4;
	} else {
		n->kind = EP_LISTEN;
		p = spec + 11;
	}
	addrlen = strcspn(p, ",");
	n->shown = ovl_xmalloc((size_t)(p - spec) + addrlen + 1);
	memcpy(n->shown, spec, (size_t)(p - spec) + addrlen);
	n->shown[(p - spec) + addrlen] = '\0';
	if (*p == '[') {	/* [IPv6] */
		hend = memchr(p, ']', addrlen);
		if (hend == NULL || hend == p + 1 || hend[1] != ':')
			return -1;
		n->host = ovl_xstrdup(p + 1);
		n->host[hend - p - 1] = '\0';
		pend = hend + 1;
	} else {
		pend = memchr(p, ':', addrlen);
		if (pend == NULL)
			return -1;
		if (pend > p) {
			n->host = ovl_xstrdup(p);
			n->host[pend - p] = '\0';
		}
	}
	if (n->host == NULL && n->kind == EP_CONNECT)
		return -1;
	if (parse_port(n, pend + 1, addrlen - (size_t)(pend + 1 - p)) != 0)
		return -1;
	return parse_options(n, p + addrlen);
}

struct ovl_net *
ovl_net_new(const char *spec, int dir)
{
	struct ovl_net *n = ovl_xcalloc(1, sizeof(*n));

	n->spec = ovl_xstrdup(spec);
	n->dir = dir;
	n->lfd = -1;
	if (!ovl_net_is_endpoint(spec) || parse_spec(n, spec) != 0)
		ovl_errx(OVL_EXIT_USAGE, "bad endpoint '%s' (tcp:HOST:PORT or "
		    "tcp-listen:[HOST]:PORT[,port-file=FILE])", spec);
	n->name = ovl_xstrdup(n->shown);
	load_env();
	load_secret(spec);
	return n;
}

void
ovl_net_check(const char *spec, int dir)
{
	if (ovl_net_is_endpoint(spec))
		ovl_net_free(ovl_net_new(spec, dir));
}

const char *
ovl_net_name(const struct ovl_net *n)
{
	return n->name;
}

void
ovl_net_free(struct ovl_net *n)
{
	if (n == NULL)
		return;
	if (n->lfd >= 0)
		close(n->lfd);
	free(n->spec);
	free(n->shown);
	free(n->host);
	free(n->port_file);
	free(n->name);
	free(n);
}

/* ---- sockets ---- */

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "ADDR:PORT" or "[ADDR]:PORT" of a socket address. */
static void
addr_text(const struct sockaddr *sa, socklen_t salen, char *buf, size_t len)
{
	char h[NI_MAXHOST], s[NI_MAXSERV];

	if (getnameinfo(sa, salen, h, sizeof(h), s, sizeof(s),
	    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h,
	    s);
}

static void
setint(int fd, int level, int opt, int v)
{
	(void)setsockopt(fd, level, opt, &v, sizeof(v));
}

/* Buffers before connect or listen (the window scale is chosen then). */
static void
tune_buffers(int fd, int dir)
{
	if (cfg.sockbuf == 0)
		return;		/* the kernel's autotuning */
	setint(fd, SOL_SOCKET, dir == OVL_NET_WRITE ? SO_SNDBUF : SO_RCVBUF,
	    (int)cfg.sockbuf);
}

/*
 * A connected socket: no Nagle delay (the writers write large blocks: only
 * a block's last segment could wait, for nothing), keepalive, and
 * TCP_USER_TIMEOUT: on the reading side it bounds the keepalive probes;
 * on the writing side only with --send-timeout, since it also ends a
 * connection whose reader merely stopped reading for that long.
 */
static void
tune(int fd, int dir)
{
	int idle, intvl, cnt;

	setint(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	if (cfg.keepalive > 0) {
		idle = (int)(cfg.keepalive / 2);
		if (idle < 1)
			idle = 1;
		intvl = (int)(cfg.keepalive / 10);
		if (intvl < 1)
			intvl = 1;
		cnt = ((int)cfg.keepalive - idle) / intvl;
		if (cnt < 1)
			cnt = 1;
		setint(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
		setint(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle);
		setint(fd, IPPROTO_TCP, TCP_KEEPINTVL, intvl);
		setint(fd, IPPROTO_TCP, TCP_KEEPCNT, cnt);
		if (dir == OVL_NET_READ)
			setint(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
			    (int)(cfg.keepalive * 1000));
	}
	if (dir == OVL_NET_WRITE && cfg.send_timeout > 0)
		setint(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
		    (int)(cfg.send_timeout * 1000));
}

/*
 * Wait until fd is ready for events or the deadline passes, in slices so
 * that the stop function is heard. 1 ready, 0 deadline, -1 stop (EINTR)
 * or error.
 */
static int
wait_fd(int fd, short events, double deadline)
{
	struct pollfd p;
	double left;
	int rc;

	for (;;) {
		if (stopping()) {
			errno = EINTR;
			return -1;
		}
		left = deadline - now();
		if (left <= 0)
			return 0;
		p.fd = fd;
		p.events = events;
		p.revents = 0;
		rc = poll(&p, 1, left > 0.2 ? 200 : (int)(left * 1000) + 1);
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

/* Sleep s seconds (at most until deadline), hearing the stop function. */
static int
nap(double s)
{
	double end = now() + s;
	struct timespec ts;
	double left;

	while ((left = end - now()) > 0) {
		if (stopping()) {
			errno = EINTR;
			return -1;
		}
		if (left > 0.1)
			left = 0.1;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(left * 1e9);
		nanosleep(&ts, NULL);
	}
	return 0;
}

/*
 * Exactly n bytes in or out before the deadline: 0; -1 with errno (EOF is
 * ECONNRESET, the deadline ETIMEDOUT, the stop function EINTR). *done
 * (when not NULL) counts the bytes moved either way.
 */
static int
xfer_n(int fd, void *buf, size_t n, int out, double deadline, size_t *done)
{
	uint8_t *p = buf;
	ssize_t k;
	int rc;

	while (n > 0) {
		rc = wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
		if (rc == 0)
			errno = ETIMEDOUT;
		if (rc <= 0)
			return -1;
		k = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) :
		    recv(fd, p, n, MSG_DONTWAIT);
		if (k == 0 && !out) {
			errno = ECONNRESET;
			return -1;
		}
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k < 0)
			return -1;
		p += k;
		n -= (size_t)k;
		*done += (size_t)k;
	}
	return 0;
}

static int
xfer(int fd, void *buf, size_t n, int out, double deadline)
{
	size_t done = 0;

	return xfer_n(fd, buf, n, out, deadline, &done);
}

static int
xfer_some(int fd, void *buf, size_t n, double deadline, size_t *got)
{
	*got = 0;
	return xfer_n(fd, buf, n, 0, deadline, got);
}

/* ---- the handshake ---- */

enum { HS_OK, HS_IO, HS_REFUSED };	/* HS_IO: the connection failed */

static size_t
hello_encode(uint8_t *h, int dir, const uint8_t *nonce)
{
	const char *id = cfg.run_id != NULL ? cfg.run_id : "";
	size_t idlen = strlen(id);

	memcpy(h, HELLO_MAGIC, 8);
	h[8] = HELLO_VERSION;
	h[9] = dir == OVL_NET_WRITE ? 'W' : 'R';
	h[10] = (uint8_t)idlen;
	h[11] = 0;
	memcpy(h + 12, nonce, NONCE_LEN);
	memcpy(h + HELLO_FIXED, id, idlen);
	return HELLO_FIXED + idlen;
}

/*
 * The proof of side who ('L' the listener, 'C' the connecting side):
 * HMAC-SHA256 under the secret of a label, who, and both hellos (the
 * listener's first). Each side's proof covers the other's fresh nonce, and
 * who keeps one side's proof from being replayed as the other's.
 */
static void
proof(char who, const uint8_t *lh, size_t llen, const uint8_t *ch,
    size_t clen, uint8_t out[MAC_LEN])
{
	static const char label[] = "overlord stream proof ";
	uint8_t msg[sizeof(label) + 2 * (HELLO_FIXED + RUNID_MAX)];
	size_t n = sizeof(label) - 1;
	unsigned olen = MAC_LEN;

	memcpy(msg, label, n);
	msg[n++] = (uint8_t)who;
	memcpy(msg + n, lh, llen);
	n += llen;
	memcpy(msg + n, ch, clen);
	n += clen;
	if (HMAC(EVP_sha256(), cfg.secret, (int)cfg.secret_len, msg, n, out,
	    &olen) == NULL || olen != MAC_LEN)
		ovl_errx(OVL_EXIT_DATA, "HMAC-SHA256 failed (libcrypto)");
}

/*
 * Authenticate the peer on fd before deadline. HS_OK; HS_IO with errno
 * set when the connection failed; HS_REFUSED when the peer is not one of
 * this run's. why gets the reason.
 */
static int
handshake(const struct ovl_net *n, int fd, double deadline, char *why,
    size_t wlen)
{
	uint8_t mine[HELLO_FIXED + RUNID_MAX], theirs[HELLO_FIXED + RUNID_MAX];
	uint8_t nonce[NONCE_LEN], mac[MAC_LEN], got[MAC_LEN];
	const char *myid = cfg.run_id != NULL ? cfg.run_id : "";
	char id[RUNID_MAX + 1];
	size_t mlen, tlen, got_n;
	int listener = n->kind == EP_LISTEN, e;

	if (RAND_bytes(nonce, sizeof(nonce)) != 1)
		ovl_errx(OVL_EXIT_DATA, "cannot draw a random nonce (RAND_bytes)");
	mlen = hello_encode(mine, n->dir, nonce);
	got_n = 0;
	if (xfer(fd, mine, mlen, 1, deadline) != 0 ||
	    xfer_some(fd, theirs, HELLO_FIXED, deadline, &got_n) != 0) {
		e = errno;
		if (got_n > 0 && memcmp(theirs, HELLO_MAGIC, got_n < 8 ?
		    got_n : 8) != 0)
			goto garbage;
		snprintf(why, wlen, "no greeting: %s", e == ECONNRESET ?
		    "the connection closed" : strerror(e));
		errno = e;
		return HS_IO;
	}
	if (memcmp(theirs, HELLO_MAGIC, 8) != 0) {
garbage:
		snprintf(why, wlen, "not an overlord peer (it sent no greeting "
		    "but %zu other bytes)", got_n);
		return HS_REFUSED;
	}
	if (theirs[8] != HELLO_VERSION || (theirs[9] != 'R' &&
	    theirs[9] != 'W') || theirs[10] > RUNID_MAX || theirs[11] != 0) {
		snprintf(why, wlen, "a greeting of another version (%u)",
		    theirs[8]);
		return HS_REFUSED;
	}
	tlen = HELLO_FIXED + theirs[10];
	if (xfer(fd, theirs + HELLO_FIXED, theirs[10], 0, deadline) != 0) {
		e = errno;
		snprintf(why, wlen, "a greeting cut short: %s", strerror(e));
		errno = e;
		return HS_IO;
	}
	memcpy(id, theirs + HELLO_FIXED, theirs[10]);
	id[theirs[10]] = '\0';
	if (!valid_run_id(id) || strlen(id) != theirs[10]) {
		snprintf(why, wlen, "a bad run id in its greeting");
		return HS_REFUSED;
	}
	if ((theirs[9] == 'W') == (n->dir == OVL_NET_WRITE)) {
		snprintf(why, wlen, "it %s the stream too", n->dir ==
		    OVL_NET_WRITE ? "writes" : "reads");
		return HS_REFUSED;
	}
	if (strcmp(id, myid) != 0) {
		snprintf(why, wlen, "it is of run '%s', not '%s' (--run-id)",
		    id, myid);
		return HS_REFUSED;
	}
	if (listener)
		proof('L', mine, mlen, theirs, tlen, mac);
	else
		proof('C', theirs, tlen, mine, mlen, mac);
	if (xfer(fd, mac, MAC_LEN, 1, deadline) != 0 ||
	    xfer(fd, got, MAC_LEN, 0, deadline) != 0) {
		e = errno;
		snprintf(why, wlen, "no proof: %s", e == ECONNRESET ?
		    "the connection closed (a wrong secret?)" : strerror(e));
		errno = e;
		/* a peer that leaves here refused us: retrying will not help */
		return e == ECONNRESET || e == EPIPE ? HS_REFUSED : HS_IO;
	}
	if (listener)
		proof('C', mine, mlen, theirs, tlen, mac);
	else
		proof('L', theirs, tlen, mine, mlen, mac);
	if (CRYPTO_memcmp(mac, got, MAC_LEN) != 0) {
		snprintf(why, wlen, "a wrong proof (another secret)");
		return HS_REFUSED;
	}
	return HS_OK;
}

/* ---- connecting ---- */

/* A TCP connection to ai before deadline: the fd, or -1 with *err. */
static int
connect_one(const struct addrinfo *ai, int dir, double deadline, int *err)
{
	socklen_t len = sizeof(*err);
	int fd, fl, rc;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    ai->ai_protocol);
	if (fd < 0) {
		*err = errno;
		return -1;
	}
	tune_buffers(fd, dir);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		if (errno != EINPROGRESS) {
			*err = errno;
			close(fd);
			return -1;
		}
		rc = wait_fd(fd, POLLOUT, deadline);
		if (rc <= 0) {
			*err = rc == 0 ? ETIMEDOUT : errno;
			close(fd);
			return -1;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len) != 0)
			*err = errno;
		if (*err != 0) {
			close(fd);
			return -1;
		}
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		*err = errno;
		close(fd);
		return -1;
	}
	return fd;
}

static int
do_connect(struct ovl_net *n)
{
	double deadline = now() + cfg.connect_timeout, delay = BACKOFF_MIN;
	struct addrinfo hints, *res, *ai;
	char last[256] = "", why[256];
	int fd, err, rc, said = 0;

	for (;;) {
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		rc = getaddrinfo(n->host, n->port, &hints, &res);
		if (rc != 0 && rc != EAI_AGAIN)
			ovl_errx(OVL_EXIT_USAGE, "%s: cannot resolve '%s': %s",
			    n->shown, n->host, gai_strerror(rc));
		if (rc != 0)
			snprintf(last, sizeof(last), "cannot resolve '%s': %s",
			    n->host, gai_strerror(rc));
		for (ai = rc == 0 ? res : NULL; ai != NULL; ai = ai->ai_next) {
			fd = connect_one(ai, n->dir, deadline, &err);
			if (fd < 0) {
				snprintf(last, sizeof(last), "%s", strerror(err));
				if (err == EINTR && stopping()) {
					freeaddrinfo(res);
					errno = EINTR;
					return -1;
				}
				continue;
			}
			tune(fd, n->dir);
			rc = handshake(n, fd, deadline, why, sizeof(why));
			err = errno;
			if (rc == HS_OK) {
				freeaddrinfo(res);
				ovl_info(1, "connected to %s", n->shown);
				return fd;
			}
			close(fd);
			if (rc == HS_REFUSED)
				ovl_errx(OVL_EXIT_USAGE, "%s refused: %s",
				    n->shown, why);
			if (err == EINTR && stopping()) {
				freeaddrinfo(res);
				errno = EINTR;
				return -1;
			}
			snprintf(last, sizeof(last), "%s", why);
		}
		if (rc == 0)
			freeaddrinfo(res);
		if (now() >= deadline)
			ovl_errx(OVL_EXIT_DATA, "cannot connect to %s within %g s "
			    "(--connect-timeout): %s", n->shown,
			    cfg.connect_timeout, last);
		if (!said) {
			ovl_info(1, "waiting for %s: %s", n->shown, last);
			said = 1;
		}
		if (nap(delay < deadline - now() ? delay : deadline - now()) != 0)
			return -1;
		delay = delay * 2 < BACKOFF_MAX ? delay * 2 : BACKOFF_MAX;
	}
}

/* ---- listening ---- */

/* Try the addresses of a listener in order: IPv6 first for "every address". */
static int
bind_one(struct ovl_net *n, const struct addrinfo *ai, int *err)
{
	int fd;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    ai->ai_protocol);
	if (fd < 0) {
		*err = errno;
		return -1;
	}
	setint(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	if (ai->ai_family == AF_INET6 && n->host == NULL)
		setint(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);	/* both families */
	tune_buffers(fd, n->dir);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
		*err = errno;
		close(fd);
		return -1;
	}
	return fd;
}

void
ovl_net_listen(struct ovl_net *n)
{
	struct addrinfo hints, *res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char line[32], *p;
	int rc, pass, err = EADDRNOTAVAIL;

	if (n->kind != EP_LISTEN || n->lfd >= 0)
		return;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(n->host, n->port, &hints, &res);
	if (rc != 0)
		ovl_errx(rc == EAI_AGAIN ? OVL_EXIT_DATA : OVL_EXIT_USAGE,
		    "%s: cannot resolve '%s': %s", n->shown, n->host,
		    gai_strerror(rc));
	for (pass = 0; pass < 2 && n->lfd < 0; pass++)
		for (ai = res; ai != NULL && n->lfd < 0; ai = ai->ai_next)
			if ((ai->ai_family == AF_INET6) == (pass == 0))
				n->lfd = bind_one(n, ai, &err);
	freeaddrinfo(res);
	if (n->lfd < 0) {
		errno = err;
		ovl_err(OVL_EXIT_DATA, "cannot listen on %s", n->shown);
	}
	if (getsockname(n->lfd, (struct sockaddr *)&ss, &sl) == 0)
		addr_text((struct sockaddr *)&ss, sl, n->bound, sizeof(n->bound));
	/* the endpoint as bound: its port, when it was 0 */
	p = strrchr(n->bound, ':');
	if (p != NULL && strcmp(n->port, "0") == 0) {
		snprintf(n->port, sizeof(n->port), "%s", p + 1);
		free(n->shown);
		n->shown = ovl_xmalloc(strlen(n->host != NULL ? n->host : "") +
		    32);
		sprintf(n->shown, "tcp-listen:%s%s%s:%s", n->host != NULL &&
		    strchr(n->host, ':') != NULL ? "[" : "", n->host != NULL ?
		    n->host : "", n->host != NULL && strchr(n->host, ':') !=
		    NULL ? "]" : "", n->port);
		free(n->name);
		n->name = ovl_xstrdup(n->shown);
	}
	if (n->port_file != NULL) {
		snprintf(line, sizeof(line), "%s\n", n->port);
		if (ovl_atomic_write(n->port_file, line, strlen(line)) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot write port file '%s'",
			    n->port_file);
	}
	ovl_info(1, "listening on %s (%s)", n->bound, n->shown);
}

static int
do_accept(struct ovl_net *n)
{
	double deadline, hd;
	struct sockaddr_storage ss;
	socklen_t sl;
	char peer[128], why[256];
	unsigned refused = 0;
	int fd, rc, err;

	ovl_net_listen(n);
	deadline = now() + cfg.connect_timeout;
	for (;;) {
		rc = wait_fd(n->lfd, POLLIN, deadline);
		if (rc < 0 && errno == EINTR)
			return -1;
		if (rc < 0)
			ovl_err(OVL_EXIT_DATA, "%s: poll", n->shown);
		if (rc == 0)
			ovl_errx(OVL_EXIT_DATA, "no peer on %s within %g s "
			    "(--connect-timeout)%s", n->shown,
			    cfg.connect_timeout, refused > 0 ?
			    ", only peers that were refused" : "");
		sl = sizeof(ss);
		fd = accept4(n->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == EAGAIN ||
			    errno == ECONNABORTED)
				continue;
			ovl_err(OVL_EXIT_DATA, "%s: accept", n->shown);
		}
		addr_text((struct sockaddr *)&ss, sl, peer, sizeof(peer));
		tune(fd, n->dir);
		hd = now() + HANDSHAKE_MAX < deadline ? now() + HANDSHAKE_MAX :
		    deadline;
		rc = handshake(n, fd, hd, why, sizeof(why));
		err = errno;
		if (rc == HS_OK) {
			free(n->name);
			n->name = ovl_xmalloc(strlen(peer) + strlen(n->shown) + 16);
			sprintf(n->name, "peer %s on %s", peer, n->shown);
			ovl_info(1, "%s: authenticated", n->name);
			return fd;
		}
		close(fd);
		if (rc == HS_IO && err == EINTR && stopping()) {
			errno = EINTR;
			return -1;
		}
		refused++;
		ovl_warnx("%s: refused peer %s: %s", n->shown, peer, why);
	}
}

/* ---- streams ---- */

int
ovl_net_wait(struct ovl_net *n)
{
	int fd = n->kind == EP_CONNECT ? do_connect(n) : do_accept(n);

	/* a reader going away is then an error naming it, not a SIGPIPE */
	if (fd >= 0 && n->dir == OVL_NET_WRITE)
		signal(SIGPIPE, SIG_IGN);
	return fd;
}

int
ovl_net_open(const char *spec, int dir, char *name, size_t len)
{
	struct ovl_net *n = ovl_net_new(spec, dir);
	int fd = ovl_net_wait(n), e = errno;

	if (name != NULL && len > 0)
		snprintf(name, len, "%s", n->name);
	ovl_net_free(n);
	errno = e;
	return fd;
}

void
ovl_net_redirect(const char *spec, int dir, int target, char *name,
    size_t len)
{
	int fd;

	if (strcmp(spec, "-") == 0) {
		snprintf(name, len, "%s", target == STDIN_FILENO ?
		    "standard input" : "standard output");
		return;
	}
	if (ovl_net_is_endpoint(spec)) {
		fd = ovl_net_open(spec, dir, name, len);
		if (fd < 0)
			ovl_err(OVL_EXIT_DATA, "%s", spec);
	} else {
		fd = open(spec, dir == OVL_NET_READ ? O_RDONLY | O_CLOEXEC :
		    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", spec);
		snprintf(name, len, "%s", spec);
	}
	if (fd != target) {
		if (dup2(fd, target) < 0)
			ovl_err(OVL_EXIT_DATA, "cannot redirect to '%s'", spec);
		close(fd);
	}
}

int
ovl_net_drain(int fd, double timeout_s)
{
	double t0 = now();
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	struct pollfd p;
	uint8_t sink[512];
	socklen_t sl;
	int q, last = -1, err, eof = 0;

	(void)shutdown(fd, SHUT_WR);
	for (;;) {
		if (ioctl(fd, SIOCOUTQ, &q) != 0)
			return -1;
		if (q == 0)
			return 0;
		if (q != last) {	/* the peer is taking bytes */
			last = q;
			t0 = now();
		}
		if (now() - t0 >= timeout_s) {
			errno = ETIMEDOUT;
			return -1;
		}
		err = 0;
		sl = sizeof(err);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) == 0 &&
		    err != 0) {
			errno = err;
			return -1;
		}
		if (eof) {
			nanosleep(&ts, NULL);
			continue;
		}
		p.fd = fd;
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, 20) > 0 && (p.revents & POLLIN) &&
		    recv(fd, sink, sizeof(sink), MSG_DONTWAIT) == 0)
			eof = 1;	/* the peer is done: its acks may still come */
	}
}
