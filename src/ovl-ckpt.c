/*
 * ovl-ckpt: the committing sink. Writes the constructor's sequences where
 * the user wants them (frames on stdout or per rank, Megatron .bin/.idx,
 * npy, jsonl, a provenance manifest) and commits a checkpoint at every
 * BARRIER into a differential log; show, diff, compact, restore and verify
 * read that log. See ovl-ckpt(1).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "buf.h"
#include "ckptlog.h"
#include "cli.h"
#include "err.h"
#include "frame.h"
#include "frameio.h"
#include "hash64.h"
#include "io.h"
#include "json.h"
#include "num.h"
#include "plan.h"

#define OUT_FLUSH	(256u << 10)	/* write an output when this much is buffered */
#define NPY_HDR		128u		/* fixed npy header: rewritten in place */
#define SEQS_COLS	7u		/* columns of PREFIX.seqs.npy */
#define MAX_RANKS	65536u
#define MAX_SKIPS	1024u
#define EXIT_STOPPED	(128 + SIGTERM)

static const struct ovl_cli cli = {
	"ovl-ckpt",
	"ovl-ckpt [options] --dir CKPTDIR [PLAN]\n"
	"ovl-ckpt show [--json | --list | --print0] CKPTDIR [--at N]\n"
	"ovl-ckpt diff CKPTDIR N M\n"
	"ovl-ckpt compact CKPTDIR\n"
	"ovl-ckpt restore [--print0] [--skip-steps A-B] [--wait S] [--verify-all] [--adopt] CKPTDIR [--at N]\n"
	"ovl-ckpt verify CKPTDIR [--at N] OUTPUT ...",
	"Write packed sequences and commit differential checkpoints.\n"
	"  -d, --dir CKPTDIR       checkpoint directory (or the plan's checkpoint dir=)\n"
	"  -f, --format FMT        megatron, npy, jsonl or frames (files under -o)\n"
	"  -o, --output PREFIX     output prefix (the file itself for frames)\n"
	"  -p, --per-rank PATTERN  one frame stream per rank, e.g. out/rank%d\n"
	"  -m, --manifest FILE     provenance of every sequence, as JSON lines\n"
	"  -r, --resume N          continue after checkpoint N (ovl-ckpt restore)\n"
	"  -b, --base-every M      a full base record every M records (16)\n"
	"  -s, --skip-steps A-B    drop the sequences of steps A..B\n"
	"  -R, --rank R            only the sequences of rank R\n"
	"  -j, --json              standard output as JSON lines (for people)\n"
	"  -a, --at N              (show, restore, verify) checkpoint N, not the last\n"
	"  -l, --list              (show) one line per record\n"
	"      --print0            (show, restore) NUL-separated words, for a supervisor\n"
	"      --wait S            (restore) wait up to S seconds for the directory's lock\n"
	"      --verify-all        (restore) check every committed byte, not the last segment\n"
	"      --adopt             (restore) a copied or moved directory takes over the outputs\n"
	"  -h, --help, -V, --version, -v, --verbose, -q, --quiet\n"
};

enum { FMT_NONE, FMT_MEGATRON, FMT_NPY, FMT_JSONL, FMT_FRAMES };
static const char *const fmt_name[] = { "none", "megatron", "npy", "jsonl",
	"frames" };

struct ckpt_opts {
	const char	*dir;
	const char	*plan;
	int		 format;
	const char	*prefix;
	const char	*per_rank;
	const char	*manifest;
	uint64_t	 base_every;
	int		 resume_set;
	uint64_t	 resume;
	int		 json;
	int		 at_set;
	uint64_t	 at;
	int		 list;
	int		 nskip;
	uint64_t	 skip[2];
	int		 rank_set;
	uint32_t	 rank;
	int		 print0;	/* restore, show: NUL-separated words */
	uint64_t	 wait_s;	/* restore: seconds to wait for the lock */
	int		 verify_all;	/* restore: check every committed byte */
	int		 adopt;		/* restore: a copied directory takes the outputs */
	uint32_t	 plan_ranks;
};

/* One output file or stream. */
enum { OT_FRAMES, OT_RAW, OT_NPY };
struct out {
	char		*name;		/* key in the "out" section */
	char		*path;		/* absolute; NULL for standard output */
	int		 fd;
	int		 type;		/* OT_* */
	int		 regular;	/* a regular file: truncated, appended on resume */
	int		 fresh;		/* nothing of it was written before this run */
	uint32_t	 hdr;		/* leading bytes outside the hash (npy header) */
	const char	*descr;		/* npy dtype, e.g. "<u2" */
	uint32_t	 itemsize, cols;
	uint64_t	 len;		/* bytes written and buffered */
	uint64_t	 nframes;
	uint64_t	 hash;		/* chain value at the last commit */
	uint64_t	 seg;		/* hashed bytes since the last commit */
	struct ovl_hash64 h;
	struct ovl_buf	 buf;
};

struct skip { uint64_t a, b; };

struct ckpt_run {
	struct ckpt_opts *o;
	char		*dir;
	char		*logpath;
	int		 logfd;
	uint64_t	 logend;
	uint64_t	 since_base;	/* records since the last base */
	int		 have_prev;
	struct ovl_ckstate prev, cur;
	uint64_t	 last_n;
	int		 have_last;

	struct out	**outs;
	size_t		 nouts;
	struct out	*std, *bin, *sizes, *tok, *pos, *cu, *seqs, *jsonl, *man,
			*frames;
	struct out	**rank;
	size_t		 nrank;

	/* stream */
	struct ovl_buf	 meta;		/* the META frame, header included */
	int		 have_meta;
	uint64_t	 vocab;
	int		 have_vocab;
	uint32_t	 meta_ranks;
	char		**srcname;
	size_t		 nsrc;
	int		 tok16;		/* tokens stored as 16 bits */
	struct ovl_buf	 mixst, cst;
	int		 have_mix, have_con;
	uint64_t	 mix_n, con_n;
	struct ovl_barrier bar;

	uint64_t	 nseqs, nskipped, ncu;
	uint64_t	 cur_step;	/* step of the last SEQ, + 1; 0 before any */
	struct ovl_reader *rd;		/* standard input, for offsets in messages */
	struct skip	 skips[MAX_SKIPS];
	size_t		 nskips;
	struct ovl_buf	 scratch;
	FILE		*jsonfp;
};

static volatile sig_atomic_t stop_requested;

static void	committer_add_fd(int fd);

static void
on_term(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* ---- small helpers ---- */

static char *
xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	s = ovl_xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* An absolute form of path whose directory exists (made when mkdirs). */
static char *
abspath(const char *path, int mkdirs)
{
	char *dup = ovl_xstrdup(path), *slash = strrchr(dup, '/'), *dir, *r;
	const char *base;

	if (slash == NULL) {
		dir = ovl_xstrdup(".");
		base = path;
	} else {
		*slash = '\0';
		dir = ovl_xstrdup(slash == dup ? "/" : dup);
		base = path + (slash - dup) + 1;
	}
	if (mkdirs && ovl_mkdir_p(dir, 0777) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot create directory '%s'", dir);
	r = realpath(dir, NULL);
	if (r == NULL)
		ovl_err(OVL_EXIT_DATA, "cannot resolve '%s'", dir);
	free(dup);
	dup = xasprintf("%s%s%s", r, strcmp(r, "/") == 0 ? "" : "/", base);
	free(r);
	free(dir);
	return dup;
}

static void
shell_word(FILE *fp, const char *s)
{
	const char *p;

	for (p = s; *p != '\0'; p++)
		if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789_./:,+@%=-", *p) == NULL)
			break;
	if (*p == '\0' && *s != '\0') {
		fputs(s, fp);
		return;
	}
	fputc('\'', fp);
	for (p = s; *p != '\0'; p++) {
		if (*p == '\'')
			fputs("'\\''", fp);
		else
			fputc(*p, fp);
	}
	fputc('\'', fp);
}

static int
parse_format(const char *s)
{
	int i;

	for (i = FMT_MEGATRON; i <= FMT_FRAMES; i++)
		if (strcmp(s, fmt_name[i]) == 0)
			return i;
	return -1;
}

/* A per-rank pattern has exactly one %d (and %% for a percent sign). */
static int
pattern_ok(const char *p)
{
	int nd = 0;

	for (; *p != '\0'; p++) {
		if (*p != '%')
			continue;
		if (p[1] == '%')
			p++;
		else if (p[1] == 'd') {
			nd++;
			p++;
		} else
			return 0;
	}
	return nd == 1;
}

static char *
pattern_path(const char *pat, size_t r)
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

/*
 * Lock dir for this process, waiting up to wait_s seconds for another
 * ovl-ckpt to let go (a supervisor killed a moment ago: its sink is still
 * dying). Held until exit.
 */
static int
lock_dir_wait(const char *dir, uint64_t wait_s)
{
	char *path = xasprintf("%s/lock", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	struct timespec t0, now, nap = { 0, 20 * 1000 * 1000 };

	if (fd < 0)
		ovl_err(OVL_EXIT_DATA, "cannot open '%s'", path);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			ovl_err(OVL_EXIT_DATA, "cannot lock '%s'", path);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((uint64_t)(now.tv_sec - t0.tv_sec) >= wait_s)
			ovl_errx(OVL_EXIT_DATA, "'%s' is in use by another "
			    "ovl-ckpt%s", dir, wait_s > 0 ? " (waited for it "
			    "to end)" : "");
		nanosleep(&nap, NULL);
	}
	free(path);
	return fd;
}

static int
lock_dir(const char *dir)
{
	return lock_dir_wait(dir, 0);
}

static void
read_log(const char *dir, struct ovl_ckptlog *log)
{
	char *path = xasprintf("%s/ckpt.log", dir), err[512];
	int rc = ovl_ckptlog_read(path, log, err, sizeof(err));

	free(path);
	if (rc == -1)
		ovl_errx(OVL_EXIT_DATA, "%s", err);
	if (rc == -3)
		ovl_errx(OVL_EXIT_FRAME, "%s", err);
	if (log->valid < log->size)
		ovl_info(1, "'%s/ckpt.log': ignoring a torn tail of %zu bytes",
		    dir, log->size - log->valid);
}

static void
log_state(const char *dir, const struct ovl_ckptlog *log, size_t i,
    struct ovl_ckstate *st)
{
	char err[512];

	if (ovl_ckptlog_state(log, i, st, err, sizeof(err)) != 0)
		ovl_errx(OVL_EXIT_FRAME, "'%s/ckpt.log': %s", dir, err);
}

/* The record --at N names (or the last one); exits 1 when there is none. */
static size_t
pick_record(const char *dir, const struct ovl_ckptlog *log, int at_set,
    uint64_t at)
{
	long i;

	if (log->nrec == 0)
		ovl_errx(OVL_EXIT_DATA, "no checkpoint in '%s'", dir);
	if (!at_set)
		return log->nrec - 1;
	i = ovl_ckptlog_find(log, at);
	if (i < 0)
		ovl_errx(OVL_EXIT_DATA, "no checkpoint %" PRIu64 " in '%s'", at,
		    dir);
	return (size_t)i;
}

/* Cut the log after record i (and any torn tail). */
static void
cut_log(const char *dir, const struct ovl_ckptlog *log, size_t i)
{
	uint64_t end = log->rec[i].offset + OVL_CKPTREC_HDR_LEN + log->rec[i].len;
	char *path;
	int fd;

	if (end == log->size)
		return;
	path = xasprintf("%s/ckpt.log", dir);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)end) != 0 || fsync(fd) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot truncate '%s'", path);
	close(fd);
	ovl_info(1, "'%s': cut after checkpoint %" PRIu64 " (byte %" PRIu64
	    ")", path, log->rec[i].n, end);
	free(path);
}

