/*
 * ovl-ckpt's rooms (private to the tool): the committing sink (sink.c over
 * outputs.c, committer.c and the output formats, a file each: fmt-*.c in
 * the table of formats.c; readers.c takes the readers of rank streams
 * first) and the subcommands that read a checkpoint
 * directory (show.c: show and diff; verify.c: verify and compact;
 * restore.c: restore). main.c dispatches; common.c holds what several
 * rooms use. See ovl-ckpt(1) for the behaviour, HACKING.md for the log.
 */
#ifndef OVL_CKPT_H
#define OVL_CKPT_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "buf.h"
#include "ckptlog.h"
#include "cli.h"
#include "err.h"
#include "frame.h"
#include "frameio.h"
#include "hash64.h"
#include "io.h"
#include "json.h"
#include "net.h"
#include "num.h"
#include "plan.h"
#include "relink.h"

#define OUT_FLUSH	(256u << 10)	/* write an output when this much is buffered */
#define NPY_HDR		128u		/* fixed npy header: rewritten in place */
#define SEQS_COLS	7u		/* columns of PREFIX.seqs.npy */
#define MAX_RANKS	65536u
#define MAX_SKIPS	1024u
#define EXIT_STOPPED	(128 + SIGTERM)
/*
 * CKPTDIR/restores.log: a line "N all" or "N last" per restore of
 * checkpoint N (every kept byte checked, or the last segment); a fresh
 * run starts it anew. ovl-ckpt summary says from it whether the whole
 * output was proven.
 */
#define RESTORES_LOG	"restores.log"

/* An output format is an enum ovl_out_format (plan.h), or FMT_NONE. */
#define FMT_NONE	(-1)

struct ckpt_run;
struct outrec;

/*
 * An output format: what it writes of the stream, a file (fmt-NAME.c)
 * and a row of ckpt_formats, at its enum ovl_out_format (its name is the
 * plan's, ovl_plan_out_formats). The sink calls the hooks of the active
 * formats in stream order; a NULL hook is nothing to do. state is what
 * open returned.
 */
struct ckpt_format {
	unsigned	 flags;		/* CKPT_FMT_* */
	/* the META's vocab at most this: tokens stored as 16 bits */
	uint64_t	 tok16_vocab;
	/*
	 * After the META: make and open its outputs under the prefix
	 * (out_new, out_open), fresh or continued from the resumed
	 * checkpoint; returns its state.
	 */
	void	*(*open)(struct ckpt_run *R);
	/* A SEQ written (f its frame). */
	void	 (*seq)(struct ckpt_run *R, void *state, const struct ovl_seq *s,
		    const struct ovl_frame *f);
	/* An IMAGE of the SEQ before, written. */
	void	 (*image)(struct ckpt_run *R, void *state,
		    const struct ovl_image *im, const struct ovl_frame *f);
	/* A rank's step is complete (f its STEP frame). */
	void	 (*step_end)(struct ckpt_run *R, void *state,
		    const struct ovl_step *st, const struct ovl_frame *f);
	/*
	 * The outputs are flushed and the sink stops (END, a stop, the
	 * readers' end): what is derived from them, written whole.
	 */
	void	 (*end)(struct ckpt_run *R, void *state);
	/* Extra fields of a sequence's manifest line, e.g. ,"shard":... */
	void	 (*manifest)(const struct ckpt_run *R, void *state,
		    const struct ovl_seq *s, struct ovl_buf *b);
	/*
	 * ovl-ckpt restore: its files are cut back to checkpoint n (state
	 * st); fix what is not just bytes appended (headers, indexes).
	 */
	void	 (*restore)(const struct ovl_ckstate *st, uint64_t n);
	void	 (*free)(struct ckpt_run *R, void *state);
};
/* One frame stream (PREFIX): an endpoint may take it; without -o,
 * standard output (the sink's own frames). */
#define CKPT_FMT_STREAM	0x1u

/* Each fmt-NAME.c defines its ckpt_fmt_NAME, formats.c the table. */
/* The free hook of a format whose state is one allocation (common.c). */
void	 fmt_free_state(struct ckpt_run *R, void *state);
extern const struct ckpt_format *const ckpt_formats[OVL_OUT_NFORMATS];
/* The name of a format: "none" for FMT_NONE. */
const char *fmt_label(int f);
/* The format of a name (the plan's), or -1. */
int	 parse_format(const char *s);

