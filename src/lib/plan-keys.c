/*
 * plan-keys: one table per directive. A row is a key: its kind, the field
 * it fills, its bounds or choices, and the ovl-source option it becomes.
 * Parsing (key=value words or a directive's one value), printing (the
 * normalized plan) and the ovl-source argument vector all walk the same
 * rows, so a key is defined once.
 */
#include "plan.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "balance.h"
#include "buf.h"
#include "cli.h"
#include "docshuf.h"
#include "image.h"
#include "num.h"
#include "pack.h"
#include "net.h"
#include "plan-int.h"
#include "remote.h"

const char *const ovl_plan_formats[OVL_IN_NFORMATS + 1] = {
	[OVL_IN_JSONL] = "jsonl",
	[OVL_IN_TEXT] = "text",
	[OVL_IN_TAR] = "tar",
	[OVL_IN_WDS] = "wds",
	[OVL_IN_PARQUET] = "parquet",
	[OVL_IN_MEGATRON] = "megatron",
	[OVL_IN_NPY] = "npy",
};
const char *const ovl_plan_docpers[] = { "line", "blank-line", "file", "eod",
	"offsets", NULL };
const char *const ovl_plan_onerrors[] = { "fail", "skip", NULL };
const char *const ovl_plan_fieldtypes[] = { "text", "ids", NULL };
const char *const ovl_plan_imagemodes[] = { "inline", "ref", "none", NULL };
const char *const ovl_plan_longdocs[] = { "split", "split-continue",
	"truncate", "drop", "error", NULL };
const char *const ovl_plan_exhausts[] = { "stop", "drop", "repeat", NULL };
const char *const ovl_plan_out_formats[OVL_OUT_NFORMATS + 1] = {
	[OVL_OUT_MEGATRON] = "megatron",
	[OVL_OUT_NPY] = "npy",
	[OVL_OUT_JSONL] = "jsonl",
	[OVL_OUT_FRAMES] = "frames",
	[OVL_OUT_WDS] = "wds",
};
const char *const ovl_plan_yesno[] = { "no", "yes", NULL };
const char *const ovl_plan_cp_pads[] = { "document", "sequence", "none",
	NULL };
const char *const ovl_plan_cp_balances[] = { "static", "hybrid", NULL };
const char *const ovl_plan_mixbys[] = { "tokens", "docs", NULL };
static const char *const transports[] = { "fifo", "ring", NULL };

enum {
	PK_STR,		/* char *: a non-empty string */
	PK_PATH,	/* char *: a path, joined to the plan's directory */
	PK_CHOICE,	/* char *: one of choices */
	PK_ENUM,	/* int: the index of the value in choices; -1 unset */
	PK_U64,		/* uint64_t: a count (suffixes K, M, ...); 0 unset */
	PK_U32,		/* uint32_t: the same, at most max */
	PK_SEED,	/* shuffle-seed=N|none (source) */
	PK_PATTERN,	/* path=, repeatable (source) */
	PK_LIST,	/* char *: "a,b"; one option per item in ovl-source's
			   arguments (member-ext) */
	PK_HOSTS,	/* char *: "a,b", host names or addresses (ovl-run) */
	PK_WINDOW,	/* char *: a shuffle window, N|chunk|none (docshuf.h) */
	PK_SPLIT	/* char *: split weights W,W[,W] (split.h) */
};

#define PKF_ALWAYS	0x1	/* printed even when unset or default */
#define PKF_PLANDEF	0x2	/* argv: the plan-wide value when unset */
#define PKF_EPOCHS	0x4	/* argv: --repeat instead with on-exhaust=repeat */
#define PKF_HAS		0x8	/* an int at has_off says it was given */

struct key {
	const char	*key;
	int		 kind;
	size_t		 off;		/* of the field */
	uint64_t	 min, max;	/* numbers (max 0: the type's) */
	const char *const *choices;
	const char	*opt;		/* the ovl-source option, or NULL */
	unsigned	 flags;
	size_t		 has_off;	/* PKF_HAS */
	size_t		 plan_off;	/* PKF_PLANDEF: char * in struct ovl_plan */
};

#define SRC(f)	offsetof(struct ovl_plan_source, f)
#define PLAN(f)	offsetof(struct ovl_plan, f)

