/*
 * ovl-construct's rooms (private to the tool): main.c (options, the plan,
 * main), step.c (one step: balance, pack, emit SEQ frames) and stream.c
 * (the input: documents, barriers, checkpoints, resume).
 *
 * ovl-construct: the Data Constructor. Cut the mixed document stream into
 * training steps (src/lib/step.h, the same cut as ovl-mix), balance each
 * step's pieces over the data-parallel ranks (balance.h), pack every
 * rank's pieces into sequences (pack.h) and write one SEQ frame per
 * sequence. Barriers from ovl-mix are held until the cut reaches them;
 * then everything before is written, the mix STATE passed on, this
 * stage's STATE added and the barrier forwarded. See ovl-construct(1).
 */
#ifndef OVL_CONSTRUCT_H
#define OVL_CONSTRUCT_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "balance.h"
#include "buf.h"
#include "cli.h"
#include "err.h"
#include "frame.h"
#include "frameio.h"
#include "io.h"
#include "json.h"
#include "net.h"
#include "num.h"
#include "pack.h"
#include "plan.h"
#include "relink.h"
#include "step.h"

/* The plan holds the same bounds: ovl-mix --check refuses what we would. */
#define MAX_RANKS	OVL_PLAN_MAX_RANKS
#define MAX_WINDOW	OVL_PLAN_MAX_WINDOW
#define MAX_STAGES	OVL_PLAN_MAX_POINTS
_Static_assert(OVL_PLAN_MAX_SEQ_LEN == OVL_PACK_CAP_MAX,
    "the plan bounds seq-len as the packer does");
#define STATE_VERSION	1


struct construct_opts {
	const char	*plan_path;
	struct ovl_relink_opts relink;
	uint32_t	 ranks;
	uint32_t	 mb;
	uint64_t	 step_tokens;
	uint64_t	 at[MAX_STAGES];
	uint32_t	 sl[MAX_STAGES];
	size_t		 nst;
	struct ovl_cost	 cost;
	char		 cost_text[160];
	int		 balance;
	int		 pack;
	uint32_t	 window;
	int		 uniform;
	uint32_t	 cp;		/* context-parallel ranks, 0: none */
	int		 cp_pad;	/* enum ovl_cp_pad (with cp) */
	int		 cp_hybrid;	/* cp-balance hybrid */
	uint64_t	 image_tokens;
	double		 enc_a, enc_b;	/* image-encoder-cost A:B (0: none) */
	char		 enc_text[80];
	/* per source id: 1 when its pieces' positions go on (long-docs) */
	unsigned char	 cont_pos[OVL_PLAN_MAX_SOURCES];
	uint64_t	 stop_steps;	/* the plan's stop steps= (0: none) */
	int		 pad_set;
	uint32_t	 pad_id;
	unsigned	 token_bits;	/* --token-bits 32: 32-bit SEQ arrays */
	int		 json;
	const char	*stats_path;
	const char	*resume_path;
	const char	*input;		/* --input, or NULL: standard input */
	const char	*output;	/* --output, or NULL: standard output */
};

struct piece {
	uint64_t	 mix_pos;
	uint64_t	 record;
	uint64_t	 tok;		/* first token in the arena */
	uint32_t	 source, epoch, chunk;
	uint32_t	 offset;	/* within the document */
	uint32_t	 length;
	uint32_t	 pad;		/* fixed shapes: padding before it in
					   its step, keeping a run whole
					   (step.h) */
	uint32_t	 images;	/* image tokens counted with it */
	uint32_t	 img0, nimg;	/* its IMAGE frames: c->imgs[img0..+nimg) */
	double		 enc;		/* its images' encoder cost */
	uint32_t	 wstep;		/* step within the window as cut */
	uint32_t	 nstep;		/* step within the window after moving */
};

struct wstep {
	uint64_t	 step;
	uint64_t	 budget;
	uint32_t	 seq_len;
	uint64_t	 used;		/* tokens and padding (step.h): the
					   budget unless the stream's last */
	size_t		 first, end;	/* pieces as cut */
};

/* A checkpoint received from ovl-mix, held until the cut reaches it. */
struct held {
	int		 has_barrier;
	struct ovl_barrier b;
	struct ovl_buf	 states;	/* STATE frame payloads: u32 len, bytes */
	uint32_t	 nstates;
};

