/*
 * atomic: files that are either wholly old or wholly new after a crash.
 */
#ifndef OVL_ATOMIC_H
#define OVL_ATOMIC_H

#include <stddef.h>

/*
 * Replace path with n bytes of buf: write a temporary file beside it, fsync
 * it, rename it over path, fsync the directory. Returns 0, or -1 with errno
 * set (the old file, if any, is untouched and the temporary removed).
 */
int	ovl_atomic_write(const char *path, const void *buf, size_t n);
/*
 * The same with the bytes written by gen(fd, arg) (0, or -1 with errno
 * set): a file too large to hold, written piece by piece.
 */
int	ovl_atomic_write_gen(const char *path, int (*gen)(int fd, void *arg),
	    void *arg);
/* fsync the directory holding path (path itself when it is a directory). 0 or -1. */
int	ovl_fsync_dir(const char *path);
/*
 * The directory part of path as a new string the caller frees: "." for a
 * bare name, "/" for a name at the root (dirname(3) without its quirks).
 */
char	*ovl_path_dir(const char *path);
/* mkdir -p; 0 or -1 with errno. */
int	ovl_mkdir_p(const char *path, int mode);

#endif
