/*
 * ovl-construct: the Data Constructor. Cut the mixed document stream into
 * training steps (src/lib/step.h, the same cut as ovl-mix), balance each
 * step's pieces over the data-parallel ranks (balance.h), pack every
 * rank's pieces into sequences (pack.h) and write one SEQ frame per
 * sequence. Barriers from ovl-mix are held until the cut reaches them;
 * then everything before is written, the mix STATE passed on, this
 * stage's STATE added and the barrier forwarded. See ovl-construct(1).
 */
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
#include "num.h"
#include "pack.h"
#include "plan.h"
#include "step.h"

#define MAX_RANKS	4096
#define MAX_WINDOW	64
#define MAX_STAGES	4096
#define STATE_VERSION	1

static const struct ovl_cli cli = {
	"ovl-construct",
	"ovl-construct [options] [PLAN]",
	"\n"
	"Read mixed DOC frames on standard input; write one SEQ frame per packed\n"
	"sequence, step by step, rank by rank, micro-batch by micro-batch.\n"
	"Options override the plan's settings.\n"
	"\n"
	"  --ranks R              data-parallel ranks (plan: ranks; default 1)\n"
	"  --micro-batches M      sequences per rank in a step's budget (default 1)\n"
	"  --seq-len SCHEDULE     LEN or LEN,LEN@TOKENS,...: sequence length from a\n"
	"                         mixed token count on (default 2048)\n"
	"  --step-tokens N        a step's token budget (default ranks x\n"
	"                         micro-batches x seq-len)\n"
	"  --cost A,B             piece cost A*L^2 + B*L (default 1,0), or\n"
	"                         model:LAYERS:HIDDEN[:FFN[:VOCAB]]\n"
	"  --balance METHOD       kk (default), lpt or none\n"
	"  --pack METHOD          bfd (default), first-fit or concat\n"
	"  --window K             balance over K steps, moving whole pieces\n"
	"  --uniform              every rank gets the same number of full-length\n"
	"                         micro-batches, padded where nothing fits\n"
	"  --image-tokens N       each image of a document costs as N tokens\n"
	"  --pad-id ID            padding token (default: the stream's eod)\n"
	"  --json                 JSON lines instead of frames\n"
	"  --stats FILE           one JSON line of figures per step\n"
	"  --resume FILE          continue from this stage's STATE text\n"
	"  -v, --verbose          a line per step on standard error\n"
	"  -q, --quiet            errors only\n"
	"  -h, --help             this help\n"
	"  -V, --version          the version\n"
};

struct construct_opts {
	const char	*plan_path;
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
	uint64_t	 image_tokens;
	int		 pad_set;
	uint32_t	 pad_id;
	int		 json;
	const char	*stats_path;
	const char	*resume_path;
};

struct piece {
	uint64_t	 mix_pos;
	uint64_t	 record;
	uint64_t	 tok;		/* first token in the arena */
	uint32_t	 source, epoch, chunk;
	uint32_t	 offset;	/* within the document */
	uint32_t	 length;
	uint32_t	 images;	/* image tokens counted with it */
	uint32_t	 wstep;		/* step within the window as cut */
	uint32_t	 nstep;		/* step within the window after moving */
};

struct wstep {
	uint64_t	 step;
	uint64_t	 budget;
	uint32_t	 seq_len;
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
	size_t		 frags_cap;
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
	struct ovl_u32vec arena;
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
	uint64_t	 skip_pos;
	uint32_t	 skip_off;
	uint64_t	 next_pos;	/* arrival numbering of unmixed DOCs */
	int		 have_pos;
	uint64_t	 last_pos;
	uint32_t	 pad_id;
	/* scratch for JSON and drift */
	struct ovl_u32vec jtok, jpos, jcu;
	double		 drift[MAX_WINDOW];
	uint32_t	 moved[MAX_WINDOW];
	uint64_t	 seqs, steps, tokens, padding;
	char		 seqlen_text[256];
};

static void
usage_num(const char *opt, const char *arg)
{
	ovl_cli_usagex(&cli, "bad %s '%s'", opt, arg);
}

static uint64_t
opt_u64(const char *opt, const char *arg, uint64_t min, uint64_t max)
{
	uint64_t v;

	if (ovl_num_size(arg, &v) != 0 || v < min || v > max)
		usage_num(opt, arg);
	return v;
}

/* LEN[,LEN@TOKENS...]: 0 or -1. */
static int
parse_schedule(const char *s, struct construct_opts *o)
{
	char buf[8192], *p, *tok, *at;
	uint64_t len, from;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	o->nst = 0;
	for (tok = strtok_r(buf, ",", &p); tok != NULL;
	    tok = strtok_r(NULL, ",", &p)) {
		from = 0;
		at = strchr(tok, '@');
		if (at != NULL) {
			*at++ = '\0';
			if (ovl_num_size(at, &from) != 0)
				return -1;
		}
		if (ovl_num_size(tok, &len) != 0 || len == 0 ||
		    len > OVL_PACK_CAP_MAX || o->nst >= MAX_STAGES)
			return -1;
		if ((o->nst == 0 && from != 0) ||
		    (o->nst > 0 && from <= o->at[o->nst - 1]))
			return -1;
		o->at[o->nst] = from;
		o->sl[o->nst++] = (uint32_t)len;
	}
	return o->nst > 0 ? 0 : -1;
}

static int
parse_cost(const char *s, struct construct_opts *o)
{
	uint64_t v[4] = { 0, 0, 0, 0 };
	size_t n = 0;

	if (strncmp(s, "model:", 6) == 0) {
		const char *p = s + 6;
		while (n < 4) {
			char num[32];
			size_t k = strcspn(p, ":");
			if (k == 0 || k >= sizeof(num))
				return -1;
			memcpy(num, p, k);
			num[k] = '\0';
			if (ovl_num_u64(num, &v[n++]) != 0)
				return -1;
			p += k;
			if (*p == '\0')
				break;
			p++;
		}
		if (n < 2 || v[0] == 0 || v[1] == 0 || *p != '\0')
			return -1;
		ovl_cost_model(&o->cost, v[0], v[1], v[2], v[3]);
		snprintf(o->cost_text, sizeof(o->cost_text),
		    "model layers=%" PRIu64 " hidden=%" PRIu64 " ffn=%" PRIu64
		    " vocab=%" PRIu64, v[0], v[1], v[2], v[3]);
		return 0;
	}
	{
		char a[64], b[64];
		const char *comma = strchr(s, ',');
		if (comma == NULL || (size_t)(comma - s) >= sizeof(a) ||
		    strlen(comma + 1) >= sizeof(b))
			return -1;
		memcpy(a, s, (size_t)(comma - s));
		a[comma - s] = '\0';
		strcpy(b, comma + 1);
		if (ovl_num_double(a, &o->cost.a) != 0 ||
		    ovl_num_double(b, &o->cost.b) != 0 || o->cost.a < 0 ||
		    o->cost.b < 0 || (o->cost.a == 0 && o->cost.b == 0))
			return -1;
	}
	snprintf(o->cost_text, sizeof(o->cost_text), "%.17g,%.17g", o->cost.a,
	    o->cost.b);
	return 0;
}

