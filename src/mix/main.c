/*
 * ovl-mix: options, the plan commands, setup and the main loop. See mix.h.
 */
#include "mix.h"

static struct ovl_cli cli = {
	"ovl-mix",
	"ovl-mix [options] PLAN INPUT...\n"
	"ovl-mix --check PLAN\n"
	"ovl-mix --list-sources PLAN\n"
	"ovl-mix --source-args NAME PLAN\n"
	"ovl-mix --get KEY [--get KEY ...] PLAN",
	NULL,	/* help, with the choices' names (main) */
};

static const char help[] =
	"Mix the DOC streams of a plan's sources into one stream.\n"
	"INPUT is NAME=PATH (a FIFO, a file, - or a tcp: endpoint), one per\n"
	"partition of each source, in partition order.\n"
	"  --by UNIT             %s (default %s): what the weights count\n"
	"  --every K             a checkpoint every K steps (plan: checkpoint every=)\n"
	"  --resume FILE         continue from a mix STATE text\n"
	"  --reopen              wait for a new writer when an input fails\n"
	"  --stats FILE          per-input statistics as JSON, rewritten every second\n"
	"  --stats-format F    json (default) or kv: flat \"key value\" lines\n"
	"  --json                JSON lines for people instead of frames\n"
	"  --output SPEC         write SPEC (a file, FIFO or tcp: endpoint), not\n"
	"                        standard output\n"
	"  --check               validate the plan and print it normalized\n"
	"  --list-sources        name, partitions, shadows, on-exhaust per source (NUL-separated)\n"
	"  --source-args NAME    the ovl-source arguments of a source (NUL-separated)\n"
	"  --get KEY             a plan value, NUL-terminated (checkpoint.dir, ...);\n"
	"                        repeated: one word per KEY, empty when unset\n"
	OVL_NET_HELP
	OVL_RELINK_HELP
	"  -v, --verbose         per-input statistics on stderr at the end\n"
	"  -q, --quiet           only errors\n"
	"  -h, --help            this help\n"
	"  -V, --version         the version\n";

enum {
	O_BY = 256, O_EVERY, O_RESUME, O_REOPEN, O_STATS, O_JSON, O_CHECK,
	O_LIST, O_ARGS, O_GET, O_STATS_FMT, O_OUTPUT
};

static const struct option longopts[] = {
	OVL_CLI_LONGOPTS,
	{ "by", required_argument, NULL, O_BY },
	{ "every", required_argument, NULL, O_EVERY },
	{ "resume", required_argument, NULL, O_RESUME },
	{ "reopen", no_argument, NULL, O_REOPEN },
	{ "stats", required_argument, NULL, O_STATS },
	{ "stats-format", required_argument, NULL, O_STATS_FMT },
	{ "json", no_argument, NULL, O_JSON },
	{ "check", no_argument, NULL, O_CHECK },
	{ "list-sources", no_argument, NULL, O_LIST },
	{ "source-args", required_argument, NULL, O_ARGS },
	{ "get", required_argument, NULL, O_GET },
	{ "output", required_argument, NULL, O_OUTPUT },
	OVL_NET_LONGOPTS,
	OVL_RELINK_LONGOPTS,
	{ NULL, 0, NULL, 0 }
};


/* ---- the plan commands ------------------------------------------------- */

static int
cmd_check(const struct mix_opts *o)
{
	struct ovl_plan *p = load_plan(o->plan, OVL_PLAN_TOKENIZERS);

	if (ovl_plan_print(p, stdout) != 0)
		ovl_io_check_stdout();
	ovl_plan_free(p);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}

static void
put0(const char *s)
{
	fputs(s, stdout);
	putchar('\0');
}

static int
cmd_list(const struct mix_opts *o)
{
	struct ovl_plan *p = load_plan(o->plan, 0);
	char buf[32];
	size_t i;

	for (i = 0; i < p->nsources; i++) {
		put0(p->sources[i].name);
		snprintf(buf, sizeof(buf), "%u", p->sources[i].partitions);
		put0(buf);
		snprintf(buf, sizeof(buf), "%u", p->sources[i].shadows);
		put0(buf);
		put0(ovl_plan_exhaust_name(p->sources[i].on_exhaust));
	}
	(void)fflush(stdout);
	ovl_io_check_stdout();
	ovl_plan_free(p);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}

