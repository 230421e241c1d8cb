/*
 * hf: Hugging Face tokenizer.json files (the "tokenizers" library's
 * format), giving the ids of HF's own encode(text, add_special_tokens =
 * false).
 *
 * What is read: a BPE model, byte-level (Llama 3, Qwen 2/2.5/3, DeepSeek
 * V3, GPT-OSS) or over characters with byte fallback and the metaspace
 * (Gemma, Llama 2, Mistral); the normalizers NFC, NFD, NFKC, NFKD,
 * Replace (string pattern), Prepend, Strip and Sequence; the
 * pre-tokenizers Split (regex or string, every behaviour, invert),
 * ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit and Sequence;
 * added tokens, special or not. Anything else a file uses (another model,
 * normalizer or pre-tokenizer, a BPE option, an added token's lstrip) is
 * an error naming it: never a silent difference.
 *
 * Regexes run in PCRE2 (HF runs Oniguruma; the conformance test compares
 * the two on every model it names); a Split regex whose text pretok.h
 * knows (Llama 3's, Qwen's, GPT-OSS's, DeepSeek V3's) runs on its
 * scanner. Normalization is utf8proc's.
 *
 * A handle is used by one thread; encoding allocates nothing once its
 * scratch buffers have grown.
 */
#ifndef OVL_HF_H
#define OVL_HF_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"
#include "buf.h"

struct ovl_hf;

/*
 * Load a tokenizer.json. NULL with a message in err (naming the file and,
 * for an unsupported part, the component) on failure.
 */
struct ovl_hf *ovl_hf_open(const char *path, char *err, size_t errlen);
void	ovl_hf_free(struct ovl_hf *h);

/* "hf:" and 16 hex digits of the file's XXH64: what META records. */
const char *ovl_hf_name(const struct ovl_hf *h);
/* One more than the largest id (added tokens included). */
uint32_t ovl_hf_vocab(const struct ovl_hf *h);
/* Id of a token by its text: an added token, else a vocabulary entry; -1. */
int64_t	ovl_hf_token_id(const struct ovl_hf *h, const char *text);
/* The usual end-of-document token of the file's model, or -1. */
int64_t	ovl_hf_default_eod(const struct ovl_hf *h);
/*
 * The special tokens the file's post_processor puts before (after 0) or
 * after (after 1) a single sequence, as HF's encode with
 * add_special_tokens=True: their count, the ids in *ids.
 */
size_t	ovl_hf_template(const struct ovl_hf *h, int after,
	    const uint32_t **ids);

/*
 * 1 (the default): the fast way, the same ids: a built-in pattern's
 * scanner (pretok.h), a piece that is a token found with one look-up, the
 * cache of merged pieces; 0: the general way, every piece from PCRE2 and
 * merged with a heap as HF merges (for tests and benchmarks).
 */
void	ovl_hf_set_fast(struct ovl_hf *h, int on);

/* Special added tokens in text: plain (as text), error, allow, strip. */
void	ovl_hf_set_special(struct ovl_hf *h, enum ovl_bpe_special policy);

/*
 * Append the ids of text[0..n) to out. 0, or -1 with out unchanged,
 * *bad_off the byte offset and ovl_hf_error() saying what: invalid UTF-8,
 * special-token text under "error", a regex engine failure.
 */
int	ovl_hf_encode(struct ovl_hf *h, const char *text, size_t n,
	    struct ovl_u32vec *out, size_t *bad_off);
const char *ovl_hf_error(const struct ovl_hf *h);

/*
 * Append the text of ids[0..n) to out, as HF's decoders give it (byte
 * level, byte fallback, the metaspace and a prepended one turned back).
 * -1 when an id is not in the vocabulary.
 */
int	ovl_hf_decode(const struct ovl_hf *h, const uint32_t *ids, size_t n,
	    struct ovl_buf *out);

#endif