/* source NAME key=value ...: every key, in printing and argument order. */
static const struct key source_keys[] = {
	{ "path", PK_PATTERN, 0, 0, 0, NULL, NULL, 0, 0, 0 },
	{ "tokenizer", PK_STR, SRC(tokenizer), 0, 0, NULL, "--tokenizer",
	    PKF_PLANDEF, 0, PLAN(tokenizer) },
	{ "eod-token", PK_STR, SRC(eod_token), 0, 0, NULL, "--eod-token",
	    PKF_PLANDEF, 0, PLAN(eod_token) },
	{ "bos-token", PK_STR, SRC(bos_token), 0, 0, NULL, "--bos-token",
	    PKF_PLANDEF, 0, PLAN(bos_token) },
	{ "add-special-tokens", PK_CHOICE, SRC(add_special), 0, 0,
	    ovl_plan_yesno, "--add-special-tokens", PKF_PLANDEF, 0,
	    PLAN(add_special) },
	{ "special", PK_STR, SRC(special), 0, 0, NULL, "--special", 0, 0, 0 },
	{ "format", PK_CHOICE, SRC(format), 0, 0, ovl_plan_formats, "--format",
	    0, 0, 0 },
	{ "field", PK_STR, SRC(field), 0, 0, NULL, "--field", 0, 0, 0 },
	{ "field-type", PK_CHOICE, SRC(field_type), 0, 0, ovl_plan_fieldtypes,
	    "--field-type", 0, 0, 0 },
	{ "doc-per", PK_CHOICE, SRC(doc_per), 0, 0, ovl_plan_docpers,
	    "--doc-per", 0, 0, 0 },
	{ "member-ext", PK_LIST, SRC(member_ext), 0, 0, NULL, "--member-ext", 0,
	    0, 0 },
	{ "min-tokens", PK_U64, SRC(min_tokens), 1, 0, NULL, "--min-tokens", 0,
	    0, 0 },
	{ "max-tokens", PK_U64, SRC(max_tokens), 1, 0, NULL, "--max-tokens", 0,
	    0, 0 },
	{ "match", PK_STR, SRC(match), 0, 0, NULL, "--match", 0, 0, 0 },
	{ "drop", PK_STR, SRC(drop), 0, 0, NULL, "--drop", 0, 0, 0 },
	{ "chunk-size", PK_U64, SRC(chunk_size), 1, 0, NULL, "--chunk-size", 0,
	    0, 0 },
	{ "max-doc-bytes", PK_U64, SRC(max_doc_bytes), 1, 128ull << 20, NULL,
	    "--max-doc-bytes", 0, 0, 0 },
	{ "on-error", PK_CHOICE, SRC(on_error), 0, 0, ovl_plan_onerrors,
	    "--on-error", 0, 0, 0 },
	{ "long-docs", PK_CHOICE, SRC(long_docs), 0, 0, ovl_plan_longdocs,
	    NULL, PKF_PLANDEF, 0, PLAN(long_docs) },
	{ "throttle", PK_STR, SRC(throttle), 0, 0, NULL, "--throttle", 0, 0, 0 },
	{ "image-cost", PK_STR, SRC(image_cost), 0, 0, NULL, "--image-cost", 0,
	    0, 0 },
	{ "image-token", PK_STR, SRC(image_token), 0, 0, NULL, "--image-token",
	    0, 0, 0 },
	{ "images", PK_CHOICE, SRC(images), 0, 0, ovl_plan_imagemodes,
	    "--images", 0, 0, 0 },
	{ "shuffle-seed", PK_SEED, 0, 0, 0, NULL, "--shuffle-seed", 0, 0, 0 },
	{ "shuffle-window", PK_WINDOW, SRC(shuffle_window), 0, 0, NULL,
	    "--shuffle-window", PKF_PLANDEF, 0, PLAN(shuffle_window) },
	{ "epochs", PK_U32, SRC(epochs), 1, UINT32_MAX, NULL, "--epochs",
	    PKF_EPOCHS, 0, 0 },
	{ "partitions", PK_U32, SRC(partitions), 1, OVL_PLAN_MAX_PARTITIONS,
	    NULL, NULL, PKF_ALWAYS, 0, 0 },
	{ "shadows", PK_U32, SRC(shadows), 0, OVL_PLAN_MAX_SHADOWS, NULL, NULL,
	    PKF_ALWAYS, 0, 0 },
	{ "on-exhaust", PK_ENUM, SRC(on_exhaust), 0, 0, ovl_plan_exhausts, NULL,
	    PKF_ALWAYS, 0, 0 },
	{ "hosts", PK_HOSTS, SRC(hosts), 0, 0, NULL, NULL, 0, 0, 0 },
};

/*
 * Directives with one value, in printing order. Slots for duplicates:
 * SIMPLE_SLOT + index (ctx.seen). The first SIMPLE_FIRST_AFTER print
 * before the sources.
 */
#define SIMPLE_SLOT	16
static const struct key simple_keys[] = {
	{ "seed", PK_U64, PLAN(seed), 0, 0, NULL, NULL, PKF_HAS,
	    PLAN(has_seed), 0 },
	{ "tokenizer", PK_STR, PLAN(tokenizer), 0, 0, NULL, NULL, 0, 0, 0 },
	{ "eod-token", PK_STR, PLAN(eod_token), 0, 0, NULL, NULL, 0, 0, 0 },
	{ "bos-token", PK_STR, PLAN(bos_token), 0, 0, NULL, NULL, 0, 0, 0 },
	{ "add-special-tokens", PK_CHOICE, PLAN(add_special), 0, 0,
	    ovl_plan_yesno, NULL, 0, 0, 0 },
	{ "long-docs", PK_CHOICE, PLAN(long_docs), 0, 0, ovl_plan_longdocs,
	    NULL, 0, 0, 0 },
	{ "mix-by", PK_ENUM, PLAN(mix_by), 0, 0, ovl_plan_mixbys, NULL,
	    PKF_ALWAYS, 0, 0 },
	{ "ranks", PK_U32, PLAN(ranks), 1, OVL_PLAN_MAX_RANKS, NULL, NULL,
	    PKF_ALWAYS, 0, 0 },
	{ "micro-batches", PK_U32, PLAN(micro_batches), 1,
	    OVL_PLAN_MAX_MICRO_BATCHES, NULL, NULL,
	    PKF_ALWAYS, 0, 0 },
	{ "step-tokens", PK_U64, PLAN(step_tokens), 1,
	    OVL_PLAN_MAX_STEP_TOKENS, NULL, NULL, 0, 0, 0 },
	{ "pack", PK_CHOICE, PLAN(pack), 0, 0, ovl_pack_names, NULL, 0, 0, 0 },
	{ "window", PK_U32, PLAN(window), 1, OVL_PLAN_MAX_WINDOW, NULL, NULL, 0,
	    0, 0 },
	{ "uniform", PK_ENUM, PLAN(uniform), 0, 0, ovl_plan_yesno, NULL, 0, 0,
	    0 },
	{ "image-tokens", PK_U64, PLAN(image_tokens), 0, UINT32_MAX, NULL, NULL,
	    PKF_HAS, PLAN(has_image_tokens), 0 },
	{ "image-encoder-cost", PK_STR, PLAN(image_encoder_cost), 0, 0, NULL,
	    NULL, 0, 0, 0 },
	{ "transport", PK_CHOICE, PLAN(transport), 0, 0, transports, NULL, 0,
	    0, 0 },
	{ "shuffle-window", PK_WINDOW, PLAN(shuffle_window), 0, 0, NULL, NULL, 0,
	    0, 0 },
	{ "cp", PK_U32, PLAN(cp), 1, OVL_PLAN_MAX_CP, NULL, NULL, 0, 0, 0 },
	{ "cp-pad", PK_ENUM, PLAN(cp_pad), 0, 0, ovl_plan_cp_pads, NULL, 0, 0,
	    0 },
	{ "cp-balance", PK_ENUM, PLAN(cp_balance), 0, 0, ovl_plan_cp_balances,
	    NULL, 0, 0, 0 },
	{ "split", PK_SPLIT, PLAN(split), 0, 0, NULL, NULL, 0, 0, 0 },
};
#define SIMPLE_FIRST_AFTER	5	/* "long-docs" on: after the sources */
_Static_assert(SIMPLE_SLOT + sizeof(simple_keys) / sizeof(simple_keys[0]) <=
    sizeof(((struct ctx *)0)->seen) / sizeof(unsigned),
    "a slot for every directive of one value");

