/*
 * ovl-ckpt: the inputs a run began with. Every source's META names what
 * each of its files was when listed (source.NAME.file.I SIZE VERSION
 * PATH, lib/chunk.h: size, mtime and inode, or a remote object's ETag or
 * Last-Modified); the first run keeps those lines in DIR/inputs, and a
 * resumed run whose META says otherwise for a file stops, naming it
 * (exit 1): a resume never continues a file from another version's byte
 * offset. A tokenizer file is kept the same way, by its content hash
 * (source.NAME.tokenizer-file SIZE xxh64.HASH PATH, lib/tok.h): a resume
 * never tokenizes with another version of it. The sources' held-out
 * split lines (source.NAME.split KEEP WEIGHTS SEED) are kept too, and a
 * resume whose split lines differ in any way (another split, weights or
 * seed, a split added or removed) stops with exit 2, as ovl-mix does for
 * its state: the plan changed, and a resume would read other documents.
 * A directory without the file (written by an older ovl-ckpt) gets it
 * from the run that resumes.
 */
#include "ckpt.h"

#define TOKFILE_KEY	".tokenizer-file"
#define TOKFILE_LEN	(sizeof(TOKFILE_KEY) - 1)

/* Is a key of klen bytes a tokenizer file's (source.NAME.tokenizer-file)? */
static int
tokfile_key(const char *p, size_t klen)
{
	return klen > TOKFILE_LEN && memcmp(p + klen - TOKFILE_LEN,
	    TOKFILE_KEY, TOKFILE_LEN) == 0;
}

/* Is [p, p + n) a split line (source.NAME.split)? */
static int
is_split(const char *p, size_t n)
{
	const char *sp = memchr(p, ' ', n);

	return sp != NULL && sp - p > 13 && memcmp(p, "source.", 7) == 0 &&
	    memcmp(sp - 6, ".split", 6) == 0 && memchr(p + 7, '.',
	    (size_t)(sp - 6 - p - 7)) == NULL;
}

/*
 * Is [p, p + n) an identity line (an input file's, a tokenizer file's
 * "SIZE xxh64.HASH PATH", or a split line)? Then the length of its key.
 */
static size_t
ident_key(const char *p, size_t n)
{
	const char *sp = memchr(p, ' ', n), *f;

	if (sp == NULL || n < 7 || memcmp(p, "source.", 7) != 0)
		return 0;
	if (is_split(p, n) || tokfile_key(p, (size_t)(sp - p)))
		return (size_t)(sp - p);
	f = memmem(p, (size_t)(sp - p), ".file.", 6);
	return f != NULL ? (size_t)(sp - p) : 0;
}

/* The line of text with key k (klen bytes), or NULL; its length in *n. */
static const char *
find_key(const char *text, size_t len, const char *k, size_t klen,
    size_t *n)
{
	const char *p = text, *end = text + len, *nl;

	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		if ((size_t)(nl - p) > klen && p[klen] == ' ' &&
		    memcmp(p, k, klen) == 0) {
			*n = (size_t)(nl - p);
			return p;
		}
	}
	return NULL;
}

/* The split lines of text: their count; the first's line in *first. */
static size_t
split_lines(const char *text, size_t len, const char **first, size_t *n)
{
	const char *p = text, *end = text + len, *nl;
	size_t c = 0;

	*first = "none";
	*n = 4;
	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		if (is_split(p, (size_t)(nl - p)) && c++ == 0) {
			*first = p;
			*n = (size_t)(nl - p);
		}
	}
	return c;
}

/*
 * Refuse a resume whose sources read other splits than the run began
 * with: every split line kept, the same now, and as many of them.
 */