static int
cmd_args(const struct mix_opts *o)
{
	struct ovl_plan *p = load_plan(o->plan, 0);
	int i = ovl_plan_find(p, o->args_name, strlen(o->args_name));
	size_t argc, k;
	char **argv;

	if (i < 0) {
		ovl_plan_free(p);
		ovl_errx(OVL_EXIT_USAGE, "%s: no source named '%s'", o->plan,
		    o->args_name);
	}
	argv = ovl_plan_source_argv(p, (size_t)i, &argc);
	for (k = 0; k < argc; k++)
		put0(argv[k]);
	(void)fflush(stdout);
	ovl_io_check_stdout();
	ovl_plan_argv_free(argv);
	ovl_plan_free(p);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}

/*
 * get_value: KEY's value in the plan P as the stages see it (paths
 * resolved), or NULL when the plan leaves it unset; numbers are written
 * into BUF. Exits 2 naming the known keys when KEY is none of them.
 */
static const char *
get_value(struct ovl_plan *p, const char *k, char *buf, size_t size)
{
	const char *str = NULL;
	uint64_t num = 0;
	int isnum = 0, i;

	if (strcmp(k, "checkpoint.dir") == 0)
		str = p->ckpt_dir;
	else if (strcmp(k, "checkpoint.every") == 0)
		num = p->ckpt_every, isnum = 1;
	else if (strcmp(k, "output.format") == 0)
		str = p->out_format;
	else if (strcmp(k, "output.path") == 0)
		str = p->out_path;
	else if (strcmp(k, "output.manifest") == 0)
		str = p->out_manifest;
	else if (strcmp(k, "output.per-rank") == 0)
		str = p->out_per_rank;
	else if (strcmp(k, "ranks") == 0)
		num = p->ranks, isnum = 1;
	else if (strcmp(k, "micro-batches") == 0)
		num = p->micro_batches, isnum = 1;
	else if (strcmp(k, "stop.steps") == 0)
		num = p->stop_steps, isnum = 1;
	else if (strcmp(k, "stop.tokens") == 0)
		num = p->stop_tokens, isnum = 1;
	else if (strcmp(k, "sources") == 0)
		num = p->nsources, isnum = 1;
	else if (strcmp(k, "hosts.loaders") == 0)
		str = p->hosts_loaders;
	else if (strcmp(k, "hosts.mixer") == 0)
		str = p->hosts_mixer;
	else if (strcmp(k, "hosts.trainers") == 0)
		str = p->hosts_trainers;
	else if (strcmp(k, "transport") == 0)
		str = p->transport;
	else if (strcmp(k, "checkpoint.verify-all") == 0)
		str = p->ckpt_verify_all < 0 ? NULL :
		    p->ckpt_verify_all ? "yes" : "no";
	else if (strncmp(k, "source.", 7) == 0 && strlen(k) > 13 &&
	    strcmp(k + strlen(k) - 6, ".hosts") == 0 &&
	    (i = ovl_plan_find(p, k + 7, strlen(k) - 13)) >= 0)
		str = p->sources[i].hosts;
	else {
		ovl_plan_free(p);
		ovl_errx(OVL_EXIT_USAGE, "--get: unknown key '%s' (known: "
		    "checkpoint.dir, checkpoint.every, output.format, output.path, "
		    "output.manifest, output.per-rank, ranks, micro-batches, "
		    "stop.steps, stop.tokens, sources, hosts.loaders, "
		    "hosts.mixer, hosts.trainers, source.NAME.hosts, transport, "
		    "checkpoint.verify-all)", k);
	}
	if (isnum && num != 0) {
		snprintf(buf, size, "%llu", (unsigned long long)num);
		str = buf;
	}
	return str;
}

/*
 * --get KEY...: the plan's value of each KEY, NUL-terminated, in the order
 * asked; an unset key is an empty word, or nothing at all when it is the
 * only key. For the supervisor, which must never parse plan text itself,
 * and asks for every value it needs at once.
 */
static int
cmd_get(const struct mix_opts *o)
{
	struct ovl_plan *p = load_plan(o->plan, OVL_PLAN_NOGLOB);
	const char *str;
	char buf[32];
	size_t k;

	for (k = 0; k < o->nget; k++)	/* every key known before a word */
		(void)get_value(p, o->get_keys[k], buf, sizeof(buf));
	for (k = 0; k < o->nget; k++) {
		str = get_value(p, o->get_keys[k], buf, sizeof(buf));
		if (str != NULL)
			put0(str);
		else if (o->nget > 1)
			put0("");
	}
	(void)fflush(stdout);
	ovl_io_check_stdout();
	ovl_plan_free(p);
	free(o->get_keys);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}

