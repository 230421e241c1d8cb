/*
 * ovl-ckpt restore: cut the log and the outputs back to a checkpoint
 * and print how each stage resumes.
 */
#include "ckpt.h"

static const struct ovl_cli restore_cli = {
	"ovl-ckpt",
	"ovl-ckpt restore [--print0] [--skip-steps A-B | --step S] [--wait S] [--verify-all] [--adopt] [--fresh-ok] [--live DIR] CKPTDIR [--at N]",
	"Cut the log and every file output back to a checkpoint (the last one,\n"
	"or N) and print the options each stage resumes with.\n"
	"  -a, --at N            checkpoint N, not the last\n"
	"  -s, --skip-steps A-B  drop the sequences of steps A..B from now on\n"
	"      --print0          NUL-separated words, for a supervisor\n"
	"      --wait S          wait up to S seconds for the directory's lock\n"
	"      --verify-all      check every committed byte, not the last segment\n"
	"      --adopt           a copied or moved directory takes over the outputs\n"
	"      --fresh-ok        no checkpoint yet is an answer, not an error: the\n"
	"                        record \"fresh\" (exit 0), decided under the lock\n"
	"      --step S          a trainer needs step S next: the last checkpoint\n"
	"                        at or before it, the steps in between skipped\n"
	"                        (stream outputs only)\n"
	"      --live DIR        the sink still runs: cut nothing, take no lock,\n"
	"                        write the stages' states into DIR (ovl-run's\n"
	"                        restart of one stage)\n"
	"  -h, --help, -V, --version, -v, --verbose, -q, --quiet\n"
};

struct restore_opts {
	int		 at_set;
	uint64_t	 at;
	int		 nskip;
	uint64_t	 skip[2];
	int		 print0;
	uint64_t	 wait_s;
	int		 verify_all;
	int		 adopt;
	int		 fresh_ok;	/* no checkpoint: print "fresh", exit 0 */
	int		 step_set;	/* --step: the trainer's next step */
	uint64_t	 step;
	const char	*live;		/* --live: the states go here */
};

static void
restore_getopt(struct restore_opts *o, int *argcp, char ***argvp)
{
	int c;

	memset(o, 0, sizeof(*o));
	while ((c = ckpt_getopt(&restore_cli, "restore", *argcp, *argvp,
	    "a:s:", "0wAOSNL")) != -1) {
		switch (c) {
		case 'a':
			o->at = ckpt_opt_at(&restore_cli, optarg);
			o->at_set = 1;
			break;
		case 's':
			if (ovl_num_range(optarg, &o->skip[0], &o->skip[1]) != 0)
				ovl_cli_usagex(&restore_cli, "bad --skip-steps "
				    "'%s' (A-B)", optarg);
			o->nskip = 1;
			break;
		case '0':
			o->print0 = 1;
			break;
		case 'w':
			if (ovl_num_u64_max(optarg, 86400, &o->wait_s) != 0)
				ovl_cli_usagex(&restore_cli, "bad --wait '%s' "
				    "(seconds)", optarg);
			break;
		case 'A':
			o->verify_all = 1;
			break;
		case 'O':
			o->adopt = 1;
			break;
		case 'L':
			o->live = optarg;
			break;
		case 'N':
			o->fresh_ok = 1;
			break;
		case 'S':
			if (ovl_num_u64(optarg, &o->step) != 0)
				ovl_cli_usagex(&restore_cli, "bad --step '%s'",
				    optarg);
			o->step_set = 1;
			break;
		}
	}
	*argcp -= optind;
	*argvp += optind;
	if (o->step_set && (o->nskip || o->at_set))
		ovl_cli_usagex(&restore_cli, "--step chooses the checkpoint and "
		    "the steps to skip: not with --at or --skip-steps");
	if (o->live != NULL && (o->step_set || o->nskip || o->verify_all ||
	    o->adopt))
		ovl_cli_usagex(&restore_cli, "--live changes nothing: not with "
		    "--step, --skip-steps, --verify-all or --adopt");
}

