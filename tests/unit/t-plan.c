/*
 * t-plan: the plan parser (src/lib/plan.c): syntax, values, errors with
 * file:line, schedules and their integrals, ovl-source arguments, the
 * normalized form.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "unit.h"

static char err[512];

static struct ovl_plan *
parse(const char *text)
{
	return ovl_plan_parse(text, strlen(text), "t.plan", ".",
	    OVL_PLAN_NOGLOB, err, sizeof(err));
}

/* 1 when text fails to parse with exactly the message want. */
static int
fails(const char *text, const char *want)
{
	struct ovl_plan *p = parse(text);

	if (p != NULL) {
		printf("# parsed, expected: %s\n", want);
		ovl_plan_free(p);
		return 0;
	}
	if (strcmp(err, want) != 0) {
		printf("# got  '%s'\n# want '%s'\n", err, want);
		return 0;
	}
	return 1;
}

static int
near(double a, double b, double eps)
{
	return fabs(a - b) <= eps;
}

static const char example[] =
    "# web text, code and books, moving toward code over the first 2M tokens\n"
    "seed 1234\n"
    "source web   path=data/web/*.jsonl.zst format=jsonl field=text "
    "partitions=2 on-exhaust=repeat\n"
    "source code  path=data/code.tar.zst member-ext=.c\n"
    "source books path=data/books/*.txt doc-per=file on-exhaust=drop\n"
    "weights web=0.6 code=0.2 books=0.2\n"
    "weights at=2M web=0.3 code=0.5 books=0.2 ramp=linear\n"
    "seq-len 1024\n"
    "seq-len at=4M 4096\n"
    "ranks 4\n"
    "micro-batches 2\n"
    "balance kk cost=1,0\n"
    "checkpoint every=8 dir=run/ckpt\n"
    "output format=megatron path=out/packed\n";

static void
test_example(void)
{
	struct ovl_plan *p = parse(example);
	struct ovl_stepcfg cfg;

	CHECK(p != NULL);
	if (p == NULL) {
		printf("# %s\n", err);
		return;
	}
	CHECK(p->nsources == 3);
	CHECK(strcmp(p->sources[0].name, "web") == 0);
	CHECK(strcmp(p->sources[0].format, "jsonl") == 0);
	CHECK(strcmp(p->sources[0].field, "text") == 0);
	CHECK(p->sources[0].partitions == 2);
	CHECK(p->sources[0].on_exhaust == OVL_EXHAUST_REPEAT);
	CHECK(p->sources[1].on_exhaust == OVL_EXHAUST_STOP);
	CHECK(p->sources[2].on_exhaust == OVL_EXHAUST_DROP);
	CHECK(strcmp(p->sources[1].member_ext, ".c") == 0);
	CHECK(strcmp(p->sources[2].doc_per, "file") == 0);
	CHECK(p->sources[2].index == 2);
	CHECK(p->sources[0].npaths == 0);	/* NOGLOB */
	CHECK(strcmp(p->sources[0].patterns[0], "data/web/*.jsonl.zst") == 0);
	CHECK(p->has_seed && p->seed == 1234);
	CHECK(p->sources[0].shuffle == 1 && p->sources[1].shuffle == 1);
	CHECK(p->sources[0].shuffle_seed != p->sources[1].shuffle_seed);
	CHECK(p->npoints == 2);
	CHECK(p->points[1].at == 2000000 && p->points[1].ramp == 1);
	CHECK(near(p->points[0].w[0], 0.6, 1e-15));
	CHECK(p->nseq == 2 && p->seq_at[1] == 4000000 && p->seq_len[1] == 4096);
	CHECK(p->ranks == 4 && p->micro_batches == 2);
	CHECK(strcmp(p->balance, "kk") == 0);
	CHECK(p->cost_set == 1 && p->cost_a == 1 && p->cost_b == 0);
	CHECK(p->ckpt_every == 8 && strcmp(p->ckpt_dir, "run/ckpt") == 0);
	CHECK(strcmp(p->out_format, "megatron") == 0);
	CHECK(strcmp(p->out_path, "out/packed") == 0);
	CHECK(p->uniform == -1 && p->window == 0 && p->pack == NULL);
	ovl_plan_stepcfg(p, &cfg);
	CHECK(cfg.nseq == 8 && cfg.nstages == 2 && cfg.seq_len[0] == 1024);
	CHECK(cfg.budget == 0 && cfg.at[1] == 4000000);
	ovl_plan_free(p);
}

