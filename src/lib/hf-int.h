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
#define HF_CHAIN_MAX	4
#define HF_UNSAFE_MAX	64
#define HF_TMPL_MAX	8	/* special tokens on either side of a sequence */

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
	/*
	 * When every pre-tokenizer is a regex Split, Isolated, or changes
	 * nothing (ByteLevel without a prefix space or its regex): the
	 * Splits' regexes in order. The pieces of chain[0] are its matches
	 * and the gaps between them, each cut so by chain[1], and on.
	 */
	struct ovl_pretok *chain[HF_CHAIN_MAX];
	size_t		 nchain;
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

/* Normalize s[0..n): the text in [*out, *out + *outlen). */
void	ovl_hf__text_norm(struct hf_text *t, const unsigned char *s, size_t n,
	    const unsigned char **out, size_t *outlen);

void	ovl_hf__pieces_push(struct hf_pieces *v, uint32_t off, uint32_t len,
	    uint32_t first);

/* ---- the file (hf-json.c) ---------------------------------------------- */

/* Bytes of the file: a JSON value's text. */
struct hf_span {
	const char	*p;
	size_t		 n;
};

struct hf_doc {
	json_t		*root;		/* the file but model.vocab and .merges */
	struct hf_span	 vocab, merges;	/* their text (p NULL: not an object,
					   an array; then in root, if there) */
	const unsigned char *pos, *end;	/* where a scan is */
	struct ovl_buf	 buf, buf2;	/* decoded strings */
};

/*
 * Read a tokenizer.json's text data[0..len) (kept while d is used): 0, or
 * -1 when it is not well-formed JSON or not an object (jansson's own parse
 * of the whole text then says what and where).
 */
int	ovl_hf__doc_parse(struct hf_doc *d, const char *data, size_t len);
void	ovl_hf__doc_free(struct hf_doc *d);
/*
 * The next entry of model.vocab (d->vocab set): 1 with its key in
 * [*key, *key + *kn) (valid until the next call) and its value in *id (-1
 * when it is no integer of 18 digits or less); 0 after the last; -1 when
 * the text is not well-formed. ovl_hf__doc_rewind starts a new scan.
 */
int	ovl_hf__vocab_next(struct hf_doc *d, const unsigned char **key,
	    size_t *kn, int64_t *id);
/*
 * The next entry of model.merges: 2 with its sides (from "A B" or ["A",
 * "B"]) in a[0..an) and b[0..bn), valid until the next call; 1 for an
 * entry of another shape; 0 after the last; -1 when not well-formed.
 */
int	ovl_hf__merges_next(struct hf_doc *d, const unsigned char **a,
	    size_t *an, const unsigned char **b, size_t *bn);
void	ovl_hf__doc_rewind(struct hf_doc *d);

/* ---- the model (hf.c loads it, hf-bpe.c merges) ---------------------- */

struct added {
	char		*s;
	size_t		 n;
	uint32_t	 id;
	uint8_t		 special, normalized;
};

/* A byte trie over the added tokens' texts. */
struct tnode {
	uint32_t	child, sib;	/* 0: none (node 0 is the root) */
	uint32_t	added;		/* index + 1 of the token ending here */
	unsigned char	c;
};

struct hf_sym {
	uint32_t	id, prev, next, len;
};

struct hf_hentry {
	uint32_t	rank, pos, id;
};

/* A vocabulary slot: the hash's high half, id + 1 (0: empty), the bytes. */
struct hf_vslot {
	uint32_t	tag, id1;
	uint32_t	len, off;	/* in the arena */
};

/* A merge: the pair (a << 32 | b; UINT64_MAX: empty), its rank, the new id. */
struct hf_mslot {
	uint64_t	key;
	uint32_t	rank, id;
};

struct ovl_bpe_cslot;

