/*
 * parquet-int: what parquet.c (footer, schema) and parquet-page.c (pages,
 * codecs, encodings) share: the parsed file and a Thrift compact protocol
 * reader that never reads past its end.
 */
#ifndef OVL_PARQUET_INT_H
#define OVL_PARQUET_INT_H

#include <stdint.h>
#include <string.h>

#include "parquet.h"

/* Bounds on what a file may ask us to hold. */
#define PQ_MAX_FOOTER	(256u << 20)
#define PQ_MAX_PAGE	(256u << 20)
#define PQ_MAX_HEADER	(16u << 20)
#define PQ_MAX_DEPTH	64
#define PQ_MAX_PAGE_ROWS (1 << 24)

enum { PQ_BYTE_ARRAY = 6 };
enum { PQ_REQUIRED = 0, PQ_OPTIONAL = 1, PQ_REPEATED = 2 };
enum { PQ_PLAIN = 0, PQ_PLAIN_DICT = 2, PQ_RLE = 3, PQ_DELTA_BINARY = 5,
	PQ_DELTA_LENGTH = 6, PQ_DELTA_BYTES = 7, PQ_RLE_DICT = 8 };
enum { PQ_DATA_PAGE = 0, PQ_INDEX_PAGE = 1, PQ_DICT_PAGE = 2,
	PQ_DATA_PAGE_V2 = 3 };

/* The chosen column in one row group. */
struct pq_chunk {
	int64_t		 rows;
	int64_t		 rg_off, rg_len;	/* the row group's bytes */
	int64_t		 data_off, dict_off;	/* dict_off 0: none */
	int64_t		 comp_size;
	int64_t		 nvalues;
	int32_t		 codec;
	int32_t		 type;
	int		 external;		/* file_path set */
};

struct ovl_pq_file {
	struct ovl_pq_io io;
	unsigned char	*footer;
	uint32_t	 flen;
	uint64_t	 fstart;		/* footer's first byte */
	struct pq_chunk	*rg;
	uint32_t	 nrg;
	/* the column */
	char		*column;		/* NULL: listing only */
	uint32_t	 leaf;			/* its index among leaves */
	uint32_t	 nleaves;
	int		 max_def;
	char		*columns;		/* every leaf, for messages */
};

/* ---- Thrift compact protocol ---------------------------------------- */

enum { TT_STOP = 0, TT_TRUE = 1, TT_FALSE = 2, TT_BYTE = 3, TT_I16 = 4,
	TT_I32 = 5, TT_I64 = 6, TT_DOUBLE = 7, TT_BINARY = 8, TT_LIST = 9,
	TT_SET = 10, TT_MAP = 11, TT_STRUCT = 12 };

struct tr {
	const uint8_t	*p, *b, *e;
	int		 err;		/* 1: truncated or malformed */
};

static inline uint64_t
tr_varint(struct tr *t)
{
	uint64_t v = 0;
	int sh = 0;

	while (t->p < t->e && sh < 70) {
		uint8_t c = *t->p++;

		if (sh < 64)
			v |= (uint64_t)(c & 0x7f) << sh;
		if (!(c & 0x80))
			return v;
		sh += 7;
	}
	t->err = 1;
	return 0;
}

static inline int64_t
tr_int(struct tr *t)
{
	uint64_t v = tr_varint(t);

	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* The next field's type (TT_STOP at the struct's end); *id follows it. */
static inline int
tr_field(struct tr *t, int16_t *id)
{
	uint8_t c;

	if (t->p >= t->e) {
		t->err = 1;
		return TT_STOP;
	}
	c = *t->p++;
	if (c == 0)
		return TT_STOP;
	if (c >> 4)
		*id = (int16_t)(*id + (c >> 4));
	else
		*id = (int16_t)tr_int(t);
	return c & 15;
}

/* A list header: the element type, *n elements (bounded by the bytes). */
static inline int
tr_list(struct tr *t, uint32_t *n)
{
	uint8_t c;
	uint64_t k;

	if (t->p >= t->e) {
		t->err = 1;
		*n = 0;
		return 0;
	}
	c = *t->p++;
	k = c >> 4;
	if (k == 15)
		k = tr_varint(t);
	if (k > (uint64_t)(t->e - t->p)) {	/* every element takes a byte */
		t->err = 1;
		k = 0;
	}
	*n = (uint32_t)k;
	return c & 15;
}

/* A binary or string: *n bytes at the returned pointer. */
static inline const uint8_t *
tr_bin(struct tr *t, uint32_t *n)
{
	uint64_t k = tr_varint(t);
	const uint8_t *p = t->p;

	if (k > (uint64_t)(t->e - t->p)) {
		t->err = 1;
		*n = 0;
		return t->p;
	}
	t->p += k;
	*n = (uint32_t)k;
	return p;
}

void	ovl_pq_tr_skip(struct tr *t, int type, int depth);

#endif
