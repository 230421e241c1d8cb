#include "chunk.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "parquet.h"
#include "remote.h"
#include "rng.h"

#define CUT_BLOCK	(64u << 10)

struct listing {
	struct ovl_chunks *cs;
	uint32_t	  fcap;
	uint32_t	  ccap;
};

/* A file being listed: local (fd) or remote (r). */
struct lfile {
	int		 fd;
	struct ovl_remote *r;
};

static ssize_t
lf_pread(struct lfile *f, void *buf, size_t n, uint64_t off)
{
	ssize_t k;

	if (f->r != NULL)
		return ovl_remote_pread(f->r, buf, n, off);
	while ((k = pread(f->fd, buf, n, (off_t)off)) == -1 && errno == EINTR)
		;
	return k;
}

static int
has_glob(const char *s)
{
	/* an HTTP URL's '?' starts its query */
	if (ovl_remote_is(s) && !ovl_remote_is_s3(s))
		return strcspn(s, "*[") < strcspn(s, "?#");
	return strpbrk(s, "*?[") != NULL;
}

/* Add path, listed as it is now: st (local), r (remote) or neither. */
static void
add_file(struct listing *l, const char *path, const struct stat *st,
    const struct ovl_remote *r)
{
	struct ovl_chunks *cs = l->cs;
	struct ovl_chunk_file *id;

	if (cs->nfiles == l->fcap) {
		l->fcap = l->fcap ? l->fcap * 2 : 16;
		cs->files = ovl_xrealloc(cs->files, l->fcap * sizeof(*cs->files));
		cs->ids = ovl_xrealloc(cs->ids, l->fcap * sizeof(*cs->ids));
	}
	id = &cs->ids[cs->nfiles];
	memset(id, 0, sizeof(*id));
	if (st != NULL) {
		id->known = 1;
		id->size = (uint64_t)st->st_size;
		id->dev = (uint64_t)st->st_dev;
		id->ino = (uint64_t)st->st_ino;
		id->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 +
		    st->st_mtim.tv_nsec;
	} else if (r != NULL) {
		id->known = id->remote = 1;
		id->size = ovl_remote_size(r);
		id->ver = ovl_xstrdup(ovl_remote_version(r));
	}
	cs->files[cs->nfiles++] = ovl_xstrdup(path);
}

int
ovl_chunks_file_same(const struct ovl_chunk_file *id, const struct stat *st,
    char *why, size_t n)
{
	int64_t mt = (int64_t)st->st_mtim.tv_sec * 1000000000 +
	    st->st_mtim.tv_nsec;

	if (id == NULL || !id->known || id->remote)
		return 0;
	if ((uint64_t)st->st_dev != id->dev || (uint64_t)st->st_ino != id->ino)
		snprintf(why, n, "was replaced (another file, inode %llu, now "
		    "%llu)", (unsigned long long)id->ino,
		    (unsigned long long)st->st_ino);
	else if ((uint64_t)st->st_size < id->size)
		snprintf(why, n, "shrank from %llu to %llu bytes",
		    (unsigned long long)id->size,
		    (unsigned long long)st->st_size);
	else if ((uint64_t)st->st_size > id->size)
		snprintf(why, n, "grew from %llu to %llu bytes",
		    (unsigned long long)id->size,
		    (unsigned long long)st->st_size);
	else if (mt != id->mtime_ns)
		snprintf(why, n, "was modified (its mtime changed)");
	else
		return 0;
	return -1;
}

int
ovl_chunks_file_same_remote(const struct ovl_chunk_file *id,
    const struct ovl_remote *r, char *why, size_t n)
{
	const char *v = ovl_remote_version(r);

	if (id == NULL || !id->known || !id->remote)
		return 0;
	if (strcmp(id->ver, v) != 0)
		snprintf(why, n, "changed (version %.200s, now %.200s)",
		    id->ver[0] != '\0' ? id->ver : "none",
		    v[0] != '\0' ? v : "none");
	else if (ovl_remote_size(r) != id->size)
		snprintf(why, n, "changed (%llu bytes, now %llu)",
		    (unsigned long long)id->size,
		    (unsigned long long)ovl_remote_size(r));
	else
		return 0;
	return -1;
}