static void
test_syntax(void)
{
	struct ovl_plan *p;

	/* quotes, escapes, continuation lines, comments, CRLF */
	p = parse("source \"a\" path=\"my dir/x=1.txt\" match=a\\ b\\\n"
	    "  field=\"say \\\"hi\\\"\" # comment\r\n"
	    "   # only a comment\n\n"
	    "source b path=\"#not-a-comment\" drop=x#y\n");
	CHECK(p != NULL);
	if (p == NULL) {
		printf("# %s\n", err);
		return;
	}
	CHECK(strcmp(p->sources[0].name, "a") == 0);
	CHECK(strcmp(p->sources[0].patterns[0], "my dir/x=1.txt") == 0);
	CHECK(strcmp(p->sources[0].match, "a b") == 0);
	CHECK(strcmp(p->sources[0].field, "say \"hi\"") == 0);
	CHECK(strcmp(p->sources[1].patterns[0], "#not-a-comment") == 0);
	CHECK(strcmp(p->sources[1].drop, "x#y") == 0);
	/* no weights: equal; no seed: no shuffle; defaults */
	CHECK(p->npoints == 1 && p->points[0].w[0] == 0.5);
	CHECK(p->sources[0].shuffle == 0);
	CHECK(p->nseq == 1 && p->seq_len[0] == 2048);
	CHECK(p->ranks == 1 && p->micro_batches == 1);
	ovl_plan_free(p);

	/* every option the stages need */
	p = parse("seed 7\ntokenizer bytes\neod-token 256\nmix-by docs\n"
	    "source s path=x tokenizer=tiktoken:r.tiktoken min-tokens=2 "
	    "max-tokens=1K match=foo drop=bar shuffle-seed=none epochs=3 "
	    "shadows=2 chunk-size=64Mi on-error=skip max-doc-bytes=1M\n"
	    "step-tokens 64K\npack first-fit\nwindow 4\nuniform yes\n"
	    "image-tokens 256\ncost model layers=32 hidden=4096 heads=32\n"
	    "balance lpt\nstop steps=100 tokens=1G\n"
	    "output format=npy path=o manifest=m.tsv per-rank=r%d\n");
	CHECK(p != NULL);
	if (p == NULL) {
		printf("# %s\n", err);
		return;
	}
	CHECK(p->mix_by == OVL_MIXBY_DOCS);
	CHECK(p->sources[0].shuffle == 0);
	CHECK(p->sources[0].min_tokens == 2 && p->sources[0].max_tokens == 1000);
	CHECK(p->sources[0].chunk_size == 64u << 20);
	CHECK(p->sources[0].epochs == 3 && p->sources[0].shadows == 2);
	CHECK(p->step_tokens == 64000 && p->window == 4 && p->uniform == 1);
	CHECK(p->has_image_tokens && p->image_tokens == 256);
	CHECK(p->cost_set == 2 && p->model_layers == 32 &&
	    p->model_hidden == 4096 && p->model_heads == 32 &&
	    p->model_ffn == 0);
	CHECK(p->stop_steps == 100 && p->stop_tokens == 1000000000);
	CHECK(strcmp(p->out_manifest, "m.tsv") == 0);
	CHECK(strcmp(p->out_per_rank, "r%d") == 0);
	ovl_plan_free(p);

	/* relative paths resolve against the plan's directory */
	{
		const char *t = "source s path=x tokenizer=tiktoken:t.tk:cl100k\n"
		    "tokenizer tiktoken:/abs.tk\ncheckpoint every=1 dir=ck\n"
		    "output format=jsonl path=/abs/out\n";
		p = ovl_plan_parse(t, strlen(t), "d/p.plan", "d",
		    OVL_PLAN_NOGLOB, err, sizeof(err));
	}
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK(strcmp(p->sources[0].tokenizer,
		    "tiktoken:d/t.tk:cl100k") == 0);
		CHECK(strcmp(p->tokenizer, "tiktoken:/abs.tk") == 0);
		CHECK(strcmp(p->ckpt_dir, "d/ck") == 0);
		CHECK(strcmp(p->out_path, "/abs/out") == 0);
	}
	ovl_plan_free(p);
}

