/*
 * The Python reader's helpers in C, beside the CRC-32C in libovlcrc.so,
 * loaded through ctypes (overlord/_crc.py); never sanitized (they are
 * loaded into python3).
 *
 * - ovl_py_positions32/64: the position ids of a SEQ sent without them
 *   (ovl-frame(5) NOPOS), from its cu_seqlens, in one pass.
 * - ovl_py_walk: the frames of a block checked (CRC, a SEQ's layout and
 *   cu_seqlens) and described, one row each, as long as they are SEQs
 *   without images or STEPs; it stops before any other frame (or one that
 *   fails a check), which the Python reader then takes itself, so its
 *   messages and byte offsets are the only ones there are.
 * - ovl_py_fill: the walked SEQs' micro-batch arrays (input ids widened
 *   to 32 or 64 bits, position ids, labels, cu_seqlens) in one pass each.
 *
 * A block's frames are whole and their headers bounded (Reader._spans);
 * the walk still checks every header against the block's end (and its
 * length a multiple of 4, its reserved bytes 0), so any bytes are safe
 * to walk (tests/fuzz/fuzz-pywalk.c).
 */
#include <stdint.h>
#include <string.h>

#include "crc32c.h"

/*
 * The fill is bound by its stores (three int64 arrays for a SEQ's ids):
 * with AVX2 where the CPU has it (one library for every x86-64, the
 * choice made when it is loaded: an ifunc, so glibc), 30% less time for a
 * 4096-token SEQ.
 */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define OVL_PY_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef OVL_PY_CLONES
#define OVL_PY_CLONES
#endif

#define KIND_SEQ	4
#define KIND_STEP	8
#define FL_U16		0x01
#define FL_POS16	0x02
#define FL_NOPOS	0x04
#define PIECE_LEN	40

/* the words of a walk's row (uint64 each) */
enum { R_STEP, R_OFF, R_KIND, R_FLAGS, R_RANK, R_MB, R_NTOK, R_NPIECES,
	R_WORDS };

/* why a walk stopped (res[1]) */
enum { W_END, W_OTHER, W_FULL };

static uint32_t
le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);	/* little-endian hosts only, as numpy's '<u4' views */
	return v;
}

static uint64_t
le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/*
 * out[0..ntok): 0, 1, ... from every piece's start (cu[0..npieces]), 0
 * in the padding; every element written once, whatever cu holds.
 */
#define POSITIONS(NAME, T)						\
void NAME(const uint32_t *, uint32_t, T *, uint32_t);			\
OVL_PY_CLONES void							\
NAME(const uint32_t *cu, uint32_t npieces, T *out, uint32_t ntok)	\
{									\
	uint32_t i, k = 0, a, b;					\
									\
	for (i = 0; i < npieces; i++) {					\
		a = cu[i] < ntok ? cu[i] : ntok;			\
		b = cu[i + 1] < ntok ? cu[i + 1] : ntok;		\
		for (; k < a; k++)					\
			out[k] = 0;					\
		for (; k < b; k++)					\
			out[k] = (T)(k - a);				\
	}								\
	for (; k < ntok; k++)						\
		out[k] = 0;						\
}

POSITIONS(ovl_py_positions64, int64_t)
POSITIONS(ovl_py_positions32, uint32_t)

/* bytes of an array of n elements of w bytes, padded to 4 */
static uint64_t
arr_bytes(uint64_t n, unsigned w)
{
	return (n * w + 3) & ~(uint64_t)3;
}

/*
 * The SEQ payload p of ln bytes (frame flags fl) as the Python reader
 * takes it (frames._items): known flags, its arrays and piece records
 * inside it, cu_seqlens from 0, never decreasing, at most ntok; and no
 * IMAGE frame due after it. 1 when the walk may take it.
 */