/* The sink's options (the subcommands keep their own). */
struct ckpt_opts {
	const char	*dir;
	const char	*plan;
	int		 format;
	const char	*prefix;
	const char	*per_rank;
	const char	*manifest;
	uint64_t	 base_every;
	int		 resume_set;
	uint64_t	 resume;
	int		 resume_auto;	/* --resume auto: decided under the lock */
	int		 overwrite;	/* --overwrite-output: take another run's files */
	int		 json;
	int		 nskip;
	uint64_t	 skip[2];
	int		 rank_set;
	uint32_t	 rank;
	uint32_t	 plan_ranks;
	const char	*trainer_hosts;	/* comma-separated: rank streams' peers */
	uint64_t	 wait_readers;	/* seconds a FIFO output waits for its reader */
	uint64_t	 run_ahead;	/* steps a rank stream may hold unread (0: any) */
	const char	*input;		/* --input, or NULL: standard input */
	const char	*readers_file;	/* --step-from-readers: the restore lines */
	struct ovl_relink_opts relink;	/* --relink */
};

/* One output file or stream. */
enum { OT_FRAMES, OT_RAW, OT_NPY };
struct out {
	char		*name;		/* key in the "out" section */
	char		*path;		/* absolute (or an endpoint); NULL for standard output */
	char		*peer;		/* an endpoint's peer, for messages; or NULL */
	int		 fd;
	int		 type;		/* OT_* */
	int		 regular;	/* a regular file: truncated, appended on resume */
	int		 fresh;		/* nothing of it was written before this run */
	uint32_t	 hdr;		/* leading bytes outside the hash (npy header) */
	const char	*descr;		/* npy dtype, e.g. "<u2" */
	uint32_t	 itemsize, cols;
	uint64_t	 len;		/* bytes written and buffered */
	uint64_t	 nframes;
	uint64_t	 hash;		/* chain value at the last commit */
	uint64_t	 seg;		/* hashed bytes since the last commit */
	struct ovl_hash64 h;
	struct ovl_buf	 buf;
	/*
	 * A rank stream on a FIFO: its reader may stop right after a STEP
	 * frame (a trainer that ends). ends[]/endstep[]: len after each
	 * recent STEP (a ring of STEP_ENDS); done: the reader stopped after
	 * step done_step, nothing more is written.
	 */
	int		 stops;
	uint64_t	*ends, *endstep;
	size_t		 nends;
	int		 done;
	uint64_t	 done_step;
	/*
	 * A rank stream bounded by --run-ahead: at most ahead steps ends
	 * beyond taken (what its reader took, as far as known; ends[] is
	 * kept for it too). 0: unbounded.
	 */
	uint64_t	 ahead;
	uint64_t	 taken;
};
#define STEP_ENDS	4096
#define RUN_AHEAD_MAX	STEP_ENDS	/* the largest --run-ahead */

struct skip { uint64_t a, b; };

/*
 * Where a source's chunks come from (its META: source.NAME.chunk.K and
 * source.NAME.shuffle), so the manifest names each piece's file.
 */
struct srcfiles {
	char		**path;		/* per chunk, NULL when not told */
	uint64_t	*off, *len;	/* byte range (len UINT64_MAX: whole file) */
	uint32_t	 nchunks;
	int		 shuffle;
	uint64_t	 seed;
	uint32_t	*perm;		/* the canonical order of epoch perm_epoch */
	int64_t		 perm_epoch;
};

struct ckpt_run {
	struct ckpt_opts *o;
	char		*dir;
	char		*logpath;
	char		*idxpath;	/* CKPT_INDEX */
	char		*committed;	/* DIR/committed (relink.h) */
	int		 logfd;
	uint64_t	 logend;
	uint64_t	 since_base;	/* records since the last base */
	int		 have_prev;
	struct ovl_ckstate prev, cur;
	uint64_t	 last_n;
	int		 have_last;

