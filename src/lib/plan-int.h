/*
 * plan-int: what the plan parser's files share (private to the library):
 * plan.c (lexing, values, the whole plan), plan-keys.c (the key tables:
 * parsing, printing and ovl-source arguments walk them) and plan-sched.c
 * (the weight schedule).
 */
#ifndef OVL_PLAN_INT_H
#define OVL_PLAN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "plan.h"

/* One word of a line: its text and where its first plain '=' is (-1: none). */
struct word {
	char	*s;
	int	 eq;
};

/* A weights line kept until every source is known. */
struct wline {
	unsigned	 line;
	uint64_t	 at;
	int		 has_at;
	int		 ramp;
	size_t		 n;
	char		**names;
	double		*vals;
	unsigned	*lines;
};

struct ctx {
	struct ovl_plan	*p;
	const char	*name;		/* for messages */
	char		*err;		/* every error, a line each */
	size_t		 errlen;
	unsigned	 nerr;
	int		 flags;
	unsigned	 line;
	/* the words of the current line */
	struct word	*w;
	size_t		 nw, capw;
	struct ovl_buf	 text;		/* their bytes */
	struct wline	*wl;
	size_t		 nwl;
	/* lines where single directives were seen, for duplicates */
	unsigned	 seen[64];
};


/*
 * cp and cp-pad against the seq-len stages and uniform (plan.h): 0, or -1
 * with the error set at the line of cp (or cp-pad). Sets cp_pad's
 * default.
 */
int	ovl_plan__check_cp(struct ctx *c);
/* The line of single-value directive key (plan-keys.c), 0 when unseen. */
unsigned ovl_plan__simple_line(const struct ctx *c, const char *key);

/* "FILE:LINE: message" into the context's error buffer; returns -1. */
int	ovl_plan__perr(struct ctx *c, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
int	ovl_plan__get_size(struct ctx *c, const char *key, const char *v,
	    uint64_t *out);
int	ovl_plan__get_u32(struct ctx *c, const char *key, const char *v,
	    uint32_t min, uint32_t *out);
int	ovl_plan__get_choice(struct ctx *c, const char *key, const char *v,
	    const char *const *list, char **out);
/* Duplicate-directive check for directives that may appear once. */
int	ovl_plan__once(struct ctx *c, int slot, const char *what);
/* path joined to dir (unless absolute), tidied; the caller frees it. */
char	*ovl_plan__join_dir(const char *dir, const char *path);
int	ovl_plan__is_kv(const struct word *w);
/* The value of a key=value word (its key is cut at the '='). */
char	*ovl_plan__kv(struct word *w);
/* A directive with exactly one plain argument, or NULL (error set). */
const char *ovl_plan__single_arg(struct ctx *c, const char *what);

/* plan-keys.c: the directives that are key tables. */
int	ovl_plan__source_keys(struct ctx *c, struct ovl_plan_source *s);
/* A single-value directive of the table: 1 handled (0 or -1 in *rc), 0 not one. */
int	ovl_plan__simple(struct ctx *c, const char *d, int *rc);
int	ovl_plan__checkpoint(struct ctx *c);
int	ovl_plan__stop(struct ctx *c);
int	ovl_plan__output(struct ctx *c);
int	ovl_plan__hosts(struct ctx *c);
/* The split OVL_SPLIT names: split_use and the split's paths. 0 or -1. */
int	ovl_plan__split(struct ctx *c);

/* plan-paths.c: the files of s's patterns into s->paths; 0 or -1 */
int	ovl_plan__resolve_paths(struct ctx *c, struct ovl_plan_source *s);

/*
 * An output per-rank= endpoint (net.h) must be one for every rank (rank
 * 0's and the last rank's: the port grows with the rank): 0, or -1 with
 * the error at line.
 */
int	ovl_plan__check_per_rank(struct ctx *c, unsigned line);

/* plan-tok.c */
char	*ovl_plan__resolve_tokenizer(const char *dir, const char *spec);
/*
 * The tokenizer sources are checked against: the previous source's choice
 * (not loaded again when the same) and the first source's tokenizer, which
 * every other must equal (ovl-mix mixes one vocabulary).
 */
struct ovl_plan__tokref {
	const char	*spec, *eod, *bos, *add;	/* the previous choice */
	char		 name[96];	/* the first source's tokenizer */
	uint32_t	 vocab, eod_id;
	const char	*first;		/* its source's name; NULL: none yet */
	unsigned	 line;
};
int	ovl_plan__check_tokenizer(struct ctx *c,
	    const struct ovl_plan_source *s, struct ovl_plan__tokref *ref);

#endif