static void
test_errors(void)
{
	CHECK(fails("source a path=x\nfrobnicate 3\n",
	    "t.plan:2: unknown directive 'frobnicate'"));
	CHECK(fails("source a path=x colour=red\n",
	    "t.plan:1: source 'a': unknown option 'colour='"));
	CHECK(fails("source a path=x\n\nsource a path=y\n",
	    "t.plan:3: duplicate source 'a' (first at line 1)"));
	CHECK(fails("source a path=x\nweights a=1 b=2\n",
	    "t.plan:2: weights: no source named 'b'"));
	CHECK(fails("weights b=1\nsource a path=x\n",
	    "t.plan:1: weights: no source named 'b'"));
	CHECK(fails("source a path=x\nweights a=-1\n",
	    "t.plan:2: negative weight -1 for 'a'"));
	CHECK(fails("source a path=x\nsource b path=y\nweights a=0 b=0\n",
	    "t.plan:3: weights: all weights are zero"));
	CHECK(fails("source a path=x\nweights a=1\nweights at=2M a=1\n"
	    "weights at=1M a=2\n",
	    "t.plan:4: weights at=1000000 is not after the previous point "
	    "(at=2000000)"));
	CHECK(fails("source a path=x\nweights at=5 a=1\n",
	    "t.plan:2: the first weights must start at 0, not at=5"));
	CHECK(fails("source a path=x\nseq-len 10\nseq-len at=5 20\n"
	    "seq-len at=5 30\n",
	    "t.plan:4: seq-len at=5 is not after the previous point (at=5)"));
	CHECK(fails("source a path=x\nseq-len at=1K 10\n",
	    "t.plan:2: the first seq-len must start at 0, not at=1000"));
	CHECK(fails("source a path=x\nseq-len 1X\n",
	    "t.plan:2: bad seq-len '1X': expected a whole number"));
	CHECK(fails("source a path=x\nweights a=lots\n",
	    "t.plan:2: bad weight 'lots' for 'a': expected a number"));
	CHECK(fails("source a path=x\nranks 0\n",
	    "t.plan:2: bad ranks '0': must be at least 1"));
	CHECK(fails("source a path=x\nranks 2\nranks 3\n",
	    "t.plan:3: duplicate 'ranks' (first at line 2)"));
	CHECK(fails("source a format=jsonl\n",
	    "t.plan:1: source 'a' has no path="));
	CHECK(fails("source a path=x on-exhaust=later\n",
	    "t.plan:1: bad on-exhaust 'later': expected one of stop, drop, "
	    "repeat"));
	CHECK(fails("source a path=x on-exhaust=repeat epochs=2\n",
	    "t.plan:1: source 'a': epochs= and on-exhaust=repeat contradict "
	    "each other"));
	CHECK(fails("source a.b path=x\n",
	    "t.plan:1: bad source name 'a.b': letters, digits, _ and - "
	    "(not first), at most 64 bytes"));
	CHECK(fails("source a path=\"x\n",
	    "t.plan:1: unterminated quote"));
	CHECK(fails("# nothing\n", "t.plan: no source declared"));
	CHECK(fails("source a path=x\nbalance kk cost=1\n",
	    "t.plan:2: bad cost '1': expected A,B or model"));
	CHECK(fails("source a path=x\ncost model layers=2\n",
	    "t.plan:2: cost=model needs layers= and hidden="));
	CHECK(fails("source a path=x\npack tight\n",
	    "t.plan:2: bad pack 'tight': expected one of bfd, first-fit, "
	    "concat"));
	CHECK(fails("source a path=x\nstop when=done\n",
	    "t.plan:2: stop: unknown option 'when='"));
	CHECK(fails("source a path=x\ncheckpoint dir=x\n",
	    "t.plan:2: checkpoint: every=K is required"));
	CHECK(fails("source a path=x\noutput path=x\n",
	    "t.plan:2: output: format= is required (megatron, npy, jsonl, "
	    "frames or wds)"));
	CHECK(fails("source a path=x\nweights a=1 ramp=linear\n",
	    "t.plan:2: ramp=linear needs a previous weights point"));
	CHECK(fails("source a \\\n path=x\nseed\n",
	    "t.plan:3: seed: expected one value: seed VALUE"));
}

