/*
 * ovl-construct: options, the plan, main. See construct.h.
 */
#include "construct.h"

#include "image.h"

/* the methods' defaults; --help names them from their tables */
enum { BALANCE_DEFAULT = OVL_BAL_KK, PACK_DEFAULT = OVL_PACK_BFD };

static struct ovl_cli cli = {
	"ovl-construct",
	"ovl-construct [options] [PLAN]",
	NULL,	/* help, with the methods' names (main) */
};

static const char help[] =
	"\n"
	"Read mixed DOC frames on standard input; write one SEQ frame per packed\n"
	"sequence, step by step, rank by rank, micro-batch by micro-batch.\n"
	"Options override the plan's settings.\n"
	"\n"
	"  --ranks R              data-parallel ranks (plan: ranks; default 1)\n"
	"  --micro-batches M      sequences per rank in a step's budget (default 1)\n"
	"  --seq-len SCHEDULE     LEN or LEN,LEN@TOKENS,...: sequence length from a\n"
	"                         mixed token count on (default "
	OVL_PLAN_STR(OVL_PLAN_SEQ_LEN_DEFAULT) ")\n"
	"  --step-tokens N        a step's token budget (default ranks x\n"
	"                         micro-batches x seq-len)\n"
	"  --cost A,B             piece cost A*L^2 + B*L (default 1,0), or\n"
	"                         model:LAYERS:HIDDEN[:FFN[:VOCAB]]\n"
	"  --balance METHOD       %s (default %s)\n"
	"  --pack METHOD          %s (default %s)\n"
	"  --window K             balance over K steps, moving whole pieces\n"
	"  --uniform              every rank gets the same number of full-length\n"
	"                         micro-batches, padded where nothing fits\n"
	"  --image-tokens N       each image of a document costs as N tokens\n"
	"  --image-encoder-cost A[:B]\n"
	"                         the vision encoder's cost of each image sent\n"
	"                         (IMAGE frames) of n tokens: A*n + B*n^2\n"
	"  --pad-id ID            padding token (default: the stream's eod)\n"
	"  --token-bits N         SEQ ids: 32, or 16 (default) where the\n"
	"                         vocabulary has at most 65,536 ids\n"
	"  --json                 JSON lines instead of frames\n"
	"  --input SPEC           read SPEC (a file, FIFO or tcp: endpoint), not\n"
	"                         standard input\n"
	"  --output SPEC          write SPEC instead of standard output\n"
	"  --stats FILE           one JSON line of figures per step\n"
	"  --resume FILE          continue from this stage's STATE text\n"
	OVL_NET_HELP
	OVL_RELINK_HELP
	"  -v, --verbose          a line per step on standard error\n"
	"  -q, --quiet            errors only\n"
	"  -h, --help             this help\n"
	"  -V, --version          the version\n";

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

