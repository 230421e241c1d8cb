/*
 * ovl-mix: the planner. Fans in the DOC streams of every source partition
 * named by a plan and writes one mixed stream that follows the plan's
 * weights exactly (deterministic deficit selection), with BARRIER and
 * STATE frames every K steps so the whole pipeline can resume to the byte.
 * See ovl-mix(1), ovl-plan(5) and HACKING.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic.h"
#include "buf.h"
#include "cli.h"
#include "crc32c.h"
#include "err.h"
#include "frame.h"
#include "frameio.h"
#include "io.h"
#include "json.h"
#include "num.h"
#include "plan.h"
#include "step.h"

static const struct ovl_cli cli = {
	"ovl-mix",
	"ovl-mix [options] PLAN INPUT...\n"
	"ovl-mix --check PLAN\n"
	"ovl-mix --list-sources PLAN\n"
	"ovl-mix --source-args NAME PLAN\n"
	"ovl-mix --get KEY PLAN",
	"Mix the DOC streams of a plan's sources into one stream.\n"
	"INPUT is NAME=PATH (a FIFO, a file or -), one per partition of each\n"
	"source, in partition order.\n"
	"  --by tokens|docs      weights count tokens (default) or documents\n"
	"  --every K             a checkpoint every K steps (plan: checkpoint every=)\n"
	"  --resume FILE         continue from a mix STATE text\n"
	"  --reopen              wait for a new writer when an input fails\n"
	"  --stats FILE          per-input statistics as JSON, rewritten every second\n"
	"  --stats-format F    json (default) or kv: flat \"key value\" lines\n"
	"  --json                JSON lines for people instead of frames\n"
	"  --check               validate the plan and print it normalized\n"
	"  --list-sources        name, partitions, shadows, on-exhaust per source (NUL-separated)\n"
	"  --source-args NAME    the ovl-source arguments of a source (NUL-separated)\n"
	"  --get KEY             one plan value, NUL-terminated (checkpoint.dir, ...)\n"
	"  -v, --verbose         per-input statistics on stderr at the end\n"
	"  -q, --quiet           only errors\n"
	"  -h, --help            this help\n"
	"  -V, --version         the version\n"
};

enum {
	O_BY = 256, O_EVERY, O_RESUME, O_REOPEN, O_STATS, O_JSON, O_CHECK,
	O_LIST, O_ARGS, O_GET, O_STATS_FMT
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
	{ NULL, 0, NULL, 0 }
};

struct mix_opts {
	const char	 *plan;
	int		  check;
	int		  list;
	const char	 *args_name;
	const char	 *get_key;
	int		  by;		/* -1: the plan's mix-by */
	int		  has_every;
	uint64_t	  every;
	const char	 *resume;
	int		  reopen;
	const char	 *stats;
	int		  stats_kv;	/* --stats-format kv */
	int		  json;
	char		**inputs;
	int		  ninputs;
};

/* One input stream: a partition of a source. */
struct input {
	char		*label;		/* "web=p0.fifo" */
	char		*path;		/* NULL: standard input */
	int		 fd;
	int		 is_fifo;
	int		 connected;	/* a FIFO's writer has shown up (poll) */
	struct ovl_reader *r;
	struct ovl_frame pend;		/* the next frame, read ahead */
	int		 has_pend;
	int		 need_meta;	/* the next frame must be META */
	int		 ended;		/* END was read */
	uint32_t	 src, part;
	/* statistics */
	uint64_t	 tokens, docs, dups, reopens;
	double		 blocked;	/* seconds spent waiting for it */
};

enum { ST_ACTIVE = 0, ST_DROPPED = 1, ST_EXHAUSTED = 2 };

#define MIX_READ_CHUNK	(64u << 10)	/* read size per input */

struct source {
	const struct ovl_plan_source *ps;
	struct input	**in;
	uint32_t	  nparts;
	struct ovl_cursor cur;		/* next record to consume */
	uint32_t	  nchunks;	/* 0 until known */
	uint64_t	  tokens, docs;	/* consumed */
	uint64_t	  empty_run;	/* chunks ended without a document */
	int		  state;
	double		  base;		/* target at the last drop */
	struct ovl_buf	  meta;		/* META lines of partition 0 passed on */
};

struct barrier_at {
	uint64_t	n, step, tokens;
	uint32_t	offset;
};

struct mixer {
	const struct mix_opts *o;
	struct ovl_plan	*plan;
	struct source	*src;
	size_t		 nsrc;
	struct input	*in;
	size_t		 nin;
	struct ovl_writer *w;
	int		 by;		/* OVL_MIXBY_* */
	uint64_t	 every;
	uint64_t	 pos;		/* mixed position of the next document */
	uint64_t	 tokens;	/* mixed tokens so far */
	uint64_t	 last_n;	/* last checkpoint emitted */
	struct ovl_stepcfg cfg;
	struct ovl_stepcut cut;
	int		 any_drop;
	uint64_t	 drop_at;	/* count at the last drop */
	double		*target, *w8;
	unsigned char	*active;
	struct barrier_at *bars;
	size_t		 capbars;
	/* the merged META */
	char		*tokenizer;
	uint64_t	 vocab, eod;
	int		 have_ref;
	const char	*ref_label;	/* the input the reference META came from */
	/* poll */
	struct pollfd	*pfd;
	struct input	**pin;
	/* statistics */
	struct timespec	 t0, last_stats;
	int		 stdin_flags;
	int		 stdin_used;
	int		 starting;	/* reading the META of every input */
	const char	*end_reason;
};

/* ---- small helpers --------------------------------------------------- */

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
since(const struct timespec *t)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)(ts.tv_sec - t->tv_sec) +
	    (double)(ts.tv_nsec - t->tv_nsec) / 1e9;
}

static struct ovl_plan *
load_plan(const char *path, int flags)
{
	char err[1024];
	struct ovl_plan *p = ovl_plan_loadf(path, flags, err, sizeof(err));

	if (p == NULL)
		ovl_errx(OVL_EXIT_USAGE, "%s", err);
	return p;
}