static const struct key checkpoint_keys[] = {
	{ "every", PK_U64, PLAN(ckpt_every), 1, 0, NULL, NULL, 0, 0, 0 },
	{ "base", PK_U64, PLAN(ckpt_base), 1, 0, NULL, NULL, 0, 0, 0 },
	{ "dir", PK_PATH, PLAN(ckpt_dir), 0, 0, NULL, NULL, 0, 0, 0 },
	{ "verify-all", PK_ENUM, PLAN(ckpt_verify_all), 0, 0, ovl_plan_yesno,
	    NULL, 0, 0, 0 },
};

static const struct key stop_keys[] = {
	{ "steps", PK_U64, PLAN(stop_steps), 1, 0, NULL, NULL, 0, 0, 0 },
	{ "tokens", PK_U64, PLAN(stop_tokens), 1, 0, NULL, NULL, 0, 0, 0 },
};

static const struct key output_keys[] = {
	{ "format", PK_CHOICE, PLAN(out_format), 0, 0, ovl_plan_out_formats,
	    NULL, 0, 0, 0 },
	{ "path", PK_PATH, PLAN(out_path), 0, 0, NULL, NULL, 0, 0, 0 },
	{ "manifest", PK_PATH, PLAN(out_manifest), 0, 0, NULL, NULL, 0, 0, 0 },
	{ "per-rank", PK_PATH, PLAN(out_per_rank), 0, 0, NULL, NULL, 0, 0, 0 },
	{ "overwrite", PK_ENUM, PLAN(out_overwrite), 0, 0, ovl_plan_yesno,
	    NULL, 0, 0, 0 },
	{ "wait-readers", PK_U64, PLAN(out_wait_readers), 0, 86400, NULL, NULL,
	    PKF_HAS, PLAN(has_out_wait_readers), 0 },
	{ "run-ahead", PK_U64, PLAN(out_run_ahead), 0, 4096, NULL, NULL,
	    PKF_HAS, PLAN(has_out_run_ahead), 0 },
};

/* hosts loaders=a,b mixer=m trainers=t,u: where ovl-run places the stages */
static const struct key hosts_keys[] = {
	{ "loaders", PK_HOSTS, PLAN(hosts_loaders), 0, 0, NULL, NULL, 0, 0, 0 },
	{ "mixer", PK_HOSTS, PLAN(hosts_mixer), 0, 0, NULL, NULL, 0, 0, 0 },
	{ "trainers", PK_HOSTS, PLAN(hosts_trainers), 0, 0, NULL, NULL, 0, 0,
	    0 },
};

#define NKEYS(t)	(sizeof(t) / sizeof((t)[0]))
#define FIELD(base, k, type)	((type *)(void *)((char *)(base) + (k)->off))
#define CFIELD(base, k, type)	\
	((const type *)(const void *)((const char *)(base) + (k)->off))

/* ---- parsing ----------------------------------------------------------- */

/* The choices as "a, b, c". */
static void
choices_text(const char *const *l, char *buf, size_t size)
{
	size_t n = 0;
	const char *const *p;

	buf[0] = '\0';
	for (p = l; *p != NULL && n < size; p++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s", p == l ? "" :
		    ", ", *p);
}

/*
 * A host list: names or addresses (letters, digits, '.', '-', '_', ':' and
 * brackets for IPv6) separated by single commas. 0, or -1 with the error.
 */
static int
set_hosts(struct ctx *c, const struct key *k, void *base, const char *v)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]";
	size_t i, n = strlen(v);

	if (n == 0 || v[0] == ',' || v[n - 1] == ',' || strstr(v, ",,") != NULL)
		return ovl_plan__perr(c, "bad %s='%s': expected host names "
		    "separated by commas", k->key, v);
	for (i = 0; i < n; i++)
		if (v[i] != ',' && strchr(ok, v[i]) == NULL)
			return ovl_plan__perr(c, "bad %s='%s': '%c' is not "
			    "part of a host name", k->key, v, v[i]);
	if (strcmp(k->key, "mixer") == 0 && strchr(v, ',') != NULL)
		return ovl_plan__perr(c, "bad mixer='%s': one host", v);
	*FIELD(base, k, char *) = ovl_xstrdup(v);
	return 0;
}