void
ovl_chunks_file_format(const struct ovl_chunk_file *id, char *buf, size_t n)
{
	const unsigned char *v;
	size_t k;
	int w;

	if (id == NULL || !id->known) {
		snprintf(buf, n, "- -");
		return;
	}
	if (!id->remote) {
		/* no device: another host's mount of the file has another */
		snprintf(buf, n, "%llu m.%lld.%09lld.i.%llu",
		    (unsigned long long)id->size,
		    (long long)(id->mtime_ns / 1000000000),
		    (long long)(id->mtime_ns % 1000000000),
		    (unsigned long long)id->ino);
		return;
	}
	w = snprintf(buf, n, "%llu %s", (unsigned long long)id->size,
	    id->ver[0] == '\0' ? "-" : id->ver[0] == '"' ||
	    strncmp(id->ver, "W/", 2) == 0 ? "e." : "l.");
	k = w < 0 ? 0 : (size_t)w;
	for (v = (const unsigned char *)id->ver; *v != '\0' && k + 4 < n; v++) {
		if (*v <= ' ' || *v == '%' || *v >= 0x7f)
			k += (size_t)snprintf(buf + k, n - k, "%%%02X", *v);
		else
			buf[k++] = (char)*v;
	}
	if (k < n)
		buf[k] = '\0';
}

static int
add_chunk(struct listing *l, uint32_t file, int comp, uint64_t off,
    uint64_t len, char *err, size_t errlen)
{
	struct ovl_chunks *cs = l->cs;

	if (cs->n == UINT32_MAX - 1) {
		snprintf(err, errlen, "too many chunks");
		return -1;
	}
	if (cs->n == l->ccap) {
		l->ccap = l->ccap ? l->ccap * 2 : 16;
		cs->v = ovl_xrealloc(cs->v, l->ccap * sizeof(*cs->v));
	}
	cs->v[cs->n].file = file;
	cs->v[cs->n].comp = (uint32_t)comp;
	cs->v[cs->n].off = off;
	cs->v[cs->n].len = len;
	cs->v[cs->n].part = 0;
	cs->n++;
	return 0;
}

static int
comp_of(const unsigned char *m, size_t n)
{
	if (n >= 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f &&
	    m[3] == 0xfd)
		return OVL_COMP_ZSTD;
	if (n >= 2 && m[0] == 0x1f && m[1] == 0x8b)
		return OVL_COMP_GZIP;
	if (n >= 6 && memcmp(m, "\xfd" "7zXZ\0", 6) == 0)
		return OVL_COMP_OTHER;
	if (n >= 3 && memcmp(m, "BZh", 3) == 0)
		return OVL_COMP_OTHER;
	if (n >= 4 && m[0] == 0x04 && m[1] == 0x22 && m[2] == 0x4d &&
	    m[3] == 0x18)
		return OVL_COMP_OTHER;
	return OVL_COMP_NONE;
}

int
ovl_chunks_magic(const unsigned char *m, size_t n)
{
	return comp_of(m, n);
}

int
ovl_chunks_have_stream(const struct ovl_chunks *cs)
{
	uint32_t i;

	for (i = 0; i < cs->n; i++)
		if (cs->v[i].comp == OVL_COMP_STREAM)
			return 1;
	return 0;
}

/* stdin, a FIFO, a device: what must be read once and never reopened. */
static int
is_stream(const char *path, struct stat *st)
{
	if (strcmp(path, "-") == 0)
		return 1;
	return stat(path, st) == 0 && !S_ISREG(st->st_mode) &&
	    !S_ISDIR(st->st_mode);
}