/* ---- setup and the main loop --------------------------------------------- */

static void
setup_inputs(struct mixer *m)
{
	const struct mix_opts *o = m->o;
	size_t i, k;
	uint32_t *count;
	const char *eq;
	int si;

	m->nin = (size_t)o->ninputs;
	{
		char what[64];

		snprintf(what, sizeof(what), "%zu inputs", m->nin);
		ovl_io_want_fds(m->nin, what);
	}
	m->in = ovl_xcalloc(m->nin, sizeof(*m->in));
	m->pfd = ovl_xcalloc(m->nin, sizeof(*m->pfd));
	m->pin = ovl_xcalloc(m->nin, sizeof(*m->pin));
	count = ovl_xcalloc(m->nsrc, sizeof(*count));
	for (i = 0; i < m->nin; i++) {
		struct input *in = &m->in[i];

		eq = strchr(o->inputs[i], '=');
		if (eq == NULL || eq == o->inputs[i] || eq[1] == '\0')
			ovl_cli_usagex(&cli, "bad input '%s': expected NAME=PATH",
			    o->inputs[i]);
		si = ovl_plan_find(m->plan, o->inputs[i],
		    (size_t)(eq - o->inputs[i]));
		if (si < 0)
			ovl_cli_usagex(&cli, "input '%s': the plan has no source "
			    "'%.*s'", o->inputs[i], (int)(eq - o->inputs[i]),
			    o->inputs[i]);
		in->label = ovl_xstrdup(o->inputs[i]);
		if (strcmp(eq + 1, "-") == 0) {
			if (m->stdin_used++)
				ovl_cli_usagex(&cli, "standard input given twice");
			in->path = NULL;
		} else
			in->path = ovl_xstrdup(eq + 1);
		if (ovl_net_is_endpoint(in->path))
			in->net = ovl_net_new(in->path, OVL_NET_READ);
		in->src = (uint32_t)si;
		in->part = count[si]++;
	}
	for (k = 0; k < m->nsrc; k++) {
		struct source *s = &m->src[k];

		if (count[k] == 0)
			ovl_cli_usagex(&cli, "no input for source '%s' (give "
			    "%s=PATH)", s->ps->name, s->ps->name);
		s->nparts = count[k];
		ovl_plan_shuffle_window(m->plan, k, &s->win);
		s->in = ovl_xcalloc(count[k], sizeof(*s->in));
		if (count[k] != s->ps->partitions)
			ovl_info(1, "source '%s': %u inputs, the plan says "
			    "partitions=%u", s->ps->name, count[k],
			    s->ps->partitions);
	}
	for (i = 0; i < m->nin; i++)
		m->src[m->in[i].src].in[m->in[i].part] = &m->in[i];
	free(count);
	if (m->stdin_used) {
		m->stdin_flags = fcntl(STDIN_FILENO, F_GETFL);
	}
	/* every listener at once: a source may connect before its turn */
	for (i = 0; i < m->nin; i++)
		if (m->in[i].net != NULL)
			ovl_net_listen(m->in[i].net);
}

/*
 * Open every input and read its META (they must agree). The network
 * inputs are taken at once (ovl_net_wait_all): a source that starts late,
 * or a peer that says nothing, holds no other input's peer back.
 */
static void
open_inputs(struct mixer *m)
{
	struct ovl_net **nets = ovl_xcalloc(m->nin + 1, sizeof(*nets));
	int *fds = ovl_xcalloc(m->nin + 1, sizeof(*fds));
	const char *first = NULL;
	size_t i, k = 0;

	for (i = 0; i < m->nin; i++)
		if (m->in[i].net != NULL) {
			nets[k++] = m->in[i].net;
			if (first == NULL)
				first = m->in[i].label;
		}
	if (k > 0 && ovl_net_wait_all(nets, k, fds) != 0)
		ovl_err(OVL_EXIT_DATA, "input %s", first);
	for (i = 0, k = 0; i < m->nin; i++)
		open_input(&m->in[i], m->in[i].net != NULL ? fds[k++] : -1);
	free(nets);
	free(fds);
	/* every input's META first: they must agree */
	m->starting = 1;
	for (i = 0; i < m->nin; i++)
		if (m->in[i].need_meta)
			wait_for(m, &m->in[i]);
	m->starting = 0;
}