/*
 * Set key k of base (a plan or a source) from v. eq says v came from
 * key=value (messages say "key=" then). 0, or -1 with the error set.
 */

/*
 * A path of the plan, joined to the plan's directory; a stream endpoint
 * (net.h) stays one: tcp: and tcp-listen: as written, unix: and
 * unix-listen: with their socket's path joined.
 */
static char *
endpoint_or_path(const char *dir, const char *v)
{
	static const char *const kinds[] = { "unix-listen:", "unix:" };
	char *p, *r;
	size_t i, n;

	if (strncmp(v, "tcp:", 4) == 0 || strncmp(v, "tcp-listen:", 11) == 0)
		return ovl_xstrdup(v);
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		n = strlen(kinds[i]);
		if (strncmp(v, kinds[i], n) != 0 || v[n] == '\0')
			continue;
		p = ovl_plan__join_dir(dir, v + n);
		r = ovl_xmalloc(n + strlen(p) + 1);
		memcpy(r, kinds[i], n);
		strcpy(r + n, p);
		free(p);
		return r;
	}
	return ovl_plan__join_dir(dir, v);
}

static int
set_key(struct ctx *c, const struct key *k, void *base, const char *v, int eq)
{
	char msg[256];
	uint64_t x, max;
	int i;

	switch (k->kind) {
	case PK_STR:
	case PK_PATH:
	case PK_LIST:
		if (v[0] == '\0')
			return ovl_plan__perr(c, "empty %s%s", k->key,
			    eq ? "=" : "");
		*FIELD(base, k, char *) = k->kind == PK_PATH ?
		    endpoint_or_path(c->p->dir, v) : ovl_xstrdup(v);
		return 0;
	case PK_HOSTS:
		return set_hosts(c, k, base, v);
	case PK_WINDOW: {
		struct ovl_docshuf_win win;

		if (ovl_docshuf_parse(v, &win) != 0)
			return ovl_plan__perr(c, "bad %s '%s': expected a count "
			    "of records (at most 2^32), chunk or none", k->key, v);
		*FIELD(base, k, char *) = ovl_xstrdup(v);
		return 0;
	}
	case PK_SPLIT: {
		const char *why;

		if (ovl_split_parse(v, &c->p->split_w, &why) != 0)
			return ovl_plan__perr(c, "bad %s '%s': %s", k->key, v,
			    why);
		*FIELD(base, k, char *) = ovl_xstrdup(v);
		return 0;
	}
	case PK_CHOICE:
	case PK_ENUM:
		if ((i = ovl_cli_choice(k->choices, v)) < 0) {
			choices_text(k->choices, msg, sizeof(msg));
			return ovl_plan__perr(c, "bad %s '%s': expected one of "
			    "%s", k->key, v, msg);
		}
		if (k->kind == PK_CHOICE)
			*FIELD(base, k, char *) = ovl_xstrdup(v);
		else
			*FIELD(base, k, int) = i;
		return 0;
	case PK_U64:
	case PK_U32:
		max = k->max != 0 ? k->max : k->kind == PK_U32 ? UINT32_MAX :
		    UINT64_MAX;
		if (ovl_num_size(v, &x) != 0)
			return ovl_plan__perr(c, "bad %s '%s': expected a count "
			    "such as 4096 or 2M", k->key, v);
		if (x < k->min)
			return ovl_plan__perr(c, "bad %s '%s': must be at least "
			    "%llu", k->key, v, (unsigned long long)k->min);
		if (x > max)
			return ovl_plan__perr(c, "bad %s '%s': at most %llu",
			    k->key, v, (unsigned long long)max);
		if (k->kind == PK_U32)
			*FIELD(base, k, uint32_t) = (uint32_t)x;
		else
			*FIELD(base, k, uint64_t) = x;
		if (k->flags & PKF_HAS)
			*(int *)(void *)((char *)base + k->has_off) = 1;
		return 0;
	case PK_SEED: {
		struct ovl_plan_source *s = base;

		if (strcmp(v, "none") == 0)
			s->shuffle = 0;
		else if (ovl_num_u64(v, &s->shuffle_seed) == 0)
			s->shuffle = 1;
		else
			return ovl_plan__perr(c, "bad shuffle-seed '%s': "
			    "expected a number or none", v);
		return 0;
	}
	case PK_PATTERN: {
		struct ovl_plan_source *s = base;

		if (v[0] == '\0')
			return ovl_plan__perr(c, "empty path=");
		s->patterns = ovl_xrealloc(s->patterns, (s->npatterns + 1) *
		    sizeof(char *));
		s->patterns[s->npatterns++] = ovl_xstrdup(v);
		return 0;
	}
	}
	return ovl_plan__perr(c, "internal error: key kind %d", k->kind);
}

/*
 * The key=value words from index first on, against table t: unknown keys,
 * duplicates (every key but path=) and bad values are errors. what names
 * the directive in messages ("source 'web'", "checkpoint").
 */