/* What one step's balancing produced (reused step after step). */
struct stepwork {
	uint32_t	*idx;		/* pieces of the step */
	uint32_t	*len;
	double		*cost;
	double		*scratch;
	uint32_t	*rank;
	uint32_t	*bin;
	uint32_t	*bin2;
	uint32_t	*order;
	uint32_t	*rlen;		/* one rank's pieces' lengths */
	uint32_t	*rbin;
	uint32_t	*ulen, *ufirst, *uperm;	/* cut plans: chains of pieces */
	size_t		 cap;
	uint32_t	*bin_rank;
	uint32_t	*bin_mb;
	size_t		 bcap;
	double		*rcost;
	uint32_t	*nmb;		/* micro-batches per rank */
	uint32_t	*nmb_none;
	uint32_t	*rfirst;	/* varlen: first global bin of a rank */
	uint64_t	*rtok;		/* tokens per rank */
	/* uniform: parts of pieces per rank, fragments per bin */
	uint32_t	*extra;
	struct ovl_part	*parts;
	size_t		 parts_cap;
	struct ovl_frag	*frags;
	uint32_t	*plen, *pidx;	/* one rank's parts */
	uint32_t	*cfirst;	/* one rank's chains: first part */
	uint8_t		*copen;		/* a chain lacks its end token */
	uint32_t	*cord, *clen;	/* chains in concat order, lengths */
	size_t		 frags_cap;
	/* uniform, cut plan: cost, rank and micro-batch of every bin */
	double		*bcost;
	uint32_t	*brank, *bmb;
	size_t		 bins_cap;
	double		*rcost2;	/* per rank: a baseline's costs */
	double		*cpcost;	/* per (rank, CP rank): cp.c */
	size_t		 cpcap;
	double		*cpmin;		/* per piece: its least CP rank share */
	size_t		 cpmin_cap;
	double		*cpseq;		/* per (rank, CP rank): the step's
					   sequences as written (cp_seq_costs) */
	int		 cpseq_bad;	/* a sequence did not split */
	double		*cost2;		/* cp: the pieces' costs without CP */
	size_t		 cost2_cap;
	uint32_t	*hgroup;	/* hybrid: each sequence's CP group
					   word (cp.h), in emission order */
	size_t		 hgroup_cap;
};

/*
 * An image of a document being placed (its IMAGE payload in c->iarena):
 * it goes out after the SEQ whose piece holds the first token of its run.
 * Images are never part of the STATE: after a restore, the document of
 * the boundary comes again from its source, with them.
 */
struct cimg {
	size_t		 off;		/* payload in c->iarena */
	uint32_t	 len;
	uint32_t	 doc_pos, ntokens;
	int		 ok;		/* its run lies inside its document */
};

/* One piece (or fragment) of a sequence, in emission order. */
struct emitkey {
	uint64_t	key;	/* rank, micro-batch */
	uint64_t	sub;	/* place in the step, offset within the piece */
	uint32_t	piece;
};

