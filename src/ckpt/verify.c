/*
 * ovl-ckpt verify and compact, over the outputs' hash chains.
 */
#include "ckpt.h"

static const struct ovl_cli verify_cli = {
	"ovl-ckpt",
	"ovl-ckpt verify CKPTDIR [--at N] OUTPUT ...",
	"Check output files against the hash chains of a checkpoint.\n"
	"  -a, --at N     checkpoint N, not the last\n"
	"  -h, --help, -V, --version, -v, --verbose, -q, --quiet\n"
};

static const struct ovl_cli compact_cli = {
	"ovl-ckpt",
	"ovl-ckpt compact CKPTDIR",
	"Fold the log into one base record of its last checkpoint.\n"
	"  -h, --help, -V, --version, -v, --verbose, -q, --quiet\n"
};

int
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

int
hash_range(int fd, uint64_t from, uint64_t to, uint64_t seed, uint64_t *h,
    struct ovl_hash64 *also)
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
		if (also != NULL)
			ovl_hash64_update(also, buf, want);
	}
	*h = ovl_hash64_digest(&x);
	return 0;
}

/*
 * Recompute the hash chain of output name over records 0..upto from the
 * file at path. Returns 0 when it matches, else 1 with a message in msg.
 * *whole gets XXH64 of the file's committed bytes (after the header).
 */
int
chain_check(const char *dir, const struct ovl_ckptlog *log, size_t upto,
    const char *name, const char *path, uint64_t *whole, uint64_t *len_out,
    char *msg, size_t msglen)
{
	struct ovl_ckstate st = { 0 };
	struct ovl_hash64 all;
	struct outrec r;
	uint64_t plen = 0, phash = 0, segh;
	struct stat sb;
	size_t i;
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
		if (hash_range(fd, plen, r.len, phash, &segh, &all) != 0) {
			snprintf(msg, msglen, "read error");
			rc = 1;
			break;
		}
		if (segh != r.hash) {
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

int
cmd_verify(int argc, char **argv)
{
	struct ovl_ckptlog log;
	struct ovl_ckstate st = { 0 };
	struct outrec r;
	const struct ovl_kvsec *os;
	char msg[512], *rp;
	const char *name, *slash, *bs;
	uint64_t whole, len;
	size_t i, j, nmatch;
	uint64_t at = 0;
	int a, bad = 0, at_set = 0;

	while ((a = ckpt_getopt(&verify_cli, "verify", argc, argv, "a:",
	    "")) != -1) {
		at = ckpt_opt_at(&verify_cli, optarg);
		at_set = 1;
	}
	argc -= optind;
	argv += optind;
	if (argc < 2)
		ovl_cli_usage(&verify_cli);
	read_log(argv[0], &log);
	i = pick_record(argv[0], &log, at_set, at);
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

int
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

	while (ckpt_getopt(&compact_cli, "compact", argc, argv, "", "") != -1)
		;
	argc -= optind;
	argv += optind;
	if (argc != 1)
		ovl_cli_usage(&compact_cli);
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
	path = xasprintf("%s/" CKPT_INDEX, dir);
	if (unlink(path) != 0 && errno != ENOENT)
		ovl_err(OVL_EXIT_DATA, "cannot remove '%s'", path);
	free(path);
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