int
ovl_chunks_compression(const char *path)
{
	struct stat st;
	unsigned char m[8];
	ssize_t n;
	int fd, saved;

	if (ovl_remote_is(path)) {
		struct ovl_remote *r;
		char err[512];

		if ((r = ovl_remote_open(path, err, sizeof(err))) == NULL)
			return -1;
		n = ovl_remote_pread(r, m, sizeof(m), 0);
		ovl_remote_close(r);
		if (n < 0) {
			errno = EIO;
			return -1;
		}
		return comp_of(m, (size_t)n);
	}
	if (is_stream(path, &st))
		return OVL_COMP_STREAM;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	n = pread(fd, m, sizeof(m), 0);
	saved = errno;
	close(fd);
	if (n < 0) {
		errno = saved;
		return -1;
	}
	return comp_of(m, (size_t)n);
}

/*
 * The end of the first record boundary at or after pos: just after a
 * newline (lines), or just after a blank line (paragraphs). Returns size
 * when there is none, or -1 on a read error.
 */
static int64_t
find_cut(struct lfile *fd, uint64_t pos, uint64_t size, enum ovl_chunk_cut cut,
    unsigned char *blk)
{
	/* For paragraphs: is the line we are in blank so far? */
	int blank = 0, at_line_start = 0;
	uint64_t at;

	if (pos == 0 || pos >= size)
		return (int64_t)size;
	/* Start one byte early: a newline just before pos cuts at pos. */
	at = pos - 1;
	while (at < size) {
		size_t want = size - at < CUT_BLOCK ? (size_t)(size - at) : CUT_BLOCK;
		ssize_t n = lf_pread(fd, blk, want, at);
		size_t i;

		if (n < 0)
			return -1;
		if (n == 0)
			break;
		for (i = 0; i < (size_t)n; i++) {
			unsigned char c = blk[i];

			if (cut == OVL_CUT_LINES) {
				if (c == '\n')
					return (int64_t)(at + i + 1);
				continue;
			}
			/* Paragraphs: cut after a line holding only blanks. */
			if (c == '\n') {
				if (at_line_start && blank)
					return (int64_t)(at + i + 1);
				at_line_start = 1;
				blank = 1;
			} else if (c != ' ' && c != '\t' && c != '\r')
				blank = 0;
		}
		at += (uint64_t)n;
	}
	return (int64_t)size;
}

/* A parquet file: one chunk per row group, over the row group's bytes. */
static int
add_row_groups(struct listing *l, const struct ovl_pq_io *io, uint32_t file,
    char *err, size_t errlen)
{
	struct ovl_pq_file *f;
	char msg[400];
	uint32_t i, n;

	if ((f = ovl_pq_open(io, NULL, msg, sizeof(msg))) == NULL) {
		snprintf(err, errlen, "'%s': %s", l->cs->files[file], msg);
		return -1;
	}
	n = ovl_pq_row_groups(f);
	for (i = 0; i < n; i++) {
		uint64_t off, len;

		ovl_pq_range(f, i, &off, &len);
		if (add_chunk(l, file, OVL_COMP_NONE, off, len, err, errlen) != 0)
			break;
		l->cs->v[l->cs->n - 1].part = i;
	}
	ovl_pq_close(f);
	return i == n ? 0 : -1;
}

