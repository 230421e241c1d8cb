/*
 * lines: the records of a line-oriented chunk (see lines.h).
 */
#include "lines.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"

#define LINES_BLOCK	(128u << 10)	/* bytes asked of the reader at once */
#define LINES_CAP	(2u * LINES_BLOCK)	/* the buffer's normal size */

void
ovl_lines_reset(struct ovl_lines *r, uint64_t line)
{
	
	if (r->buf == NULL) {
		r->cap = LINES_CAP;
		r->buf = ovl_xmalloc(r->cap);
	}
	r->beg = r->end = r->scan = r->lstart = r->pend = 0;
	r->inpara = 0;
	r->base = 0;
	r->eof = 0;
	r->line = line;
	r->pline = 0;
}

/* Read more: 1, 0 at the end, -1 on error. Keeps [beg, end). */
int
ovl_lines_fill(struct ovl_lines *r)
{
		ssize_t n;

	if (r->eof)
		return 0;
	if (r->cap - r->end < LINES_BLOCK && r->beg > 0) {
		size_t d = r->beg;

		memmove(r->buf, r->buf + d, r->end - d);
		r->end -= d;
		r->scan -= d;
		r->lstart -= d;
		r->pend = r->pend >= d ? r->pend - d : 0;
		r->base += d;
		r->beg = 0;
		/*
		 * Grown for a long record that is behind us: back to the
		 * normal size (at most once per long record).
		 */
		if (r->cap > 2 * LINES_CAP && r->end <= LINES_BLOCK) {
			r->buf = ovl_xrealloc(r->buf, LINES_CAP);
			r->cap = LINES_CAP;
		}
	}
	if (r->cap - r->end < LINES_BLOCK) {
		/*
		 * A long record: grow by the normal size (mapped blocks,
		 * mremap), not by doubling, so the buffer stays within 256 KiB
		 * of the record (--max-doc-bytes bounds the process).
		 */
		size_t ncap = r->end + LINES_CAP;

		r->buf = ovl_xrealloc(r->buf, ncap);
		r->cap = ncap;
	}
	/*
	 * At most the normal size at once: a buffer grown for a long
	 * record is touched (resident) only as far as the record needs.
	 */
	n = r->read(r->arg, r->buf + r->end, r->cap - r->end < LINES_CAP ?
	    r->cap - r->end : LINES_CAP);
	if (n < 0)
		return -1;
	if (n == 0) {
		r->eof = 1;
		return 0;
	}
	r->end += (size_t)n;
	return 1;
}

/*
 * The next line [*ls, *le) (newline excluded), next record at *nx.
 * 1, 0 at the end, -1 read error, -2 longer than max_doc (nothing consumed).
 */
int
ovl_lines_line(struct ovl_lines *r, size_t *ls, size_t *le, size_t *nx)
{
	
	for (;;) {
		unsigned char *nl = memchr(r->buf + r->scan, '\n',
		    r->end - r->scan);

		if (nl != NULL) {
			*ls = r->beg;
			*le = (size_t)(nl - r->buf);
			*nx = *le + 1;
			r->beg = r->scan = r->lstart = *nx;
			return 1;
		}
		r->scan = r->end;
		if (r->eof) {
			if (r->beg == r->end)
				return 0;
			*ls = r->beg;
			*le = *nx = r->end;
			r->beg = r->scan = r->lstart = r->end;
			return 1;
		}
		if (r->end - r->beg > r->max)
			return -2;
		if (ovl_lines_fill(r) < 0)
			return -1;
	}
}

int
ovl_lines_blank(const unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\f' &&
		    p[i] != '\v')
			return 0;
	return 1;
}

/*
 * The next paragraph: lines up to a blank line. [*ps, *pe) is its text
 * (last newline excluded), *nx the offset after its last line. Returns as
 * lrd_line.
 */