static int
kv_words(struct ctx *c, size_t first, const struct key *t, size_t n,
    void *base, const char *what)
{
	uint64_t seen = 0;
	size_t i, j;
	char *k, *v;

	for (i = first; i < c->nw; i++) {
		if (!ovl_plan__is_kv(&c->w[i]))
			return ovl_plan__perr(c, "%s: expected key=value, got "
			    "'%s'", what, c->w[i].s);
		v = ovl_plan__kv(&c->w[i]);
		k = c->w[i].s;
		for (j = 0; j < n && strcmp(t[j].key, k) != 0; j++)
			;
		if (j == n)
			return ovl_plan__perr(c, "%s: unknown option '%s='",
			    what, k);
		if (t[j].kind != PK_PATTERN && (seen & ((uint64_t)1 << j)))
			return ovl_plan__perr(c, "duplicate %s=", k);
		seen |= (uint64_t)1 << j;
		if (set_key(c, &t[j], base, v, 1) != 0)
			return -1;
	}
	return 0;
}

int
ovl_plan__source_keys(struct ctx *c, struct ovl_plan_source *s)
{
	char what[OVL_PLAN_MAX_NAME + 16];

	struct ovl_image_cost ic;
	char err[256];

	snprintf(what, sizeof(what), "source '%s'", s->name);
	if (kv_words(c, 2, source_keys, NKEYS(source_keys), s, what) != 0)
		return -1;
	/* what ovl-source would refuse, refused here */
	if (s->image_cost != NULL && ovl_image_cost_parse(s->image_cost, &ic,
	    err, sizeof(err)) != 0)
		return ovl_plan__perr(c, "%s: %s", what, err);
	if ((s->image_cost != NULL) != (s->image_token != NULL))
		return ovl_plan__perr(c, "%s: image-cost= and image-token= go "
		    "together", what);
	if (s->images != NULL && s->image_cost == NULL)
		return ovl_plan__perr(c, "%s: images= sends the images that "
		    "image-cost= places", what);
	if (s->image_cost != NULL && (s->format == NULL ||
	    strcmp(s->format, "wds") != 0))
		return ovl_plan__perr(c, "%s: image-cost= places the images of "
		    "WebDataset samples: format=wds", what);
	return 0;
}

int
ovl_plan__simple(struct ctx *c, const char *d, int *rc)
{
	const char *a;
	size_t j;

	for (j = 0; j < NKEYS(simple_keys); j++)
		if (strcmp(simple_keys[j].key, d) == 0)
			break;
	if (j == NKEYS(simple_keys))
		return 0;
	if (ovl_plan__once(c, SIMPLE_SLOT + (int)j, d) != 0 ||
	    (a = ovl_plan__single_arg(c, d)) == NULL)
		*rc = -1;
	else
		*rc = set_key(c, &simple_keys[j], c->p, a, 0);
	return 1;
}

unsigned
ovl_plan__simple_line(const struct ctx *c, const char *key)
{
	size_t j;

	for (j = 0; j < NKEYS(simple_keys); j++)
		if (strcmp(simple_keys[j].key, key) == 0)
			return c->seen[SIMPLE_SLOT + j];
	return 0;
}

/* cp and cp-pad against seq-len and uniform (plan.h). */
int
ovl_plan__check_cp(struct ctx *c)
{
	struct ovl_plan *p = c->p;
	unsigned cpl = ovl_plan__simple_line(c, "cp");
	unsigned padl = ovl_plan__simple_line(c, "cp-pad");
	unsigned ball = ovl_plan__simple_line(c, "cp-balance");
	uint64_t g;
	size_t k;

	if (p->cp == 0) {
		if (p->cp_balance >= 0) {
			c->line = ball;
			return ovl_plan__perr(c, "cp-balance needs cp N");
		}
		if (p->cp_pad < 0)
			return 0;
		c->line = padl;
		return ovl_plan__perr(c, "cp-pad needs cp N");
	}
	if (p->cp_balance == OVL_CP_HYBRID) {
		c->line = ball;
		if ((p->cp & (p->cp - 1)) != 0)
			return ovl_plan__perr(c, "cp-balance hybrid: cp %u is "
			    "not a power of two (a sequence's CP size is one, "
			    "up to cp)", p->cp);
		if (p->cp_pad == OVL_CP_PAD_NONE)
			return ovl_plan__perr(c, "cp-balance hybrid with cp-pad "
			    "none: a sequence shared by k CP ranks must split "
			    "into 2 x k chunks; use cp-pad document or "
			    "sequence");
		if (p->uniform == 1)
			return ovl_plan__perr(c, "cp-balance hybrid with uniform "
			    "yes: each sequence is as long as its CP size "
			    "holds, not seq-len; use uniform no");
	}
	if (p->cp_pad < 0)
		p->cp_pad = OVL_CP_PAD_DOCUMENT;
	g = 2 * (uint64_t)p->cp;
	for (k = 0; k < p->nseq; k++) {
		c->line = cpl;
		if (p->seq_len[k] < g)
			return ovl_plan__perr(c, "cp %u: seq-len %u (at=%llu) "
			    "cannot hold 2 x cp = %llu tokens", p->cp,
			    p->seq_len[k], (unsigned long long)p->seq_at[k],
			    (unsigned long long)g);
		if (p->cp_pad != OVL_CP_PAD_NONE && p->seq_len[k] % g != 0)
			return ovl_plan__perr(c, "cp %u: seq-len %u (at=%llu) "
			    "is not a multiple of 2 x cp = %llu, which cp-pad "
			    "%s pads to", p->cp, p->seq_len[k],
			    (unsigned long long)p->seq_at[k],
			    (unsigned long long)g, ovl_plan_cp_pads[p->cp_pad]);
	}
	if (p->cp_pad == OVL_CP_PAD_DOCUMENT && p->uniform == 1) {
		c->line = padl != 0 ? padl : cpl;
		return ovl_plan__perr(c, "cp %u with uniform yes: cp-pad "
		    "document cannot fit (every sequence is filled to seq-len, "
		    "leaving no room to pad its documents); use cp-pad "
		    "sequence or none", p->cp);
	}
	return 0;
}