/* ---- skip ranges ---- */

static int
skipped(const struct ckpt_run *R, uint64_t step)
{
	size_t i;

	for (i = 0; i < R->nskips; i++)
		if (step >= R->skips[i].a && step <= R->skips[i].b)
			return 1;
	return 0;
}

static void
skips_format(const struct skip *s, size_t n, struct ovl_buf *b)
{
	char t[64];
	size_t i;

	b->len = 0;
	if (n == 0)
		ovl_buf_append(b, "-", 1);
	for (i = 0; i < n; i++) {
		snprintf(t, sizeof(t), "%s%" PRIu64 "-%" PRIu64, i ? "," : "",
		    s[i].a, s[i].b);
		ovl_buf_append(b, t, strlen(t));
	}
	ovl_buf_append(b, "", 1);
}

static int
skips_parse(const char *v, struct skip *s, size_t *n)
{
	char *dup, *tok, *save = NULL;
	int rc = 0;

	*n = 0;
	if (v == NULL || strcmp(v, "-") == 0)
		return 0;
	dup = ovl_xstrdup(v);
	for (tok = strtok_r(dup, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		if (*n == MAX_SKIPS || ovl_num_range(tok, &s[*n].a,
		    &s[*n].b) != 0) {
			rc = -1;
			break;
		}
		(*n)++;
	}
	free(dup);
	return rc;
}

/* ---- outputs ---- */

static void
out_flush(struct out *o)
{
	if (o->buf.len == 0)
		return;
	if (ovl_io_write_full(o->fd, o->buf.p, o->buf.len) != 0) {
		if (errno == EPIPE)
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on '%s'",
		    o->path != NULL ? o->path : "standard output");
	}
	o->buf.len = 0;
}

/* Append hashed bytes. */
static void
out_put(struct out *o, const void *p, size_t n)
{
	ovl_hash64_update(&o->h, p, n);
	o->seg += n;
	o->len += n;
	if (o->buf.len + n > OUT_FLUSH) {
		out_flush(o);
		if (n >= OUT_FLUSH) {
			o->buf.len = 0;
			ovl_buf_append(&o->buf, p, n);
			out_flush(o);
			return;
		}
	}
	ovl_buf_append(&o->buf, p, n);
}

static void
npy_header(const struct out *o, uint8_t hdr[NPY_HDR])
{
	uint64_t n = (o->len - o->hdr) / o->itemsize;
	char dict[NPY_HDR];
	int len;

	if (o->cols > 1)
		len = snprintf(dict, sizeof(dict), "{'descr': '%s', "
		    "'fortran_order': False, 'shape': (%" PRIu64 ", %u), }",
		    o->descr, n / o->cols, o->cols);
	else
		len = snprintf(dict, sizeof(dict), "{'descr': '%s', "
		    "'fortran_order': False, 'shape': (%" PRIu64 ",), }",
		    o->descr, n);
	memset(hdr, ' ', NPY_HDR);
	memcpy(hdr, "\x93NUMPY\x01\x00", 8);
	hdr[8] = (uint8_t)(NPY_HDR - 10);
	hdr[9] = 0;
	memcpy(hdr + 10, dict, (size_t)len);
	hdr[NPY_HDR - 1] = '\n';
}

static void
npy_rewrite(struct out *o)
{
	uint8_t hdr[NPY_HDR];

	npy_header(o, hdr);
	if (pwrite(o->fd, hdr, NPY_HDR, 0) != (ssize_t)NPY_HDR)
		ovl_err(OVL_EXIT_DATA, "write error on '%s'", o->path);
}

static const char *
type_name(const struct out *o)
{
	return o->type == OT_FRAMES ? "frames" : o->type == OT_NPY ? "npy" :
	    "raw";
}

static struct out *
out_new(struct ckpt_run *R, const char *name, const char *path, int type)
{
	struct out *o = ovl_xcalloc(1, sizeof(*o));

	o->name = ovl_xstrdup(name);
	o->path = path != NULL ? abspath(path, 1) : NULL;
	o->type = type;
	o->fd = -1;
	o->itemsize = 1;
	o->cols = 1;
	if (type == OT_NPY)
		o->hdr = NPY_HDR;
	R->outs = ovl_xrealloc(R->outs, (R->nouts + 1) * sizeof(*R->outs));
	R->outs[R->nouts++] = o;
	return o;
}

/*
 * Open an output: fresh (created empty, its header written), or, when the
 * resumed checkpoint has it, cut back to the committed length and continued.
 */
static void
out_open(struct ckpt_run *R, struct out *o)
{
	const struct ovl_kvsec *os = &R->prev.sec[OVL_SEC_OUT];
	const char *v = R->have_prev ? ovl_kvsec_get(os, o->name) : NULL;
	char key[256];
	const char *rpath;
	uint64_t len = 0, hash = 0, frames = 0;
	struct stat st;

	if (v != NULL) {
		snprintf(key, sizeof(key), "%s.path", o->name);
		rpath = ovl_kvsec_get(os, key);
		if (rpath == NULL || strcmp(rpath, o->path != NULL ? o->path :
		    "-") != 0)
			ovl_errx(OVL_EXIT_USAGE, "output '%s' was '%s' at "
			    "checkpoint %" PRIu64 ", not '%s'", o->name,
			    rpath != NULL ? rpath : "?", R->last_n,
			    o->path != NULL ? o->path : "-");
		if (sscanf(v, "%" SCNu64 " %" SCNx64 " %" SCNu64, &len, &hash,
		    &frames) != 3)
			ovl_errx(OVL_EXIT_FRAME, "checkpoint %" PRIu64 ": bad "
			    "output line '%s %s'", R->last_n, o->name, v);
	}
	if (o->path == NULL) {
		o->fd = STDOUT_FILENO;
		o->regular = 0;	/* standard output always starts a new stream */
	} else {
		/* Not O_TRUNC: the lock comes first (another run may own it). */
		o->fd = open(o->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (o->fd < 0 && errno == ENXIO)	/* FIFO without reader yet */
			o->fd = open(o->path, O_WRONLY | O_CLOEXEC);
		if (o->fd < 0)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", o->path);
		o->regular = fstat(o->fd, &st) == 0 && S_ISREG(st.st_mode);
		if (!o->regular)
			ovl_io_pipe_grow(o->fd);
		else {
			/* One writer per output file, held until exit. */
			if (flock(o->fd, LOCK_EX | LOCK_NB) != 0)
				ovl_errx(OVL_EXIT_DATA, "'%s' is being written by "
				    "another ovl-ckpt (two runs with one output)",
				    o->path);
			if (v == NULL && ftruncate(o->fd, 0) != 0)
				ovl_err(OVL_EXIT_DATA, "cannot truncate '%s'",
				    o->path);
			committer_add_fd(o->fd);
		}
	}
	o->len = len;
	o->hash = hash;
	o->nframes = frames;
	ovl_hash64_init(&o->h, hash);
	o->fresh = v == NULL || !o->regular;
	if (!o->fresh) {
		if ((uint64_t)st.st_size < len)
			ovl_errx(OVL_EXIT_DATA, "'%s' has %jd bytes, fewer than "
			    "the %" PRIu64 " of checkpoint %" PRIu64, o->path,
			    (intmax_t)st.st_size, len, R->last_n);
		if (ftruncate(o->fd, (off_t)len) != 0 ||
		    lseek(o->fd, 0, SEEK_END) < 0)
			ovl_err(OVL_EXIT_DATA, "cannot truncate '%s'", o->path);
		if (o->type == OT_NPY)
			npy_rewrite(o);
		return;
	}
	if (v == NULL)
		o->len = 0;
	if (o->type == OT_FRAMES) {
		uint8_t sh[OVL_STREAM_HDR_LEN];

		ovl_stream_hdr_encode(sh);
		out_put(o, sh, sizeof(sh));
		if (R->have_meta) {
			out_put(o, R->meta.p, R->meta.len);
			o->nframes++;
		}
	} else if (o->type == OT_NPY) {
		uint8_t hdr[NPY_HDR];

		o->len = NPY_HDR;
		npy_header(o, hdr);
		ovl_buf_append(&o->buf, hdr, NPY_HDR);	/* outside the hash */
		if (o == R->cu) {
			int64_t zero = 0;

			out_put(o, &zero, sizeof(zero));
		}
	}
}

/*
 * Write out, fix the npy header, fold the segment into the chain. The
 * committer thread fdatasyncs the file before the record goes to the log.
 */
static void
out_commit(struct out *o)
{
	out_flush(o);
	if (o->type == OT_NPY && o->regular)
		npy_rewrite(o);
	if (o->seg > 0) {
		o->hash = ovl_hash64_digest(&o->h);
		ovl_hash64_init(&o->h, o->hash);
		o->seg = 0;
	}
}

static struct out *
rank_out(struct ckpt_run *R, uint32_t r)
{
	char *path, name[32];

	if (r < R->nrank && R->rank[r] != NULL)
		return R->rank[r];
	if (r >= MAX_RANKS)
		ovl_errx(OVL_EXIT_FRAME, "SEQ for rank %" PRIu32 ": more than %u "
		    "ranks", r, MAX_RANKS);
	if (r >= R->nrank) {
		R->rank = ovl_xrealloc(R->rank, ((size_t)r + 1) *
		    sizeof(*R->rank));
		memset(R->rank + R->nrank, 0, ((size_t)r + 1 - R->nrank) *
		    sizeof(*R->rank));
		R->nrank = (size_t)r + 1;
	}
	snprintf(name, sizeof(name), "rank%" PRIu32, r);
	path = pattern_path(R->o->per_rank, r);
	R->rank[r] = out_new(R, name, path, OT_FRAMES);
	free(path);
	out_open(R, R->rank[r]);
	return R->rank[r];
}

/* ---- META ---- */

static void
meta_parse(struct ckpt_run *R, const char *text, uint32_t len)
{
	const char *p = text, *end = text + len, *nl;
	char line[512], name[256];
	uint64_t v;
	unsigned id;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		if ((size_t)(nl - p) < sizeof(line)) {
			memcpy(line, p, (size_t)(nl - p));
			line[nl - p] = '\0';
			if (strncmp(line, "vocab ", 6) == 0 &&
			    ovl_num_u64(line + 6, &v) == 0) {
				R->vocab = v;
				R->have_vocab = 1;
			} else if (strncmp(line, "ranks ", 6) == 0 &&
			    ovl_num_u64(line + 6, &v) == 0 && v >= 1 &&
			    v <= MAX_RANKS)
				R->meta_ranks = (uint32_t)v;
			else if (sscanf(line, "source %u %255s", &id, name) == 2 &&
			    id < 65536) {
				if (id >= R->nsrc) {
					R->srcname = ovl_xrealloc(R->srcname,
					    ((size_t)id + 1) * sizeof(char *));
					memset(R->srcname + R->nsrc, 0,
					    ((size_t)id + 1 - R->nsrc) *
					    sizeof(char *));
					R->nsrc = (size_t)id + 1;
				}
				free(R->srcname[id]);
				R->srcname[id] = ovl_xstrdup(name);
			}
		}
		p = nl + 1;
	}
}

