#include "atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "io.h"

char *
ovl_path_dir(const char *path)
{
	char *dir = ovl_xstrdup(path), *slash = strrchr(dir, '/');

	if (slash == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	return dir;
}

int
ovl_fsync_dir(const char *path)
{
	struct stat st;
	char *dir;
	int fd, rc, saved;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		dir = ovl_xstrdup(path);
	else
		dir = ovl_path_dir(path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

int
ovl_atomic_write_gen(const char *path, int (*gen)(int fd, void *arg),
    void *arg)
{
	size_t len = strlen(path) + 32;
	char *tmp = ovl_xmalloc(len);
	int fd, saved;

	snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail_nofd;
	if (gen(fd, arg) != 0 || fsync(fd) != 0)
		goto fail;
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) != 0)
		goto fail;
	free(tmp);
	return ovl_fsync_dir(path);
fail:
	saved = errno;
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	errno = saved;
fail_nofd:
	saved = errno;
	free(tmp);
	errno = saved;
	return -1;
}

struct whole {
	const void	*buf;
	size_t		 n;
};

static int
write_whole(int fd, void *arg)
{
	struct whole *w = arg;

	return ovl_io_write_full(fd, w->buf, w->n);
}

int
ovl_atomic_write(const char *path, const void *buf, size_t n)
{
	struct whole w = { buf, n };

	return ovl_atomic_write_gen(path, write_whole, &w);
}

int
ovl_mkdir_p(const char *path, int mode)
{
	char *p = ovl_xstrdup(path), *s;
	struct stat st;

	for (s = p + 1; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, (mode_t)mode) != 0 && errno != EEXIST) {
			free(p);
			return -1;
		}
		*s = '/';
	}
	if (mkdir(p, (mode_t)mode) != 0 && errno != EEXIST) {
		free(p);
		return -1;
	}
	free(p);
	if (stat(path, &st) != 0)
		return -1;
	if (!S_ISDIR(st.st_mode))
		return (errno = ENOTDIR), -1;
	return 0;
}
