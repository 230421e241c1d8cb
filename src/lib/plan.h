/*
 * plan: the plan file, ovl-plan(5): one readable text file that declares a
 * whole pipeline (sources, mixing weights and their schedule, sequence
 * length schedule, ranks, packing, balancing, checkpoints, outputs).
 * ovl-mix, ovl-construct, ovl-ckpt and (through ovl-mix --check,
 * --list-sources, --source-args) ovl-run all read it through this parser.
 *
 * The plan is parsed whole and validated before anything runs; every error
 * is "FILE:LINE: message". A loaded plan is immutable: every pointer in it
 * stays valid until ovl_plan_free and is owned by the plan.
 *
 * Defaults: a field the plan leaves out holds the "unset" value named in
 * its comment (0, NULL or -1); each stage applies its own default for it,
 * except where a default is stated here.
 */
#ifndef OVL_PLAN_H
#define OVL_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "docshuf.h"
#include "split.h"
#include "step.h"

/* Bounds on what a plan may declare. */
#define OVL_PLAN_MAX_SOURCES	4096
#define OVL_PLAN_MAX_NAME	64	/* bytes in a source name */
#define OVL_PLAN_MAX_POINTS	4096	/* schedule points per schedule */
#define OVL_PLAN_MAX_LINE	65536	/* bytes in one logical line */
/* Bounds the stages would refuse later: the plan refuses them first. */
#define OVL_PLAN_MAX_RANKS	4096	/* ovl-construct's ranks */
#define OVL_PLAN_MAX_WINDOW	64	/* ovl-construct's window */
#define OVL_PLAN_MAX_SEQ_LEN	(1u << 24)	/* OVL_PACK_CAP_MAX */
#define OVL_PLAN_MAX_MICRO_BATCHES 65536	/* ovl-construct's micro-batches */
#define OVL_PLAN_MAX_STEP_TOKENS (UINT64_MAX / 4)	/* a step's budget */
/* seq-len when neither the plan nor --seq-len sets it (a literal: help
   texts print it with OVL_PLAN_STR) */
#define OVL_PLAN_SEQ_LEN_DEFAULT 2048
#define OVL_PLAN_STR(x)		OVL_PLAN_STR_(x)
#define OVL_PLAN_STR_(x)	#x
#define OVL_PLAN_MAX_PARTITIONS	4096
#define OVL_PLAN_MAX_SHADOWS	64
#define OVL_PLAN_MAX_CP		1024	/* cp N */

/*
 * The names of the plan's choices, NULL-terminated, each list in the order
 * of the values the tools use (ovl-source's formats, ovl-ckpt's output
 * formats, enum ovl_exhaust): tools parse their options with these lists,
 * so a name is spelled once. Balance and pack names are balance.h's and
 * pack.h's.
 */
/* ovl-source's input formats (source format=, ovl-source --format). */
enum ovl_in_format {
	OVL_IN_JSONL,
	OVL_IN_TEXT,
	OVL_IN_TAR,
	OVL_IN_WDS,
	OVL_IN_PARQUET,
	OVL_IN_MEGATRON,
	OVL_IN_NPY,
	OVL_IN_NFORMATS
};
extern const char *const ovl_plan_formats[OVL_IN_NFORMATS + 1];
extern const char *const ovl_plan_docpers[];	/* line blank-line file */
extern const char *const ovl_plan_onerrors[];	/* fail skip */
extern const char *const ovl_plan_fieldtypes[];	/* text ids */
/* inline ref none: how placed images travel (ovl-source --images) */
extern const char *const ovl_plan_imagemodes[];
/* split split-continue truncate drop error: enum ovl_long_docs order */
extern const char *const ovl_plan_longdocs[];

/* What ovl-mix and ovl-construct do with a document longer than seq-len. */
enum ovl_long_docs {
	OVL_LONG_SPLIT,		/* pieces, positions restart (the default) */
	OVL_LONG_SPLIT_CONTINUE,/* pieces, positions go on from the offset */
	OVL_LONG_TRUNCATE,	/* the first seq-len - 1 tokens and its end */
	OVL_LONG_DROP,		/* left out, counted */
	OVL_LONG_ERROR		/* the run stops, naming it */
};
extern const char *const ovl_plan_exhausts[];	/* stop drop repeat */

