/*
 * input: one chunk's bytes, decompressed (see input.h).
 */
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive_entry.h>

#include "buf.h"
#include "dl.h"
#include "err.h"

const char *
ovl_input_arc_err(struct archive *a)
{
	const char *m = ovl_arc.error_string(a);

	return m != NULL ? m : "unknown archive error";
}

struct ovl_arc ovl_arc;
#define SYM(f)	{ "archive_" #f, &ovl_arc.f }
static const struct ovl_dl_sym arc_syms[] = {
	SYM(entry_filetype), SYM(entry_pathname), SYM(entry_size),
	SYM(entry_size_is_set), SYM(error_string), SYM(filter_bytes),
	SYM(filter_name), SYM(read_data), SYM(read_free), SYM(read_new),
	SYM(read_next_header), SYM(read_open),
	SYM(read_support_filter_all), SYM(read_support_format_empty),
	SYM(read_support_format_raw), SYM(read_support_format_tar),
	SYM(set_error), { NULL, NULL }
};
#undef SYM
static struct ovl_dl arc_lib = { OVL_SONAME_ARCHIVE,
    "tar and WebDataset shards, bzip2 and xz files", "libarchive13",
    arc_syms, 0, "" };

int
ovl_arc_load(void)
{
	if (ovl_dl_load(&arc_lib) == 0)
		return 0;
	fprintf(stderr, "%s\n", arc_lib.err);
	return -1;
}

/* A new libarchive reader: 0, or -1 with in->err (no libarchive). */
static int
arc_new(struct ovl_input *in)
{
	if (ovl_dl_load(&arc_lib) != 0) {
		snprintf(in->err, sizeof(in->err), "%s", arc_lib.err);
		return -1;
	}
	if ((in->a = ovl_arc.read_new()) == NULL) {
		snprintf(in->err, sizeof(in->err), "libarchive: no memory");
		return -1;
	}
	return 0;
}

static ssize_t in_read_direct(struct ovl_input *in, unsigned char *buf,
    size_t n);

/*
 * What libarchive could not open, said plainly: a tar whose first header
 * is not one (at byte offset 0 of the decoded stream), or compressed data
 * it cannot decode. A decoding error of our own decoder stays as it is.
 */
static void
arc_open_err(struct ovl_input *in, int want_archive)
{
	if (in->err[0] != '\0')
		return;
	if (want_archive)
		snprintf(in->err, sizeof(in->err), "not a tar archive, or a "
		    "damaged tar header at byte offset 0 (%s)", ovl_input_arc_err(in->a));
	else
		snprintf(in->err, sizeof(in->err), "corrupt or truncated "
		    "compressed data (%s)", ovl_input_arc_err(in->a));
}

/*
 * A local file read at in->rpos: still the file listed? 0, or -1 with
 * in->err and errno EIO.
 */
static int
in_same(struct ovl_input *in)
{
	struct stat st;
	char why[256];

	if (in->id == NULL || in->stream || in->remote != NULL)
		return 0;
	if (fstat(in->fd, &st) == -1) {
		snprintf(in->err, sizeof(in->err), "cannot stat: %s",
		    strerror(errno));
		return -1;
	}
	if (ovl_chunks_file_same(in->id, &st, why, sizeof(why)) == 0)
		return 0;
	snprintf(in->err, sizeof(in->err), "the file %s under the run (at "
	    "byte offset %" PRIu64 ")", why, in->rpos);
	in->changed = 1;
	errno = EIO;
	return -1;
}