/*
 * The resume handshake: a trainer that checkpointed before step S needs
 * step S next. The last checkpoint at or before S is restored and steps
 * from its own up to S - 1 are skipped (recorded in the log like
 * --skip-steps), so the streams start at step S: nothing replayed, nothing
 * lost. Only for stream outputs: a file already holds those steps.
 */
static int
handshake(const char *dir, const struct ovl_ckptlog *log,
    struct restore_opts *o)
{
	struct ovl_ckstate st = { 0 };
	const char *v;
	uint64_t step = 0;
	size_t i, j;
	struct outrec r;
	const struct ovl_kvsec *os;

	for (i = log->nrec; i-- > 0;) {
		if (log->rec[i].flags & OVL_CKPTREC_END)
			continue;	/* the end of a run resumes nothing */
		log_state(dir, log, i, &st);
		v = ovl_kvsec_get(&st.sec[OVL_SEC_CKPT], "step");
		if (v == NULL || ovl_num_u64(v, &step) != 0 || step > o->step)
			continue;
		os = &st.sec[OVL_SEC_OUT];
		for (j = 0; j < os->n; j++)
			if (strchr(os->kv[j].key, '.') == NULL &&
			    out_lookup(&st, os->kv[j].key, &r) == 0 && r.file)
				ovl_errx(OVL_EXIT_USAGE, "--step is for stream "
				    "outputs: '%s' is a file that holds every "
				    "step; restore a checkpoint with --at", r.path);
		o->at_set = 1;
		o->at = log->rec[i].n;
		if (o->step > step) {
			o->nskip = 1;
			o->skip[0] = step;
			o->skip[1] = o->step - 1;
		}
		ovl_info(1, "step %" PRIu64 " next: checkpoint %" PRIu64 " (step %"
		    PRIu64 ")%s", o->step, o->at, step, o->nskip ?
		    ", the steps in between skipped" : "");
		ovl_ckstate_clear(&st);
		return 0;
	}
	ovl_ckstate_clear(&st);
	return -1;
}