static void
test_globs(void)
{
	struct ovl_plan *p;
	char dir[] = "/tmp/t-plan-XXXXXX", path[256];
	const char *files[] = { "b.txt", "a.txt", "c.md", "-dash.txt" };
	FILE *fp;
	size_t i;

	if (mkdtemp(dir) == NULL) {
		CHECK(0);
		return;
	}
	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		fp = fopen(path, "w");
		CHECK(fp != NULL);
		if (fp != NULL)
			fclose(fp);
	}
	snprintf(path, sizeof(path), "%s/p.plan", dir);
	fp = fopen(path, "w");
	CHECK(fp != NULL);
	if (fp == NULL)
		return;
	fputs("source s path=*.txt path=c.md\n", fp);
	fclose(fp);
	p = ovl_plan_load(path, err, sizeof(err));
	CHECK(p != NULL);
	if (p != NULL) {
		size_t argc;
		char **argv = ovl_plan_source_argv(p, 0, &argc);

		CHECK(p->sources[0].npaths == 4);
		snprintf(path, sizeof(path), "%s/-dash.txt", dir);
		CHECK(strcmp(p->sources[0].paths[0], path) == 0);
		snprintf(path, sizeof(path), "%s/a.txt", dir);
		CHECK(strcmp(p->sources[0].paths[1], path) == 0);
		snprintf(path, sizeof(path), "%s/c.md", dir);
		CHECK(strcmp(p->sources[0].paths[3], path) == 0);
		CHECK(argc == 7 && argv[argc] == NULL);
		CHECK(strcmp(argv[0], "--id") == 0 && strcmp(argv[1], "0") == 0);
		CHECK(strcmp(argv[2], "s") == 0);
		ovl_plan_argv_free(argv);
	}
	ovl_plan_free(p);

	snprintf(path, sizeof(path), "%s/p.plan", dir);
	fp = fopen(path, "w");
	if (fp != NULL) {
		fputs("\nsource s path=*.jsonl\n", fp);
		fclose(fp);
	}
	p = ovl_plan_load(path, err, sizeof(err));
	CHECK(p == NULL);
	{
		char want[512];
		snprintf(want, sizeof(want), "%s/p.plan:2: source 's': no file "
		    "matches '%s/*.jsonl'", dir, dir);
		CHECK(strcmp(err, want) == 0);
	}
	for (i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		remove(path);
	}
	snprintf(path, sizeof(path), "%s/p.plan", dir);
	remove(path);
	remove(dir);
	p = ovl_plan_load("/nonexistent/p.plan", err, sizeof(err));
	CHECK(p == NULL && strstr(err, "cannot open '/nonexistent/p.plan'") !=
	    NULL);
}