static int
seq_ok(const uint8_t *p, uint64_t ln, unsigned fl)
{
	uint64_t ntok, np, tw, pw, cu, i, prev, c;

	if (ln < 32 || (fl & ~(unsigned)(FL_U16 | FL_POS16 | FL_NOPOS)) != 0 ||
	    ((fl & FL_POS16) != 0 && (fl & FL_NOPOS) != 0))
		return 0;
	ntok = le32(p + 16);
	np = le32(p + 20);
	tw = (fl & FL_U16) ? 2 : 4;
	pw = (fl & FL_POS16) ? 2 : (fl & FL_NOPOS) ? 0 : 4;
	cu = 32 + arr_bytes(ntok, tw) + arr_bytes(ntok, pw);
	if (cu + 4 * (np + 1) + PIECE_LEN * np > ln)
		return 0;
	if (le32(p + cu) != 0)
		return 0;
	for (i = 1, prev = 0; i <= np; i++, prev = c)
		if ((c = le32(p + cu + 4 * i)) < prev)
			return 0;
	if (prev > ntok)
		return 0;
	for (i = 0; i < np; i++)	/* the piece records' image counts */
		if (le32(p + cu + 4 * (np + 1) + PIECE_LEN * i + 36) != 0)
			return 0;
	return 1;
}

/*
 * Walk the frames of buf[s, stop): every SEQ (without images) and STEP
 * frame, its CRC checked when crc is nonzero, gets a row of R_WORDS
 * uint64 words in rows (at most maxrows): step, payload offset in buf,
 * kind, frame flags, rank, micro-batch (a STEP: its sequence count),
 * ntokens, npieces. It stops before a frame of any other kind or one
 * that fails a check, when rows is full, or at stop. res[0]: the offset
 * where it stopped (the next frame), res[1]: why (W_END, W_OTHER,
 * W_FULL), res[2]: rows written.
 */
void ovl_py_walk(const uint8_t *, uint64_t, uint64_t, int, uint64_t *,
    uint32_t, uint64_t *);
void
ovl_py_walk(const uint8_t *buf, uint64_t s, uint64_t stop, int crc,
    uint64_t *rows, uint32_t maxrows, uint64_t *res)
{
	uint64_t ln, *r;
	uint32_t n = 0;
	unsigned kind, fl;
	const uint8_t *h, *p;
	int why = W_END;

	while (s < stop) {
		if (n == maxrows) {
			why = W_FULL;
			break;
		}
		h = buf + s;
		p = h + 12;
		if (stop - s < 12 || (ln = le32(h)) > stop - s - 12 ||
		    ln % 4 != 0 || h[6] != 0 || h[7] != 0) {
			why = W_OTHER;
			break;
		}
		kind = h[4];
		fl = h[5];
		if ((kind != KIND_SEQ && kind != KIND_STEP) ||
		    (kind == KIND_SEQ && !seq_ok(p, ln, fl)) ||
		    (kind == KIND_STEP && ln < 16) ||
		    (crc && ovl_crc32c(ovl_crc32c(0, h, 8), p, ln) != le32(h + 8))) {
			why = W_OTHER;
			break;
		}
		r = rows + (uint64_t)n++ * R_WORDS;
		r[R_STEP] = le64(p);
		r[R_OFF] = s + 12;
		r[R_KIND] = kind;
		r[R_FLAGS] = fl;
		r[R_RANK] = le32(p + 8);
		r[R_MB] = le32(p + 12);
		r[R_NTOK] = kind == KIND_SEQ ? le32(p + 16) : 0;
		r[R_NPIECES] = kind == KIND_SEQ ? le32(p + 20) : 0;
		s += 12 + ln;
	}
	res[0] = s;
	res[1] = (uint64_t)why;
	res[2] = n;
}

