/*
 * io: whole reads and writes on file descriptors, and pipe tuning.
 */
#ifndef OVL_IO_H
#define OVL_IO_H

#include <stddef.h>
#include <time.h>
#include <sys/types.h>

/* Pipe buffer size asked for with F_SETPIPE_SZ (DESIGN: 1 MiB). */
#define OVL_PIPE_SIZE (1u << 20)

/*
 * Read up to n bytes, looping on short reads and EINTR. Returns the bytes
 * read (less than n only at end of file), or -1 with errno set.
 * A non-blocking fd that would block returns what it has (maybe 0) with
 * errno EAGAIN when nothing was read.
 */
ssize_t	ovl_io_read_full(int fd, void *buf, size_t n);
/*
 * Write all n bytes, looping on short writes and EINTR. Returns 0, or -1
 * with errno set. EPIPE is returned to the caller (SIGPIPE, when not
 * ignored, has already ended the process by then).
 */
int	ovl_io_write_full(int fd, const void *buf, size_t n);
/* Raise the buffer of fd to OVL_PIPE_SIZE when it is a pipe or FIFO; errors ignored. */
void	ovl_io_pipe_grow(int fd);
/*
 * Room for n more open descriptors (one per rank, per input): when n plus
 * what the process holds and a margin of 64 exceed the soft
 * RLIMIT_NOFILE, raise it, up to the hard limit. When even the hard limit
 * is too low, exit 1 naming RLIMIT_NOFILE, both limits, the count needed
 * and what (for example "4096 per-rank outputs").
 */
void	ovl_io_want_fds(size_t n, const char *what);
/* 1 when fd is a pipe or FIFO. */
int	ovl_io_isfifo(int fd);
/* 1 when fd is a socket (a stream over TCP: see net.h). */
int	ovl_io_issock(int fd);
/* 1 when fd is a terminal. */
int	ovl_io_isatty(int fd);
/*
 * Exit with status 2 and a message when fd is a terminal: binary frames are
 * not written to one (use --json).
 */
void	ovl_io_refuse_tty(int fd);
/*
 * Die quietly the way a pipeline member does on EPIPE: restore SIGPIPE's
 * default action and raise it. (Not for a socket: its peer leaving is an
 * error that names it.)
 */
void	ovl_io_die_epipe(void) __attribute__((noreturn));
/* Flush and close stdout, checking both; exits 1 with a message on error. */
void	ovl_io_close_stdout(void);
/*
 * After writing to standard output with stdio: a write error exits 1 with
 * a message, a closed pipe dies by SIGPIPE (ovl_io_die_epipe). No flush.
 */
void	ovl_io_check_stdout(void);
/* Seconds elapsed since t0, a CLOCK_MONOTONIC reading. */
double	ovl_io_since(const struct timespec *t0);

#endif