static void
test_targets(void)
{
	struct ovl_plan *p;
	double t[3], w[3], acc[3];
	unsigned char active[3] = { 1, 1, 0 };
	uint64_t T;

	p = parse(example);
	if (p == NULL) {
		CHECK(0);
		return;
	}
	/* halfway through the ramp: weights halfway */
	ovl_plan_weights_at(p, 1000000, w);
	CHECK(near(w[0], 0.45, 1e-12) && near(w[1], 0.35, 1e-12) &&
	    near(w[2], 0.2, 1e-12));
	ovl_plan_weights_at(p, 5000000, w);
	CHECK(near(w[0], 0.3, 1e-12) && near(w[1], 0.5, 1e-12));
	/* the integral over the ramp is the trapezoid */
	ovl_plan_target(p, 2000000, t, w);
	CHECK(near(t[0], 900000, 1e-6) && near(t[1], 700000, 1e-6) &&
	    near(t[2], 400000, 1e-6));
	ovl_plan_target(p, 3000000, t, NULL);
	CHECK(near(t[0], 1200000, 1e-6) && near(t[1], 1200000, 1e-6));
	for (T = 0; T < 5000000; T += 123457) {
		ovl_plan_target(p, T, t, NULL);
		CHECK(near(t[0] + t[1] + t[2], (double)T, 1e-6 * (double)T + 1e-9));
	}
	/* dropped books: the others split the whole by their ratio */
	acc[0] = acc[1] = 0;
	acc[2] = 42;
	ovl_plan_target_active(p, 2000000, 3000000, active, acc);
	CHECK(near(acc[0], 1e6 * 0.3 / 0.8, 1e-6));
	CHECK(near(acc[1], 1e6 * 0.5 / 0.8, 1e-6));
	CHECK(acc[2] == 42);
	/* over the ramp: the sum of the active integrals is the length */
	acc[0] = acc[1] = 0;
	ovl_plan_target_active(p, 0, 2000000, active, acc);
	CHECK(near(acc[0] + acc[1], 2000000, 1e-3));
	/* web: (0.6 - 0.3 u) / 0.8 over u in [0,1] = 0.5625 */
	CHECK(near(acc[0], 2000000 * 0.5625, 1e-3));
	/* web and books: (0.6 - 0.3 u) / (0.8 - 0.3 u), a logarithm */
	{
		unsigned char wb[3] = { 1, 0, 1 };
		double x[3] = { 0, 0, 0 }, v = 1 - 0.2 / 0.3 * log(0.8 / 0.5);

		ovl_plan_target_active(p, 0, 2000000, wb, x);
		CHECK(near(x[0], 2000000 * v, 1e-3));
		CHECK(near(x[0] + x[2], 2000000, 1e-3));
		/* the series branch: a tiny piece near the start */
		x[0] = x[2] = 0;
		ovl_plan_target_active(p, 0, 100, wb, x);
		CHECK(near(x[0], 100 * 0.75, 1e-3));
	}
	/* split the interval: same result (additivity) */
	t[0] = t[1] = 0;
	ovl_plan_target_active(p, 0, 777777, active, t);
	ovl_plan_target_active(p, 777777, 2000000, active, t);
	CHECK(near(t[0], acc[0], 1e-6) && near(t[1], acc[1], 1e-6));
	ovl_plan_free(p);

	/* a ramp whose active weights fall to zero: no NaN, no blow-up */
	p = parse("source a path=x\nsource b path=y\n"
	    "weights a=1 b=0\nweights at=100 a=0 b=1 ramp=linear\n");
	if (p == NULL) {
		CHECK(0);
		return;
	}
	active[0] = 1;
	active[1] = 0;
	acc[0] = 0;
	ovl_plan_target_active(p, 0, 200, active, acc);
	CHECK(near(acc[0], 100, 1e-9));
	ovl_plan_free(p);
}

