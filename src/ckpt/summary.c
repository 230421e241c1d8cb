/*
 * ovl-ckpt summary: what a run did, from its checkpoint directory: the
 * checkpoint log, and the statistics ovl-run keeps beside it in stats/
 * (run.log: attempts, failures and times; mix.kv: ovl-mix's last
 * statistics; construct.N.jsonl: ovl-construct's figures per step, one
 * file per attempt, a step computed again after a restore counted once).
 */
#include "ckpt.h"

#include <glob.h>

#include <jansson.h>

static const struct ovl_cli summary_cli = {
	"ovl-ckpt",
	"ovl-ckpt summary [--json] CKPTDIR",
	"What the run in CKPTDIR did: sources, steps, balance, checkpoints,\n"
	"restarts, time (from CKPTDIR/stats, which ovl-run keeps).\n"
	"  -j, --json     one JSON object\n"
	"  -h, --help, -V, --version, -v, --verbose, -q, --quiet\n"
};

#define MAX_SRC		OVL_PLAN_MAX_SOURCES
#define MAX_FAIL	64

struct src_sum {
	char		 name[OVL_PLAN_MAX_NAME + 1];
	uint64_t	 tokens, docs, tok_per_s;
	double		 share, target;
	uint64_t	 long_n[3], long_cut;	/* split, truncated, dropped */
	uint64_t	 long_img[2];	/* images split, left out */
};

struct sum {
	/* run.log */
	unsigned	 starts, resumes;
	double		 t_first, t_last;	/* seconds since the epoch */
	int		 ended_ok;
	char		*fail[MAX_FAIL];	/* "ROLE STATUS" */
	unsigned	 nfail;
	unsigned	 heals;		/* stages restarted alone (run.log heal) */
	/* mix.kv */
	uint64_t	 tokens, docs;
	char		 split[64];	/* the split run ("" none) */
	struct src_sum	 src[MAX_SRC];
	size_t		 nsrc;
	int		 have_mix;
	/* construct.*.jsonl, per step */
	uint64_t	 steps, seqs, stoks, padding;
	uint32_t	 mb_lo, mb_hi, seq_len_lo, seq_len_hi;
	double		 ratio_mean_sum, ratio_lb_sum, ratio_none_sum, worst_lb;
	int		 have_construct;
	/* the log */
	uint64_t	 checkpoints, last_step;
	int		 complete;
	/* restores.log: restores, and those that checked every kept byte */
	unsigned	 restores, restores_all;
};

static FILE *
open_stat(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/stats/%s", dir, name);
	return fopen(path, "r");
}

static void
read_runlog(const char *dir, struct sum *s)
{
	FILE *fp = open_stat(dir, "run.log");
	char line[1024], what[32], a[512];
	double t;

	if (fp == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (sscanf(line, "%31s %lf %511[^\n]", what, &t, a) < 2)
			continue;
		if (s->t_first == 0 || t < s->t_first)
			s->t_first = t;
		if (t > s->t_last)
			s->t_last = t;
		if (strcmp(what, "start") == 0) {
			s->starts++;
			if (strncmp(a, "resume", 6) == 0)
				s->resumes++;
			s->ended_ok = 0;
		} else if (strcmp(what, "failure") == 0 && s->nfail < MAX_FAIL)
			s->fail[s->nfail++] = ovl_xstrdup(a);
		else if (strcmp(what, "heal") == 0 && s->nfail < MAX_FAIL) {
			/* "heal ROLE WHY": a stage restarted alone */
			size_t n = strlen(a);

			s->fail[s->nfail] = ovl_xmalloc(n + 20);
			snprintf(s->fail[s->nfail++], n + 20, "%s (restarted alone)",
			    a);
			s->heals++;
		}
		else if (strcmp(what, "end") == 0)
			s->ended_ok = strncmp(a, "ok", 2) == 0;
	}
	fclose(fp);
}

static struct src_sum *
src_named(struct sum *s, const char *name, size_t n)
{
	size_t i;

	if (n > OVL_PLAN_MAX_NAME)
		return NULL;
	for (i = 0; i < s->nsrc; i++)
		if (strlen(s->src[i].name) == n &&
		    memcmp(s->src[i].name, name, n) == 0)
			return &s->src[i];
	if (s->nsrc == MAX_SRC)
		return NULL;
	memcpy(s->src[s->nsrc].name, name, n);
	s->src[s->nsrc].name[n] = '\0';
	return &s->src[s->nsrc++];
}

