#include "ckptlog.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "frame.h"
#include "io.h"

#define REC_MAGIC	0x524c564fu	/* "OVLR" little-endian */

const char *const ovl_sec_name[OVL_NSEC] = {
	"ckpt", "out", "mix", "construct"
};

/* ---- sections ---- */

void
ovl_kvsec_clear(struct ovl_kvsec *s)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		free(s->kv[i].key);
		free(s->kv[i].val);
	}
	free(s->kv);
	memset(s, 0, sizeof(*s));
}

void
ovl_ckstate_clear(struct ovl_ckstate *st)
{
	int i;

	for (i = 0; i < OVL_NSEC; i++)
		ovl_kvsec_clear(&st->sec[i]);
}

static void
push(struct ovl_kvsec *s, const char *key, size_t klen, const char *val,
    size_t vlen)
{
	struct ovl_kv *kv;

	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->kv = ovl_xrealloc(s->kv, s->cap * sizeof(*s->kv));
	}
	kv = &s->kv[s->n++];
	kv->key = ovl_xmalloc(klen + 1);
	memcpy(kv->key, key, klen);
	kv->key[klen] = '\0';
	kv->val = NULL;
	if (val != NULL) {
		kv->val = ovl_xmalloc(vlen + 1);
		memcpy(kv->val, val, vlen);
		kv->val[vlen] = '\0';
	}
}

void
ovl_ckstate_copy(struct ovl_ckstate *dst, const struct ovl_ckstate *src)
{
	const struct ovl_kv *kv;
	size_t j;
	int i;

	ovl_ckstate_clear(dst);
	for (i = 0; i < OVL_NSEC; i++)
		for (j = 0; j < src->sec[i].n; j++) {
			kv = &src->sec[i].kv[j];
			push(&dst->sec[i], kv->key, strlen(kv->key), kv->val,
			    kv->val != NULL ? strlen(kv->val) : 0);
		}
}

/* Split one line into key and value; -1 when the key is unusable. */
static int
split(const char *line, size_t len, size_t *klen, const char **val,
    size_t *vlen)
{
	const char *sp;

	if (len == 0 || line[0] == '=' || line[0] == '~' || line[0] == ' ' ||
	    memchr(line, '\0', len) != NULL)
		return -1;
	sp = memchr(line, ' ', len);
	if (sp == NULL) {
		*klen = len;
		*val = NULL;
		*vlen = 0;
	} else {
		*klen = (size_t)(sp - line);
		*val = sp + 1;
		*vlen = len - *klen - 1;
	}
	return 0;
}

int
ovl_kvsec_parse(struct ovl_kvsec *s, const char *text, size_t len)
{
	const char *p = text, *end, *nl, *val;
	size_t klen, vlen;

	ovl_kvsec_clear(s);
	if (len == 0)	/* text may then be NULL (an empty ovl_buf) */
		return 0;
	end = text + len;
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		if (split(p, (size_t)(nl - p), &klen, &val, &vlen) != 0) {
			ovl_kvsec_clear(s);
			return -1;
		}
		push(s, p, klen, val, vlen);
		p = nl + 1;
	}
	return 0;
}

long
ovl_kvsec_find(const struct ovl_kvsec *s, const char *key)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->kv[i].key, key) == 0)
			return (long)i;
	return -1;
}

const char *
ovl_kvsec_get(const struct ovl_kvsec *s, const char *key)
{
	long i = ovl_kvsec_find(s, key);

	return i < 0 ? NULL : s->kv[i].val;
}

void
ovl_kvsec_set(struct ovl_kvsec *s, const char *key, const char *val)
{
	long i = ovl_kvsec_find(s, key);

	if (i < 0) {
		push(s, key, strlen(key), val, val != NULL ? strlen(val) : 0);
		return;
	}
	free(s->kv[i].val);
	s->kv[i].val = val != NULL ? ovl_xstrdup(val) : NULL;
}

static void
line_out(struct ovl_buf *out, const struct ovl_kv *kv)
{
	ovl_buf_append(out, kv->key, strlen(kv->key));
	if (kv->val != NULL) {
		ovl_buf_append(out, " ", 1);
		ovl_buf_append(out, kv->val, strlen(kv->val));
	}
	ovl_buf_append(out, "\n", 1);
}

