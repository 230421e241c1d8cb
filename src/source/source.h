/*
 * ovl-source's rooms (private to the tool): main.c (options, setup, main),
 * docs.c (records become documents: filters, tokenizing, frames, counted
 * skips), run.c (chunks in canonical order, the run) and the input
 * formats, a reader each (in-lines.c, in-tar.c, in-parquet.c, tokfile.c)
 * in the table of formats.c.
 *
 * ovl-source: read one source (jsonl, text, tar, WebDataset, parquet; zstd,
 * gzip or plain), tokenize every document and write DOC frames in canonical order,
 * each with its cursor; CHUNK_END after every chunk this partition owns.
 * See ovl-source(1) and HACKING.md ("Sources, chunks, cursors").
 */
#ifndef OVL_SOURCE_H
#define OVL_SOURCE_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <zlib.h>
#include <zstd.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "bpe.h"
#include "buf.h"
#include "chunk.h"
#include "docshuf.h"
#include "cli.h"
#include "pcre.h"
#include "err.h"
#include "frame.h"
#include "frameio.h"
#include "image.h"
#include "input.h"
#include "io.h"
#include "json.h"
#include "jsonl.h"
#include "ring.h"
#include "lines.h"
#include "net.h"
#include "num.h"
#include "pack.h"
#include "parquet.h"
#include "plan.h"
#include "remote.h"
#include "split.h"
#include "tok.h"
#include "wds.h"

/* The input formats are the plan's (enum ovl_in_format); FMT_AUTO: by
 * the first path's name. PER_* follow ovl_plan_docpers. */
enum fmt { FMT_AUTO = -1, FMT_JSONL = OVL_IN_JSONL, FMT_TEXT = OVL_IN_TEXT,
	FMT_TAR = OVL_IN_TAR, FMT_WDS = OVL_IN_WDS,
	FMT_PARQUET = OVL_IN_PARQUET, FMT_MEGATRON = OVL_IN_MEGATRON,
	FMT_NPY = OVL_IN_NPY };
enum per { PER_LINE, PER_BLANK, PER_FILE, PER_EOD, PER_OFFSETS };
enum { PARSER_FAST, PARSER_JANSSON };

#define MAX_EXT		16
#define MAX_DOC_LIMIT	(128ull << 20)

struct src_opts {
	const char	*name;
	char		**paths;
	int		 npaths;
	int		 format;
	const char	*field;
	int		 field_set;	/* --field given (a wds .json member's) */
	int		 parser;
	int		 ids;		/* --field-type ids: pre-tokenized */
	int		 per;
	int		 per_set;	/* --doc-per given */
	const char	*ext[MAX_EXT];
	int		 next;
	const char	*tokenizer;
	const char	*eod_token;
	const char	*bos_token;
	int		 add_special;	/* --add-special-tokens yes (1) or no */
	const char	*special;
	uint64_t	 min_tokens;
	uint64_t	 max_tokens;	/* 0: no limit */
	const char	*match;
	const char	*drop;
	uint64_t	 chunk_size;
	uint32_t	 part_p, part_n;
	int		 shuffle;
	uint64_t	 seed;
	struct ovl_docshuf_win window;	/* --shuffle-window */
	uint32_t	 epochs;
	int		 repeat;
	int		 resume;
	struct ovl_cursor cursor;
	int		 skip;
	uint64_t	 max_doc;
	uint32_t	 id;
	int		 text;
	int		 json;
	double		 throttle;	/* per second; 0: none */
	int		 throttle_docs;
	const char	*output;	/* NULL: standard output */
	const char	*standby;	/* control FIFO of a warm standby */
	struct ovl_remote_conf remote;	/* retries, endpoint (lib/remote.h) */
	const char	*image_token;	/* --image-token (with --image-cost) */
	unsigned	 token_bits;	/* --token-bits: 16, 32 or 0 (by vocab) */
	struct ovl_image_cost image_cost;	/* kind 0: images not placed */
	int		 images;	/* IMG_*: how placed images travel */
	/* --split: keep the documents of split split_keep only (split.h) */
	struct ovl_split split;		/* n 0: no split */
	unsigned	 split_keep;
	uint64_t	 split_seed;
	const char	*split_root;	/* names relative to it */
};