static void
read_mix(const char *dir, struct sum *s)
{
	FILE *fp = open_stat(dir, "mix.kv");
	char key[512], val[512];
	const char *k, *dot;
	struct src_sum *ss;

	if (fp == NULL)
		return;
	s->have_mix = 1;
	while (fscanf(fp, "%511s %511s", key, val) == 2) {
		if (strcmp(key, "tokens") == 0)
			s->tokens = strtoull(val, NULL, 10);
		if (strcmp(key, "split") == 0)
			snprintf(s->split, sizeof(s->split), "%.63s", val);
		if (strncmp(key, "source.", 7) != 0)
			continue;
		k = key + 7;
		/* source.NAME.FIELD, NAME without dots (plan names) */
		if ((dot = strchr(k, '.')) == NULL || strchr(dot + 1, '.') != NULL)
			continue;
		if ((ss = src_named(s, k, (size_t)(dot - k))) == NULL)
			continue;
		dot++;
		if (strcmp(dot, "tokens") == 0)
			ss->tokens = strtoull(val, NULL, 10);
		else if (strcmp(dot, "docs") == 0)
			ss->docs = strtoull(val, NULL, 10);
		else if (strcmp(dot, "tok_per_s") == 0)
			ss->tok_per_s = strtoull(val, NULL, 10);
		else if (strcmp(dot, "long_split") == 0)
			ss->long_n[0] = strtoull(val, NULL, 10);
		else if (strcmp(dot, "long_truncated") == 0)
			ss->long_n[1] = strtoull(val, NULL, 10);
		else if (strcmp(dot, "long_dropped") == 0)
			ss->long_n[2] = strtoull(val, NULL, 10);
		else if (strcmp(dot, "long_cut_tokens") == 0)
			ss->long_cut = strtoull(val, NULL, 10);
		else if (strcmp(dot, "long_images_split") == 0)
			ss->long_img[0] = strtoull(val, NULL, 10);
		else if (strcmp(dot, "long_images_left_out") == 0)
			ss->long_img[1] = strtoull(val, NULL, 10);
		else if (strcmp(dot, "share_pct") == 0)
			ss->share = strtod(val, NULL);
		else if (strcmp(dot, "target_pct") == 0)
			ss->target = strtod(val, NULL);
	}
	fclose(fp);
	for (size_t i = 0; i < s->nsrc; i++)
		s->docs += s->src[i].docs;
}