/* Cut file (size bytes, already added as file) into chunks. */
static int
cut_file(struct listing *l, struct lfile *f, const char *path, uint64_t size,
    uint64_t chunk_size, enum ovl_chunk_cut cut, char *err, size_t errlen)
{
	unsigned char m[8], *blk;
	uint32_t file = l->cs->nfiles - 1;
	uint64_t pos;
	ssize_t n;
	int comp;

	if (cut == OVL_CUT_ROWGROUPS) {	/* parquet, local or remote */
		struct ovl_pq_io io;

		if (f->r != NULL)
			ovl_pq_io_remote(&io, f->r);
		else if (ovl_pq_io_fd(&io, f->fd) != 0) {
			snprintf(err, errlen, "cannot stat '%s': %s", path,
			    strerror(errno));
			return -1;
		}
		return add_row_groups(l, &io, file, err, errlen);
	}
	n = lf_pread(f, m, sizeof(m), 0);
	if (n < 0) {
		if (f->r != NULL)
			snprintf(err, errlen, "%s", ovl_remote_err(f->r));
		else
			snprintf(err, errlen, "cannot read '%s': %s", path,
			    strerror(errno));
		return -1;
	}
	comp = comp_of(m, (size_t)n);
	if (comp != OVL_COMP_NONE || cut == OVL_CUT_NONE || chunk_size == 0 ||
	    size <= chunk_size)
		return add_chunk(l, file, comp, 0, OVL_CHUNK_WHOLE, err, errlen);
	blk = ovl_xmalloc(CUT_BLOCK);
	pos = 0;
	while (pos < size) {
		int64_t next = find_cut(f, pos + chunk_size, size, cut, blk);

		if (next < 0) {
			if (f->r != NULL)
				snprintf(err, errlen, "%s", ovl_remote_err(f->r));
			else
				snprintf(err, errlen, "cannot read '%s': %s",
				    path, strerror(errno));
			free(blk);
			return -1;
		}
		if (add_chunk(l, file, comp, pos, (uint64_t)next - pos, err,
		    errlen) != 0) {
			free(blk);
			return -1;
		}
		pos = (uint64_t)next;
	}
	free(blk);
	return 0;
}

/* A remote file: its size from a HEAD, its boundaries by ranged reads. */
static int
add_remote(struct listing *l, const char *path, uint64_t chunk_size,
    enum ovl_chunk_cut cut, char *err, size_t errlen)
{
	struct lfile f = { -1, NULL };
	int rc;

	if ((f.r = ovl_remote_open(path, err, errlen)) == NULL)
		return -1;
	add_file(l, path, NULL, f.r);
	rc = cut_file(l, &f, path, ovl_remote_size(f.r), chunk_size, cut, err,
	    errlen);
	ovl_remote_close(f.r);
	return rc;
}

static int
add_path(struct listing *l, const char *path, uint64_t chunk_size,
    enum ovl_chunk_cut cut, char *err, size_t errlen)
{
	struct stat st;
	struct lfile f = { -1, NULL };
	int rc;

	if (ovl_remote_is(path))
		return add_remote(l, path, chunk_size, cut, err, errlen);
	if (is_stream(path, &st)) {
		/*
		 * Never opened here: a FIFO opened and closed again loses what
		 * its writer wrote, and the next open may wait forever.
		 */
		if (cut == OVL_CUT_ROWGROUPS) {
			snprintf(err, errlen, "'%s' is a stream: a parquet file is "
			    "read from its end (its footer) and must be a regular "
			    "file", path);
			return -1;
		}
		if (strcmp(path, "-") != 0 && access(path, R_OK) != 0) {
			snprintf(err, errlen, "cannot open '%s': %s", path,
			    strerror(errno));
			return -1;
		}
		add_file(l, path, NULL, NULL);
		return add_chunk(l, l->cs->nfiles - 1, OVL_COMP_STREAM, 0,
		    OVL_CHUNK_WHOLE, err, errlen);
	}
	if ((f.fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "cannot open '%s': %s", path,
		    strerror(errno));
		return -1;
	}
	if (fstat(f.fd, &st) == -1) {
		snprintf(err, errlen, "cannot stat '%s': %s", path,
		    strerror(errno));
		close(f.fd);
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "'%s' is a directory", path);
		close(f.fd);
		return -1;
	}
	add_file(l, path, &st, NULL);
	rc = cut_file(l, &f, path, (uint64_t)st.st_size, chunk_size, cut, err,
	    errlen);
	close(f.fd);
	return rc;
}

int
ovl_chunks_expand_remote(const char *pattern, char ***out, size_t *n,
    char *err, size_t errlen)
{
	char shown[512];

	if (!has_glob(pattern)) {
		*out = ovl_xmalloc(sizeof(**out));
		(*out)[0] = ovl_xstrdup(pattern);
		*n = 1;
		return 0;
	}
	if (ovl_remote_glob(pattern, out, n, err, errlen) != 0)
		return -1;
	if (*n == 0) {
		free(*out);
		*out = NULL;
		snprintf(err, errlen, "no file matches '%s'",
		    ovl_remote_shown(pattern, shown, sizeof(shown)));
		return -1;
	}
	return 0;
}

