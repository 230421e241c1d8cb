/*
 * spm: SentencePiece models (tokenizer.model) through Debian's
 * libsentencepiece, the library's own implementation: Llama 2, Mistral,
 * Gemma and every other model that ships one. A thin C shim over its C++
 * API (spm.cc), the only C++ in overlord.
 *
 * Text is encoded as SentencePieceProcessor::Encode gives it: the model's
 * normalizer, pieces, byte fallback; special (control) tokens in text are
 * plain text, as the library treats them. A handle is used by one thread.
 *
 * The shim is a shared object of its own (ovl-spm.so, installed in
 * $(pkglibdir)), loaded by spm-dl.c at the first ovl_spm_open (lib/dl.h): a
 * process with another tokenizer maps neither libsentencepiece nor
 * libstdc++. ovl_spm_open says so when the shim or the library is missing.
 */
#ifndef OVL_SPM_H
#define OVL_SPM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ovl_spm;

/* Load a model file; NULL with a message (naming the file) in err. */
struct ovl_spm *ovl_spm_open(const char *path, char *err, size_t errlen);
void	ovl_spm_free(struct ovl_spm *s);
/* "sentencepiece:" and 16 hex digits of the file's XXH64. */
const char *ovl_spm_name(const struct ovl_spm *s);
uint32_t ovl_spm_vocab(const struct ovl_spm *s);
/* The model's end-of-sentence id, or -1 when it has none. */
int64_t	ovl_spm_eos(const struct ovl_spm *s);
/* The id of a piece by its text ("</s>", "<0x0A>"), or -1. */
int64_t	ovl_spm_piece_id(const struct ovl_spm *s, const char *piece);
/*
 * Append the ids of text[0..n) (valid UTF-8) through *out_ids (grown with
 * realloc; *cap its capacity) from index *len on: 0, or -1 with the
 * library's message in err.
 */
int	ovl_spm_encode(struct ovl_spm *s, const char *text, size_t n,
	    uint32_t **out_ids, size_t *len, size_t *cap, char *err,
	    size_t errlen);
/* The text of ids: a malloc'd string (length in *outlen), or NULL. */
char	*ovl_spm_decode(const struct ovl_spm *s, const uint32_t *ids, size_t n,
	    size_t *outlen);

/*
 * What the shim exports: one table, "ovl_spm_api", of the functions above
 * (spm-dl.c forwards each call). OVL_SPM_ABI changes with the table.
 */
#define OVL_SPM_ABI	1
struct ovl_spm_api {
	int	  abi;
	struct ovl_spm *(*open)(const char *, char *, size_t);
	void	(*free)(struct ovl_spm *);
	const char *(*name)(const struct ovl_spm *);
	uint32_t (*vocab)(const struct ovl_spm *);
	int64_t	(*eos)(const struct ovl_spm *);
	int64_t	(*piece_id)(const struct ovl_spm *, const char *);
	int	(*encode)(struct ovl_spm *, const char *, size_t, uint32_t **,
		    size_t *, size_t *, char *, size_t);
	char	*(*decode)(const struct ovl_spm *, const uint32_t *, size_t,
		    size_t *);
};

#ifdef __cplusplus
}
#endif

#endif
