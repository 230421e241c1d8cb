/*
 * ckptlog: the checkpoint log of ovl-ckpt, ovl-ckpt(1) "LOG FORMAT".
 *
 * A checkpoint is a set of sections ("ckpt", "out", "mix", "construct"),
 * each an ordered list of "key value" lines (the mix and construct
 * sections are the stages' STATE texts, line for line). The log is a file
 * header and then records, each with a CRC-32C: a base record holds every
 * section whole, a diff record holds, per section, either the whole
 * section (when its keys changed) or only the values that changed since
 * the previous record. Records are appended and fsync'ed; a torn tail (the
 * last record incomplete or failing its CRC) is ignored on read; a bad
 * record anywhere else is an error naming its byte offset.
 *
 *   file header   "OVLCKLOG", u32 version (1), u32 CRC-32C of bytes 0..11
 *   record        u32 magic "OVLR", u32 payload length, u16 version (1),
 *                 u8 type (1 base, 2 diff), u8 flags (1 end of run),
 *                 u32 CRC-32C of bytes 0..11, u64 n, u32 CRC-32C of bytes
 *                 0..23 and the payload, u32 reserved; then the payload: lines
 *                 "=SECTION" (whole section follows) or "~SECTION"
 *                 (changed values follow), and "key value" lines.
 */
#ifndef OVL_CKPTLOG_H
#define OVL_CKPTLOG_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define OVL_CKPTLOG_MAGIC	"OVLCKLOG"
#define OVL_CKPTLOG_HDR_LEN	16
#define OVL_CKPTREC_HDR_LEN	32
#define OVL_CKPTLOG_VERSION	1
/* A record's payload may not exceed this (a bound before allocating). */
#define OVL_CKPTREC_MAX		(64u << 20)

enum { OVL_CKPTREC_BASE = 1, OVL_CKPTREC_DIFF = 2 };
#define OVL_CKPTREC_END		0x1	/* flags: the run ended cleanly here */

enum { OVL_SEC_CKPT, OVL_SEC_OUT, OVL_SEC_MIX, OVL_SEC_CONSTRUCT, OVL_NSEC };
/* "ckpt", "out", "mix", "construct". */
extern const char *const ovl_sec_name[OVL_NSEC];

/* One line: key, and value (NULL when the line had no space). */
struct ovl_kv {
	char	*key;
	char	*val;
};

struct ovl_kvsec {
	struct ovl_kv	*kv;
	size_t		 n;
	size_t		 cap;
};

struct ovl_ckstate {
	struct ovl_kvsec sec[OVL_NSEC];
};

/* ---- sections -------------------------------------------------------- */

/* Free every string; the state is then empty and reusable. */
void	ovl_ckstate_clear(struct ovl_ckstate *st);
void	ovl_kvsec_clear(struct ovl_kvsec *s);
/* Deep copy src into dst (dst cleared first). */
void	ovl_ckstate_copy(struct ovl_ckstate *dst, const struct ovl_ckstate *src);
/*
 * Replace s with the lines of text[0..len) (a final line without newline
 * counts). Returns 0, or -1 when a line is unusable as a key: empty, or
 * starting with '=', '~' or a space, or containing a NUL. s is cleared on
 * error.
 */
int	ovl_kvsec_parse(struct ovl_kvsec *s, const char *text, size_t len);
/* The value of key, or NULL (absent, or a line without value). */
const char *ovl_kvsec_get(const struct ovl_kvsec *s, const char *key);
/* The index of key, or -1. */
long	ovl_kvsec_find(const struct ovl_kvsec *s, const char *key);
/* Set key to val (val may be NULL), appending when new. */
void	ovl_kvsec_set(struct ovl_kvsec *s, const char *key, const char *val);
/* Append the section as text, one "key value\n" line per entry. */
void	ovl_kvsec_text(const struct ovl_kvsec *s, struct ovl_buf *out);

/* ---- records --------------------------------------------------------- */

/*
 * Append to out one whole record (header and payload) for checkpoint n:
 * a base (prev NULL) or a diff from prev to cur. flags: OVL_CKPTREC_*.
 */
void	ovl_ckrec_encode(struct ovl_buf *out, uint64_t n, unsigned flags,
	    const struct ovl_ckstate *prev, const struct ovl_ckstate *cur);
/* The 16-byte file header. */
void	ovl_ckptlog_header(uint8_t out[OVL_CKPTLOG_HDR_LEN]);

/* ---- reading --------------------------------------------------------- */

struct ovl_ckrec {
	uint64_t	 n;
	uint64_t	 offset;	/* byte offset of the record in the log */
	uint32_t	 len;		/* payload bytes */
	uint8_t		 type;
	uint8_t		 flags;
};