static double
num(json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

/* One step's figures; a step seen again (after a restore) replaces it. */
struct step_fig {
	uint64_t	 step, tokens, padding, seqs;
	size_t		 order;		/* as read, attempts in order */
	uint32_t	 seq_len, mb_lo, mb_hi;
	double		 max, mean, lb, none_max;
};

static int
cmp_step(const void *a, const void *b)
{
	const struct step_fig *x = a, *y = b;

	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static void
read_construct(const char *dir, struct sum *s)
{
	char pat[4096];
	glob_t g;
	struct step_fig *f = NULL;
	size_t nf = 0, cap = 0, i, j, k;

	snprintf(pat, sizeof(pat), "%s/stats/construct.*.jsonl", dir);
	if (glob(pat, 0, NULL, &g) != 0)
		return;
	/* attempts in order: construct.1.jsonl, ... construct.10.jsonl */
	for (k = 1; k <= g.gl_pathc; k++)
		for (i = 0; i < g.gl_pathc; i++) {
			const char *b = strrchr(g.gl_pathv[i], '/');
			char want[32];
			FILE *fp;
			char *line = NULL;
			size_t lcap = 0;

			snprintf(want, sizeof(want), "/construct.%zu.jsonl", k);
			if (b == NULL || strcmp(b, want) != 0)
				continue;
			if ((fp = fopen(g.gl_pathv[i], "r")) == NULL)
				continue;
			while (getline(&line, &lcap, fp) > 0) {
				json_t *o = json_loads(line, 0, NULL), *mb;
				struct step_fig *x;
				size_t r;

				if (o == NULL)
					continue;	/* a line cut by a kill */
				if (nf == cap) {
					cap = cap ? 2 * cap : 256;
					f = ovl_xrealloc(f, cap * sizeof(*f));
				}
				x = &f[nf];
				memset(x, 0, sizeof(*x));
				x->order = nf++;
				x->step = (uint64_t)num(o, "step");
				x->tokens = (uint64_t)num(o, "tokens");
				x->padding = (uint64_t)num(o, "padding");
				x->seq_len = (uint32_t)num(o, "seq_len");
				x->max = num(o, "max_cost");
				x->mean = num(o, "mean_cost");
				x->lb = num(o, "lower_bound");
				x->none_max = num(json_object_get(o, "none"), "max_cost");
				mb = json_object_get(o, "mb");
				x->mb_lo = UINT32_MAX;
				for (r = 0; r < json_array_size(mb); r++) {
					uint32_t m = (uint32_t)json_integer_value(
					    json_array_get(mb, r));
					x->seqs += m;
					if (m < x->mb_lo)
						x->mb_lo = m;
					if (m > x->mb_hi)
						x->mb_hi = m;
				}
				json_decref(o);
			}
			free(line);
			fclose(fp);
		}
	globfree(&g);
	if (nf == 0) {
		free(f);
		return;
	}
	/* by step, then as read: the last reading of a step is kept */
	qsort(f, nf, sizeof(*f), cmp_step);
	for (i = j = 0; i < nf; i++) {
		if (j > 0 && f[j - 1].step == f[i].step)
			f[j - 1] = f[i];
		else
			f[j++] = f[i];
	}
	nf = j;
	s->have_construct = 1;
	s->mb_lo = UINT32_MAX;
	s->seq_len_lo = UINT32_MAX;
	for (i = 0; i < nf; i++) {
		s->steps++;
		s->seqs += f[i].seqs;
		s->stoks += f[i].tokens;
		s->padding += f[i].padding;
		if (f[i].mb_lo < s->mb_lo)
			s->mb_lo = f[i].mb_lo;
		if (f[i].mb_hi > s->mb_hi)
			s->mb_hi = f[i].mb_hi;
		if (f[i].seq_len < s->seq_len_lo)
			s->seq_len_lo = f[i].seq_len;
		if (f[i].seq_len > s->seq_len_hi)
			s->seq_len_hi = f[i].seq_len;
		s->ratio_mean_sum += f[i].mean > 0 ? f[i].max / f[i].mean : 1;
		s->ratio_lb_sum += f[i].lb > 0 ? f[i].max / f[i].lb : 1;
		s->ratio_none_sum += f[i].max > 0 ? f[i].none_max / f[i].max : 1;
		if (f[i].lb > 0 && f[i].max / f[i].lb > s->worst_lb)
			s->worst_lb = f[i].max / f[i].lb;
	}
	free(f);
}

static void
read_ckpt(const char *dir, struct sum *s)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 };
	const char *v;

	read_log(dir, &log);
	s->checkpoints = log.nrec;
	if (log.nrec > 0) {
		log_state(dir, &log, log.nrec - 1, &st);
		v = ovl_kvsec_get(&st.sec[OVL_SEC_CKPT], "step");
		s->last_step = v != NULL ? strtoull(v, NULL, 10) : 0;
		s->complete = (log.rec[log.nrec - 1].flags & OVL_CKPTREC_END) != 0;
		ovl_ckstate_clear(&st);
	}
	ovl_ckptlog_free(&log);
}

