/*
 * net: listening, and the handshakes of a listener's peers, all at once.
 * See net.h; the settings and sockets are net.c's, the handshake
 * net-auth.c's.
 */
#include "net-int.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "atomic.h"
#include "buf.h"
#include "err.h"

#define HANDSHAKE_MAX	5.0	/* seconds a listener gives one peer */
#define PENDING_MAX	32	/* peers in their handshake at once */

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
	ovl_net__setint(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	if (ai->ai_family == AF_INET6 && n->host == NULL)
		ovl_net__setint(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0);	/* both families */
	ovl_net__tune_buffers(fd, n->dir);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
		*err = errno;
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A UNIX socket listener: a stale socket of an earlier run at the path is
 * replaced (anything else there is an error), and the socket is made
 * readable and writable by its owner only.
 */
static void
unix_listen(struct ovl_net *n)
{
	struct addrinfo un, *res;
	struct sockaddr_un sun;
	struct stat st;
	mode_t old;
	int err = 0;

	if (lstat(n->host, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			ovl_errx(OVL_EXIT_USAGE, "%s: '%s' exists and is not a "
			    "socket", n->shown, n->host);
		if (unlink(n->host) != 0)
			ovl_err(OVL_EXIT_DATA, "%s: cannot remove the old socket",
			    n->shown);
	}
	(void)ovl_net__resolve(n, 1, &un, &sun, &res);
	old = umask(077);	/* nobody else may connect, from the start */
	n->lfd = bind_one(n, res, &err);
	umask(old);
	if (n->lfd < 0) {
		errno = err;
		ovl_err(OVL_EXIT_DATA, "cannot listen on %s", n->shown);
	}
	n->made = 1;
	(void)chmod(n->host, 0600);
	snprintf(n->bound, sizeof(n->bound), "%s", n->host);
	ovl_info(1, "listening on %s", n->shown);
}

void
ovl_net_listen(struct ovl_net *n)
{
	struct addrinfo un, *res, *ai;
	struct sockaddr_un sun;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char line[32], *p;
	int rc, pass, err = EADDRNOTAVAIL;

	if (n->kind != EP_LISTEN || n->lfd >= 0)
		return;
	if (n->unix_path) {
		unix_listen(n);
		return;
	}
	rc = ovl_net__resolve(n, 1, &un, &sun, &res);
	if (rc != 0)
		ovl_errx(rc == EAI_AGAIN ? OVL_EXIT_DATA : OVL_EXIT_USAGE,
		    "%s: cannot resolve '%s': %s", n->shown, n->host,
		    gai_strerror(rc));
	for (pass = 0; pass < 2 && n->lfd < 0; pass++)
		for (ai = res; ai != NULL && n->lfd < 0; ai = ai->ai_next)
			if ((ai->ai_family == AF_INET6) == (pass == 0))
				n->lfd = bind_one(n, ai, &err);
	ovl_net__release(n, res);
	if (n->lfd < 0) {
		errno = err;
		ovl_err(OVL_EXIT_DATA, "cannot listen on %s", n->shown);
	}
	if (getsockname(n->lfd, (struct sockaddr *)&ss, &sl) == 0)
		ovl_net__addr_text((struct sockaddr *)&ss, sl, n->bound, sizeof(n->bound));
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

/* Is an address (IPv4, IPv6 or IPv4-mapped IPv6) one of host's? */
static int
addr_is(const struct sockaddr_storage *ss, const char *host)
{
	struct addrinfo hints = { 0 }, *res, *ai;
	const struct sockaddr_in6 *p6 = (const void *)ss;
	const struct sockaddr_in *p4 = (const void *)ss;
	struct in_addr v4;
	int fam = ss->ss_family, hit = 0;

	if (fam == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&p6->sin6_addr)) {
		memcpy(&v4, p6->sin6_addr.s6_addr + 12, 4);
		fam = AF_INET;
	} else if (fam == AF_INET)
		v4 = p4->sin_addr;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, NULL, &hints, &res) != 0)
		return 0;
	for (ai = res; ai != NULL && !hit; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET && fam == AF_INET)
			hit = memcmp(&((struct sockaddr_in *)(void *)
			    ai->ai_addr)->sin_addr, &v4, sizeof(v4)) == 0;
		else if (ai->ai_family == AF_INET6 && fam == AF_INET6)
			hit = memcmp(&((struct sockaddr_in6 *)(void *)
			    ai->ai_addr)->sin6_addr, &p6->sin6_addr,
			    sizeof(p6->sin6_addr)) == 0;
	}
	freeaddrinfo(res);
	return hit;
}

