/*
 * bpe: byte-pair encoding with tiktoken's rank files, giving exactly the
 * ids of OpenAI's tiktoken (r50k/gpt2, p50k, cl100k, o200k).
 *
 * A rank file has one "BASE64-TOKEN RANK" line per token (the format
 * tiktoken caches, e.g. cl100k_base.tiktoken); the rank is the token id and
 * the merge priority. Text is cut into pieces by a pre-tokenizer regex
 * (PCRE2, UTF and Unicode properties, JIT); a piece that is a token maps to
 * its id, any other piece is merged pairwise, lowest rank first (leftmost
 * among equals), as tiktoken does. Text the regex does not match is
 * dropped, as tiktoken drops it (the built-in patterns match everything).
 *
 * A handle is used by one thread. Encoding allocates nothing once its
 * scratch buffers have grown to the longest piece seen.
 */
#ifndef OVL_BPE_H
#define OVL_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct ovl_bpe;

/* What to do with special-token text ("<|endoftext|>") inside a document. */
enum ovl_bpe_special {
	OVL_BPE_PLAIN,	/* encode it as ordinary text (tiktoken disallowed_special=()) */
	OVL_BPE_ERROR,	/* refuse the document (tiktoken's default) */
	OVL_BPE_ALLOW,	/* emit the special token's id (allowed_special="all") */
	OVL_BPE_STRIP	/* as ALLOW, without the special ids */
};

/* Limits on a rank file. */
#define OVL_BPE_TOKEN_MAX	4096		/* bytes in one token */
#define OVL_BPE_RANK_MAX	((1u << 24) - 1)	/* largest rank or special id */

/*
 * Load the rank file at path. pattern is NULL (the encoding is guessed from
 * the file's name: r50k, gpt2, p50k, cl100k or o200k in it), an encoding
 * name ("r50k", "gpt2", "p50k", "cl100k", "o200k", also with "_base"), or a
 * PCRE2 regex. Special tokens come from the encoding's name (named or
 * guessed); a regex with a file whose name tells nothing gets one special
 * token, "<|endoftext|>", with id max-rank + 1. Every single byte must be a
 * token. Returns NULL with a message in err[0..errlen) (file:line for a bad
 * line, no program prefix) on failure.
 */
struct ovl_bpe *ovl_bpe_open(const char *path, const char *pattern, char *err,
	    size_t errlen);
void	ovl_bpe_free(struct ovl_bpe *b);

/* The encoding's short name ("cl100k"), or "custom" for a regex. */
const char *ovl_bpe_name(const struct ovl_bpe *b);
/* One more than the largest id, special tokens included. */
uint32_t ovl_bpe_vocab(const struct ovl_bpe *b);
/* Number of tokens in the rank file. */
size_t	ovl_bpe_ntokens(const struct ovl_bpe *b);
/* Id of a special token's text, or -1. */
int64_t	ovl_bpe_special_id(const struct ovl_bpe *b, const char *text);
/* The special tokens: text of the i-th (i < count), its id in *id; NULL past the end. */
const char *ovl_bpe_special_at(const struct ovl_bpe *b, size_t i, uint32_t *id);
/* Bytes of token id (a rank or a special token), length in *len; NULL when unknown. */
const unsigned char *ovl_bpe_token(const struct ovl_bpe *b, uint32_t id,
	    size_t *len);

void	ovl_bpe_set_special(struct ovl_bpe *b, enum ovl_bpe_special policy);
/*
 * 1 (the default): the ASCII scanner of the built-in encodings finds what
 * it can, PCRE2 the rest (pretok.h); 0: PCRE2 finds every piece (for tests).
 */
void	ovl_bpe_set_scanner(struct ovl_bpe *b, int on);
/* The policies' names, NULL-terminated, in enum ovl_bpe_special order. */
extern const char *const ovl_bpe_special_names[];
/* A policy by its name: 0, or -1. */
int	ovl_bpe_special_parse(const char *s, enum ovl_bpe_special *out);

/*
 * Append the ids of text[0..n) to out. Returns 0, or -1 with out unchanged,
 * *bad_off the byte offset of the trouble and ovl_bpe_error() saying what
 * it was: invalid UTF-8 (checked before matching), special-token text
 * under OVL_BPE_ERROR, or a failure of the regex engine (such as its match
 * limit, with a user pattern).
 */
int	ovl_bpe_encode(struct ovl_bpe *b, const char *text, size_t n,
	    struct ovl_u32vec *out, size_t *bad_off);
/* Description of the last failed encode ("invalid UTF-8", ...). */
const char *ovl_bpe_error(const struct ovl_bpe *b);

/*
 * Merge one piece by rank, without the pre-tokenizer or the cache (for
 * tests): appends its ids to out. Exposed so tests can compare the two
 * merge algorithms: large != 0 forces the heap one.
 */
void	ovl_bpe_merge(struct ovl_bpe *b, const unsigned char *piece, size_t n,
	    int large, struct ovl_u32vec *out);

#endif
