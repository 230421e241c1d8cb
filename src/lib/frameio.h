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

struct ovl_buf;

struct ovl_reader;
struct ovl_writer;

/* Return values of ovl_reader_next besides the negative OVL_F_E* codes. */
enum {
	OVL_RD_EOF = 0,		/* the END frame was returned before: stream done */
	OVL_RD_FRAME = 1,	/* *f holds a frame (END included, once) */
	OVL_RD_AGAIN = 2,	/* non-blocking fd: no whole frame yet */
	OVL_RD_DEFER = 3	/* the next frame is over the defer size */
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
 * From now on, when the next frame is longer than size bytes (0: off),
 * ovl_reader_next returns OVL_RD_DEFER once its header is read, without
 * reading the rest or growing the buffer: the frame stays in the pipe
 * until a call with the defer off. ovl-mix reads ahead from the inputs it
 * does not need yet only up to small frames, so that an outlier is held
 * by the one input being consumed (bounded memory).
 */
void	ovl_reader_defer(struct ovl_reader *r, size_t size);
/*
 * Call fn(arg) before a read that would wait for more input (nothing is
 * readable yet): a stage flushes its output there, so what it made so far
 * never waits for its next input.
 */
void	ovl_reader_on_idle(struct ovl_reader *r, void (*fn)(void *), void *arg);
/*
 * The stream grammar a stage relies on, declared with ovl_reader_expect and
 * checked by the reader on frames whose CRC holds (a violation is
 * OVL_F_EGRAMMAR, or OVL_F_EPAYLOAD for a payload that does not decode,
 * with the byte offset of the frame; exit 3 through ovl_reader_die):
 *
 * - exactly one META, and it comes first (an END before it too is an error);
 * - the META holds every key of meta_keys with an unsigned value; vocab is
 *   at least 1 and eod, when asked for too, below it;
 * - only the kinds in the kinds mask (1u << OVL_*; META and END always);
 *   what names the stream for the message ("a source stream");
 * - SEQ (OVL_EXPECT_SEQ): rank below the ranks of the run (the META's
 *   "ranks" when it has one, else ranks; 0 and none: unchecked), steps
 *   never going back;
 * - DOC (OVL_EXPECT_DOC): a payload that decodes (its chunk below the
 *   source's chunk count), the cursor after it the next record and not
 *   before its start;
 * - BARRIER: checkpoint numbers increasing (OVL_EXPECT_SEQ or _DOC);
 * - IMAGE (OVL_EXPECT_SEQ or _DOC): exactly the IMAGE frames a DOC
 *   (OVL_DOC_IMAGES: nimages) or a SEQ (its pieces' nimages) announces
 *   follow it, nothing else between, each a payload that decodes; after
 *   a SEQ, of its step, rank and micro-batch.
 */
#define OVL_EXPECT_SEQ	1u
#define OVL_EXPECT_DOC	2u
struct ovl_expect {
	const char	*meta_keys;	/* space-separated, e.g. "vocab eod" */
	uint32_t	 kinds;		/* mask of the data kinds allowed */
	const char	*what;		/* "a source stream", for messages */
	unsigned	 checks;	/* OVL_EXPECT_* */
	uint32_t	 ranks;		/* ranks when the META has none */
};
/* Declare the grammar (copied); before the first ovl_reader_next. */
void	ovl_reader_expect(struct ovl_reader *r, const struct ovl_expect *e);
/*
 * The next frame. f->payload stays valid until the next call. A frame of a
 * kind this reader does not know is an error (OVL_F_EGRAMMAR) in a stream
 * of this minor version or older; in a newer one it is an addition old
 * readers may skip (ovl-frame(5)): skipped and counted
 * (ovl_reader_skipped). Errors return an OVL_F_E* code (OVL_F_ETRUNC for
 * end of file without END) and fill ovl_reader_error; they are final.
 */
int	ovl_reader_next(struct ovl_reader *r, struct ovl_frame *f);
/*
 * The frame returned last is no longer used: a buffer grown for it goes
 * back to its normal size now, not at the next ovl_reader_next (which
 * may come much later for one of many inputs).
 */
void	ovl_reader_done(struct ovl_reader *r);
/* Frames of unknown kind skipped in a newer stream. */
uint64_t ovl_reader_skipped(const struct ovl_reader *r);
/*
 * After the META: the unsigned value of one of its keys (1), or 0 when it
 * has no such key or the value is not a number.
 */
int	ovl_reader_meta_u64(const struct ovl_reader *r, const char *key,
	    uint64_t *v);
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
 * Relinking (relink.h). ovl_reader_relink: fd is a named FIFO of a
 * supervised run (exit 2 otherwise); when its writer dies (end of file
 * without END, a frame cut short), the reader moves to the link's next
 * generation, waits there for the successor and drops what the
 * successor's stream repeats, so ovl_reader_next goes on as if nothing
 * happened. ovl_reader_resume_at: this reader resumes after checkpoint n
 * (its stage was restored from it): a stream that starts earlier ("resumed
 * M" with M < n) is read from right after BARRIER n; one without the key
 * is taken as it comes (a successor's, without it, starts at the start).
 * Either way a stream that starts later than the reader's place is an
 * error (OVL_F_EGRAMMAR: something would be missing), and so is one whose
 * last repeated frame differs from what the reader had there.
 * ovl_reader_dropped: the repeated frames dropped so far.
 */
void	ovl_reader_relink(struct ovl_reader *r);
/*
 * The META frame f, whole (header and CRC), with no line of key: appended
 * to out. A stage that passes its input's META on drops "resumed" so.
 */
void	ovl_meta_frame_without(const struct ovl_frame *f, const char *key,
	    struct ovl_buf *out);
void	ovl_reader_resume_at(struct ovl_reader *r, uint64_t n);
uint64_t ovl_reader_dropped(const struct ovl_reader *r);

/*
 * A writer to fd, named name in messages. The stream header goes out with
 * the first frame. Write errors exit 1 with a message; EPIPE dies quietly
 * by SIGPIPE like any pipeline member (on a socket, EPIPE and ECONNRESET
 * die so too, after a message naming the peer).
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
/*
 * A frame of len payload bytes (a multiple of 4) that gen makes in pieces:
 * gen(arg, dst, off, n) writes payload bytes [off, off + n) to dst. A frame
 * over 128 KiB is never held whole (bounded memory): gen is
 * called twice over it, for the CRC and then to write each piece, so it
 * must make the same bytes both times.
 */
void	ovl_writer_frame_gen(struct ovl_writer *w, uint8_t kind, uint8_t flags,
	    uint32_t len, void (*gen)(void *, uint8_t *, uint32_t, uint32_t),
	    void *arg);
/* Pass through a frame read by an ovl_reader (header and CRC kept). */
void	ovl_writer_copy(struct ovl_writer *w, const struct ovl_frame *f);
/* Write out everything buffered. */
void	ovl_writer_flush(struct ovl_writer *w);
/* Write the END frame (with the frame count) and flush. */
void	ovl_writer_end(struct ovl_writer *w);
/*
 * Keep what is written since the last committed checkpoint (read from the
 * file committed, relink.h) in the file spill, at most max bytes (past
 * that: exit 1 with a message), and when the reader goes away, wait for
 * its successor on the link's next generation and replay it from there
 * (a META saying "resumed N", then the frames after BARRIER N). fd must be
 * a named FIFO (exit 2 otherwise); before the first frame. The stream then
 * never goes by a ring, and SIGPIPE is ignored.
 */
void	ovl_writer_backup(struct ovl_writer *w, const char *spill,
	    const char *committed, uint64_t max);
/* Bytes handed to the fd so far plus bytes buffered. */
uint64_t ovl_writer_offset(const struct ovl_writer *w);
/* Frames written so far, END excluded. */
uint64_t ovl_writer_count(const struct ovl_writer *w);

#endif