void
ovl_kvsec_text(const struct ovl_kvsec *s, struct ovl_buf *out)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		line_out(out, &s->kv[i]);
}

/* ---- records ---- */

static int
same_keys(const struct ovl_kvsec *a, const struct ovl_kvsec *b)
{
	size_t i;

	if (a->n != b->n)
		return 0;
	for (i = 0; i < a->n; i++)
		if (strcmp(a->kv[i].key, b->kv[i].key) != 0)
			return 0;
	return 1;
}

static int
same_val(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

void
ovl_ckptlog_header(uint8_t out[OVL_CKPTLOG_HDR_LEN])
{
	memcpy(out, OVL_CKPTLOG_MAGIC, 8);
	ovl_put32(out + 8, OVL_CKPTLOG_VERSION);
	ovl_put32(out + 12, ovl_crc32c(0, out, 12));
}

void
ovl_ckrec_encode(struct ovl_buf *out, uint64_t n, unsigned flags,
    const struct ovl_ckstate *prev, const struct ovl_ckstate *cur)
{
	size_t start = out->len, j, plen;
	const struct ovl_kvsec *c, *p;
	uint8_t *h;
	int i, hdr;

	ovl_buf_reserve(out, OVL_CKPTREC_HDR_LEN);
	memset(out->p + out->len, 0, OVL_CKPTREC_HDR_LEN);
	out->len += OVL_CKPTREC_HDR_LEN;
	for (i = 0; i < OVL_NSEC; i++) {
		c = &cur->sec[i];
		p = prev != NULL ? &prev->sec[i] : NULL;
		if (p == NULL || !same_keys(p, c)) {
			ovl_buf_append(out, "=", 1);
			ovl_buf_append(out, ovl_sec_name[i],
			    strlen(ovl_sec_name[i]));
			ovl_buf_append(out, "\n", 1);
			ovl_kvsec_text(c, out);
			continue;
		}
		hdr = 0;
		for (j = 0; j < c->n; j++) {
			if (same_val(p->kv[j].val, c->kv[j].val))
				continue;
			if (!hdr) {
				ovl_buf_append(out, "~", 1);
				ovl_buf_append(out, ovl_sec_name[i],
				    strlen(ovl_sec_name[i]));
				ovl_buf_append(out, "\n", 1);
				hdr = 1;
			}
			line_out(out, &c->kv[j]);
		}
	}
	plen = out->len - start - OVL_CKPTREC_HDR_LEN;
	h = out->p + start;
	ovl_put32(h, REC_MAGIC);
	ovl_put32(h + 4, (uint32_t)plen);
	h[8] = OVL_CKPTLOG_VERSION;
	h[9] = 0;
	h[10] = prev == NULL ? OVL_CKPTREC_BASE : OVL_CKPTREC_DIFF;
	h[11] = (uint8_t)flags;
	ovl_put32(h + 12, ovl_crc32c(0, h, 12));
	ovl_put64(h + 16, n);
	ovl_put32(h + 24, ovl_crc32c(ovl_crc32c(0, h, 24),
	    h + OVL_CKPTREC_HDR_LEN, plen));
}

/* ---- reading ---- */

void
ovl_ckptlog_free(struct ovl_ckptlog *log)
{
	free(log->data);
	free(log->rec);
	memset(log, 0, sizeof(*log));
}

/* pread until n bytes or the end of the file: the bytes read, or -1. */
static ssize_t
pread_full(int fd, void *buf, size_t n, size_t off)
{
	size_t done = 0;
	ssize_t r;

	while (done < n) {
		r = pread(fd, (uint8_t *)buf + done, n - done,
		    (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	return (ssize_t)done;
}

static int
all_zero(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != 0)
			return 0;
	return 1;
}

/* Open path for reading: 0 (fd -1 when it does not exist), or -1. */
static int
open_log(const char *path, int *fdp, struct stat *st, char *err,
    size_t errlen)
{
	int fd;

	*fdp = -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "cannot open '%s': %s", path,
		    strerror(errno));
		return -1;
	}
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "'%s': not a regular file", path);
		close(fd);
		errno = EINVAL;
		return -1;
	}
	*fdp = fd;
	return 0;
}