static void
open_outputs(struct ckpt_run *R)
{
	const struct ckpt_opts *o = R->o;
	const char *d16 = "<u2", *d32 = "<u4";
	char *p;
	size_t i;

	/* Megatron: uint16 below 65500 ids, else int32; npy: uint16 up to 65536 */
	if (o->format == FMT_MEGATRON)
		R->tok16 = R->have_vocab && R->vocab < 65500;
	else
		R->tok16 = R->have_vocab && R->vocab <= 65536;
	if (o->format == FMT_MEGATRON)
		d32 = "<i4";
	if (R->have_prev) {
		const char *t = ovl_kvsec_get(&R->prev.sec[OVL_SEC_CKPT],
		    "token-bits");
		if (t != NULL && strcmp(t, R->tok16 ? "16" : "32") != 0)
			ovl_errx(OVL_EXIT_USAGE, "the stream's vocabulary gives "
			    "%s-bit tokens, checkpoint %" PRIu64 " has %s-bit",
			    R->tok16 ? "16" : "32", R->last_n, t);
	}
	if (o->per_rank == NULL && o->format == FMT_NONE) {
		if (!o->json)
			ovl_io_refuse_tty(STDOUT_FILENO);
		R->std = out_new(R, "stdout", NULL, o->json ? OT_RAW : OT_FRAMES);
	}
	switch (o->format) {
	case FMT_MEGATRON:
		p = xasprintf("%s.bin", o->prefix);
		R->bin = out_new(R, "bin", p, OT_RAW);
		free(p);
		p = xasprintf("%s/megatron.sizes", R->dir);
		R->sizes = out_new(R, "sizes", p, OT_RAW);
		free(p);
		break;
	case FMT_NPY:
		p = xasprintf("%s.tokens.npy", o->prefix);
		R->tok = out_new(R, "tokens", p, OT_NPY);
		R->tok->descr = R->tok16 ? d16 : d32;
		R->tok->itemsize = R->tok16 ? 2 : 4;
		free(p);
		p = xasprintf("%s.positions.npy", o->prefix);
		R->pos = out_new(R, "positions", p, OT_NPY);
		R->pos->descr = "<i4";
		R->pos->itemsize = 4;
		free(p);
		p = xasprintf("%s.cu_seqlens.npy", o->prefix);
		R->cu = out_new(R, "cu_seqlens", p, OT_NPY);
		R->cu->descr = "<i8";
		R->cu->itemsize = 8;
		free(p);
		p = xasprintf("%s.seqs.npy", o->prefix);
		R->seqs = out_new(R, "seqs", p, OT_NPY);
		R->seqs->descr = "<i8";
		R->seqs->itemsize = 8;
		R->seqs->cols = SEQS_COLS;
		free(p);
		break;
	case FMT_JSONL:
		p = xasprintf("%s.jsonl", o->prefix);
		R->jsonl = out_new(R, "jsonl", p, OT_RAW);
		free(p);
		break;
	case FMT_FRAMES:
		R->frames = out_new(R, "frames", o->prefix, OT_FRAMES);
		break;
	}
	if (o->manifest != NULL)
		R->man = out_new(R, "manifest", o->manifest, OT_RAW);
	for (i = 0; i < R->nouts; i++)
		out_open(R, R->outs[i]);
	if (R->cu != NULL)
		R->ncu = (R->cu->len - NPY_HDR) / 8;
	if (o->per_rank != NULL) {
		uint32_t n = R->meta_ranks ? R->meta_ranks : o->plan_ranks;
		const struct ovl_kvsec *os = &R->prev.sec[OVL_SEC_OUT];
		char key[32];

		for (i = 0; i < n; i++)
			rank_out(R, (uint32_t)i);
		/* ranks the checkpoint had beyond those */
		for (i = n; R->have_prev && i < MAX_RANKS; i++) {
			snprintf(key, sizeof(key), "rank%zu", i);
			if (ovl_kvsec_find(os, key) < 0)
				break;
			rank_out(R, (uint32_t)i);
		}
	}
	if (R->have_prev) {	/* every output of the checkpoint must be ours */
		const struct ovl_kvsec *os = &R->prev.sec[OVL_SEC_OUT];
		size_t j;

		for (i = 0; i < os->n; i++) {
			if (strchr(os->kv[i].key, '.') != NULL)
				continue;
			for (j = 0; j < R->nouts; j++)
				if (strcmp(R->outs[j]->name, os->kv[i].key) == 0)
					break;
			if (j == R->nouts)
				ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64
				    " has output '%s' that this command line "
				    "does not write", R->last_n, os->kv[i].key);
		}
	}
}

/* ---- SEQ ---- */

static char *
put_u64(char *p, uint64_t v)
{
	char t[24];
	int n = 0;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (n > 0)
		*p++ = t[--n];
	return p;
}

static void
json_array(struct ovl_buf *b, const char *key, const uint32_t *a, size_t n)
{
	char *p;
	size_t i;

	p = (char *)ovl_buf_reserve(b, strlen(key) + 6 + n * 11);
	p += sprintf(p, ",\"%s\":[", key);
	for (i = 0; i < n; i++) {
		if (i > 0)
			*p++ = ',';
		p = put_u64(p, a[i]);
	}
	*p++ = ']';
	b->len = (size_t)(p - (char *)b->p);
}

static void
json_seq_head(struct ovl_buf *b, const struct ovl_seq *s, uint64_t index)
{
	char t[160];

	snprintf(t, sizeof(t), "{\"seq\":%" PRIu64 ",\"step\":%" PRIu64
	    ",\"rank\":%" PRIu32 ",\"mb\":%" PRIu32, index, s->step, s->rank,
	    s->mb);
	ovl_buf_append(b, t, strlen(t));
}

static void
write_jsonl(struct ckpt_run *R, struct out *o, const struct ovl_seq *s)
{
	struct ovl_buf *b = &R->scratch;

	b->len = 0;
	json_seq_head(b, s, R->nseqs);
	json_array(b, "tokens", s->tokens, s->ntokens);
	json_array(b, "positions", s->positions, s->ntokens);
	json_array(b, "cu_seqlens", s->cu_seqlens, (size_t)s->npieces + 1);
	ovl_buf_append(b, "}\n", 2);
	out_put(o, b->p, b->len);
}

static void
write_manifest(struct ckpt_run *R, const struct ovl_seq *s)
{
	struct ovl_buf *b = &R->scratch;
	struct ovl_piece pc;
	char t[256];
	const char *name;
	uint32_t i;

	b->len = 0;
	json_seq_head(b, s, R->nseqs);
	ovl_buf_append(b, ",\"pieces\":[", 11);
	for (i = 0; i < s->npieces; i++) {
		ovl_seq_piece(s, i, &pc);
		name = pc.source < R->nsrc && R->srcname[pc.source] != NULL ?
		    R->srcname[pc.source] : NULL;
		if (i > 0)
			ovl_buf_append(b, ",", 1);
		snprintf(t, sizeof(t), "{\"source\":%" PRIu32, pc.source);
		ovl_buf_append(b, t, strlen(t));
		if (name != NULL) {	/* META names are [A-Za-z0-9_-] */
			snprintf(t, sizeof(t), ",\"name\":\"%s\"", name);
			ovl_buf_append(b, t, strlen(t));
		}
		snprintf(t, sizeof(t), ",\"epoch\":%" PRIu32 ",\"chunk\":%"
		    PRIu32 ",\"record\":%" PRIu64 ",\"mix_pos\":%" PRIu64
		    ",\"offset\":%" PRIu32 ",\"length\":%" PRIu32 "}", pc.epoch,
		    pc.chunk, pc.record, pc.mix_pos, pc.offset, pc.length);
		ovl_buf_append(b, t, strlen(t));
	}
	ovl_buf_append(b, "]}\n", 3);
	out_put(R->man, b->p, b->len);
}

static void
write_tokens(struct ckpt_run *R, struct out *o, const struct ovl_seq *s,
    int bits16, uint32_t limit)
{
	uint32_t i, bad = 0, max = 0;

	for (i = 0; i < s->ntokens; i++)
		if (s->tokens[i] > max)
			max = s->tokens[i];
	if (max > limit)
		bad = 1;
	if (bad)
		ovl_errx(OVL_EXIT_DATA, "SEQ of step %" PRIu64 " rank %" PRIu32
		    ": token id %" PRIu32 " does not fit %s (META vocab %" PRIu64
		    ")", s->step, s->rank, max, bits16 ? "uint16" : "int32",
		    R->vocab);
	if (!bits16) {
		out_put(o, s->tokens, (size_t)s->ntokens * 4);
		return;
	}
	{
		uint16_t *t;

		R->scratch.len = 0;	/* storage from malloc: aligned */
		t = (uint16_t *)(void *)ovl_buf_reserve(&R->scratch,
		    (size_t)s->ntokens * 2);

		for (i = 0; i < s->ntokens; i++)
			t[i] = (uint16_t)s->tokens[i];
		out_put(o, t, (size_t)s->ntokens * 2);
	}
}

