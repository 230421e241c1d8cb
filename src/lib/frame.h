/*
 * frame: the overlord stream format, ovl-frame(5), as pure functions on
 * memory buffers. No I/O here (see frameio.h); every function is safe on
 * any input bytes: lengths are checked before use and nothing is allocated.
 *
 * A stream is a 16-byte header followed by frames:
 *
 *   stream header  magic "\x89OVL\r\n\x1a\n", u16 major, u16 minor,
 *                  u32 CRC-32C of the first 12 bytes
 *   frame          u32 len (payload bytes, a multiple of 4),
 *                  u8 kind, u8 flags (OVL_FL_*), u16 reserved (0),
 *                  u32 CRC-32C of header bytes 0..7 and the payload,
 *                  payload
 *
 * All integers are little-endian. Frames start 4-byte aligned and token
 * arrays sit at 4-byte aligned payload offsets, so a reader can view them in
 * place. The host must be little-endian (configure checks).
 *
 * Token ids are 32-bit, or 16-bit in a DOC or SEQ frame whose flags say so
 * (minor 2): a writer takes 16 bits when its vocabulary has at most 65,536
 * ids, and every reader takes both (ovl_tok_at, ovl_tok_copy).
 */
#ifndef OVL_FRAME_H
#define OVL_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define OVL_MAGIC		"\x89OVL\r\n\x1a\n"
#define OVL_MAGIC_LEN		8
#define OVL_STREAM_HDR_LEN	16
#define OVL_FRAME_HDR_LEN	12
#define OVL_VERSION_MAJOR	1
#define OVL_VERSION_MINOR	2	/* 1: STEP frames; 2: 16-bit arrays, IMAGE frames */
/* The largest payload the format allows, and the default reader limit. */
#define OVL_FRAME_LIMIT		(1u << 30)
#define OVL_FRAME_MAX_DEFAULT	(256u << 20)

enum ovl_kind {
	OVL_META = 1,		/* key value text lines: sources, vocab, eod */
	OVL_DOC = 2,		/* one document (or what remains of one) */
	OVL_CHUNK_END = 3,	/* a source chunk has no more documents */
	OVL_SEQ = 4,		/* one packed sequence for a rank */
	OVL_BARRIER = 5,	/* checkpoint n: a step boundary */
	OVL_STATE = 6,		/* a stage's state for checkpoint n */
	OVL_END = 7,		/* clean end of stream */
	OVL_STEP = 8,		/* a rank's step is complete (minor 1) */
	OVL_IMAGE = 9		/* an image of the DOC or SEQ before (minor 2) */
};

/*
 * Frame header flags (minor 2). DOC: its token ids are u16. SEQ: its
 * tokens (OVL_FL_U16) and its position ids (OVL_FL_POS16) are u16, or it
 * has no position array at all (OVL_FL_NOPOS): its positions restart at 0
 * at every piece and are 0 in the padding, as a reader derives them from
 * cu_seqlens (ovl_seq_position_ids). A 16-bit array is padded with zeros
 * to a multiple of 4 bytes, so what follows stays 4-byte aligned.
 */
#define OVL_FL_U16	0x01u
#define OVL_FL_POS16	0x02u
#define OVL_FL_NOPOS	0x04u

/* Return codes of the parsing functions. */
enum {
	OVL_F_OK = 0,
	OVL_F_NEED = 1,		/* more bytes are needed */
	OVL_F_EMAGIC = -1,	/* not an overlord stream */
	OVL_F_EVERSION = -2,	/* unknown major version */
	OVL_F_ETOOBIG = -3,	/* frame larger than the reader's limit */
	OVL_F_ECRC = -4,	/* CRC mismatch */
	OVL_F_EHEADER = -5,	/* length not a multiple of 4, reserved bits set */
	OVL_F_EPAYLOAD = -6,	/* payload inconsistent with its kind */
	OVL_F_ETRUNC = -7,	/* end of file inside a frame or without END */
	OVL_F_EGRAMMAR = -8	/* a sound frame where the stream grammar forbids it */
};

/* A frame viewed in place; payload points into the caller's buffer. */
struct ovl_frame {
	uint8_t		 kind;
	uint8_t		 flags;
	uint32_t	 len;		/* payload bytes */
	const uint8_t	*payload;
	size_t		 size;		/* header + payload: bytes consumed */
};