/* Read the file from byte log->from to its end into log->data. */
static int
slurp(int fd, const char *path, const struct stat *st, struct ovl_ckptlog *log,
    char *err, size_t errlen)
{
	size_t want = (size_t)st->st_size > log->from ?
	    (size_t)st->st_size - log->from : 0;
	ssize_t got;

	log->data = ovl_xmalloc(want + 1);
	got = pread_full(fd, log->data, want, log->from);
	if (got < 0) {
		snprintf(err, errlen, "read error on '%s': %s", path,
		    strerror(errno));
		return -1;
	}
	log->size = log->from + (size_t)got;
	return 0;
}

/* The 16-byte file header: 0, or -3 with a message. */
static int
check_header(const uint8_t *h, const char *path, char *err, size_t errlen)
{
	if (memcmp(h, OVL_CKPTLOG_MAGIC, 8) != 0 ||
	    ovl_le32(h + 12) != ovl_crc32c(0, h, 12)) {
		snprintf(err, errlen, "'%s': not a checkpoint log (bad header "
		    "at byte offset 0)", path);
		return -3;
	}
	if (ovl_le32(h + 8) != OVL_CKPTLOG_VERSION) {
		snprintf(err, errlen, "'%s': unknown log version %" PRIu32,
		    path, ovl_le32(h + 8));
		return -3;
	}
	return 0;
}

/* Check and list the records from byte off to the end of what was read. */
static int
scan(struct ovl_ckptlog *log, size_t off, const char *path, char *err,
    size_t errlen)
{
	const uint8_t *h;
	size_t cap = 0, end;
	uint32_t len;

	log->valid = off;
	while (off < log->size) {
		h = log->data + (off - log->from);
		if (log->size - off < OVL_CKPTREC_HDR_LEN)
			break;		/* torn inside a header */
		if (ovl_le32(h) != REC_MAGIC ||
		    ovl_le32(h + 12) != ovl_crc32c(0, h, 12)) {
			if (all_zero(h, log->size - off))
				break;	/* zero-filled torn tail */
			snprintf(err, errlen, "'%s': corrupt record header at "
			    "byte offset %zu", path, off);
			log->corrupt = off;
			return -3;
		}
		len = ovl_le32(h + 4);
		if (h[8] != OVL_CKPTLOG_VERSION) {
			snprintf(err, errlen, "'%s': record version %u at byte "
			    "offset %zu is not supported", path, h[8], off);
			log->corrupt = off;
			return -3;
		}
		if (len > OVL_CKPTREC_MAX || (h[10] != OVL_CKPTREC_BASE &&
		    h[10] != OVL_CKPTREC_DIFF)) {
			snprintf(err, errlen, "'%s': corrupt record header at "
			    "byte offset %zu", path, off);
			log->corrupt = off;
			return -3;
		}
		if ((uint64_t)log->size - off - OVL_CKPTREC_HDR_LEN < len)
			break;		/* torn inside the payload */
		end = off + OVL_CKPTREC_HDR_LEN + len;
		if (ovl_le32(h + 24) != ovl_crc32c(ovl_crc32c(0, h, 24),
		    h + OVL_CKPTREC_HDR_LEN, len)) {
			if (end == log->size)
				break;	/* the last record, torn */
			snprintf(err, errlen, "'%s': record %" PRIu64 " at byte "
			    "offset %zu fails its CRC", path, ovl_le64(h + 16),
			    off);
			log->corrupt = off;
			return -3;
		}
		if (log->nrec == cap) {
			cap = cap ? cap * 2 : 64;
			log->rec = ovl_xrealloc(log->rec, cap * sizeof(*log->rec));
		}
		log->rec[log->nrec].n = ovl_le64(h + 16);
		log->rec[log->nrec].offset = off;
		log->rec[log->nrec].len = len;
		log->rec[log->nrec].type = h[10];
		log->rec[log->nrec].flags = h[11];
		log->nrec++;
		off = end;
		log->valid = off;
	}
	return 0;
}

int
ovl_ckptlog_read(const char *path, struct ovl_ckptlog *log, char *err,
    size_t errlen)
{
	return ovl_ckptlog_read_tail(path, NULL, 0, log, err, errlen);
}

/*
 * Whether entry e of an index names a base record of the log open at fd
 * (size bytes): its offset and length there.
 */