static void
test_argv(void)
{
	struct ovl_plan *p;
	char **argv;
	size_t argc, i;
	char line[1024];

	p = parse("seed 5\ntokenizer bytes\nsource w path=x format=jsonl "
	    "field=body min-tokens=3 match=\"a b\" on-exhaust=repeat\n"
	    "source v path=y epochs=2 shuffle-seed=9\n");
	if (p == NULL) {
		CHECK(0);
		return;
	}
	argv = ovl_plan_source_argv(p, 0, &argc);
	line[0] = '\0';
	for (i = 0; i < argc; i++) {
		strcat(line, argv[i]);
		strcat(line, "|");
	}
	snprintf(line + strlen(line), 64, "%zu", argc);
	{
		char want[512];
		snprintf(want, sizeof(want), "--id|0|--tokenizer|bytes|--format|"
		    "jsonl|--field|body|--min-tokens|3|--match|a b|"
		    "--shuffle-seed|%llu|--repeat|w|16",
		    (unsigned long long)p->sources[0].shuffle_seed);
		CHECK(strcmp(line, want) == 0);
		if (strcmp(line, want) != 0)
			printf("# %s\n", line);
	}
	ovl_plan_argv_free(argv);
	argv = ovl_plan_source_argv(p, 1, &argc);
	CHECK(argc == 9);
	CHECK(strcmp(argv[4], "--shuffle-seed") == 0 &&
	    strcmp(argv[5], "9") == 0);
	CHECK(strcmp(argv[6], "--epochs") == 0 && strcmp(argv[7], "2") == 0);
	ovl_plan_argv_free(argv);
	ovl_plan_free(p);
}

static char *
print_plan(const struct ovl_plan *p)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&buf, &n);

	if (fp == NULL)
		return NULL;
	CHECK(ovl_plan_print(p, fp) == 0);
	fclose(fp);
	return buf;
}

static void
test_print(void)
{
	struct ovl_plan *p, *q;
	char *a, *b;

	p = parse("seed 3\nsource \"w\" path=\"a b/$x\" field=t\n"
	    "source c path=c match=\"\\\\d+\" on-exhaust=drop\n"
	    "weights w=3 c=1\nweights at=10K w=1 c=1 ramp=linear\n"
	    "weights at=20K w=0.1 c=0.7\nseq-len 8\nseq-len at=1M 16\n"
	    "ranks 2\ncost 0.5,1\nwindow 2\nuniform no\n"
	    "stop tokens=5M\ncheckpoint every=3 dir=\"c k\"\n"
	    "output format=frames path=out\n");
	if (p == NULL) {
		printf("# %s\n", err);
		CHECK(0);
		return;
	}
	a = print_plan(p);
	CHECK(a != NULL);
	q = parse(a);
	CHECK(q != NULL);
	if (q == NULL) {
		printf("# %s\n%s", err, a);
		ovl_plan_free(p);
		free(a);
		return;
	}
	b = print_plan(q);
	CHECK(strcmp(a, b) == 0);
	CHECK(strstr(a, "weights at=0 w=0.75 c=0.25\n") != NULL);
	CHECK(strstr(a, "weights at=10000 ramp=linear w=0.5 c=0.5\n") != NULL);
	CHECK(strstr(a, "path=\"a b/\\$x\"") != NULL);
	CHECK(strstr(a, "match=\"\\\\d+\"") != NULL);
	CHECK(strstr(a, "cost 0.5,1\n") != NULL);
	CHECK(strstr(a, "dir=\"c k\"") != NULL);
	CHECK(p->sources[1].shuffle_seed == q->sources[1].shuffle_seed);
	free(a);
	free(b);
	ovl_plan_free(p);
	ovl_plan_free(q);
	a = ovl_plan_quote("");
	CHECK(strcmp(a, "\"\"") == 0);
	free(a);
	a = ovl_plan_quote("#x");
	CHECK(strcmp(a, "\"#x\"") == 0);
	free(a);
}

int
main(void)
{
	RUN(test_example);
	RUN(test_syntax);
	RUN(test_errors);
	RUN(test_globs);
	RUN(test_targets);
	RUN(test_argv);
	RUN(test_print);
	UNIT_DONE();
}