/* "bad CRC", "oversized frame", ... for an OVL_F_E* code. */
const char *ovl_frame_strerror(int rc);
/* The name of a kind ("DOC"), or "UNKNOWN". */
const char *ovl_kind_name(unsigned kind);

/* Write the 16-byte stream header to out. */
void	ovl_stream_hdr_encode(uint8_t out[OVL_STREAM_HDR_LEN]);
/*
 * Check a stream header: OVL_F_OK (minor version in *minor), OVL_F_NEED when
 * n < 16, OVL_F_EMAGIC, OVL_F_ECRC or OVL_F_EVERSION.
 */
int	ovl_stream_hdr_check(const uint8_t *buf, size_t n, uint16_t *minor);

/*
 * Parse the frame at the start of buf[0..n). max bounds the payload length.
 * OVL_F_OK: *f describes it. OVL_F_NEED: f->size holds the total bytes
 * needed when the header was readable, else OVL_FRAME_HDR_LEN. Otherwise an
 * OVL_F_E* code; nothing is trusted before the CRC matched.
 */
int	ovl_frame_parse(const uint8_t *buf, size_t n, uint32_t max,
	    struct ovl_frame *f);
/*
 * Seal a frame built in place: frame[12 .. 12+len) holds the payload
 * (len a multiple of 4, padding already zeroed); writes the header and CRC.
 */
void	ovl_frame_seal(uint8_t *frame, uint8_t kind, uint8_t flags, uint32_t len);

/* Round up to a multiple of 4. */
static inline uint32_t
ovl_align4(uint64_t n)
{
	return (uint32_t)((n + 3) & ~(uint64_t)3);
}

/* ---- cursors: where a source resumes -------------------------------- */

/*
 * A position in a source's canonical order: the record at byte offset off
 * (or member-group index, for tar) and record index rec of canonical chunk
 * chunk of epoch epoch. Text form "EPOCH:CHUNK:OFF:REC".
 */
struct ovl_cursor {
	uint32_t	epoch;
	uint32_t	chunk;
	uint64_t	off;
	uint64_t	rec;
};
#define OVL_CURSOR_STRLEN 80
/* Format into buf (at least OVL_CURSOR_STRLEN bytes); returns buf. */
char	*ovl_cursor_format(const struct ovl_cursor *c, char *buf);
/* Parse the text form strictly: 0, or -1 with errno EINVAL/ERANGE. */
int	ovl_cursor_parse(const char *s, struct ovl_cursor *c);
/* <0, 0, >0 as a is before, at, after b in canonical order. */
int	ovl_cursor_cmp(const struct ovl_cursor *a, const struct ovl_cursor *b);

/* ---- DOC ---------------------------------------------------------- */

#define OVL_DOC_TEXT	0x1u	/* text bytes follow the tokens */
#define OVL_DOC_MIXED	0x2u	/* mix_pos and mix_tokens are set */
#define OVL_DOC_IMAGES	0x4u	/* its nimages IMAGE frames follow it */
/*
 * Sent from a shuffle window (docshuf.h): record is its position in the
 * shuffled order, the cursor after it the window's start (next_off may
 * be below start_off).
 */
#define OVL_DOC_SHUFFLED 0x8u
#define OVL_DOC_FIXED	80u	/* bytes before the token array */

struct ovl_doc {
	uint32_t	 source;	/* source id (plan order), 0 standalone */
	uint32_t	 flags;		/* OVL_DOC_* */
	uint32_t	 epoch;		/* canonical position: epoch, */
	uint32_t	 chunk;		/*   chunk within the epoch, */
	uint64_t	 record;	/*   record index within the chunk */
	uint32_t	 nchunks;	/* chunks per epoch in this source */
	uint32_t	 nimages;	/* image members (WebDataset groups) */
	uint64_t	 start_off;	/* byte offset (or group index) of this record */
	uint64_t	 next_off;	/* cursor after this document: offset, */
	uint64_t	 next_rec;	/*   and record index */
	uint64_t	 mix_pos;	/* position in the mixed stream */
	uint64_t	 mix_tokens;	/* mixed tokens before this document */
	uint32_t	 ntokens;
	uint32_t	 text_len;
	uint32_t	 width;		/* bytes per token id: 2 or 4 */
	const void	*tokens;	/* ntokens ids of width bytes (in place
					   when decoded; ovl_tok_at) */
	const char	*text;		/* text_len bytes, not NUL-terminated */
};

/*
 * Payload bytes of a DOC with these sizes and ids of width bytes (2 or
 * 4), or 0 when over OVL_FRAME_LIMIT.
 */
