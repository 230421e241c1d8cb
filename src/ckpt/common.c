/*
 * ovl-ckpt: helpers several rooms share (paths, the lock, reading the log,
 * skip ranges, per-rank patterns).
 */
#include "ckpt.h"

static volatile sig_atomic_t stop_requested;

int
ckpt_stopping(void)
{
	return stop_requested;
}

/* what to say when a write to a reader keeps the sink from stopping */
static char blocked_msg[600];
static volatile sig_atomic_t in_write;

void
ckpt_on_term(int sig)
{
	(void)sig;
	stop_requested = 1;
	/* a write blocked on a reader still blocked in a second: stop there */
	if (in_write)
		alarm(1);
}

static void
on_alarm(int sig)
{
	(void)sig;
	if (!in_write)
		return;
	(void)write(STDERR_FILENO, blocked_msg, strlen(blocked_msg));
	_exit(EXIT_STOPPED);
}

/* blocked_msg: the sink stopped while NAME's reader did not read PATH */
static void
blocked_say(const char *name, const char *path)
{
	snprintf(blocked_msg, sizeof(blocked_msg), "%s: stopped while %s "
	    "waited for its reader to read '%s'; resume with 'ovl-ckpt "
	    "restore'\n", ovl_err_prog(), name, path);
}

void
ckpt_stop_blocked(const char *name, const char *path)
{
	blocked_say(name, path);
	fputs(blocked_msg, stderr);
	exit(EXIT_STOPPED);
}

void
ckpt_write_begin(const char *name, const char *path)
{
	static int armed;
	struct sigaction sa;

	if (!armed) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGALRM, &sa, NULL);
		armed = 1;
	}
	blocked_say(name, path);
	in_write = 1;
	if (stop_requested)
		alarm(1);
}

void
ckpt_write_end(void)
{
	in_write = 0;
}

void
fmt_free_state(struct ckpt_run *R, void *state)
{
	(void)R;
	free(state);
}

char *
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
char *
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

void
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

/* A per-rank pattern has exactly one %d (and %% for a percent sign). */
int
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

/*
 * Rank r of nranks is served to trainer host r * T / nranks of the
 * comma-separated list (consecutive ranks share a host, as launchers place
 * them): a tcp-listen: stream takes its peer from that host only.
 */
char *
rank_endpoint(const char *path, const char *hosts, size_t r, size_t nranks)
{
	size_t t = 1, i, k;
	const char *p, *e;

	if (hosts == NULL || strncmp(path, "tcp-listen:", 11) != 0)
		return ovl_xstrdup(path);
	for (p = hosts; *p != '\0'; p++)
		t += *p == ',';
	k = nranks > 0 && r < nranks ? r * t / nranks : r % t;
	for (p = hosts, i = 0; i < k; i++)
		p = strchr(p, ',') + 1;
	e = p + strcspn(p, ",");
	return xasprintf("%s,from=%.*s", path, (int)(e - p), p);
}

char *
pattern_path(const char *pat, size_t r)
{
	return ovl_plan_rank_path(pat, r);
}

/*
 * Lock dir for this process, waiting up to wait_s seconds for another
 * ovl-ckpt to let go (a supervisor killed a moment ago: its sink is still
 * dying). Held until exit.
 */
int
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

int
lock_dir(const char *dir)
{
	return lock_dir_wait(dir, 0);
}

/* What a read held of the log, for -v. */
static void
log_read_info(const char *dir, const struct ovl_ckptlog *log)
{
	if (log->valid < log->size)
		ovl_info(1, "'%s/ckpt.log': ignoring a torn tail of %zu bytes",
		    dir, log->size - log->valid);
	ovl_info(1, "'%s/ckpt.log': read %zu of %zu bytes (from byte offset "
	    "%zu), %zu records", dir, log->size - log->from, log->size,
	    log->from, log->nrec);
}

int
read_log_at(const char *dir, struct ovl_ckptlog *log, int tail, char *err,
    size_t errlen)
{
	char *path = xasprintf("%s/ckpt.log", dir);
	char *idx = xasprintf("%s/" CKPT_INDEX, dir);
	int rc;

	rc = ovl_ckptlog_read_tail(path, idx, tail ? 2 : 0, log, err, errlen);
	free(path);
	free(idx);
	if (rc == 0)
		log_read_info(dir, log);
	return rc;
}

static void
read_log_how(const char *dir, struct ovl_ckptlog *log, int tail)
{
	char err[512];
	int rc = read_log_at(dir, log, tail, err, sizeof(err));

	if (rc == -3 && log->from > 0) {
		/* a corrupt record: say so as a whole read does */
		ovl_ckptlog_free(log);
		rc = read_log_at(dir, log, 0, err, sizeof(err));
	}
	if (rc == -1)
		ovl_errx(OVL_EXIT_DATA, "%s", err);
	if (rc == -3)
		ovl_errx(OVL_EXIT_FRAME, "%s", err);
}

void
read_log(const char *dir, struct ovl_ckptlog *log)
{
	read_log_how(dir, log, 0);
}

void
read_log_tail(const char *dir, struct ovl_ckptlog *log)
{
	read_log_how(dir, log, 1);
}

size_t
read_log_widen(const char *dir, struct ovl_ckptlog *log, size_t i)
{
	uint64_t off = log->rec[i].offset;
	size_t j;

	if (log->from == 0)
		return i;
	ovl_ckptlog_free(log);
	read_log(dir, log);
	for (j = log->nrec; j > 0; j--)
		if (log->rec[j - 1].offset == off)
			return j - 1;
	ovl_errx(OVL_EXIT_FRAME, "'%s/ckpt.log' changed while it was read",
	    dir);
}