static void
on_seq(struct ckpt_run *R, const struct ovl_frame *f)
{
	struct ovl_seq s;
	uint32_t ranks;
	size_t i;

	if (ovl_seq_decode(f, &s) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'standard input': malformed SEQ "
		    "frame at byte offset %" PRIu64, ovl_reader_offset(R->rd));
	/* A frame whose CRC holds can still make no sense for this run. */
	ranks = R->meta_ranks ? R->meta_ranks : R->o->plan_ranks;
	if (ranks > 0 && s.rank >= ranks)
		ovl_errx(OVL_EXIT_FRAME, "'standard input': SEQ at byte offset %"
		    PRIu64 " is for rank %" PRIu32 " of a %" PRIu32 "-rank run",
		    ovl_reader_offset(R->rd), s.rank, ranks);
	if (R->cur_step > 0 && s.step + 1 < R->cur_step)
		ovl_errx(OVL_EXIT_FRAME, "'standard input': SEQ at byte offset %"
		    PRIu64 " is for step %" PRIu64 ", after step %" PRIu64
		    " (steps out of order)", ovl_reader_offset(R->rd), s.step,
		    R->cur_step - 1);
	if (R->o->rank_set && s.rank != R->o->rank)
		return;
	if (s.step + 1 != R->cur_step) {
		/* a step is complete: a trainer on a pipe gets it now */
		for (i = 0; i < R->nouts; i++)
			if (!R->outs[i]->regular)
				out_flush(R->outs[i]);
		R->cur_step = s.step + 1;
	}
	if (skipped(R, s.step)) {
		R->nskipped++;
		return;
	}
	if (R->std != NULL) {
		if (R->o->json) {
			R->scratch.len = 0;
			json_seq_head(&R->scratch, &s, R->nseqs);
			json_array(&R->scratch, "tokens", s.tokens, s.ntokens);
			json_array(&R->scratch, "positions", s.positions,
			    s.ntokens);
			json_array(&R->scratch, "cu_seqlens", s.cu_seqlens,
			    (size_t)s.npieces + 1);
			ovl_buf_append(&R->scratch, "}\n", 2);
			out_put(R->std, R->scratch.p, R->scratch.len);
		} else {
			out_put(R->std, f->payload - OVL_FRAME_HDR_LEN, f->size);
			R->std->nframes++;
		}
	}
	if (R->frames != NULL) {
		out_put(R->frames, f->payload - OVL_FRAME_HDR_LEN, f->size);
		R->frames->nframes++;
	}
	if (R->o->per_rank != NULL) {
		struct out *o = rank_out(R, s.rank);

		out_put(o, f->payload - OVL_FRAME_HDR_LEN, f->size);
		o->nframes++;
	}
	if (R->bin != NULL) {
		int32_t n = (int32_t)s.ntokens;

		write_tokens(R, R->bin, &s, R->tok16, R->tok16 ? 65535 :
		    INT32_MAX);
		out_put(R->sizes, &n, 4);
	}
	if (R->tok != NULL) {
		int64_t row[SEQS_COLS], c;
		uint64_t first = R->ncu - 1;

		write_tokens(R, R->tok, &s, R->tok16, R->tok16 ? 65535 :
		    UINT32_MAX);
		out_put(R->pos, s.positions, (size_t)s.ntokens * 4);
		row[0] = (int64_t)s.step;
		row[1] = s.rank;
		row[2] = s.mb;
		row[3] = (int64_t)((R->tok->len - NPY_HDR) / R->tok->itemsize) -
		    s.ntokens;
		row[4] = s.ntokens;
		row[5] = (int64_t)first;
		for (i = 1; i <= s.npieces; i++) {
			c = row[3] + s.cu_seqlens[i];
			out_put(R->cu, &c, 8);
			R->ncu++;
		}
		if (s.cu_seqlens[s.npieces] < s.ntokens) {	/* padding */
			c = row[3] + s.ntokens;
			out_put(R->cu, &c, 8);
			R->ncu++;
		}
		row[6] = (int64_t)(R->ncu - 1 - first);
		out_put(R->seqs, row, sizeof(row));
	}
	if (R->jsonl != NULL)
		write_jsonl(R, R->jsonl, &s);
	if (R->man != NULL)
		write_manifest(R, &s);
	R->nseqs++;
}

/* ---- commits ---- */

static void
set_u64(struct ovl_kvsec *s, const char *key, uint64_t v)
{
	char t[32];

	snprintf(t, sizeof(t), "%" PRIu64, v);
	ovl_kvsec_set(s, key, t);
}

static void
build_state(struct ckpt_run *R, const struct ovl_barrier *b)
{
	struct ovl_kvsec *c = &R->cur.sec[OVL_SEC_CKPT];
	struct ovl_kvsec *os = &R->cur.sec[OVL_SEC_OUT];
	const struct ckpt_opts *o = R->o;
	char key[256], val[128];
	size_t i;

	ovl_kvsec_clear(c);
	ovl_kvsec_clear(os);
	set_u64(c, "step", b->step);
	/* where this log was written: a copy of the directory knows it is one */
	ovl_kvsec_set(c, "dir", R->dir);
	set_u64(c, "mix-pos", b->mix_pos);
	set_u64(c, "tokens", b->tokens);
	set_u64(c, "offset", b->offset);
	set_u64(c, "seqs", R->nseqs);
	set_u64(c, "skipped", R->nskipped);
	skips_format(R->skips, R->nskips, &R->scratch);
	ovl_kvsec_set(c, "skip-steps", (char *)R->scratch.p);
	ovl_kvsec_set(c, "format", fmt_name[o->format]);
	if (o->rank_set)
		set_u64(c, "rank", o->rank);
	ovl_kvsec_set(c, "token-bits", R->tok16 ? "16" : "32");
	if (R->have_vocab)
		set_u64(c, "vocab", R->vocab);
	for (i = 0; i < R->nouts; i++) {
		struct out *x = R->outs[i];

		snprintf(key, sizeof(key), "%s.path", x->name);
		ovl_kvsec_set(os, key, x->path != NULL ? x->path : "-");
		snprintf(key, sizeof(key), "%s.type", x->name);
		snprintf(val, sizeof(val), "%s %s", type_name(x),
		    x->regular ? "file" : "stream");
		ovl_kvsec_set(os, key, val);
		snprintf(val, sizeof(val), "%" PRIu64 " %016" PRIx64 " %" PRIu64,
		    x->len, x->hash, x->nframes);
		ovl_kvsec_set(os, x->name, val);
	}
}

/*
 * The committer thread makes checkpoints durable off the main path: the
 * main thread writes a barrier's bytes to the files and queues its record;
 * the committer fdatasyncs every file output, then appends the queued
 * records (in order, several at once when they piled up) and fsyncs the
 * log. A record is thus appended only after every byte it claims is on
 * disk, and reading and packing go on meanwhile.
 */
#define QUEUE_MAX	(64u << 20)	/* queued record bytes before waiting */

static struct committer {
	pthread_t	 th;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	int		 started;
	struct ovl_buf	 queue;		/* records not yet appended */
	uint64_t	 queue_last;	/* n of the last queued record */
	int		 busy, stop;
	int		 *fds;		/* regular file outputs */
	size_t		 nfds, capfds;
	int		 logfd;
	uint64_t	 logend;
	int		 failed, err;	/* errno of the failure */
	uint64_t	 fail_n;
	int		 durable;	/* a record was appended before */
	const char	*fail_what;
} C = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/*
 * A group of queued records did not fit on the disk: append them one by
 * one, so that every checkpoint that fits becomes durable (records are
 * self-contained). *done gets the bytes appended; on failure *failed_n the
 * checkpoint that did not fit. Called by the committer without the lock
 * (it alone moves C.logend). 0, or -1 with errno.
 */
static int
append_each(const struct ovl_buf *b, size_t *done, uint64_t *failed_n)
{
	size_t off = 0, rl;

	while (off + OVL_CKPTREC_HDR_LEN <= b->len) {
		rl = OVL_CKPTREC_HDR_LEN + (size_t)ovl_le32(b->p + off + 4);
		if (rl > b->len - off)
			break;
		if (ovl_ckptlog_append(C.logfd, C.logend + off, b->p + off,
		    rl) != 0) {
			*failed_n = ovl_le64(b->p + off + 16);
			*done = off;
			return -1;
		}
		off += rl;
	}
	*done = off;
	return 0;
}

static void *
committer_main(void *arg)
{
	struct ovl_buf b = { 0 }, tmp;
	uint64_t last;
	size_t i, nfds, done;
	int *fds = NULL, rc;

	(void)arg;
	pthread_mutex_lock(&C.mu);
	for (;;) {
		while (C.queue.len == 0 && !C.stop)
			pthread_cond_wait(&C.cv, &C.mu);
		if (C.queue.len == 0)
			break;
		tmp = b;
		b = C.queue;
		C.queue = tmp;
		C.queue.len = 0;
		last = C.queue_last;
		nfds = C.nfds;
		fds = ovl_xrealloc(fds, (nfds + 1) * sizeof(*fds));
		if (nfds > 0)
			memcpy(fds, C.fds, nfds * sizeof(*fds));
		C.busy = 1;
		pthread_cond_broadcast(&C.cv);
		pthread_mutex_unlock(&C.mu);
		rc = 0;
		done = 0;
		for (i = 0; i < nfds && rc == 0; i++)
			if (fdatasync(fds[i]) != 0)
				rc = -1;
		if (rc == 0)
			rc = ovl_ckptlog_append(C.logfd, C.logend, b.p, b.len);
		if (rc == 0)
			done = b.len;
		else if (i == nfds && (errno == ENOSPC || errno == EDQUOT))
			rc = append_each(&b, &done, &last);
		pthread_mutex_lock(&C.mu);
		C.busy = 0;
		C.logend += done;
		if (done > 0)
			C.durable = 1;
		if (rc != 0) {
			C.failed = 1;
			C.err = errno;
			C.fail_n = last;
			C.fail_what = i < nfds ? "sync an output for" : "append";
			pthread_cond_broadcast(&C.cv);
			break;
		}
		pthread_cond_broadcast(&C.cv);
	}
	pthread_mutex_unlock(&C.mu);
	free(fds);
	ovl_buf_free(&b);
	return NULL;
}

static void
committer_start(int logfd, uint64_t logend, int durable)
{
	C.logfd = logfd;
	C.logend = logend;
	C.durable = durable;
	if (pthread_create(&C.th, NULL, committer_main, NULL) != 0)
		ovl_errx(OVL_EXIT_DATA, "cannot start the committer thread");
	C.started = 1;
}

/* Exit with the committer's failure (called with the lock held). */
static void
committer_die(const char *logpath)
{
	int err = C.err, durable = C.durable;
	uint64_t n = C.fail_n;
	const char *what = C.fail_what;

	pthread_mutex_unlock(&C.mu);
	errno = err;
	ovl_err(OVL_EXIT_DATA, "cannot %s checkpoint %" PRIu64 " to '%s'%s",
	    what, n, logpath, durable ?
	    " (the previous checkpoint stays valid)" : "");
}

static void
committer_add_fd(int fd)
{
	pthread_mutex_lock(&C.mu);
	if (C.nfds == C.capfds) {
		C.capfds = C.capfds ? C.capfds * 2 : 16;
		C.fds = ovl_xrealloc(C.fds, C.capfds * sizeof(*C.fds));
	}
	C.fds[C.nfds++] = fd;
	pthread_mutex_unlock(&C.mu);
}

static void
committer_push(const char *logpath, const void *rec, size_t len, uint64_t n)
{
	pthread_mutex_lock(&C.mu);
	while (!C.failed && C.queue.len > QUEUE_MAX)
		pthread_cond_wait(&C.cv, &C.mu);
	if (C.failed)
		committer_die(logpath);
	ovl_buf_append(&C.queue, rec, len);
	C.queue_last = n;
	pthread_cond_broadcast(&C.cv);
	pthread_mutex_unlock(&C.mu);
}

/* Wait until every queued record is durable; exit on a failure unless quiet. */
static int
committer_drain(const char *logpath, int quiet)
{
	int failed;

	if (!C.started)
		return 0;
	pthread_mutex_lock(&C.mu);
	while (!C.failed && (C.queue.len > 0 || C.busy))
		pthread_cond_wait(&C.cv, &C.mu);
	failed = C.failed;
	if (failed && !quiet)
		committer_die(logpath);
	pthread_mutex_unlock(&C.mu);
	return failed;
}

static void
committer_join(void)
{
	if (!C.started)
		return;
	pthread_mutex_lock(&C.mu);
	C.stop = 1;
	pthread_cond_broadcast(&C.cv);
	pthread_mutex_unlock(&C.mu);
	pthread_join(C.th, NULL);
	C.started = 0;
	ovl_buf_free(&C.queue);
	free(C.fds);
}

