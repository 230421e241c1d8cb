/*
 * libFuzzer target: the Python reader's C walk and fill
 * (python/overlord/_fast.c, loaded into python3 by overlord). Any bytes,
 * taken as a block of frames from offset 0 (as Reader._spans hands them
 * over, 4-byte aligned), are walked without a read past them; a frame the
 * walk leaves is stepped over when its header allows (as the Python
 * reader would, or it stops); every SEQ row the walk gives has cu_seqlens
 * from 0, never down, at most its tokens, and its fill (int64 and int32)
 * writes exactly the arrays the rows size, with labels and positions
 * inside their bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../python/overlord/_fast.c"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

static void
check_fill(const uint8_t *buf, const uint64_t *rows, uint32_t nrows)
{
	uint64_t ntok = 0, ncu = 0, k, at = 0, cat = 0;
	int64_t *ids, *pos, *lab;
	int32_t *cu, *ids32, *pos32;
	const uint64_t *r;
	uint32_t i;

	for (i = 0; i < nrows; i++) {
		r = rows + (uint64_t)i * R_WORDS;
		if (r[R_KIND] == KIND_SEQ) {
			ntok += r[R_NTOK];
			ncu += r[R_NPIECES] + 1;
		}
	}
	/* exact sizes, so ASan sees a write past the end */
	ids = malloc(8 * ntok + 1);
	pos = malloc(8 * ntok + 1);
	lab = malloc(8 * ntok + 1);
	ids32 = malloc(4 * ntok + 1);
	pos32 = malloc(4 * ntok + 1);
	cu = malloc(4 * ncu);
	if (ids == NULL || pos == NULL || lab == NULL || ids32 == NULL ||
	    pos32 == NULL || cu == NULL)
		abort();
	ovl_py_fill(buf, rows, nrows, 32, ids32, pos32, lab, cu, -100);
	ovl_py_fill(buf, rows, nrows, 64, ids, pos, lab, cu, -100);
	for (i = 0; i < nrows; i++) {
		r = rows + (uint64_t)i * R_WORDS;
		if (r[R_KIND] != KIND_SEQ)
			continue;
		if (cu[cat] != 0)
			abort();
		for (k = 1; k <= r[R_NPIECES]; k++)
			if (cu[cat + k] < cu[cat + k - 1] ||
			    (uint64_t)(uint32_t)cu[cat + k] > r[R_NTOK])
				abort();
		for (k = 0; k < r[R_NTOK]; k++) {
			/* derived positions (NOPOS) stay inside the SEQ */
			if (((r[R_FLAGS] & FL_NOPOS) != 0 && (pos[at + k] < 0 ||
			    (uint64_t)pos[at + k] >= r[R_NTOK])) ||
			    (int64_t)(uint32_t)ids32[at + k] != ids[at + k] ||
			    (lab[at + k] != -100 && lab[at + k] < 0))
				abort();
		}
		if (r[R_NTOK] > 0 && lab[at + r[R_NTOK] - 1] != -100)
			abort();
		at += r[R_NTOK];
		cat += r[R_NPIECES] + 1;
	}
	free(ids);
	free(pos);
	free(lab);
	free(ids32);
	free(pos32);
	free(cu);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	uint64_t rows[64 * R_WORDS], res[3], s = 0, ln;
	uint8_t *buf;
	int crc;

	buf = malloc(n > 0 ? n : 1);
	if (buf == NULL)
		return 0;
	memcpy(buf, data, n);
	for (crc = 0; crc <= 1; crc++) {
		for (s = 0; s < n;) {
			ovl_py_walk(buf, s, n, crc, rows, 64, res);
			if (res[0] < s || res[0] > n || res[2] > 64)
				abort();
			check_fill(buf, rows, (uint32_t)res[2]);
			if (res[1] == W_END)
				break;
			if (res[0] == s && res[2] == 0) {
				/* a frame it leaves: stepped over as Python
				 * would, if its header bounds it */
				if (n - s < 12)
					break;
				ln = le32(buf + s);
				if (ln % 4 != 0 || ln > n - s - 12)
					break;
				s += 12 + ln;
			} else
				s = res[0];
		}
	}
	free(buf);
	return 0;
}