struct ovl_hf {
	char		 name[40];
	uint32_t	 nids;
	uint32_t	*toff, *tlen;	/* id -> bytes in arena */
	struct ovl_buf	 arena;
	struct hf_vslot	*slot;		/* vocab bytes -> id */
	size_t		 smask;
	struct hf_vslot	*rslot;		/* byte level: the tokens outside the
					   byte map, by their text -> id */
	size_t		 rmask, nraw;
	struct hf_mslot	*merge;
	size_t		 mmask;
	/*
	 * A byte-level model with a token for every byte (bytes_all 1; 0 not
	 * yet known, -1 not so) has, made at its first encode: pair, bytes a << 8
	 * | b -> the merge of their tokens (rank << 32 | id, UINT64_MAX:
	 * none); one and two, the ids of a piece of one or two bytes
	 * (second << 32 | first, second HF_NONE when there is one).
	 */
	int		 bytes_all;
	uint64_t	*pair, *two;
	uint32_t	 one[256];
	int		 bytelevel, byte_fallback, fuse_unk, ignore_merges;
	/*
	 * Not byte level, merges not ignored (mseg 1): the fast way cuts a
	 * piece before a "\u2581" that follows a character c which is a
	 * token and never stands before "\u2581" in a token (so no merge
	 * joins across: the parts merge as the whole does). mascii: c < 128
	 * is such; unsafe[0..nunsafe): the other characters that stand
	 * before it in a token.
	 */
	int		 mseg;
	uint8_t		 mascii[128];
	char		 unsafe[HF_UNSAFE_MAX][5];
	size_t		 nunsafe;
	uint32_t	 unk;
	uint32_t	 byte_id[256];
	struct added	*added;
	size_t		 nadded;
	struct tnode	*trie;
	size_t		 ntrie, trie_cap;
	unsigned char	 first[256];	/* 1: an added token starts with it */
	int		 first1;	/* the one such byte; 256: none, -1:
					   several */
	int		 any_normalized;
	/* the post_processor's template for one sequence (hf-post.c) */
	uint32_t	 pre[HF_TMPL_MAX], suf[HF_TMPL_MAX];
	size_t		 npre, nsuf;
	struct hf_text	 text;
	enum ovl_bpe_special special;
	/* the merging (hf-bpe.c) */
	int		 fast;		/* token look-up, cache, scan merge */
	uint8_t		*self;		/* id -> 0 unknown, 1 a piece of its
					   bytes merges to it, 2 it does not */
	struct ovl_bpe_cslot *cache;
	struct hf_sym	*sym;
	size_t		 symcap;
	struct hf_hentry *heap;
	size_t		 heapcap;
	struct ovl_u32vec tmp;
	const char	*error;
	char		 errbuf[240];
};

/* Size the vocabulary table for nvocab tokens (h->nids is set). */
void	ovl_hf__vocab_init(struct ovl_hf *h, size_t nvocab);
/* Size the merge table for nmerges merges. */
void	ovl_hf__merge_init(struct ovl_hf *h, size_t nmerges);
/* Free what the two above and the merging allocated. */
void	ovl_hf__tables_free(struct ovl_hf *h);
/*
 * Index token id (its bytes are in the arena) for look-up by bytes (raw
 * 0) or, in a byte-level model, as a token outside the byte map (raw 1,
 * its text in the arena): 0, or -1 when a token of those bytes is in.
 */
int	ovl_hf__vocab_index(struct ovl_hf *h, uint32_t id, int raw);
/* The id of the token with bytes (raw: text) p[0..n), or HF_NONE. */
uint32_t ovl_hf__vocab_find(const struct ovl_hf *h, const unsigned char *p,
	    size_t n, int raw);
/*
 * The hash ovl_hf__vocab_findh takes for bytes p[0..n); the table slot
 * it starts at is fetched into the cache meanwhile.
 */
uint64_t ovl_hf__vocab_hash(const struct ovl_hf *h, const unsigned char *p,
	    size_t n);
/* ovl_hf__vocab_find (raw 0) of bytes whose hash is hv. */
uint32_t ovl_hf__vocab_findh(const struct ovl_hf *h, const unsigned char *p,
	    size_t n, uint64_t hv);
/* Merge (a, b) -> id with rank; a later duplicate pair wins, as in HF. */
void	ovl_hf__merge_put(struct ovl_hf *h, uint32_t a, uint32_t b,
	    uint32_t rank, uint32_t id);
/*
 * Append the ids of one pre-tokenized piece p[0..n) to out, as HF's
 * BPE::tokenize gives them: the lowest-ranked merge first, the leftmost
 * among equals.
 */
void	ovl_hf__piece(struct ovl_hf *h, const unsigned char *p, size_t n,
	    struct ovl_u32vec *out);
/*
 * The same ids written to dst, which has room for n (a piece gives at
 * most one id a byte): their count.
 */
size_t	ovl_hf__piece_to(struct ovl_hf *h, const unsigned char *p, size_t n,
	    uint32_t *dst);
/*
 * ovl_hf__piece_to of a piece whose hash (ovl_hf__vocab_hash) is hv when
 * it is longer than two bytes (hv unused, the hash made here, else).
 */
size_t	ovl_hf__piece_h(struct ovl_hf *h, const unsigned char *p, size_t n,
	    uint64_t hv, uint32_t *dst);
/* Make the byte tables (bytes_all 0 before), the vocabulary and merges in. */
void	ovl_hf__tables_ready(struct ovl_hf *h);

/*
 * Read the post_processor (null, ByteLevel, TemplateProcessing,
 * BertProcessing, RobertaProcessing or a Sequence of them) into h->pre and
 * h->suf: the special tokens HF's encode(add_special_tokens=True) puts
 * before and after a single sequence. 0, or -1 with a message.
 */
int	ovl_hf__post_load(struct ovl_hf *h, json_t *pp, char *msg,
	    size_t msglen);

#endif
