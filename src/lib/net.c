/*
 * net: settings, endpoints, sockets and connecting. See net.h and
 * ovl-frame(5); listening is in net-listen.c, the handshake in net-auth.c.
 */
#include "net-int.h"

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
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "atomic.h"
#include "buf.h"
#include "err.h"
#include "num.h"

#define BACKOFF_MIN	0.05
#define BACKOFF_MAX	1.0

/* ---- settings: options, then the environment, then defaults ---- */

static struct ovl_net__cfg cfg = {
	.connect_timeout = 60, .keepalive = 10
};

static int
parse_seconds(const char *v, double *out)
{
	double d;

	if (ovl_num_double(v, &d) != 0 || !(d >= 0) || d > 86400 * 7)
		return -1;
	*out = d;
	return 0;
}

int
ovl_net__valid_run_id(const char *v)
{
	const char *p;

	if (strlen(v) > OVL_NET__RUNID_MAX)
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
		if (!ovl_net__valid_run_id(v))
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

int
ovl_net__stopping(void)
{
	return cfg.stop != NULL && cfg.stop();
}

struct ovl_net__cfg *
ovl_net__settings(void)
{
	return &cfg;
}

/* ---- endpoints ---- */

int
ovl_net_is_endpoint(const char *spec)
{
	return spec != NULL && (strncmp(spec, "tcp:", 4) == 0 ||
	    strncmp(spec, "tcp-listen:", 11) == 0 ||
	    strncmp(spec, "unix:", 5) == 0 ||
	    strncmp(spec, "unix-listen:", 12) == 0);
}

/* unix:PATH or unix-listen:PATH (the rest is the path): 0, or -1. */
static int
parse_unix(struct ovl_net *n, const char *spec)
{
	const char *p;

	n->unix_path = 1;
	if (strncmp(spec, "unix:", 5) == 0) {
		n->kind = EP_CONNECT;
		p = spec + 5;
	} else {
		n->kind = EP_LISTEN;
		p = spec + 12;
	}
	n->shown = ovl_xstrdup(spec);
	if (*p == '\0' || strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -1;
	n->host = ovl_xstrdup(p);	/* the socket's path */
	return 0;
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

/* Options after the address: ",port-file=FILE", ",from=HOSTS". 0, or -1. */
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
		} else if (strncmp(p, "from=", 5) == 0 && end > p + 5 &&
		    n->kind == EP_LISTEN) {
			free(n->from);
			n->from = ovl_xstrdup(p + 5);
			n->from[end - p - 5] = '\0';
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
	if (!ovl_net_is_endpoint(spec) || (strncmp(spec, "unix", 4) == 0 ?
	    parse_unix(n, spec) : parse_spec(n, spec)) != 0)
		ovl_errx(OVL_EXIT_USAGE, "bad endpoint '%s' (tcp:HOST:PORT, "
		    "tcp-listen:[HOST]:PORT[,port-file=FILE][,from=HOST], "
		    "unix:PATH or unix-listen:PATH)", spec);
	n->name = ovl_xstrdup(n->shown);
	load_env();
	ovl_net__load_secret(&cfg, spec, n->unix_path);
	return n;
}

int
ovl_net_spec_valid(const char *spec)
{
	struct ovl_net *n = ovl_xcalloc(1, sizeof(*n));
	int rc;

	n->lfd = -1;
	rc = ovl_net_is_endpoint(spec) && (strncmp(spec, "unix", 4) == 0 ?
	    parse_unix(n, spec) : parse_spec(n, spec)) == 0 ? 0 : -1;
	ovl_net_free(n);
	return rc;
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
	if (n->lfd >= 0) {
		close(n->lfd);
		/* the socket's name goes with the listener */
		if (n->unix_path && n->made)
			(void)unlink(n->host);
	}
	free(n->spec);
	free(n->shown);
	free(n->host);
	free(n->port_file);
	free(n->from);
	free(n->name);
	free(n);
}

/* ---- sockets ---- */

double
ovl_net__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "ADDR:PORT" or "[ADDR]:PORT" of a socket address. */
void
ovl_net__addr_text(const struct sockaddr *sa, socklen_t salen, char *buf,
    size_t len)
{
	char h[NI_MAXHOST], s[NI_MAXSERV];
	struct sockaddr_in v4;
	const struct sockaddr_in6 *v6 = (const void *)sa;

	/* an IPv4 peer of a dual-stack listener is shown as IPv4 */
	if (sa->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
		memset(&v4, 0, sizeof(v4));
		v4.sin_family = AF_INET;
		v4.sin_port = v6->sin6_port;
		memcpy(&v4.sin_addr, v6->sin6_addr.s6_addr + 12, 4);
		sa = (const struct sockaddr *)&v4;
		salen = sizeof(v4);
	}
	if (getnameinfo(sa, salen, h, sizeof(h), s, sizeof(s),
	    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h,
	    s);
}

void
ovl_net__setint(int fd, int level, int opt, int v)
{
	(void)setsockopt(fd, level, opt, &v, sizeof(v));
}

/* Buffers before connect or listen (the window scale is chosen then). */
void
ovl_net__tune_buffers(int fd, int dir)
{
	if (cfg.sockbuf == 0)
		return;		/* the kernel's autotuning */
	ovl_net__setint(fd, SOL_SOCKET, dir == OVL_NET_WRITE ? SO_SNDBUF :
	    SO_RCVBUF, (int)cfg.sockbuf);
}

/*
 * A connected socket: no Nagle delay (the writers write large blocks: only
 * a block's last segment could wait, for nothing), keepalive, and
 * TCP_USER_TIMEOUT: on the reading side it bounds the keepalive probes;
 * on the writing side only with --send-timeout, since it also ends a
 * connection whose reader merely stopped reading for that long.
 */
void
ovl_net__tune(int fd, int dir)
{
	int idle, intvl, cnt;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
	    ss.ss_family == AF_UNIX)
		return;		/* a local peer: no network to watch */
	ovl_net__setint(fd, IPPROTO_TCP, TCP_NODELAY, 1);
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
		ovl_net__setint(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
		ovl_net__setint(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle);
		ovl_net__setint(fd, IPPROTO_TCP, TCP_KEEPINTVL, intvl);
		ovl_net__setint(fd, IPPROTO_TCP, TCP_KEEPCNT, cnt);
		if (dir == OVL_NET_READ)
			ovl_net__setint(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
			    (int)(cfg.keepalive * 1000));
	}
	if (dir == OVL_NET_WRITE && cfg.send_timeout > 0)
		ovl_net__setint(fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
		    (int)(cfg.send_timeout * 1000));
}

int
ovl_net__wait_fd(int fd, short events, double deadline)
{
	struct pollfd p;
	double left;
	int rc;

	for (;;) {
		if (ovl_net__stopping()) {
			errno = EINTR;
			return -1;
		}
		left = deadline - ovl_net__now();
		p.fd = fd;
		p.events = events;
		p.revents = 0;
		/* at the deadline, one last look without waiting */
		rc = poll(&p, 1, left <= 0 ? 0 : left > 0.2 ? 200 :
		    (int)(left * 1000) + 1);
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return -1;
		if (left <= 0)
			return 0;
	}
}

/* Sleep s seconds (at most until deadline), hearing the stop function. */
static int
nap(double s)
{
	double end = ovl_net__now() + s;
	struct timespec ts;
	double left;

	while ((left = end - ovl_net__now()) > 0) {
		if (ovl_net__stopping()) {
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

/* ---- addresses ---- */

/*
 * The addresses of n: getaddrinfo's for TCP (0, or its error), or the one
 * address of a UNIX socket (in *un, not to be freed).
 */
int
ovl_net__resolve(const struct ovl_net *n, int passive, struct addrinfo *un,
    struct sockaddr_un *sun, struct addrinfo **res)
{
	struct addrinfo hints;

	if (n->unix_path) {
		memset(un, 0, sizeof(*un));
		memset(sun, 0, sizeof(*sun));
		sun->sun_family = AF_UNIX;
		memcpy(sun->sun_path, n->host, strlen(n->host) + 1);
		un->ai_family = AF_UNIX;
		un->ai_socktype = SOCK_STREAM;
		un->ai_addr = (struct sockaddr *)sun;
		un->ai_addrlen = sizeof(*sun);
		*res = un;
		return 0;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (passive)
		hints.ai_flags = AI_PASSIVE;
	return getaddrinfo(n->host, n->port, &hints, res);
}

void
ovl_net__release(const struct ovl_net *n, struct addrinfo *res)
{
	if (!n->unix_path)
		freeaddrinfo(res);
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
	ovl_net__tune_buffers(fd, dir);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		if (errno != EINPROGRESS) {
			*err = errno;
			close(fd);
			return -1;
		}
		rc = ovl_net__wait_fd(fd, POLLOUT, deadline);
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
	double deadline = ovl_net__now() + cfg.connect_timeout;
	double delay = BACKOFF_MIN, left;
	struct addrinfo un, *res, *ai;
	struct sockaddr_un sun;
	char last[256] = "", why[256];
	int fd, err, rc, gai, said = 0;

	for (;;) {
		gai = ovl_net__resolve(n, 0, &un, &sun, &res);
		if (gai != 0 && gai != EAI_AGAIN)
			ovl_errx(OVL_EXIT_USAGE, "%s: cannot resolve '%s': %s",
			    n->shown, n->host, gai_strerror(gai));
		if (gai != 0)
			snprintf(last, sizeof(last), "cannot resolve '%s': %s",
			    n->host, gai_strerror(gai));
		for (ai = gai == 0 ? res : NULL; ai != NULL; ai = ai->ai_next) {
			fd = connect_one(ai, n->dir, deadline, &err);
			if (fd < 0) {
				snprintf(last, sizeof(last), "%s", strerror(err));
				if (err == EINTR && ovl_net__stopping()) {
					ovl_net__release(n, res);
					errno = EINTR;
					return -1;
				}
				continue;
			}
			ovl_net__tune(fd, n->dir);
			rc = ovl_net__handshake(&cfg, n, fd, deadline, why,
			    sizeof(why));
			err = errno;
			if (rc == OVL_NET__HS_OK) {
				ovl_net__release(n, res);
				ovl_info(1, "connected to %s", n->shown);
				return fd;
			}
			close(fd);
			if (rc == OVL_NET__HS_REFUSED) {
				ovl_net__release(n, res);
				ovl_errx(OVL_EXIT_USAGE, "%s refused: %s",
				    n->shown, why);
			}
			if (err == EINTR && ovl_net__stopping()) {
				ovl_net__release(n, res);
				errno = EINTR;
				return -1;
			}
			snprintf(last, sizeof(last), "%s", why);
		}
		/* (rc is the handshake's by now: the lookup's is gai) */
		if (gai == 0)
			ovl_net__release(n, res);
		if (ovl_net__now() >= deadline)
			ovl_errx(OVL_EXIT_DATA, "cannot connect to %s within %g s "
			    "(--connect-timeout): %s", n->shown,
			    cfg.connect_timeout, last);
		if (!said) {
			ovl_info(1, "waiting for %s: %s", n->shown, last);
			said = 1;
		}
		left = deadline - ovl_net__now();
		if (nap(delay < left ? delay : left) != 0)
			return -1;
		delay = delay * 2 < BACKOFF_MAX ? delay * 2 : BACKOFF_MAX;
	}
}

/* ---- streams ---- */

int
ovl_net_wait(struct ovl_net *n)
{
	int fd;

	if (n->kind == EP_CONNECT)
		fd = do_connect(n);
	else if (ovl_net__accept_all(&n, 1, &fd) != 0)
		fd = -1;
	/* a reader going away is then an error naming it, not a SIGPIPE */
	if (fd >= 0 && n->dir == OVL_NET_WRITE)
		signal(SIGPIPE, SIG_IGN);
	return fd;
}

int
ovl_net_wait_all(struct ovl_net **nets, size_t n, int *fds)
{
	struct ovl_net **ls = ovl_xcalloc(n + 1, sizeof(*ls));
	int *lfds = ovl_xcalloc(n + 1, sizeof(*lfds));
	size_t i, nl = 0;
	int rc = 0, write = 0;

	for (i = 0; i < n; i++) {
		fds[i] = -1;
		write |= nets[i]->dir == OVL_NET_WRITE;
		if (nets[i]->kind == EP_LISTEN)
			ls[nl++] = nets[i];
	}
	if (nl > 0 && ovl_net__accept_all(ls, nl, lfds) != 0)
		rc = -1;
	for (i = 0, nl = 0; rc == 0 && i < n; i++)
		if (nets[i]->kind == EP_LISTEN)
			fds[i] = lfds[nl++];
	for (i = 0; rc == 0 && i < n; i++)
		if (nets[i]->kind == EP_CONNECT &&
		    (fds[i] = do_connect(nets[i])) < 0)
			rc = -1;
	if (rc != 0)
		for (i = 0; i < n; i++)
			if (fds[i] >= 0) {
				close(fds[i]);
				fds[i] = -1;
			}
	if (rc == 0 && write)
		signal(SIGPIPE, SIG_IGN);
	free(ls);
	free(lfds);
	return rc;
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

int
ovl_net_redirect(const char *spec, int dir, int target, char *name,
    size_t len)
{
	int fd;

	if (strcmp(spec, "-") == 0) {
		snprintf(name, len, "%s", target == STDIN_FILENO ?
		    "standard input" : "standard output");
		return 0;
	}
	if (ovl_net_is_endpoint(spec)) {
		fd = ovl_net_open(spec, dir, name, len);
		if (fd < 0 && errno == EINTR && ovl_net__stopping())
			return -1;
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
	return 0;
}

int
ovl_net_drain(int fd, double timeout_s)
{
	double t0 = ovl_net__now();
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	struct pollfd p;
	uint8_t sink[512];
	socklen_t sl;
	ssize_t n;
	int q, last = -1, err, eof = 0;

	(void)shutdown(fd, SHUT_WR);
	for (;;) {
		if (ioctl(fd, SIOCOUTQ, &q) != 0)
			return -1;
		if (q == 0)
			return 0;
		if (q != last) {	/* the peer is taking bytes */
			last = q;
			t0 = ovl_net__now();
		}
		if (ovl_net__now() - t0 >= timeout_s) {
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
		if (poll(&p, 1, 20) <= 0 || !(p.revents & (POLLIN | POLLERR |
		    POLLHUP)))
			continue;
		n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n == 0)
			eof = 1;	/* the peer is done: its acks may still come */
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -1;	/* reset: recv took the socket's error */
	}
}
