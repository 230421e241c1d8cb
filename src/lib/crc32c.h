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

#endif