/* Settings from the plan, where the options left them unset. */
static void
apply_plan(struct construct_opts *o, const unsigned char *set)
{
	char err[1024];
	struct ovl_plan *p;
	size_t i;

	p = ovl_plan_loadf(o->plan_path, OVL_PLAN_NOGLOB, err, sizeof(err));
	if (p == NULL)
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	if (!set['r'] && p->ranks > 0)
		o->ranks = p->ranks;
	if (!set['m'] && p->micro_batches > 0)
		o->mb = p->micro_batches;
	if (!set['T'] && p->step_tokens > 0)
		o->step_tokens = p->step_tokens;
	if (!set['L'] && p->nseq > 0) {
		if (p->nseq > MAX_STAGES)
			ovl_errx(OVL_EXIT_USAGE, "'%s': too many seq-len stages",
			    o->plan_path);
		for (i = 0; i < p->nseq; i++) {
			if (p->seq_len[i] > OVL_PACK_CAP_MAX)
				ovl_errx(OVL_EXIT_USAGE, "'%s': seq-len %u is "
				    "over %u", o->plan_path, p->seq_len[i],
				    OVL_PACK_CAP_MAX);
			o->at[i] = p->seq_at[i];
			o->sl[i] = p->seq_len[i];
		}
		o->nst = p->nseq;
	}
	if (!set['b'] && p->balance != NULL &&
	    (o->balance = ovl_balance_parse(p->balance)) < 0)
		ovl_errx(OVL_EXIT_USAGE, "'%s': unknown balance '%s'",
		    o->plan_path, p->balance);
	if (!set['p'] && p->pack != NULL &&
	    (o->pack = ovl_pack_parse(p->pack)) < 0)
		ovl_errx(OVL_EXIT_USAGE, "'%s': unknown pack '%s'",
		    o->plan_path, p->pack);
	if (!set['w'] && p->window > 0)
		o->window = p->window;
	if (!set['u'] && p->uniform >= 0)
		o->uniform = p->uniform;
	if (!set['i'] && p->has_image_tokens)
		o->image_tokens = p->image_tokens;
	if (!set['c'] && p->cost_set == 1) {
		o->cost.a = p->cost_a;
		o->cost.b = p->cost_b;
		snprintf(o->cost_text, sizeof(o->cost_text), "%.17g,%.17g",
		    o->cost.a, o->cost.b);
	} else if (!set['c'] && p->cost_set == 2) {
		ovl_cost_model(&o->cost, p->model_layers, p->model_hidden,
		    p->model_ffn, p->model_vocab);
		snprintf(o->cost_text, sizeof(o->cost_text),
		    "model layers=%" PRIu64 " hidden=%" PRIu64 " ffn=%" PRIu64
		    " vocab=%" PRIu64, p->model_layers, p->model_hidden,
		    p->model_ffn, p->model_vocab);
	}
	ovl_plan_free(p);
}

static void
parse_args(int argc, char **argv, struct construct_opts *o)
{
	static const struct option longopts[] = {
		OVL_CLI_LONGOPTS,
		{ "balance", required_argument, NULL, 'b' },
		{ "cost", required_argument, NULL, 'c' },
		{ "image-tokens", required_argument, NULL, 'i' },
		{ "json", no_argument, NULL, 'j' },
		{ "micro-batches", required_argument, NULL, 'm' },
		{ "pack", required_argument, NULL, 'p' },
		{ "pad-id", required_argument, NULL, 'P' },
		{ "ranks", required_argument, NULL, 'r' },
		{ "resume", required_argument, NULL, 'R' },
		{ "seq-len", required_argument, NULL, 'L' },
		{ "stats", required_argument, NULL, 's' },
		{ "step-tokens", required_argument, NULL, 'T' },
		{ "uniform", no_argument, NULL, 'u' },
		{ "window", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 }
	};
	unsigned char set[256];
	int opt;

	memset(set, 0, sizeof(set));
	memset(o, 0, sizeof(*o));
	o->ranks = 1;
	o->mb = 1;
	o->nst = 1;
	o->sl[0] = 2048;
	o->cost.a = 1;
	o->cost.b = 0;
	snprintf(o->cost_text, sizeof(o->cost_text), "1,0");
	o->balance = OVL_BAL_KK;
	o->pack = OVL_PACK_BFD;
	o->window = 1;
	while ((opt = getopt_long(argc, argv, OVL_CLI_SHORTOPTS, longopts,
	    NULL)) != -1) {
		if (ovl_cli_common(&cli, opt))
			continue;
		set[opt & 0xff] = 1;
		switch (opt) {
		case 'b':
			if ((o->balance = ovl_balance_parse(optarg)) < 0)
				usage_num("--balance", optarg);
			break;
		case 'c':
			if (parse_cost(optarg, o) != 0)
				usage_num("--cost", optarg);
			break;
		case 'i':
			o->image_tokens = opt_u64("--image-tokens", optarg, 0,
			    1u << 24);
			break;
		case 'j':
			o->json = 1;
			break;
		case 'm':
			o->mb = (uint32_t)opt_u64("--micro-batches", optarg, 1,
			    1u << 20);
			break;
		case 'p':
			if ((o->pack = ovl_pack_parse(optarg)) < 0)
				usage_num("--pack", optarg);
			break;
		case 'P':
			o->pad_id = (uint32_t)opt_u64("--pad-id", optarg, 0,
			    UINT32_MAX);
			o->pad_set = 1;
			break;
		case 'r':
			o->ranks = (uint32_t)opt_u64("--ranks", optarg, 1,
			    MAX_RANKS);
			break;
		case 'R':
			o->resume_path = optarg;
			break;
		case 'L':
			if (parse_schedule(optarg, o) != 0)
				usage_num("--seq-len", optarg);
			break;
		case 's':
			o->stats_path = optarg;
			break;
		case 'T':
			o->step_tokens = opt_u64("--step-tokens", optarg, 1,
			    UINT64_MAX / 4);
			break;
		case 'u':
			o->uniform = 1;
			break;
		case 'w':
			o->window = (uint32_t)opt_u64("--window", optarg, 1,
			    MAX_WINDOW);
			break;
		default:
			ovl_cli_usage(&cli);
		}
	}
	if (optind < argc)
		o->plan_path = argv[optind++];
	if (optind < argc)
		ovl_cli_usagex(&cli, "unexpected argument '%s'", argv[optind]);
	if (o->plan_path != NULL)
		apply_plan(o, set);
	if (o->ranks > MAX_RANKS || o->ranks == 0)
		ovl_errx(OVL_EXIT_USAGE, "ranks must be 1..%d", MAX_RANKS);
	if (o->window > MAX_WINDOW || o->window == 0)
		ovl_errx(OVL_EXIT_USAGE, "window must be 1..%d", MAX_WINDOW);
	if ((uint64_t)o->ranks * o->mb > UINT32_MAX)
		ovl_errx(OVL_EXIT_USAGE, "ranks x micro-batches is too large");
}

/* ---- output --------------------------------------------------------- */

static void
json_text(FILE *fp, const char *key, const char *s, size_t n)
{
	fprintf(fp, ",\"%s\":", key);
	ovl_json_string(fp, s, n);
}

static void
out_frame_copy(struct construct *c, uint8_t kind, const void *payload,
    uint32_t len)
{
	if (!c->o->json)
		ovl_writer_frame(c->wr, kind, 0, payload, len);
}

static void
write_state_json(const struct ovl_state *st)
{
	printf("{\"kind\":\"state\",\"stage\":\"%s\",\"n\":%" PRIu64,
	    st->stage == OVL_STAGE_MIX ? "mix" : st->stage ==
	    OVL_STAGE_CONSTRUCT ? "construct" : "other", st->n);
	json_text(stdout, "text", st->text, st->text_len);
	printf("}\n");
}