static void
run(struct mixer *m)
{
	struct ovl_buf st = { NULL, 0, 0 };
	struct ovl_doc d;
	struct input *in;
	uint64_t ndocs = 0;
	int k, rc;

	m->end_reason = "every source ended";
	for (;;) {
		if (m->plan->stop_tokens != 0 &&
		    m->tokens >= m->plan->stop_tokens) {
			m->end_reason = "stop tokens= reached";
			break;
		}
		k = select_source(m);
		if (k < 0) {
			size_t i;
			int any = 0;
			for (i = 0; i < m->nsrc; i++)
				any |= m->active[i];
			if (any)
				ovl_warnx("no remaining source has weight at %"
				    PRIu64 ": ending", count_of(m));
			m->end_reason = any ? "no weight left" :
			    "every source ended";
			break;
		}
		in = take_doc(m, &m->src[k], &d);
		if (in == NULL) {
			struct source *s = &m->src[k];

			if (s->ps->on_exhaust == OVL_EXHAUST_DROP) {
				drop_source(m, (size_t)k);
				continue;
			}
			if (s->ps->on_exhaust == OVL_EXHAUST_REPEAT)
				ovl_errx(OVL_EXIT_DATA, "source '%s' ended, but "
				    "the plan says on-exhaust=repeat (is it "
				    "running with --repeat?)", s->ps->name);
			s->state = ST_EXHAUSTED;
			m->active[k] = 0;
			m->end_reason = "a source with on-exhaust=stop ended";
			ovl_info(1, "source '%s' exhausted: the stream ends",
			    s->ps->name);
			break;
		}
		rc = emit_doc(m, (size_t)k, in, &d, &st);
		if (rc != 1) {
			m->end_reason = "stop steps= reached";
			break;
		}
		if ((++ndocs & 1023) == 0 && m->o->stats != NULL &&
		    ovl_io_since(&m->last_stats) >= 1.0)
			write_stats(m, 0);
	}
	ovl_buf_free(&st);
}

static void
parse_opts(struct mix_opts *o, int argc, char **argv)
{
	int c;
	const char *needs_plan_only = NULL;

	memset(o, 0, sizeof(*o));
	o->by = -1;
	while ((c = getopt_long(argc, argv, OVL_CLI_SHORTOPTS, longopts,
	    NULL)) != -1) {
		if (ovl_cli_common(&cli, c) || ovl_net_cli(&cli, c, optarg) ||
		    ovl_relink_cli(&cli, &o->relink, c, optarg))
			continue;
		switch (c) {
		case O_OUTPUT:
			o->output = optarg;
			break;
		case O_BY:
			o->by = ovl_cli_choice_opt(&cli, "--by", ovl_plan_mixbys,
			    optarg);
			break;
		case O_EVERY:
			if (ovl_num_size(optarg, &o->every) != 0)
				ovl_cli_usagex(&cli, "bad --every '%s'", optarg);
			o->has_every = 1;
			break;
		case O_RESUME:
			o->resume = optarg;
			break;
		case O_REOPEN:
			o->reopen = 1;
			break;
		case O_STATS_FMT:
			if (strcmp(optarg, "kv") == 0)
				o->stats_kv = 1;
			else if (strcmp(optarg, "json") != 0)
				ovl_cli_usagex(&cli, "unknown --stats-format '%s' "
				    "(json, kv)", optarg);
			break;
		case O_STATS:
			o->stats = optarg;
			break;
		case O_JSON:
			o->json = 1;
			break;
		case O_CHECK:
			o->check = 1;
			needs_plan_only = "--check";
			break;
		case O_LIST:
			o->list = 1;
			needs_plan_only = "--list-sources";
			break;
		case O_ARGS:
			o->args_name = optarg;
			needs_plan_only = "--source-args";
			break;
		case O_GET:
			o->get_keys = ovl_xrealloc(o->get_keys,
			    (o->nget + 1) * sizeof(*o->get_keys));
			o->get_keys[o->nget++] = optarg;
			needs_plan_only = "--get";
			break;
		default:
			ovl_cli_usage(&cli);
		}
	}
	if (o->check + o->list + (o->args_name != NULL) +
	    (o->nget > 0) > 1)
		ovl_cli_usagex(&cli, "--check, --list-sources, --source-args and "
		    "--get exclude each other");
	if (optind >= argc)
		ovl_cli_usagex(&cli, "a PLAN is needed");
	o->plan = argv[optind];
	if (needs_plan_only != NULL) {
		if (argc - optind != 1)
			ovl_cli_usagex(&cli, "%s takes the PLAN only",
			    needs_plan_only);
		return;
	}
	if (argc - optind < 2)
		ovl_cli_usagex(&cli, "at least one INPUT (NAME=PATH) is needed");
	o->inputs = argv + optind + 1;
	o->ninputs = argc - optind - 1;
}