static void
check_stdout(void)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		if (errno == EPIPE)
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on standard output");
	}
}

/* Set the mixed fields of the DOC frame f in place and fix its CRC. */
static void
doc_rewrite(struct ovl_frame *f, uint32_t source, uint64_t pos,
    uint64_t tokens)
{
	uint8_t *pl = (uint8_t *)(uintptr_t)f->payload;
	uint8_t *hdr = pl - OVL_FRAME_HDR_LEN;
	uint64_t old[8], nw[8];
	int i;

	/*
	 * CRC-32C is linear: the new CRC follows from the old one and the
	 * change of the 64 first payload bytes, without a pass over the rest
	 * (the reader checked the input CRC; this saves a second pass).
	 */
	memcpy(old, pl, sizeof(old));
	ovl_doc_set_mixed(pl, source, pos, tokens);
	memcpy(nw, pl, sizeof(nw));
	for (i = 0; i < 8; i++)
		old[i] ^= nw[i];
	ovl_put32(hdr + 8, ovl_crc32c_patch(ovl_le32(hdr + 8), old,
	    sizeof(old), f->len - 64));
}

/* ---- the plan commands ------------------------------------------------- */

static int
cmd_check(const struct mix_opts *o)
{
	struct ovl_plan *p = load_plan(o->plan, 0);

	if (ovl_plan_print(p, stdout) != 0)
		check_stdout();
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
	check_stdout();
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
	check_stdout();
	ovl_plan_argv_free(argv);
	ovl_plan_free(p);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}

/*
 * --get KEY: one value of the plan as the stages see it (paths resolved),
 * NUL-terminated; nothing when the plan leaves it unset. For the supervisor,
 * which must never parse plan text itself.
 */
static int
cmd_get(const struct mix_opts *o)
{
	struct ovl_plan *p = load_plan(o->plan, OVL_PLAN_NOGLOB);
	const char *k = o->get_key, *str = NULL;
	uint64_t num = 0;
	int isnum = 0;
	char buf[32];

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
	else {
		ovl_plan_free(p);
		ovl_errx(OVL_EXIT_USAGE, "--get: unknown key '%s' (known: "
		    "checkpoint.dir, checkpoint.every, output.format, output.path, "
		    "output.manifest, output.per-rank, ranks, micro-batches, "
		    "stop.steps, stop.tokens, sources)", k);
	}
	if (isnum && num != 0) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)num);
		put0(buf);
	} else if (!isnum && str != NULL)
		put0(str);
	check_stdout();
	ovl_plan_free(p);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}

/* ---- inputs ------------------------------------------------------------- */