/* Does a peer come from one of the listener's from= hosts? */
static int
peer_allowed(const struct ovl_net *n, const struct sockaddr_storage *ss)
{
	const char *p, *e;
	char host[NI_MAXHOST];

	if (n->from == NULL)
		return 1;
	for (p = n->from; *p != '\0'; p = *e != '\0' ? e + 1 : e) {
		e = p + strcspn(p, "/");
		if ((size_t)(e - p) >= sizeof(host) || e == p)
			continue;
		memcpy(host, p, (size_t)(e - p));
		host[e - p] = '\0';
		if (addr_is(ss, host))
			return 1;
	}
	return 0;
}

/*
 * Peers in their handshake: a listener greets every peer at once and
 * takes the first that proves itself, so a peer that says nothing holds
 * nobody back. Each has HANDSHAKE_MAX seconds; beyond PENDING_MAX at once
 * the oldest goes first.
 */
struct pending {
	struct ovl_net__hs hs;
	size_t	 li;		/* its listener's index */
	double	 until;		/* its deadline */
	char	 peer[128];
};

struct accepting {
	struct ovl_net	**nets;
	size_t		  n;
	int		 *fds;
	unsigned	 *refused;	/* per listener */
	struct pending	 *pd;
	size_t		  np;
};

/* Close pending k, saying why when why is not NULL (a refusal). */
static void
drop(struct accepting *A, size_t k, const char *why)
{
	struct pending *p = &A->pd[k];

	if (why != NULL) {
		A->refused[p->li]++;
		ovl_warnx("%s: refused peer %s: %s", A->nets[p->li]->shown,
		    p->peer, why);
	}
	close(p->hs.fd);
	A->pd[k] = A->pd[--A->np];
}

/* Pending k proved itself: its listener's stream. */
static void
won(struct accepting *A, size_t k)
{
	struct pending *p = &A->pd[k];
	struct ovl_net *n = A->nets[p->li];
	size_t li = p->li, j;

	free(n->name);
	n->name = ovl_xmalloc(strlen(p->peer) + strlen(n->shown) + 16);
	sprintf(n->name, "peer %s on %s", p->peer, n->shown);
	ovl_info(1, "%s: authenticated", n->name);
	A->fds[li] = p->hs.fd;
	A->pd[k] = A->pd[--A->np];
	/* the others of that listener: the next ovl_net_wait takes its next */
	for (j = A->np; j-- > 0;)
		if (A->pd[j].li == li) {
			ovl_info(1, "%s: closed peer %s: the stream has its "
			    "peer", n->shown, A->pd[j].peer);
			drop(A, j, NULL);
		}
}

/* Take what listener li has queued: greet each peer. */
static void
take_new(struct accepting *A, size_t li)
{
	struct ovl_net *n = A->nets[li];
	struct sockaddr_storage ss;
	struct pending *p;
	socklen_t sl;
	const struct ovl_net__cfg *cfg = ovl_net__settings();
	char why[256];
	size_t k, old;
	int fd, rc;

	for (;;) {
		sl = sizeof(ss);
		fd = accept4(n->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			ovl_err(OVL_EXIT_DATA, "%s: accept", n->shown);
		}
		if (A->np == PENDING_MAX) {	/* the oldest goes */
			for (old = 0, k = 1; k < A->np; k++)
				if (A->pd[k].until < A->pd[old].until)
					old = k;
			snprintf(why, sizeof(why), "no proof yet, and %d peers "
			    "wait with it (the oldest goes)", PENDING_MAX);
			drop(A, old, why);
		}
		p = &A->pd[A->np];
		p->li = li;
		p->until = ovl_net__now() + HANDSHAKE_MAX;
		if (n->unix_path)
			snprintf(p->peer, sizeof(p->peer), "local");
		else
			ovl_net__addr_text((struct sockaddr *)&ss, sl, p->peer,
			    sizeof(p->peer));
		if (!n->unix_path && !peer_allowed(n, &ss)) {
			close(fd);
			A->refused[li]++;
			ovl_warnx("%s: refused peer %s: not from %s (from=)",
			    n->shown, p->peer, n->from);
			continue;
		}
		ovl_net__tune(fd, n->dir);
		A->np++;
		rc = ovl_net__hs_start(cfg, n, &p->hs, fd, p->until, why,
		    sizeof(why));
		if (rc != OVL_NET__HS_MORE)
			drop(A, A->np - 1, why);
	}
}