/* An s3:// pattern: the bucket's keys that match it, sorted. */
static int
add_remote_glob(struct listing *l, const char *pattern, uint64_t chunk_size,
    enum ovl_chunk_cut cut, char *err, size_t errlen)
{
	char **v;
	size_t n, j;
	int rc = 0;

	if (ovl_chunks_expand_remote(pattern, &v, &n, err, errlen) != 0)
		return -1;
	for (j = 0; j < n; j++) {
		if (rc == 0)
			rc = add_remote(l, v[j], chunk_size, cut, err, errlen);
		free(v[j]);
	}
	free(v);
	return rc;
}

int
ovl_chunks_list(struct ovl_chunks *cs, char *const *patterns,
    size_t npatterns, uint64_t chunk_size, enum ovl_chunk_cut cut,
    char *err, size_t errlen)
{
	struct listing l = { cs, 0, 0 };
	size_t i, j;
	int rc = 0;

	memset(cs, 0, sizeof(*cs));
	for (i = 0; i < npatterns && rc == 0; i++) {
		glob_t g;
		int grc;

		if (!has_glob(patterns[i])) {
			rc = add_path(&l, patterns[i], chunk_size, cut, err,
			    errlen);
			continue;
		}
		if (ovl_remote_is(patterns[i])) {
			rc = add_remote_glob(&l, patterns[i], chunk_size, cut,
			    err, errlen);
			continue;
		}
		memset(&g, 0, sizeof(g));
		grc = glob(patterns[i], GLOB_ERR, NULL, &g);
		if (grc == GLOB_NOMATCH) {
			snprintf(err, errlen, "no file matches '%s'",
			    patterns[i]);
			rc = -1;
		} else if (grc != 0) {
			snprintf(err, errlen, "cannot expand '%s': %s",
			    patterns[i], grc == GLOB_NOSPACE ? "out of memory" :
			    "read error");
			rc = -1;
		}
		for (j = 0; rc == 0 && j < g.gl_pathc; j++)
			rc = add_path(&l, g.gl_pathv[j], chunk_size, cut, err,
			    errlen);
		globfree(&g);
	}
	if (rc == 0 && cs->n == 0) {
		snprintf(err, errlen, "no input files");
		rc = -1;
	}
	if (rc != 0)
		ovl_chunks_free(cs);
	return rc;
}

void
ovl_chunks_free(struct ovl_chunks *cs)
{
	uint32_t i;

	for (i = 0; i < cs->nfiles; i++) {
		free(cs->files[i]);
		free(cs->ids[i].ver);
	}
	free(cs->files);
	free(cs->ids);
	free(cs->v);
	memset(cs, 0, sizeof(*cs));
}

const char *
ovl_chunks_path(const struct ovl_chunks *cs, uint32_t i)
{
	return cs->files[cs->v[i].file];
}

const struct ovl_chunk_file *
ovl_chunks_file(const struct ovl_chunks *cs, uint32_t i)
{
	return &cs->ids[cs->v[i].file];
}

void
ovl_chunks_perm(uint32_t n, int shuffle, uint64_t seed, uint32_t epoch,
    uint32_t *perm)
{
	struct ovl_rng r;
	uint32_t i;

	for (i = 0; i < n; i++)
		perm[i] = i;
	if (!shuffle || n < 2)
		return;
	ovl_rng_seed2(&r, seed, epoch);
	ovl_rng_shuffle_u32(&r, perm, n);
}

uint32_t
ovl_chunks_next_owned(uint32_t k, uint32_t nchunks, uint32_t p, uint32_t n)
{
	uint64_t kk = k;

	if (k >= nchunks || n == 0)
		return nchunks;
	kk += ((uint64_t)p + n - kk % n) % n;
	return kk < nchunks ? (uint32_t)kk : nchunks;
}
