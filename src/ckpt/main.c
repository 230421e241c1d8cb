/*
 * ovl-ckpt: the committing sink and the subcommands that read its
 * checkpoint directory. main dispatches; each subcommand parses its own
 * options. See ovl-ckpt(1).
 */
#include "ckpt.h"

static struct ovl_cli cli = {
	"ovl-ckpt",
	"ovl-ckpt [options] --dir CKPTDIR [PLAN]\n"
	"ovl-ckpt show [--json | --list | --print0] CKPTDIR [--at N ...]\n"
	"ovl-ckpt diff CKPTDIR N M\n"
	"ovl-ckpt compact CKPTDIR\n"
	"ovl-ckpt restore [--print0] [--skip-steps A-B | --step S] [--wait S] [--verify-all] [--adopt] [--fresh-ok] [--live DIR] CKPTDIR [--at N]\n"
	"ovl-ckpt verify CKPTDIR [--at N] OUTPUT ...\n"
	"ovl-ckpt summary [--json] CKPTDIR",
	NULL,	/* the formats' names from the plan's (main) */
};

static const char help[] =
	"Write packed sequences and commit differential checkpoints.\n"
	"  -d, --dir CKPTDIR       checkpoint directory (or the plan's checkpoint dir=)\n"
	"  -f, --format FMT        %s (files under -o)\n"
	"  -o, --output PREFIX     output prefix (the file itself for frames)\n"
	"  -p, --per-rank PATTERN  one frame stream per rank, e.g. out/rank%d\n"
	"  -m, --manifest FILE     provenance of every sequence, as JSON lines\n"
	"  -r, --resume N|auto     continue after checkpoint N (ovl-ckpt restore);\n"
	"                          auto: after the last one, or fresh if none\n"
	"      --overwrite-output  files of another checkpoint directory's run\n"
	"                          may be overwritten (refused otherwise)\n"
	"  -b, --base-every M      a full base record every M records (16)\n"
	"  -s, --skip-steps A-B    drop the sequences of steps A..B\n"
	"  -R, --rank R            only the sequences of rank R\n"
	"  -j, --json              standard output as JSON lines (for people)\n"
	"  -W, --wait-readers S    a stream output waits S s for its reader (60;\n"
	"                          0: forever)\n"
	"      --run-ahead N       a rank stream holds at most N steps its reader\n"
	"                          has not taken (0, the default: no bound)\n"
	"  -i, --input SPEC        read SPEC (a file, FIFO or endpoint), not\n"
	"                          standard input\n"
	"  -T, --trainer-hosts LIST  rank streams on tcp-listen: endpoints take\n"
	"                          their reader from its trainer host only\n"
	"      --step-from-readers FILE  per-rank endpoints: take every rank's\n"
	"                          reader first; each says the step it needs next;\n"
	"                          restore at or before it, the lines into FILE\n"
	"Outputs (-o for frames, -p, -m) may be endpoints too.\n"
	OVL_NET_HELP
	"  --relink                after its writer dies, read its successor\n"
	"                          (ovl(7) Recovery; ovl-run passes it)\n"
	"  -h, --help, -V, --version, -v, --verbose, -q, --quiet\n"
	"Subcommands, each with its own options (ovl-ckpt SUBCOMMAND --help):\n"
	"  show      a checkpoint's state: the last one, or --at N\n"
	"  diff      what changed from checkpoint N to checkpoint M\n"
	"  compact   fold the log into one base record\n"
	"  restore   cut the log and the outputs back to a checkpoint, print how to resume\n"
	"  verify    check output files against a checkpoint's hash chains\n"
	"  summary   what the run did (sources, steps, balance, restarts, time)\n";

static const struct {
	const char	*name;
	int		(*main)(int argc, char **argv);
} subcommands[] = {
	{ "show", cmd_show },
	{ "diff", cmd_diff },
	{ "compact", cmd_compact },
	{ "restore", cmd_restore },
	{ "verify", cmd_verify },
	{ "summary", cmd_summary },
};
static struct ovl_plan *the_plan;	/* options point into it until exit */