/* Bytes of the file itself: the sniffed bytes first, then the fd. */
static ssize_t
in_raw(struct ovl_input *in, unsigned char *buf, size_t n)
{
	ssize_t r;

	if (in->pbpos < in->pblen) {
		size_t k = in->pblen - in->pbpos < n ? in->pblen - in->pbpos : n;

		memcpy(buf, in->pb + in->pbpos, k);
		in->pbpos += k;
		return (ssize_t)k;
	}
	if (in->remote != NULL)
		return ovl_remote_read(in->remote, buf, n);
	while ((r = read(in->fd, buf, n)) == -1 && errno == EINTR)
		;
	if (r >= 0 && in_same(in) != 0)
		return -1;
	if (r == 0 && in->id != NULL && in->id->known && !in->stream &&
	    in->rpos < in->id->size) {
		snprintf(in->err, sizeof(in->err), "the file shrank under the "
		    "run: end of file at byte offset %" PRIu64 " of the %" PRIu64
		    " listed", in->rpos, in->id->size);
		in->changed = 1;
		errno = EIO;
		return -1;
	}
	if (r > 0)
		in->rpos += (uint64_t)r;
	return r;
}

/*
 * A remote file's message without the URL it begins with: the caller
 * names the file ("cannot open 'URL': why" becomes "cannot open: why").
 */
static void
remote_msg(char *dst, size_t n, const char *msg, const char *name)
{
	size_t l = strlen(name);

	if (strncmp(msg, "cannot open '", 13) == 0 &&
	    strncmp(msg + 13, name, l) == 0 && strncmp(msg + 13 + l, "': ", 3) == 0)
		snprintf(dst, n, "cannot open: %s", msg + 16 + l);
	else if (msg[0] == '\'' && strncmp(msg + 1, name, l) == 0 &&
	    strncmp(msg + 1 + l, "': ", 3) == 0)
		snprintf(dst, n, "%s", msg + 4 + l);
	else
		snprintf(dst, n, "%s", msg);
}

/* "read error: ..." after in_raw failed; the byte offset for a remote. */
static void
raw_err(struct ovl_input *in)
{
	if (in->remote != NULL)
		remote_msg(in->err, sizeof(in->err), ovl_remote_err(in->remote),
		    ovl_remote_name(in->remote));
	else if (!in->changed)
		snprintf(in->err, sizeof(in->err), "read error: %s",
		    strerror(errno));
}