static void
append_record(struct ckpt_run *R, uint64_t n, unsigned flags)
{
	struct ovl_buf rec = { 0 };
	int base = !R->have_prev || R->since_base + 1 >= R->o->base_every;
	struct ovl_ckstate tmp;

	ovl_ckrec_encode(&rec, n, flags, base ? NULL : &R->prev, &R->cur);
	committer_push(R->logpath, rec.p, rec.len, n);
	R->logend += rec.len;
	R->since_base = base ? 0 : R->since_base + 1;
	ovl_info(1, "checkpoint %" PRIu64 ": %s record of %zu bytes", n,
	    base ? "base" : "diff", rec.len);
	ovl_buf_free(&rec);
	/* prev <- cur, keeping the storage of both */
	tmp = R->prev;
	R->prev = R->cur;
	R->cur = tmp;
	ovl_ckstate_copy(&R->cur, &R->prev);
	R->have_prev = 1;
	R->last_n = n;
	R->have_last = 1;
}

static void
commit(struct ckpt_run *R, const struct ovl_barrier *b)
{
	size_t i;

	if (!R->have_mix || R->mix_n != b->n)
		ovl_errx(OVL_EXIT_FRAME, "BARRIER %" PRIu64 " without the "
		    "STATE of mix before it", b->n);
	if (!R->have_con || R->con_n != b->n)
		ovl_errx(OVL_EXIT_FRAME, "BARRIER %" PRIu64 " without the "
		    "STATE of construct before it", b->n);
	for (i = 0; i < R->nouts; i++)
		out_commit(R->outs[i]);
	if (ovl_kvsec_parse(&R->cur.sec[OVL_SEC_MIX], (const char *)R->mixst.p,
	    R->mixst.len) != 0)
		ovl_errx(OVL_EXIT_FRAME, "STATE(mix, %" PRIu64 "): a line is "
		    "not \"key value\"", b->n);
	if (ovl_kvsec_parse(&R->cur.sec[OVL_SEC_CONSTRUCT],
	    (const char *)R->cst.p, R->cst.len) != 0)
		ovl_errx(OVL_EXIT_FRAME, "STATE(construct, %" PRIu64 "): a line "
		    "is not \"key value\"", b->n);
	build_state(R, b);
	append_record(R, b->n, 0);
	R->have_mix = R->have_con = 0;
	if (R->o->json && R->std != NULL) {
		char t[128];

		out_flush(R->std);
		snprintf(t, sizeof(t), "{\"checkpoint\":%" PRIu64 ",\"step\":%"
		    PRIu64 "}\n", b->n, b->step);
		out_put(R->std, t, strlen(t));
	}
}

/* The Megatron index from the sizes file: written whole, atomically. */
static void
write_idx(const char *sizes_path, uint64_t nseq, const char *idx_path,
    int tok16)
{
	struct ovl_buf b = { 0 };
	uint8_t *p, *sz;
	uint64_t i, ptr = 0;
	int fd;

	if (nseq > (SIZE_MAX - 64) / 24 /* 12 + 8 per sequence, with room */)
		ovl_errx(OVL_EXIT_DATA, "too many sequences for an index");
	p = ovl_buf_reserve(&b, 34 + nseq * 12 + (nseq + 1) * 8);
	memcpy(p, "MMIDIDX\x00\x00", 9);
	ovl_put64(p + 9, 1);
	p[17] = tok16 ? 8 : 4;	/* numpy uint16 : int32 */
	ovl_put64(p + 18, nseq);
	ovl_put64(p + 26, nseq + 1);
	sz = p + 34;		/* int32 sizes, straight from the sizes file */
	fd = open(sizes_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || ovl_io_read_full(fd, sz, nseq * 4) != (ssize_t)(nseq * 4))
		ovl_err(OVL_EXIT_DATA, "cannot read %" PRIu64 " sizes from '%s'",
		    nseq, sizes_path);
	close(fd);
	p = sz + nseq * 4;
	for (i = 0; i < nseq; i++) {
		ovl_put64(p + i * 8, ptr);
		ptr += (uint64_t)ovl_le32(sz + i * 4) * (tok16 ? 2 : 4);
	}
	p += nseq * 8;
	for (i = 0; i <= nseq; i++)
		ovl_put64(p + i * 8, i);
	b.len = 34 + nseq * 12 + (nseq + 1) * 8;
	if (ovl_atomic_write(idx_path, b.p, b.len) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot write '%s'", idx_path);
	ovl_buf_free(&b);
}

static void
finish_idx(struct ckpt_run *R)
{
	char *idx;

	if (R->bin == NULL)
		return;
	out_flush(R->sizes);
	idx = xasprintf("%s.idx", R->o->prefix);
	write_idx(R->sizes->path, R->sizes->len / 4, idx, R->tok16);
	free(idx);
}

static void
on_end(struct ckpt_run *R)
{
	struct ovl_barrier b;
	size_t i;
	uint8_t *p, fr[OVL_FRAME_HDR_LEN + OVL_END_LEN];

	if (!R->have_meta)
		ovl_errx(OVL_EXIT_FRAME, "stream ended without META");
	for (i = 0; i < R->nouts; i++) {
		struct out *o = R->outs[i];

		if (o->type != OT_FRAMES)
			continue;
		memset(fr, 0, sizeof(fr));
		p = fr + OVL_FRAME_HDR_LEN;
		ovl_end_encode(p, o->nframes);
		ovl_frame_seal(fr, OVL_END, 0, OVL_END_LEN);
		out_put(o, fr, sizeof(fr));
	}
	memset(&b, 0, sizeof(b));
	{
		const struct ovl_kvsec *c = &R->prev.sec[OVL_SEC_CKPT];
		const char *v;

		if (R->have_prev && (v = ovl_kvsec_get(c, "step")) != NULL)
			(void)ovl_num_u64(v, &b.step);
	}
	b.n = R->have_last ? R->last_n + 1 : 1;
	for (i = 0; i < R->nouts; i++)
		out_commit(R->outs[i]);
	finish_idx(R);
	build_state(R, &b);
	append_record(R, b.n, OVL_CKPTREC_END);
}

/* ---- the run ---- */

static void
open_log(struct ckpt_run *R)
{
	struct ovl_ckptlog log;
	uint8_t hdr[OVL_CKPTLOG_HDR_LEN];
	size_t i, b;

	R->logpath = xasprintf("%s/ckpt.log", R->dir);
	read_log(R->dir, &log);
	if (!R->o->resume_set) {
		if (log.nrec > 0)
			ovl_errx(OVL_EXIT_USAGE, "'%s' already holds checkpoints: "
			    "resume with the options 'ovl-ckpt restore %s' "
			    "prints, or use a new directory", R->dir, R->dir);
		ovl_ckptlog_header(hdr);
		if (ovl_atomic_write(R->logpath, hdr, sizeof(hdr)) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot create '%s'", R->logpath);
		R->logend = sizeof(hdr);
	} else {
		long r = ovl_ckptlog_find(&log, R->o->resume);

		if (r < 0)
			ovl_errx(OVL_EXIT_USAGE, "no checkpoint %" PRIu64 " in '%s'",
			    R->o->resume, R->dir);
		i = (size_t)r;
		if (log.rec[i].flags & OVL_CKPTREC_END)
			ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64 " ends the "
			    "run: nothing to resume", R->o->resume);
		cut_log(R->dir, &log, i);
		log_state(R->dir, &log, i, &R->prev);
		R->have_prev = 1;
		R->last_n = log.rec[i].n;
		R->have_last = 1;
		R->logend = log.rec[i].offset + OVL_CKPTREC_HDR_LEN +
		    log.rec[i].len;
		for (b = i; log.rec[b].type != OVL_CKPTREC_BASE; b--)
			;
		R->since_base = i - b;
		ovl_ckstate_copy(&R->cur, &R->prev);
		{
			const struct ovl_kvsec *c = &R->prev.sec[OVL_SEC_CKPT];
			const char *v;
			struct skip sk[MAX_SKIPS];
			size_t nsk, k;

			if ((v = ovl_kvsec_get(c, "seqs")) != NULL)
				(void)ovl_num_u64(v, &R->nseqs);
			if ((v = ovl_kvsec_get(c, "skipped")) != NULL)
				(void)ovl_num_u64(v, &R->nskipped);
			if (skips_parse(ovl_kvsec_get(c, "skip-steps"), sk,
			    &nsk) != 0)
				ovl_errx(OVL_EXIT_FRAME, "checkpoint %" PRIu64
				    ": bad skip-steps", R->last_n);
			for (k = 0; k < nsk && R->nskips < MAX_SKIPS; k++)
				R->skips[R->nskips++] = sk[k];
			v = ovl_kvsec_get(c, "format");
			if (v != NULL && strcmp(v, fmt_name[R->o->format]) != 0)
				ovl_errx(OVL_EXIT_USAGE, "checkpoint %" PRIu64
				    " wrote format %s, not %s", R->last_n, v,
				    fmt_name[R->o->format]);
		}
	}
	ovl_ckptlog_free(&log);
	R->logfd = open(R->logpath, O_WRONLY | O_CLOEXEC);
	if (R->logfd < 0)
		ovl_err(OVL_EXIT_DATA, "cannot open '%s'", R->logpath);
}

static void
on_meta(struct ckpt_run *R, const struct ovl_frame *f)
{
	const char *text;
	uint32_t len;

	if (ovl_meta_decode(f, &text, &len) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "'standard input': malformed META "
		    "frame at byte offset %" PRIu64, ovl_reader_offset(R->rd));
	if (R->have_meta)
		ovl_errx(OVL_EXIT_FRAME, "'standard input': a second META frame "
		    "at byte offset %" PRIu64, ovl_reader_offset(R->rd));
	ovl_buf_append(&R->meta, f->payload - OVL_FRAME_HDR_LEN, f->size);
	R->have_meta = 1;
	meta_parse(R, text, len);
	if (!R->have_vocab)
		ovl_errx(OVL_EXIT_FRAME, "'standard input': META at byte offset "
		    "%" PRIu64 " has no vocab (token files need it)",
		    ovl_reader_offset(R->rd));
	open_outputs(R);
}

static void
on_state(struct ckpt_run *R, const struct ovl_frame *f)
{
	struct ovl_state s;
	struct ovl_buf *b;

	if (ovl_state_decode(f, &s) != OVL_F_OK)
		ovl_errx(OVL_EXIT_FRAME, "malformed STATE frame");
	if (R->have_last && s.n <= R->last_n)
		ovl_errx(OVL_EXIT_FRAME, "STATE for checkpoint %" PRIu64 " after "
		    "checkpoint %" PRIu64 ": the pipeline does not resume where "
		    "ovl-ckpt does", s.n, R->last_n);
	if (s.stage == OVL_STAGE_MIX) {
		b = &R->mixst;
		R->have_mix = 1;
		R->mix_n = s.n;
	} else if (s.stage == OVL_STAGE_CONSTRUCT) {
		b = &R->cst;
		R->have_con = 1;
		R->con_n = s.n;
	} else
		return;
	b->len = 0;
	ovl_buf_append(b, s.text, s.text_len);
}

static void
finish_stop(struct ckpt_run *R)
{
	size_t i;

	for (i = 0; i < R->nouts; i++)
		out_flush(R->outs[i]);
	finish_idx(R);
	(void)committer_drain(R->logpath, 0);
	committer_join();
	ovl_info(0, "stopped at checkpoint %" PRIu64 "; resume with the "
	    "lines of 'ovl-ckpt restore %s'", R->last_n, R->dir);
	exit(EXIT_STOPPED);
}

static void
run_free(struct ckpt_run *R)
{
	size_t i;

	for (i = 0; i < R->nouts; i++) {
		struct out *o = R->outs[i];

		if (o->path != NULL && o->fd >= 0 && close(o->fd) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot close '%s'", o->path);
		free(o->name);
		free(o->path);
		ovl_buf_free(&o->buf);
		free(o);
	}
	free(R->outs);
	free(R->rank);
	for (i = 0; i < R->nsrc; i++)
		free(R->srcname[i]);
	free(R->srcname);
	ovl_ckstate_clear(&R->prev);
	ovl_ckstate_clear(&R->cur);
	ovl_buf_free(&R->meta);
	ovl_buf_free(&R->mixst);
	ovl_buf_free(&R->cst);
	ovl_buf_free(&R->scratch);
	if (R->logfd >= 0)
		close(R->logfd);
	free(R->logpath);
	free(R->dir);
}

static int
run(struct ckpt_opts *o)
{
	struct ckpt_run R;
	struct ovl_reader *rd;
	struct ovl_frame f;
	struct sigaction sa;
	int rc;

	memset(&R, 0, sizeof(R));
	R.o = o;
	if (ovl_mkdir_p(o->dir, 0777) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot create '%s'", o->dir);
	R.dir = realpath(o->dir, NULL);
	if (R.dir == NULL)
		ovl_err(OVL_EXIT_DATA, "cannot resolve '%s'", o->dir);
	(void)lock_dir(R.dir);
	for (rc = 0; rc < o->nskip; rc++) {
		R.skips[R.nskips].a = o->skip[0];
		R.skips[R.nskips++].b = o->skip[1];
	}
	open_log(&R);
	committer_start(R.logfd, R.logend, R.have_last);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);

	rd = ovl_reader_new(STDIN_FILENO, "standard input", 0);
	R.rd = rd;
	for (;;) {
		rc = ovl_reader_next(rd, &f);
		if (rc < 0) {
			if (stop_requested) {
				ovl_warnx("%s", ovl_reader_error(rd));
				finish_stop(&R);
			}
			/* what was committed before stays committed */
			(void)committer_drain(R.logpath, 1);
			ovl_reader_die(rd);
		}
		if (rc == OVL_RD_EOF)
			break;
		if (!R.have_meta && f.kind != OVL_META && f.kind != OVL_END)
			ovl_errx(OVL_EXIT_FRAME, "'standard input': %s frame at "
			    "byte offset %" PRIu64 " before META",
			    ovl_kind_name(f.kind), ovl_reader_offset(rd));
		switch (f.kind) {
		case OVL_META:
			on_meta(&R, &f);
			break;
		case OVL_SEQ:
			on_seq(&R, &f);
			break;
		case OVL_STATE:
			on_state(&R, &f);
			break;
		case OVL_BARRIER:
			if (ovl_barrier_decode(&f, &R.bar) != OVL_F_OK)
				ovl_errx(OVL_EXIT_FRAME, "'standard input': "
				    "malformed BARRIER at byte offset %" PRIu64,
				    ovl_reader_offset(rd));
			commit(&R, &R.bar);
			if (stop_requested)
				finish_stop(&R);
			break;
		case OVL_END:
			on_end(&R);
			break;
		default:
			break;	/* DOC, CHUNK_END, unknown: not ours */
		}
	}
	ovl_reader_free(rd);
	(void)committer_drain(R.logpath, 0);
	committer_join();
	ovl_info(1, "%" PRIu64 " sequences written, %" PRIu64 " skipped",
	    R.nseqs, R.nskipped);
	if (R.std != NULL && R.std->fd == STDOUT_FILENO)
		ovl_io_close_stdout();
	run_free(&R);
	return OVL_EXIT_OK;
}

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

static int
cmd_show(const struct ckpt_opts *o, int argc, char **argv)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 };
	const struct ovl_ckrec *r;
	size_t i, j;
	int s;

	if (argc != 1)
		ovl_cli_usage(&cli);
	if (o->print0)
		return show_print0(argv[0]);
	read_log(argv[0], &log);
	if (o->list) {
		show_list(&log, argv[0]);
		ovl_ckptlog_free(&log);
		ovl_io_close_stdout();
		return 0;
	}
	i = pick_record(argv[0], &log, o->at_set, o->at);
	r = &log.rec[i];
	log_state(argv[0], &log, i, &st);
	if (o->json) {
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
		    rec_type(r), OVL_CKPTREC_HDR_LEN + r->len, r->offset,
		    argv[0]);
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
	ovl_ckptlog_free(&log);
	ovl_io_close_stdout();
	return 0;
}