static void
open_input(struct input *in)
{
	struct stat st;
	int fl;

	if (in->path == NULL)
		in->fd = STDIN_FILENO;
	else {
		in->fd = open(in->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (in->fd < 0)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", in->path);
	}
	if (fstat(in->fd, &st) == 0 && S_ISFIFO(st.st_mode))
		in->is_fifo = 1;
	/*
	 * A FIFO opened without blocking reads end-of-file until its writer
	 * opens it: read it only once poll(2) has reported it (Linux reports
	 * nothing on a FIFO that has had no writer since it was opened).
	 */
	in->connected = !in->is_fifo || in->path == NULL;
	fl = fcntl(in->fd, F_GETFL);
	if (fl >= 0 && !(fl & O_NONBLOCK))
		(void)fcntl(in->fd, F_SETFL, fl | O_NONBLOCK);
	in->r = ovl_reader_new(in->fd, in->path != NULL ? in->path : "-", 0);
	ovl_reader_expect(in->r, &(struct ovl_expect){
	    .meta_keys = "vocab eod", .kinds = 1u << OVL_DOC |
	    1u << OVL_CHUNK_END, .what = "a source stream",
	    .checks = OVL_EXPECT_DOC });
	/*
	 * Small reads: with many inputs, 1 MiB read ahead per input falls
	 * out of the cache before the CRC check and the copy touch it.
	 */
	ovl_reader_set_chunk(in->r, MIX_READ_CHUNK);
	in->need_meta = 1;
	in->has_pend = 0;
	in->ended = 0;
}

/*
 * The writer of a FIFO input failed: wait for a new one on the same path.
 * Documents it repeats are dropped by canonical position (see take_doc).
 */
static void
reopen_input(struct input *in)
{
	ovl_warnx("%s; waiting for a new writer on '%s'", ovl_reader_error(in->r),
	    in->path);
	ovl_reader_free(in->r);
	close(in->fd);
	in->reopens++;
	open_input(in);
}

/* Check an input's META against the plan and the other inputs. */
static void
take_meta(struct mixer *m, struct input *in, const struct ovl_frame *f)
{
	struct source *s = &m->src[in->src];
	const char *text, *p, *end, *nl;
	uint32_t tl, pp, pn;
	char tok[256], val[256];
	uint64_t vocab = 0, eod = 0;

	/*
	 * The reader checked the grammar (META first, with vocab and eod
	 * below it): every input says what it is, a broken META is blamed on
	 * itself.
	 */
	(void)ovl_meta_decode(f, &text, &tl);
	if (!ovl_meta_value(text, tl, "tokenizer", tok, sizeof(tok)))
		strcpy(tok, "bytes");
	(void)ovl_reader_meta_u64(in->r, "vocab", &vocab);
	(void)ovl_reader_meta_u64(in->r, "eod", &eod);
	if (ovl_meta_value(text, tl, "source", val, sizeof(val))) {
		const char *sp = strchr(val, ' ');
		if (sp != NULL && strcmp(sp + 1, s->ps->name) != 0)
			ovl_errx(OVL_EXIT_USAGE, "'%s' carries source '%s', not "
			    "'%s'", in->label, sp + 1, s->ps->name);
	}
	{
		char key[OVL_PLAN_MAX_NAME + 32];
		snprintf(key, sizeof(key), "source.%s.partition", s->ps->name);
		if (ovl_meta_value(text, tl, key, val, sizeof(val)) &&
		    ovl_num_part(val, &pp, &pn) == 0 &&
		    (pp != in->part || pn != s->nparts))
			ovl_errx(OVL_EXIT_USAGE, "'%s' is partition %s, but is "
			    "given as partition %u/%u (inputs go in partition "
			    "order)", in->label, val, in->part, s->nparts);
	}
	if (!m->have_ref) {
		m->tokenizer = ovl_xstrdup(tok);
		m->vocab = vocab;
		m->eod = eod;
		m->ref_label = in->label;
		m->have_ref = 1;
	} else if (strcmp(tok, m->tokenizer) != 0 || vocab != m->vocab ||
	    eod != m->eod)
		ovl_errx(OVL_EXIT_USAGE, "'%s': tokenizer %s (vocab %" PRIu64
		    ", eod %" PRIu64 ") differs from '%s': %s (vocab %" PRIu64
		    ", eod %" PRIu64 ")", in->label, tok, vocab, eod,
		    m->ref_label, m->tokenizer, m->vocab, m->eod);
	/* pass on the other keys of each source's first partition, once */
	if (in->part == 0 && in->reopens == 0) {
		for (p = text, end = text + tl; p < end; p = nl + 1) {
			nl = memchr(p, '\n', (size_t)(end - p));
			if (nl == NULL)
				nl = end;
			if (nl == p)
				continue;
			if ((nl - p > 10 && memcmp(p, "tokenizer ", 10) == 0) ||
			    (nl - p > 6 && memcmp(p, "vocab ", 6) == 0) ||
			    (nl - p > 4 && memcmp(p, "eod ", 4) == 0) ||
			    (nl - p > 7 && memcmp(p, "source ", 7) == 0) ||
			    memmem(p, (size_t)(nl - p), ".partition ", 11) != NULL)
				continue;
			ovl_buf_append(&s->meta, p, (size_t)(nl - p));
			ovl_buf_append(&s->meta, "\n", 1);
		}
	}
}

static void write_stats(struct mixer *m, int final);

/*
 * Read the next frame of in without blocking. Returns 1 when in has a
 * pending frame (or has ended), 0 when it would block.
 */
static int
try_read(struct mixer *m, struct input *in)
{
	int rc;

	for (;;) {
		if (in->has_pend || in->ended)
			return 1;
		if (!in->connected)
			return 0;
		rc = ovl_reader_next(in->r, &in->pend);
		if (rc == OVL_RD_AGAIN)
			return 0;
		if (rc == OVL_RD_FRAME) {
			if (in->need_meta) {
				take_meta(m, in, &in->pend);
				in->need_meta = 0;
				if (m->starting)
					return 1;
				continue;
			}
			in->has_pend = 1;
			return 1;
		}
		if (rc == OVL_RD_EOF)
			ovl_errx(OVL_EXIT_FRAME, "'%s': read after END",
			    in->label);
		if (rc == OVL_F_ETRUNC && m->o->reopen && in->is_fifo &&
		    in->path != NULL) {
			reopen_input(in);
			/*
			 * Say so at once: a supervisor hands the FIFO to a
			 * new writer only once we read from a new open file
			 * (else the old and new streams would run together).
			 */
			if (m->o->stats != NULL)
				write_stats(m, 0);
			continue;
		}
		ovl_errx(OVL_EXIT_FRAME, "input %s: %s%s", in->label,
		    ovl_reader_error(in->r), rc == OVL_F_ETRUNC ?
		    " (its writer failed)" : "");
	}
}

/*
 * Wait until need has a frame, reading ahead (one frame each) from the
 * other inputs meanwhile. The time goes to need's blocked counter.
 */
static void
wait_for(struct mixer *m, struct input *need)
{
	size_t i, n;
	int rc, timeout;
	double t0;

	while (!try_read(m, need)) {
		n = 0;
		for (i = 0; i < m->nin; i++) {
			struct input *in = &m->in[i];
			if (in->has_pend || in->ended)
				continue;
			m->pfd[n].fd = in->fd;
			m->pfd[n].events = POLLIN;
			m->pfd[n].revents = 0;
			m->pin[n++] = in;
		}
		timeout = m->o->stats != NULL ? 1000 : -1;
		t0 = now_s();
		rc = poll(m->pfd, n, timeout);
		need->blocked += now_s() - t0;
		if (rc < 0 && errno != EINTR)
			ovl_err(OVL_EXIT_DATA, "poll");
		for (i = 0; rc > 0 && i < n; i++) {
			if (m->pfd[i].revents != 0)
				m->pin[i]->connected = 1;
			if (m->pfd[i].revents != 0 && m->pin[i] != need)
				(void)try_read(m, m->pin[i]);
		}
		if (m->o->stats != NULL && since(&m->last_stats) >= 1.0)
			write_stats(m, 0);
	}
}

/* ---- targets and selection ------------------------------------------- */

static uint64_t
count_of(const struct mixer *m)
{
	uint64_t docs = m->pos;

	return m->by == OVL_MIXBY_DOCS ? docs : m->tokens;
}

static uint64_t
consumed(const struct mixer *m, const struct source *s)
{
	return m->by == OVL_MIXBY_DOCS ? s->docs : s->tokens;
}

/* Each source's target at the current count into m->target. */
static void
targets(struct mixer *m)
{
	size_t i;
	uint64_t T = count_of(m);

	if (!m->any_drop) {
		ovl_plan_target(m->plan, T, m->target, NULL);
		return;
	}
	for (i = 0; i < m->nsrc; i++)
		m->target[i] = m->src[i].base;
	ovl_plan_target_active(m->plan, m->drop_at, T, m->active, m->target);
}

/*
 * The source furthest below its target among those that may be chosen:
 * weight now above zero, or behind their target. Ties go to plan order.
 * Returns -1 when no active source has weight left.
 */
static int
select_source(struct mixer *m)
{
	size_t i;
	int best = -1;
	double d, bestd = 0;

	targets(m);
	ovl_plan_weights_at(m->plan, count_of(m), m->w8);
	for (i = 0; i < m->nsrc; i++) {
		if (!m->active[i])
			continue;
		d = m->target[i] - (double)consumed(m, &m->src[i]);
		if (!(m->w8[i] > 0) && !(d > 0))
			continue;
		if (best < 0 || d > bestd) {
			best = (int)i;
			bestd = d;
		}
	}
	return best;
}

/* Source s ran out under on-exhaust=drop: share its deficit and go on. */
static void
drop_source(struct mixer *m, size_t k)
{
	struct source *s = &m->src[k];
	size_t i, nact = 0;
	double excess, sum = 0;

	targets(m);
	ovl_plan_weights_at(m->plan, count_of(m), m->w8);
	excess = m->target[k] - (double)consumed(m, s);
	m->active[k] = 0;
	s->state = ST_DROPPED;
	for (i = 0; i < m->nsrc; i++)
		if (m->active[i]) {
			nact++;
			sum += m->w8[i];
		}
	for (i = 0; i < m->nsrc; i++) {
		if (m->active[i])
			m->src[i].base = m->target[i] + excess * (sum > 0 ?
			    m->w8[i] / sum : 1.0 / (double)nact);
		else if (i == k)
			m->src[i].base = (double)consumed(m, s);
		else
			m->src[i].base = m->target[i];
	}
	m->drop_at = count_of(m);
	m->any_drop = 1;
	ovl_info(1, "source '%s' exhausted after %" PRIu64 " tokens; dropped",
	    s->ps->name, s->tokens);
}

/* ---- reading a source in canonical order ------------------------------- */

static int
chunk_before(uint32_t e1, uint32_t c1, uint32_t e2, uint32_t c2)
{
	return e1 < e2 || (e1 == e2 && c1 < c2);
}

static void
next_chunk(struct source *s, uint32_t nchunks)
{
	s->nchunks = nchunks;
	s->cur.chunk++;
	if (nchunks == 0 || s->cur.chunk >= nchunks) {
		s->cur.epoch++;
		s->cur.chunk = 0;
	}
	s->cur.off = 0;
	s->cur.rec = 0;
}

/*
 * Make the pending frame of the right partition of s its next document.
 * Returns that input, or NULL when the source has ended.
 */
static struct input *
take_doc(struct mixer *m, struct source *s, struct ovl_doc *d)
{
	struct input *in;
	struct ovl_chunk_end ce;
	char a[OVL_CURSOR_STRLEN];

	for (;;) {
		in = s->in[s->cur.chunk % s->nparts];
		if (!in->has_pend && !in->ended)
			wait_for(m, in);
		if (in->ended)
			return NULL;
		switch (in->pend.kind) {
		case OVL_END:
			in->ended = 1;
			in->has_pend = 0;
			return NULL;
		case OVL_CHUNK_END:
			if (ovl_chunk_end_decode(&in->pend, &ce) != OVL_F_OK)
				ovl_errx(OVL_EXIT_FRAME, "'%s': malformed "
				    "CHUNK_END at byte offset %" PRIu64,
				    in->label, ovl_reader_offset(in->r));
			in->has_pend = 0;
			if (chunk_before(ce.epoch, ce.chunk, s->cur.epoch,
			    s->cur.chunk)) {
				in->dups++;
				continue;
			}
			if (ce.epoch != s->cur.epoch || ce.chunk != s->cur.chunk)
				ovl_errx(OVL_EXIT_FRAME, "'%s': chunk %" PRIu32
				    ":%" PRIu32 " ends where chunk %s was "
				    "expected (partitions out of order?)",
				    in->label, ce.epoch, ce.chunk,
				    ovl_cursor_format(&s->cur, a));
			next_chunk(s, ce.nchunks);
			if (++s->empty_run > (uint64_t)ce.nchunks + 1 &&
			    s->ps->on_exhaust == OVL_EXHAUST_REPEAT)
				ovl_errx(OVL_EXIT_DATA, "source '%s' yields no "
				    "document in a whole epoch", s->ps->name);
			continue;
		case OVL_DOC:
			if (ovl_doc_decode(&in->pend, d) != OVL_F_OK)
				ovl_errx(OVL_EXIT_FRAME, "'%s': malformed DOC "
				    "at byte offset %" PRIu64, in->label,
				    ovl_reader_offset(in->r));
			if (chunk_before(d->epoch, d->chunk, s->cur.epoch,
			    s->cur.chunk) || (d->epoch == s->cur.epoch &&
			    d->chunk == s->cur.chunk && d->record < s->cur.rec)) {
				/* already consumed: a restarted writer */
				in->dups++;
				in->has_pend = 0;
				continue;
			}
			if (d->epoch != s->cur.epoch || d->chunk != s->cur.chunk)
				ovl_errx(OVL_EXIT_FRAME, "'%s': a document of "
				    "chunk %" PRIu32 ":%" PRIu32 " where chunk %s "
				    "was expected (partitions out of order?)",
				    in->label, d->epoch, d->chunk,
				    ovl_cursor_format(&s->cur, a));
			if (d->nchunks != 0)
				s->nchunks = d->nchunks;
			return in;
		default:	/* the reader lets DOC, CHUNK_END, END through */
			abort();
		}
	}
}

/* ---- output -------------------------------------------------------------- */

static void
write_meta(struct mixer *m)
{
	struct ovl_buf b = { NULL, 0, 0 };
	char line[256];
	size_t i;
	int n;

	n = snprintf(line, sizeof(line), "tokenizer %s\nvocab %" PRIu64
	    "\neod %" PRIu64 "\n", m->tokenizer, m->vocab, m->eod);
	ovl_buf_append(&b, line, (size_t)n);
	for (i = 0; i < m->nsrc; i++) {
		n = snprintf(line, sizeof(line), "source %zu %s\n", i,
		    m->src[i].ps->name);
		ovl_buf_append(&b, line, (size_t)n);
	}
	for (i = 0; i < m->nsrc; i++)
		ovl_buf_append(&b, m->src[i].meta.p, m->src[i].meta.len);
	n = snprintf(line, sizeof(line), "mix-by %s\ncheckpoint-every %" PRIu64
	    "\nranks %u\nmicro-batches %u\n",
	    m->by == OVL_MIXBY_DOCS ? "docs" : "tokens", m->every,
	    m->plan->ranks, m->plan->micro_batches);
	ovl_buf_append(&b, line, (size_t)n);
	if (m->o->json) {
		fputs("{\"kind\":\"meta\",\"text\":", stdout);
		ovl_json_string(stdout, (const char *)b.p, b.len);
		fputs("}\n", stdout);
	} else {
		uint8_t *p = ovl_writer_begin(m->w,
		    ovl_meta_payload_len((uint32_t)b.len));
		ovl_meta_encode(p, (const char *)b.p, (uint32_t)b.len);
		ovl_writer_finish(m->w, OVL_META, 0);
	}
	ovl_buf_free(&b);
}

/* The mixer's state before the document it is about to select. */
static void
state_text(struct mixer *m, uint64_t n, struct ovl_buf *b)
{
	char line[512], c[OVL_CURSOR_STRLEN];
	size_t i;
	int k;
	static const char *const names[] = { "active", "dropped", "exhausted" };

	b->len = 0;
#define PUT(...) do {							\
	k = snprintf(line, sizeof(line), __VA_ARGS__);			\
	ovl_buf_append(b, line, (size_t)k);				\
} while (0)
	PUT("version 1\n");
	PUT("checkpoint %" PRIu64 "\n", n);
	PUT("sources %zu\n", m->nsrc);
	PUT("mix-by %s\n", m->by == OVL_MIXBY_DOCS ? "docs" : "tokens");
	PUT("pos %" PRIu64 "\n", m->pos);
	PUT("tokens %" PRIu64 "\n", m->tokens);
	PUT("step %" PRIu64 "\n", m->cut.step);
	PUT("step.start %" PRIu64 "\n", m->cut.start);
	PUT("step.used %" PRIu64 "\n", m->cut.used);
	if (m->any_drop)
		PUT("drop.at %" PRIu64 "\n", m->drop_at);
	for (i = 0; i < m->nsrc; i++) {
		const struct source *s = &m->src[i];
		const char *nm = s->ps->name;

		PUT("source.%s.cursor %s\n", nm, ovl_cursor_format(&s->cur, c));
		PUT("source.%s.partitions %u\n", nm, s->nparts);
		PUT("source.%s.tokens %" PRIu64 "\n", nm, s->tokens);
		PUT("source.%s.docs %" PRIu64 "\n", nm, s->docs);
		PUT("source.%s.nchunks %u\n", nm, s->nchunks);
		PUT("source.%s.state %s\n", nm, names[s->state]);
		if (m->any_drop)
			PUT("source.%s.base %a\n", nm, s->base);
	}
#undef PUT
}

