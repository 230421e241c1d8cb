/*
 * ring: a shared-memory transport for one frame stream between two
 * processes on one host (less CPU downstream), used by frameio.
 *
 * The stream is the same ovl-frame(5) bytes; only how they cross changes.
 * The writer of a pipe or FIFO opts in (OVL_TRANSPORT=ring): it creates a
 * ring file (OVL_RING_DIR, else /dev/shm, else $TMPDIR or /tmp) and sends
 * a hello on the pipe instead of the stream: OVL_RING_MAGIC, the path's
 * length (u32 LE) and the path. A reader that meets the hello opens the
 * file, unlinks it, maps it and reads the stream from it; every reader
 * takes both. The file is one page of header (head, tail, sleep flags)
 * and a data area mapped twice back to back, so that any run of at most
 * the ring's size is contiguous in memory: a reader parses and checks a
 * frame in place.
 *
 * The writer builds its frames in the ring (ovl_ring_window, then
 * ovl_ring_commit) or copies them in (ovl_ring_put), and publishes (head,
 * a release store) only at whole frames: a reader never sees half a frame
 * of up to the ring's size, even from a writer killed while it wrote one.
 * A larger frame is published in pieces as the reader, which copies it
 * out, frees room.
 *
 * The pipe stays as the wake-up and liveness channel: a reader with
 * nothing to read sets its sleep flag, looks again and then waits for a
 * byte (or end of file: the writer closed or died) on the pipe, so it can
 * poll(2) the pipe among other inputs as before; a writer that publishes
 * while the reader sleeps writes one byte. A writer with no room waits on
 * a futex with a timeout and polls the pipe for POLLERR (no reader left);
 * it also looks at every publication, so a writer whose reader is gone
 * before the END frame dies by SIGPIPE, as over a pipe.
 */
#ifndef OVL_RING_H
#define OVL_RING_H

#include <stddef.h>
#include <stdint.h>

#define OVL_RING_MAGIC		"\x89OVLRING"
#define OVL_RING_MAGIC_LEN	8
#define OVL_RING_HELLO_MAX	(12 + 4096)	/* magic, length, path */
#define OVL_RING_SIZE_DEFAULT	(1u << 20)	/* as a pipe (io.h); 4 MiB: no faster */
/*
 * A source's stream (ovl-source): a run has many, and a ring's pages are
 * memory whether used or not (120 sources with 1 MiB rings: ovl-mix's
 * peak RSS 40 -> 388 MB, bench memory); 256 KiB is as fast as 1 MiB there
 * (make bench downstream), 128 KiB is not.
 */
#define OVL_RING_SIZE_SOURCE	(256u << 10)

struct ovl_ring;

/*
 * 1 when fd is a named FIFO (mkfifo; never a shell's anonymous pipe,
 * whose reader may be any program) and OVL_TRANSPORT is "ring" (an unknown
 * value exits 2 with a message); 0 otherwise.
 */
int	ovl_ring_wanted(int fd);

/*
 * Writer: create a ring file and write the hello on fd. The data size is
 * OVL_RING_SIZE (64 KiB .. 1 GiB, rounded up to pages) or the process's
 * default (ovl_ring_default_size). name is the stream's name for
 * messages. Exits 1 with a message when the file cannot be made; EPIPE on
 * the hello dies as a pipe's writer does (ovl_io_die_epipe). NULL, with
 * a warning, when the directory has no room for the ring's pages (they
 * are allocated here): the stream then goes by the pipe as it is.
 */
struct ovl_ring *ovl_ring_create(int fd, const char *name);
/*
 * The data size of the rings this process makes when OVL_RING_SIZE does
 * not say (OVL_RING_SIZE_DEFAULT until called): a tool's own default.
 */
void	ovl_ring_default_size(size_t size);
/*
 * Writer: copy n bytes of the stream (the stream header, then frames) at
 * the write position, waiting for room. The ring follows the frames'
 * lengths in their headers, so it knows where the last whole frame ends.
 * While it waits it publishes up to there; when the reader has taken
 * everything published and there is still no room (a frame larger than
 * the ring) it publishes what it wrote. Dies by SIGPIPE when the reader is
 * gone.
 */
void	ovl_ring_put(struct ovl_ring *g, const void *p, size_t n);
/*
 * Writer, in place: wait until need bytes (at most the ring's size) are
 * free at the write position and return where they begin (contiguous, the
 * data area being mapped twice). Waiting publishes as ovl_ring_put does.
 */
uint8_t	*ovl_ring_window(struct ovl_ring *g, size_t need);
/* Writer: the bytes free at the write position now (no wait). */
size_t	ovl_ring_room(struct ovl_ring *g);
/* Writer, in place: n bytes written at the window are part of the stream. */
void	ovl_ring_commit(struct ovl_ring *g, size_t n);
/*
 * Writer: publish up to the end of the last whole frame, wake the reader
 * if it sleeps, and die by SIGPIPE when the reader is gone.
 */
void	ovl_ring_publish(struct ovl_ring *g);

/*
 * Reader: parse a hello of n bytes at p. Returns the number of bytes it
 * takes (0: need more), or -1 when it is malformed.
 */
long	ovl_ring_hello_len(const uint8_t *p, size_t n);
/*
 * Reader: open the ring named by a whole hello at p, unlink its file and
 * map it; fd is the pipe it came on. NULL with a message in err on error.
 */
struct ovl_ring *ovl_ring_attach(int fd, const uint8_t *p, size_t n,
	    char *err, size_t errlen);
/* Reader: the data area (mapped twice: [0, 2 * size) is valid). */
uint8_t	*ovl_ring_data(const struct ovl_ring *g);
/* The data area's size. */
size_t	ovl_ring_size(const struct ovl_ring *g);
/* Reader: the published head (acquire). */
uint64_t ovl_ring_head(const struct ovl_ring *g);
/* Reader: bytes before pos are consumed (waking a writer that waits). */
void	ovl_ring_release(struct ovl_ring *g, uint64_t pos);
/*
 * Reader: the END frame was read. A writer that finds its reader gone
 * after that ends normally, as a pipe's writer whose last write went in.
 */
void	ovl_ring_ended(struct ovl_ring *g);
/*
 * Reader about to wait on the pipe with everything before have read: set
 * the sleep flag and look again. Returns 1 when more was published
 * meanwhile (flag cleared: do not wait), 0 when the caller must wait.
 */
int	ovl_ring_sleep(struct ovl_ring *g, uint64_t have);
/* Unmap (and, on the writer's side, free). NULL is a no-op. */
void	ovl_ring_close(struct ovl_ring *g);

#endif