int
ovl_plan__checkpoint(struct ctx *c)
{
	if (kv_words(c, 1, checkpoint_keys, NKEYS(checkpoint_keys), c->p,
	    "checkpoint") != 0)
		return -1;
	if (c->p->ckpt_every == 0)
		return ovl_plan__perr(c, "checkpoint: every=K is required");
	return 0;
}

int
ovl_plan__stop(struct ctx *c)
{
	if (kv_words(c, 1, stop_keys, NKEYS(stop_keys), c->p, "stop") != 0)
		return -1;
	if (c->p->stop_steps == 0 && c->p->stop_tokens == 0)
		return ovl_plan__perr(c, "stop: expected steps=N or tokens=N");
	return 0;
}

int
ovl_plan__hosts(struct ctx *c)
{
	if (kv_words(c, 1, hosts_keys, NKEYS(hosts_keys), c->p, "hosts") != 0)
		return -1;
	if (c->p->hosts_loaders == NULL && c->p->hosts_mixer == NULL &&
	    c->p->hosts_trainers == NULL)
		return ovl_plan__perr(c, "hosts: expected loaders=, mixer= or "
		    "trainers=");
	return 0;
}

int
ovl_plan__output(struct ctx *c)
{
	if (kv_words(c, 1, output_keys, NKEYS(output_keys), c->p,
	    "output") != 0)
		return -1;
	if (c->p->out_format == NULL)
		return ovl_plan__perr(c, "output: format= is required "
		    "(megatron, npy, jsonl, frames or wds)");
	if (c->p->out_path == NULL && c->p->out_per_rank == NULL)
		return ovl_plan__perr(c, "output: path= or per-rank= is "
		    "required");
	return 0;
}

char *
ovl_plan_rank_path(const char *pat, size_t r)
{
	struct ovl_buf b = { 0 };
	char num[32];
	const char *p;

	for (p = pat; *p != '\0'; p++) {
		if (*p == '%' && p[1] == '%') {
			ovl_buf_append(&b, "%", 1);
			p++;
		} else if (*p == '%' && p[1] == 'd') {
			snprintf(num, sizeof(num), "%zu", r);
			ovl_buf_append(&b, num, strlen(num));
			p++;
		} else
			ovl_buf_append(&b, p, 1);
	}
	ovl_buf_append(&b, "", 1);
	return (char *)b.p;
}

int
ovl_plan__check_per_rank(struct ctx *c, unsigned line)
{
	const struct ovl_plan *p = c->p;
	size_t r[2] = { 0, p->ranks - 1 }, i;
	char *path;
	int bad;

	if (p->out_per_rank == NULL || !ovl_net_is_endpoint(p->out_per_rank))
		return 0;
	for (i = 0; i < 2; i++) {
		path = ovl_plan_rank_path(p->out_per_rank, r[i]);
		bad = ovl_net_spec_valid(path) != 0;
		if (bad) {
			c->line = line;
			ovl_plan__perr(c, "output per-rank=%s: rank %zu's "
			    "endpoint '%s' is not one (a port is at most 65535)",
			    p->out_per_rank, r[i], path);
		}
		free(path);
		if (bad)
			return -1;
	}
	return 0;
}

/* ---- printing ---------------------------------------------------------- */

static char *
glob_escape(const char *s)
{
	size_t n = strlen(s), i, j = 0;
	char *r = ovl_xmalloc(2 * n + 1);

	for (i = 0; i < n; i++) {
		if (strchr("*?[]{}\\", s[i]) != NULL || (i == 0 && s[i] == '~'))
			r[j++] = '\\';
		r[j++] = s[i];
	}
	r[j] = '\0';
	return r;
}

static void
put_word(FILE *fp, const char *s)
{
	char *q = ovl_plan_quote(s);

	fputs(q, fp);
	free(q);
}

/*
 * Key k of base as " key=value" (or " value" when bare), unless unset and
 * not PKF_ALWAYS. Plan-specific kinds (path=, shuffle-seed=) are printed
 * by their callers.
 */
static void
put_key(FILE *fp, const struct key *k, const void *base, int bare)
{
	const char *s;
	uint64_t x;
	int i;

	switch (k->kind) {
	case PK_STR:
	case PK_PATH:
	case PK_LIST:
	case PK_HOSTS:
	case PK_CHOICE:
	case PK_WINDOW:
	case PK_SPLIT:
		if ((s = *CFIELD(base, k, char *)) == NULL)
			return;
		fprintf(fp, bare ? " " : " %s=", k->key);
		put_word(fp, s);
		return;
	case PK_ENUM:
		i = *CFIELD(base, k, int);
		if (i < 0)
			return;
		fprintf(fp, bare ? " %s" : " %s=%s", bare ? k->choices[i] :
		    k->key, k->choices[i]);
		return;
	case PK_U64:
	case PK_U32:
		x = k->kind == PK_U32 ? *CFIELD(base, k, uint32_t) :
		    *CFIELD(base, k, uint64_t);
		if (k->flags & PKF_HAS) {
			if (!*(const int *)(const void *)((const char *)base +
			    k->has_off))
				return;
		} else if (x == 0 && !(k->flags & PKF_ALWAYS))
			return;
		if (bare)
			fprintf(fp, " %llu", (unsigned long long)x);
		else
			fprintf(fp, " %s=%llu", k->key, (unsigned long long)x);
		return;
	}
}