	struct out	**outs;
	size_t		 nouts;
	struct out	*std, *man;
	/* the active output formats, in the order their hooks run */
	struct {
		const struct ckpt_format *f;
		void	*state;
	}		 act[OVL_OUT_NFORMATS];
	size_t		 nact;
	struct out	**rank;
	size_t		 nrank;
	int		*pre_fd;	/* per rank: a reader taken by ask_readers, or -1 */
	char		**pre_peer;
	size_t		 npre;

	/* stream */
	struct ovl_buf	 meta;		/* the META frame, header included */
	int		 have_meta;
	uint64_t	 vocab;
	int		 have_vocab;
	uint32_t	 meta_ranks;
	char		**srcname;
	struct srcfiles	*srcfiles;	/* per source id, nsrc of them */
	size_t		 nsrc;
	int		 tok16;		/* tokens stored as 16 bits */
	uint32_t	 cp;		/* META cp (0: none) and cp-pad (cp.h) */
	int		 cp_pad;
	int		 cp_hybrid;	/* META cp-balance hybrid */
	struct ovl_buf	 mixst, cst;
	int		 have_mix, have_con;
	uint64_t	 mix_n, con_n;
	struct ovl_barrier bar;

	uint64_t	 nseqs, nskipped;
	uint64_t	 cur_step;	/* step of the last SEQ, + 1; 0 before any */
	int		 seq_dropped;	/* the last SEQ was not written (--rank,
					   skipped steps): nor are its images */
	uint64_t	 nimages;	/* IMAGE frames written */
	struct ovl_reader *rd;		/* standard input, for offsets in messages */
	struct skip	 skips[MAX_SKIPS];
	size_t		 nskips;
	struct ovl_buf	 scratch;
	FILE		*jsonfp;
};

/* What the "out" section says of output name at one checkpoint. */
struct outrec {
	uint64_t	 len, hash, frames;
	const char	*path;
	int		 file;		/* a regular file */
	int		 type;
	uint32_t	 hdr;
};

/* ---- inputs.c ---- */
/*
 * The META's input identities (source.NAME.file.I lines): a fresh run
 * keeps them in DIR/inputs; a resumed run's must be the same for every
 * file named in both, else exit 1 naming the file.
 */
void	 inputs_bind(struct ckpt_run *R, const char *text, uint32_t len);

/* ---- common.c ---- */
/* A SIGTERM asked the sink to stop (ckpt_on_term, its handler, was called). */
int	 ckpt_stopping(void);
void	 ckpt_on_term(int sig);
/*
 * Around a write to an output's reader: when a SIGTERM comes (or came)
 * and the write is still blocked a second later, the sink says so, naming
 * the output, and exits EXIT_STOPPED (what it committed is durable).
 */
void	 ckpt_write_begin(const char *name, const char *path);
void	 ckpt_write_end(void);
/* The same stop, said and done now (a wait that polls). */
void	 ckpt_stop_blocked(const char *name, const char *path);
char	*xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* An absolute form of path whose directory exists (made when mkdirs). */
char	*abspath(const char *path, int mkdirs);
void	 shell_word(FILE *fp, const char *s);
/* A per-rank pattern has exactly one %d (and %% for a percent sign). */
int	 pattern_ok(const char *p);
char	*pattern_path(const char *pat, size_t r);
/*
 * A rank stream's endpoint: path itself, or for a tcp-listen: endpoint with
 * trainer hosts, path ",from=HOST" with rank r's host (r * T / nranks of
 * the T comma-separated hosts). Allocated.
 */
char	*rank_endpoint(const char *path, const char *hosts, size_t r,
	    size_t nranks);
/* Lock dir until exit, waiting up to wait_s seconds for another ovl-ckpt. */
int	 lock_dir_wait(const char *dir, uint64_t wait_s);
int	 lock_dir(const char *dir);
/* DIR/ckpt.idx: where the log's base records are (ckptlog.h). */
#define CKPT_INDEX	"ckpt.idx"
/* Read DIR/ckpt.log; exits 1 (unreadable) or 3 (corrupt) on failure. */
void	 read_log(const char *dir, struct ovl_ckptlog *log);
/*
 * The same from the second last base record the index names on
 * (ovl_ckptlog_read_tail): the last checkpoint and the one before it at
 * least, in a time that does not grow with the log. A corrupt record is
 * reported as by read_log (the whole log is read to name it).
 */