static void
emit_barrier(struct mixer *m, const struct barrier_at *ba, struct ovl_buf *st)
{
	struct ovl_barrier b;
	struct ovl_state s;
	uint8_t *p;

	state_text(m, ba->n, st);
	b.n = ba->n;
	b.step = ba->step;
	b.mix_pos = m->pos;
	b.tokens = ba->tokens;
	b.offset = ba->offset;
	if (m->o->json) {
		printf("{\"kind\":\"state\",\"stage\":\"mix\",\"n\":%" PRIu64
		    ",\"text\":", ba->n);
		ovl_json_string(stdout, (const char *)st->p, st->len);
		printf("}\n{\"kind\":\"barrier\",\"n\":%" PRIu64 ",\"step\":%"
		    PRIu64 ",\"pos\":%" PRIu64 ",\"tokens\":%" PRIu64
		    ",\"offset\":%" PRIu32 "}\n", b.n, b.step, b.mix_pos,
		    b.tokens, b.offset);
	} else {
		s.stage = OVL_STAGE_MIX;
		s.n = ba->n;
		s.text = (const char *)st->p;
		s.text_len = (uint32_t)st->len;
		p = ovl_writer_begin(m->w, ovl_state_payload_len(s.text_len));
		ovl_state_encode(p, &s);
		ovl_writer_finish(m->w, OVL_STATE, 0);
		p = ovl_writer_begin(m->w, OVL_BARRIER_LEN);
		ovl_barrier_encode(p, &b);
		ovl_writer_finish(m->w, OVL_BARRIER, 0);
	}
	m->last_n = ba->n;
}

