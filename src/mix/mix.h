/*
 * ovl-mix's rooms (private to the tool): main.c (options, the plan
 * commands, setup and the main loop), read.c (inputs, targets and
 * selection, each source in canonical order) and out.c (the mixed stream,
 * statistics, resuming).
 *
 * ovl-mix: the planner. Fans in the DOC streams of every source partition
 * named by a plan and writes one mixed stream that follows the plan's
 * weights exactly (deterministic deficit selection), with BARRIER and
 * STATE frames every K steps so the whole pipeline can resume to the byte.
 * See ovl-mix(1), ovl-plan(5) and HACKING.md.
 */
#ifndef OVL_MIX_H
#define OVL_MIX_H

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic.h"
#include "buf.h"
#include "cli.h"
#include "crc32c.h"
#include "err.h"
#include "frame.h"
#include "frameio.h"
#include "io.h"
#include "json.h"
#include "net.h"
#include "num.h"
#include "plan.h"
#include "relink.h"
#include "step.h"

struct mix_opts {
	const char	 *plan;
	struct ovl_relink_opts relink;	/* --backup (relink.h) */
	int		  check;
	int		  list;
	const char	 *args_name;
	char		**get_keys;	/* --get, in the order given */
	size_t		  nget;
	int		  by;		/* -1: the plan's mix-by */
	int		  has_every;
	uint64_t	  every;
	const char	 *resume;
	int		  reopen;
	const char	 *stats;
	int		  stats_kv;	/* --stats-format kv */
	int		  json;
	const char	 *output;	/* --output, or NULL: standard output */
	char		**inputs;
	int		  ninputs;
};

/* One input stream: a partition of a source. */
struct input {
	char		*label;		/* "web=p0.fifo" */
	char		*path;		/* NULL: standard input */
	int		 fd;
	int		 is_fifo;
	int		 connected;	/* a FIFO's writer has shown up (poll) */
	struct ovl_net	*net;		/* a tcp: endpoint, or NULL */
	struct ovl_reader *r;
	struct ovl_frame pend;		/* the next frame, read ahead */
	int		 has_pend;
	int		 deferred;	/* a large next frame left in the pipe */
	int		 need_meta;	/* the next frame must be META */
	int		 meta_seen;	/* a META of this input was taken */
	int		 ended;		/* END was read */
	/*
	 * A document with IMAGE frames is taken whole before it is cut: the
	 * DOC (hold) and its IMAGE frames (himg, frames one after the other)
	 * copied, the runs (hruns: first token, length) for the cutter.
	 */
	struct ovl_buf	 hold, himg;
	struct ovl_u32vec hruns;
	uint32_t	 hn;		/* images held (0: none) */
	uint32_t	 src, part;
	/* statistics */
	uint64_t	 tokens, docs, dups, reopens;
	double		 blocked;	/* seconds spent waiting for it */
};

enum { ST_ACTIVE = 0, ST_DROPPED = 1, ST_EXHAUSTED = 2 };

#define MIX_READ_CHUNK	(64u << 10)	/* read size per input */
/* inputs not needed yet are read ahead only up to frames of this size */
#define MIX_AHEAD_MAX	(4 * MIX_READ_CHUNK)

struct source {
	const struct ovl_plan_source *ps;
	struct input	**in;
	uint32_t	  nparts;
	struct ovl_docshuf_win win;	/* its shuffle window: who reads a chunk */
	struct ovl_cursor cur;		/* next record to consume */
	uint32_t	  nchunks;	/* 0 until known */
	uint64_t	  tokens, docs;	/* consumed */
	uint64_t	  empty_run;	/* chunks ended without a document */
	int		  state;
	double		  base;		/* target at the last drop */
	enum ovl_long_docs long_policy;	/* documents longer than seq-len */
	uint64_t	  long_n[3];	/* split, truncated, dropped */
	uint64_t	  long_cut;	/* tokens truncated or dropped */
	uint64_t	  long_img[2];	/* images split (a run longer than
					   seq-len), left out (truncated off
					   or dropped with their document) */
	struct ovl_buf	  meta;		/* META lines of partition 0 passed on */
	uint32_t	  run_id;	/* its image placeholder, or OVL_STEP_NORUN */
};

struct barrier_at {
	uint64_t	n, step, tokens;
	uint32_t	offset;
};

struct mixer {
	const struct mix_opts *o;
	struct ovl_plan	*plan;
	struct source	*src;
	size_t		 nsrc;
	struct input	*in;
	size_t		 nin;
	struct ovl_writer *w;
	int		 by;		/* OVL_MIXBY_* */
	uint64_t	 every;
	uint64_t	 pos;		/* mixed position of the next document */
	uint64_t	 tokens;	/* mixed tokens so far */
	uint64_t	 last_n;	/* last checkpoint emitted */
	struct ovl_stepcfg cfg;
	struct ovl_stepcut cut;
	int		 any_drop;
	uint64_t	 drop_at;	/* count at the last drop */
	double		*target, *w8;
	unsigned char	*active;
	struct barrier_at *bars;
	size_t		 capbars;
	/* the merged META */
	char		*tokenizer;
	uint64_t	 vocab, eod;
	int		 have_ref;
	const char	*ref_label;	/* the input the reference META came from */
	/* poll */
	struct pollfd	*pfd;
	struct input	**pin;
	/* statistics */
	struct timespec	 t0, last_stats;
	int		 stdin_flags;
	int		 stdin_used;
	int		 starting;	/* reading the META of every input */
	const char	*end_reason;
	struct ovl_u32vec trunc;	/* a truncated document's tokens (--json) */
};


/* ---- read.c ---- */
struct ovl_plan *load_plan(const char *path, int flags);
void	doc_rewrite(struct ovl_frame *f, uint32_t source, uint64_t pos,
	    uint64_t tokens);
/*
 * Start reading in: fd is its network stream already taken
 * (ovl_net_wait_all), or -1 to open (or wait for) it now.
 */
void	open_input(struct input *in, int fd);
void	wait_for(struct mixer *m, struct input *need);
uint64_t count_of(const struct mixer *m);
uint64_t consumed(const struct mixer *m, const struct source *s);
void	targets(struct mixer *m);
int	select_source(struct mixer *m);
void	drop_source(struct mixer *m, size_t k);
struct input *take_doc(struct mixer *m, struct source *s, struct ovl_doc *d);

/* ---- out.c ---- */
void	write_meta(struct mixer *m);
int	emit_doc(struct mixer *m, size_t k, struct input *in,
	    const struct ovl_doc *d, struct ovl_buf *st);
void	write_stats(struct mixer *m, int final);
void	report(struct mixer *m);
void	resume_from(struct mixer *m, const char *path);

#endif