/* --images: placed images travel inline, as references, or not at all */
enum { IMG_INLINE, IMG_REF, IMG_NONE };

/* Why a record was skipped (--on-error=skip). */
enum { R_JSON, R_MISSING, R_NOTSTRING, R_UTF8, R_TOOLONG, R_INPUT, R_OPEN,
	R_DUP, R_TOK, R_IMAGE, R_NREASONS };
extern const char *const reason_names[R_NREASONS];



/* What the current chunk is. */
struct cx {
	uint32_t	 epoch, k, ci;
	const struct ovl_chunk *c;
	const char	*path;
	const char	*name;		/* path for messages (lib/remote.h) */
	char		 shown[512];
	uint64_t	 docs, tokens, recs;
	struct timespec	 t0;
};

/* A record about to become a document. */
struct rec {
	uint64_t	 start_off;
	uint64_t	 next_off;
	uint64_t	 index;
	uint64_t	 line;		/* for messages; 0: unknown */
	uint32_t	 nimages;
	const struct ovl_wds_image *images;	/* their sizes, or NULL */
	const uint8_t	*image_data;	/* their bytes (--images inline) */
	int		 utf8_ok;	/* already validated */
	const char	*member;	/* tar member name, for messages */
	int		 row;		/* start_off is a parquet row (1) or a
					   token file's document (2) */
};

/* A frame of a shuffle window, held in its arena (shuffle.c). */
struct shuf_frame {
	size_t		 off;
	uint32_t	 len;
	uint8_t		 kind, flags;
};

/* The shuffle window being read (shuffle.c). */
struct shuf {
	struct ovl_docshuf_win win;
	int		 group;		/* the window is a group of chunks */
	uint32_t	 epoch, k;	/* where it is: epoch, (first) chunk */
	uint64_t	 count;		/* records counted in the chunk */
	uint64_t	 w;		/* the window being read */
	uint64_t	 start_off;	/* its first record's offset */
	int		 started;
	uint64_t	 skip;		/* its documents a resume skips */
	struct ovl_buf	 arena;		/* its frames' payloads */
	struct shuf_frame *fr;
	size_t		 nfr, cap;
	struct ovl_u32vec docs;		/* each document's first frame */
	uint32_t	*perm;
	size_t		 pcap;
	size_t		 hi;		/* the most a recent window held */
	unsigned	 calm;
};

struct src {
	const struct src_opts *o;
	struct ovl_chunks cs;
	uint32_t	*perm;
	struct ovl_tok	*tok;
	int		 tok_bytes;
	uint32_t	 eod;
	uint32_t	 width;		/* bytes per id in DOC frames: 2 or 4 */
	uint32_t	 bos;		/* OVL_TOK_NONE: none */
	int		 pre;		/* the record's ids are in toks already */
	pcre2_code	*re_match, *re_drop;
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	pcre2_jit_stack	*jst;
	struct ovl_jsonl_path path;
	struct ovl_writer *w;
	struct ovl_input_ctx inx;	/* decoders, buffers, read-ahead thread */
	struct ovl_lines lr;
	struct ovl_buf	 scratch;
	struct ovl_buf	 doc;		/* a tar member's text */
	struct ovl_u32vec toks;
	struct ovl_u32vec itoks;	/* a document with its image runs */
	uint32_t	 image_id;	/* the placeholder token */
	uint32_t	 img_at[OVL_WDS_MAX_IMAGES];	/* each run's first token */
	uint64_t	 images, image_tokens;	/* placed */
	unsigned	 calm;		/* small documents in a row (docs.c) */
	struct cx	 cx;
	uint64_t	 docs, tokens, bytes, recs;
	uint64_t	 filtered_len, filtered_re, filtered_split;
	uint64_t	 skipped[R_NREASONS];
	uint64_t	 no_text_groups;
	struct timespec	 t0;
	uint64_t	 thr_bytes, thr_docs;
	struct shuf	 sh;
	uint64_t	*gbytes;	/* a group's chunks' bytes (run.c) */
};