struct construct {
	const struct construct_opts *o;
	struct ovl_stepcfg cfg;
	struct ovl_stepcut cut;
	struct ovl_reader *rd;
	struct ovl_writer *wr;
	FILE		*stats;
	struct ovl_balancer *bal;
	struct ovl_packer *pk;
	struct stepwork	 sw;
	/* the window: closed steps and the pieces of the open one */
	struct piece	*pieces;
	size_t		 npieces, pcap;
	struct ovl_buf	 arena;		/* their tokens, tok_width bytes each */
	struct wstep	 ws[MAX_WINDOW];
	size_t		 nws;
	size_t		 open_first;	/* first piece of the open step */
	uint64_t	*wgroup;	/* document of each piece, for the window */
	size_t		 wgroup_cap;
	/* checkpoints */
	struct held	*held;
	size_t		 nheld, heldcap;
	uint64_t	 resume_n;	/* barriers up to this one are done */
	int		 skipping;
	int		 stopped;	/* the plan's stop steps= reached */
	uint64_t	 skip_pos;
	uint32_t	 skip_off;
	uint64_t	 next_pos;	/* arrival numbering of unmixed DOCs */
	int		 have_pos;
	uint64_t	 last_pos;
	uint32_t	 pad_id;
	uint32_t	 tok_width;	/* SEQ token ids: 2 or 4 bytes */
	uint64_t	 eod;		/* the stream's end-of-document id */
	uint32_t	*run_id;	/* per source: its image placeholder */
	size_t		 nrun;
	/* images: of the document being placed and the window's pieces */
	struct cimg	*imgs;
	size_t		 nimgs, imgcap;
	size_t		 img_doc0;	/* first image of the current document */
	size_t		 img_next;	/* its first image not in a piece yet */
	struct ovl_buf	 iarena;	/* IMAGE payloads */
	struct ovl_u32vec runs;		/* the current document's image runs:
					   first token, length (step.h) */
	struct ovl_buf	 pdoc;		/* a DOC whose IMAGE frames are coming */
	uint32_t	 pdoc_due;
	uint8_t		 pdoc_flags;	/* its frame's flags */
	uint64_t	 img_out, img_dropped;
	unsigned	 img_calm;	/* windows in a row with a small arena */
	/* scratch for JSON and drift */
	struct ovl_u32vec jtok, jpos, jcu;
	struct jpiece {			/* --json: a sequence's pieces */
		uint32_t source;
		uint64_t mix_pos;
		uint32_t offset, length;
	} *jpiece;
	size_t		 jpiece_cap;
	double		 drift[MAX_WINDOW];
	uint32_t	 moved[MAX_WINDOW];
	uint64_t	 seqs, steps, tokens, padding;
	uint64_t	 cp_padding;	/* the CP policy's padding so far */
	struct ovl_u32vec cpcu;		/* a sequence's cu_seqlens_padded */
	char		*seqlen_text;	/* ovl_stepcfg_text */
};

/* ---- step.c ---- */
/*
 * Does token off_q of piece q follow token end_p of piece p in their
 * document (one SEQ segment when they meet in a sequence)?
 */
int	pieces_meet(const struct piece *p, uint32_t end_p,
	    const struct piece *q, uint32_t off_q);
/* Does piece q continue piece p: pieces_meet(p, p->length, q, 0)? */
int	piece_follows(const struct piece *p, const struct piece *q);
void	json_text(FILE *fp, const char *key, const char *s, size_t n);
void	out_frame_copy(struct construct *c, uint8_t kind,
	    const void *payload, uint32_t len);
void	write_state_json(const struct ovl_state *st);
void	flush_window(struct construct *c);
void	close_step(struct construct *c, const struct wstep *prev,
	    uint32_t next_sl);

/* ---- uniform.c ---- */
enum { PLAN_BALANCED, PLAN_MID, PLAN_CUT, PLAN_NONE };
/* The emission keys of a step's pieces (do_step sorts them). */
extern struct emitkey *ekeys;
void	ekeys_grow(size_t n);
/* Free the emit order kept between steps. */
void	ekeys_free(void);
/*
 * Does piece p hold image runs (its source places images) or padding
 * that keeps one whole (step.h)? Fixed shapes then fill its step as cut.
 */
int	piece_has_runs(const struct construct *c, const struct piece *p);
/* The largest of v[0..n). */
double	max_of(const double *v, uint32_t n);
/*
 * Fixed shapes: the plan of a step's pieces w->idx[0..n) whose costliest
 * rank costs least; its emission keys in ekeys (returns their number).
 */
size_t	uniform_plan(struct construct *c, size_t n, uint32_t S, uint32_t per,
	    double *none_max, size_t *none_nf, int *plan);

/* ---- cp.c ---- */
/*
 * A piece of len tokens padded as cp-pad document says (a multiple of 2 x
 * cp); len itself without cp or with another cp-pad.
 */
uint32_t cp_padded(const struct construct_opts *o, uint32_t len);
/*
 * The cost on each CP rank r (out[0..cp)) of one document of len tokens
 * split by the per-document zigzag after cp-pad document's padding:
 * a * (the causal attention pairs of its real tokens, counted as sum of
 * 2p+1 over positions p in r's two chunks: L^2 in all) + b * (the tokens
 * r holds, padding included).
 */
void	cp_rank_costs(const struct construct_opts *o, uint32_t len,
	    double *out);
