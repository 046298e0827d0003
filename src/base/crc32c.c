/*
 * crc32c.c - CRC-32C (crc32c.h). The hardware path runs three independent
 * CRCs over three adjacent blocks in one loop (the instruction has a
 * latency of 3 cycles and a throughput of 1) and joins them by shifting
 * each partial CRC over the blocks after it, a linear map done with four
 * table lookups (tables built once for the block length).
 */
#include "base/crc32c.h"

#include <pthread.h>
#include <string.h>

#define CRC32C_POLY 0x82f63b78u /* reflected Castagnoli polynomial */
/* Bytes per stream in the three-way loop; below 3 blocks one stream runs. */
#define CRC32C_BLOCK 4096

static uint32_t crc_table[8][256];
/* shift_table[k][b]: the CRC register b << 8k advanced over CRC32C_BLOCK zero bytes. */
static uint32_t shift_table[4][256];
static int have_hw;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

uint32_t crc32c_update_sw(uint32_t crc, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= crc;
        crc = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^ crc_table[5][(v >> 16) & 0xff] ^
              crc_table[4][(v >> 24) & 0xff] ^ crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
              crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#define CRC_HW __attribute__((target("sse4.2")))

CRC_HW static uint32_t crc_hw_one(uint32_t crc, const unsigned char *p, size_t len)
{
    uint64_t c = crc;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
    }
    for (; len; p++, len--)
        c = _mm_crc32_u8((uint32_t)c, *p);
    return (uint32_t)c;
}

static uint32_t crc_shift(uint32_t crc)
{
    return shift_table[0][crc & 0xff] ^ shift_table[1][(crc >> 8) & 0xff] ^ shift_table[2][(crc >> 16) & 0xff] ^
           shift_table[3][crc >> 24];
}

CRC_HW static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t len)
{
    while (len >= 3 * CRC32C_BLOCK) {
        uint64_t a = crc, b = 0, c = 0;
        const unsigned char *pb = p + CRC32C_BLOCK, *pc = p + 2 * CRC32C_BLOCK;
        for (size_t i = 0; i < CRC32C_BLOCK; i += 8) {
            uint64_t va, vb, vc;
            memcpy(&va, p + i, 8);
            memcpy(&vb, pb + i, 8);
            memcpy(&vc, pc + i, 8);
            a = _mm_crc32_u64(a, va);
            b = _mm_crc32_u64(b, vb);
            c = _mm_crc32_u64(c, vc);
        }
        /* crc(A B C) = shift(shift(crc(A)) ^ crc(B)) ^ crc(C), each shift over one block. */
        crc = crc_shift(crc_shift((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)c;
        p += 3 * CRC32C_BLOCK;
        len -= 3 * CRC32C_BLOCK;
    }
    return crc_hw_one(crc, p, len);
}

static int crc_cpu_has_sse42(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
}
#endif

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            crc_table[k][n] = (crc_table[k - 1][n] >> 8) ^ crc_table[0][crc_table[k - 1][n] & 0xff];
#if defined(__x86_64__)
    have_hw = crc_cpu_has_sse42();
    /* The shift is linear in the register: build it from its action on
     * each byte value in each byte position. */
    static const unsigned char zeros[CRC32C_BLOCK];
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            shift_table[k][b] = crc32c_update_sw(b << (8 * k), zeros, sizeof zeros);
#endif
}

int crc32c_hw(void)
{
    pthread_once(&crc_once, crc_init);
    return have_hw;
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (have_hw)
        return crc_hw(crc, data, len);
#endif
    return crc32c_update_sw(crc, data, len);
}
