/*
 * crc32c: CRC-32C (Castagnoli), as in iSCSI and ext4.
 * Uses the SSE4.2 crc32 instruction when the CPU has it, tables otherwise;
 * both give the same value.
 */
#ifndef OVL_CRC32C_H
#define OVL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Continue a CRC over n more bytes. Start with crc = 0; the value returned
 * is final (pre- and post-inversion are done inside), so
 * ovl_crc32c(ovl_crc32c(0, a, n), b, m) == ovl_crc32c(0, a||b, n+m).
 * "123456789" gives 0xe3069283.
 */
uint32_t ovl_crc32c(uint32_t crc, const void *buf, size_t n);

/*
 * CRC-32C is linear, so CRCs can be joined and patched without reading the
 * bytes again. A few table lookups (or carry-less multiplies) whatever the
 * lengths; the tables (128 KiB) are built on first use, once, thread-safe.
 */
/* The CRC of a||b from the CRC of a, the CRC of b and the length of b. */
uint32_t ovl_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
/*
 * The CRC of a message after n of its bytes were xored with delta, from
 * its CRC before (crc) and the number of bytes after the changed ones.
 */
uint32_t ovl_crc32c_patch(uint32_t crc, const void *delta, size_t n,
	    uint64_t after);

#endif