/* Go on with the pendings poll found readable (pfd from base). */
static void
step_ready(struct accepting *A, const struct pollfd *pfd)
{
	const struct ovl_net__cfg *cfg = ovl_net__settings();
	char why[256];
	size_t k;
	int rc;

	/* backwards: drop moves the last one, already seen, into k */
	for (k = A->np; k-- > 0;) {
		if (k >= A->np || pfd[k].fd != A->pd[k].hs.fd ||
		    pfd[k].revents == 0)
			continue;
		rc = ovl_net__hs_step(cfg, &A->pd[k].hs, why, sizeof(why));
		if (rc == OVL_NET__HS_OK && A->fds[A->pd[k].li] < 0)
			won(A, k);
		else if (rc == OVL_NET__HS_OK)
			drop(A, k, NULL);
		else if (rc != OVL_NET__HS_MORE)
			drop(A, k, why);
	}
}

/* Close the peers still in their handshake; free what accept_all made. */
static void
accepting_end(struct accepting *A, struct pollfd *pfd)
{
	while (A->np > 0)
		drop(A, A->np - 1, NULL);
	free(A->refused);
	free(A->pd);
	free(pfd);
}

/*
 * The peers of the listeners nets[0..n) into fds: every handshake at once,
 * bounded by --connect-timeout from now. 0, or -1 (EINTR: the stop
 * function) with no stream open.
 */
int
ovl_net__accept_all(struct ovl_net **nets, size_t n, int *fds)
{
	const struct ovl_net__cfg *cfg = ovl_net__settings();
	struct accepting A = { nets, n, fds, NULL, NULL, 0 };
	struct pollfd *pfd;
	size_t i, k, m, base, left = n;
	double deadline, now, next;
	char why[256];
	int rc;

	for (i = 0; i < n; i++) {
		ovl_net_listen(nets[i]);
		fds[i] = -1;
	}
	A.refused = ovl_xcalloc(n, sizeof(*A.refused));
	A.pd = ovl_xcalloc(PENDING_MAX, sizeof(*A.pd));
	pfd = ovl_xcalloc(n + PENDING_MAX, sizeof(*pfd));
	deadline = ovl_net__now() + cfg->connect_timeout;
	while (left > 0) {
		if (ovl_net__stopping())
			goto stop;
		now = ovl_net__now();
		for (k = A.np; k-- > 0;)
			if (A.pd[k].until <= now) {
				(void)ovl_net__hs_fail(&A.pd[k].hs, ETIMEDOUT,
				    why, sizeof(why));
				drop(&A, k, why);
			}
		if (now >= deadline) {
			for (i = 0; fds[i] >= 0; i++)
				;
			k = A.refused[i];
			accepting_end(&A, pfd);
			ovl_errx(OVL_EXIT_DATA, "no peer on %s within %g s "
			    "(--connect-timeout)%s", nets[i]->shown,
			    cfg->connect_timeout, k > 0 ? ", only peers that "
			    "were refused" : "");
		}
		/* the pendings first, at the indices they have in A.pd */
		for (k = 0; k < A.np; k++) {
			pfd[k].fd = A.pd[k].hs.fd;
			pfd[k].events = POLLIN;
			pfd[k].revents = 0;
		}
		base = m = A.np;
		for (i = 0; i < n; i++)
			if (fds[i] < 0) {
				pfd[m].fd = nets[i]->lfd;
				pfd[m].events = POLLIN;
				pfd[m++].revents = 0;
			}
		next = deadline;
		for (k = 0; k < A.np; k++)
			if (A.pd[k].until < next)
				next = A.pd[k].until;
		next -= now;
		rc = poll(pfd, m, next <= 0 ? 0 : next > 0.2 ? 200 :
		    (int)(next * 1000) + 1);
		if (rc < 0 && errno != EINTR)
			ovl_err(OVL_EXIT_DATA, "%s: poll", nets[0]->shown);
		if (rc <= 0)
			continue;
		step_ready(&A, pfd);
		for (k = base; k < m; k++)
			if (pfd[k].revents != 0)
				for (i = 0; i < n; i++)
					if (fds[i] < 0 && nets[i]->lfd == pfd[k].fd)
						take_new(&A, i);
		for (left = 0, i = 0; i < n; i++)
			left += fds[i] < 0;
	}
	accepting_end(&A, pfd);	/* the listeners have their peers */
	return 0;
stop:
	for (i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
	accepting_end(&A, pfd);
	errno = EINTR;
	return -1;
}
