/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of net messages
 * (CCL_CHECKSUM): the SSE4.2 instruction where the CPU has it, three
 * streams at once so its latency does not bound it, else a table.
 *
 * crc32c_update works on the raw register (no inversion before or after),
 * so a message's checksum can be taken piece by piece as its bytes pass:
 * crc32c_update(crc32c_update(c, a, n), b, m) equals the update over a
 * followed by b. Callers start from CRC32C_INIT.
 */
#ifndef CCL_BASE_CRC32C_H
#define CCL_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#define CRC32C_INIT 0xffffffffu

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);
/* The same with the table alone (tests compare the two). */
uint32_t crc32c_update_sw(uint32_t crc, const void *data, size_t len);
/* Whether crc32c_update uses the CPU's instruction. */
int crc32c_hw(void);

#endif
