/*
 * frameio's insides, shared by its files (frameio.c: the reader and the
 * writer; frameio-relink.c: relinking and the writer's backup). Private to
 * src/lib/frameio*.c.
 */
#ifndef OVL_FRAMEIO_INT_H
#define OVL_FRAMEIO_INT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "frameio.h"
#include "relink.h"

#define RD_CHUNK	(1u << 20)	/* read size and starting buffer */
#define WR_FLUSH	(256u << 10)	/* write when this much is buffered */

struct ovl_reader {
	int		 fd;
	char		*name;
	uint32_t	 max;
	uint8_t		*buf;
	size_t		 cap;
	size_t		 chunk;		/* read size (RD_CHUNK unless set) */
	size_t		 defer;		/* longer frames: OVL_RD_DEFER (0: off) */
	size_t		 start;		/* first unconsumed byte */
	size_t		 end;		/* one past the last valid byte */
	uint64_t	 base;		/* stream offset of buf[0] */
	uint64_t	 frame_off;	/* stream offset of the last frame */
	uint64_t	 count;
	int		 state;		/* 0 header, 1 frames, 2 done, <0 error */
	int		 eof;
	unsigned	 minor;
	void		(*idle)(void *);	/* before a read that would wait */
	void		*idle_arg;
	char		 errmsg[512];

	/* the grammar the stage declared (ovl_reader_expect) */
	int		 expect;
	struct ovl_expect ex;
	char		*meta_keys;
	int		 seen_meta;
	struct ovl_buf	 meta;		/* the META's text */
	uint32_t	 ranks;
	uint64_t	 next_step;	/* SEQ steps from here on */
	uint64_t	 next_barrier;	/* BARRIER numbers from here on */
	int		 have_barrier;
	uint64_t	 img_due;	/* IMAGE frames the DOC or SEQ before owes */
	int		 img_seq;	/* they follow a SEQ (of img_step, ...) */
	uint64_t	 img_step;
	uint32_t	 img_rank, img_mb;
	uint64_t	 skipped;

	/* a ring (ring.h): buf is in its data area, or big for an outlier */
	struct ovl_ring	*ring;
	uint8_t		*big;		/* a frame larger than the ring */
	int		 inbig;

	/*
	 * Relinking (relink.h): where this reader is in the logical stream
	 * (after BARRIER pos_b and pos_k frames more), and what a successor's
	 * stream repeats of it (skip_bar: up to BARRIER pos_b; skip_k frames
	 * after it).
	 */
	int		 relink;
	struct ovl_link	 link;
	int		 positioned;	/* pos_b was given or learned */
	int		 successor;	/* the stream now is a successor's */
	uint64_t	 pos_b, pos_k;
	uint32_t	 last_crc;
	int		 have_crc;
	int		 skip_bar;
	uint64_t	 skip_k;
	uint64_t	 scount;	/* frames of the stream now, for END */
	uint64_t	 dropped;	/* repeated frames dropped, in all */
};

/*
 * A writer's backup (ovl_writer_backup): the stream's byte s is at offset s
 * of the spill file, what lies before keep is given back (a hole).
 */
struct bk_barrier {
	uint64_t	 n;		/* the checkpoint */
	uint64_t	 end;		/* stream offset right after its frame */
	uint64_t	 count;		/* frames up to it, itself included */
};
struct backup {
	int		 fd;
	char		*path;
	char		*committed;
	uint64_t	 max;
	uint64_t	 keep;		/* replay from here: right after BARRIER m */
	uint64_t	 keep_count;	/* frames before keep */
	uint64_t	 m;
	uint64_t	 last_n;	/* the last BARRIER written, 0 before one */
	uint64_t	 end_at;	/* where the END frame starts, once one is */
	int		 ended;
	struct bk_barrier *bar;		/* written since keep, in order */
	size_t		 nbar, capbar;
	struct ovl_buf	 meta;		/* the META frame, whole */
	struct ovl_link	 link;
};

struct ovl_writer {
	int		 fd;
	char		*name;
	uint8_t		*buf;
	size_t		 cap;
	size_t		 len;
	size_t		 open;		/* offset of the frame begun, or SIZE_MAX */
	uint32_t	 open_len;
	uint64_t	 written;
	uint64_t	 count;
	unsigned	 calm;		/* small frames in a row (CALM) */
	int		 started;
	int		 ring_asked;	/* ovl_ring_wanted was asked */
	struct ovl_ring	*ring;		/* the ring transport, or NULL */
	/*
	 * In place (ring.h): buf is a window of the ring at its write
	 * position, frames are built there and committed by write_out; the
	 * heap buffer waits in heap for a frame larger than the ring.
	 */
	int		 inring;
	uint8_t		*heap;
	size_t		 heapcap;
	int		 ingen;		/* inside ovl_writer_frame_gen's pieces */
	uint64_t	 count_base;	/* frames before this stream (relinked) */
	struct backup	*bk;		/* ovl_writer_backup, or NULL */
};

/* A grammar error: "'name': <what> at byte offset N"; returns rc. */
int	ovl_frameio__bad(struct ovl_reader *r, int rc, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/*
 * Reader, relinking: move to the writer's successor (0, or -1 keeping
 * the error); a META's "resumed" against this reader's place (OVL_F_OK or
 * an error); whether a frame repeats what this reader had (1 drop, 0
 * take, <0 error); a frame taken (the reader's place moves on).
 */
int	ovl_frameio__reader_relink(struct ovl_reader *r);
int	ovl_frameio__resync(struct ovl_reader *r, const struct ovl_frame *f);
int	ovl_frameio__repeated(struct ovl_reader *r, const struct ovl_frame *f);
void	ovl_frameio__advance(struct ovl_reader *r, const struct ovl_frame *f);
/*
 * Writer with a backup: write n bytes at p (kept first; a reader that went
 * away gets them from its successor's replay); a whole frame at p of size
 * bytes, ending at stream offset end, was written.
 */
void	ovl_frameio__bk_put(struct ovl_writer *w, const void *p, size_t n);
void	ovl_frameio__bk_frame(struct ovl_writer *w, const uint8_t *p,
	    uint8_t kind, size_t size, uint64_t end);
/*
 * After the END went out: return only once the stream is durable, the
 * reader having closed its end and the sink's committed checkpoint past
 * the last BARRIER (its END record); a reader that closed before that is
 * gone, and its successor gets the replay. So a writer never ends while
 * a restarted reader could still need its backup.
 */
void	ovl_frameio__bk_end(struct ovl_writer *w);

#endif