/* The line of a single-value directive, when set. */
static void
put_simple(FILE *fp, const struct ovl_plan *p, const struct key *k)
{
	switch (k->kind) {
	case PK_STR:
	case PK_CHOICE:
	case PK_WINDOW:
	case PK_SPLIT:
		if (*CFIELD(p, k, char *) == NULL)
			return;
		break;
	case PK_ENUM:
		if (*CFIELD(p, k, int) < 0)
			return;
		break;
	default:
		if (k->flags & PKF_HAS) {
			if (!*(const int *)(const void *)((const char *)p +
			    k->has_off))
				return;
		} else if (!(k->flags & PKF_ALWAYS) &&
		    (k->kind == PK_U32 ? *CFIELD(p, k, uint32_t) == 0 :
		    *CFIELD(p, k, uint64_t) == 0))
			return;
	}
	fputs(k->key, fp);
	put_key(fp, k, p, 1);
	fputc('\n', fp);
}

static void
put_source(FILE *fp, const struct ovl_plan *p, const struct ovl_plan_source *s)
{
	const struct key *k;
	size_t i, j;
	char *e;

	fprintf(fp, "source %s", s->name);
	for (i = 0; i < NKEYS(source_keys); i++) {
		k = &source_keys[i];
		if (k->kind == PK_PATTERN) {
			if (s->npaths > 0)
				for (j = 0; j < s->npaths; j++) {
					/* a URL is read as a URL: '?' starts
					   an HTTP query */
					e = ovl_remote_is(s->paths[j]) ?
					    ovl_xstrdup(s->paths[j]) :
					    glob_escape(s->paths[j]);
					fputs(" path=", fp);
					put_word(fp, e);
					free(e);
				}
			else
				for (j = 0; j < s->npatterns; j++) {
					fputs(" path=", fp);
					put_word(fp, s->patterns[j]);
				}
		} else if (k->kind == PK_SEED) {
			if (s->shuffle)
				fprintf(fp, " shuffle-seed=%llu",
				    (unsigned long long)s->shuffle_seed);
			else if (p->has_seed)
				fputs(" shuffle-seed=none", fp);
		} else
			put_key(fp, k, s, 0);
	}
	fputc('\n', fp);
}

static void
put_double(FILE *fp, double d)
{
	char buf[64];
	int prec;

	/* the shortest of 15..17 digits that reads back as the same double */
	for (prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	fputs(buf, fp);
}

static void
put_kv_line(FILE *fp, const char *d, const struct key *t, size_t n,
    const struct ovl_plan *p)
{
	size_t i;

	fputs(d, fp);
	for (i = 0; i < n; i++)
		put_key(fp, &t[i], p, 0);
	fputc('\n', fp);
}

int
ovl_plan_print(const struct ovl_plan *p, FILE *fp)
{
	const struct ovl_plan_point *pt;
	size_t i, k;

	fprintf(fp, "# plan %s: %zu source%s, normalized\n", p->path,
	    p->nsources, p->nsources == 1 ? "" : "s");
	for (k = 0; k < SIMPLE_FIRST_AFTER; k++)
		put_simple(fp, p, &simple_keys[k]);
	for (i = 0; i < p->nsources; i++)
		put_source(fp, p, &p->sources[i]);
	for (k = 0; k < p->npoints; k++) {
		pt = &p->points[k];
		fprintf(fp, "weights at=%llu", (unsigned long long)pt->at);
		if (pt->ramp)
			fputs(" ramp=linear", fp);
		for (i = 0; i < p->nsources; i++) {
			fprintf(fp, " %s=", p->sources[i].name);
			put_double(fp, pt->w[i]);
		}
		fputc('\n', fp);
	}
	for (k = 0; k < p->nseq; k++)
		fprintf(fp, "seq-len at=%llu %u\n",
		    (unsigned long long)p->seq_at[k], p->seq_len[k]);
	for (k = SIMPLE_FIRST_AFTER; k < NKEYS(simple_keys); k++)
		put_simple(fp, p, &simple_keys[k]);
	if (p->balance != NULL)
		fprintf(fp, "balance %s\n", p->balance);
	if (p->cost_set == 1) {
		fputs("cost ", fp);
		put_double(fp, p->cost_a);
		fputc(',', fp);
		put_double(fp, p->cost_b);
		fputc('\n', fp);
	} else if (p->cost_set == 2) {
		fputs("cost model", fp);
		if (p->model_layers)
			fprintf(fp, " layers=%llu",
			    (unsigned long long)p->model_layers);
		if (p->model_hidden)
			fprintf(fp, " hidden=%llu",
			    (unsigned long long)p->model_hidden);
		if (p->model_heads)
			fprintf(fp, " heads=%llu",
			    (unsigned long long)p->model_heads);
		if (p->model_ffn)
			fprintf(fp, " ffn=%llu", (unsigned long long)p->model_ffn);
		if (p->model_vocab)
			fprintf(fp, " vocab=%llu",
			    (unsigned long long)p->model_vocab);
		fputc('\n', fp);
	}
	if (p->ckpt_every != 0)
		put_kv_line(fp, "checkpoint", checkpoint_keys,
		    NKEYS(checkpoint_keys), p);
	if (p->stop_steps != 0 || p->stop_tokens != 0)
		put_kv_line(fp, "stop", stop_keys, NKEYS(stop_keys), p);
	if (p->out_format != NULL)
		put_kv_line(fp, "output", output_keys, NKEYS(output_keys), p);
	if (p->hosts_loaders != NULL || p->hosts_mixer != NULL ||
	    p->hosts_trainers != NULL)
		put_kv_line(fp, "hosts", hosts_keys, NKEYS(hosts_keys), p);
	if (fflush(fp) != 0 || ferror(fp))
		return -1;
	return 0;
}

/* ---- quoting ---------------------------------------------------------- */

char *
ovl_plan_quote(const char *s)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:,+@%^=-";
	size_t n = strlen(s), i, j;
	char *r;

	if (n > 0 && strspn(s, safe) == n && s[0] != '#' && s[0] != '=')
		return ovl_xstrdup(s);
	r = ovl_xmalloc(2 * n + 3);
	j = 0;
	r[j++] = '"';
	for (i = 0; i < n; i++) {
		if (strchr("\"\\$`", s[i]) != NULL)
			r[j++] = '\\';
		r[j++] = s[i];
	}
	r[j++] = '"';
	r[j] = '\0';
	return r;
}