static void
compare_splits(const char *path, const char *was, size_t wlen,
    const char *text, size_t len)
{
	const char *p = was, *end = was + wlen, *nl, *now, *a, *b;
	size_t k, n, an, bn;
	int same = split_lines(was, wlen, &a, &an) ==
	    split_lines(text, len, &b, &bn);

	for (; same && p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		if (!is_split(p, (size_t)(nl - p)))
			continue;
		k = ident_key(p, (size_t)(nl - p));
		now = find_key(text, len, p, k, &n);
		if (now == NULL || n != (size_t)(nl - p) || memcmp(p, now, n)) {
			a = p;
			an = (size_t)(nl - p);
			b = now != NULL ? now : "none";
			bn = now != NULL ? n : 4;
			same = 0;
		}
	}
	if (!same)
		ovl_errx(OVL_EXIT_USAGE, "the held-out split changed since the "
		    "run began (%.*s, now %.*s; '%s'): a resume would read "
		    "other documents", (int)an, a, (int)bn, b, path);
}

/* Refuse a resume over an input that changed since the run began. */
static void
compare(const char *path, const char *was, size_t wlen, const char *text,
    size_t len)
{
	const char *p = was, *end = was + wlen, *nl, *now;
	size_t k, n;
	int tok;

	for (; p < end; p = nl + 1) {
		const char *v, *nv, *file;

		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		if ((k = ident_key(p, (size_t)(nl - p))) == 0 ||
		    is_split(p, (size_t)(nl - p)) ||
		    (now = find_key(text, len, p, k, &n)) == NULL)
			continue;	/* another file list: not ours to judge */
		if ((size_t)(nl - p) == n && memcmp(p, now, n) == 0)
			continue;
		/* "SIZE VERSION PATH": the path after the second blank */
		v = p + k + 1;
		file = memchr(v, ' ', (size_t)(nl - v));
		file = file != NULL ? memchr(file + 1, ' ', (size_t)(nl - file -
		    1)) : NULL;
		nv = now + k + 1;
		tok = tokfile_key(p, k);
		ovl_errx(OVL_EXIT_DATA, "%s '%.*s' changed since the run began "
		    "(size and %s %.*s, now %.*s; '%s'): a resume would %s",
		    tok ? "tokenizer file" : "input", file != NULL ?
		    (int)(nl - file - 1) : 0, file != NULL ? file + 1 : "",
		    tok ? "content hash" : "version",
		    (int)(file != NULL ? file - v : nl - v), v,
		    (int)(file != NULL ? (size_t)(file - v) : n - k - 1), nv,
		    path, tok ? "mix two tokenizations" : "join two versions "
		    "of it");
	}
}

void
inputs_bind(struct ckpt_run *R, const char *text, uint32_t len)
{
	char *path = xasprintf("%s/inputs", R->dir);
	const char *p = text, *end = text + len, *nl;
	struct ovl_buf b = { 0 };

	for (; p < end; p = nl + 1) {
		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
			nl = end;
		if (ident_key(p, (size_t)(nl - p)) != 0) {
			ovl_buf_append(&b, p, (size_t)(nl - p));
			ovl_buf_append(&b, "\n", 1);
		}
	}
	if (R->o->resume_set) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd != -1) {
			struct ovl_buf was = { 0 };
			unsigned char blk[65536];
			ssize_t r;

			while ((r = ovl_io_read_full(fd, blk, sizeof(blk))) > 0)
				ovl_buf_append(&was, blk, (size_t)r);
			if (r < 0)
				ovl_err(OVL_EXIT_DATA, "cannot read '%s'", path);
			close(fd);
			compare(path, was.len > 0 ? (const char *)was.p : "",
			    was.len, b.len > 0 ? (const char *)b.p : "", b.len);
			compare_splits(path, was.len > 0 ? (const char *)was.p :
			    "", was.len, b.len > 0 ? (const char *)b.p : "",
			    b.len);
			ovl_buf_free(&was);
			goto out;
		}
		if (errno != ENOENT)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", path);
	}
	if (ovl_atomic_write(path, b.p, b.len) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot write '%s'", path);
out:
	ovl_buf_free(&b);
	free(path);
}