/*
 * Context parallelism (cp N): what each sequence's documents are padded
 * to, so that N context-parallel ranks can split them (cp-pad; names
 * ovl_plan_cp_pads in this order).
 */
enum ovl_cp_pad {
	OVL_CP_PAD_DOCUMENT,	/* every document to a multiple of 2N (the
				   default): Megatron's per-document zigzag */
	OVL_CP_PAD_SEQUENCE,	/* the whole pack to a multiple of 2N */
	OVL_CP_PAD_NONE		/* nothing: the trainer pads */
};
extern const char *const ovl_plan_cp_pads[];
/*
 * How the context-parallel ranks share a step (cp-balance; names
 * ovl_plan_cp_balances in this order): static, every sequence over the N
 * CP ranks of its data-parallel rank; hybrid, each sequence over its own
 * power of two of them (its local_cp_size, cp.h), balanced over all DP x
 * CP ranks as Megatron-LM's hybrid context parallelism runs it.
 */
enum ovl_cp_balance {
	OVL_CP_STATIC,
	OVL_CP_HYBRID
};
extern const char *const ovl_plan_cp_balances[];
/*
 * ovl-ckpt's output formats (output format=, ovl-ckpt --format): names
 * indexed by enum ovl_out_format, which indexes ovl-ckpt's table of
 * writers too.
 */
enum ovl_out_format {
	OVL_OUT_MEGATRON,
	OVL_OUT_NPY,
	OVL_OUT_JSONL,
	OVL_OUT_FRAMES,
	OVL_OUT_WDS,
	OVL_OUT_NFORMATS
};
extern const char *const ovl_plan_out_formats[OVL_OUT_NFORMATS + 1];

/* What happens when a source runs out (on-exhaust=). */
enum ovl_exhaust {
	OVL_EXHAUST_STOP = 0,	/* end the whole mixed stream cleanly (default) */
	OVL_EXHAUST_DROP = 1,	/* go on without it; renormalize the others */
	OVL_EXHAUST_REPEAT = 2	/* the source runs with --repeat: never runs out */
};

/* Units of the weights and of their schedule (mix-by). */
enum ovl_mixby {
	OVL_MIXBY_TOKENS = 0,	/* default: shares and at= in tokens */
	OVL_MIXBY_DOCS = 1	/* shares and at= in documents */
};
extern const char *const ovl_plan_mixbys[];	/* enum order */
extern const char *const ovl_plan_yesno[];	/* no yes: index 0, 1 */

struct ovl_plan_source {
	char		 *name;		/* [A-Za-z0-9_][A-Za-z0-9_-]*, unique */
	uint32_t	  index;	/* plan order from 0: the source id in frames */
	unsigned	  line;		/* line of its "source" directive */
	char		**patterns;	/* path= values as written (after unquoting) */
	size_t		  npatterns;
	/*
	 * Resolved files: each pattern joined to the plan's directory when
	 * relative, expanded by glob(3) and sorted by strcmp, patterns in the
	 * order written. A path beginning with '-' gets "./" in front. Empty
	 * (npaths 0) when the plan was loaded with OVL_PLAN_NOGLOB.
	 */
	char		**paths;
	size_t		  npaths;
	/* ovl-source options; NULL or 0 when unset (ovl-source's defaults). */
	char		 *format;	/* format=jsonl|text|tar|wds */
	char		 *field;	/* field= (jsonl) */
	char		 *doc_per;	/* doc-per=line|file|blank-line */
	char		 *member_ext;	/* member-ext= (tar, WebDataset): ".c"
					   or a list ".c,.h" */
	char		 *tokenizer;	/* tokenizer=, else the plan's tokenizer */
	char		 *eod_token;	/* eod-token=, else the plan's eod-token */
	char		 *bos_token;	/* bos-token=, else the plan's bos-token */
	char		 *add_special;	/* add-special-tokens=yes|no, else the
					   plan's; unset: yes */
	char		 *special;	/* special=plain|error|allow|strip (tiktoken) */
	char		 *match;	/* match=REGEX: keep matching documents */
	char		 *drop;		/* drop=REGEX: drop matching documents */
	char		 *on_error;	/* on-error=fail|skip */
	char		 *long_docs;	/* long-docs=, else the plan's long-docs */
	char		 *image_cost;	/* image-cost=SPEC (image.h), or NULL */
	char		 *image_token;	/* image-token=TOK, or NULL */
	char		 *images;	/* images=inline|ref|none, or NULL */
	char		 *field_type;	/* field-type=text|ids */
	char		 *throttle;	/* throttle=RATE (ovl-source --throttle): a slow source, for tests and benchmarks */
	uint64_t	  min_tokens;	/* min-tokens=, 0 unset */
	uint64_t	  max_tokens;	/* max-tokens=, 0 unset */
	uint64_t	  chunk_size;	/* chunk-size=, 0 unset */
	uint64_t	  max_doc_bytes; /* max-doc-bytes=, 0 unset */
	uint32_t	  epochs;	/* epochs=, 0 unset (one epoch) */
	/*
	 * Chunk shuffling: shuffle is 1 when the source's chunks are shuffled
	 * per epoch with shuffle_seed: shuffle-seed=S, or, without it, a seed
	 * derived from the plan's "seed" and the source name (see
	 * ovl-plan(5)). shuffle-seed=none, or no seed at all: shuffle 0.
	 */
	int		  shuffle;
	uint64_t	  shuffle_seed;
	/*
	 * shuffle-window=N|chunk|none (docshuf.h): the source's documents
	 * permuted in windows of N records of a chunk, from shuffle_seed (0
	 * without one); NULL: the plan's shuffle-window.
	 */
	char		 *shuffle_window;
	uint32_t	  partitions;	/* partitions=, default 1 */
	uint32_t	  shadows;	/* shadows=, default 0 */
	char		 *hosts;	/* hosts=a,b: its loader hosts (ovl-run),
					   NULL: the plan's hosts loaders= */
	enum ovl_exhaust  on_exhaust;	/* on-exhaust=, default stop */
};