/* One sequence: pieces idx[a..b) of the step in order. */
static void
emit_seq(struct construct *c, uint64_t step, uint32_t seq_len, uint32_t rank,
    uint32_t mb, const uint32_t *idx, size_t np)
{
	const struct construct_opts *o = c->o;
	uint32_t real = 0, ntok, i, k, *tok, *pos, *cu;
	uint8_t *pl = NULL;
	size_t j;

	for (j = 0; j < np; j++)
		real += c->pieces[idx[j]].length;
	ntok = o->uniform ? seq_len : real;
	if (o->json) {
		c->jtok.len = c->jpos.len = c->jcu.len = 0;
		tok = ovl_u32vec_reserve(&c->jtok, ntok);
		pos = ovl_u32vec_reserve(&c->jpos, ntok);
		cu = ovl_u32vec_reserve(&c->jcu, np + 1);
	} else {
		struct ovl_seq s;
		uint32_t len = ovl_seq_payload_len(ntok, (uint32_t)np);

		if (len == 0)
			ovl_errx(OVL_EXIT_DATA, "a sequence of %u tokens is "
			    "over the frame limit", ntok);
		pl = ovl_writer_begin(c->wr, len);
		memset(&s, 0, sizeof(s));
		s.step = step;
		s.rank = rank;
		s.mb = mb;
		s.ntokens = ntok;
		s.npieces = (uint32_t)np;
		s.seq_len = seq_len;
		s.flags = 0;
		ovl_seq_encode(pl, &s);
		tok = ovl_seq_tokens(pl);
		pos = ovl_seq_positions(pl, ntok);
		cu = ovl_seq_cu(pl, ntok);
	}
	k = 0;
	cu[0] = 0;
	for (j = 0; j < np; j++) {
		const struct piece *p = &c->pieces[idx[j]];

		memcpy(tok + k, c->arena.p + p->tok, (size_t)p->length * 4);
		for (i = 0; i < p->length; i++)
			pos[k + i] = i;
		k += p->length;
		cu[j + 1] = k;
		if (pl != NULL) {
			struct ovl_piece pc;
			pc.source = p->source;
			pc.epoch = p->epoch;
			pc.chunk = p->chunk;
			pc.offset = p->offset;
			pc.record = p->record;
			pc.mix_pos = p->mix_pos;
			pc.length = p->length;
			ovl_seq_put_piece(pl, ntok, (uint32_t)np, (uint32_t)j, &pc);
		}
	}
	for (; k < ntok; k++) {
		tok[k] = c->pad_id;
		pos[k] = 0;
	}
	c->seqs++;
	c->tokens += real;
	c->padding += ntok - real;
	if (pl != NULL) {
		ovl_writer_finish(c->wr, OVL_SEQ, 0);
		return;
	}
	printf("{\"kind\":\"seq\",\"step\":%" PRIu64 ",\"rank\":%u,\"mb\":%u,"
	    "\"seq_len\":%u,\"ntokens\":%u,\"tokens\":", step, rank, mb,
	    seq_len, ntok);
	ovl_json_u32s(stdout, tok, ntok);
	printf(",\"positions\":");
	ovl_json_u32s(stdout, pos, ntok);
	printf(",\"cu_seqlens\":");
	ovl_json_u32s(stdout, cu, np + 1);
	printf(",\"docs\":[");
	for (j = 0; j < np; j++) {
		const struct piece *p = &c->pieces[idx[j]];
		printf("%s[%u,%" PRIu64 ",%u,%u]", j > 0 ? "," : "", p->source,
		    p->mix_pos, p->offset, p->length);
	}
	printf("]}\n");
}

/* ---- one step: balance, pack, emit -------------------------------------- */

static void
sw_grow(struct stepwork *w, size_t n, size_t nbins, uint32_t ranks)
{
	if (n > w->cap) {
		size_t cap = n + n / 2 + 16;
		w->idx = ovl_xrealloc(w->idx, cap * sizeof(*w->idx));
		w->len = ovl_xrealloc(w->len, cap * sizeof(*w->len));
		w->cost = ovl_xrealloc(w->cost, cap * sizeof(*w->cost));
		w->scratch = ovl_xrealloc(w->scratch, cap * sizeof(*w->scratch));
		w->rank = ovl_xrealloc(w->rank, cap * sizeof(*w->rank));
		w->bin = ovl_xrealloc(w->bin, cap * sizeof(*w->bin));
		w->bin2 = ovl_xrealloc(w->bin2, cap * sizeof(*w->bin2));
		w->order = ovl_xrealloc(w->order, cap * sizeof(*w->order));
		w->rlen = ovl_xrealloc(w->rlen, cap * sizeof(*w->rlen));
		w->rbin = ovl_xrealloc(w->rbin, cap * sizeof(*w->rbin));
		w->extra = ovl_xrealloc(w->extra, cap * sizeof(*w->extra));
		w->cap = cap;
	}
	if (nbins > w->bcap) {
		size_t cap = nbins + nbins / 2 + 16;
		w->bin_rank = ovl_xrealloc(w->bin_rank, cap *
		    sizeof(*w->bin_rank));
		w->bin_mb = ovl_xrealloc(w->bin_mb, cap * sizeof(*w->bin_mb));
		w->bcap = cap;
	}
	if (w->rcost == NULL) {
		w->rcost = ovl_xcalloc(ranks, sizeof(*w->rcost));
		w->nmb = ovl_xcalloc(ranks, sizeof(*w->nmb));
		w->nmb_none = ovl_xcalloc(ranks, sizeof(*w->nmb_none));
		w->rfirst = ovl_xcalloc(ranks + 1, sizeof(*w->rfirst));
		w->rtok = ovl_xcalloc(ranks, sizeof(*w->rtok));
	}
}

/*
 * Varlen: pack every rank's pieces (rank[] set) into bins: the bin within
 * its rank (the micro-batch) into bin[], micro-batch counts into nmb[].
 * Returns the number of bins.
 */