/* ---- docs.c ---- */
/* Report a bad record: exit 1, or count it under --on-error=skip. */
void	bad(struct src *s, int reason, const struct rec *r, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));
/* Filter, tokenize and write one record as a document. */
void	record(struct src *s, const struct rec *r, const char *text,
	    size_t len);
/* A JSON line: extract the field, then record it. */
/*
 * A WebDataset sample whose text member is JSON (--field given): the
 * field's string is its text; an array of strings and nulls interleaves
 * text and the sample's images, each null the next image in member order.
 */
void	wds_json_record(struct src *s, struct rec *r, const char *json,
	    size_t len);
/* Every image of r costs at most OVL_PACK_CAP_MAX tokens; else reported, 0. */
int	images_fit(struct src *s, const struct rec *r);
/* line is changed: its field unescaped in place (jsonl.h) */
void	json_record(struct src *s, struct rec *r, char *line,
	    size_t len);

/* A --resume offset that the chunk does not have: exit 2, naming it. */
void	resume_error(struct src *s, uint64_t off, const char *why);

/*
 * An input format: a reader (in-NAME.c; tokfile.c for the token files)
 * and a row of src_formats, at its enum ovl_in_format (its name is the
 * plan's, ovl_plan_formats).
 */
struct src_format {
	const char *const *exts;	/* name endings that suggest it, after a
					   compression's; NULL-terminated */
	unsigned	 flags;		/* SRC_FMT_* */
	enum ovl_chunk_cut cut;		/* where a large file is cut */
	enum ovl_chunk_cut (*cut_by)(const struct src_opts *o);	/* or this */
	/*
	 * The current chunk (s->cx) from offset off0 (record rec0) on: its
	 * records to record(); returns the chunk's bytes read.
	 */
	uint64_t	(*run)(struct src *s, uint64_t off0, uint64_t rec0);
};
#define SRC_FMT_IDS		0x1u	/* --field-type ids */
#define SRC_FMT_IMAGES		0x2u	/* --image-cost: a sample's images */
#define SRC_FMT_TOKEN_DOCS	0x4u	/* --doc-per eod (default), offsets or file */

/* Each reader defines its src_fmt_NAME, formats.c the table. */
extern const struct src_format *const src_formats[OVL_IN_NFORMATS];
/* The format a file name suggests, or FMT_AUTO. */
int	guess_format(const char *path);

/* ---- shuffle.c ---- */
/* Is --shuffle-window on? */
int	shuf_on(const struct src *s);
/*
 * A chunk begins at the cursor's record number *rec0: becomes the record
 * number the reader counts from (the window's first record's).
 */
void	shuf_chunk_begin(struct src *s, uint64_t *rec0);
/* A group of chunks from canonical chunk first: one window, skip sent. */
void	shuf_group_begin(struct src *s, uint32_t epoch, uint32_t first,
	    uint64_t skip);
/* Around each record that reaches the filters (record()). */
void	shuf_record_begin(struct src *s, const struct rec *r);
void	shuf_record_end(struct src *s);
/* A frame of the window: as ovl_writer_begin and ovl_writer_finish. */
uint8_t	*shuf_begin(struct src *s, uint32_t len);
void	shuf_finish(struct src *s, uint8_t kind, uint8_t flags);
/* Write the window held, in its order; returns the documents written. */
uint64_t shuf_flush(struct src *s);
/* The chunk's last window goes out. */
void	shuf_chunk_end(struct src *s);
void	shuf_free(struct src *s);

/* ---- run.c ---- */
/* Every chunk this partition owns, epoch after epoch, then END. */
void	run(struct src *s);
/*
 * Is the current chunk's file, opened as fd (local) or r (remote), still
 * the one listed (lib/chunk.h)? 0, or -1 after bad() named the change.
 */
int	chunk_same(struct src *s, int fd, const struct ovl_remote *r);

#endif