/*
 * One point of the weight schedule: from token (or document) count `at`
 * the weights are w. With ramp set, the weights move linearly from the
 * previous point's weights (at the previous point's at) to w (at this
 * point's at); without it, they jump to w at `at`. After the last point the
 * weights stay constant.
 */
struct ovl_plan_point {
	uint64_t	 at;		/* points[0].at == 0; strictly increasing */
	int		 ramp;		/* 1: linear ramp from the previous point */
	unsigned	 line;
	double		*raw;		/* nsources weights as written (0 when not named) */
	double		*w;		/* nsources weights normalized to sum 1 */
};

struct ovl_plan {
	char		*path;		/* the file as given to ovl_plan_load */
	char		*dir;		/* its directory ("." for a bare name) */

	int		 has_seed;
	uint64_t	 seed;		/* seed N */
	char		*tokenizer;	/* tokenizer SPEC: default of every source, NULL */
	char		*eod_token;	/* eod-token X: default of every source, NULL */
	char		*bos_token;	/* bos-token X: default of every source, NULL */
	char		*add_special;	/* add-special-tokens X: the same */
	char		*long_docs;	/* long-docs X: default of every source, NULL */
	char		*shuffle_window; /* shuffle-window W: the sources' default */

	struct ovl_plan_source *sources;
	size_t		 nsources;	/* >= 1 */

	enum ovl_mixby	 mix_by;	/* mix-by tokens|docs */
	/*
	 * Weight schedule, >= 1 point. A plan without "weights" lines has one
	 * point at 0 with equal weights.
	 */
	struct ovl_plan_point *points;
	size_t		 npoints;

	/*
	 * Sequence-length schedule in mixed tokens: seq_len[i] from
	 * seq_at[i] on; seq_at[0] == 0, strictly increasing. A plan without
	 * "seq-len" has one stage of 2048.
	 */
	uint64_t	*seq_at;
	uint32_t	*seq_len;
	size_t		 nseq;

	uint32_t	 ranks;		/* ranks N, default 1 */
	uint32_t	 micro_batches;	/* micro-batches N, default 1 */
	uint64_t	 step_tokens;	/* step-tokens N: a step's budget, 0 unset
					   (ranks x micro-batches x seq-len) */

	char		*balance;	/* balance kk|lpt|none, NULL unset */
	char		*pack;		/* pack bfd|first-fit|concat, NULL unset */
	uint32_t	 window;	/* window K, 0 unset */
	int		 uniform;	/* uniform yes|no: 1, 0; -1 unset */
	int		 has_image_tokens;
	uint64_t	 image_tokens;	/* image-tokens N */
	char		*image_encoder_cost;	/* image-encoder-cost A[:B], or NULL */