void	 read_log_tail(const char *dir, struct ovl_ckptlog *log);
/*
 * read_log or read_log_tail (tail) without exiting: 0, -1 (err: cannot
 * read) or -3 (err: corrupt; log holds the records before it).
 */
int	 read_log_at(const char *dir, struct ovl_ckptlog *log, int tail,
	    char *err, size_t errlen);
/*
 * A log read by read_log_tail made whole (read again): returns the index
 * of record i in it.
 */
size_t	 read_log_widen(const char *dir, struct ovl_ckptlog *log, size_t i);
/* The state at record i; exits 3 when it cannot be rebuilt. */
void	 log_state(const char *dir, const struct ovl_ckptlog *log, size_t i,
	    struct ovl_ckstate *st);
/* The record --at N names (or the last one); exits 1 when there is none. */
size_t	 pick_record(const char *dir, const struct ovl_ckptlog *log,
	    int at_set, uint64_t at);
/* Cut the log after record i (and any torn tail). */
void	 cut_log(const char *dir, const struct ovl_ckptlog *log, size_t i);
int	 skipped(const struct ckpt_run *R, uint64_t step);
void	 skips_format(const struct skip *s, size_t n, struct ovl_buf *b);
int	 skips_parse(const char *v, struct skip *s, size_t *n);
/*
 * getopt_long over ovl-ckpt's one table of options, taking only those of
 * this (sub)command: its short options (getopt syntax, without the shared
 * ones, which it adds and handles through ovl_cli_common) and the values
 * of its long-only options (longonly, e.g. "0A"). An unknown option, one
 * of another (sub)command (sub names this one; NULL for the sink), and a
 * missing argument are usage errors: a message, the usage lines, exit 2.
 * Returns the next option's value, or -1 after the last.
 */
int	 ckpt_getopt(const struct ovl_cli *cli, const char *sub, int argc,
	    char **argv, const char *shortopts, const char *longonly);
/* The checkpoint number of --at (show, verify, restore); exits 2 if bad. */
uint64_t ckpt_opt_at(const struct ovl_cli *cli, const char *arg);

/* ---- outputs.c ---- */
void	 out_flush(struct out *o);
void	 out_put(struct out *o, const void *p, size_t n);
const char *type_name(const struct out *o);
void	 out_commit(struct out *o);
/* A new output of the run (path NULL: standard output), not yet open. */
struct out *out_new(struct ckpt_run *R, const char *name, const char *path,
	    int type);
/*
 * Open an output: fresh (created empty, its header written), or, when the
 * resumed checkpoint has it, cut back to the committed length and continued.
 */
void	 out_open(struct ckpt_run *R, struct out *o);
/* out_new, then out_open: the output, open. */
struct out *out_add(struct ckpt_run *R, const char *name, const char *path,
	    int type);
/*
 * The tokens of s into o, 16 or 32 bits (bits16), each at most limit;
 * a larger id exits 1.
 */
void	 out_tokens(struct ckpt_run *R, struct out *o, const struct ovl_seq *s,
	    int bits16, uint32_t limit);
/* A frame as it came (header included) into o. */
void	 out_frame(struct out *o, const struct ovl_frame *f);
struct out *rank_out(struct ckpt_run *R, uint32_t r);
void	 meta_parse(struct ckpt_run *R, const char *text, uint32_t len);
/* The file (and byte range) of canonical chunk chunk of epoch epoch of
 * source src, or NULL when the stream did not say. */
const char *src_file(struct ckpt_run *R, uint32_t src, uint32_t epoch,
	    uint32_t chunk, uint64_t *off, uint64_t *len);
void	 srcfiles_free(struct ckpt_run *R);
/* A STEP frame of step went out on a rank stream o (flushed). */
void	 out_step_end(struct out *o, uint64_t step);
/*
 * Before more of a step goes to rank stream o: while o->ahead step ends
 * or more lie beyond what its reader has taken (FIONREAD on a FIFO,
 * SIOCOUTQ on a socket: on TCP the peer's receive buffer counts as
 * taken), wait, polling every 10 ms. The wait ends early, leaving the
 * bound to the writes that follow, when the reader leaves (the next
 * write says so), when a SIGTERM asks the sink to stop (it then runs to
 * the next checkpoint), or when the kernel cannot tell.
 */
