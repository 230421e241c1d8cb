#include "io.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

ssize_t
ovl_io_read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;
	ssize_t r;

	while (got < n) {
		r = read(fd, (char *)buf + got, n - got);
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN && got > 0)
			break;
		return -1;
	}
	return (ssize_t)got;
}

int
ovl_io_write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

void
ovl_io_pipe_grow(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
		int cur = fcntl(fd, F_GETPIPE_SZ);
		if (cur >= 0 && (unsigned)cur < OVL_PIPE_SIZE)
			(void)fcntl(fd, F_SETPIPE_SZ, (int)OVL_PIPE_SIZE);
	}
}

int
ovl_io_isatty(int fd)
{
	return isatty(fd);
}

void
ovl_io_refuse_tty(int fd)
{
	if (isatty(fd))
		ovl_errx(OVL_EXIT_USAGE, "refusing to write binary frames to a "
		    "terminal (use --json, or redirect)");
}

void
ovl_io_die_epipe(void)
{
	signal(SIGPIPE, SIG_DFL);
	raise(SIGPIPE);
	_exit(128 + SIGPIPE);
}

int
ovl_io_isfifo(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

int
ovl_io_issock(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

void
ovl_io_check_stdout(void)
{
	if (ferror(stdout)) {
		if (errno == EPIPE && !ovl_io_issock(STDOUT_FILENO))
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on standard output");
	}
}

double
ovl_io_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) +
	    (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

void
ovl_io_close_stdout(void)
{
	(void)fflush(stdout);	/* a failure sets the error flag */
	ovl_io_check_stdout();
	if (fclose(stdout) != 0) {
		if (errno == EPIPE && !ovl_io_issock(STDOUT_FILENO))
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "cannot close standard output");
	}
}

/* The descriptors open now (those listed in /proc/self/fd), or 0. */
static size_t
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	size_t n = 0;

	if (d == NULL)
		return 0;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	/* ".", ".." and the directory's own descriptor */
	return n > 3 ? n - 3 : 0;
}

void
ovl_io_want_fds(size_t n, const char *what)
{
	struct rlimit rl;
	rlim_t need;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	need = (rlim_t)(n + open_fds() + 64);
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
		ovl_errx(OVL_EXIT_DATA, "%s need %ju open files, more than "
		    "RLIMIT_NOFILE allows (soft %ju, hard %ju): raise the hard "
		    "limit (ulimit -Hn, limits.conf, LimitNOFILE=)", what,
		    (uintmax_t)need, (uintmax_t)rl.rlim_cur,
		    (uintmax_t)rl.rlim_max);
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		ovl_err(OVL_EXIT_DATA, "%s need %ju open files: cannot raise "
		    "RLIMIT_NOFILE from %ju", what, (uintmax_t)need,
		    (uintmax_t)rl.rlim_cur);
	ovl_info(1, "RLIMIT_NOFILE raised to %ju for %s", (uintmax_t)need,
	    what);
}