	/*
	 * Cost of a piece of L tokens: cost=A,B (a*L^2 + b*L) on the
	 * "balance" line or a "cost" line; or cost=model with layers=,
	 * hidden= and optionally heads=, ffn=, vocab= (0 when not given).
	 */
	int		 cost_set;	/* 0 unset, 1 coefficients, 2 model */
	double		 cost_a, cost_b;
	uint64_t	 model_layers, model_hidden, model_heads, model_ffn,
			 model_vocab;

	uint64_t	 ckpt_every;	/* checkpoint every=K (steps), 0 unset */
	char		*ckpt_dir;	/* checkpoint dir=D, resolved, NULL unset */
	uint64_t	 ckpt_base;	/* checkpoint base=M, 0 unset */
	int		 ckpt_verify_all; /* checkpoint verify-all=no|yes: 0, 1;
					   -1 unset (ovl-run) */

	uint64_t	 stop_steps;	/* stop steps=N, 0 unset */
	uint64_t	 stop_tokens;	/* stop tokens=N, 0 unset */

	char		*out_format;	/* output format=: ovl_plan_out_formats */
	char		*out_path;	/* output path=P, resolved */
	char		*out_manifest;	/* output manifest=F, resolved */
	char		*out_per_rank;	/* output per-rank=PATTERN, resolved */
	int		 out_overwrite;	/* output overwrite=no|yes: 0, 1; -1 unset */
	uint64_t	 out_wait_readers; /* output wait-readers=S (0: forever) */
	int		 has_out_wait_readers;
	uint64_t	 out_run_ahead;	/* output run-ahead=N steps (0: no bound) */
	int		 has_out_run_ahead;

	/* hosts loaders=a,b mixer=m trainers=t,u (ovl-run's placement) */
	char		*hosts_loaders;	/* comma-separated, NULL unset */
	char		*hosts_mixer;	/* the address loaders reach it at */
	char		*hosts_trainers; /* comma-separated, NULL unset */

	char		*transport;	/* transport fifo|ring (ovl-run), NULL unset */

	/*
	 * cp N: context-parallel ranks per data-parallel rank, 0 unset (no
	 * context parallelism: the stages behave as without the key).
	 * cp-pad: enum ovl_cp_pad, -1 unset (document when cp is set). The
	 * plan refuses a cp-pad without cp, a seq-len that is not a
	 * multiple of 2 x cp (cp-pad document or sequence; at least 2 x cp
	 * with none), and cp-pad document with uniform yes (a step cut
	 * exactly at its budget leaves no room for the padding).
	 */
	uint32_t	 cp;
	int		 cp_pad;
	/*
	 * cp-balance: enum ovl_cp_balance, -1 unset (static). The plan
	 * refuses it without cp, and hybrid with a cp that is not a power
	 * of two, with cp-pad none (a shared sequence must split into 2 x
	 * local_cp_size chunks) and with uniform yes (its sequences have
	 * the lengths their CP sizes hold).
	 */
	int		 cp_balance;
	/*
	 * split W,W[,W]: held-out splits by document (split.h), NULL unset.
	 * The run is the split OVL_SPLIT names (train when unset or empty):
	 * split_use indexes ovl_split_names. For any split but train,
	 * ckpt_dir, out_path, out_manifest and out_per_rank are the plan's
	 * with ".NAME" after them (ovl_split_path), so each split has its own
	 * outputs, checkpoints and steps. The sources keep their split's
	 * documents (ovl-source --split, --split-seed: the plan's seed or
	 * 0, --split-root: the plan's directory). OVL_SPLIT naming another
	 * split than train in a plan without one is an error.
	 */
	char		*split;
	struct ovl_split split_w;
	unsigned	 split_use;
};

/* Flags of ovl_plan_loadf and ovl_plan_parse. */
#define OVL_PLAN_NOGLOB	0x1	/* do not expand path= (no file access): npaths 0 */
#define OVL_PLAN_TOKENIZERS 0x2	/* load every source's tokenizer (--check) */

/*
 * Read and validate the plan file at path (paths resolved, globs expanded:
 * a pattern that matches nothing is an error). Returns the plan, or NULL
 * with "FILE:LINE: message" (or "FILE: message") in err[0..errlen).
 * Every error is a configuration error: callers exit 2.
 */