uint32_t ovl_doc_payload_len(uint32_t ntokens, uint32_t text_len,
	    uint32_t width);
/*
 * Encode into payload (ovl_doc_payload_len bytes, with d->width). d->tokens
 * (of d->width bytes each) and d->text are copied; when d->tokens is NULL
 * the token array is left for the caller to fill at payload +
 * OVL_DOC_FIXED (zero-copy tokenizing). The frame's flags are
 * ovl_width_flags(d->width).
 */
void	ovl_doc_encode(uint8_t *payload, const struct ovl_doc *d);
/*
 * View a DOC frame: OVL_F_OK or OVL_F_EPAYLOAD. tokens/text point into f;
 * width is 2 when f's flags have OVL_FL_U16, else 4.
 */
int	ovl_doc_decode(const struct ovl_frame *f, struct ovl_doc *d);
/* The cursor after the document. */
void	ovl_doc_cursor(const struct ovl_doc *d, struct ovl_cursor *c);
/* Rewrite source id and the mixed fields of an encoded DOC payload in place. */
void	ovl_doc_set_mixed(uint8_t *payload, uint32_t source, uint64_t mix_pos,
	    uint64_t mix_tokens);

/* ---- CHUNK_END ---------------------------------------------------- */

#define OVL_CHUNK_END_LEN 32u
struct ovl_chunk_end {
	uint32_t	source;
	uint32_t	epoch;
	uint32_t	chunk;
	uint32_t	nchunks;
	uint64_t	ndocs;		/* documents emitted from the chunk */
	uint64_t	nbytes;		/* input bytes of the chunk (decompressed) */
};
void	ovl_chunk_end_encode(uint8_t *payload, const struct ovl_chunk_end *c);
int	ovl_chunk_end_decode(const struct ovl_frame *f, struct ovl_chunk_end *c);

/* ---- SEQ ---------------------------------------------------------- */

#define OVL_SEQ_FIXED	32u
#define OVL_PIECE_LEN	40u

/* Where a piece of a sequence came from. */
struct ovl_piece {
	uint32_t	source;
	uint32_t	epoch;
	uint32_t	chunk;
	uint32_t	offset;		/* first token of the piece within its document */
	uint64_t	record;
	uint64_t	mix_pos;
	uint32_t	length;		/* tokens */
	uint32_t	nimages;	/* IMAGE frames of the piece after the SEQ */
};

struct ovl_seq {
	uint64_t	 step;
	uint32_t	 rank;
	uint32_t	 mb;		/* micro-batch index within the rank's step */
	uint32_t	 ntokens;	/* tokens including padding */
	uint32_t	 npieces;
	uint32_t	 seq_len;	/* capacity of the sequence */
	uint32_t	 flags;
	uint32_t	 width;		/* bytes per token id: 2 or 4 */
	uint32_t	 pos_width;	/* bytes per position id: 2 or 4; 0:
					   none sent (OVL_FL_NOPOS) */
	const void	*tokens;	/* ntokens of width bytes (ovl_tok_at) */
	const void	*positions;	/* ntokens of pos_width bytes, restart
					   at 0 per piece; NULL when none */
	const uint32_t	*cu_seqlens;	/* npieces + 1, from 0; last = real tokens */
	const uint8_t	*pieces;	/* npieces x OVL_PIECE_LEN, see ovl_seq_piece */
};

/*
 * Payload bytes of a SEQ with tokens of width bytes (2 or 4) and positions
 * of pos_width bytes (2 or 4, or 0: none), or 0 when over OVL_FRAME_LIMIT.
 */
uint32_t ovl_seq_payload_len(uint32_t ntokens, uint32_t npieces,
	    uint32_t width, uint32_t pos_width);
/*
 * Encode the fixed part (s->width and s->pos_width give the layout) and
 * copy tokens, positions and cu_seqlens when non-NULL, zeroing the
 * padding of 16-bit arrays; pieces are written with ovl_seq_put_piece.
 * The frame's flags are ovl_seq_flags(s).
 */
void	ovl_seq_encode(uint8_t *payload, const struct ovl_seq *s);
/*
 * Where the arrays of a SEQ payload of these sizes and widths are, to fill
 * them in place.
 */
void	*ovl_seq_tokens(uint8_t *payload);
void	*ovl_seq_positions(uint8_t *payload, uint32_t ntokens, uint32_t width);
uint32_t *ovl_seq_cu(uint8_t *payload, uint32_t ntokens, uint32_t width,
	    uint32_t pos_width);
