/*
 * hf-int: what hf.c (model, added tokens, encode, decode) and hf-pre.c
 * (normalizers and pre-tokenizers) share. Not for tools.
 */
#ifndef OVL_HF_INT_H
#define OVL_HF_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "bpe.h"
#include "buf.h"
#include "pretok.h"

#define HF_NONE	UINT32_MAX

enum hf_norm_kind { HN_NFC, HN_NFD, HN_NFKC, HN_NFKD, HN_REPLACE, HN_PREPEND,
	HN_STRIP };

struct hf_norm {
	enum hf_norm_kind kind;
	char		*a, *b;		/* Replace: pattern, content; Prepend: a */
	size_t		 alen, blen;
	int		 left, right;	/* Strip */
};

enum hf_pre_kind { HP_SPLIT, HP_BYTELEVEL, HP_METASPACE };

/* How a split keeps what its pattern matched (HF's SplitDelimiterBehavior). */
enum hf_behavior { HB_REMOVED, HB_ISOLATED, HB_PREVIOUS, HB_NEXT,
	HB_CONTIGUOUS };

struct hf_pre {
	enum hf_pre_kind kind;
	enum hf_behavior behavior;
	int		 invert;
	struct ovl_pretok *re;		/* a regex pattern (or NULL) */
	char		*lit;		/* a string pattern, Metaspace's char */
	size_t		 litlen;
	int		 prefix_space;	/* ByteLevel add_prefix_space */
	int		 prepend;	/* Metaspace: 0 never, 1 first, 2 always */
	int		 msplit;	/* Metaspace split */
};

/* A piece of the pre-tokenized text: bytes [off, off + len) of a buffer. */
struct hf_piece {
	uint32_t	off, len;
	uint32_t	first;		/* starts at the segment's offset 0 */
};

struct hf_pieces {
	struct hf_piece	*p;
	size_t		 len, cap;
};

/* One side of the text pipeline: normalizers and pre-tokenizers. */
struct hf_text {
	struct hf_norm	*norm;
	size_t		 nnorm;
	struct hf_pre	*pre;
	size_t		 npre;
	int		 bytelevel;	/* a ByteLevel pre-tokenizer is in */
	int		 prepends;	/* a "▁" is put before the text */
	/* scratch */
	struct ovl_buf	 buf[2];
	struct hf_pieces pc[2];
	struct hf_pieces cut;		/* matches and gaps of one piece */
	int32_t		*cps;		/* code points for normalization */
	size_t		 cpcap;
	char		 err[200];
};

/* Parse the "normalizer" and "pre_tokenizer" members. 0, or -1 with err. */
int	ovl_hf__text_load(struct hf_text *t, json_t *norm, json_t *pre,
	    char *err, size_t errlen);
void	ovl_hf__text_free(struct hf_text *t);
/* 1 when the normalizers change nothing (none, or an empty Sequence). */
int	ovl_hf__text_no_norm(const struct hf_text *t);
/*
 * Normalize and pre-tokenize s[0..n) (valid UTF-8; first: it starts the
 * document). The pieces are in *pieces over the bytes in *base. 0, or -1
 * with a message in t->err (a regex engine failure).
 */
int	ovl_hf__text_run(struct hf_text *t, const unsigned char *s, size_t n,
	    int first, const unsigned char **base,
	    const struct hf_pieces **pieces);

void	ovl_hf__pieces_push(struct hf_pieces *v, uint32_t off, uint32_t len,
	    uint32_t first);

#endif