/* in_raw until n bytes or the end: count, or -1 with errno. */
static ssize_t
in_raw_full(struct ovl_input *in, unsigned char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = in_raw(in, buf + got, n - got);

		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* libarchive reads a stream (stdin, a FIFO) through in_raw. */
static la_ssize_t
arc_raw_cb(struct archive *a, void *arg, const void **buf)
{
	struct ovl_input *in = arg;
	ssize_t r = in_raw(in, in->abuf, OVL_INPUT_BLOCK);

	if (r < 0) {
		raw_err(in);
		ovl_arc.set_error(a, EIO, "%s", in->err);
		return -1;
	}
	*buf = in->abuf;
	return (la_ssize_t)r;
}

/* libarchive reads a tar from our own (checked) zstd or gzip decoder. */
static la_ssize_t
arc_read_cb(struct archive *a, void *arg, const void **buf)
{
	struct ovl_input *in = arg;
	ssize_t r = in_read_direct(in, in->abuf, OVL_INPUT_BLOCK);

	if (r < 0) {
		ovl_arc.set_error(a, EIO, "%s", in->err);
		return -1;
	}
	*buf = in->abuf;
	return (la_ssize_t)r;
}

int
ovl_input_open(struct ovl_input_ctx *x, struct ovl_input *in,
    const struct ovl_chunk *c, const char *path, int want_archive,
    const struct ovl_chunk_file *id)
{
	int comp = (int)c->comp;

	memset(in, 0, sizeof(*in));
	in->x = x;
	in->fd = -1;
	in->id = id;
	if (comp != OVL_COMP_STREAM && ovl_remote_is(path)) {
		char msg[1024], name[512];

		in->remote = ovl_remote_open(path, msg, sizeof(msg));
		if (in->remote == NULL) {
			in->unopened = errno == ENOENT || errno == EACCES;
			remote_msg(in->err, sizeof(in->err), msg,
			    ovl_remote_shown(path, name, sizeof(name)));
			return -1;
		}
		if (ovl_chunks_file_same_remote(id, in->remote, msg,
		    sizeof(msg)) != 0) {
			snprintf(in->err, sizeof(in->err), "the object %.440s "
			    "since it was listed", msg);
			in->changed = 1;
			return -1;
		}
	} else if (comp == OVL_COMP_STREAM) {
		ssize_t n;

		in->stream = 1;
		in->fd = strcmp(path, "-") == 0 ? dup(STDIN_FILENO) :
		    open(path, O_RDONLY | O_CLOEXEC);
		if (in->fd == -1) {
			snprintf(in->err, sizeof(in->err), "cannot open: %s",
			    strerror(errno));
			in->unopened = 1;
			return -1;
		}
		if ((n = in_raw_full(in, in->pb, sizeof(in->pb))) < 0) {
			snprintf(in->err, sizeof(in->err), "read error: %s",
			    strerror(errno));
			return -1;
		}
		in->pblen = (size_t)n;
		comp = ovl_chunks_magic(in->pb, in->pblen);
	} else if ((in->fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		snprintf(in->err, sizeof(in->err), "cannot open: %s",
		    strerror(errno));
		in->unopened = 1;
		return -1;
	} else if (in_same(in) != 0)
		return -1;
	in->comp = comp;
	if (comp == OVL_COMP_OTHER || (want_archive && comp == OVL_COMP_NONE)) {
		int ok;

		int r;

		in->kind = OVL_INPUT_ARCHIVE;
		if (arc_new(in) != 0)
			return -1;
		ovl_arc.read_support_filter_all(in->a);
		if (want_archive) {
			ovl_arc.read_support_format_tar(in->a);
			ovl_arc.read_support_format_empty(in->a);
		} else {
			ovl_arc.read_support_format_raw(in->a);
			ovl_arc.read_support_format_empty(in->a);
		}
		/* through in_raw: a local file is checked at every read */
		in->abuf = ovl_xmalloc(OVL_INPUT_BLOCK);
		ok = ovl_arc.read_open(in->a, in, NULL, arc_raw_cb, NULL);
		if (ok != ARCHIVE_OK) {
			arc_open_err(in, want_archive);
			return -1;
		}
		if (!want_archive) {
			struct archive_entry *e;

			r = ovl_arc.read_next_header(in->a, &e);
			if (r == ARCHIVE_EOF)
				in->zeof = 1;
			else if (r < ARCHIVE_WARN) {
				arc_open_err(in, 0);
				return -1;
			}
		}
		return 0;
	}
	in->kind = comp;
	if (comp == OVL_COMP_ZSTD) {
		if (in->x->zd == NULL &&
		    (in->x->zd = ZSTD_createDStream()) == NULL) {
			snprintf(in->err, sizeof(in->err), "zstd: cannot "
			    "create a decoder (no memory)");
			return -1;
		}
		ZSTD_DCtx_reset(in->x->zd, ZSTD_reset_session_only);
		in->zin.src = in->x->zbuf;
	} else if (comp == OVL_COMP_GZIP) {
		/* 16 + MAX_WBITS: a gzip wrapper, whose trailer zlib checks. */
		if (inflateInit2(&in->gz, 16 + MAX_WBITS) != Z_OK) {
			snprintf(in->err, sizeof(in->err), "gzip: cannot "
			    "initialize zlib");
			return -1;
		}
		in->gzinit = 1;
		in->gz.next_in = in->x->zbuf;
		in->gz.avail_in = 0;
	}
	if (comp != OVL_COMP_NONE) {
		if (!want_archive)
			return 0;
		/* A tar in zstd or gzip: decoded here, read by libarchive. */
		if (arc_new(in) != 0)
			return -1;
		in->abuf = ovl_xmalloc(OVL_INPUT_BLOCK);
		ovl_arc.read_support_format_tar(in->a);
		ovl_arc.read_support_format_empty(in->a);
		if (ovl_arc.read_open(in->a, in, NULL, arc_read_cb, NULL) !=
		    ARCHIVE_OK) {
			arc_open_err(in, 1);
			return -1;
		}
		return 0;
	}
	in->remain = c->len;
	in->coff = c->off;
	if (in->remote != NULL) {
		ovl_remote_seek(in->remote, c->off, c->len == OVL_CHUNK_WHOLE ?
		    UINT64_MAX : c->off + c->len);
		return 0;
	}
	if (c->off > 0 && lseek(in->fd, (off_t)c->off, SEEK_SET) == -1) {
		snprintf(in->err, sizeof(in->err), "cannot seek: %s",
		    strerror(errno));
		return -1;
	}
	in->rpos = c->off;
	return 0;
}

static void zt_stop(struct ovl_input *in);

void
ovl_input_close(struct ovl_input *in)
{
	if (in->zt != NULL)
		zt_stop(in);
	if (in->a != NULL) {
		ovl_arc.read_free(in->a);
		in->a = NULL;
	}
	if (in->gzinit) {
		inflateEnd(&in->gz);
		in->gzinit = 0;
	}
	free(in->abuf);
	in->abuf = NULL;
	if (in->fd != -1)
		close(in->fd);
	in->fd = -1;
	ovl_remote_close(in->remote);
	in->remote = NULL;
}

ssize_t
ovl_input_pread(struct ovl_input *in, void *buf, size_t n, uint64_t off)
{
	ssize_t r;

	if (in->remote != NULL) {
		if ((r = ovl_remote_pread(in->remote, buf, n, in->coff + off)) < 0)
			raw_err(in);
		return r;
	}
	while ((r = pread(in->fd, buf, n, (off_t)(in->coff + off))) == -1 &&
	    errno == EINTR)
		;
	if (r < 0)
		raw_err(in);
	return r;
}

int
ovl_input_skip(struct ovl_input *in, uint64_t off)
{
	if (in->remain != OVL_CHUNK_WHOLE && off > in->remain) {
		snprintf(in->err, sizeof(in->err), "offset %" PRIu64 " is past "
		    "the end", off);
		return -1;
	}
	if (in->remote != NULL) {
		ovl_remote_seek(in->remote, in->coff + off,
		    in->remain == OVL_CHUNK_WHOLE ? UINT64_MAX :
		    in->coff + in->remain);
	} else if (lseek(in->fd, (off_t)(in->coff + off), SEEK_SET) == -1) {
		snprintf(in->err, sizeof(in->err), "cannot seek: %s",
		    strerror(errno));
		return -1;
	} else
		in->rpos = in->coff + off;
	if (in->remain != OVL_CHUNK_WHOLE)
		in->remain -= off;
	return 0;
}

/*
 * gzip, one member after another (as gzip -d reads them), every member's
 * CRC-32 and length checked by zlib. Anything after the last member that is
 * not another member is an error, with its compressed byte offset.
 */
static ssize_t
gz_read(struct ovl_input *in, unsigned char *buf, size_t n)
{
	z_stream *z = &in->gz;

	if (n > (1u << 30))
		n = 1u << 30;
	for (;;) {
		size_t made;
		int zr;

		if (z->avail_in == 0 && !in->zeof) {
			ssize_t r = in_raw_full(in, in->x->zbuf, in->x->zbufcap);

			if (r < 0) {
				raw_err(in);
				return -1;
			}
			z->next_in = in->x->zbuf;
			z->avail_in = (uInt)r;
			in->zpos += (uint64_t)r;
			if (r == 0)
				in->zeof = 1;
		}
		if (in->gzdone) {
			if (z->avail_in == 0)
				return 0;	/* at the end: zeof is set */
			inflateReset(z);	/* the next member */
			in->gzdone = 0;
		}
		z->next_out = buf;
		z->avail_out = (uInt)n;
		zr = inflate(z, Z_NO_FLUSH);
		made = n - z->avail_out;
		if (zr == Z_STREAM_END)
			in->gzdone = 1;
		else if (zr != Z_OK && zr != Z_BUF_ERROR) {
			snprintf(in->err, sizeof(in->err), "corrupt gzip data "
			    "(%s) near compressed byte offset %" PRIu64,
			    z->msg != NULL ? z->msg : "zlib error",
			    in->zpos - z->avail_in);
			return -1;
		}
		if (made > 0)
			return (ssize_t)made;
		if (!in->gzdone && z->avail_in == 0 && in->zeof) {
			snprintf(in->err, sizeof(in->err), "truncated gzip "
			    "input at compressed byte offset %" PRIu64, in->zpos);
			return -1;
		}
	}
}

/* Read decompressed bytes: count, 0 at the end, -1 with in->err set. */
static ssize_t
in_read_direct(struct ovl_input *in, unsigned char *buf, size_t n)
{
	ssize_t r;

	if (in->kind == OVL_INPUT_ARCHIVE) {
		la_ssize_t ar;

		if (in->zeof)
			return 0;
		ar = ovl_arc.read_data(in->a, buf, n);
		if (ar < 0) {
			snprintf(in->err, sizeof(in->err), "corrupt or truncated "
			    "%s data near decompressed byte offset %" PRId64 " (%s)",
			    ovl_arc.filter_name(in->a, 0),
			    (int64_t)ovl_arc.filter_bytes(in->a, -1),
			    ovl_input_arc_err(in->a));
			return -1;
		}
		return (ssize_t)ar;
	}
	if (in->kind == OVL_COMP_GZIP)
		return gz_read(in, buf, n);
	if (in->kind == OVL_COMP_ZSTD) {
		for (;;) {
			ZSTD_outBuffer out = { buf, n, 0 };
			size_t zr, before;

			if (in->zin.pos == in->zin.size && !in->zeof) {
				r = in_raw_full(in, in->x->zbuf, in->x->zbufcap);
				if (r < 0) {
					raw_err(in);
					return -1;
				}
				in->zin.size = (size_t)r;
				in->zin.pos = 0;
				if (r == 0)
					in->zeof = 1;
			}
			before = in->zin.pos;
			zr = ZSTD_decompressStream(in->x->zd, &out, &in->zin);
			if (ZSTD_isError(zr)) {
				snprintf(in->err, sizeof(in->err),
				    "zstd: %s", ZSTD_getErrorName(zr));
				return -1;
			}
			/* A call with no input only hints at the next frame. */
			if (in->zin.pos != before || out.pos > 0)
				in->zlast = zr;
			if (out.pos > 0)
				return (ssize_t)out.pos;
			if (in->zeof && in->zin.pos == in->zin.size) {
				if (in->zlast != 0) {
					snprintf(in->err, sizeof(in->err),
					    "truncated zstd input");
					return -1;
				}
				return 0;
			}
		}
	}
	if (in->remain == 0)
		return 0;
	if (n > in->remain)
		n = (size_t)in->remain;
	if ((r = in_raw(in, buf, n)) < 0) {
		raw_err(in);
		return -1;
	}
	if (in->remain != OVL_CHUNK_WHOLE)
		in->remain -= (uint64_t)r;
	if (r == 0 && in->remain != OVL_CHUNK_WHOLE && in->remain > 0) {
		snprintf(in->err, sizeof(in->err), "file shrank while reading");
		return -1;
	}
	return r;
}

static void *
zt_main(void *arg)
{
	struct ovl_input *in = arg;
	struct ovl_zthread *zt = in->zt;

	for (;;) {
		struct ovl_zblock *b;
		int last = 0, err = 0;

		pthread_mutex_lock(&zt->mu);
		while (zt->b[zt->tail].full && !zt->stop)
			pthread_cond_wait(&zt->cv, &zt->mu);
		if (zt->stop) {
			pthread_mutex_unlock(&zt->mu);
			break;
		}
		b = &zt->b[zt->tail];
		pthread_mutex_unlock(&zt->mu);
		b->len = b->pos = 0;
		while (b->len < OVL_INPUT_BLOCK) {
			ssize_t r = in_read_direct(in, b->p + b->len,
			    OVL_INPUT_BLOCK - b->len);
			if (r <= 0) {
				last = 1;
				err = r < 0;
				break;
			}
			b->len += (size_t)r;
		}
		pthread_mutex_lock(&zt->mu);
		b->last = last;
		b->err = err;
		b->full = 1;
		zt->tail = (zt->tail + 1) % OVL_INPUT_NBLK;
		pthread_cond_broadcast(&zt->cv);
		pthread_mutex_unlock(&zt->mu);
		if (last)
			break;
	}
	return NULL;
}

/* Start reading in->kind input ahead in a thread. */
void
ovl_input_readahead(struct ovl_input *in)
{
	struct ovl_zthread *zt = &in->x->zt;
	int i, rc;

	if (zt->b[0].p == NULL) {
		pthread_mutex_init(&zt->mu, NULL);
		pthread_cond_init(&zt->cv, NULL);
		for (i = 0; i < OVL_INPUT_NBLK; i++)
			zt->b[i].p = ovl_xmalloc(OVL_INPUT_BLOCK);
	}
	for (i = 0; i < OVL_INPUT_NBLK; i++)
		zt->b[i].full = zt->b[i].last = zt->b[i].err = 0;
	zt->head = zt->tail = 0;
	zt->stop = 0;
	in->zt = zt;
	if ((rc = pthread_create(&zt->th, NULL, zt_main, in)) != 0) {
		/* No thread: read in this one. */
		in->zt = NULL;
		return;
	}
	zt->running = 1;
}

static void
zt_stop(struct ovl_input *in)
{
	struct ovl_zthread *zt = in->zt;

	pthread_mutex_lock(&zt->mu);
	zt->stop = 1;
	pthread_cond_broadcast(&zt->cv);
	pthread_mutex_unlock(&zt->mu);
	pthread_join(zt->th, NULL);
	zt->running = 0;
	in->zt = NULL;
}

static void
zt_free(struct ovl_zthread *zt)
{
	int i;

	if (zt->b[0].p == NULL)
		return;
	for (i = 0; i < OVL_INPUT_NBLK; i++)
		free(zt->b[i].p);
	pthread_mutex_destroy(&zt->mu);
	pthread_cond_destroy(&zt->cv);
}

/* Read decompressed bytes, from the thread when there is one. */
ssize_t
ovl_input_read(struct ovl_input *in, unsigned char *buf, size_t n)
{
	struct ovl_zthread *zt = in->zt;
	struct ovl_zblock *b;

	if (zt == NULL)
		return in_read_direct(in, buf, n);
	for (;;) {
		b = &zt->b[zt->head];
		pthread_mutex_lock(&zt->mu);
		while (!b->full)
			pthread_cond_wait(&zt->cv, &zt->mu);
		pthread_mutex_unlock(&zt->mu);
		if (b->pos < b->len) {
			size_t k = b->len - b->pos < n ? b->len - b->pos : n;

			memcpy(buf, b->p + b->pos, k);
			b->pos += k;
			if (b->pos == b->len && !b->last) {
				pthread_mutex_lock(&zt->mu);
				b->full = 0;
				zt->head = (zt->head + 1) % OVL_INPUT_NBLK;
				pthread_cond_broadcast(&zt->cv);
				pthread_mutex_unlock(&zt->mu);
			}
			return (ssize_t)k;
		}
		if (b->last)
			return b->err ? -1 : 0;
		/* An empty block that is not the last: take the next. */
		pthread_mutex_lock(&zt->mu);
		b->full = 0;
		zt->head = (zt->head + 1) % OVL_INPUT_NBLK;
		pthread_cond_broadcast(&zt->cv);
		pthread_mutex_unlock(&zt->mu);
	}
}

int
ovl_input_ctx_init(struct ovl_input_ctx *x)
{
	memset(x, 0, sizeof(*x));
	/* the zstd context at the first zstd chunk (96 KiB, touched) */
	x->zbufcap = ZSTD_DStreamInSize() * 2;	/* 256 KiB of input */
	x->zbuf = ovl_xmalloc(x->zbufcap);
	return 0;
}

void
ovl_input_ctx_free(struct ovl_input_ctx *x)
{
	zt_free(&x->zt);
	ZSTD_freeDStream(x->zd);
	free(x->zbuf);
}