static void
emit_json_doc(struct mixer *m, const struct ovl_doc *d, uint32_t sid)
{
	struct ovl_cursor c;
	char cb[OVL_CURSOR_STRLEN];

	ovl_doc_cursor(d, &c);
	fputs("{\"kind\":\"doc\",\"source\":", stdout);
	ovl_json_string(stdout, m->src[sid].ps->name,
	    strlen(m->src[sid].ps->name));
	printf(",\"id\":%" PRIu32 ",\"mix_pos\":%" PRIu64 ",\"mix_tokens\":%"
	    PRIu64 ",\"pos\":[%" PRIu32 ",%" PRIu32 ",%" PRIu64 "],\"cursor\":"
	    "\"%s\",\"nimages\":%" PRIu32 ",\"ntokens\":%" PRIu32
	    ",\"tokens\":", sid, m->pos, m->tokens, d->epoch, d->chunk,
	    d->record, ovl_cursor_format(&c, cb), d->nimages, d->ntokens);
	ovl_json_u32s(stdout, d->tokens, d->ntokens);
	if (d->flags & OVL_DOC_TEXT) {
		fputs(",\"text\":", stdout);
		ovl_json_string(stdout, d->text, d->text_len);
	}
	fputs("}\n", stdout);
	if (ferror(stdout)) {
		if (errno == EPIPE)
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on standard output");
	}
}

/*
 * Emit the document pending on in (source k) at the next mixed position,
 * preceded by the checkpoints the step cutter opens inside it. Returns 0
 * when the plan's stop steps= falls before it (nothing emitted), 2 when
 * it falls inside it (emitted, the stream ends after it), 1 otherwise.
 */