/* the widening copy of n ids (or positions) of w bytes into T */
#define WIDEN(NAME, T)							\
OVL_PY_CLONES static void						\
NAME(T *out, const uint8_t *in, unsigned w, uint64_t n)		\
{									\
	uint64_t k;							\
									\
	if (w == 2) {							\
		const uint16_t *a = (const void *)in;			\
		for (k = 0; k < n; k++)					\
			out[k] = (T)a[k];				\
	} else {							\
		const uint32_t *a = (const void *)in;			\
		for (k = 0; k < n; k++)					\
			out[k] = (T)a[k];				\
	}								\
}

WIDEN(widen64, int64_t)
WIDEN(widen32, int32_t)

/* the labels: the next token; ignore at every piece's last token, at the
 * sequence's last, and from the last real token on (padding) */
OVL_PY_CLONES static void
labels(int64_t *lab, const uint8_t *tok, unsigned w, uint64_t n,
    const uint32_t *cu, uint64_t np, int64_t ignore)
{
	uint64_t k, real;

	if (n == 0)
		return;
	if (w == 2) {
		const uint16_t *a = (const void *)tok;
		for (k = 0; k + 1 < n; k++)
			lab[k] = a[k + 1];
	} else {
		const uint32_t *a = (const void *)tok;
		for (k = 0; k + 1 < n; k++)
			lab[k] = a[k + 1];
	}
	for (k = 1; k <= np; k++)
		if (cu[k] != 0)
			lab[cu[k] - 1] = ignore;
	lab[n - 1] = ignore;
	real = cu[np];
	for (k = real > 0 ? real - 1 : 0; real < n && k < n; k++)
		lab[k] = ignore;
}

/*
 * The micro-batch arrays of the SEQ rows among rows[0..nrows) (a walk's,
 * over buf; its STEP rows are passed over), one after the other: ids and
 * pos (int64 when bits is 64, else int32; both the SEQs' ntokens in all),
 * lab (int64), cu (int32, npieces + 1 a SEQ). The rows' SEQs passed
 * seq_ok, so every index is inside its arrays.
 */
void ovl_py_fill(const uint8_t *, const uint64_t *, uint32_t, int, void *,
    void *, int64_t *, int32_t *, int64_t);
void
ovl_py_fill(const uint8_t *buf, const uint64_t *rows, uint32_t nrows,
    int bits, void *ids, void *pos, int64_t *lab, int32_t *cu, int64_t ignore)
{
	const uint64_t *r;
	const uint8_t *p, *tok, *pp;
	const uint32_t *c;
	uint64_t n, np, at = 0, cat = 0;
	unsigned fl, tw, pw;
	uint32_t i;

	for (i = 0; i < nrows; i++) {
		r = rows + (uint64_t)i * R_WORDS;
		if (r[R_KIND] != KIND_SEQ)
			continue;
		p = buf + r[R_OFF];
		fl = (unsigned)r[R_FLAGS];
		n = r[R_NTOK];
		np = r[R_NPIECES];
		tw = (fl & FL_U16) ? 2 : 4;
		pw = (fl & FL_POS16) ? 2 : (fl & FL_NOPOS) ? 0 : 4;
		tok = p + 32;
		pp = tok + arr_bytes(n, tw);
		c = (const void *)(pp + arr_bytes(n, pw));
		if (bits == 64) {
			widen64((int64_t *)ids + at, tok, tw, n);
			if (pw != 0)
				widen64((int64_t *)pos + at, pp, pw, n);
			else
				ovl_py_positions64(c, (uint32_t)np,
				    (int64_t *)pos + at, (uint32_t)n);
		} else {
			widen32((int32_t *)ids + at, tok, tw, n);
			if (pw != 0)
				widen32((int32_t *)pos + at, pp, pw, n);
			else
				ovl_py_positions32(c, (uint32_t)np,
				    (uint32_t *)pos + at, (uint32_t)n);
		}
		labels(lab + at, tok, tw, n, c, np, ignore);
		memcpy(cu + cat, c, 4 * (np + 1));
		at += n;
		cat += np + 1;
	}
}