void	 out_run_ahead(struct out *o);
/*
 * The step after which the readers of rank streams stopped (the least,
 * when several did), or -1 when none stopped.
 */
int64_t	 readers_stopped(const struct ckpt_run *R);

/*
 * A FIFO output: open it when its reader has, waiting up to --wait-readers
 * seconds (exit 1 after that, naming the output); a SIGTERM meanwhile
 * stops the sink at its last checkpoint.
 */
int	 fifo_open(struct ckpt_run *R, struct out *o);
/*
 * Before the end of the run is committed: wait until the reader of a FIFO
 * output (or the peer of an endpoint) has taken every byte. A reader that
 * went away, or that read nothing for --wait-readers seconds, is an error
 * naming the output (the END record is not written: the run can be
 * resumed).
 */
void	 fifo_drain(struct ckpt_run *R, struct out *o);

/* ---- readers.c ---- */
/*
 * --step-from-readers: take every rank's reader (the per-rank endpoints,
 * ranks from the plan) and its announcement of the step it needs next;
 * restore the last checkpoint at or before that step (restore_for_step),
 * write restore's --print0 records to the file, and set the options the
 * sink resumes with (--resume N, or from the beginning skipping the steps
 * before it). The readers' streams are kept for rank_out. Ranks that need
 * different steps exit 2; a reader that says nothing within 10 s exits 1.
 */
void	 ask_readers(struct ckpt_run *R);
/*
 * Ranks 0..n-1 served on sockets (--per-rank an endpoint) and not taken by
 * ask_readers: every rank's listener opens and takes its reader at once
 * (ovl_net_wait_all), into R->pre_fd. Exits EXIT_STOPPED on a SIGTERM.
 */
void	 rank_streams(struct ckpt_run *R, uint32_t n);

/* ---- npy.c: the npy (version 1.0) header, NPY_HDR bytes ---- */
/* The header of rows x cols items of dtype descr (cols 1: a vector). */
void	 npy_header(uint8_t hdr[NPY_HDR], const char *descr, uint64_t rows,
	    uint32_t cols);
/* Rewrite the header of an npy output in place, for its length. */
void	 npy_rewrite(struct out *o);

/* ---- fmt-jsonl.c: a sequence as JSON ---- */
/* {"seq":index,"step":..,"rank":..,"mb":.. (unclosed) into b. */
void	 json_seq_head(struct ovl_buf *b, const struct ovl_seq *s,
	    uint64_t index);
/* The JSON line of s (tokens, positions, cu_seqlens) into o. */
void	 seq_json(struct ckpt_run *R, struct out *o, const struct ovl_seq *s);

/* ---- sink.c ---- */
/* The sink: read frames on standard input until END; the exit status. */
int	 run(struct ckpt_opts *o);

/* ---- verify.c ---- */
int	 out_lookup(const struct ovl_ckstate *st, const char *name,
	    struct outrec *r);
int	 chain_check(const char *dir, const struct ovl_ckptlog *log,
	    size_t upto, const char *name, const char *path, uint64_t *whole,
	    uint64_t *len_out, char *msg, size_t msglen);
/*
 * XXH64 seeded with seed (as the log chains segments) of bytes [from, to)
 * of fd into *h, fed into *also too when not NULL. 0, or -1 on a short read.
 */
int	 hash_range(int fd, uint64_t from, uint64_t to, uint64_t seed,
	    uint64_t *h, struct ovl_hash64 *also);

/* ---- the subcommands ---- */
int	 cmd_show(int argc, char **argv);
int	 cmd_diff(int argc, char **argv);
int	 cmd_verify(int argc, char **argv);
int	 cmd_summary(int argc, char **argv);
int	 cmd_compact(int argc, char **argv);
int	 cmd_restore(int argc, char **argv);
/*
 * The handshake for the sink, in dir (which the caller has locked):
 * restore the last checkpoint at or before step, the steps from its own
 * to step - 1 skipped, and write restore --print0's records to fp.
 * Returns the checkpoint restored; -1 when none is at or before step: the
 * log is then emptied (nothing written to fp) and the run starts from the
 * beginning. Exits as restore does on errors.
 */
int64_t	 restore_for_step(const char *dir, uint64_t step, FILE *fp);

#endif
