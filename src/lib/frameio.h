/*
 * frameio: buffered frame reader and writer over a file descriptor.
 *
 * The reader checks the stream header, bounds every frame by its limit,
 * checks every CRC and the END frame's count, and reports errors with the
 * stream's name and the byte offset of the frame at fault. The writer
 * builds frames in place in its buffer (zero copy) and writes in large
 * blocks; a pipe or FIFO on either side has its buffer raised to 1 MiB.
 */
#ifndef OVL_FRAMEIO_H
#define OVL_FRAMEIO_H

#include <stdint.h>

#include "frame.h"

struct ovl_reader;
struct ovl_writer;

/* Return values of ovl_reader_next besides the negative OVL_F_E* codes. */
enum {
	OVL_RD_EOF = 0,		/* the END frame was returned before: stream done */
	OVL_RD_FRAME = 1,	/* *f holds a frame (END included, once) */
	OVL_RD_AGAIN = 2	/* non-blocking fd: no whole frame yet */
};

/*
 * A reader of fd, named name in messages (copied). max bounds payloads (0:
 * OVL_FRAME_MAX_DEFAULT, or OVL_FRAME_MAX from the environment). The fd is
 * not closed by ovl_reader_free.
 */
struct ovl_reader *ovl_reader_new(int fd, const char *name, uint32_t max);
void	ovl_reader_free(struct ovl_reader *r);
/*
 * Read at most chunk bytes at a time (4 KiB .. 1 MiB, default 1 MiB; more
 * only when one frame needs it) and, when nothing is buffered yet, start
 * over with a buffer of that size. For a process that reads many streams
 * at once (ovl-mix): small reads keep what was read in the cache until it
 * is used. Frames and errors are the same whatever the chunk.
 */
void	ovl_reader_set_chunk(struct ovl_reader *r, size_t chunk);
/*
 * The next frame. f->payload stays valid until the next call. Frames of
 * unknown kind are returned too: callers skip kinds they do not know.
 * Errors return an OVL_F_E* code (OVL_F_ETRUNC for end of file without END)
 * and fill ovl_reader_error; they are final.
 */
int	ovl_reader_next(struct ovl_reader *r, struct ovl_frame *f);
/* "'name': bad CRC at byte offset 1234" for the last error. */
const char *ovl_reader_error(const struct ovl_reader *r);
/* Print the last error and exit 3. */
void	ovl_reader_die(const struct ovl_reader *r) __attribute__((noreturn));
/* Byte offset in the stream of the frame returned last (or of the error). */
uint64_t ovl_reader_offset(const struct ovl_reader *r);
/* Frames returned so far, END excluded. */
uint64_t ovl_reader_count(const struct ovl_reader *r);
int	ovl_reader_fd(const struct ovl_reader *r);
const char *ovl_reader_name(const struct ovl_reader *r);
/* Minor version of the stream (after the first frame). */
unsigned ovl_reader_minor(const struct ovl_reader *r);

/*
 * A writer to fd, named name in messages. The stream header goes out with
 * the first frame. Write errors exit 1 with a message; EPIPE dies quietly
 * by SIGPIPE like any pipeline member.
 */
struct ovl_writer *ovl_writer_new(int fd, const char *name);
void	ovl_writer_free(struct ovl_writer *w);
/*
 * Begin a frame of len payload bytes (a multiple of 4, at most
 * OVL_FRAME_LIMIT): returns where to write the payload, 4-byte aligned,
 * valid until ovl_writer_finish.
 */
uint8_t	*ovl_writer_begin(struct ovl_writer *w, uint32_t len);
/* Seal the frame begun last with its kind and flags. */
void	ovl_writer_finish(struct ovl_writer *w, uint8_t kind, uint8_t flags);
/* Begin, copy len bytes of payload, finish. */
void	ovl_writer_frame(struct ovl_writer *w, uint8_t kind, uint8_t flags,
	    const void *payload, uint32_t len);
/* Pass through a frame read by an ovl_reader (header and CRC kept). */
void	ovl_writer_copy(struct ovl_writer *w, const struct ovl_frame *f);
/* Write out everything buffered. */
void	ovl_writer_flush(struct ovl_writer *w);
/* Write the END frame (with the frame count) and flush. */
void	ovl_writer_end(struct ovl_writer *w);
/* Bytes handed to the fd so far plus bytes buffered. */
uint64_t ovl_writer_offset(const struct ovl_writer *w);
/* Frames written so far, END excluded. */
uint64_t ovl_writer_count(const struct ovl_writer *w);

#endif