static int
cmd_diff(int argc, char **argv)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate a = { 0 }, b = { 0 };
	uint64_t n, m;
	size_t j;
	long k;
	int s, head;
	const char *va, *vb;

	if (argc != 3 || ovl_num_u64(argv[1], &n) != 0 ||
	    ovl_num_u64(argv[2], &m) != 0)
		ovl_cli_usage(&cli);
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

/* What the "out" section says of output name at one checkpoint. */
struct outrec {
	uint64_t	 len, hash, frames;
	const char	*path;
	int		 file;		/* a regular file */
	int		 type;
	uint32_t	 hdr;
};

static int
out_lookup(const struct ovl_ckstate *st, const char *name, struct outrec *r)
{
	const struct ovl_kvsec *os = &st->sec[OVL_SEC_OUT];
	const char *v = ovl_kvsec_get(os, name), *t;
	char key[256];

	if (v == NULL || sscanf(v, "%" SCNu64 " %" SCNx64 " %" SCNu64, &r->len,
	    &r->hash, &r->frames) != 3)
		return -1;
	snprintf(key, sizeof(key), "%s.path", name);
	r->path = ovl_kvsec_get(os, key);
	snprintf(key, sizeof(key), "%s.type", name);
	t = ovl_kvsec_get(os, key);
	if (r->path == NULL || t == NULL)
		return -1;
	r->type = strncmp(t, "npy", 3) == 0 ? OT_NPY : strncmp(t, "frames",
	    6) == 0 ? OT_FRAMES : OT_RAW;
	r->hdr = r->type == OT_NPY ? NPY_HDR : 0;
	r->file = strstr(t, " file") != NULL;
	return 0;
}

/*
 * Recompute the hash chain of output name over records 0..upto from the
 * file at path. Returns 0 when it matches, else 1 with a message in msg.
 * *whole gets XXH64 of the file's committed bytes (after the header).
 */
static int
chain_check(const char *dir, const struct ovl_ckptlog *log, size_t upto,
    const char *name, const char *path, uint64_t *whole, uint64_t *len_out,
    char *msg, size_t msglen)
{
	struct ovl_ckstate st = { 0 };
	struct ovl_hash64 seg, all;
	struct outrec r;
	uint64_t plen = 0, phash = 0, pos;
	static uint8_t buf[1 << 16];
	struct stat sb;
	size_t i, want;
	ssize_t got;
	int fd, started = 0, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) != 0) {
		snprintf(msg, msglen, "cannot open: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	ovl_hash64_init(&all, 0);
	for (i = 0; i <= upto && rc == 0; i++) {
		log_state(dir, log, i, &st);
		if (out_lookup(&st, name, &r) != 0)
			continue;
		if (!started) {
			plen = r.hdr;
			started = 1;
			if (lseek(fd, (off_t)plen, SEEK_SET) < 0)
				plen = 0;
		}
		if (r.len < plen) {
			snprintf(msg, msglen, "checkpoint %" PRIu64 " records %"
			    PRIu64 " bytes, less than before", log->rec[i].n,
			    r.len);
			rc = 1;
			break;
		}
		if (r.len == plen)
			continue;
		if ((uint64_t)sb.st_size < r.len) {
			snprintf(msg, msglen, "%jd bytes, fewer than the %" PRIu64
			    " of checkpoint %" PRIu64, (intmax_t)sb.st_size,
			    r.len, log->rec[i].n);
			rc = 1;
			break;
		}
		ovl_hash64_init(&seg, phash);
		for (pos = plen; pos < r.len; pos += (uint64_t)got) {
			want = r.len - pos < sizeof(buf) ? (size_t)(r.len - pos) :
			    sizeof(buf);
			got = ovl_io_read_full(fd, buf, want);
			if (got != (ssize_t)want) {
				snprintf(msg, msglen, "read error");
				rc = 1;
				break;
			}
			ovl_hash64_update(&seg, buf, want);
			ovl_hash64_update(&all, buf, want);
		}
		if (rc == 0 && ovl_hash64_digest(&seg) != r.hash) {
			snprintf(msg, msglen, "bytes %" PRIu64 "..%" PRIu64 " do "
			    "not match checkpoint %" PRIu64, plen, r.len,
			    log->rec[i].n);
			rc = 1;
		}
		plen = r.len;
		phash = r.hash;
	}
	close(fd);
	ovl_ckstate_clear(&st);
	*whole = ovl_hash64_digest(&all);
	*len_out = plen;
	if (rc == 0 && !started) {
		snprintf(msg, msglen, "not an output of this checkpoint");
		rc = 1;
	}
	if (rc == 0 && (uint64_t)sb.st_size > plen)
		snprintf(msg, msglen, "%" PRIu64 " bytes after it",
		    (uint64_t)sb.st_size - plen);
	else if (rc == 0)
		msg[0] = '\0';
	return rc;
}

static int
cmd_verify(const struct ckpt_opts *o, int argc, char **argv)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 };
	struct outrec r;
	const struct ovl_kvsec *os;
	char msg[512], *rp;
	const char *name, *slash, *bs;
	uint64_t whole, len;
	size_t i, j, nmatch;
	int a, bad = 0;

	if (argc < 2)
		ovl_cli_usage(&cli);
	read_log(argv[0], &log);
	i = pick_record(argv[0], &log, o->at_set, o->at);
	log_state(argv[0], &log, i, &st);
	os = &st.sec[OVL_SEC_OUT];
	for (a = 1; a < argc; a++) {
		rp = realpath(argv[a], NULL);
		name = NULL;
		nmatch = 0;
		for (j = 0; j < os->n; j++) {
			if (strchr(os->kv[j].key, '.') != NULL ||
			    out_lookup(&st, os->kv[j].key, &r) != 0)
				continue;
			if (rp != NULL && strcmp(rp, r.path) == 0) {
				name = os->kv[j].key;
				nmatch = 1;
				break;
			}
			slash = strrchr(r.path, '/');
			bs = strrchr(argv[a], '/');
			if (strcmp(slash != NULL ? slash + 1 : r.path,
			    bs != NULL ? bs + 1 : argv[a]) == 0) {
				name = os->kv[j].key;
				nmatch++;
			}
		}
		free(rp);
		if (name == NULL || nmatch != 1) {
			printf("%s: not an output of checkpoint %" PRIu64 "\n",
			    argv[a], log.rec[i].n);
			bad = 1;
			continue;
		}
		(void)out_lookup(&st, name, &r);
		if (!r.file) {
			printf("%s: a stream, not a file: cannot verify\n",
			    argv[a]);
			bad = 1;
			continue;
		}
		if (chain_check(argv[0], &log, i, name, argv[a], &whole, &len,
		    msg, sizeof(msg)) != 0) {
			printf("%s: MISMATCH: %s\n", argv[a], msg);
			bad = 1;
		} else
			printf("%s: ok: matches checkpoint %" PRIu64 " (%" PRIu64
			    " bytes%s%s)\n", argv[a], log.rec[i].n, len,
			    msg[0] != '\0' ? ", " : "", msg);
	}
	ovl_ckstate_clear(&st);
	ovl_ckptlog_free(&log);
	ovl_io_close_stdout();
	return bad ? OVL_EXIT_DATA : OVL_EXIT_OK;
}