void	ovl_seq_put_piece(uint8_t *payload, const struct ovl_seq *s,
	    uint32_t i, const struct ovl_piece *p);
/* The frame flags of a SEQ's widths. */
uint8_t	ovl_seq_flags(const struct ovl_seq *s);
/*
 * View a SEQ frame: OVL_F_OK or OVL_F_EPAYLOAD (also checks cu_seqlens is
 * sane); the widths come from f's flags.
 */
int	ovl_seq_decode(const struct ovl_frame *f, struct ovl_seq *s);
/*
 * The position ids of a decoded SEQ as u32, into out (ntokens): copied or
 * widened from its array, or derived from cu_seqlens when it has none.
 */
void	ovl_seq_position_ids(const struct ovl_seq *s, uint32_t *out);
void	ovl_seq_piece(const struct ovl_seq *s, uint32_t i, struct ovl_piece *p);

/* ---- BARRIER ------------------------------------------------------ */

/*
 * Checkpoint n sits at a step boundary: step is the first step after it,
 * and the boundary falls at token offset of the document at mixed position
 * mix_pos (offset 0: before that document). tokens counts the mixed tokens
 * before the boundary.
 */
#define OVL_BARRIER_LEN 40u
struct ovl_barrier {
	uint64_t	n;
	uint64_t	step;
	uint64_t	mix_pos;
	uint64_t	tokens;
	uint32_t	offset;
};
void	ovl_barrier_encode(uint8_t *payload, const struct ovl_barrier *b);
int	ovl_barrier_decode(const struct ovl_frame *f, struct ovl_barrier *b);

/* ---- STATE and META: text payloads -------------------------------- */

enum ovl_stage { OVL_STAGE_MIX = 1, OVL_STAGE_CONSTRUCT = 2 };

/*
 * STATE: u32 stage, u32 text_len, u64 n, then text_len bytes of
 * "key value\n" lines (keys unique, no spaces in keys). META: u32 text_len,
 * u32 reserved, then text of the same form.
 */
#define OVL_STATE_FIXED 16u
#define OVL_META_FIXED 8u
struct ovl_state {
	uint32_t	 stage;
	uint64_t	 n;
	uint32_t	 text_len;
	const char	*text;
};
uint32_t ovl_state_payload_len(uint32_t text_len);
void	ovl_state_encode(uint8_t *payload, const struct ovl_state *s);
int	ovl_state_decode(const struct ovl_frame *f, struct ovl_state *s);
uint32_t ovl_meta_payload_len(uint32_t text_len);
void	ovl_meta_encode(uint8_t *payload, const char *text, uint32_t text_len);
int	ovl_meta_decode(const struct ovl_frame *f, const char **text,
	    uint32_t *text_len);
/*
 * The value of the first "key value" line of a META text, NUL-terminated
 * into out (cut to outlen - 1 bytes). 1 when the key is there, else 0.
 */
int	ovl_meta_value(const char *text, size_t len, const char *key, char *out,
	    size_t outlen);

/* ---- END ---------------------------------------------------------- */

#define OVL_END_LEN 16u

/* ---- STEP (minor 1) ------------------------------------------------ */

/*
 * Rank rank has all its sequences of step step (seqs of them, 0 for a
 * rank that got none): ovl-construct writes one per rank after every
 * step, so a rank's reader knows a step is complete without reading the
 * next one, and an empty step still arrives.
 */
#define OVL_STEP_LEN 16u
struct ovl_step {
	uint64_t	step;
	uint32_t	rank;
	uint32_t	seqs;
};
void	ovl_step_encode(uint8_t *payload, const struct ovl_step *s);
int	ovl_step_decode(const struct ovl_frame *f, struct ovl_step *s);
void	ovl_end_encode(uint8_t *payload, uint64_t nframes);
int	ovl_end_decode(const struct ovl_frame *f, uint64_t *nframes);

/* ---- IMAGE (minor 2) ---------------------------------------------- */

/*
 * One image of a document: its bytes (OVL_IMAGE_INLINE) or where they are
 * (OVL_IMAGE_REF: the shard's path, the member's name, the byte offset of
 * its data in the tar and its length). After a DOC with OVL_DOC_IMAGES
 * come its nimages IMAGE frames (doc_pos: where its placeholder run
 * begins in the document); after a SEQ come the IMAGE frames of its
 * pieces, piece by piece (each piece's count in its record), with step,
 * rank, mb, piece and seq_pos (where the run begins in the sequence) set.
 */