static int
confirm(int fd, size_t size, const uint8_t *e, uint64_t *off)
{
	uint8_t h[OVL_CKPTREC_HDR_LEN];
	uint64_t o = ovl_le64(e + 8);
	uint32_t len = ovl_le32(e + 16);

	if (ovl_le32(e + 20) != ovl_crc32c(0, e, 20) ||
	    o < OVL_CKPTLOG_HDR_LEN || o > size ||
	    size - o < (uint64_t)OVL_CKPTREC_HDR_LEN + len ||
	    pread_full(fd, h, sizeof(h), o) != (ssize_t)sizeof(h))
		return 0;
	if (ovl_le32(h) != REC_MAGIC || ovl_le32(h + 12) !=
	    ovl_crc32c(0, h, 12) || h[8] != OVL_CKPTLOG_VERSION ||
	    h[10] != OVL_CKPTREC_BASE || ovl_le32(h + 4) != len ||
	    ovl_le64(h + 16) != ovl_le64(e))
		return 0;
	*off = o;
	return 1;
}

/* Where to start reading the log open at fd: see ovl_ckptlog_read_tail. */
static size_t
tail_start(int fd, size_t size, const char *idxpath, unsigned back)
{
	uint8_t buf[OVL_CKPTIDX_LOOK * OVL_CKPTIDX_ENT_LEN], h[16];
	struct stat st;
	size_t nent, look, i, start = 0;
	uint64_t off;
	unsigned found = 0;
	int xfd;

	if (idxpath == NULL || back == 0 ||
	    (xfd = open(idxpath, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	if (fstat(xfd, &st) != 0 || st.st_size < OVL_CKPTIDX_HDR_LEN ||
	    pread_full(xfd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, OVL_CKPTIDX_MAGIC, 8) != 0 || ovl_le32(h + 8) != 1 ||
	    ovl_le32(h + 12) != ovl_crc32c(0, h, 12)) {
		close(xfd);
		return 0;
	}
	nent = ((size_t)st.st_size - OVL_CKPTIDX_HDR_LEN) / OVL_CKPTIDX_ENT_LEN;
	look = nent < OVL_CKPTIDX_LOOK ? nent : OVL_CKPTIDX_LOOK;
	if (look == 0 || pread_full(xfd, buf, look * OVL_CKPTIDX_ENT_LEN,
	    OVL_CKPTIDX_HDR_LEN + (nent - look) * OVL_CKPTIDX_ENT_LEN) !=
	    (ssize_t)(look * OVL_CKPTIDX_ENT_LEN)) {
		close(xfd);
		return 0;
	}
	close(xfd);
	for (i = look; i > 0 && found < back; i--)
		if (confirm(fd, size, buf + (i - 1) * OVL_CKPTIDX_ENT_LEN,
		    &off) && (start == 0 || off < start)) {
			start = (size_t)off;
			found++;
		}
	return start;
}

int
ovl_ckptlog_read_tail(const char *path, const char *idxpath, unsigned back,
    struct ovl_ckptlog *log, char *err, size_t errlen)
{
	uint8_t hdr[OVL_CKPTLOG_HDR_LEN];
	struct stat st;
	int fd, rc;

	memset(log, 0, sizeof(*log));
	if (open_log(path, &fd, &st, err, errlen) != 0)
		return -1;
	if (fd < 0)
		return 0;
	if (st.st_size < OVL_CKPTLOG_HDR_LEN) {
		/* empty, or a header torn at creation */
		rc = slurp(fd, path, &st, log, err, errlen);
		close(fd);
		return rc;
	}
	if (pread_full(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		snprintf(err, errlen, "read error on '%s': %s", path,
		    strerror(errno));
		close(fd);
		return -1;
	}
	if ((rc = check_header(hdr, path, err, errlen)) != 0) {
		close(fd);
		log->data = ovl_xmalloc(1);
		log->size = (size_t)st.st_size;
		return rc;
	}
	log->from = tail_start(fd, (size_t)st.st_size, idxpath, back);
	rc = slurp(fd, path, &st, log, err, errlen);
	close(fd);
	if (rc != 0)
		return rc;
	if (log->size < OVL_CKPTLOG_HDR_LEN)
		return 0;	/* cut since the fstat */
	return scan(log, log->from > 0 ? log->from : OVL_CKPTLOG_HDR_LEN, path,
	    err, errlen);
}

long
ovl_ckptlog_find(const struct ovl_ckptlog *log, uint64_t n)
{
	size_t i;

	for (i = log->nrec; i > 0; i--)
		if (log->rec[i - 1].n == n)
			return (long)(i - 1);
	return -1;
}

static int
sec_index(const char *name, size_t len)
{
	int i;

	for (i = 0; i < OVL_NSEC; i++)
		if (strlen(ovl_sec_name[i]) == len &&
		    memcmp(ovl_sec_name[i], name, len) == 0)
			return i;
	return -1;
}

/* Apply one record's payload to st. */
static int
apply(const struct ovl_ckptlog *log, size_t r, struct ovl_ckstate *st,
    char *err, size_t errlen)
{
	const struct ovl_ckrec *rec = &log->rec[r];
	const char *p = (const char *)log->data + (rec->offset - log->from) +
	    OVL_CKPTREC_HDR_LEN;
	const char *end = p + rec->len, *nl, *val;
	struct ovl_kvsec *s = NULL;
	size_t klen, vlen, pos = 0, k, tries;
	int mode = 0, si;
	char key[4096];

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		if (*p == '=' || *p == '~') {
			si = sec_index(p + 1, (size_t)(nl - p - 1));
			mode = *p;
			s = si >= 0 ? &st->sec[si] : NULL;
			if (s != NULL && mode == '=')
				ovl_kvsec_clear(s);
			pos = 0;
		} else if (mode == 0 || split(p, (size_t)(nl - p), &klen, &val,
		    &vlen) != 0) {
			goto bad;
		} else if (s == NULL) {
			;	/* a section this version does not know */
		} else if (mode == '=') {
			push(s, p, klen, val, vlen);
		} else {
			if (klen >= sizeof(key))
				goto bad;
			memcpy(key, p, klen);
			key[klen] = '\0';
			/* changed keys come in section order: search onward */
			for (tries = 0, k = pos; tries < s->n; tries++,
			    k = (k + 1) % s->n)
				if (strcmp(s->kv[k].key, key) == 0)
					break;
			if (tries == s->n)
				goto bad;
			free(s->kv[k].val);
			s->kv[k].val = NULL;
			if (val != NULL) {
				s->kv[k].val = ovl_xmalloc(vlen + 1);
				memcpy(s->kv[k].val, val, vlen);
				s->kv[k].val[vlen] = '\0';
			}
			pos = k;
		}
		p = nl + 1;
	}
	return 0;
bad:
	snprintf(err, errlen, "malformed record %" PRIu64 " at byte offset %"
	    PRIu64 " (payload byte %zu)", rec->n, rec->offset,
	    (size_t)(p - ((const char *)log->data + (rec->offset - log->from) +
	    OVL_CKPTREC_HDR_LEN)));
	return -1;
}

int
ovl_ckptlog_state(const struct ovl_ckptlog *log, size_t i,
    struct ovl_ckstate *st, char *err, size_t errlen)
{
	size_t b = i + 1, r;

	ovl_ckstate_clear(st);
	while (b > 0 && log->rec[b - 1].type != OVL_CKPTREC_BASE)
		b--;
	if (b == 0) {
		snprintf(err, errlen, "record %" PRIu64 " at byte offset %"
		    PRIu64 " has no base record before it", log->rec[i].n,
		    log->rec[i].offset);
		return -1;
	}
	for (r = b - 1; r <= i; r++)
		if (apply(log, r, st, err, errlen) != 0) {
			ovl_ckstate_clear(st);
			return -1;
		}
	return 0;
}

int
ovl_ckptlog_append(int fd, uint64_t at, const void *rec, size_t len)
{
	const uint8_t *p = rec;
	size_t done = 0;
	ssize_t w;
	int saved;

	while (done < len) {
		w = pwrite(fd, p + done, len - done, (off_t)(at + done));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		done += (size_t)w;
	}
	if (fsync(fd) != 0)
		goto fail;
	return 0;
fail:
	saved = errno;
	if (ftruncate(fd, (off_t)at) == 0)
		(void)fsync(fd);
	errno = saved;
	return -1;
}

/* ---- the index ---- */

int
ovl_ckptidx_open(struct ovl_ckptidx *x, const char *path)
{
	uint8_t h[OVL_CKPTIDX_HDR_LEN];
	struct stat st;
	size_t ent;

	x->end = 0;
	x->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (x->fd < 0 || fstat(x->fd, &st) != 0)
		goto fail;
	if (st.st_size < OVL_CKPTIDX_HDR_LEN ||
	    pread_full(x->fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h, OVL_CKPTIDX_MAGIC, 8) != 0 || ovl_le32(h + 8) != 1 ||
	    ovl_le32(h + 12) != ovl_crc32c(0, h, 12)) {
		memcpy(h, OVL_CKPTIDX_MAGIC, 8);
		ovl_put32(h + 8, 1);
		ovl_put32(h + 12, ovl_crc32c(0, h, 12));
		if (ftruncate(x->fd, 0) != 0 ||
		    pwrite(x->fd, h, sizeof(h), 0) != (ssize_t)sizeof(h))
			goto fail;
		x->end = OVL_CKPTIDX_HDR_LEN;
		return 0;
	}
	ent = ((size_t)st.st_size - OVL_CKPTIDX_HDR_LEN) / OVL_CKPTIDX_ENT_LEN;
	x->end = OVL_CKPTIDX_HDR_LEN + ent * OVL_CKPTIDX_ENT_LEN;
	if ((uint64_t)st.st_size != x->end &&
	    ftruncate(x->fd, (off_t)x->end) != 0)
		goto fail;
	return 0;
fail:
	if (x->fd >= 0) {
		int saved = errno;

		close(x->fd);
		errno = saved;
	}
	x->fd = -1;
	return -1;
}

void
ovl_ckptidx_note(struct ovl_ckptidx *x, const void *recs, size_t len,
    uint64_t at)
{
	const uint8_t *p = recs;
	uint8_t e[OVL_CKPTIDX_ENT_LEN];
	size_t off = 0, rl;

	while (x->fd >= 0 && off + OVL_CKPTREC_HDR_LEN <= len) {
		rl = OVL_CKPTREC_HDR_LEN + (size_t)ovl_le32(p + off + 4);
		if (rl > len - off)
			break;
		if (p[off + 10] == OVL_CKPTREC_BASE) {
			ovl_put64(e, ovl_le64(p + off + 16));
			ovl_put64(e + 8, at + off);
			ovl_put32(e + 16, ovl_le32(p + off + 4));
			ovl_put32(e + 20, ovl_crc32c(0, e, 20));
			if (pwrite(x->fd, e, sizeof(e), (off_t)x->end) !=
			    (ssize_t)sizeof(e)) {
				ovl_ckptidx_close(x);
				return;
			}
			x->end += sizeof(e);
		}
		off += rl;
	}
}

void
ovl_ckptidx_close(struct ovl_ckptidx *x)
{
	if (x->fd >= 0)
		close(x->fd);
	x->fd = -1;
}

int
ovl_ckptidx_cut(const char *path, uint64_t end)
{
	uint8_t e[OVL_CKPTIDX_ENT_LEN];
	struct stat st;
	size_t nent, keep;
	int fd, rc = 0;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -1;
	}
	if (st.st_size < OVL_CKPTIDX_HDR_LEN) {
		close(fd);
		return 0;	/* no header: the next writer starts it anew */
	}
	nent = ((size_t)st.st_size - OVL_CKPTIDX_HDR_LEN) / OVL_CKPTIDX_ENT_LEN;
	/* entries are in log order: drop those from the end */
	for (keep = nent; keep > 0; keep--)
		if (pread_full(fd, e, sizeof(e), OVL_CKPTIDX_HDR_LEN + (keep - 1) *
		    OVL_CKPTIDX_ENT_LEN) == (ssize_t)sizeof(e) &&
		    ovl_le64(e + 8) < end)
			break;
	if (keep < nent || (uint64_t)st.st_size != OVL_CKPTIDX_HDR_LEN +
	    nent * OVL_CKPTIDX_ENT_LEN)
		rc = ftruncate(fd, (off_t)(OVL_CKPTIDX_HDR_LEN + keep *
		    OVL_CKPTIDX_ENT_LEN));
	close(fd);
	return rc;
}
