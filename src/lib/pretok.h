/*
 * pretok: the pre-tokenizer of the BPE tokenizer: cuts text into the
 * pieces tiktoken's regex finds.
 *
 * The regex runs in PCRE2 (UTF, Unicode properties, JIT). For the built-in
 * encodings (r50k/p50k, cl100k, o200k, and Qwen's variant of cl100k), and
 * for Hugging Face Split regexes that are their text, a hand-written
 * scanner finds the pieces of ASCII text itself, with exactly the regex's
 * result, and hands
 * a position to PCRE2 whenever the answer depends on a non-ASCII character.
 * A handle is used by one thread and allocates nothing while matching.
 */
#ifndef OVL_PRETOK_H
#define OVL_PRETOK_H

#include <stddef.h>

enum ovl_pretok_kind {
	OVL_PRETOK_REGEX,	/* a user's PCRE2 regex, no scanner */
	OVL_PRETOK_ONIG,	/* a regex read as Oniguruma and Rust read it
				   (\s is White_Space), no scanner */
	OVL_PRETOK_R50K,	/* r50k_base, p50k_base, gpt2 */
	OVL_PRETOK_CL100K,
	OVL_PRETOK_O200K,
	OVL_PRETOK_QWEN,	/* cl100k with one number a piece (Qwen 2 to 3) */
	/* Split regexes that get a scanner (DeepSeek V3's); these last: */
	OVL_PRETOK_DIGITS3,	/* \p{N}{1,3} */
	OVL_PRETOK_DS_CJK,	/* DeepSeek V3's CJK runs */
	OVL_PRETOK_DEEPSEEK	/* DeepSeek V3's third */
};

struct ovl_pretok;

/*
 * kind's built-in pattern, or (OVL_PRETOK_REGEX) the regex given. NULL with
 * a message in err (a bad regex, with the offset).
 */
struct ovl_pretok *ovl_pretok_open(enum ovl_pretok_kind kind,
	    const char *regex, char *err, size_t errlen);
void	ovl_pretok_free(struct ovl_pretok *p);
/* The PCRE2 pattern of a built-in kind (as adjusted for PCRE2). */
const char *ovl_pretok_pattern(enum ovl_pretok_kind kind);
/* The kind: a built-in one when an ONIG regex is one's text. */
enum ovl_pretok_kind ovl_pretok_kind(const struct ovl_pretok *p);
/* 0: every piece from PCRE2 (for tests and benchmarks); 1: the default. */
void	ovl_pretok_set_scanner(struct ovl_pretok *p, int on);

/*
 * The first piece of s[0..n) (valid UTF-8) that starts at or after pos
 * (a character boundary): returns 1 with the piece in [*ms, *me), 0 when
 * there is none, -1 when the regex engine fails (its message in err,
 * beginning with OVL_PRETOK_FAILED, such as a match limit with a user's
 * regex). Empty matches are skipped. A match past the JIT's stack (8 MiB)
 * is run again by PCRE2's interpreter, and a pattern that has no JIT code
 * ((*NO_JIT)) runs in the interpreter: the same pieces either way.
 */
#define OVL_PRETOK_FAILED	"pre-tokenizer failed"
int	ovl_pretok_next(struct ovl_pretok *p, const unsigned char *s, size_t n,
	    size_t pos, size_t *ms, size_t *me, char *err, size_t errlen);

#endif