/* Cut a file output back to its committed length. */
static void
restore_output(const struct outrec *r, uint64_t n)
{
	struct stat sb;
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
	if (fsync(fd) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot sync '%s'", r->path);
	close(fd);
}

static void
write_resume_file(const char *dir, const char *name,
    const struct ovl_kvsec *s, char **path, int sub)
{
	struct ovl_buf b = { 0 };
	char *rdir = sub ? xasprintf("%s/resume", dir) : ovl_xstrdup(dir);

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
restore_line(FILE *fp, int print0, const char *key, const char *const *opts,
    size_t n)
{
	size_t i;

	if (print0) {
		fputs(key, fp);
		putc('\0', fp);
		for (i = 0; i < n; i++) {
			fputs(opts[i], fp);
			putc('\0', fp);
		}
		putc('\0', fp);
		return;
	}
	fputs(key, fp);
	for (i = 0; i < n; i++) {
		putc(' ', fp);
		shell_word(fp, opts[i]);
	}
	putc('\n', fp);
}

static void
print_sources(FILE *fp, const struct ovl_kvsec *mix, int print0)
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
			restore_line(fp, print0, key, opts, 2);
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
    uint64_t at, int tail)
{
	char err[512];
	int rc = read_log_at(dir, log, tail, err, sizeof(err));

	if (rc == -3 && log->from > 0) {
		/* the whole log names the checkpoints before the corrupt one */
		ovl_ckptlog_free(log);
		rc = read_log_at(dir, log, 0, err, sizeof(err));
	}
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

/*
 * Before a resume appends to them: the committed bytes of every file output
 * must be the bytes the log hashed. By default the last committed segment
 * of each (where a crash or a stray write would show first); with all,
 * every segment of the chain (as verify does). Exit 3 on a mismatch.
 */
static void
check_committed(const char *dir, struct ovl_ckptlog *log, size_t *ip,
    const struct ovl_ckstate *st, int all)
{
	size_t i = *ip;
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
		if (k < 0 && log->from > 0) {
			/* the segment begins before the records read */
			*ip = i = read_log_widen(dir, log, i);
			j--;
			continue;
		}
		if (plen >= r.len)
			continue;
		if ((fd = open(r.path, O_RDONLY | O_CLOEXEC)) < 0)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", r.path);
		if (hash_range(fd, plen, r.len, phash, &h, NULL) != 0)
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

/* A line of RESTORES_LOG: checkpoint n restored, all or the last checked. */
static void
note_restore(const char *dir, uint64_t n, int all)
{
	char *path = xasprintf("%s/" RESTORES_LOG, dir), line[64];
	int fd, len;

	len = snprintf(line, sizeof(line), "%" PRIu64 " %s\n", n, all ? "all" :
	    "last");
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, (size_t)len) != len)
		ovl_err(OVL_EXIT_DATA, "cannot append to '%s'", path);
	close(fd);
	free(path);
}

/*
 * Restore dir (locked by the caller) as o says, the stages' lines to fp.
 * Returns the checkpoint restored; -1 when o->step is before every
 * checkpoint and none_ok (else exit 1); -2 when the run ended.
 */
static int64_t
restore_do(const char *dir, struct restore_opts *o, FILE *fp, int none_ok)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 }, amended = { 0 };
	struct outrec r;
	struct ovl_kvsec *os;
	struct skip sk[MAX_SKIPS];
	struct ovl_buf rec = { 0 };
	const char *v;
	char *mixpath, *conpath;
	uint64_t n, step = 0;
	size_t i, j, nsk;
	int fd, f = 0;

	read_log_prefix(dir, &log, o->at_set, o->at, !o->at_set &&
	    !o->verify_all);
	if (o->step_set && (f = handshake(dir, &log, o)) != 0 &&
	    log.from > 0) {
		/* a checkpoint before the records read */
		ovl_ckptlog_free(&log);
		read_log_prefix(dir, &log, o->at_set, o->at, 0);
		f = handshake(dir, &log, o);
	}
	if (o->step_set && f != 0) {
		if (!none_ok)
			ovl_errx(OVL_EXIT_DATA, "no checkpoint at or before step %"
			    PRIu64 " in '%s'", o->step, dir);
		ovl_ckptlog_free(&log);
		return -1;
	}
	i = pick_record(dir, &log, o->at_set, o->at);
	n = log.rec[i].n;
	if (log.rec[i].flags & OVL_CKPTREC_END) {
		ovl_info(0, "checkpoint %" PRIu64 " in '%s' is the end of the "
		    "run: nothing to resume", n, dir);
		ovl_ckptlog_free(&log);
		return -2;
	}
	log_state(dir, &log, i, &st);
	check_home(dir, &st, n, o->adopt);
	if (o->live != NULL)
		goto states;	/* the live sink keeps its log and outputs */
	check_committed(dir, &log, &i, &st, o->verify_all);
	note_restore(dir, n, o->verify_all);
	cut_log(dir, &log, i);
	{
		char *cp = xasprintf("%s/" OVL_RELINK_COMMITTED, dir);

		if (ovl_link_set_committed(cp, n) != 0)
			ovl_err(OVL_EXIT_DATA, "cannot write '%s'", cp);
		free(cp);
	}
	os = &st.sec[OVL_SEC_OUT];
	for (j = 0; j < os->n; j++) {
		if (strchr(os->kv[j].key, '.') != NULL ||
		    out_lookup(&st, os->kv[j].key, &r) != 0)
			continue;
		restore_output(&r, n);
	}
	/* what the format derives from its files: headers, indexes */
	v = ovl_kvsec_get(&st.sec[OVL_SEC_CKPT], "format");
	if (v != NULL && (f = parse_format(v)) >= 0 &&
	    ckpt_formats[f]->restore != NULL)
		ckpt_formats[f]->restore(&st, n);
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
states:
	ovl_buf_free(&rec);
	{
		char *abs = realpath(o->live != NULL ? o->live : dir, NULL);

		if (abs == NULL)
			ovl_err(OVL_EXIT_DATA, "cannot resolve '%s'", o->live !=
			    NULL ? o->live : dir);
		write_resume_file(abs, "mix", &st.sec[OVL_SEC_MIX], &mixpath,
		    o->live == NULL);
		write_resume_file(abs, "construct", &st.sec[OVL_SEC_CONSTRUCT],
		    &conpath, o->live == NULL);
		free(abs);
	}
	print_sources(fp, &st.sec[OVL_SEC_MIX], o->print0);
	{
		const char *opts[2];
		char num[32];

		opts[0] = "--resume";
		opts[1] = mixpath;
		restore_line(fp, o->print0, "mix", opts, 2);
		opts[1] = conpath;
		restore_line(fp, o->print0, "construct", opts, 2);
		snprintf(num, sizeof(num), "%" PRIu64, n);
		opts[1] = num;
		restore_line(fp, o->print0, "ckpt", opts, 2);
	}
	free(mixpath);
	free(conpath);
	ovl_ckstate_clear(&st);
	ovl_ckptlog_free(&log);
	return (int64_t)n;
}