static int
emit_doc(struct mixer *m, size_t k, struct input *in, const struct ovl_doc *d,
    struct ovl_buf *st)
{
	struct source *s = &m->src[k];
	struct ovl_stepcut c2 = m->cut;
	uint64_t left = d->ntokens, off = 0, stop = m->plan->stop_steps;
	uint32_t plen;
	size_t nb = 0, i;
	int opened, stopped = 0;

	while (left > 0) {
		plen = ovl_stepcut_next(&c2, left, &opened);
		if (opened && stop != 0 && c2.step >= stop && !stopped) {
			if (off == 0)
				return 0;
			stopped = 1;
		}
		if (opened && !stopped && m->every != 0 &&
		    c2.step % m->every == 0 && c2.step / m->every > m->last_n) {
			if (nb == m->capbars) {
				m->capbars = m->capbars ? m->capbars * 2 : 8;
				m->bars = ovl_xrealloc(m->bars,
				    m->capbars * sizeof(*m->bars));
			}
			m->bars[nb].n = c2.step / m->every;
			m->bars[nb].step = c2.step;
			m->bars[nb].tokens = m->tokens + off;
			m->bars[nb].offset = (uint32_t)off;
			nb++;
		}
		left -= plen;
		off += plen;
	}
	for (i = 0; i < nb; i++)
		emit_barrier(m, &m->bars[i], st);
	if (m->o->json)
		emit_json_doc(m, d, (uint32_t)k);
	else {
		/* rewritten in the reader's buffer, then passed through */
		doc_rewrite(&in->pend, (uint32_t)k, m->pos, m->tokens);
		ovl_writer_copy(m->w, &in->pend);
	}
	in->has_pend = 0;
	m->cut = c2;
	m->pos++;
	m->tokens += d->ntokens;
	s->tokens += d->ntokens;
	s->docs++;
	s->empty_run = 0;
	ovl_doc_cursor(d, &s->cur);
	in->tokens += d->ntokens;
	in->docs++;
	return stopped ? 2 : 1;
}

/* ---- statistics ------------------------------------------------------- */

/*
 * The statistics as flat "key value" lines, for a shell's `read`: the
 * figures a supervisor needs, already computed (integers, or text only
 * shown). Keys: final, elapsed_ms, pos, tokens, step, checkpoint, by,
 * sources (count), then per source NAME: source.NAME.state, .tokens, .docs,
 * .tok_per_s, .share_pct and .target_pct (one decimal, for people),
 * .blocked_ms, .cursor, .partitions, and per partition P:
 * source.NAME.input.P.reopens, .blocked_ms, .ended. ovl-mix(1) lists them.
 */
static void
stats_kv(struct mixer *m, FILE *fp, int final, double T)
{
	static const char *const st[] = { "active", "dropped", "exhausted" };
	char c[OVL_CURSOR_STRLEN];
	double t = since(&m->t0), blocked;
	size_t i, j;

	fprintf(fp, "final %d\nelapsed_ms %" PRIu64 "\npos %" PRIu64
	    "\ntokens %" PRIu64 "\nstep %" PRIu64 "\ncheckpoint %" PRIu64
	    "\nby %s\nsources %zu\n", final, (uint64_t)(t * 1000), m->pos,
	    m->tokens, m->cut.step, m->last_n, m->by == OVL_MIXBY_DOCS ?
	    "docs" : "tokens", m->nsrc);
	for (i = 0; i < m->nsrc; i++) {
		const struct source *s = &m->src[i];
		const char *n = s->ps->name;

		for (blocked = 0, j = 0; j < s->nparts; j++)
			blocked += s->in[j]->blocked;
		fprintf(fp, "source.%s.state %s\nsource.%s.tokens %" PRIu64
		    "\nsource.%s.docs %" PRIu64 "\nsource.%s.tok_per_s %" PRIu64
		    "\nsource.%s.share_pct %.1f\nsource.%s.target_pct %.1f\n"
		    "source.%s.blocked_ms %" PRIu64 "\nsource.%s.cursor %s\n"
		    "source.%s.partitions %u\n", n, st[s->state], n, s->tokens,
		    n, s->docs, n, t > 0 ? (uint64_t)((double)s->tokens / t) : 0,
		    n, T > 0 ? 100.0 * (double)consumed(m, s) / T : 0.0, n,
		    100.0 * (T > 0 ? m->target[i] / T : m->w8[i]), n,
		    (uint64_t)(blocked * 1000), n, ovl_cursor_format(&s->cur, c),
		    n, s->nparts);
		for (j = 0; j < s->nparts; j++) {
			const struct input *in = s->in[j];

			fprintf(fp, "source.%s.input.%u.reopens %" PRIu64 "\n"
			    "source.%s.input.%u.blocked_ms %" PRIu64 "\n"
			    "source.%s.input.%u.ended %d\n", n, in->part,
			    in->reopens, n, in->part,
			    (uint64_t)(in->blocked * 1000), n, in->part,
			    in->ended);
		}
	}
}