/* The encoder's cost per image (image.h); what names it for messages. */
static void
set_enc(struct construct_opts *o, const char *spec, const char *what)
{
	char err[160];

	if (ovl_image_enc_parse(spec, &o->enc_a, &o->enc_b, err,
	    sizeof(err)) != 0)
		ovl_cli_usagex(&cli, "%s: %s", what, err);
	snprintf(o->enc_text, sizeof(o->enc_text), "%.17g:%.17g", o->enc_a,
	    o->enc_b);
	if (o->enc_a == 0 && o->enc_b == 0)
		o->enc_text[0] = '\0';
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
		/* the plan bounds stages and lengths as we do (construct.h) */
		for (i = 0; i < p->nseq; i++) {
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
	o->cp = p->cp;
	o->cp_pad = p->cp_pad;
	o->cp_hybrid = p->cp_balance == OVL_CP_HYBRID;
	if (!set['i'] && p->has_image_tokens)
		o->image_tokens = p->image_tokens;
	if (!set['E'] && p->image_encoder_cost != NULL)
		set_enc(o, p->image_encoder_cost, o->plan_path);
	for (i = 0; i < p->nsources; i++)
		o->cont_pos[i] = ovl_plan_long_docs(p, i) ==
		    OVL_LONG_SPLIT_CONTINUE;
	o->stop_steps = p->stop_steps;
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
		{ "image-encoder-cost", required_argument, NULL, 'E' },
		{ "json", no_argument, NULL, 'j' },
		{ "micro-batches", required_argument, NULL, 'm' },
		{ "pack", required_argument, NULL, 'p' },
		{ "pad-id", required_argument, NULL, 'P' },
		{ "ranks", required_argument, NULL, 'r' },
		{ "resume", required_argument, NULL, 'R' },
		{ "seq-len", required_argument, NULL, 'L' },
		{ "stats", required_argument, NULL, 's' },
		{ "step-tokens", required_argument, NULL, 'T' },
		{ "token-bits", required_argument, NULL, 'B' },
		{ "uniform", no_argument, NULL, 'u' },
		{ "window", required_argument, NULL, 'w' },
		{ "input", required_argument, NULL, 'I' },
		{ "output", required_argument, NULL, 'O' },
		OVL_NET_LONGOPTS,
		OVL_RELINK_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	unsigned char set[256];
	int opt;

	memset(set, 0, sizeof(set));
	memset(o, 0, sizeof(*o));
	o->ranks = 1;
	o->mb = 1;
	o->nst = 1;
	o->sl[0] = OVL_PLAN_SEQ_LEN_DEFAULT;
	o->cost.a = 1;
	o->cost.b = 0;
	snprintf(o->cost_text, sizeof(o->cost_text), "1,0");
	o->balance = BALANCE_DEFAULT;
	o->pack = PACK_DEFAULT;
	o->window = 1;
	while ((opt = getopt_long(argc, argv, OVL_CLI_SHORTOPTS, longopts,
	    NULL)) != -1) {
		if (ovl_cli_common(&cli, opt) || ovl_net_cli(&cli, opt, optarg) ||
		    ovl_relink_cli(&cli, &o->relink, opt, optarg))
			continue;
		set[opt & 0xff] = 1;
		switch (opt) {
		case 'b':
			o->balance = ovl_cli_choice_opt(&cli, "--balance",
			    ovl_balance_names, optarg);
			break;
		case 'c':
			if (parse_cost(optarg, o) != 0)
				usage_num("--cost", optarg);
			break;
		case 'i':
			o->image_tokens = opt_u64("--image-tokens", optarg, 0,
			    1u << 24);
			break;
		case 'E':
			set_enc(o, optarg, "--image-encoder-cost");
			break;
		case 'j':
			o->json = 1;
			break;
		case 'm':
			o->mb = (uint32_t)opt_u64("--micro-batches", optarg, 1,
			    OVL_PLAN_MAX_MICRO_BATCHES);
			break;
		case 'p':
			o->pack = ovl_cli_choice_opt(&cli, "--pack",
			    ovl_pack_names, optarg);
			break;
		case 'B':
			if (strcmp(optarg, "16") != 0 && strcmp(optarg, "32") != 0)
				usage_num("--token-bits", optarg);
			o->token_bits = (unsigned)atoi(optarg);
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
			    OVL_PLAN_MAX_STEP_TOKENS);
			break;
		case 'u':
			o->uniform = 1;
			break;
		case 'w':
			o->window = (uint32_t)opt_u64("--window", optarg, 1,
			    MAX_WINDOW);
			break;
		case 'I':
			o->input = optarg;
			break;
		case 'O':
			o->output = optarg;
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
	cp_check(o);
}

/* ---- main ----------------------------------------------------------- */

/* The step cutter's configuration, as ovl-mix makes it from a plan. */
static void
stepcfg(struct construct_opts *o, struct ovl_stepcfg *cfg)
{
	struct ovl_plan p;

	memset(&p, 0, sizeof(p));
	p.ranks = o->ranks;
	p.micro_batches = o->mb;
	p.step_tokens = o->step_tokens;
	p.nseq = o->nst;
	p.seq_at = o->at;
	p.seq_len = o->sl;
	p.uniform = o->uniform ? 1 : 0;	/* fixed shapes: every step full */
	ovl_plan_stepcfg(&p, cfg);	/* points into o, not into p */
}

static void
flush_writer(void *w)
{
	ovl_writer_flush(w);
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
			doc_frame(c, &f);
			break;
		case OVL_IMAGE:
			on_image(c, &f);
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
	char inname[512], outname[512], *bal, *pack;

	bal = ovl_cli_choices(ovl_balance_names, ", ", " or ");
	pack = ovl_cli_choices(ovl_pack_names, ", ", " or ");
	cli.help = ovl_cli_help_fill(help, (const char *[]){ bal,
	    ovl_balance_names[BALANCE_DEFAULT], pack,
	    ovl_pack_names[PACK_DEFAULT], NULL });
	free(bal);
	free(pack);
	ovl_cli_init(&cli);
	ovl_cli_stage_memory();
	parse_args(argc, argv, &o);
	memset(&c, 0, sizeof(c));
	c.o = &o;
	c.pad_id = o.pad_id;
	c.tok_width = 4;	/* until the META says (on_meta) */
	stepcfg(&o, &c.cfg);
	c.seqlen_text = ovl_stepcfg_text(&c.cfg);
	ovl_stepcut_init(&c.cut, &c.cfg);
	if (o.resume_path != NULL)
		load_resume(&c, o.resume_path);
	if (o.stats_path != NULL &&
	    (c.stats = fopen(o.stats_path, "w")) == NULL)
		ovl_err(OVL_EXIT_DATA, "cannot open '%s'", o.stats_path);
	ovl_net_check(o.input, OVL_NET_READ);
	ovl_net_check(o.output, OVL_NET_WRITE);
	ovl_net_redirect(o.input != NULL ? o.input : "-", OVL_NET_READ,
	    STDIN_FILENO, inname, sizeof(inname));
	ovl_net_redirect(o.output != NULL ? o.output : "-", OVL_NET_WRITE,
	    STDOUT_FILENO, outname, sizeof(outname));
	if (!o.json) {
		ovl_io_refuse_tty(STDOUT_FILENO);
		c.wr = ovl_writer_new(STDOUT_FILENO, outname);
	} else {
		static char obuf[1 << 16];
		setvbuf(stdout, obuf, _IOFBF, sizeof(obuf));
	}
	if (c.wr != NULL && o.relink.backup != NULL)
		ovl_writer_backup(c.wr, o.relink.backup, o.relink.committed,
		    o.relink.max != 0 ? o.relink.max : OVL_RELINK_BACKUP_MAX);
	c.rd = ovl_reader_new(STDIN_FILENO, inname, 0);
	if (o.relink.relink)
		ovl_reader_relink(c.rd);
	/* a stream that starts before the checkpoint is read from it on */
	if (o.resume_path != NULL)
		ovl_reader_resume_at(c.rd, c.resume_n);
	/* sequences made so far go out before waiting for more documents */
	if (c.wr != NULL)
		ovl_reader_on_idle(c.rd, flush_writer, c.wr);
	ovl_reader_expect(c.rd, &(struct ovl_expect){
	    .meta_keys = "vocab eod", .kinds = 1u << OVL_DOC |
	    1u << OVL_CHUNK_END | 1u << OVL_BARRIER | 1u << OVL_STATE |
	    1u << OVL_IMAGE, .what = "a stream of documents", .checks = OVL_EXPECT_DOC });
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
	free(c.seqlen_text);
	ovl_buf_free(&c.arena);
	ovl_u32vec_free(&c.jtok);
	free(c.jpiece);
	ovl_u32vec_free(&c.jpos);
	ovl_u32vec_free(&c.jcu);
	ovl_u32vec_free(&c.cpcu);
	while (c.nheld > 0)
		held_pop(&c);
	free(c.held);
	free(c.wgroup);
	free(c.run_id);
	if (c.img_dropped > 0)
		ovl_info(1, "%" PRIu64 " images whose runs were cut off their "
		    "documents (long-docs=truncate) left out", c.img_dropped);
	images_free(&c);
	ekeys_free();
	hybrid_free();
	{
		struct stepwork *w = &c.sw;
		free(w->idx); free(w->len); free(w->cost); free(w->scratch);
		free(w->rank); free(w->bin); free(w->bin2); free(w->order);
		free(w->rlen); free(w->rbin);
		free(w->ulen); free(w->ufirst); free(w->uperm); free(w->bin_rank); free(w->bin_mb);
		free(w->rcost); free(w->nmb); free(w->nmb_none); free(w->rfirst);
		free(w->rtok); free(w->extra); free(w->parts); free(w->frags);
		free(w->plen); free(w->pidx); free(w->cfirst); free(w->copen);
		free(w->cord); free(w->clen); free(w->bcost); free(w->brank);
		free(w->bmb); free(w->rcost2);
		free(w->cpcost); free(w->cost2); free(w->cpmin);
		free(w->cpseq);
		free(w->hgroup);
	}
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}