#define OVL_IMAGE_INLINE	0x1u
#define OVL_IMAGE_REF		0x2u
#define OVL_IMAGE_FIXED		80u
struct ovl_image {
	uint32_t	 flags;		/* OVL_IMAGE_INLINE or OVL_IMAGE_REF */
	uint32_t	 format;	/* enum ovl_image_format: 1 png, 2 jpeg, 3 webp */
	uint32_t	 width, height;
	uint32_t	 index;		/* the image's number in its document */
	uint32_t	 ntokens;	/* its placeholder run */
	uint32_t	 doc_pos;	/* the run's first token in the document */
	uint32_t	 seq_pos;	/* ... in the sequence (after a SEQ) */
	uint64_t	 step;		/* after a SEQ: the SEQ's step, rank, */
	uint32_t	 rank, mb;	/*   micro-batch */
	uint32_t	 piece;		/*   and the piece that holds the run */
	uint64_t	 offset;	/* byte offset of the member's data in the tar */
	uint64_t	 length;	/* the member's bytes */
	uint32_t	 name_len, path_len, data_len;
	const char	*name;		/* the member's name */
	const char	*path;		/* the shard (a reference), else empty */
	const uint8_t	*data;		/* data_len bytes (inline) */
};
/* Payload bytes of an IMAGE, or 0 when over OVL_FRAME_LIMIT. */
uint32_t ovl_image_payload_len(uint32_t name_len, uint32_t path_len,
	    uint32_t data_len);
/* Encode (name, path and data copied when non-NULL, padding zeroed). */
void	ovl_image_encode(uint8_t *payload, const struct ovl_image *im);
/* Where data goes in an encoded payload (to fill in place). */
uint8_t	*ovl_image_data(uint8_t *payload);
/*
 * View an IMAGE frame: OVL_F_OK, or OVL_F_EPAYLOAD (lengths that do not
 * add up, not exactly one of INLINE and REF, inline bytes that are not
 * the member's length). Pointers into f.
 */
int	ovl_image_decode(const struct ovl_frame *f, struct ovl_image *im);
/* Set the sequence fields of an encoded payload in place. */
void	ovl_image_set_seq(uint8_t *payload, uint64_t step, uint32_t rank,
	    uint32_t mb, uint32_t piece, uint32_t seq_pos);
/* ---- token arrays of 16 or 32 bits ---------------------------------- */

/* The flags of a DOC whose ids are width bytes. */
static inline uint8_t
ovl_width_flags(uint32_t width)
{
	return width == 2 ? OVL_FL_U16 : 0;
}

/* Id i of an array of width-byte ids. */
static inline uint32_t
ovl_tok_at(const void *p, uint32_t width, size_t i)
{
	return width == 2 ? ((const uint16_t *)p)[i] : ((const uint32_t *)p)[i];
}

/* The array from id i on. */
static inline const void *
ovl_tok_from(const void *p, uint32_t width, size_t i)
{
	return (const uint8_t *)p + i * width;
}

/* Bytes of n ids of width bytes, padded to a multiple of 4. */
static inline size_t
ovl_tok_bytes(size_t n, uint32_t width)
{
	return (n * width + 3) & ~(size_t)3;
}

/*
 * Copy n ids from src (swidth bytes each) to dst (dwidth bytes each):
 * a memcpy when the widths agree, else a widening or narrowing loop.
 * Narrowing returns a value over 0xffff (the largest id) exactly when an
 * id did not fit 16 bits (the caller says so); otherwise at most 0xffff.
 */
uint32_t ovl_tok_copy(void *dst, uint32_t dwidth, const void *src,
	    uint32_t swidth, size_t n);
/* The largest of n ids (0 for none). */
uint32_t ovl_tok_max(const void *p, uint32_t width, size_t n);

/* ---- little-endian helpers ---------------------------------------- */

static inline uint32_t
ovl_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static inline uint64_t
ovl_le64(const uint8_t *p)
{
	return (uint64_t)ovl_le32(p) | (uint64_t)ovl_le32(p + 4) << 32;
}

static inline void
ovl_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void
ovl_put64(uint8_t *p, uint64_t v)
{
	ovl_put32(p, (uint32_t)v);
	ovl_put32(p + 4, (uint32_t)(v >> 32));
}

#endif
