/*
 * chunk: the chunks of a source, their order per epoch, and which
 * partition owns which (HACKING.md, "Sources, chunks, cursors").
 *
 * A source is a list of chunks: its files in the order given (a pattern
 * with glob characters expands to its matches, sorted), and, for large
 * uncompressed files of a record-per-line or record-per-paragraph format,
 * record-aligned byte ranges of about chunk_size bytes, and for parquet
 * files one chunk per row group. The list depends
 * only on the files and these options, never on partitions.
 *
 * Epoch e visits the chunks in canonical order: identity, or with a
 * shuffle seed S the Fisher-Yates permutation drawn from
 * ovl_rng_seed2(S, e). Canonical chunk k of epoch e is chunk perm_e[k] of
 * the list; partition P/N owns the canonical chunks k with k % N == P.
 */
#ifndef OVL_CHUNK_H
#define OVL_CHUNK_H

#include <stddef.h>
#include <stdint.h>

/* How a large uncompressed file may be cut into chunks. */
enum ovl_chunk_cut {
	OVL_CUT_NONE = 0,	/* never: one chunk per file */
	OVL_CUT_LINES = 1,	/* after a newline */
	OVL_CUT_PARAGRAPHS = 2,	/* after a blank line (only spaces, tabs, CR) */
	OVL_CUT_ROWGROUPS = 3	/* parquet: every row group, whatever its size */
};

/* Compression of a file, judged by its first bytes (not its name). */
enum ovl_chunk_comp {
	OVL_COMP_NONE = 0,
	OVL_COMP_ZSTD = 1,
	OVL_COMP_GZIP = 2,
	OVL_COMP_OTHER = 3,	/* xz, bzip2, lz4: left to libarchive */
	OVL_COMP_STREAM = 4	/* stdin ("-"), a FIFO or a device: never
				   opened while listing, read exactly once,
				   its compression judged as it is read */
};

#define OVL_CHUNK_WHOLE UINT64_MAX	/* len of a chunk that is a whole file */

struct ovl_chunk {
	uint32_t	file;		/* index into files[] */
	uint32_t	comp;		/* enum ovl_chunk_comp of the file */
	uint64_t	off;		/* first byte of the range in the file */
	uint64_t	len;		/* bytes, or OVL_CHUNK_WHOLE */
	uint32_t	part;		/* parquet: the row group (off, len: its
					   bytes in the file) */
};

/*
 * What a file was when it was listed, so that a later open or read tells
 * the same file from one changed under the run. Local: size, modification
 * time, device and inode. Remote: size and version (the strong ETag, else
 * Last-Modified; "" when the server gives neither). A stream: nothing
 * (known 0).
 */
struct ovl_chunk_file {
	int		 known;
	int		 remote;
	uint64_t	 size;
	uint64_t	 dev, ino;
	int64_t		 mtime_ns;
	char		*ver;		/* remote: owned, never NULL */
};

struct ovl_chunks {
	char		**files;	/* resolved paths, owned */
	struct ovl_chunk_file *ids;	/* per file: what it was when listed */
	uint32_t	  nfiles;
	struct ovl_chunk *v;		/* the chunk list, owned */
	uint32_t	  n;
};

/*
 * Resolve patterns[0..npatterns) into files and cut them into chunks.
 * chunk_size 0 never cuts. Every file must exist, be a regular file (or
 * a FIFO or character device, or "-" for standard input: a stream, never
 * opened here, never cut) and be readable; a glob must match at least one
 * file. Returns 0, or -1 with a message (no program prefix) in
 * err[0..errlen): the caller exits 1 (data) on it. *cs is empty on failure.
 */
int	ovl_chunks_list(struct ovl_chunks *cs, char *const *patterns,
	    size_t npatterns, uint64_t chunk_size, enum ovl_chunk_cut cut,
	    char *err, size_t errlen);
void	ovl_chunks_free(struct ovl_chunks *cs);
/*
 * The files a remote pattern (ovl_remote_is) names, as ovl_chunks_list
 * takes them: the URL itself without a glob, an s3:// glob's keys sorted
 * (ListObjectsV2); an HTTP glob or a glob that matches nothing is an
 * error. 0 with *out (n strings, each and the array to free), or -1 with
 * a message in err.
 */
int	ovl_chunks_expand_remote(const char *pattern, char ***out, size_t *n,
	    char *err, size_t errlen);

/* The path of chunk i (i < cs->n). */
const char *ovl_chunks_path(const struct ovl_chunks *cs, uint32_t i);
/* What chunk i's file was when it was listed (i < cs->n). */
const struct ovl_chunk_file *ovl_chunks_file(const struct ovl_chunks *cs,
	    uint32_t i);

struct stat;
struct ovl_remote;
/*
 * Is a local file, as fstat(2) sees it now (st), the one listed as id?
 * 0 when it is (or id is NULL or not known), else -1 with what changed in
 * why ("shrank from A to B bytes", "grew ...", "was modified",
 * "was replaced (another inode)").
 */
int	ovl_chunks_file_same(const struct ovl_chunk_file *id,
	    const struct stat *st, char *why, size_t n);
/*
 * The same for a remote object just opened (its HEAD): its size and
 * version against id's. 0, or -1 with what changed in why.
 */
int	ovl_chunks_file_same_remote(const struct ovl_chunk_file *id,
	    const struct ovl_remote *r, char *why, size_t n);
/*
 * Two words for a META line, "SIZE VERSION" (no newline, cut to n - 1):
 * a local file's VERSION is "m.SEC.NSEC.i.INO" (mtime and inode), a
 * remote one's "e." or "l." and its ETag or Last-Modified with
 * '%', blanks and control bytes as %XX ("-" when the server gives
 * neither); a stream's words are "- -".
 */
void	ovl_chunks_file_format(const struct ovl_chunk_file *id, char *buf,
	    size_t n);

/*
 * The compression of path from its magic bytes: an enum ovl_chunk_comp, or
 * -1 with errno set when it cannot be opened or read. A stream (see
 * OVL_COMP_STREAM) is not opened: OVL_COMP_STREAM.
 */
int	ovl_chunks_compression(const char *path);
/* The compression that the first n bytes m[0..n) announce (n up to 8). */
int	ovl_chunks_magic(const unsigned char *m, size_t n);
/* 1 when some chunk of cs is a stream (OVL_COMP_STREAM). */
int	ovl_chunks_have_stream(const struct ovl_chunks *cs);

/*
 * Fill perm[0..n) with the canonical order of epoch epoch: identity when
 * shuffle is 0, else the seeded permutation described above.
 */
void	ovl_chunks_perm(uint32_t n, int shuffle, uint64_t seed, uint32_t epoch,
	    uint32_t *perm);

/* 1 when partition p of n owns canonical chunk k. */
static inline int
ovl_chunks_owned(uint32_t k, uint32_t p, uint32_t n)
{
	return k % n == p;
}

/*
 * The first canonical chunk at or after k that partition p of n owns, or
 * nchunks when there is none in this epoch.
 */
uint32_t ovl_chunks_next_owned(uint32_t k, uint32_t nchunks, uint32_t p,
	    uint32_t n);

#endif