void
log_state(const char *dir, const struct ovl_ckptlog *log, size_t i,
    struct ovl_ckstate *st)
{
	char err[512];

	if (ovl_ckptlog_state(log, i, st, err, sizeof(err)) != 0)
		ovl_errx(OVL_EXIT_FRAME, "'%s/ckpt.log': %s", dir, err);
}

/* The record --at N names (or the last one); exits 1 when there is none. */
size_t
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
void
cut_log(const char *dir, const struct ovl_ckptlog *log, size_t i)
{
	uint64_t end = log->rec[i].offset + OVL_CKPTREC_HDR_LEN + log->rec[i].len;
	char *path;
	int fd;

	if (end == log->size)
		return;
	path = xasprintf("%s/" CKPT_INDEX, dir);
	/* the index first: an entry past the log's end is never used anyway */
	if (ovl_ckptidx_cut(path, end) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot cut '%s'", path);
	free(path);
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

int
skipped(const struct ckpt_run *R, uint64_t step)
{
	size_t i;

	for (i = 0; i < R->nskips; i++)
		if (step >= R->skips[i].a && step <= R->skips[i].b)
			return 1;
	return 0;
}

void
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

int
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


/*
 * Every option of ovl-ckpt, the sink's and the subcommands': one table.
 * Each (sub)command says which it takes (ckpt_getopt); the long-only ones
 * have values that are not letters of any short option.
 */
static const struct option longopts[] = {
	OVL_CLI_LONGOPTS,
	{ "dir", required_argument, NULL, 'd' },
	{ "format", required_argument, NULL, 'f' },
	{ "output", required_argument, NULL, 'o' },
	{ "per-rank", required_argument, NULL, 'p' },
	{ "manifest", required_argument, NULL, 'm' },
	{ "resume", required_argument, NULL, 'r' },
	{ "base-every", required_argument, NULL, 'b' },
	{ "wait-readers", required_argument, NULL, 'W' },
	{ "run-ahead", required_argument, NULL, 'Y' },
	{ "skip-steps", required_argument, NULL, 's' },
	{ "json", no_argument, NULL, 'j' },
	{ "rank", required_argument, NULL, 'R' },
	{ "at", required_argument, NULL, 'a' },
	{ "list", no_argument, NULL, 'l' },
	{ "print0", no_argument, NULL, '0' },
	{ "wait", required_argument, NULL, 'w' },
	{ "verify-all", no_argument, NULL, 'A' },
	{ "adopt", no_argument, NULL, 'O' },
	{ "fresh-ok", no_argument, NULL, 'N' },
	{ "overwrite-output", no_argument, NULL, 'X' },
	{ "step", required_argument, NULL, 'S' },
	{ "live", required_argument, NULL, 'L' },
	{ "input", required_argument, NULL, 'i' },
	{ "trainer-hosts", required_argument, NULL, 'T' },
	{ "step-from-readers", required_argument, NULL, 'F' },
	OVL_NET_LONGOPTS,
	OVL_RELINK_LONGOPTS,
	{ NULL, 0, NULL, 0 }
};

int
ckpt_getopt(const struct ovl_cli *cli, const char *sub, int argc, char **argv,
    const char *shortopts, const char *longonly)
{
	char opts[128], name[64];
	const char *arg;
	int c, idx;

	snprintf(opts, sizeof(opts), ":%s%s", OVL_CLI_SHORTOPTS, shortopts);
	opterr = 0;
	for (;;) {
		idx = -1;
		c = getopt_long(argc, argv, opts, longopts, &idx);
		arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
		if (idx >= 0) {	/* a long option: its name, not its value */
			snprintf(name, sizeof(name), "--%s", longopts[idx].name);
			arg = name;
		}
		if (c == '?' && optopt != 0 && strncmp(arg, "--", 2) != 0)
			ovl_cli_usagex(cli, "unknown option '-%c'%s%s", optopt,
			    sub != NULL ? " for " : "", sub != NULL ? sub : "");
		/* the network options: the sink's only */
		if (c >= OVL_NET_OPT_CONNECT_TIMEOUT && c <= OVL_NET_OPT_LAST &&
		    sub == NULL) {
			(void)ovl_net_cli(cli, c, optarg);
			continue;
		}
		/* relinking: the sink's only, handled by its caller */
		if (c >= OVL_RELINK_OPT_RELINK &&
		    c <= OVL_RELINK_OPT_BACKUP_MAX && sub == NULL)
			return c;
		/* unknown, or another (sub)command's */
		if (c == '?' || (c > 0 && (c >= 256 ||
		    (strchr(OVL_CLI_SHORTOPTS, c) == NULL &&
		    strchr(shortopts, c) == NULL && strchr(longonly, c) == NULL))))
			ovl_cli_usagex(cli, "unknown option '%s'%s%s", arg,
			    sub != NULL ? " for " : "", sub != NULL ? sub : "");
		if (c == ':')
			ovl_cli_usagex(cli, "option '%s' needs a value", arg);
		if (c == -1 || !ovl_cli_common(cli, c))
			return c;
	}
}

uint64_t
ckpt_opt_at(const struct ovl_cli *cli, const char *arg)
{
	uint64_t at;

	if (ovl_num_u64(arg, &at) != 0)
		ovl_cli_usagex(cli, "bad --at '%s'", arg);
	return at;
}
