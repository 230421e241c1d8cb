/*
 * lines: the records of a line-oriented chunk (JSON lines, text lines, or
 * paragraphs separated by blank lines), read through a callback into one
 * buffer that holds at most the longest record allowed, with byte offsets
 * relative to the chunk and line numbers for messages.
 *
 * Offsets in [beg, end) of buf are chunk offsets base + i. A record longer
 * than max is reported (-2) without being held; ovl_lines_discard then
 * drops it while reading on.
 */
#ifndef OVL_LINES_H
#define OVL_LINES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Records of a line-oriented chunk, in a buffer bounded by max. */
struct ovl_lines {
	unsigned char	*buf;
	size_t		 cap;
	size_t		 beg;		/* start of the record being read */
	size_t		 end;		/* end of valid data */
	size_t		 scan;		/* no newline in [lstart, scan) */
	size_t		 lstart;	/* start of the line being examined */
	size_t		 pend;		/* paragraphs: end of its last line */
	int		 inpara;
	uint64_t	 base;		/* chunk offset of buf[0] */
	int		 eof;
	uint64_t	 line;		/* line number of lstart; 0: unknown */
	uint64_t	 pline;		/* first line of the paragraph */
	size_t		 max;		/* longest record */
	/* where the bytes come from: count, 0 at the end, -1 on error */
	ssize_t		(*read)(void *arg, unsigned char *buf, size_t n);
	void		*arg;
};

/*
 * Start a chunk: line is the line number of its first byte (1), or 0 when
 * unknown (a chunk that starts inside a file). Keeps the buffer, max, read
 * and arg.
 */
void	ovl_lines_reset(struct ovl_lines *r, uint64_t line);
void	ovl_lines_free(struct ovl_lines *r);
/* Read more: 1, 0 at the end, -1 on a read error. Keeps [beg, end). */
int	ovl_lines_fill(struct ovl_lines *r);
/*
 * The next line [*ls, *le) of buf (newline excluded), the next record at
 * *nx. 1, 0 at the end, -1 read error, -2 more than max bytes buffered
 * without a newline (nothing consumed). A line found whole in what was
 * read may be longer than max: the caller checks its length.
 */
int	ovl_lines_line(struct ovl_lines *r, size_t *ls, size_t *le, size_t *nx);
/*
 * The next paragraph: lines up to a blank line. [*ps, *pe) its text (last
 * newline excluded), *nx the offset after its last line; r->pline its
 * first line. Returns as ovl_lines_line.
 */
int	ovl_lines_para(struct ovl_lines *r, size_t *ps, size_t *pe, size_t *nx);
/*
 * After -2: drop the overlong record without holding it (lines: up to the
 * next newline; paragraphs: up to the next blank line). *nx gets the chunk
 * offset after it. 0, or -1 on a read error.
 */
int	ovl_lines_discard(struct ovl_lines *r, int para, uint64_t *nx);
/*
 * Skip to chunk offset off by reading, counting lines. 0, -1 read error,
 * -2 beyond the end, -3 not at a record boundary.
 */
int	ovl_lines_skip(struct ovl_lines *r, uint64_t off);
/* Only spaces, tabs, CR, FF and VT. */
int	ovl_lines_blank(const unsigned char *p, size_t n);

#endif