static void
write_stats(struct mixer *m, int final)
{
	char *text = NULL;
	size_t len = 0, i, j;
	FILE *fp;
	double T;

	clock_gettime(CLOCK_MONOTONIC, &m->last_stats);
	if (m->o->stats == NULL)
		return;
	targets(m);
	ovl_plan_weights_at(m->plan, count_of(m), m->w8);
	T = (double)count_of(m);
	fp = open_memstream(&text, &len);
	if (fp == NULL)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	if (m->o->stats_kv) {
		stats_kv(m, fp, final, T);
		goto done;
	}
	fprintf(fp, "{\"final\":%s,\"elapsed_s\":%.3f,\"pos\":%" PRIu64
	    ",\"tokens\":%" PRIu64 ",\"step\":%" PRIu64 ",\"checkpoint\":%"
	    PRIu64 ",\"by\":\"%s\",\"sources\":[", final ? "true" : "false",
	    since(&m->t0), m->pos, m->tokens, m->cut.step, m->last_n,
	    m->by == OVL_MIXBY_DOCS ? "docs" : "tokens");
	for (i = 0; i < m->nsrc; i++) {
		const struct source *s = &m->src[i];
		static const char *const st[] = { "active", "dropped",
		    "exhausted" };
		double blocked = 0;

		for (j = 0; j < s->nparts; j++)
			blocked += s->in[j]->blocked;
		fprintf(fp, "%s{\"name\":", i ? "," : "");
		ovl_json_string(fp, s->ps->name, strlen(s->ps->name));
		fprintf(fp, ",\"state\":\"%s\",\"tokens\":%" PRIu64 ",\"docs\":%"
		    PRIu64 ",\"share\":%.6f,\"target_share\":%.6f,\"target\":"
		    "%.1f,\"weight\":%.6f,\"blocked_s\":%.3f,\"cursor\":\"",
		    st[s->state], s->tokens, s->docs,
		    T > 0 ? (double)consumed(m, s) / T : 0.0,
		    T > 0 ? m->target[i] / T : m->w8[i], m->target[i],
		    m->w8[i], blocked);
		{
			char c[OVL_CURSOR_STRLEN];
			fprintf(fp, "%s\",\"inputs\":[", ovl_cursor_format(
			    &s->cur, c));
		}
		for (j = 0; j < s->nparts; j++) {
			const struct input *in = s->in[j];

			fprintf(fp, "%s{\"partition\":%u,\"path\":", j ? "," : "",
			    in->part);
			ovl_json_string(fp, in->path != NULL ? in->path : "-",
			    strlen(in->path != NULL ? in->path : "-"));
			fprintf(fp, ",\"tokens\":%" PRIu64 ",\"docs\":%" PRIu64
			    ",\"blocked_s\":%.3f,\"duplicates\":%" PRIu64
			    ",\"reopens\":%" PRIu64 ",\"ended\":%s}", in->tokens,
			    in->docs, in->blocked, in->dups, in->reopens,
			    in->ended ? "true" : "false");
		}
		fputs("]}", fp);
	}
	fputs("]}\n", fp);
done:
	if (fclose(fp) != 0)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	if (ovl_atomic_write(m->o->stats, text, len) != 0)
		ovl_warn("cannot write '%s'", m->o->stats);
	free(text);
}

static void
report(struct mixer *m)
{
	size_t i;
	double T = (double)count_of(m);

	if (ovl_verbose < 1)
		return;
	targets(m);
	for (i = 0; i < m->nin; i++) {
		const struct input *in = &m->in[i];
		ovl_info(1, "input %s: %" PRIu64 " docs, %" PRIu64 " tokens, "
		    "blocked %.3f s, %" PRIu64 " duplicates dropped, %" PRIu64
		    " reopens", in->label, in->docs, in->tokens, in->blocked,
		    in->dups, in->reopens);
	}
	for (i = 0; i < m->nsrc; i++) {
		const struct source *s = &m->src[i];
		ovl_info(1, "source %s: %" PRIu64 " docs, %" PRIu64 " tokens, "
		    "share %.4f, target %.4f", s->ps->name, s->docs, s->tokens,
		    T > 0 ? (double)consumed(m, s) / T : 0.0,
		    T > 0 ? m->target[i] / T : 0.0);
	}
	ovl_info(1, "%" PRIu64 " documents, %" PRIu64 " tokens, %" PRIu64
	    " steps begun, last checkpoint %" PRIu64 "; %s", m->pos, m->tokens,
	    m->cut.step, m->last_n, m->end_reason);
}

/* ---- resume ---------------------------------------------------------- */

