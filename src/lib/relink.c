#include "relink.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "io.h"
#include "num.h"

int
ovl_link_of_fd(int fd, struct ovl_link *l)
{
	char proc[64], path[4096], *at;
	struct stat st;
	ssize_t n;
	uint64_t g;

	memset(l, 0, sizeof(*l));
	if (fstat(fd, &st) != 0)
		return -1;
	if (!S_ISFIFO(st.st_mode)) {
		errno = ENOTSUP;
		return -1;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, path, sizeof(path) - 1);
	if (n <= 0 || path[0] != '/') {
		/* an anonymous pipe reads "pipe:[N]": no path to move on to */
		errno = ENOTSUP;
		return -1;
	}
	path[n] = '\0';
	at = strrchr(path, '@');
	if (at != NULL && strchr(at, '/') == NULL &&
	    ovl_num_u64(at + 1, &g) == 0) {
		*at = '\0';
		l->gen = g;
	}
	l->base = ovl_xstrdup(path);
	return 0;
}

static int (*stop_fn)(void);

void
ovl_link_set_stop(int (*stop)(void))
{
	stop_fn = stop;
}

/*
 * Open a FIFO for reading and wait for its writer. A signal handler that
 * asks to stop (stop_fn) is never missed: SIGTERM and SIGINT are blocked
 * but while ppoll waits. -1 with EINTR when asked to stop.
 */
static int
open_reader(const char *p)
{
	struct pollfd pfd;
	sigset_t block, old;
	int fd, rc, e = 0;

	fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &old);
	for (;;) {
		if (stop_fn != NULL && stop_fn()) {
			e = EINTR;
			break;
		}
		pfd.fd = fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		rc = ppoll(&pfd, 1, NULL, &old);
		if (rc > 0)
			break;	/* data, or a writer that came and went */
		if (rc < 0 && errno != EINTR) {
			e = errno;
			break;
		}
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (e == 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
		e = errno;
	if (e != 0) {
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The path of generation g of l (the caller frees it), or NULL. */
static char *
gen_path(const struct ovl_link *l, uint64_t g, const char *suffix)
{
	char *p;

	if ((g == 0 ? asprintf(&p, "%s%s", l->base, suffix) :
	    asprintf(&p, "%s@%" PRIu64 "%s", l->base, g, suffix)) < 0)
		return NULL;
	return p;
}

/* Open generation g of l in place of fd, as ovl_link_next says. */
static int
link_open(struct ovl_link *l, int fd, int write, uint64_t g, char **path)
{
	char *p;
	int nfd, e;

	if ((p = gen_path(l, g, "")) == NULL)
		return -1;
	if (mkfifo(p, 0600) != 0 && errno != EEXIST) {
		e = errno;
		free(p);
		errno = e;
		return -1;
	}
	nfd = write ? open(p, O_WRONLY | O_CLOEXEC) : open_reader(p);
	if (nfd < 0) {
		e = errno;
		free(p);
		errno = e;
		return -1;
	}
	if (nfd != fd) {
		if (dup2(nfd, fd) < 0) {
			e = errno;
			close(nfd);
			free(p);
			errno = e;
			return -1;
		}
		close(nfd);
	}
	ovl_io_pipe_grow(fd);
	l->gen = g;
	*path = p;
	return 0;
}

int
ovl_link_next(struct ovl_link *l, int fd, int write, char **path)
{
	return link_open(l, fd, write, l->gen + 1, path);
}

int
ovl_link_again(struct ovl_link *l, int fd, char **path)
{
	return link_open(l, fd, 0, l->gen, path);
}

int
ovl_link_mark(const struct ovl_link *l)
{
	char *p = gen_path(l, l->gen, OVL_LINK_MARK);
	int fd;

	if (p == NULL)
		return -1;
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	free(p);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

int
ovl_link_marked(const struct ovl_link *l)
{
	char *p = gen_path(l, l->gen, OVL_LINK_MARK);
	int rc;

	if (p == NULL)
		return 1;
	rc = access(p, F_OK) == 0 || errno != ENOENT;
	free(p);
	return rc;
}

int
ovl_link_committed(const char *path, uint64_t *n)
{
	char b[32];
	ssize_t k;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	k = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (k <= 0)
		return 0;
	b[k] = '\0';
	b[strcspn(b, "\n")] = '\0';
	return ovl_num_u64(b, n) == 0;
}

int
ovl_link_set_committed(const char *path, uint64_t n)
{
	char tmp[4096], b[32];
	int fd, len, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -1;
	len = snprintf(b, sizeof(b), "%" PRIu64 "\n", n);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	if (ovl_io_write_full(fd, b, (size_t)len) != 0)
		rc = -1;
	if (close(fd) != 0)
		rc = -1;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -1;
	return rc;
}

int
ovl_relink_cli(const struct ovl_cli *cli, struct ovl_relink_opts *o, int opt,
    const char *arg)
{
	switch (opt) {
	case OVL_RELINK_OPT_RELINK:
		o->relink = 1;
		return 1;
	case OVL_RELINK_OPT_BACKUP:
		o->backup = arg;
		return 1;
	case OVL_RELINK_OPT_COMMITTED:
		o->committed = arg;
		return 1;
	case OVL_RELINK_OPT_BACKUP_MAX:
		if (ovl_num_size(arg, &o->max) != 0 || o->max == 0)
			ovl_cli_usagex(cli, "bad --backup-max '%s'", arg);
		return 1;
	}
	return 0;
}

void
ovl_relink_check(const struct ovl_cli *cli, const struct ovl_relink_opts *o)
{
	if ((o->backup == NULL) != (o->committed == NULL))
		ovl_cli_usagex(cli, "--backup and --committed go together");
}
