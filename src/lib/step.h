/*
 * step: where training steps begin in the mixed token stream.
 *
 * A step takes pieces from the mixed stream in order. A document is cut
 * into pieces of at most seq_len tokens, from its start or from where the
 * previous step left it; a piece that does not fit the rest of the step's
 * budget closes the step and opens the next, which takes that piece first.
 * The step's sequence length and budget follow the schedule at the mixed
 * token count where the step begins.
 *
 * In exact mode (fixed shapes, --uniform) a step takes exactly its budget:
 * the piece that would cross the budget is cut at it, and the rest of the
 * document opens the next step. Every step but the last is then full, so
 * ranks x micro-batches sequences of seq_len tokens can be filled without
 * padding.
 *
 * Image runs stay whole in exact mode too: where a sequence boundary (a
 * multiple of seq_len from the step's start, as a plan that fills the
 * sequences one after the other in arrival order has them) or the step's
 * budget would fall inside a run that a sequence can hold, the piece ends
 * where the run begins, and the step pads up to the boundary: the run
 * opens the next sequence or step. The padding counts in used and start
 * (so in both stages' STATE) and is reported on the piece after it
 * (s->pad), unless it closed its step; a step closed by its next piece
 * is then full, its real tokens up to seq_len - 1 per sequence fewer.
 *
 * ovl-mix (to place barriers at step boundaries) and ovl-construct (to
 * build the steps) run this same code on the same configuration, so they
 * agree on every boundary: a boundary is "offset O of the document at mixed
 * position X".
 */
#ifndef OVL_STEP_H
#define OVL_STEP_H

#include <stddef.h>
#include <stdint.h>

struct ovl_stepcfg {
	uint32_t	 nseq;		/* sequences per step: ranks x micro-batches */
	uint64_t	 budget;	/* tokens per step; 0: nseq x seq_len */
	size_t		 nstages;	/* seq-len schedule points, >= 1 */
	const uint64_t	*at;		/* mixed tokens where stage i begins; at[0] = 0 */
	const uint32_t	*seq_len;	/* sequence length of stage i, >= 1 */
	int		 exact;		/* 1: cut pieces at the budget (see above) */
};

struct ovl_stepcut {
	const struct ovl_stepcfg *cfg;
	uint64_t	 step;		/* the current step */
	uint64_t	 used;		/* tokens placed in the current step */
	uint64_t	 start;		/* mixed tokens before the current step */
	uint32_t	 seq_len;	/* of the current step */
	uint64_t	 budget;	/* of the current step */
	uint64_t	 pad;		/* exact mode: padding in the current
					   step just before the last piece */
};

/* Start at step 0, token 0. cfg must outlive s. */
void	ovl_stepcut_init(struct ovl_stepcut *s, const struct ovl_stepcfg *cfg);
/* Continue from a saved (step, start, used), as in a STATE. */
void	ovl_stepcut_restore(struct ovl_stepcut *s, const struct ovl_stepcfg *cfg,
	    uint64_t step, uint64_t start, uint64_t used);
/*
 * Place the next piece of a document that has left > 0 tokens to go.
 * Returns the piece's length (1 .. seq_len; in exact mode also at most
 * what the step has left). *opened is set to 1 when the
 * piece opens a new step (s->step was advanced first; a boundary lies just
 * before the piece), else 0.
 */
uint32_t ovl_stepcut_next(struct ovl_stepcut *s, uint64_t left, int *opened);

#define OVL_STEP_NORUN	UINT32_MAX	/* no token whose runs stay whole */
/*
 * As ovl_stepcut_next, for a document whose next left tokens are toks[0..
 * left) (ids of width bytes, 2 or 4: ovl-frame(5)), keeping runs of the
 * token run_id (an image's placeholders) whole: a piece that would end
 * inside such a run ends where the run begins instead, so the run opens
 * the next piece. A run longer than seq-len is cut as any tokens are, and
 * in exact mode a piece still ends at the step's budget (a full step comes
 * first); a run a sequence can hold is moved past a sequence boundary or
 * the budget by padding (see above). With run_id OVL_STEP_NORUN (or toks
 * NULL) the same as ovl_stepcut_next.
 */
uint32_t ovl_stepcut_next_runs(struct ovl_stepcut *s, uint64_t left,
	    const void *toks, uint32_t width, uint32_t run_id, int *opened);
/*
 * As ovl_stepcut_next_runs, with the document's image runs known
 * (runs[2*i] their first token, runs[2*i+1] their length, i < nruns, by
 * first token; from its IMAGE frames): runs that touch stay apart, so a
 * piece never ends inside one that a piece can hold. off is the document
 * offset of toks[0]. runs NULL: ovl_stepcut_next_runs. Every stage that
 * cuts a document with IMAGE frames must cut it so.
 */
uint32_t ovl_stepcut_next_bounds(struct ovl_stepcut *s, uint64_t left,
	    const void *toks, uint32_t width, uint32_t run_id, uint64_t off,
	    const uint32_t *runs, size_t nruns, int *opened);
/*
 * The placeholder token of source NAME in a stream's META text
 * ("source.NAME.image-token ID", written by ovl-source --image-token), or
 * OVL_STEP_NORUN.
 */
uint32_t ovl_step_run_token(const char *meta, size_t len, const char *name);
/* Sequence length and budget of a step beginning after `start` mixed tokens. */
uint32_t ovl_stepcfg_seq_len(const struct ovl_stepcfg *cfg, uint64_t start);
uint64_t ovl_stepcfg_budget(const struct ovl_stepcfg *cfg, uint64_t start);
/*
 * The seq-len schedule as the option and the META line spell it: "LEN", or
 * "LEN,LEN@TOKENS,..." with a stage per point after the first. A new
 * string (ovl_xmalloc); the caller frees it.
 */
char	*ovl_stepcfg_text(const struct ovl_stepcfg *cfg);

#endif
