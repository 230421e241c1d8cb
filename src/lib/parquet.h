/*
 * parquet: one text column of an Apache Parquet file, row by row.
 *
 * Debian has no Parquet library for C, so this reads what reading one
 * BYTE_ARRAY column needs and nothing more: the footer (Thrift compact
 * protocol), the schema (a dotted path names a leaf inside struct
 * columns), and the pages of one column chunk at a time: data pages v1 and
 * v2, dictionary pages, PLAIN, PLAIN_DICTIONARY/RLE_DICTIONARY,
 * DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY values, definition levels
 * for optional columns (a null is reported, never invented), page CRCs when
 * the writer stored them, and the codecs UNCOMPRESSED, SNAPPY, GZIP,
 * BROTLI, ZSTD, LZ4 (Hadoop framing, LZ4 frames or a raw block) and
 * LZ4_RAW. Repeated columns (lists) are refused.
 *
 * Memory is bounded by one page (compressed and decompressed) plus the
 * column chunk's dictionary: pages are read one at a time through a pread
 * callback, so the file may be local or remote. Values point into the
 * page buffer (no copy) and stay valid until the next call.
 *
 * Every error returns -1 with a message in the object's err[]: the footer's
 * errors name the byte offset, a page's the row group, the column and the
 * page (number and byte offset).
 */
#ifndef OVL_PARQUET_H
#define OVL_PARQUET_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/*
 * Random access to the file: pread returns 0, or -1 with errno (a short
 * read is an error). pread NULL reads the descriptor fd.
 */
struct ovl_pq_io {
	int		(*pread)(void *arg, void *buf, size_t n, uint64_t off);
	void		*arg;
	uint64_t	 size;
	int		 fd;
};

/* An io over a file descriptor (size from fstat): 0, or -1 with errno. */
int	ovl_pq_io_fd(struct ovl_pq_io *io, int fd);
struct ovl_remote;
/* An io over a remote object (remote.h): ranged GETs, retried. */
void	ovl_pq_io_remote(struct ovl_pq_io *io, struct ovl_remote *r);
/* Read n bytes at off through io: 0, or -1 with errno. */
int	ovl_pq_io_read(const struct ovl_pq_io *io, void *buf, size_t n,
	    uint64_t off);

struct ovl_pq_file;

/*
 * Read the footer. column (a dotted path) NULL only lists row groups;
 * otherwise it must name a BYTE_ARRAY leaf that is not repeated. Returns
 * the file, or NULL with the message in err[0..errlen).
 */
struct ovl_pq_file *ovl_pq_open(const struct ovl_pq_io *io, const char *column,
	    char *err, size_t errlen);
void	ovl_pq_close(struct ovl_pq_file *f);
uint32_t ovl_pq_row_groups(const struct ovl_pq_file *f);
uint64_t ovl_pq_rows(const struct ovl_pq_file *f, uint32_t rg);
/* A row group's first byte and compressed size in the file. */
void	ovl_pq_range(const struct ovl_pq_file *f, uint32_t rg, uint64_t *off,
	    uint64_t *len);
/* The leaf columns' dotted paths, comma-separated (for messages). */
const char *ovl_pq_columns(const struct ovl_pq_file *f);

/* A column chunk being read; fields are private. */
struct ovl_pq_reader {
	struct ovl_pq_file *f;
	uint32_t	 rg;
	uint64_t	 start, pos, end;	/* chunk start, next page header,
					   chunk end */
	uint32_t	 page;		/* pages read, for messages */
	uint64_t	 page_off;	/* the current page's header offset */
	uint64_t	 rows;		/* rows of the row group */
	uint64_t	 row;		/* rows passed so far */
	struct ovl_buf	 hdr, comp, data, cur;
	/* the dictionary: offsets into dict, PLAIN values unpacked */
	struct ovl_buf	 dict;
	uint64_t	*doff;
	uint32_t	 ndict, dcap;
	int		 have_dict;
	/* the current data page */
	uint32_t	 nvals, vi;	/* level entries, the next one */
	uint8_t		*defs;
	uint32_t	 dfcap;
	int		 enc;
	const uint8_t	*vp, *ve;	/* values not yet decoded */
	uint32_t	 rle_left, rle_val;
	int		 rle_bp, bw;
	uint32_t	 bp_i, bp_n;
	const uint8_t	*bp;
	int64_t		*lens, *pfx;	/* DELTA_* of the page */
	uint32_t	 lcap, li;
	/* what was met: pages by type, value encodings (bit 1 << enc) */
	uint32_t	 npages[4];
	uint32_t	 encs;
	char		 err[512];
};

/*
 * Start reading row group rg of f's column at row skip (pages before it
 * are passed over unread). Returns 0, or -1 with r->err set and nothing
 * left to free.
 */
int	ovl_pq_reader_open(struct ovl_pq_reader *r, struct ovl_pq_file *f,
	    uint32_t rg, uint64_t skip);
/*
 * The next row's value: 1 with *p, *len set, 0 for a null, -1 at the end
 * of the row group, -2 on an error (r->err).
 */
int	ovl_pq_next(struct ovl_pq_reader *r, const uint8_t **p, size_t *len);
void	ovl_pq_reader_close(struct ovl_pq_reader *r);

#endif
