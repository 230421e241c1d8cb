/*
 * tok: tokenizers behind one small interface.
 *
 * A spec names the tokenizer: "bytes" (UTF-8 bytes as ids 0..255, end of
 * document 256, vocabulary 257), "tiktoken:FILE[:PATTERN]" (BPE, see
 * bpe.h), "hf:FILE" (a Hugging Face tokenizer.json, see hf.h) or
 * "sentencepiece:FILE" (a tokenizer.model, through libsentencepiece,
 * see spm.h). A tokenizer is used by one thread; encoding allocates
 * nothing once its buffers have grown.
 */
#ifndef OVL_TOK_H
#define OVL_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct ovl_tok;

/*
 * Open the tokenizer a spec names. On failure returns NULL and writes a
 * message (no program prefix) into err[0..errlen).
 */
struct ovl_tok *ovl_tok_open(const char *spec, char *err, size_t errlen);
void	ovl_tok_free(struct ovl_tok *t);
/* "bytes", "tiktoken:cl100k", ...: what the stream META records. */
const char *ovl_tok_name(const struct ovl_tok *t);
/*
 * The file the tokenizer was loaded from (NULL for "bytes"), with its size
 * and XXH64 content hash (seed 0) in *size and *hash. The file is hashed
 * before it is loaded and must be the same file (inode, size, mtime) after
 * the load, or ovl_tok_open fails: what was hashed is what was loaded.
 */
const char *ovl_tok_file(const struct ovl_tok *t, uint64_t *size,
	    uint64_t *hash);
/* Ids are below this (special tokens included). */
uint32_t ovl_tok_vocab(const struct ovl_tok *t);
#define OVL_TOK_NONE	UINT32_MAX

/*
 * The end-of-document id appended after every document: OVL_TOK_NONE when
 * the tokenizer has no usual one (a tokenizer.json of an unknown model)
 * and none was set.
 */
uint32_t ovl_tok_eod(const struct ovl_tok *t);
/*
 * Choose the end-of-document token by its text ("<|endoftext|>") or its
 * decimal id. 0, or -1 with a message in err when it is not known.
 */
int	ovl_tok_set_eod(struct ovl_tok *t, const char *name, char *err,
	    size_t errlen);
/*
 * A beginning-of-document token put before every document, by text
 * ("<|begin_of_text|>") or decimal id, as for ovl_tok_set_eod. There is
 * none until one is set: ovl_tok_bos() is OVL_TOK_NONE.
 */
int	ovl_tok_set_bos(struct ovl_tok *t, const char *name, char *err,
	    size_t errlen);
/*
 * The beginning-of-document token: the one set, else (add-special-tokens
 * on, the default) the one a tokenizer.json's post_processor puts before a
 * sequence, else OVL_TOK_NONE.
 */
uint32_t ovl_tok_bos(const struct ovl_tok *t);
/*
 * 1 (the default): a tokenizer.json's post_processor gives the
 * beginning-of-document token, as HF's encode(add_special_tokens=True)
 * does; 0: only ovl_tok_set_bos does.
 */
void	ovl_tok_set_add_special(struct ovl_tok *t, int on);
/*
 * Whether the post_processor's template is what a document becomes here,
 * with the tokens as set: at most one token before it (or one set with
 * ovl_tok_set_bos) and none after it but the end-of-document token. 0, or
 * -1 with a message in err.
 */
int	ovl_tok_check_template(const struct ovl_tok *t, char *err,
	    size_t errlen);
/*
 * A token by its text (a special or added token: "<|image_pad|>") or its
 * decimal id, into *id: 0, or -1 with a message naming what it is for
 * ("image") in err.
 */
int	ovl_tok_lookup(const struct ovl_tok *t, const char *what,
	    const char *name, uint32_t *id, char *err, size_t errlen);
/*
 * Append the text of ids[0..n) to out: 0, or -1 (out unchanged) when an id
 * is not a token.
 */