static size_t
pack_ranks(struct construct *c, size_t n, uint32_t seq_len, uint32_t *nmb)
{
	struct stepwork *w = &c->sw;
	uint32_t ranks = c->o->ranks, r;
	size_t i, k, nb = 0;

	/* pieces of each rank in arrival order, by a counting sort */
	memset(w->rfirst, 0, (ranks + 1) * sizeof(*w->rfirst));
	for (i = 0; i < n; i++)
		w->rfirst[w->rank[i] + 1]++;
	for (r = 0; r < ranks; r++)
		w->rfirst[r + 1] += w->rfirst[r];
	for (i = 0; i < n; i++)
		w->order[w->rfirst[w->rank[i]]++] = (uint32_t)i;
	for (r = ranks; r > 0; r--)
		w->rfirst[r] = w->rfirst[r - 1];
	w->rfirst[0] = 0;
	for (r = 0; r < ranks; r++) {
		size_t a = w->rfirst[r], z = w->rfirst[r + 1], m;

		for (k = a; k < z; k++)
			w->rlen[k - a] = w->len[w->order[k]];
		m = ovl_pack(c->pk, c->o->pack, w->rlen, z - a, seq_len,
		    w->rbin);
		for (k = a; k < z; k++)
			w->bin[w->order[k]] = w->rbin[k - a];
		nmb[r] = (uint32_t)m;
		nb += m;
	}
	return nb;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void
write_stats(struct construct *c, const struct wstep *s, size_t n,
    uint64_t tokens, uint64_t pad, const uint32_t *nmb, double maxc,
    double lb, double tb, double none_max, const uint32_t *nmb_none, uint64_t none_pad,
    double drift, uint32_t moved)
{
	uint32_t ranks = c->o->ranks, r, lo = UINT32_MAX, hi = 0;
	double total = 0, mean;
	size_t i;

	for (i = 0; i < ranks; i++)
		total += c->sw.rcost[i];
	mean = total / ranks;
	for (r = 0; r < ranks; r++) {
		if (nmb[r] < lo)
			lo = nmb[r];
		if (nmb[r] > hi)
			hi = nmb[r];
	}
	if (c->stats != NULL) {
		FILE *fp = c->stats;

		fprintf(fp, "{\"step\":%" PRIu64 ",\"seq_len\":%u,\"budget\":%"
		    PRIu64 ",\"tokens\":%" PRIu64 ",\"pieces\":%zu,"
		    "\"padding\":%" PRIu64 ",\"mb\":", s->step, s->seq_len,
		    s->budget, tokens, n, pad);
		ovl_json_u32s(fp, nmb, ranks);
		fprintf(fp, ",\"rank_tokens\":[");
		for (r = 0; r < ranks; r++)
			fprintf(fp, "%s%" PRIu64, r > 0 ? "," : "",
			    c->sw.rtok[r]);
		fprintf(fp, "],\"max_cost\":%.17g,\"mean_cost\":%.17g,"
		    "\"lower_bound\":%.17g,\"tight_bound\":%.17g,"
		    "\"none\":{\"max_cost\":%.17g,"
		    "\"padding\":%" PRIu64 ",\"mb\":", maxc, mean, lb, tb,
		    none_max, none_pad);
		ovl_json_u32s(fp, nmb_none, ranks);
		fprintf(fp, "}");
		if (c->o->window > 1)
			fprintf(fp, ",\"moved\":%u,\"drift\":%.6f", moved, drift);
		fprintf(fp, "}\n");
	}
	ovl_info(1, "step %" PRIu64 ": %" PRIu64 " tokens, %zu pieces, "
	    "%" PRIu64 " padding, micro-batches %u-%u, max/mean %.4f, "
	    "max/bound %.4f, none max/mean %.4f, drift %.4f", s->step, tokens,
	    n, pad, lo, hi, mean > 0 ? maxc / mean : 1, lb > 0 ? maxc / lb : 1,
	    mean > 0 ? none_max / mean : 1, drift);
}

static int
cmp_emitkey(const void *a, const void *b)
{
	const struct emitkey *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->sub < y->sub ? -1 : x->sub > y->sub;
}

static struct emitkey *ekeys;
static size_t ekeys_cap;

static void
ekeys_grow(size_t n)
{
	if (n > ekeys_cap) {
		ekeys_cap = n + n / 2 + 16;
		ekeys = ovl_xrealloc(ekeys, ekeys_cap * sizeof(*ekeys));
	}
}

/* A new piece: tokens [off, off + len) of piece i (images stay first). */
static uint32_t
piece_cut(struct construct *c, uint32_t i, uint32_t off, uint32_t len)
{
	struct piece *p;

	if (off == 0 && len == c->pieces[i].length)
		return i;
	if (c->npieces == c->pcap) {
		c->pcap = c->pcap ? 2 * c->pcap : 1024;
		c->pieces = ovl_xrealloc(c->pieces, c->pcap * sizeof(*p));
	}
	p = &c->pieces[c->npieces];
	*p = c->pieces[i];
	p->offset += off;
	p->tok += off;
	p->length = len;
	if (off > 0)
		p->images = 0;
	return (uint32_t)c->npieces++;
}

/*
 * Uniform shapes: the step's pieces to ranks of exactly per x seq_len
 * tokens (ovl_balance_exact), each rank's parts into per sequences
 * (ovl_pack_fill), cutting where they do not fit. Rank costs over the
 * final fragments into rc. With keys, the fragments become pieces and
 * emission keys (returns their number); else returns 0.
 */
static size_t
uniform_fill(struct construct *c, int method, size_t n, uint32_t S,
    uint32_t per, double *rc, int keys)
{
	const struct construct_opts *o = c->o;
	struct stepwork *w = &c->sw;
	uint32_t ranks = o->ranks, r;
	size_t np, i, k, nk = 0, need = OVL_BALANCE_EXACT_PARTS(n, ranks);

	if (need > w->parts_cap) {
		w->parts_cap = need + need / 2;
		w->parts = ovl_xrealloc(w->parts, w->parts_cap *
		    sizeof(*w->parts));
		w->plen = ovl_xrealloc(w->plen, w->parts_cap * sizeof(*w->plen));
		w->pidx = ovl_xrealloc(w->pidx, w->parts_cap * sizeof(*w->pidx));
	}
	np = ovl_balance_exact(c->bal, method, &o->cost, w->cost, w->len,
	    w->extra, n, ranks, (uint64_t)per * S, w->parts, rc);
	if (np + per > w->frags_cap) {
		w->frags_cap = np + per + (np + per) / 2;
		w->frags = ovl_xrealloc(w->frags, w->frags_cap *
		    sizeof(*w->frags));
	}
	if (keys)
		ekeys_grow(np + (size_t)per * ranks);
	/* the parts of each rank, in arrival order */
	memset(w->rfirst, 0, (ranks + 1) * sizeof(*w->rfirst));
	for (i = 0; i < np; i++)
		w->rfirst[w->parts[i].rank + 1]++;
	for (r = 0; r < ranks; r++)
		w->rfirst[r + 1] += w->rfirst[r];
	for (i = 0; i < np; i++)
		w->pidx[w->rfirst[w->parts[i].rank]++] = (uint32_t)i;
	for (r = ranks; r > 0; r--)
		w->rfirst[r] = w->rfirst[r - 1];
	w->rfirst[0] = 0;
	memset(rc, 0, ranks * sizeof(*rc));
	for (r = 0; r < ranks; r++) {
		size_t a = w->rfirst[r], z = w->rfirst[r + 1], nf, j;
		uint32_t *pi = w->pidx + a;

		/* insertion sort by (piece, offset): parts mostly in order */
		for (j = 1; j < z - a; j++) {
			uint32_t x = pi[j];
			size_t q = j;
			while (q > 0 && (w->parts[pi[q - 1]].item >
			    w->parts[x].item || (w->parts[pi[q - 1]].item ==
			    w->parts[x].item && w->parts[pi[q - 1]].off >
			    w->parts[x].off))) {
				pi[q] = pi[q - 1];
				q--;
			}
			pi[q] = x;
		}
		for (j = 0; j < z - a; j++)
			w->plen[j] = w->parts[pi[j]].len;
		nf = ovl_pack_fill(c->pk, o->pack, w->plen, z - a, S, per,
		    w->frags);
		w->rtok[r] = 0;
		for (k = 0; k < nf; k++) {
			const struct ovl_frag *f = &w->frags[k];
			const struct ovl_part *pt = &w->parts[pi[f->item]];
			uint32_t off = pt->off + f->off, item = pt->item;

			rc[r] += ovl_cost_of(&o->cost, (uint64_t)f->len +
			    (off == 0 ? w->extra[item] : 0));
			w->rtok[r] += f->len;
			if (!keys)
				continue;
			ekeys[nk].key = (uint64_t)r << 32 | f->bin;
			ekeys[nk].sub = (uint64_t)item << 32 | off;
			ekeys[nk].piece = piece_cut(c, w->idx[item], off,
			    f->len);
			nk++;
		}
	}
	return nk;
}

/* Balance, pack and write one step made of the pieces w->idx[0..n). */
static void
do_step(struct construct *c, const struct wstep *s, size_t n, double drift,
    uint32_t moved)
{
	const struct construct_opts *o = c->o;
	struct stepwork *w = &c->sw;
	uint32_t ranks = o->ranks, r, *nmb = w->nmb;
	uint64_t tokens = 0, pad = 0, none_pad = 0;
	double maxc = 0, lb, tb, none_max = 0;
	size_t i, nk = 0, per = 0;
	int want_none = c->stats != NULL || ovl_verbose >= 1;

	for (i = 0; i < n; i++) {
		const struct piece *p = &c->pieces[w->idx[i]];
		w->len[i] = p->length;
		w->extra[i] = p->images;
		w->cost[i] = ovl_cost_of(&o->cost, (uint64_t)p->length +
		    p->images);
		tokens += p->length;
	}
	lb = ovl_balance_lower_bound(w->cost, n, ranks, w->scratch);
	tb = ovl_balance_tight_bound(w->cost, n, ranks, w->scratch);
	if (!o->uniform) {
		if (want_none) {
			none_max = ovl_balance(c->bal, OVL_BAL_NONE, w->cost,
			    w->len, n, ranks, w->rank, w->rcost);
			pack_ranks(c, n, s->seq_len, w->nmb_none);
		}
		maxc = ovl_balance(c->bal, o->balance, w->cost, w->len, n,
		    ranks, w->rank, w->rcost);
		pack_ranks(c, n, s->seq_len, nmb);
		ekeys_grow(n);
		memset(w->rtok, 0, ranks * sizeof(*w->rtok));
		for (i = 0; i < n; i++) {
			ekeys[i].key = (uint64_t)w->rank[i] << 32 | w->bin[i];
			ekeys[i].sub = (uint64_t)i << 32;
			ekeys[i].piece = w->idx[i];
			w->rtok[w->rank[i]] += w->len[i];
		}
		nk = n;
	} else {
		uint64_t rs = (uint64_t)ranks * s->seq_len;

		per = (s->budget + rs - 1) / rs;
		if (per < o->mb)
			per = o->mb;
		/*
		 * Steps are cut exactly, so only the stream's last step holds
		 * less than its budget: as many micro-batches as it needs.
		 */
		if (tokens < s->budget && (tokens + rs - 1) / rs < per)
			per = (tokens + rs - 1) / rs > 0 ?
			    (tokens + rs - 1) / rs : 1;
		if (want_none) {
			(void)uniform_fill(c, OVL_BAL_NONE, n, s->seq_len,
			    (uint32_t)per, w->rcost, 0);
			for (r = 0, none_max = 0; r < ranks; r++) {
				w->nmb_none[r] = (uint32_t)per;
				if (w->rcost[r] > none_max)
					none_max = w->rcost[r];
			}
		}
		nk = uniform_fill(c, o->balance, n, s->seq_len, (uint32_t)per,
		    w->rcost, 1);
		for (r = 0; r < ranks; r++) {
			nmb[r] = (uint32_t)per;
			if (w->rcost[r] > maxc)
				maxc = w->rcost[r];
		}
		pad = (uint64_t)per * ranks * s->seq_len - tokens;
		none_pad = pad;
		/* the bounds of the pieces as placed: cutting lowers costs */
		sw_grow(w, nk, 0, ranks);
		for (i = 0; i < nk; i++) {
			const struct piece *p = &c->pieces[ekeys[i].piece];
			w->cost[i] = ovl_cost_of(&o->cost, (uint64_t)p->length +
			    p->images);
		}
		lb = ovl_balance_lower_bound(w->cost, nk, ranks, w->scratch);
		tb = ovl_balance_tight_bound(w->cost, nk, ranks, w->scratch);
	}
	if (want_none)
		write_stats(c, s, n, tokens, pad, nmb, maxc, lb, tb, none_max,
		    w->nmb_none, none_pad, drift, moved);
	/* emit rank by rank, micro-batch by micro-batch */
	qsort(ekeys, nk, sizeof(*ekeys), cmp_emitkey);
	sw_grow(w, nk, 0, ranks);
	{
		size_t a = 0;
		uint32_t m;

		for (r = 0; r < ranks; r++) {
			for (m = 0; m < nmb[r]; m++) {
				uint64_t key = (uint64_t)r << 32 | m;
				size_t z = a;

				while (z < nk && ekeys[z].key == key)
					z++;
				for (i = a; i < z; i++)
					w->order[i - a] = ekeys[i].piece;
				emit_seq(c, s->step, s->seq_len, r, m, w->order,
				    z - a);
				a = z;
			}
		}
	}
	c->steps++;
}

/* Per step of the window: how far its mixture moved from the cut's. */
static void
window_drift(struct construct *c, size_t nw)
{
	uint64_t *keys, orig[MAX_WINDOW], now[MAX_WINDOW];
	uint64_t so[MAX_WINDOW], sn[MAX_WINDOW];
	size_t i, j, n = c->npieces;

	memset(c->drift, 0, sizeof(c->drift));
	memset(c->moved, 0, sizeof(c->moved));
	memset(orig, 0, sizeof(orig));
	memset(now, 0, sizeof(now));
	if (n == 0)
		return;
	keys = ovl_xmalloc(n * sizeof(*keys));
	for (i = 0; i < n; i++) {
		const struct piece *p = &c->pieces[i];
		keys[i] = (uint64_t)p->source << 32 | i;
		orig[p->wstep] += p->length;
		now[p->nstep] += p->length;
		if (p->wstep != p->nstep)
			c->moved[p->nstep]++;
	}
	qsort(keys, n, sizeof(*keys), cmp_u64);
	for (i = 0; i < n; i = j) {
		uint32_t src = (uint32_t)(keys[i] >> 32);
		size_t t;

		memset(so, 0, sizeof(so));
		memset(sn, 0, sizeof(sn));
		for (j = i; j < n && (uint32_t)(keys[j] >> 32) == src; j++) {
			const struct piece *p = &c->pieces[keys[j] & 0xffffffffu];
			so[p->wstep] += p->length;
			sn[p->nstep] += p->length;
		}
		for (t = 0; t < nw; t++) {
			double a = orig[t] ? (double)so[t] / orig[t] : 0;
			double b = now[t] ? (double)sn[t] / now[t] : 0;
			c->drift[t] += (a > b ? a - b : b - a) / 2;
		}
	}
	free(keys);
}

/* Balance and write every closed step of the window; empty the window. */
static void
flush_window(struct construct *c)
{
	struct stepwork *w = &c->sw;
	size_t nw = c->nws, t, i, n;

	if (nw == 0)
		return;
	n = c->ws[nw - 1].end;
	sw_grow(w, n, 0, c->o->ranks);
	for (t = 0; t < nw; t++)
		for (i = c->ws[t].first; i < c->ws[t].end; i++)
			c->pieces[i].wstep = c->pieces[i].nstep = (uint32_t)t;
	if (nw > 1) {
		uint64_t lo[MAX_WINDOW], hi[MAX_WINDOW];
		int moves;

		if (n > c->wgroup_cap) {
			c->wgroup_cap = n + n / 2;
			c->wgroup = ovl_xrealloc(c->wgroup, c->wgroup_cap *
			    sizeof(*c->wgroup));
		}
		for (i = 0; i < n; i++) {
			w->len[i] = c->pieces[i].length;
			w->cost[i] = ovl_cost_of(&c->o->cost,
			    (uint64_t)c->pieces[i].length + c->pieces[i].images);
			w->rank[i] = c->pieces[i].wstep;
			w->bin[i] = c->pieces[i].source;
			c->wgroup[i] = c->pieces[i].mix_pos;
		}
		/*
		 * Every step keeps its token budget: at most its budget and at
		 * least what the cut guarantees (more than budget - seq-len, or
		 * what it had as cut); exactly as cut with fixed shapes.
		 */
		for (t = 0; t < nw; t++) {
			const struct wstep *ws = &c->ws[t];
			uint64_t cut = 0, floor;

			for (i = ws->first; i < ws->end; i++)
				cut += c->pieces[i].length;
			floor = ws->budget >= ws->seq_len ?
			    ws->budget - ws->seq_len + 1 : 0;
			lo[t] = c->o->uniform || cut < floor ? cut : floor;
			hi[t] = c->o->uniform ? cut : ws->budget;
		}
		moves = ovl_balance_window(c->bal, w->cost, w->len, w->bin,
		    c->wgroup, n, w->rank, nw, lo, hi, c->o->ranks,
		    16 * nw);
		if (moves > 0)
			for (i = 0; i < n; i++)
				c->pieces[i].nstep = w->rank[i];
		ovl_info(2, "window of steps %" PRIu64 "-%" PRIu64 ": %d "
		    "trades", c->ws[0].step, c->ws[nw - 1].step, moves);
		window_drift(c, nw);
	}
	for (t = 0; t < nw; t++) {
		size_t k = 0;

		for (i = 0; i < n; i++)
			if (c->pieces[i].nstep == t)
				w->idx[k++] = (uint32_t)i;
		do_step(c, &c->ws[t], k, nw > 1 ? c->drift[t] : 0,
		    nw > 1 ? c->moved[t] : 0);
	}
	/* the open step is empty whenever the window is flushed */
	c->npieces = 0;
	c->arena.len = 0;
	c->nws = 0;
	c->open_first = 0;
}

/* Close the open step (its last values in prev); flush a full window. */
static void
close_step(struct construct *c, const struct wstep *prev, uint32_t next_sl)
{
	struct wstep *s;

	if (c->npieces == c->open_first)
		return;		/* nothing in it: resumed at its start */
	s = &c->ws[c->nws++];
	*s = *prev;
	s->first = c->open_first;
	s->end = c->npieces;
	c->open_first = c->npieces;
	if (c->nws >= c->o->window || next_sl != s->seq_len)
		flush_window(c);
}

/* ---- checkpoints ------------------------------------------------------ */

static void
state_text(struct construct *c, uint64_t n, uint64_t pos, uint32_t off,
    struct ovl_buf *out)
{
	const struct construct_opts *o = c->o;
	char line[512];
	int k;

#define ADD(...) do { \
	k = snprintf(line, sizeof(line), __VA_ARGS__); \
	ovl_buf_append(out, line, (size_t)k); \
} while (0)
	out->len = 0;
	ADD("version %d\n", STATE_VERSION);
	ADD("n %" PRIu64 "\n", n);
	ADD("step %" PRIu64 "\n", c->cut.step);
	ADD("start %" PRIu64 "\n", c->cut.start);
	ADD("used 0\n");
	ADD("skip.pos %" PRIu64 "\n", pos);
	ADD("skip.offset %u\n", off);
	ADD("next.pos %" PRIu64 "\n", pos);
	ADD("seqs %" PRIu64 "\n", c->seqs);
	ADD("ranks %u\n", o->ranks);
	ADD("micro-batches %u\n", o->mb);
	ADD("step-tokens %" PRIu64 "\n", o->step_tokens);
	ADD("seq-len %s\n", c->seqlen_text);
	ADD("balance %s\n", ovl_balance_name(o->balance));
	ADD("pack %s\n", ovl_pack_name(o->pack));
	ADD("window %u\n", o->window);
	ADD("uniform %d\n", o->uniform);
	ADD("cost %s\n", o->cost_text);
	ADD("image-tokens %" PRIu64 "\n", o->image_tokens);
#undef ADD
}

