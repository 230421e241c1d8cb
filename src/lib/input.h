/*
 * input: one chunk's bytes, decompressed. A plain file is read over its
 * byte range; zstd and gzip by decoders of our own that check every frame
 * and member (gzip's CRC-32 and ISIZE through zlib); anything else that
 * libarchive's filters know (xz, bzip2, lz4, ...) through libarchive; a tar
 * (compressed or not) member by member through libarchive. A stream
 * (standard input, a FIFO, a device; OVL_COMP_STREAM) is opened once, read
 * once, and its compression sniffed from its first bytes.
 *
 * A remote file (http://, https://, s3://; lib/remote.h) is read by one
 * ranged GET streamed over the chunk's range (from the resume offset,
 * with ovl_input_skip), resumed from the byte it broke off at.
 *
 * A read-ahead thread (ovl_input_readahead) decompresses blocks ahead of
 * the reader, so that decompression overlaps parsing and tokenizing.
 * Errors never exit: they return -1 with the message in in->err.
 */
#ifndef OVL_INPUT_H
#define OVL_INPUT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <archive.h>
#include <archive_entry.h>
#include <zlib.h>
#include <zstd.h>

#include "chunk.h"
#include "remote.h"

/*
 * libarchive's functions, loaded when a chunk first needs them (lib/dl.h):
 * tar and WebDataset shards, bzip2, xz and the other filters. A source of
 * plain, gzip or zstd files never maps libarchive (nor ICU and libxml2,
 * which it brings).
 */
struct ovl_arc {
	__typeof__(archive_entry_filetype) *entry_filetype;
	__typeof__(archive_entry_pathname) *entry_pathname;
	__typeof__(archive_entry_size) *entry_size;
	__typeof__(archive_entry_size_is_set) *entry_size_is_set;
	__typeof__(archive_error_string) *error_string;
	__typeof__(archive_filter_bytes) *filter_bytes;
	__typeof__(archive_filter_name) *filter_name;
	__typeof__(archive_read_data) *read_data;
	__typeof__(archive_read_free) *read_free;
	__typeof__(archive_read_new) *read_new;
	__typeof__(archive_read_next_header) *read_next_header;
	__typeof__(archive_read_open) *read_open;
	__typeof__(archive_read_support_filter_all) *read_support_filter_all;
	__typeof__(archive_read_support_format_empty) *read_support_format_empty;
	__typeof__(archive_read_support_format_raw) *read_support_format_raw;
	__typeof__(archive_read_support_format_tar) *read_support_format_tar;
	__typeof__(archive_set_error) *set_error;
};
extern struct ovl_arc ovl_arc;
/* Load libarchive into ovl_arc now: 0, or -1 (the reason on stderr). */
int	ovl_arc_load(void);

/*
 * Bytes asked of a decoder at once, and the read-ahead thread's block
 * (the memory of a compressed source: make bench BENCH_ARGS=source).
 */
#define OVL_INPUT_BLOCK	(256u << 10)
enum { OVL_INPUT_ARCHIVE = 100 };	/* in->kind: libarchive reads it */

/*
 * A decompressing thread: it fills blocks ahead of the reader, so that
 * decompression on one core overlaps parsing, tokenizing and writing on
 * the other.
 */
#define OVL_INPUT_NBLK	4
struct ovl_zblock {
	unsigned char	*p;
	size_t		 len, pos;
	int		 full;
	int		 last;		/* end of input (or error) after this block */
	int		 err;
};

struct ovl_zthread {
	pthread_t	 th;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	struct ovl_zblock b[OVL_INPUT_NBLK];
	int		 head, tail;
	int		 stop;
	int		 running;
};

/* One chunk's decompressed bytes. */
struct ovl_input {
	int		 kind;		/* enum ovl_chunk_comp, or OVL_INPUT_ARCHIVE */
	int		 fd;
	struct ovl_remote *remote;	/* a remote file (then fd is -1) */
	const struct ovl_chunk_file *id; /* what the file was when listed */
	uint64_t	 rpos;		/* a local file: offset of the next read */
	int		 changed;	/* err says how the file changed */
	int		 unopened;	/* the file could not be opened at all */
	uint64_t	 remain;	/* plain: bytes left in the range */
	uint64_t	 coff;		/* plain: the chunk's first byte in the file */
	ZSTD_inBuffer	 zin;
	size_t		 zlast;		/* last ZSTD_decompressStream hint */
	int		 zeof;
	struct archive	*a;
	struct ovl_input_ctx *x;
	struct ovl_zthread *zt;	/* reading ahead, or NULL */
	int		 comp;		/* the chunk's compression (a stream's, sniffed) */
	int		 stream;	/* stdin, FIFO, device: read once, no seeking */
	unsigned char	 pb[8];		/* a stream's first bytes, read to sniff it */
	size_t		 pblen, pbpos;
	z_stream	 gz;		/* gzip: zlib, trailer (CRC-32, ISIZE) checked */
	int		 gzinit;
	int		 gzdone;	/* between two gzip members */
	uint64_t	 zpos;		/* compressed bytes read from fd */
	unsigned char	*abuf;		/* decoded block handed to libarchive */
	char		 err[512];
};

/* What the inputs of one process share: decoder state and buffers. */
struct ovl_input_ctx {
	ZSTD_DStream	*zd;
	unsigned char	*zbuf;		/* compressed bytes */
	size_t		 zbufcap;
	struct ovl_zthread zt;
};

/* 0, or -1 when out of memory. */
int	ovl_input_ctx_init(struct ovl_input_ctx *x);
void	ovl_input_ctx_free(struct ovl_input_ctx *x);
/*
 * Open chunk c of path (want_archive: a tar, read with
 * archive_read_next_header on in->a, its data with ovl_input_read). -1 with
 * in->err on failure (in->unopened when the file could not be opened at
 * all: missing, forbidden, HTTP 404 or 403); ovl_input_close in every case.
 *
 * id (ovl_chunks_file; NULL: none) is what the file was when it was
 * listed: a file that differs at the open, or, read by us (not through
 * libarchive's own reads of a local file), at any read (fstat after
 * every read; an end of file before the listed size), is an error
 * naming what changed and the byte offset, never data of another file.
 * A remote object of another version or size is an error at the open.
 */
int	ovl_input_open(struct ovl_input_ctx *x, struct ovl_input *in,
	    const struct ovl_chunk *c, const char *path, int want_archive,
	    const struct ovl_chunk_file *id);
/*
 * A plain (uncompressed, not archive, not stream) chunk only, before the
 * first read: n bytes at chunk offset off (ovl_input_pread), and continue
 * reading at chunk offset off (ovl_input_skip; a remote file asks for its
 * bytes from there on, never from the start). -1 with in->err.
 */
ssize_t	ovl_input_pread(struct ovl_input *in, void *buf, size_t n, uint64_t off);
int	ovl_input_skip(struct ovl_input *in, uint64_t off);
/* Decompress ahead in a thread from now on (if one can be started). */
void	ovl_input_readahead(struct ovl_input *in);
/* Decompressed bytes: count, 0 at the end, -1 with in->err set. */
ssize_t	ovl_input_read(struct ovl_input *in, unsigned char *buf, size_t n);
void	ovl_input_close(struct ovl_input *in);
/* libarchive's message for a, never NULL. */
const char *ovl_input_arc_err(struct archive *a);

#endif