static void
apply_plan(struct ckpt_opts *o, const char *path, int *format_set,
    int *wait_set, int *ahead_set)
{
	struct ovl_plan *p;
	char err[1024];

	p = ovl_plan_loadf(path, OVL_PLAN_NOGLOB, err, sizeof(err));
	if (p == NULL)
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	the_plan = p;
	/* options win over the plan; the plan's strings live until exit */
	if (o->dir == NULL && p->ckpt_dir != NULL)
		o->dir = p->ckpt_dir;
	if (o->base_every == 0 && p->ckpt_base != 0)
		o->base_every = p->ckpt_base;
	/* the plan's output line counts only when --format is not given */
	if (!*format_set && p->out_format != NULL) {
		o->format = parse_format(p->out_format);
		if (o->format < 0)
			ovl_errx(OVL_EXIT_USAGE, "%s: unknown output format '%s'",
			    path, p->out_format);
		*format_set = 1;
		if (o->prefix == NULL && p->out_path != NULL)
			o->prefix = p->out_path;
	}
	if (o->manifest == NULL && p->out_manifest != NULL)
		o->manifest = p->out_manifest;
	if (o->per_rank == NULL && p->out_per_rank != NULL)
		o->per_rank = p->out_per_rank;
	if (o->trainer_hosts == NULL && p->hosts_trainers != NULL &&
	    o->per_rank != NULL && strncmp(o->per_rank, "tcp-listen:", 11) == 0)
		o->trainer_hosts = p->hosts_trainers;
	if (!*wait_set && p->has_out_wait_readers) {
		o->wait_readers = p->out_wait_readers;
		*wait_set = 1;
	}
	if (!*ahead_set && p->has_out_run_ahead) {
		o->run_ahead = p->out_run_ahead;
		*ahead_set = 1;
	}
	if (p->out_overwrite == 1)
		o->overwrite = 1;
	o->plan_ranks = p->ranks;
	/* p is deliberately kept: o points into it */
}

/* --step-from-readers: per-rank endpoints only, the ranks from the plan. */
static void
check_readers(const struct ckpt_opts *o)
{
	char *r0;

	if (o->per_rank == NULL || o->plan_ranks == 0)
		ovl_cli_usagex(&cli, "--step-from-readers needs --per-rank "
		    "endpoints and a PLAN (its ranks)");
	r0 = pattern_path(o->per_rank, 0);
	if (!ovl_net_is_endpoint(r0))
		ovl_cli_usagex(&cli, "--step-from-readers: '%s' is not an "
		    "endpoint (a FIFO's reader cannot answer: ovl-ckpt restore "
		    "--step)", r0);
	free(r0);
	if (o->format != FMT_NONE || o->manifest != NULL || o->rank_set)
		ovl_cli_usagex(&cli, "--step-from-readers is for per-rank "
		    "streams only: file outputs hold every step");
	if (o->resume_set || o->resume_auto || o->nskip)
		ovl_cli_usagex(&cli, "--step-from-readers chooses the checkpoint "
		    "and the steps to skip: not with --resume or --skip-steps");
}