/* Write everything before the boundary, the held STATEs, ours, the barrier. */
static void
emit_checkpoint(struct construct *c, struct held *h, uint64_t pos,
    uint32_t off)
{
	struct ovl_buf text = { 0 };
	struct ovl_state st;
	size_t i = 0, k;
	uint8_t bp[OVL_BARRIER_LEN];

	flush_window(c);
	for (k = 0; k < h->nstates; k++) {
		uint32_t len = ovl_le32(h->states.p + i);
		const uint8_t *pl = h->states.p + i + 4;
		struct ovl_frame f = { OVL_STATE, 0, len, pl, 0 };

		if (c->o->json) {
			ovl_state_decode(&f, &st);
			write_state_json(&st);
		} else {
			out_frame_copy(c, OVL_STATE, pl, len);
		}
		i += 4 + (size_t)len;
	}
	state_text(c, h->b.n, pos, off, &text);
	st.stage = OVL_STAGE_CONSTRUCT;
	st.n = h->b.n;
	st.text = (const char *)text.p;
	st.text_len = (uint32_t)text.len;
	if (c->o->json) {
		write_state_json(&st);
		printf("{\"kind\":\"barrier\",\"n\":%" PRIu64 ",\"step\":%"
		    PRIu64 ",\"mix_pos\":%" PRIu64 ",\"tokens\":%" PRIu64
		    ",\"offset\":%u}\n", h->b.n, h->b.step, h->b.mix_pos,
		    h->b.tokens, h->b.offset);
	} else {
		uint8_t *pl = ovl_writer_begin(c->wr,
		    ovl_state_payload_len(st.text_len));
		ovl_state_encode(pl, &st);
		ovl_writer_finish(c->wr, OVL_STATE, 0);
		ovl_barrier_encode(bp, &h->b);
		out_frame_copy(c, OVL_BARRIER, bp, OVL_BARRIER_LEN);
		/* a checkpoint must reach the sink now, not with the next block */
		ovl_writer_flush(c->wr);
	}
	if (c->o->json)
		fflush(stdout);
	ovl_info(1, "checkpoint %" PRIu64 " before step %" PRIu64
	    " (document %" PRIu64 " offset %u)", h->b.n, h->b.step, pos, off);
	ovl_buf_free(&text);
}