struct ovl_ckptlog {
	uint8_t		*data;		/* the file from byte `from` on */
	size_t		 from;		/* 0: the whole log was read; else the
					   first record held (a base): the
					   records before it were not read */
	size_t		 size;		/* of the file */
	size_t		 valid;		/* header + good records: where to append */
	struct ovl_ckrec *rec;
	size_t		 nrec;
	size_t		 corrupt;	/* offset of a corrupt record, or 0 */
};

/*
 * Read and check the log at path. Returns 0 (a missing or empty file is an
 * empty log), -1 on an I/O error (errno set), or -3 when the log is
 * corrupt; in both error cases err holds a message with the byte offset.
 * A torn tail is not an error: log->valid < log->size tells. When a record
 * after the header is corrupt, log still holds the good records before it
 * (nrec, valid) and log->corrupt its byte offset, so a caller may use the
 * checkpoints before it; free log in every case.
 */
int	ovl_ckptlog_read(const char *path, struct ovl_ckptlog *log, char *err,
	    size_t errlen);
void	ovl_ckptlog_free(struct ovl_ckptlog *log);
/*
 * The same from a base record on, so that the time does not grow with the
 * log: the back-th last base record (1: the last) that the index at
 * idxpath names and the log confirms (at that offset a record header whose
 * CRC holds, a base with the index's n and length), or the earliest of
 * those confirmed when fewer; log->from is its offset. Without an index,
 * or with no entry among its last OVL_CKPTIDX_LOOK that the log confirms,
 * the whole log (log->from 0). Returns as ovl_ckptlog_read; a corrupt or
 * torn record is found only from log->from on.
 */
int	ovl_ckptlog_read_tail(const char *path, const char *idxpath,
	    unsigned back, struct ovl_ckptlog *log, char *err, size_t errlen);
/* Index of the last record of checkpoint n, or -1. */
long	ovl_ckptlog_find(const struct ovl_ckptlog *log, uint64_t n);
/*
 * The state at record i: replayed from the last base at or before i.
 * Returns 0, or -1 with a message in err when a payload is malformed (a
 * diff naming a key its section does not have, a diff before any base).
 */
int	ovl_ckptlog_state(const struct ovl_ckptlog *log, size_t i,
	    struct ovl_ckstate *st, char *err, size_t errlen);

/*
 * Append rec[0..len) to the log open at fd (O_WRONLY, positioned at the
 * end, which is at byte `at`) and fsync it. On failure the file is cut
 * back to `at` (so the previous record stays the last) and -1 is returned
 * with errno set.
 */
int	ovl_ckptlog_append(int fd, uint64_t at, const void *rec, size_t len);

/* ---- the index: where the base records are ----------------------------- */

/*
 * A file beside the log (ckpt.idx) naming the offsets of its base records,
 * so that a reader seeks to the last ones instead of reading every record.
 * It is a hint: every entry is checked against the log before it is used,
 * a missing or stale index only makes the read longer, and it is never
 * fsync'ed (an entry is written after its record is durable).
 *
 *   header   "OVLCKIDX", u32 version (1), u32 CRC-32C of bytes 0..11
 *   entry    u64 n, u64 byte offset of the base record in the log, u32
 *            payload length, u32 CRC-32C of the entry's bytes 0..19
 */
#define OVL_CKPTIDX_MAGIC	"OVLCKIDX"
#define OVL_CKPTIDX_HDR_LEN	16
#define OVL_CKPTIDX_ENT_LEN	24
/* Entries a reader looks at, from the end. */
#define OVL_CKPTIDX_LOOK	64

struct ovl_ckptidx {
	int		 fd;		/* -1: closed, or given up after an error */
	uint64_t	 end;		/* where the next entry goes */
};

/*
 * Open (creating it, or starting it anew when its header is not whole) the
 * index at path for appending; a torn last entry is cut. Returns 0, or -1
 * with errno (x->fd is then -1 and notes do nothing).
 */
int	ovl_ckptidx_open(struct ovl_ckptidx *x, const char *path);
/*
 * Note the base records among recs[0..len), whole records just appended
 * at byte `at` of the log. A write error closes the index (x->fd -1):
 * later reads fall back to older entries or the whole log.
 */
void	ovl_ckptidx_note(struct ovl_ckptidx *x, const void *recs, size_t len,
	    uint64_t at);
void	ovl_ckptidx_close(struct ovl_ckptidx *x);
/*
 * Before the log is cut at byte end: drop the index's entries of records
 * at or past end. 0 (also without an index), or -1 with errno.
 */
int	ovl_ckptidx_cut(const char *path, uint64_t end);

#endif