int
main(int argc, char **argv)
{
	struct ckpt_opts o;
	uint64_t v;
	size_t k;
	int c, format_set = 0, wait_set = 0, ahead_set = 0, stream;
	char *fmts;

	fmts = ovl_cli_choices(ovl_plan_out_formats, ", ", " or ");
	cli.help = ovl_cli_help_fill(help, (const char *[]){ fmts, NULL });
	free(fmts);
	ovl_cli_init(&cli);
	ovl_cli_stage_memory();
	/* the sink's streams are for trainers and files: never a ring */
	(void)unsetenv("OVL_TRANSPORT");
	memset(&o, 0, sizeof(o));
	o.format = FMT_NONE;
	for (k = 0; argc > 1 && k < sizeof(subcommands) / sizeof(*subcommands);
	    k++)
		if (strcmp(argv[1], subcommands[k].name) == 0) {
			/* the subcommand sees "ovl-ckpt" as argv[0] */
			argv[1] = argv[0];
			return subcommands[k].main(argc - 1, argv + 1);
		}
	while ((c = ckpt_getopt(&cli, NULL, argc, argv, "d:f:o:p:m:r:b:s:jR:W:i:T:",
	    "FXY")) != -1) {
		switch (c) {
		case 'X':
			o.overwrite = 1;
			break;
		case 'F':
			o.readers_file = optarg;
			break;
		case 'Y':
			if (ovl_num_u64_max(optarg, RUN_AHEAD_MAX,
			    &o.run_ahead) != 0)
				ovl_cli_usagex(&cli, "bad --run-ahead '%s' (steps, "
				    "at most %u; 0: no bound)", optarg,
				    RUN_AHEAD_MAX);
			ahead_set = 1;
			break;
		default:
			if (!ovl_relink_cli(&cli, &o.relink, c, optarg) ||
			    o.relink.backup != NULL)
				ovl_cli_usagex(&cli, "unknown option");
			break;
		case 'i':
			o.input = optarg;
			break;
		case 'T':
			if (*optarg == '\0' || strpbrk(optarg, " \t/") != NULL ||
			    strstr(optarg, ",,") != NULL ||
			    optarg[strlen(optarg) - 1] == ',' || *optarg == ',')
				ovl_cli_usagex(&cli, "bad --trainer-hosts '%s' "
				    "(host names or addresses, comma-separated)",
				    optarg);
			o.trainer_hosts = optarg;
			break;
		case 'd':
			o.dir = optarg;
			break;
		case 'f':
			o.format = parse_format(optarg);
			if (o.format < 0)
				ovl_cli_usagex(&cli, "unknown format '%s' (%s)",
				    optarg, ovl_cli_choices(ovl_plan_out_formats, ", ", ", "));
			format_set = 1;
			break;
		case 'o':
			o.prefix = optarg;
			break;
		case 'p':
			if (!pattern_ok(optarg))
				ovl_cli_usagex(&cli, "--per-rank '%s' needs "
				    "exactly one %%d", optarg);
			o.per_rank = optarg;
			break;
		case 'm':
			o.manifest = optarg;
			break;
		case 'r':
			if (strcmp(optarg, "auto") == 0) {
				o.resume_auto = 1;
				o.resume_set = 0;
				break;
			}
			o.resume_auto = 0;
			if (ovl_num_u64(optarg, &o.resume) != 0)
				ovl_cli_usagex(&cli, "bad --resume '%s'", optarg);
			o.resume_set = 1;
			break;
		case 'b':
			if (ovl_num_u64(optarg, &o.base_every) != 0 ||
			    o.base_every == 0)
				ovl_cli_usagex(&cli, "bad --base-every '%s'",
				    optarg);
			break;
		case 's':
			if (ovl_num_range(optarg, &o.skip[0], &o.skip[1]) != 0)
				ovl_cli_usagex(&cli, "bad --skip-steps '%s' "
				    "(A-B)", optarg);
			o.nskip = 1;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'W':
			if (ovl_num_u64_max(optarg, 86400, &o.wait_readers) != 0)
				ovl_cli_usagex(&cli, "bad --wait-readers '%s' "
				    "(seconds)", optarg);
			wait_set = 1;
			break;
		case 'R':
			if (ovl_num_u64_max(optarg, MAX_RANKS - 1, &v) != 0)
				ovl_cli_usagex(&cli, "bad --rank '%s'", optarg);
			o.rank = (uint32_t)v;
			o.rank_set = 1;
			break;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc > 1)
		ovl_cli_usage(&cli);
	if (argc == 1)
		apply_plan(&o, argv[0], &format_set, &wait_set, &ahead_set);
	if (o.dir == NULL)
		ovl_cli_usagex(&cli, "no checkpoint directory (--dir, or the "
		    "plan's checkpoint dir=)");
	stream = o.format != FMT_NONE &&
	    (ckpt_formats[o.format]->flags & CKPT_FMT_STREAM);
	if (o.format != FMT_NONE && !stream && o.prefix == NULL)
		ovl_cli_usagex(&cli, "--format %s needs --output PREFIX",
		    fmt_label(o.format));
	if (stream && o.prefix == NULL)
		o.format = FMT_NONE;	/* frames on standard output */
	if (o.format == FMT_NONE && o.prefix != NULL)
		ovl_cli_usagex(&cli, "--output needs --format");
	if (o.per_rank != NULL && !pattern_ok(o.per_rank))
		ovl_cli_usagex(&cli, "per-rank pattern '%s' needs exactly one "
		    "%%d", o.per_rank);
	if (o.format != FMT_NONE && !stream && ovl_net_is_endpoint(o.prefix))
		ovl_cli_usagex(&cli, "--format %s writes files: an endpoint "
		    "takes frames (--format frames, or --per-rank)",
		    fmt_label(o.format));
	if (o.readers_file != NULL)
		check_readers(&o);
	ovl_net_check(o.input, OVL_NET_READ);
	ovl_net_check(o.format != FMT_NONE && stream ? o.prefix : NULL,
	    OVL_NET_WRITE);
	if (o.trainer_hosts != NULL && (o.per_rank == NULL ||
	    strncmp(o.per_rank, "tcp-listen:", 11) != 0))
		ovl_cli_usagex(&cli, "--trainer-hosts is for rank streams on "
		    "tcp-listen: endpoints (--per-rank)");
	if (o.per_rank != NULL) {
		char *r0 = pattern_path(o.per_rank, 0);
		char *e0 = rank_endpoint(r0, o.trainer_hosts, 0, 1);

		ovl_net_check(e0, OVL_NET_WRITE);
		free(e0);
		free(r0);
	}
	ovl_net_check(o.manifest, OVL_NET_WRITE);
	if (o.base_every == 0)
		o.base_every = 16;
	if (!wait_set)
		o.wait_readers = 60;
	c = run(&o);
	ovl_plan_free(the_plan);
	return c;
}