static void
held_pop(struct construct *c)
{
	ovl_buf_free(&c->held[0].states);
	memmove(c->held, c->held + 1, (c->nheld - 1) * sizeof(*c->held));
	c->nheld--;
}

/* Why barriers may not match: the cut differs with fixed shapes. */
static const char *
uniform_hint(const struct construct *c)
{
	return c->o->uniform ? " (--uniform cuts every step exactly at its "
	    "budget: ovl-mix must run a plan with 'uniform yes')" :
	    " (if ovl-mix's plan says 'uniform yes', it cuts steps exactly "
	    "at their budget: give ovl-construct --uniform too)";
}

/*
 * A piece is about to be placed at offset off of document pos; boundary
 * is 1 when a step begins just before it. Emit the checkpoints that sit
 * there; fail when the cut passed one without meeting it.
 */
static void
check_barriers(struct construct *c, uint64_t pos, uint32_t off, int boundary)
{
	while (c->nheld > 0) {
		struct held *h = &c->held[0];
		const struct ovl_barrier *b = &h->b;

		if (!h->has_barrier)
			ovl_errx(OVL_EXIT_DATA, "'%s': STATE %" PRIu64 " without "
			    "its BARRIER", ovl_reader_name(c->rd),
			    b->n);
		if (boundary && pos == b->mix_pos && off == b->offset) {
			if (b->step != c->cut.step || b->tokens != c->cut.start)
				ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64
				    ": ovl-mix places step %" PRIu64 " after %"
				    PRIu64 " tokens, the construct plan step %"
				    PRIu64 " after %" PRIu64 ": the plans "
				    "differ%s", b->n, b->step, b->tokens,
				    c->cut.step, c->cut.start, uniform_hint(c));
			emit_checkpoint(c, h, pos, off);
			held_pop(c);
			continue;
		}
		if (pos > b->mix_pos || (pos == b->mix_pos && off >= b->offset))
			ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64 " at "
			    "document %" PRIu64 " offset %u (step %" PRIu64
			    ") is not a step boundary here: the plans of "
			    "ovl-mix and ovl-construct differ%s", b->n,
			    b->mix_pos, b->offset, b->step, uniform_hint(c));
		break;
	}
}

static struct held *
held_push(struct construct *c)
{
	struct held *h;

	if (c->nheld == c->heldcap) {
		c->heldcap = c->heldcap ? 2 * c->heldcap : 8;
		c->held = ovl_xrealloc(c->held, c->heldcap * sizeof(*c->held));
	}
	h = &c->held[c->nheld++];
	memset(h, 0, sizeof(*h));
	return h;
}