static int
cmd_compact(int argc, char **argv)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 };
	struct ovl_buf out = { 0 };
	struct outrec r;
	struct ovl_kvsec *os;
	uint8_t hdr[OVL_CKPTLOG_HDR_LEN];
	char msg[512], val[128], *dir, *path;
	uint64_t whole, len;
	size_t i, j;

	if (argc != 1)
		ovl_cli_usage(&cli);
	dir = argv[0];
	(void)lock_dir(dir);
	read_log(dir, &log);
	i = pick_record(dir, &log, 0, 0);
	log_state(dir, &log, i, &st);
	os = &st.sec[OVL_SEC_OUT];
	/* check every file against the chain, and rehash it as one segment */
	for (j = 0; j < os->n; j++) {
		if (strchr(os->kv[j].key, '.') != NULL ||
		    out_lookup(&st, os->kv[j].key, &r) != 0 || !r.file)
			continue;
		if (chain_check(dir, &log, i, os->kv[j].key, r.path, &whole,
		    &len, msg, sizeof(msg)) != 0)
			ovl_errx(OVL_EXIT_DATA, "'%s': %s: not compacting",
			    r.path, msg);
		snprintf(val, sizeof(val), "%" PRIu64 " %016" PRIx64 " %" PRIu64,
		    r.len, r.len > r.hdr ? whole : 0, r.frames);
		ovl_kvsec_set(os, os->kv[j].key, val);
	}
	ovl_ckptlog_header(hdr);
	ovl_buf_append(&out, hdr, sizeof(hdr));
	ovl_ckrec_encode(&out, log.rec[i].n, log.rec[i].flags, NULL, &st);
	path = xasprintf("%s/ckpt.log", dir);
	if (ovl_atomic_write(path, out.p, out.len) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot write '%s'", path);
	ovl_info(0, "'%s': %zu records (%zu bytes) folded into one base of "
	    "checkpoint %" PRIu64 " (%zu bytes)", path, log.nrec, log.size,
	    log.rec[i].n, out.len);
	free(path);
	ovl_buf_free(&out);
	ovl_ckstate_clear(&st);
	ovl_ckptlog_free(&log);
	return 0;
}