int	ovl_tok_decode(const struct ovl_tok *t, const uint32_t *ids, size_t n,
	    struct ovl_buf *out);

/*
 * Append the ids of text[0..n) to out (the end-of-document id is not
 * appended). Returns 0, or -1 when text is not valid UTF-8, with the byte
 * offset of the first invalid byte in *bad_off and out unchanged. A
 * tiktoken tokenizer also fails (-1, offset in *bad_off) on special-token
 * text under the "error" policy; ovl_tok_error() tells which.
 */
int	ovl_tok_encode(struct ovl_tok *t, const char *text, size_t n,
	    struct ovl_u32vec *out, size_t *bad_off);

/*
 * Policy for special-token text ("<|endoftext|>") inside a document:
 * "plain" (the default: encode it as ordinary text), "error" (encode
 * fails at its offset), "allow" (emit the special id), "strip" (drop it).
 * 0, or -1 with a message in err (unknown policy, or a tokenizer without
 * special tokens in text: "bytes" takes only "plain").
 */
int	ovl_tok_set_special(struct ovl_tok *t, const char *policy, char *err,
	    size_t errlen);
/*
 * What the last failed ovl_tok_encode met, for the message: "invalid
 * UTF-8", "special token text '<|endoftext|>'", ...
 */
const char *ovl_tok_error(const struct ovl_tok *t);

/*
 * 1 when the last failed ovl_tok_encode failed for the tokenizer, not for
 * the text: its pre-tokenizer pattern could not run (pretok.h's
 * OVL_PRETOK_FAILED), as it may on any text. Not a bad record.
 */
int	ovl_tok_fatal(const struct ovl_tok *t);
/*
 * Encode a probe text (about 70 KB: a paragraph of many scripts, then
 * long runs of letters, blanks, digits, newlines, punctuation, Latin and
 * CJK letters), so that a pre-tokenizer pattern that cannot run fails
 * now: 0, or -1 with a message in err. "bytes" has nothing to try.
 */
int	ovl_tok_probe(struct ovl_tok *t, char *err, size_t errlen);

/*
 * 1 (the default): the fast way of a tiktoken or hf: tokenizer; 0: the
 * general way, with the same ids (for tests and benchmarks: bpe.h's
 * ovl_bpe_set_scanner, hf.h's ovl_hf_set_fast). Other tokenizers have one.
 */
void	ovl_tok_set_fast(struct ovl_tok *t, int on);

/* Length of the longest valid UTF-8 prefix of s[0..n): n when all valid. */
size_t	ovl_utf8_valid(const char *s, size_t n);

/* ---- for implementations ---------------------------------------- */

struct ovl_tok_ops {
	int	(*encode)(void *impl, const char *text, size_t n,
		    struct ovl_u32vec *out, size_t *bad_off);
	int	(*decode)(void *impl, const uint32_t *ids, size_t n,
		    struct ovl_buf *out);
	/* Id of a special token's text, or -1. May be NULL. */
	int64_t	(*special)(void *impl, const char *name);
	void	(*free)(void *impl);
	/* Set the special-text policy (see ovl_tok_set_special). May be NULL. */
	int	(*set_special)(void *impl, const char *policy, char *err,
		    size_t errlen);
	/* The last failure's description. May be NULL ("invalid UTF-8"). */
	const char *(*error)(void *impl);
	/* See ovl_tok_set_fast. May be NULL. */
	void	(*set_fast)(void *impl, int on);
};

struct ovl_tok {
	const struct ovl_tok_ops *ops;
	void		*impl;
	char		*name;
	char		*file;		/* see ovl_tok_file, or NULL */
	uint64_t	 file_size;
	uint64_t	 file_hash;
	uint32_t	 vocab;
	uint32_t	 eod;
	uint32_t	 bos;		/* set; OVL_TOK_NONE: not set */
	/* a tokenizer.json's post_processor: tokens before and after */
	const uint32_t	*tpre, *tsuf;
	size_t		 ntpre, ntsuf;
	int		 add_special;
};

#endif