/* CKPTDIR/restores.log (restore.c): one line "N all|last" per restore. */
static void
read_restores(const char *dir, struct sum *s)
{
	char path[4096], line[128], how[8];
	unsigned long long n;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/" RESTORES_LOG, dir);
	if ((fp = fopen(path, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "%llu %7s", &n, how) == 2) {
			s->restores++;
			s->restores_all += strcmp(how, "all") == 0;
		}
	fclose(fp);
}

/* Every kept byte proven: never restored, or every restore checked all. */
static int
proven(const struct sum *s)
{
	return s->restores == s->restores_all;
}

static void
print_proof(const struct sum *s)
{
	if (s->restores == 0)
		printf("  proof    whole: every byte hashed into the chain as "
		    "written, never restored\n");
	else if (proven(s))
		printf("  proof    whole: every kept byte checked against the "
		    "hash chain at each of %u restore%s (--verify-all)\n",
		    s->restores, s->restores == 1 ? "" : "s");
	else
		printf("  proof    partial: %u of %u restore%s checked only the "
		    "last segment ('ovl-ckpt verify' checks the whole)\n",
		    s->restores - s->restores_all, s->restores,
		    s->restores == 1 ? "" : "s");
}

static void
print_text(const char *dir, const struct sum *s)
{
	double wall = s->t_last - s->t_first;
	size_t i;
	unsigned k;

	printf("run in %s: %s\n", dir, s->complete ? "complete" :
	    s->checkpoints > 0 ? "stopped (resume with --resume)" :
	    "no checkpoint");
	if (s->starts > 0)
		printf("  time     %.1f s over %u start%s (%u resumed), %u "
		    "failure%s, %u restarted alone\n", wall, s->starts,
		    s->starts == 1 ? "" : "s", s->resumes, s->nfail,
		    s->nfail == 1 ? "" : "s", s->heals);
	for (k = 0; k < s->nfail; k++)
		printf("  failure  %s\n", s->fail[k]);
	printf("  ckpt     %" PRIu64 " checkpoints, the last at step %" PRIu64
	    "\n", s->checkpoints, s->last_step);
	print_proof(s);
	if (s->have_mix) {
		if (s->split[0] != '\0')
			printf("  split    %s: the tokens below are its own\n",
			    s->split);
		printf("  tokens   %" PRIu64 " in %" PRIu64 " documents", s->tokens,
		    s->docs);
		if (wall > 0)
			printf(", %.0f tokens/s over the run", (double)s->tokens /
			    wall);
		printf("\n  %-16s %14s %10s %7s %8s %12s\n", "source", "tokens",
		    "docs", "share", "planned", "tokens/s");
		for (i = 0; i < s->nsrc; i++)
			printf("  %-16s %14" PRIu64 " %10" PRIu64 " %6.1f%% %7.1f%% "
			    "%12" PRIu64 "\n", s->src[i].name, s->src[i].tokens,
			    s->src[i].docs, s->src[i].share, s->src[i].target,
			    s->src[i].tok_per_s);
		for (i = 0; i < s->nsrc; i++) {
			const struct src_sum *x = &s->src[i];
			if (x->long_n[0] + x->long_n[1] + x->long_n[2] == 0)
				continue;
			printf("  %-16s longer than seq-len: %" PRIu64 " split, %"
			    PRIu64 " truncated, %" PRIu64 " dropped (%" PRIu64
			    " tokens left out)", x->name, x->long_n[0],
			    x->long_n[1], x->long_n[2], x->long_cut);
			if (x->long_img[0] + x->long_img[1] > 0)
				printf("; images: %" PRIu64 " split across "
				    "sequences, %" PRIu64 " left out",
				    x->long_img[0], x->long_img[1]);
			printf("\n");
		}
	}
	if (s->have_construct) {
		uint64_t cap = s->stoks + s->padding;
		printf("  steps    %" PRIu64 ", %" PRIu64 " sequences (seq-len %u",
		    s->steps, s->seqs, s->seq_len_lo);
		if (s->seq_len_hi != s->seq_len_lo)
			printf(" to %u", s->seq_len_hi);
		printf("), micro-batches per rank %u to %u\n", s->mb_lo, s->mb_hi);
		printf("  padding  %" PRIu64 " tokens, %.2f%% of the sequences\n",
		    s->padding, cap > 0 ? 100.0 * (double)s->padding /
		    (double)cap : 0);
		printf("  balance  max/mean rank cost %.3f, max/lower bound %.3f "
		    "(worst step %.3f), unbalanced max %.3fx the balanced "
		    "(means over steps)\n", s->ratio_mean_sum / (double)s->steps,
		    s->ratio_lb_sum / (double)s->steps, s->worst_lb,
		    s->ratio_none_sum / (double)s->steps);
	}
}

static void
print_json(const char *dir, const struct sum *s)
{
	double wall = s->t_last - s->t_first;
	size_t i;
	unsigned k;

	printf("{\"dir\":");
	ovl_json_string(stdout, dir, strlen(dir));
	if (s->split[0] != '\0') {
		printf(",\"split\":");
		ovl_json_string(stdout, s->split, strlen(s->split));
	}
	printf(",\"complete\":%s,\"checkpoints\":%" PRIu64 ",\"last_step\":%"
	    PRIu64 ",\"wall_s\":%.3f,\"starts\":%u,\"resumes\":%u,\"heals\":%u,"
	    "\"proof\":{\"whole\":%s,\"restores\":%u,\"verify_all\":%u},"
	    "\"failures\":[", s->complete ? "true" : "false", s->checkpoints,
	    s->last_step, wall, s->starts, s->resumes, s->heals,
	    proven(s) ? "true" :
	    "false", s->restores, s->restores_all);
	for (k = 0; k < s->nfail; k++) {
		if (k > 0)
			putchar(',');
		ovl_json_string(stdout, s->fail[k], strlen(s->fail[k]));
	}
	printf("],\"tokens\":%" PRIu64 ",\"docs\":%" PRIu64 ",\"tok_per_s\":%.0f,"
	    "\"sources\":[", s->tokens, s->docs, wall > 0 ?
	    (double)s->tokens / wall : 0);
	for (i = 0; i < s->nsrc; i++) {
		printf("%s{\"name\":", i > 0 ? "," : "");
		ovl_json_string(stdout, s->src[i].name, strlen(s->src[i].name));
		printf(",\"tokens\":%" PRIu64 ",\"docs\":%" PRIu64 ",\"share_pct\":"
		    "%.1f,\"planned_pct\":%.1f,\"tok_per_s\":%" PRIu64
		    ",\"long_split\":%" PRIu64 ",\"long_truncated\":%" PRIu64
		    ",\"long_dropped\":%" PRIu64 ",\"long_cut_tokens\":%" PRIu64
		    ",\"long_images_split\":%" PRIu64 ",\"long_images_left_out\":%"
		    PRIu64 "}", s->src[i].tokens, s->src[i].docs, s->src[i].share,
		    s->src[i].target, s->src[i].tok_per_s, s->src[i].long_n[0],
		    s->src[i].long_n[1], s->src[i].long_n[2], s->src[i].long_cut,
		    s->src[i].long_img[0], s->src[i].long_img[1]);
	}
	printf("]");
	if (s->have_construct)
		printf(",\"steps\":%" PRIu64 ",\"sequences\":%" PRIu64 ",\"padding\":"
		    "%" PRIu64 ",\"seq_len\":[%u,%u],\"micro_batches\":[%u,%u],"
		    "\"max_over_mean\":%.4f,\"max_over_bound\":%.4f,"
		    "\"worst_max_over_bound\":%.4f,\"none_over_balanced\":%.4f",
		    s->steps, s->seqs, s->padding, s->seq_len_lo, s->seq_len_hi,
		    s->mb_lo, s->mb_hi, s->ratio_mean_sum / (double)s->steps,
		    s->ratio_lb_sum / (double)s->steps, s->worst_lb,
		    s->ratio_none_sum / (double)s->steps);
	printf("}\n");
}

int
cmd_summary(int argc, char **argv)
{
	static struct sum s;
	int c, json = 0;
	unsigned k;

	while ((c = ckpt_getopt(&summary_cli, "summary", argc, argv, "j",
	    "")) != -1)
		if (c == 'j')
			json = 1;
	argc -= optind;
	argv += optind;
	if (argc != 1)
		ovl_cli_usage(&summary_cli);
	memset(&s, 0, sizeof(s));
	read_ckpt(argv[0], &s);
	read_restores(argv[0], &s);
	read_runlog(argv[0], &s);
	read_mix(argv[0], &s);
	read_construct(argv[0], &s);
	if (s.checkpoints == 0 && s.starts == 0 && !s.have_mix &&
	    !s.have_construct)
		ovl_errx(OVL_EXIT_DATA, "no checkpoint and no statistics in '%s'",
		    argv[0]);
	if (json)
		print_json(argv[0], &s);
	else
		print_text(argv[0], &s);
	for (k = 0; k < s.nfail; k++)
		free(s.fail[k]);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}