/* Cut a file output back to its committed length; fix npy and .idx. */
static void
restore_output(const struct ovl_ckstate *st, const char *name,
    const struct outrec *r, uint64_t n)
{
	const char *bits = ovl_kvsec_get(&st->sec[OVL_SEC_CKPT], "token-bits");
	int tok16 = bits != NULL && strcmp(bits, "16") == 0;
	struct stat sb;
	struct out o;
	int fd;

	if (!r->file)
		return;
	fd = open(r->path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot open '%s'", r->path);
	if ((uint64_t)sb.st_size < r->len)
		ovl_errx(OVL_EXIT_DATA, "'%s' has %jd bytes, fewer than the %"
		    PRIu64 " of checkpoint %" PRIu64 ": cannot resume", r->path,
		    (intmax_t)sb.st_size, r->len, n);
	if (ftruncate(fd, (off_t)r->len) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot truncate '%s'", r->path);
	if (r->type == OT_NPY) {
		memset(&o, 0, sizeof(o));
		o.fd = fd;
		o.path = (char *)r->path;
		o.len = r->len;
		o.hdr = NPY_HDR;
		o.cols = 1;
		o.itemsize = 8;
		o.descr = "<i8";
		if (strcmp(name, "tokens") == 0) {
			o.descr = tok16 ? "<u2" : "<u4";
			o.itemsize = tok16 ? 2 : 4;
		} else if (strcmp(name, "positions") == 0) {
			o.descr = "<i4";
			o.itemsize = 4;
		} else if (strcmp(name, "seqs") == 0)
			o.cols = SEQS_COLS;
		npy_rewrite(&o);
	}
	if (fsync(fd) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot sync '%s'", r->path);
	close(fd);
}

static void
write_resume_file(const char *dir, const char *name,
    const struct ovl_kvsec *s, char **path)
{
	struct ovl_buf b = { 0 };
	char *rdir = xasprintf("%s/resume", dir);

	if (ovl_mkdir_p(rdir, 0777) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot create '%s'", rdir);
	*path = xasprintf("%s/%s.state", rdir, name);
	ovl_kvsec_text(s, &b);
	if (ovl_atomic_write(*path, b.p != NULL ? (void *)b.p : "", b.len) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot write '%s'", *path);
	ovl_buf_free(&b);
	free(rdir);
}

/*
 * One line of restore's output: the stage's key, then its options, as
 * shell words on a line, or (print0) as NUL-terminated words ending with an
 * empty word, for a supervisor that must not evaluate text.
 */
static void
restore_line(int print0, const char *key, const char *const *opts, size_t n)
{
	size_t i;

	if (print0) {
		fputs(key, stdout);
		putchar('\0');
		for (i = 0; i < n; i++) {
			fputs(opts[i], stdout);
			putchar('\0');
		}
		putchar('\0');
		return;
	}
	fputs(key, stdout);
	for (i = 0; i < n; i++) {
		putchar(' ');
		shell_word(stdout, opts[i]);
	}
	putchar('\n');
}

static void
print_sources(const struct ovl_kvsec *mix, int print0)
{
	const char *k, *cur, *parts;
	char key[512];
	uint64_t np, p;
	size_t i, klen;

	for (i = 0; i < mix->n; i++) {
		k = mix->kv[i].key;
		klen = strlen(k);
		if (strncmp(k, "source.", 7) != 0 || klen < 15 ||
		    strcmp(k + klen - 7, ".cursor") != 0)
			continue;
		cur = mix->kv[i].val;
		snprintf(key, sizeof(key), "%.*s.partitions", (int)(klen - 7), k);
		parts = ovl_kvsec_get(mix, key);
		if (parts == NULL || ovl_num_u64(parts, &np) != 0 || np == 0)
			np = 1;
		for (p = 0; p < np; p++) {
			const char *opts[2];

			snprintf(key, sizeof(key), "source:%.*s:%" PRIu64 "/%"
			    PRIu64, (int)(klen - 14), k + 7, p, np);
			opts[0] = "--resume";
			opts[1] = cur != NULL ? cur : "";
			restore_line(print0, key, opts, 2);
		}
	}
}

/*
 * A log with a corrupt record: its checkpoints before the record are still
 * whole (each record is checked on its own), so restore --at N may use
 * them; anything else is refused with the last good checkpoint named.
 */
static void
read_log_prefix(const char *dir, struct ovl_ckptlog *log, int at_set,
    uint64_t at)
{
	char *path = xasprintf("%s/ckpt.log", dir), err[512];
	int rc = ovl_ckptlog_read(path, log, err, sizeof(err));

	free(path);
	if (rc == -1)
		ovl_errx(OVL_EXIT_DATA, "%s", err);
	if (rc == 0)
		return;
	if (log->nrec == 0 || log->corrupt == 0)
		ovl_errx(OVL_EXIT_FRAME, "%s", err);
	if (!at_set || ovl_ckptlog_find(log, at) < 0)
		ovl_errx(OVL_EXIT_FRAME, "%s; checkpoints up to %" PRIu64
		    " are intact: restore one with --at", err,
		    log->rec[log->nrec - 1].n);
	ovl_warnx("%s; checkpoint %" PRIu64 " comes before it: the log is cut "
	    "there", err, at);
}

/*
 * The outputs a log names belong to the directory that wrote it. A copy
 * (cp -r ck ck2) or a move restored as it is would cut that run's files:
 * refused, status 2, unless --adopt says the copy takes them over.
 */
static void
check_home(const char *dir, const struct ovl_ckstate *st, uint64_t n,
    int adopt)
{
	const char *home = ovl_kvsec_get(&st->sec[OVL_SEC_CKPT], "dir");
	char *here = realpath(dir, NULL);

	if (here == NULL)
		ovl_err(OVL_EXIT_DATA, "cannot resolve '%s'", dir);
	if (home != NULL && strcmp(home, here) != 0 && !adopt)
		ovl_errx(OVL_EXIT_USAGE, "'%s': checkpoint %" PRIu64 " was "
		    "written in '%s': this is a copy or a move, and its outputs "
		    "are that run's; restore there, or give --adopt to take "
		    "them over", dir, n, home);
	free(here);
}

/* Hash bytes [from, to) of fd, seeded, with XXH64 as the log chains it. */
static int
hash_range(int fd, uint64_t from, uint64_t to, uint64_t seed, uint64_t *h)
{
	static uint8_t buf[1 << 16];
	struct ovl_hash64 x;
	uint64_t pos;
	size_t want;

	ovl_hash64_init(&x, seed);
	for (pos = from; pos < to; pos += want) {
		want = to - pos < sizeof(buf) ? (size_t)(to - pos) : sizeof(buf);
		if (pread(fd, buf, want, (off_t)pos) != (ssize_t)want)
			return -1;
		ovl_hash64_update(&x, buf, want);
	}
	*h = ovl_hash64_digest(&x);
	return 0;
}

/*
 * Before a resume appends to them: the committed bytes of every file output
 * must be the bytes the log hashed. By default the last committed segment
 * of each (where a crash or a stray write would show first); with all,
 * every segment of the chain (as verify does). Exit 3 on a mismatch.
 */
static void
check_committed(const char *dir, const struct ovl_ckptlog *log, size_t i,
    const struct ovl_ckstate *st, int all)
{
	const struct ovl_kvsec *os = &st->sec[OVL_SEC_OUT];
	struct ovl_ckstate pst = { 0 };
	struct outrec r, p;
	uint64_t plen, phash, h, whole, len;
	char msg[256];
	size_t j;
	long k;
	int fd;

	for (j = 0; j < os->n; j++) {
		if (strchr(os->kv[j].key, '.') != NULL ||
		    out_lookup(st, os->kv[j].key, &r) != 0 || !r.file)
			continue;
		if (all) {
			if (chain_check(dir, log, i, os->kv[j].key, r.path, &whole,
			    &len, msg, sizeof(msg)) != 0)
				ovl_errx(OVL_EXIT_FRAME, "'%s': %s: cannot resume "
				    "from checkpoint %" PRIu64, r.path, msg,
				    log->rec[i].n);
			continue;
		}
		plen = r.hdr;
		phash = 0;
		for (k = (long)i - 1; k >= 0; k--) {
			log_state(dir, log, (size_t)k, &pst);
			if (out_lookup(&pst, os->kv[j].key, &p) != 0)
				break;
			if (p.len != r.len) {
				plen = p.len;
				phash = p.hash;
				break;
			}
		}
		if (plen >= r.len)
			continue;
		if ((fd = open(r.path, O_RDONLY | O_CLOEXEC)) < 0)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", r.path);
		if (hash_range(fd, plen, r.len, phash, &h) != 0)
			ovl_errx(OVL_EXIT_DATA, "'%s' has fewer than the %" PRIu64
			    " bytes of checkpoint %" PRIu64 ": cannot resume",
			    r.path, r.len, log->rec[i].n);
		close(fd);
		if (h != r.hash)
			ovl_errx(OVL_EXIT_FRAME, "'%s': bytes %" PRIu64 "..%" PRIu64
			    " do not match checkpoint %" PRIu64 ": cannot resume "
			    "(ovl-ckpt verify tells more)", r.path, plen, r.len,
			    log->rec[i].n);
	}
	ovl_ckstate_clear(&pst);
}

static int
cmd_restore(const struct ckpt_opts *o, int argc, char **argv)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 }, amended = { 0 };
	struct outrec r;
	struct ovl_kvsec *os;
	struct skip sk[MAX_SKIPS];
	struct ovl_buf rec = { 0 };
	const char *v, *dir;
	char *mixpath, *conpath, *bin = NULL, *sizes = NULL, *idx;
	uint64_t n, step = 0, nseq = 0;
	size_t i, j, nsk;
	int fd;

	if (argc != 1)
		ovl_cli_usage(&cli);
	dir = argv[0];
	(void)lock_dir_wait(dir, o->wait_s);
	read_log_prefix(dir, &log, o->at_set, o->at);
	i = pick_record(dir, &log, o->at_set, o->at);
	n = log.rec[i].n;
	if (log.rec[i].flags & OVL_CKPTREC_END) {
		ovl_info(0, "checkpoint %" PRIu64 " in '%s' is the end of the "
		    "run: nothing to resume", n, dir);
		ovl_ckptlog_free(&log);
		return 0;
	}
	log_state(dir, &log, i, &st);
	check_home(dir, &st, n, o->adopt);
	check_committed(dir, &log, i, &st, o->verify_all);
	cut_log(dir, &log, i);
	os = &st.sec[OVL_SEC_OUT];
	for (j = 0; j < os->n; j++) {
		if (strchr(os->kv[j].key, '.') != NULL ||
		    out_lookup(&st, os->kv[j].key, &r) != 0)
			continue;
		restore_output(&st, os->kv[j].key, &r, n);
		if (strcmp(os->kv[j].key, "bin") == 0)
			bin = ovl_xstrdup(r.path);
		if (strcmp(os->kv[j].key, "sizes") == 0) {
			sizes = ovl_xstrdup(r.path);
			nseq = r.len / 4;
		}
	}
	if (bin != NULL && sizes != NULL && strlen(bin) > 4) {
		v = ovl_kvsec_get(&st.sec[OVL_SEC_CKPT], "token-bits");
		idx = xasprintf("%.*s.idx", (int)(strlen(bin) - 4), bin);
		write_idx(sizes, nseq, idx, v != NULL && strcmp(v, "16") == 0);
		free(idx);
	}
	free(bin);
	free(sizes);
	if (o->nskip) {
		v = ovl_kvsec_get(&st.sec[OVL_SEC_CKPT], "step");
		if (v != NULL)
			(void)ovl_num_u64(v, &step);
		if (o->skip[0] < step)
			ovl_errx(OVL_EXIT_USAGE, "steps before %" PRIu64 " are "
			    "already written at checkpoint %" PRIu64 ": restore "
			    "an earlier one with --at", step, n);
		if (skips_parse(ovl_kvsec_get(&st.sec[OVL_SEC_CKPT],
		    "skip-steps"), sk, &nsk) != 0 || nsk >= MAX_SKIPS)
			ovl_errx(OVL_EXIT_FRAME, "checkpoint %" PRIu64 ": bad "
			    "skip-steps", n);
		sk[nsk].a = o->skip[0];
		sk[nsk++].b = o->skip[1];
		skips_format(sk, nsk, &rec);
		ovl_ckstate_copy(&amended, &st);
		ovl_kvsec_set(&amended.sec[OVL_SEC_CKPT], "skip-steps",
		    (char *)rec.p);
		rec.len = 0;
		ovl_ckrec_encode(&rec, n, 0, &st, &amended);
		{
			char *lp = xasprintf("%s/ckpt.log", dir);

			fd = open(lp, O_WRONLY | O_CLOEXEC);
			if (fd < 0 || ovl_ckptlog_append(fd, log.rec[i].offset +
			    OVL_CKPTREC_HDR_LEN + log.rec[i].len, rec.p,
			    rec.len) != 0)
				ovl_err(OVL_EXIT_DATA, "cannot append to '%s'",
				    lp);
			close(fd);
			free(lp);
		}
		ovl_ckstate_clear(&amended);
	}
	ovl_buf_free(&rec);
	{
		char *abs = realpath(dir, NULL);

		if (abs == NULL)
			ovl_err(OVL_EXIT_DATA, "cannot resolve '%s'", dir);
		write_resume_file(abs, "mix", &st.sec[OVL_SEC_MIX], &mixpath);
		write_resume_file(abs, "construct", &st.sec[OVL_SEC_CONSTRUCT],
		    &conpath);
		free(abs);
	}
	print_sources(&st.sec[OVL_SEC_MIX], o->print0);
	{
		const char *opts[2];
		char num[32];

		opts[0] = "--resume";
		opts[1] = mixpath;
		restore_line(o->print0, "mix", opts, 2);
		opts[1] = conpath;
		restore_line(o->print0, "construct", opts, 2);
		snprintf(num, sizeof(num), "%" PRIu64, n);
		opts[1] = num;
		restore_line(o->print0, "ckpt", opts, 2);
	}
	free(mixpath);
	free(conpath);
	ovl_ckstate_clear(&st);
	ovl_ckptlog_free(&log);
	ovl_io_close_stdout();
	return 0;
}

/* ---- main ---- */

static const struct option longopts[] = {
	OVL_CLI_LONGOPTS,
	{ "dir", required_argument, NULL, 'd' },
	{ "format", required_argument, NULL, 'f' },
	{ "output", required_argument, NULL, 'o' },
	{ "per-rank", required_argument, NULL, 'p' },
	{ "manifest", required_argument, NULL, 'm' },
	{ "resume", required_argument, NULL, 'r' },
	{ "base-every", required_argument, NULL, 'b' },
	{ "skip-steps", required_argument, NULL, 's' },
	{ "json", no_argument, NULL, 'j' },
	{ "at", required_argument, NULL, 'a' },
	{ "list", no_argument, NULL, 'l' },
	{ "rank", required_argument, NULL, 'R' },
	{ "print0", no_argument, NULL, '0' },
	{ "wait", required_argument, NULL, 'w' },
	{ "verify-all", no_argument, NULL, 'A' },
	{ "adopt", no_argument, NULL, 'O' },
	{ NULL, 0, NULL, 0 }
};

static struct ovl_plan *the_plan;	/* options point into it until exit */

static void
apply_plan(struct ckpt_opts *o, const char *path, int *format_set)
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
	o->plan_ranks = p->ranks;
	/* p is deliberately kept: o points into it */
}

int
main(int argc, char **argv)
{
	struct ckpt_opts o;
	const char *sub = NULL;
	uint64_t v;
	int c, format_set = 0;

	ovl_cli_init(&cli);
	memset(&o, 0, sizeof(o));
	if (argc > 1 && (strcmp(argv[1], "show") == 0 ||
	    strcmp(argv[1], "diff") == 0 || strcmp(argv[1], "compact") == 0 ||
	    strcmp(argv[1], "restore") == 0 || strcmp(argv[1], "verify") == 0)) {
		sub = argv[1];
		argv++;
		argc--;
	}
	while ((c = getopt_long(argc, argv, OVL_CLI_SHORTOPTS
	    "d:f:o:p:m:r:b:s:ja:lR:", longopts, NULL)) != -1) {
		if (ovl_cli_common(&cli, c))
			continue;
		switch (c) {
		case 'd':
			o.dir = optarg;
			break;
		case 'f':
			o.format = parse_format(optarg);
			if (o.format < 0)
				ovl_cli_usagex(&cli, "unknown format '%s' "
				    "(megatron, npy, jsonl, frames)", optarg);
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
		case 'a':
			if (ovl_num_u64(optarg, &o.at) != 0)
				ovl_cli_usagex(&cli, "bad --at '%s'", optarg);
			o.at_set = 1;
			break;
		case 'l':
			o.list = 1;
			break;
		case 'A':
			o.verify_all = 1;
			break;
		case 'O':
			o.adopt = 1;
			break;
		case 'w':
			if (ovl_num_u64_max(optarg, 86400, &o.wait_s) != 0)
				ovl_cli_usagex(&cli, "bad --wait '%s' (seconds)",
				    optarg);
			break;
		case '0':
			o.print0 = 1;
			break;
		case 'R':
			if (ovl_num_u64_max(optarg, MAX_RANKS - 1, &v) != 0)
				ovl_cli_usagex(&cli, "bad --rank '%s'", optarg);
			o.rank = (uint32_t)v;
			o.rank_set = 1;
			break;
		default:
			ovl_cli_usage(&cli);
		}
	}
	argc -= optind;
	argv += optind;
	if (sub != NULL) {
		if (strcmp(sub, "show") == 0)
			return cmd_show(&o, argc, argv);
		if (strcmp(sub, "diff") == 0)
			return cmd_diff(argc, argv);
		if (strcmp(sub, "compact") == 0)
			return cmd_compact(argc, argv);
		if (strcmp(sub, "restore") == 0)
			return cmd_restore(&o, argc, argv);
		return cmd_verify(&o, argc, argv);
	}
	if (argc > 1)
		ovl_cli_usage(&cli);
	if (argc == 1)
		apply_plan(&o, argv[0], &format_set);
	if (o.dir == NULL)
		ovl_cli_usagex(&cli, "no checkpoint directory (--dir, or the "
		    "plan's checkpoint dir=)");
	if (o.format != FMT_NONE && o.format != FMT_FRAMES && o.prefix == NULL)
		ovl_cli_usagex(&cli, "--format %s needs --output PREFIX",
		    fmt_name[o.format]);
	if (o.format == FMT_FRAMES && o.prefix == NULL)
		o.format = FMT_NONE;	/* frames on standard output */
	if (o.format == FMT_NONE && o.prefix != NULL)
		ovl_cli_usagex(&cli, "--output needs --format");
	if (o.per_rank != NULL && !pattern_ok(o.per_rank))
		ovl_cli_usagex(&cli, "per-rank pattern '%s' needs exactly one "
		    "%%d", o.per_rank);
	if (o.base_every == 0)
		o.base_every = 16;
	c = run(&o);
	ovl_plan_free(the_plan);
	return c;
}