/* Whether dir's log holds a checkpoint (the caller holds its lock). */
static int
has_checkpoint(const char *dir)
{
	struct ovl_ckptlog log;
	int any;

	read_log_tail(dir, &log);
	any = log.nrec > 0;
	ovl_ckptlog_free(&log);
	return any;
}

/* --fresh-ok and no checkpoint: the record "fresh", no options. */
static void
restore_fresh(const char *dir, const struct restore_opts *o)
{
	ovl_info(0, "no checkpoint in '%s': the run starts fresh", dir);
	restore_line(stdout, o->print0, "fresh", NULL, 0);
	ovl_io_close_stdout();
}

int
cmd_restore(int argc, char **argv)
{
	struct restore_opts ro, *o = &ro;
	const char *dir;

	restore_getopt(o, &argc, &argv);
	if (argc != 1)
		ovl_cli_usage(&restore_cli);
	dir = argv[0];
	if (o->fresh_ok && access(dir, F_OK) != 0 && errno == ENOENT) {
		restore_fresh(dir, o);
		return 0;
	}
	if (o->live == NULL)
		(void)lock_dir_wait(dir, o->wait_s);
	if (o->fresh_ok && !has_checkpoint(dir)) {
		restore_fresh(dir, o);
		return 0;
	}
	(void)restore_do(dir, o, stdout, 0);
	ovl_io_close_stdout();
	return 0;
}

int64_t
restore_for_step(const char *dir, uint64_t step, FILE *fp)
{
	struct restore_opts o;
	uint8_t hdr[OVL_CKPTLOG_HDR_LEN];
	char *lp;
	int64_t n;

	memset(&o, 0, sizeof(o));
	o.print0 = 1;
	o.step_set = 1;
	o.step = step;
	n = restore_do(dir, &o, fp, 1);
	if (n != -1)
		return n;
	/* before every checkpoint: the run starts again, the log anew */
	ovl_info(1, "step %" PRIu64 " next: before the first checkpoint, the "
	    "run starts from the beginning", step);
	lp = xasprintf("%s/" CKPT_INDEX, dir);
	if (unlink(lp) != 0 && errno != ENOENT)
		ovl_err(OVL_EXIT_DATA, "cannot remove '%s'", lp);
	free(lp);
	lp = xasprintf("%s/ckpt.log", dir);
	ovl_ckptlog_header(hdr);
	if (ovl_atomic_write(lp, hdr, sizeof(hdr)) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot rewrite '%s'", lp);
	free(lp);
	return -1;
}