/* ---- ovl-source arguments ---------------------------------------------- */

struct argv {
	char	**v;
	size_t	  n, cap;
};

static void
arg_push(struct argv *a, const char *s)
{
	if (a->n + 2 > a->cap) {
		a->cap = a->cap ? a->cap * 2 : 32;
		a->v = ovl_xrealloc(a->v, a->cap * sizeof(char *));
	}
	a->v[a->n++] = ovl_xstrdup(s);
	a->v[a->n] = NULL;
}

static void
arg_opt(struct argv *a, const char *opt, const char *val)
{
	if (val == NULL)
		return;
	arg_push(a, opt);
	arg_push(a, val);
}

char **
ovl_plan_source_argv(const struct ovl_plan *p, size_t i, size_t *argc)
{
	const struct ovl_plan_source *s = &p->sources[i];
	const struct key *k;
	struct argv a = { NULL, 0, 0 };
	const char *v;
	char buf[32], *list, *save, *e;
	uint64_t x;
	size_t j;

	snprintf(buf, sizeof(buf), "%u", s->index);
	arg_opt(&a, "--id", buf);
	for (j = 0; j < NKEYS(source_keys); j++) {
		k = &source_keys[j];
		if (k->opt == NULL)
			continue;
		switch (k->kind) {
		case PK_STR:
		case PK_CHOICE:
		case PK_WINDOW:
			v = *CFIELD(s, k, char *);
			if (v == NULL && (k->flags & PKF_PLANDEF))
				v = *(char *const *)(const void *)((const char *)p +
				    k->plan_off);
			arg_opt(&a, k->opt, v);
			break;
		case PK_LIST:
			if ((v = *CFIELD(s, k, char *)) == NULL)
				break;
			/* a comma-separated list: one option each */
			list = ovl_xstrdup(v);
			save = NULL;
			for (e = strtok_r(list, ",", &save); e != NULL;
			    e = strtok_r(NULL, ",", &save))
				arg_opt(&a, k->opt, e);
			free(list);
			break;
		case PK_U64:
		case PK_U32:
			x = k->kind == PK_U32 ? *CFIELD(s, k, uint32_t) :
			    *CFIELD(s, k, uint64_t);
			if ((k->flags & PKF_EPOCHS) &&
			    s->on_exhaust == OVL_EXHAUST_REPEAT) {
				arg_push(&a, "--repeat");
				break;
			}
			if (x == 0)
				break;
			snprintf(buf, sizeof(buf), "%llu", (unsigned long long)x);
			arg_opt(&a, k->opt, buf);
			break;
		case PK_SEED:
			if (!s->shuffle)
				break;
			snprintf(buf, sizeof(buf), "%llu",
			    (unsigned long long)s->shuffle_seed);
			arg_opt(&a, k->opt, buf);
			break;
		}
	}
	if (p->split != NULL) {
		arg_opt(&a, "--split", p->split);
		arg_opt(&a, "--split-keep", ovl_split_names[p->split_use]);
		snprintf(buf, sizeof(buf), "%llu", p->has_seed ?
		    (unsigned long long)p->seed : 0ull);
		arg_opt(&a, "--split-seed", buf);
		arg_opt(&a, "--split-root", p->dir);
	}
	arg_push(&a, s->name);
	for (j = 0; j < s->npaths; j++)
		arg_push(&a, s->paths[j]);
	*argc = a.n;
	return a.v;
}

void
ovl_plan_argv_free(char **argv)
{
	size_t i;

	if (argv == NULL)
		return;
	for (i = 0; argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

/* ---- held-out splits ----------------------------------------------------- */

static void
split_rename(char **path, unsigned split)
{
	char *s = ovl_split_path(*path, split);

	free(*path);
	*path = s;
}

int
ovl_plan__split(struct ctx *c)
{
	struct ovl_plan *p = c->p;
	const char *e = getenv("OVL_SPLIT");
	int i;

	c->line = 0;
	if (e == NULL || e[0] == '\0')
		return 0;
	if ((i = ovl_cli_choice(ovl_split_names, e)) < 0)
		return ovl_plan__perr(c, "OVL_SPLIT '%s': expected train, "
		    "validation or test", e);
	if (i == 0)
		return 0;
	if (p->split == NULL)
		return ovl_plan__perr(c, "OVL_SPLIT '%s' (ovl-run --split): "
		    "the plan has no split", e);
	if ((unsigned)i >= p->split_w.n)
		return ovl_plan__perr(c, "OVL_SPLIT '%s': split %s has no "
		    "weight for it", e, p->split);
	p->split_use = (unsigned)i;
	split_rename(&p->ckpt_dir, p->split_use);
	split_rename(&p->out_path, p->split_use);
	split_rename(&p->out_manifest, p->split_use);
	split_rename(&p->out_per_rank, p->split_use);
	return 0;
}