static void
on_state(struct construct *c, const struct ovl_frame *f)
{
	struct ovl_state st;
	struct held *h;
	uint8_t lenb[4];

	if (ovl_state_decode(f, &st) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad STATE at byte offset %"
		    PRIu64, ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	if (st.stage == OVL_STAGE_CONSTRUCT)
		ovl_errx(OVL_EXIT_DATA, "'%s': the input already holds a "
		    "construct STATE at byte offset %" PRIu64,
		    ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	if (c->nheld > 0 && !c->held[c->nheld - 1].has_barrier)
		h = &c->held[c->nheld - 1];
	else
		h = held_push(c);
	h->b.n = st.n;
	ovl_put32(lenb, f->len);
	ovl_buf_append(&h->states, lenb, 4);
	ovl_buf_append(&h->states, f->payload, f->len);
	h->nstates++;
}

static void
on_barrier(struct construct *c, const struct ovl_frame *f)
{
	struct ovl_barrier b;
	struct held *h;

	if (ovl_barrier_decode(f, &b) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad BARRIER at byte offset %"
		    PRIu64, ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	if (c->nheld > 0 && !c->held[c->nheld - 1].has_barrier) {
		h = &c->held[c->nheld - 1];
		if (h->b.n != b.n)
			ovl_errx(OVL_EXIT_DATA, "'%s': BARRIER %" PRIu64
			    " follows STATE %" PRIu64 " at byte offset %" PRIu64,
			    ovl_reader_name(c->rd), b.n, h->b.n,
			    ovl_reader_offset(c->rd));
	} else {
		h = held_push(c);
	}
	h->b = b;
	h->has_barrier = 1;
	if (b.n <= c->resume_n) {
		/* re-sent by a resumed ovl-mix: already committed */
		ovl_buf_free(&h->states);
		c->nheld--;
	}
}

/* ---- documents ------------------------------------------------------ */

static void
add_piece(struct construct *c, const struct ovl_doc *d, uint64_t pos,
    uint32_t off, uint32_t len)
{
	struct piece *p;

	if (c->npieces == c->pcap) {
		c->pcap = c->pcap ? 2 * c->pcap : 1024;
		c->pieces = ovl_xrealloc(c->pieces, c->pcap * sizeof(*p));
	}
	p = &c->pieces[c->npieces++];
	p->mix_pos = pos;
	p->record = d->record;
	p->source = d->source;
	p->epoch = d->epoch;
	p->chunk = d->chunk;
	p->offset = off;
	p->length = len;
	p->images = off == 0 ? (uint32_t)((uint64_t)d->nimages *
	    c->o->image_tokens > UINT32_MAX ? UINT32_MAX :
	    (uint64_t)d->nimages * c->o->image_tokens) : 0;
	p->tok = c->arena.len;
	memcpy(ovl_u32vec_reserve(&c->arena, len), d->tokens + off,
	    (size_t)len * 4);
	c->arena.len += len;
}

static void
on_doc(struct construct *c, const struct ovl_frame *f)
{
	struct ovl_doc d;
	uint64_t pos;
	uint32_t off = 0;

	if (ovl_doc_decode(f, &d) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad DOC at byte offset %" PRIu64,
		    ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	pos = (d.flags & OVL_DOC_MIXED) ? d.mix_pos : c->next_pos;
	if (c->have_pos && pos <= c->last_pos)
		ovl_errx(OVL_EXIT_DATA, "'%s': document at mixed position %"
		    PRIu64 " after %" PRIu64 " (byte offset %" PRIu64 ")",
		    ovl_reader_name(c->rd), pos, c->last_pos,
		    ovl_reader_offset(c->rd));
	c->have_pos = 1;
	c->last_pos = pos;
	c->next_pos = pos + 1;
	if (c->skipping) {
		if (pos != c->skip_pos)
			ovl_errx(OVL_EXIT_DATA, "'%s': resuming at document %"
			    PRIu64 " but the stream starts at %" PRIu64,
			    ovl_reader_name(c->rd), c->skip_pos, pos);
		if (c->skip_off > 0 && c->skip_off >= d.ntokens)
			ovl_errx(OVL_EXIT_DATA, "'%s': resuming at token %u of "
			    "document %" PRIu64 ", which has %u",
			    ovl_reader_name(c->rd), c->skip_off, pos, d.ntokens);
		off = c->skip_off;
		c->skipping = 0;
	}
	while (off < d.ntokens) {
		struct wstep prev;
		int opened, fresh = c->cut.used == 0;
		uint32_t len;

		prev.step = c->cut.step;
		prev.budget = c->cut.budget;
		prev.seq_len = c->cut.seq_len;
		len = ovl_stepcut_next(&c->cut, d.ntokens - off, &opened);
		if (opened)
			close_step(c, &prev, c->cut.seq_len);
		if (c->nheld > 0)
			check_barriers(c, pos, off, opened || fresh);
		add_piece(c, &d, pos, off, len);
		off += len;
	}
}

static void
on_meta(struct construct *c, const struct ovl_frame *f)
{
	const struct construct_opts *o = c->o;
	const char *text, *p, *e, *nl;
	uint32_t tlen;
	struct ovl_buf out = { 0 };
	char line[512];
	int k;
	static const char *const mine[] = { "seq-len", "ranks",
	    "micro-batches", "step-tokens", "balance", "pack", "window",
	    "uniform", "cost", "image-tokens", "pad-id", NULL };

	if (ovl_meta_decode(f, &text, &tlen) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'%s': bad META at byte offset %" PRIu64,
		    ovl_reader_name(c->rd), ovl_reader_offset(c->rd));
	for (p = text, e = text + tlen; p < e; p = nl) {
		size_t klen, i;
		int skip = 0;

		nl = memchr(p, '\n', (size_t)(e - p));
		nl = nl == NULL ? e : nl + 1;
		klen = strcspn(p, " \n");
		if (klen > (size_t)(nl - p))
			klen = (size_t)(nl - p);
		for (i = 0; mine[i] != NULL; i++)
			if (strlen(mine[i]) == klen &&
			    memcmp(p, mine[i], klen) == 0)
				skip = 1;
		if (!c->o->pad_set && klen == 3 && memcmp(p, "eod", 3) == 0) {
			char num[24];
			size_t vl = (size_t)(nl - p) - 4;
			uint64_t v;
			if (nl[-1] == '\n')
				vl--;
			if ((size_t)(nl - p) > 4 && vl < sizeof(num)) {
				memcpy(num, p + 4, vl);
				num[vl] = '\0';
				if (ovl_num_u64(num, &v) == 0 && v <= UINT32_MAX)
					c->pad_id = (uint32_t)v;
			}
		}
		if (skip)
			continue;
		ovl_buf_append(&out, p, (size_t)(nl - p));
		if (nl == e && nl[-1] != '\n')
			ovl_buf_append(&out, "\n", 1);
	}
#define ADD(...) do { \
	k = snprintf(line, sizeof(line), __VA_ARGS__); \
	ovl_buf_append(&out, line, (size_t)k); \
} while (0)
	ADD("seq-len %s\n", c->seqlen_text);
	ADD("ranks %u\n", o->ranks);
	ADD("micro-batches %u\n", o->mb);
	if (o->step_tokens > 0)
		ADD("step-tokens %" PRIu64 "\n", o->step_tokens);
	ADD("balance %s\n", ovl_balance_name(o->balance));
	ADD("pack %s\n", ovl_pack_name(o->pack));
	ADD("window %u\n", o->window);
	ADD("uniform %s\n", o->uniform ? "yes" : "no");
	ADD("cost %s\n", o->cost_text);
	ADD("image-tokens %" PRIu64 "\n", o->image_tokens);
	ADD("pad-id %u\n", c->pad_id);
#undef ADD
	if (o->json) {
		printf("{\"kind\":\"meta\"");
		json_text(stdout, "text", (const char *)out.p, out.len);
		printf("}\n");
	} else {
		uint8_t *pl = ovl_writer_begin(c->wr,
		    ovl_meta_payload_len((uint32_t)out.len));
		ovl_meta_encode(pl, (const char *)out.p, (uint32_t)out.len);
		ovl_writer_finish(c->wr, OVL_META, 0);
	}
	ovl_buf_free(&out);
}

/* The end: the open step closes, the window flushes. */
static void
on_end(struct construct *c)
{
	struct wstep prev;

	prev.step = c->cut.step;
	prev.budget = c->cut.budget;
	prev.seq_len = c->cut.seq_len;
	close_step(c, &prev, prev.seq_len);
	flush_window(c);
	/* a checkpoint at the very end of the stream */
	while (c->nheld > 0 && c->held[0].has_barrier &&
	    c->held[0].b.tokens == c->cut.start + c->cut.used &&
	    c->held[0].b.step == c->cut.step + 1) {
		struct held *h = &c->held[0];
		c->cut.step = h->b.step;
		c->cut.start = h->b.tokens;
		c->cut.used = 0;
		emit_checkpoint(c, h, h->b.mix_pos, h->b.offset);
		held_pop(c);
	}
	if (c->nheld > 0)
		ovl_errx(OVL_EXIT_DATA, "'%s': the stream ends before "
		    "checkpoint %" PRIu64 " (step %" PRIu64 ")",
		    ovl_reader_name(c->rd), c->held[0].b.n, c->held[0].b.step);
}

/* ---- resume ------------------------------------------------------- */

static void
load_resume(struct construct *c, const char *path)
{
	FILE *fp = fopen(path, "r");
	char line[1024], cfg[4096];
	struct ovl_buf mine = { 0 };
	uint64_t step = 0, start = 0, used = 0;
	unsigned have = 0, lineno = 0;

	if (fp == NULL)
		ovl_err(OVL_EXIT_USAGE, "cannot open '%s'", path);
	/* the settings this run would write, to compare */
	state_text(c, 0, 0, 0, &mine);
	ovl_buf_append(&mine, "", 1);
	snprintf(cfg, sizeof(cfg), "%s", (const char *)mine.p);
	ovl_buf_free(&mine);
	while (fgets(line, sizeof(line), fp) != NULL) {
		char *sp, *val, *nl;
		uint64_t v = 0;
		int isnum;

		lineno++;
		nl = strchr(line, '\n');
		if (nl == NULL && !feof(fp))
			ovl_errx(OVL_EXIT_USAGE, "%s:%u: line too long", path,
			    lineno);
		if (nl != NULL)
			*nl = '\0';
		if (line[0] == '\0')
			continue;
		sp = strchr(line, ' ');
		if (sp == NULL)
			ovl_errx(OVL_EXIT_USAGE, "%s:%u: expected 'key value'",
			    path, lineno);
		*sp = '\0';
		val = sp + 1;
		isnum = ovl_num_u64(val, &v) == 0;
#define NUMKEY(k, bit, dst) \
		if (strcmp(line, k) == 0) { \
			if (!isnum) \
				ovl_errx(OVL_EXIT_USAGE, "%s:%u: bad %s '%s'", \
				    path, lineno, k, val); \
			dst; \
			have |= bit; \
			continue; \
		}
		NUMKEY("version", 1u, if (v != STATE_VERSION)
		    ovl_errx(OVL_EXIT_USAGE, "%s:%u: unknown version %s",
		    path, lineno, val))
		NUMKEY("n", 2u, c->resume_n = v)
		NUMKEY("step", 4u, step = v)
		NUMKEY("start", 8u, start = v)
		NUMKEY("used", 16u, used = v)
		NUMKEY("skip.pos", 32u, c->skip_pos = v)
		NUMKEY("skip.offset", 64u, if (v > UINT32_MAX)
		    ovl_errx(OVL_EXIT_USAGE, "%s:%u: bad skip.offset", path,
		    lineno); c->skip_off = (uint32_t)v)
		NUMKEY("next.pos", 128u, c->next_pos = v)
		NUMKEY("seqs", 256u, c->seqs = v)
#undef NUMKEY
		{
			/* a setting: must equal this run's */
			char want[600];
			size_t kl = strlen(line);
			const char *q = cfg;
			int found = 0;

			while ((q = strstr(q, line)) != NULL) {
				if ((q == cfg || q[-1] == '\n') && q[kl] == ' ') {
					size_t vl = strcspn(q + kl + 1, "\n");
					if (vl >= sizeof(want))
						vl = sizeof(want) - 1;
					memcpy(want, q + kl + 1, vl);
					want[vl] = '\0';
					found = 1;
					break;
				}
				q += kl;
			}
			if (!found)
				ovl_errx(OVL_EXIT_USAGE, "%s:%u: unknown key '%s'",
				    path, lineno, line);
			if (strcmp(want, val) != 0)
				ovl_errx(OVL_EXIT_USAGE, "%s:%u: the state was "
				    "written with %s %s, this run has %s", path,
				    lineno, line, val, want);
		}
	}
	if (ferror(fp))
		ovl_err(OVL_EXIT_USAGE, "cannot read '%s'", path);
	fclose(fp);
	if ((have & 0xff) != 0xff)
		ovl_errx(OVL_EXIT_USAGE, "'%s': not a complete construct state",
		    path);
	if (used != 0)
		ovl_errx(OVL_EXIT_USAGE, "'%s': a state must sit at a step "
		    "boundary (used 0)", path);
	ovl_stepcut_restore(&c->cut, &c->cfg, step, start, used);
	c->skipping = 1;
	if (c->next_pos != c->skip_pos)
		c->next_pos = c->skip_pos;
}

/* ---- main ----------------------------------------------------------- */

static void
format_schedule(const struct construct_opts *o, char *buf, size_t size)
{
	size_t i, k = 0;

	buf[0] = '\0';
	for (i = 0; i < o->nst && k < size; i++) {
		if (i == 0)
			k += (size_t)snprintf(buf + k, size - k, "%u", o->sl[0]);
		else
			k += (size_t)snprintf(buf + k, size - k, ",%u@%" PRIu64,
			    o->sl[i], o->at[i]);
	}
}

static void
run(struct construct *c)
{
	struct ovl_frame f;
	int rc;

	/* the reader holds the grammar: META first and once, then documents */
	while ((rc = ovl_reader_next(c->rd, &f)) == OVL_RD_FRAME) {
		switch (f.kind) {
		case OVL_META:
			on_meta(c, &f);
			break;
		case OVL_DOC:
			on_doc(c, &f);
			break;
		case OVL_STATE:
			on_state(c, &f);
			break;
		case OVL_BARRIER:
			on_barrier(c, &f);
			break;
		case OVL_END:
			on_end(c);
			break;
		default:
			break;	/* CHUNK_END: nothing to do here */
		}
	}
	if (rc < 0)
		ovl_reader_die(c->rd);
}

int
main(int argc, char **argv)
{
	struct construct_opts o;
	struct construct c;

	ovl_cli_init(&cli);
	parse_args(argc, argv, &o);
	memset(&c, 0, sizeof(c));
	c.o = &o;
	c.pad_id = o.pad_id;
	c.cfg.nseq = o.ranks * o.mb;
	c.cfg.budget = o.step_tokens;
	c.cfg.nstages = o.nst;
	c.cfg.at = o.at;
	c.cfg.seq_len = o.sl;
	c.cfg.exact = o.uniform;	/* fixed shapes: every step full */
	format_schedule(&o, c.seqlen_text, sizeof(c.seqlen_text));
	ovl_stepcut_init(&c.cut, &c.cfg);
	if (o.resume_path != NULL)
		load_resume(&c, o.resume_path);
	if (o.stats_path != NULL &&
	    (c.stats = fopen(o.stats_path, "w")) == NULL)
		ovl_err(OVL_EXIT_DATA, "cannot open '%s'", o.stats_path);
	if (!o.json) {
		ovl_io_refuse_tty(STDOUT_FILENO);
		c.wr = ovl_writer_new(STDOUT_FILENO, "standard output");
	} else {
		static char obuf[1 << 16];
		setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));
	}
	c.rd = ovl_reader_new(STDIN_FILENO, "standard input", 0);
	ovl_reader_expect(c.rd, &(struct ovl_expect){
	    .meta_keys = "vocab eod", .kinds = 1u << OVL_DOC |
	    1u << OVL_CHUNK_END | 1u << OVL_BARRIER | 1u << OVL_STATE,
	    .what = "a stream of documents", .checks = OVL_EXPECT_DOC });
	c.bal = ovl_balancer_new();
	c.pk = ovl_packer_new();
	run(&c);
	if (c.wr != NULL) {
		ovl_writer_end(c.wr);
		ovl_writer_free(c.wr);
	}
	if (c.stats != NULL && fclose(c.stats) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot write '%s'", o.stats_path);
	ovl_info(1, "%" PRIu64 " steps, %" PRIu64 " sequences, %" PRIu64
	    " tokens, %" PRIu64 " padding", c.steps, c.seqs, c.tokens,
	    c.padding);
	ovl_reader_free(c.rd);
	ovl_balancer_free(c.bal);
	ovl_packer_free(c.pk);
	free(c.pieces);
	ovl_u32vec_free(&c.arena);
	ovl_u32vec_free(&c.jtok);
	ovl_u32vec_free(&c.jpos);
	ovl_u32vec_free(&c.jcu);
	while (c.nheld > 0)
		held_pop(&c);
	free(c.held);
	free(c.wgroup);
	free(ekeys);
	{
		struct stepwork *w = &c.sw;
		free(w->idx); free(w->len); free(w->cost); free(w->scratch);
		free(w->rank); free(w->bin); free(w->bin2); free(w->order);
		free(w->rlen); free(w->rbin); free(w->bin_rank); free(w->bin_mb);
		free(w->rcost); free(w->nmb); free(w->nmb_none); free(w->rfirst);
		free(w->rtok); free(w->extra); free(w->parts); free(w->frags);
		free(w->plen); free(w->pidx);
	}
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}