static void
resume_from(struct mixer *m, const char *path)
{
	FILE *fp = fopen(path, "r");
	char *line = NULL, *sp, *key, *val, *dot;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	uint64_t x, step = 0, start = 0, used = 0, nsrc = 0;
	int seen_cursor[OVL_PLAN_MAX_SOURCES];
	size_t i;
	int k;

	if (fp == NULL)
		ovl_err(OVL_EXIT_USAGE, "cannot open '%s'", path);
	memset(seen_cursor, 0, sizeof(seen_cursor));
	while ((n = getline(&line, &cap, fp)) > 0) {
		lineno++;
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (n == 0)
			continue;
		sp = strchr(line, ' ');
		if (sp == NULL)
			ovl_errx(OVL_EXIT_USAGE, "%s:%zu: expected 'key value'",
			    path, lineno);
		*sp = '\0';
		key = line;
		val = sp + 1;
#define NUM(dst) do {							\
	if (ovl_num_u64(val, &x) != 0)					\
		ovl_errx(OVL_EXIT_USAGE, "%s:%zu: bad value '%s' for %s",	\
		    path, lineno, val, key);					\
	dst = x;							\
} while (0)
		if (strcmp(key, "version") == 0) {
			if (strcmp(val, "1") != 0)
				ovl_errx(OVL_EXIT_USAGE, "%s:%zu: unknown state "
				    "version %s", path, lineno, val);
		} else if (strcmp(key, "checkpoint") == 0)
			NUM(m->last_n);
		else if (strcmp(key, "sources") == 0)
			NUM(nsrc);
		else if (strcmp(key, "mix-by") == 0) {
			if (strcmp(val, m->by == OVL_MIXBY_DOCS ? "docs" :
			    "tokens") != 0)
				ovl_errx(OVL_EXIT_USAGE, "%s:%zu: the state "
				    "mixes by %s, the plan by %s", path, lineno,
				    val, m->by == OVL_MIXBY_DOCS ? "docs" :
				    "tokens");
		} else if (strcmp(key, "pos") == 0)
			NUM(m->pos);
		else if (strcmp(key, "tokens") == 0)
			NUM(m->tokens);
		else if (strcmp(key, "step") == 0)
			NUM(step);
		else if (strcmp(key, "step.start") == 0)
			NUM(start);
		else if (strcmp(key, "step.used") == 0)
			NUM(used);
		else if (strcmp(key, "drop.at") == 0) {
			NUM(m->drop_at);
			m->any_drop = 1;
		} else if (strncmp(key, "source.", 7) == 0 &&
		    (dot = strrchr(key + 7, '.')) != NULL) {
			struct source *s;
			const char *field = dot + 1;

			k = ovl_plan_find(m->plan, key + 7,
			    (size_t)(dot - (key + 7)));
			if (k < 0)
				ovl_errx(OVL_EXIT_USAGE, "%s:%zu: the plan has "
				    "no source '%.*s'", path, lineno,
				    (int)(dot - (key + 7)), key + 7);
			s = &m->src[k];
			if (strcmp(field, "cursor") == 0) {
				if (ovl_cursor_parse(val, &s->cur) != 0)
					ovl_errx(OVL_EXIT_USAGE, "%s:%zu: bad "
					    "cursor '%s'", path, lineno, val);
				seen_cursor[k] = 1;
			} else if (strcmp(field, "tokens") == 0)
				NUM(s->tokens);
			else if (strcmp(field, "docs") == 0)
				NUM(s->docs);
			else if (strcmp(field, "nchunks") == 0) {
				NUM(x);
				s->nchunks = (uint32_t)x;
			} else if (strcmp(field, "partitions") == 0)
				;	/* the inputs given now decide */
			else if (strcmp(field, "state") == 0) {
				if (strcmp(val, "active") == 0)
					s->state = ST_ACTIVE;
				else if (strcmp(val, "dropped") == 0)
					s->state = ST_DROPPED;
				else if (strcmp(val, "exhausted") == 0)
					s->state = ST_EXHAUSTED;
				else
					ovl_errx(OVL_EXIT_USAGE, "%s:%zu: bad "
					    "state '%s'", path, lineno, val);
			} else if (strcmp(field, "base") == 0) {
				char *end;
				errno = 0;
				s->base = strtod(val, &end);
				if (*end != '\0' || errno != 0)
					ovl_errx(OVL_EXIT_USAGE, "%s:%zu: bad "
					    "base '%s'", path, lineno, val);
			} else
				ovl_errx(OVL_EXIT_USAGE, "%s:%zu: unknown key "
				    "'%s'", path, lineno, key);
		} else
			ovl_errx(OVL_EXIT_USAGE, "%s:%zu: unknown key '%s'", path,
			    lineno, key);
#undef NUM
	}
	if (ferror(fp))
		ovl_err(OVL_EXIT_USAGE, "cannot read '%s'", path);
	free(line);
	fclose(fp);
	if (nsrc != m->nsrc)
		ovl_errx(OVL_EXIT_USAGE, "%s: the state has %" PRIu64 " sources, "
		    "the plan %zu", path, nsrc, m->nsrc);
	for (i = 0; i < m->nsrc; i++) {
		if (!seen_cursor[i])
			ovl_errx(OVL_EXIT_USAGE, "%s: no cursor for source '%s'",
			    path, m->src[i].ps->name);
		m->active[i] = m->src[i].state == ST_ACTIVE;
	}
	ovl_stepcut_restore(&m->cut, &m->cfg, step, start, used);
	ovl_info(1, "resuming at mixed position %" PRIu64 ", %" PRIu64
	    " tokens, step %" PRIu64 ", after checkpoint %" PRIu64, m->pos,
	    m->tokens, step, m->last_n);
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
		in->src = (uint32_t)si;
		in->part = count[si]++;
	}
	for (k = 0; k < m->nsrc; k++) {
		struct source *s = &m->src[k];

		if (count[k] == 0)
			ovl_cli_usagex(&cli, "no input for source '%s' (give "
			    "%s=PATH)", s->ps->name, s->ps->name);
		s->nparts = count[k];
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
	for (i = 0; i < m->nin; i++)
		open_input(&m->in[i]);
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
		    since(&m->last_stats) >= 1.0)
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
		if (ovl_cli_common(&cli, c))
			continue;
		switch (c) {
		case O_BY:
			if (strcmp(optarg, "tokens") == 0)
				o->by = OVL_MIXBY_TOKENS;
			else if (strcmp(optarg, "docs") == 0)
				o->by = OVL_MIXBY_DOCS;
			else
				ovl_cli_usagex(&cli, "bad --by '%s' (tokens, "
				    "docs)", optarg);
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
			o->get_key = optarg;
			needs_plan_only = "--get";
			break;
		default:
			ovl_cli_usage(&cli);
		}
	}
	if (o->check + o->list + (o->args_name != NULL) +
	    (o->get_key != NULL) > 1)
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
	size_t i;

	ovl_cli_init(&cli);
	parse_opts(&o, argc, argv);
	if (o.check)
		return cmd_check(&o);
	if (o.list)
		return cmd_list(&o);
	if (o.args_name != NULL)
		return cmd_args(&o);
	if (o.get_key != NULL)
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
		m.active[i] = 1;
	}
	ovl_plan_stepcfg(m.plan, &m.cfg);
	ovl_stepcut_init(&m.cut, &m.cfg);
	if (o.resume != NULL)
		resume_from(&m, o.resume);
	if (!o.json)
		ovl_io_refuse_tty(STDOUT_FILENO);
	clock_gettime(CLOCK_MONOTONIC, &m.t0);
	m.last_stats = m.t0;
	setup_inputs(&m);
	if (!o.json) {
		m.w = ovl_writer_new(STDOUT_FILENO, "standard output");
	}
	write_meta(&m);
	run(&m);
	if (o.json) {
		printf("{\"kind\":\"end\",\"docs\":%" PRIu64 ",\"tokens\":%" PRIu64
		    "}\n", m.pos, m.tokens);
		check_stdout();
	} else
		ovl_writer_end(m.w);
	write_stats(&m, 1);
	report(&m);
	if (m.stdin_used && m.stdin_flags >= 0)
		(void)fcntl(STDIN_FILENO, F_SETFL, m.stdin_flags);
	ovl_writer_free(m.w);
	for (i = 0; i < m.nin; i++) {
		ovl_reader_free(m.in[i].r);
		if (m.in[i].path != NULL)
			close(m.in[i].fd);
		free(m.in[i].label);
		free(m.in[i].path);
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
	free(m.target);
	free(m.w8);
	free(m.active);
	free(m.tokenizer);
	ovl_plan_free(m.plan);
	ovl_io_close_stdout();
	return OVL_EXIT_OK;
}
