/*
 * crc32c.c - CRC-32C (crc32c.h). The hardware path runs three independent
 * CRCs over three adjacent blocks in one loop (the instruction has a
 * latency of 3 cycles and a throughput of 1) and joins them by shifting
 * each partial CRC over the blocks after it, a linear map done with four
 * table lookups (tables built once for the block length). Where the CPU
 * has AVX-512 carry-less multiplication (VPCLMULQDQ), long buffers are
 * first folded 256 bytes at a time (below), which the CRC instruction
 * alone cannot keep up with.
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

/* Folding. In the reflected order of this CRC a 16-byte block loaded
 * into a 128-bit lane holds its polynomial with byte 0's bit 0 as the
 * highest power. A lane R whose data lies F bits before the lane it is
 * folded onto becomes R x^F mod P, computed as clmul(lo(R), k1) ^
 * clmul(hi(R), k2) with k1 = x^(F+63) mod P and k2 = x^(F-1) mod P, each
 * bit-reversed into 64 bits (the product comes out one power higher, which
 * the -1 absorbs). Four 512-bit registers fold 256 bytes per step
 * (F = 2048); what they hold at the end is a 256-byte stand-in for
 * everything folded, with the same CRC, which the CRC instruction
 * finishes. */
#define CRC_FOLD_BYTES 256
#define CRC_POLY_NORMAL 0x11edc6f41ull /* x^32 + ..., unreflected */
static uint64_t fold_k1, fold_k2;
static int have_fold;

static uint64_t crc_xpow_mod(unsigned n)
{
    uint64_t v = 1;
    while (n--) {
        v <<= 1;
        if (v & (1ull << 32))
            v ^= CRC_POLY_NORMAL;
    }
    return v;
}

static uint64_t crc_bitrev64(uint64_t v)
{
    uint64_t r = 0;
    for (int i = 0; i < 64; i++, v >>= 1)
        r = (r << 1) | (v & 1);
    return r;
}

static int crc_cpu_has_fold(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    int avx512f = (b >> 16) & 1, vpclmul = (c >> 10) & 1;
    if (!avx512f || !vpclmul || !__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1))
        return 0;
    /* The OS saves the zmm state (XCR0: SSE, AVX, opmask, zmm halves). */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6) == 0xe6;
}

#include <immintrin.h>
#define CRC_FOLD __attribute__((target("avx512f,vpclmulqdq,sse4.2")))

CRC_FOLD static uint32_t crc_fold(uint32_t crc, const unsigned char *p, size_t len)
{
    const __m512i k = _mm512_set_epi64((long long)fold_k2, (long long)fold_k1, (long long)fold_k2,
                                       (long long)fold_k1, (long long)fold_k2, (long long)fold_k1,
                                       (long long)fold_k2, (long long)fold_k1);
    __m512i x0 = _mm512_loadu_si512(p), x1 = _mm512_loadu_si512(p + 64), x2 = _mm512_loadu_si512(p + 128),
            x3 = _mm512_loadu_si512(p + 192);
    /* The register so far goes onto the first 32 bits of the data. */
    x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)crc)));
    p += CRC_FOLD_BYTES;
    len -= CRC_FOLD_BYTES;
    for (; len >= CRC_FOLD_BYTES; p += CRC_FOLD_BYTES, len -= CRC_FOLD_BYTES) {
#define CRC_FOLD_LANE(x, off)                                                                                    \
        x = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11), \
                                      _mm512_loadu_si512(p + (off)), 0x96)
        CRC_FOLD_LANE(x0, 0);
        CRC_FOLD_LANE(x1, 64);
        CRC_FOLD_LANE(x2, 128);
        CRC_FOLD_LANE(x3, 192);
#undef CRC_FOLD_LANE
    }
    unsigned char rest[CRC_FOLD_BYTES];
    _mm512_storeu_si512(rest, x0);
    _mm512_storeu_si512(rest + 64, x1);
    _mm512_storeu_si512(rest + 128, x2);
    _mm512_storeu_si512(rest + 192, x3);
    crc = crc_hw_one(0, rest, sizeof rest);
    return crc_hw(crc, p, len);
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
    have_fold = have_hw && crc_cpu_has_fold();
    fold_k1 = crc_bitrev64(crc_xpow_mod(8 * CRC_FOLD_BYTES + 63));
    fold_k2 = crc_bitrev64(crc_xpow_mod(8 * CRC_FOLD_BYTES - 1));
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
    if (have_fold && len >= 2 * CRC_FOLD_BYTES)
        return crc_fold(crc, data, len);
    if (have_hw)
        return crc_hw(crc, data, len);
#endif
    return crc32c_update_sw(crc, data, len);
}