int
main(int argc, char **argv)
{
	struct mix_opts o;
	struct mixer m;
	char outname[512], *by;
	size_t i;

	by = ovl_cli_choices(ovl_plan_mixbys, ", ", " or ");
	cli.help = ovl_cli_help_fill(help, (const char *[]){ by,
	    ovl_plan_mixbys[OVL_MIXBY_TOKENS], NULL });
	free(by);
	ovl_cli_init(&cli);
	ovl_cli_stage_memory();
	parse_opts(&o, argc, argv);
	if (o.check)
		return cmd_check(&o);
	if (o.list)
		return cmd_list(&o);
	if (o.args_name != NULL)
		return cmd_args(&o);
	if (o.nget > 0)
		return cmd_get(&o);

	memset(&m, 0, sizeof(m));
	m.o = &o;
	m.plan = load_plan(o.plan, OVL_PLAN_NOGLOB);
	m.by = o.by >= 0 ? o.by : (int)m.plan->mix_by;
	m.every = o.has_every ? o.every : m.plan->ckpt_every;
	m.nsrc = m.plan->nsources;
	m.src = ovl_xcalloc(m.nsrc, sizeof(*m.src));
	m.target = ovl_xcalloc(m.nsrc, sizeof(double));
	m.w8 = ovl_xcalloc(m.nsrc, sizeof(double));
	m.active = ovl_xcalloc(m.nsrc, 1);
	for (i = 0; i < m.nsrc; i++) {
		m.src[i].ps = &m.plan->sources[i];
		m.src[i].long_policy = ovl_plan_long_docs(m.plan, i);
		m.src[i].run_id = OVL_STEP_NORUN;
		m.active[i] = 1;
	}
	ovl_plan_stepcfg(m.plan, &m.cfg);
	ovl_stepcut_init(&m.cut, &m.cfg);
	if (o.resume != NULL)
		resume_from(&m, o.resume);
	if (!o.json && o.output == NULL)
		ovl_io_refuse_tty(STDOUT_FILENO);
	setup_inputs(&m);
	ovl_net_check(o.output, OVL_NET_WRITE);
	ovl_net_redirect(o.output != NULL ? o.output : "-", OVL_NET_WRITE,
	    STDOUT_FILENO, outname, sizeof(outname));
	if (!o.json && o.output != NULL)
		ovl_io_refuse_tty(STDOUT_FILENO);
	clock_gettime(CLOCK_MONOTONIC, &m.t0);
	m.last_stats = m.t0;
	open_inputs(&m);
	if (!o.json) {
		m.w = ovl_writer_new(STDOUT_FILENO, outname);
		if (o.relink.backup != NULL)
			ovl_writer_backup(m.w, o.relink.backup,
			    o.relink.committed, o.relink.max != 0 ?
			    o.relink.max : OVL_RELINK_BACKUP_MAX);
	}
	write_meta(&m);
	run(&m);
	if (o.json) {
		printf("{\"kind\":\"end\",\"docs\":%" PRIu64 ",\"tokens\":%" PRIu64
		    "}\n", m.pos, m.tokens);
		(void)fflush(stdout);
		ovl_io_check_stdout();
	} else
		ovl_writer_end(m.w);
	write_stats(&m, 1);
	report(&m);
	if (m.stdin_used && m.stdin_flags >= 0)
		(void)fcntl(STDIN_FILENO, F_SETFL, m.stdin_flags);
	ovl_writer_free(m.w);
	for (i = 0; i < m.nin; i++) {
		ovl_reader_free(m.in[i].r);
		ovl_net_free(m.in[i].net);
		if (m.in[i].path != NULL)
			close(m.in[i].fd);
		free(m.in[i].label);
		free(m.in[i].path);
		ovl_buf_free(&m.in[i].hold);
		ovl_buf_free(&m.in[i].himg);
		ovl_u32vec_free(&m.in[i].hruns);
	}
	for (i = 0; i < m.nsrc; i++) {
		free(m.src[i].in);
		ovl_buf_free(&m.src[i].meta);
	}
	free(m.in);
	free(m.src);
	free(m.pfd);
	free(m.pin);
	free(m.bars);
	ovl_u32vec_free(&m.trunc);
	free(m.target);
	free(m.w8);
	free(m.active);
	free(m.tokenizer);
	ovl_plan_free(m.plan);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}