/*
 * The same over k CP ranks (out[0..k)), the document padded to a
 * multiple of 2 x k whatever cp-pad says (a hybrid sequence of k > 1
 * holds one document, whose padding is then the sequence's).
 */
void	cp_rank_costs_k(const struct construct_opts *o, uint32_t k,
	    uint32_t len, double *out);
/* A piece's balancing cost under cp: its costliest CP rank's. */
double	cp_piece_cost(const struct construct *c, const struct piece *p);
/*
 * The costliest (DP rank, CP rank) of pieces w->idx[0..n) on DP ranks
 * rank[0..n); *lb (when not NULL) gets a lower bound on it: the mean over
 * all ranks x cp ranks, or the data-parallel lower bound
 * (ovl_balance_lower_bound) over each piece's least CP rank share.
 */
double	cp_max_cost(struct construct *c, size_t n, const uint32_t *rank,
	    double *lb);
/*
 * The cost on each CP rank (out[0..cp)) of a sequence of ntok tokens
 * whose segments are cu[0..nseg], split as Megatron-LM splits it under
 * the policy: per document (cp_rank_costs of each segment) under
 * document, else the whole sequence (padded as the policy says) in 2 x
 * cp chunks, rank r holding chunks r and 2cp-1-r. -1 when the sequence
 * does not split in 2 x cp chunks (cp-pad none), else 0.
 */
int	cp_seq_costs(const struct construct_opts *o, const uint32_t *cu,
	    uint32_t nseg, uint32_t ntok, double *out);
/* cp and cp-pad against seq-len and fixed shapes: exit 2 (plan.h). */
void	cp_check(const struct construct_opts *o);
/* ---- hybrid.c ---- */
/*
 * cp-balance hybrid: the step's pieces w->idx[0..n) each on its own CP
 * group (ovl_cp_hybrid_size of its length over seq_len / cp tokens a CP
 * rank; ovl_balance_hybrid over ranks x cp), a group of one CP rank
 * packing its pieces into sequences of at most seq_len / cp tokens, a
 * larger group taking one piece a sequence. A data-parallel rank's
 * sequences go larger groups first, then by their first CP rank, then in
 * arrival order: every CP rank takes its groups' sequences in that one
 * order. Emission keys into ekeys (returns their number), the sequences
 * per rank into nmb, their group words into w->hgroup, each rank's mean
 * cost over its CP ranks into w->rcost, tokens into w->rtok; the
 * costliest (DP, CP) rank into *maxc and a lower bound on it
 * (ovl_balance_hybrid_bound) into *lb.
 */
size_t	hybrid_plan(struct construct *c, size_t n, uint32_t seq_len,
	    uint32_t *nmb, double *maxc, double *lb);
void	hybrid_free(void);

/* ---- images.c ---- */
/* A DOC frame: placed now, or held until its IMAGE frames are in. */
void	doc_frame(struct construct *c, const struct ovl_frame *f);
/* An IMAGE frame of the DOC held; the last one places the DOC. */
void	on_image(struct construct *c, const struct ovl_frame *f);
/* The images of the current document from token off on: start placing. */
void	images_begin(struct construct *c, const struct ovl_doc *d, uint32_t off);
/* The current document's images whose run starts in [off, off + len). */
void	images_attach(struct construct *c, struct piece *p);
/* IMAGE frames a piece sends (its images whose run starts in it). */
uint32_t piece_images(const struct construct *c, const struct piece *p);
/* A piece's balancing cost: its tokens' (images' counted), its encoder's. */
double	piece_cost(const struct construct *c, const struct piece *p);
/* After the SEQ of pieces idx[0..np): their IMAGE frames. */
void	images_emit(struct construct *c, uint64_t step, uint32_t rank,
	    uint32_t mb, const uint32_t *idx, size_t np);
/* The window was written: keep only the current document's images left. */
void	images_flushed(struct construct *c);
void	images_free(struct construct *c);

/* ---- stream.c ---- */
void	held_pop(struct construct *c);
void	on_state(struct construct *c, const struct ovl_frame *f);
void	on_barrier(struct construct *c, const struct ovl_frame *f);
void	on_doc(struct construct *c, const struct ovl_frame *f);
void	on_meta(struct construct *c, const struct ovl_frame *f);
void	on_end(struct construct *c);
void	load_resume(struct construct *c, const char *path);

#endif