int
ovl_lines_para(struct ovl_lines *r, size_t *ps, size_t *pe, size_t *nx)
{
	
	for (;;) {
		unsigned char *nl = memchr(r->buf + r->scan, '\n',
		    r->end - r->scan);
		size_t le;

		if (nl == NULL) {
			r->scan = r->end;
			if (!r->eof) {
				if (r->end - r->beg > r->max)
					return -2;
				if (ovl_lines_fill(r) < 0)
					return -1;
				continue;
			}
			/* The last line, without a newline. */
			if (r->lstart < r->end &&
			    !ovl_lines_blank(r->buf + r->lstart, r->end - r->lstart)) {
				if (!r->inpara) {
					r->inpara = 1;
					r->beg = r->lstart;
					r->pline = r->line;
				}
				r->pend = r->end;
				r->lstart = r->end;
			}
			if (!r->inpara) {
				r->beg = r->lstart = r->end;
				return 0;
			}
			*ps = r->beg;
			*pe = r->pend;
			*nx = r->pend < r->end ? r->pend + 1 : r->end;
			r->inpara = 0;
			r->beg = r->lstart = r->scan = r->end;
			return 1;
		}
		le = (size_t)(nl - r->buf);
		if (ovl_lines_blank(r->buf + r->lstart, le - r->lstart)) {
			if (r->line != 0)
				r->line++;
			if (r->inpara) {
				*ps = r->beg;
				*pe = r->pend;
				*nx = r->pend + 1;
				r->inpara = 0;
				r->beg = r->lstart = r->scan = le + 1;
				return 1;
			}
			r->beg = r->lstart = r->scan = le + 1;
			continue;
		}
		if (!r->inpara) {
			r->inpara = 1;
			r->beg = r->lstart;
			r->pline = r->line;
		}
		if (r->line != 0)
			r->line++;
		r->pend = le;
		r->lstart = r->scan = le + 1;
	}
}

/*
 * After -2: drop the overlong record without holding it. Lines: up to the
 * next newline; paragraphs: up to the next blank line. Returns 0, or -1 on
 * a read error. *nx receives the offset after it.
 */
int
ovl_lines_discard(struct ovl_lines *r, int para, uint64_t *nx)
{
		int lineblank = 0, first = 1;
	size_t i;

	/* The record starts at beg; the first line is not blank. */
	i = r->beg;
	for (;;) {
		for (; i < r->end; i++) {
			unsigned char c = r->buf[i];

			if (c == '\n') {
				if (r->line != 0)
					r->line++;
				if (!para || (lineblank && !first)) {
					r->beg = r->lstart = r->scan = i + 1;
					r->inpara = 0;
					*nx = r->base + i + 1;
					return 0;
				}
				first = 0;
				lineblank = 1;
			} else if (c != ' ' && c != '\t' && c != '\r')
				lineblank = 0;
		}
		r->beg = r->lstart = r->scan = r->end;
		if (r->eof) {
			r->inpara = 0;
			*nx = r->base + r->end;
			return 0;
		}
		i = r->end;
		{
			int rc = ovl_lines_fill(r);
			if (rc < 0)
				return -1;
			i = r->beg;	/* compaction moved the data */
		}
	}
}

/*
 * Skip to chunk offset off (a record boundary) by reading. Counts lines
 * when line counting is on. Returns 0, -1 read error, -2 beyond the end,
 * -3 not at a record boundary.
 */
int
ovl_lines_skip(struct ovl_lines *r, uint64_t off)
{
		int last = '\n';

	while (r->base + r->end < off) {
		size_t n = r->end - r->beg;

		if (n > 0)
			last = r->buf[r->end - 1];
		if (r->line != 0) {
			const unsigned char *p = r->buf + r->beg, *e = r->buf + r->end;
			while ((p = memchr(p, '\n', (size_t)(e - p))) != NULL) {
				r->line++;
				p++;
			}
		}
		r->beg = r->scan = r->lstart = r->end;
		{
			int rc = ovl_lines_fill(r);
			if (rc < 0)
				return -1;
			if (rc == 0)
				return -2;
		}
	}
	{
		size_t at = (size_t)(off - r->base);
		if (at > r->beg)
			last = r->buf[at - 1];
		if (r->line != 0) {
			const unsigned char *p = r->buf + r->beg, *e = r->buf + at;
			while ((p = memchr(p, '\n', (size_t)(e - p))) != NULL) {
				r->line++;
				p++;
			}
		}
		r->beg = r->scan = r->lstart = at;
	}
	if (off > 0 && last != '\n')
		return -3;
	return 0;
}

void
ovl_lines_free(struct ovl_lines *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
}