struct ovl_plan *ovl_plan_load(const char *path, char *err, size_t errlen);
/* The same with flags (OVL_PLAN_*). */
struct ovl_plan *ovl_plan_loadf(const char *path, int flags, char *err,
	    size_t errlen);
/*
 * Parse plan text from memory: name is used in messages and as the
 * plan's path, dir is where relative paths resolve (NULL: ".").
 */
struct ovl_plan *ovl_plan_parse(const char *text, size_t len, const char *name,
	    const char *dir, int flags, char *err, size_t errlen);
/* Free a plan and everything it owns; NULL is fine. */
void	ovl_plan_free(struct ovl_plan *p);

/* Index of the source called name (len bytes), or -1. */
int	ovl_plan_find(const struct ovl_plan *p, const char *name, size_t len);
/* "stop", "drop", "repeat". */
const char *ovl_plan_exhaust_name(enum ovl_exhaust e);

/*
 * The normalized weights (summing to 1) in force at count T, into
 * w[0..nsources).
 */
void	ovl_plan_weights_at(const struct ovl_plan *p, uint64_t T, double *w);
/*
 * Each source's target cumulative count at T: the integral of its
 * normalized weight from 0 to T, into target[0..nsources) (they sum to T).
 * share, when not NULL, gets the weights in force at T.
 */
void	ovl_plan_target(const struct ovl_plan *p, uint64_t T, double *target,
	    double *share);
/*
 * For sources still active (active[i] != 0): add to acc[i] the integral
 * from `from` to `to` of w_i(t) / (sum over active j of w_j(t)), the
 * weight renormalized over the active sources (what a source gets once
 * others were dropped). Where the active sources' weights are all 0 the
 * integrand is 0. acc[i] of inactive sources is left alone. With every
 * source active this adds target(to) - target(from).
 * A mixer that drops sources keeps acc = target at the last drop and
 * calls this from there.
 */
void	ovl_plan_target_active(const struct ovl_plan *p, uint64_t from,
	    uint64_t to, const unsigned char *active, double *acc);

/*
 * Fill cfg from the plan: exact = (uniform yes), nseq = ranks x micro-batches, budget =
 * step_tokens, the seq-len schedule (pointing into the plan: cfg is valid
 * while the plan lives).
 */
void	ovl_plan_stepcfg(const struct ovl_plan *p, struct ovl_stepcfg *cfg);

/*
 * The ovl-source arguments for source i, without the program name and
 * without --partition: options ("--id", "N", "--format", ...) then the
 * source name and its resolved paths (operands last; no "--", so options
 * such as --partition or --resume may be added before or after). Returns
 * a NULL-terminated vector the caller frees with ovl_plan_argv_free, and
 * its length in *argc.
 */
char	**ovl_plan_source_argv(const struct ovl_plan *p, size_t i, size_t *argc);
void	ovl_plan_argv_free(char **argv);

/*
 * Print the plan normalized: one directive per line in plan syntax with
 * every default made explicit, each source's resolved files as one path=
 * each, the normalized weights of every source at every schedule point.
 * Values that need it are double-quoted with \ before " \ $ and `, so each
 * line is both a plan line and a safe shell word list. Parsing the output
 * again (from the same directory) gives the same plan.
 * Returns 0, or -1 on a write error (errno set).
 */
int	ovl_plan_print(const struct ovl_plan *p, FILE *fp);

/*
 * Quote s for a plan (and a shell): unchanged when it has only
 * [A-Za-z0-9_./:,+@%^=-] and is not empty, else "..." with \ before
 * " \ $ and `. Returns a string the caller frees.
 */
char	*ovl_plan_quote(const char *s);

/* Source i's long-document policy (its own, the plan's, or split). */
enum ovl_long_docs ovl_plan_long_docs(const struct ovl_plan *p, size_t i);
/* Source i's shuffle window: its shuffle-window=, else the plan's. */
void	ovl_plan_shuffle_window(const struct ovl_plan *p, size_t i,
	    struct ovl_docshuf_win *w);

/*
 * The path of rank r from a per-rank pattern (output per-rank=, ovl-ckpt
 * --per-rank): "%d" the rank, "%%" a percent sign. Caller frees.
 */
char	*ovl_plan_rank_path(const char *pat, size_t r);

#endif
