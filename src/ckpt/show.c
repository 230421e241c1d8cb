/*
 * ovl-ckpt show and diff: a checkpoint's state, for people and supervisors.
 */
#include "ckpt.h"

static const struct ovl_cli show_cli = {
	"ovl-ckpt",
	"ovl-ckpt show [--json | --list | --print0] CKPTDIR [--at N ...]",
	"Show the state a checkpoint records: the last one, or N.\n"
	"  -a, --at N     checkpoint N, not the last (repeated: each in turn)\n"
	"  -j, --json     one JSON object (a line each)\n"
	"  -l, --list     one line per record of the log\n"
	"      --print0   NUL-separated key and value words, for a supervisor\n"
	"  -h, --help, -V, --version, -v, --verbose, -q, --quiet\n"
};

static const struct ovl_cli diff_cli = {
	"ovl-ckpt",
	"ovl-ckpt diff CKPTDIR N M",
	"What changed in the recorded state from checkpoint N to checkpoint M.\n"
	"  -h, --help, -V, --version, -v, --verbose, -q, --quiet\n"
};

/* ---- reading checkpoints: show, diff, compact, restore, verify ---- */

static const char *
rec_type(const struct ovl_ckrec *r)
{
	return r->type == OVL_CKPTREC_BASE ? "base" : "diff";
}

static void
show_list(const struct ovl_ckptlog *log, const char *dir)
{
	struct ovl_ckstate st = { 0 };
	const char *step;
	size_t i;

	printf("%-8s %-4s %10s %8s %10s %s\n", "n", "type", "offset", "bytes",
	    "step", "seqs");
	for (i = 0; i < log->nrec; i++) {
		log_state(dir, log, i, &st);
		step = ovl_kvsec_get(&st.sec[OVL_SEC_CKPT], "step");
		printf("%-8" PRIu64 " %-4s %10" PRIu64 " %8" PRIu32 " %10s %s%s\n",
		    log->rec[i].n, rec_type(&log->rec[i]), log->rec[i].offset,
		    OVL_CKPTREC_HDR_LEN + log->rec[i].len,
		    step != NULL ? step : "-",
		    ovl_kvsec_get(&st.sec[OVL_SEC_CKPT], "seqs") != NULL ?
		    ovl_kvsec_get(&st.sec[OVL_SEC_CKPT], "seqs") : "-",
		    log->rec[i].flags & OVL_CKPTREC_END ? " end" : "");
	}
	ovl_ckstate_clear(&st);
}

static void
json_str(const char *s)
{
	ovl_json_string(stdout, s, strlen(s));
}

static void
put_kv0(const char *key, const char *val)
{
	fputs(key, stdout);
	putchar('\0');
	fputs(val, stdout);
	putchar('\0');
}

/*
 * show --print0: what the supervisor asks before a restore, as
 * NUL-terminated key and value words: checkpoints N (0 when there is no log
 * yet: a fresh run), then last N, step S, tokens T (mixed tokens before
 * it), ended 0|1. Never touches the lock: a running sink may hold it.
 */
static int
show_print0(const char *dir)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 };
	const struct ovl_ckrec *r;
	const char *v;
	char buf[32];

	read_log(dir, &log);
	snprintf(buf, sizeof(buf), "%zu", log.nrec);
	put_kv0("checkpoints", buf);
	if (log.nrec > 0) {
		r = &log.rec[log.nrec - 1];
		log_state(dir, &log, log.nrec - 1, &st);
		snprintf(buf, sizeof(buf), "%" PRIu64, r->n);
		put_kv0("last", buf);
		v = ovl_kvsec_get(&st.sec[OVL_SEC_CKPT], "step");
		put_kv0("step", v != NULL ? v : "0");
		v = ovl_kvsec_get(&st.sec[OVL_SEC_MIX], "tokens");
		put_kv0("tokens", v != NULL ? v : "0");
		put_kv0("ended", r->flags & OVL_CKPTREC_END ? "1" : "0");
	}
	ovl_ckstate_clear(&st);
	ovl_ckptlog_free(&log);
	ovl_io_close_stdout();
	return 0;
}

