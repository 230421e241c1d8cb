/*
 * jsonl: the fast field extractor for JSON lines.
 *
 * One pass over a line validates the whole of it as JSON and finds the
 * string at a dotted field path ("text", "meta.title"). It accepts and
 * rejects exactly what jansson's json_loadb(line, n, 0) does (the oracle
 * of tests/unit/t-jsonl.c): RFC 8259 JSON with an object or array at the
 * top, valid UTF-8 throughout, no \u0000 in any string, no lone
 * surrogate escapes, integers within int64, reals within double range,
 * nesting at most 2048 deep; and, as jansson's lexer does, one NUL byte
 * right after a number or a literal is ignored. For a duplicated key the
 * last one wins, as in jansson. Nothing is allocated per line once scratch
 * has grown.
 */
#ifndef OVL_JSONL_H
#define OVL_JSONL_H

#include <stddef.h>

#include "buf.h"

#define OVL_JSONL_MAX_KEYS	16	/* components of a field path */
#define OVL_JSONL_MAX_DEPTH	2048	/* as jansson's JSON_PARSER_MAX_DEPTH */

/* A compiled field path: "a.b.c" names key c of object b of object a. */
struct ovl_jsonl_path {
	size_t	 n;
	char	*key[OVL_JSONL_MAX_KEYS];
	size_t	 klen[OVL_JSONL_MAX_KEYS];
	size_t	 maxklen;
};

/*
 * Compile a dotted path: components separated by '.', none empty, at most
 * OVL_JSONL_MAX_KEYS. 0, or -1 with errno EINVAL.
 */
int	ovl_jsonl_path_init(struct ovl_jsonl_path *p, const char *spec);
void	ovl_jsonl_path_free(struct ovl_jsonl_path *p);

enum {
	OVL_JSONL_OK = 0,	/* the field is a string: val, len */
	OVL_JSONL_MISSING = 1,	/* valid JSON, no such field */
	OVL_JSONL_NOTSTRING = 2, /* valid JSON, the field is not a string: type */
	OVL_JSONL_INVALID = 3	/* not valid JSON: err at err_off */
};

struct ovl_jsonl_result {
	const char	*val;	/* OK: the string, unescaped, valid UTF-8, no NUL */
	size_t		 len;
	const char	*type;	/* NOTSTRING: "object", "array", "number", ... */
	const char	*err;	/* INVALID: a static message */
	size_t		 err_off; /* INVALID: byte offset in the line */
};

/*
 * Validate line[0..n) and find the field. val points into line when the
 * string had no escapes, else into scratch (valid until the next call).
 * Returns one of the OVL_JSONL_* codes above, filling r.
 */
int	ovl_jsonl_extract(const struct ovl_jsonl_path *p, const char *line,
	    size_t n, struct ovl_buf *scratch, struct ovl_jsonl_result *r);
/*
 * The same, without a copy (a long document is held once): a
 * field with escapes is unescaped over its own bytes in line (never
 * longer than its escaped form), and val points there. Nothing else of
 * line changes.
 */
int	ovl_jsonl_extract_inplace(const struct ovl_jsonl_path *p, char *line,
	    size_t n, struct ovl_jsonl_result *r);

#endif