/* Record i of the log in dir, as JSON (one line) or as text. */
static void
show_one(const char *dir, const struct ovl_ckptlog *log, size_t i, int json)
{
	const struct ovl_ckrec *r = &log->rec[i];
	struct ovl_ckstate st = { 0 };
	size_t j;
	int s;

	log_state(dir, log, i, &st);
	if (json) {
		printf("{\"checkpoint\":%" PRIu64 ",\"record\":\"%s\",\"offset\":%"
		    PRIu64 ",\"bytes\":%" PRIu32 ",\"end\":%s", r->n,
		    rec_type(r), r->offset, OVL_CKPTREC_HDR_LEN + r->len,
		    r->flags & OVL_CKPTREC_END ? "true" : "false");
		for (s = 0; s < OVL_NSEC; s++) {
			printf(",\"%s\":{", ovl_sec_name[s]);
			for (j = 0; j < st.sec[s].n; j++) {
				if (j > 0)
					putchar(',');
				json_str(st.sec[s].kv[j].key);
				putchar(':');
				if (st.sec[s].kv[j].val != NULL)
					json_str(st.sec[s].kv[j].val);
				else
					fputs("null", stdout);
			}
			putchar('}');
		}
		puts("}");
	} else {
		printf("checkpoint %" PRIu64 "%s: %s record of %" PRIu32
		    " bytes at byte offset %" PRIu64 " of '%s/ckpt.log'\n", r->n,
		    r->flags & OVL_CKPTREC_END ? " (end of run)" : "",
		    rec_type(r), OVL_CKPTREC_HDR_LEN + r->len, r->offset, dir);
		for (s = 0; s < OVL_NSEC; s++) {
			printf("[%s]\n", ovl_sec_name[s]);
			for (j = 0; j < st.sec[s].n; j++)
				printf("%s%s%s\n", st.sec[s].kv[j].key,
				    st.sec[s].kv[j].val != NULL ? " " : "",
				    st.sec[s].kv[j].val != NULL ?
				    st.sec[s].kv[j].val : "");
		}
	}
	ovl_ckstate_clear(&st);
}

int
cmd_show(int argc, char **argv)
{
	struct ovl_ckptlog log;
	uint64_t *at = NULL;
	size_t nat = 0, k;
	int c, json = 0, list = 0, print0 = 0;

	while ((c = ckpt_getopt(&show_cli, "show", argc, argv, "a:jl",
	    "0")) != -1) {
		switch (c) {
		case 'a':
			at = ovl_xrealloc(at, (nat + 1) * sizeof(*at));
			at[nat++] = ckpt_opt_at(&show_cli, optarg);
			break;
		case 'j':
			json = 1;
			break;
		case 'l':
			list = 1;
			break;
		case '0':
			print0 = 1;
			break;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 1)
		ovl_cli_usage(&show_cli);
	if (json + list + print0 > 1)
		ovl_cli_usagex(&show_cli, "--json, --list and --print0 exclude "
		    "each other");
	if (print0)
		return show_print0(argv[0]);
	read_log(argv[0], &log);
	if (list) {
		show_list(&log, argv[0]);
	} else if (nat == 0) {
		show_one(argv[0], &log, pick_record(argv[0], &log, 0, 0), json);
	} else {
		/* each is found before any is shown: all or nothing */
		for (k = 0; k < nat; k++)
			at[k] = pick_record(argv[0], &log, 1, at[k]);
		for (k = 0; k < nat; k++)
			show_one(argv[0], &log, (size_t)at[k], json);
	}
	free(at);
	ovl_ckptlog_free(&log);
	ovl_io_close_stdout();
	return 0;
}

int
cmd_diff(int argc, char **argv)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate a = { 0 }, b = { 0 };
	uint64_t n, m;
	size_t j;
	long k;
	int s, head;
	const char *va, *vb;

	while (ckpt_getopt(&diff_cli, "diff", argc, argv, "", "") != -1)
		;
	argc -= optind;
	argv += optind;
	if (argc != 3 || ovl_num_u64(argv[1], &n) != 0 ||
	    ovl_num_u64(argv[2], &m) != 0)
		ovl_cli_usage(&diff_cli);
	read_log(argv[0], &log);
	log_state(argv[0], &log, pick_record(argv[0], &log, 1, n), &a);
	log_state(argv[0], &log, pick_record(argv[0], &log, 1, m), &b);
	printf("checkpoint %" PRIu64 " -> %" PRIu64 "\n", n, m);
	for (s = 0; s < OVL_NSEC; s++) {
		head = 0;
#define HEAD() do { if (!head) printf("[%s]\n", ovl_sec_name[s]); head = 1; } while (0)
		for (j = 0; j < a.sec[s].n; j++) {
			k = ovl_kvsec_find(&b.sec[s], a.sec[s].kv[j].key);
			va = a.sec[s].kv[j].val != NULL ? a.sec[s].kv[j].val : "";
			if (k < 0) {
				HEAD();
				printf("- %s %s\n", a.sec[s].kv[j].key, va);
				continue;
			}
			vb = b.sec[s].kv[k].val != NULL ? b.sec[s].kv[k].val : "";
			if (strcmp(va, vb) != 0) {
				HEAD();
				printf("- %s %s\n+ %s %s\n", a.sec[s].kv[j].key,
				    va, a.sec[s].kv[j].key, vb);
			}
		}
		for (j = 0; j < b.sec[s].n; j++)
			if (ovl_kvsec_find(&a.sec[s], b.sec[s].kv[j].key) < 0) {
				HEAD();
				printf("+ %s %s\n", b.sec[s].kv[j].key,
				    b.sec[s].kv[j].val != NULL ?
				    b.sec[s].kv[j].val : "");
			}
#undef HEAD
	}
	ovl_ckstate_clear(&a);
	ovl_ckstate_clear(&b);
	ovl_ckptlog_free(&log);
	ovl_io_close_stdout();
	return 0;
}

