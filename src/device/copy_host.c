/*
 * copy_host.c - host copies with run-time ISA choice (see copy.h).
 *
 * The unaligned head and the tail go through memcpy; the aligned body uses
 * the widest vector the CPU has, with non-temporal stores (dev_copy_stream*)
 * or plain ones (dev_copy2). The two-destination copies write the same
 * bytes to two places while they read them once: a broadcast's root and
 * its reader together write two copies of the buffer, an allgather's
 * reader writes a block into its own buffer and the poster's (copy.h).
 */
#include "device/copy.h"
#include "device/reduce.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

/* Each kernel writes the bytes to d and, when d2 is not NULL, to d2 as
 * well (d2 - d a multiple of 64): one read, two writes; non-temporal
 * stores when nt, plain ones otherwise (a constant in each wrapper's
 * inlined copy). The d2 branch is the same on every iteration; the loops
 * are bound by memory, not by it. */
__attribute__((always_inline, target("avx512f"))) static inline void copy_avx512_body(char *d, char *d2, const char *s, size_t n, int nt)
{
    for (size_t i = 0; i < n; i += 256) {
        __m512i v[4];
        for (int j = 0; j < 4; j++)
            v[j] = _mm512_loadu_si512((const void *)(s + i + 64 * j));
        for (int k = 0; k < (d2 ? 2 : 1); k++) {
            char *o = (k ? d2 : d) + i;
            for (int j = 0; j < 4; j++) {
                if (nt)
                    _mm512_stream_si512((void *)(o + 64 * j), v[j]);
                else
                    _mm512_store_si512((void *)(o + 64 * j), v[j]);
            }
        }
    }
}

__attribute__((target("avx512f"))) static void copy_avx512(char *d, char *d2, const char *s, size_t n, int nt)
{
    if (nt) /* a constant in each inlined body: no branch per store */
        copy_avx512_body(d, d2, s, n, 1);
    else
        copy_avx512_body(d, d2, s, n, 0);
}

__attribute__((always_inline, target("avx2"))) static inline void copy_avx2_body(char *d, char *d2, const char *s, size_t n, int nt)
{
    for (size_t i = 0; i < n; i += 256)
        for (size_t j = 0; j < 256; j += 32) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(s + i + j));
            for (int k = 0; k < (d2 ? 2 : 1); k++) {
                __m256i *o = (__m256i *)((k ? d2 : d) + i + j);
                if (nt)
                    _mm256_stream_si256(o, v);
                else
                    _mm256_store_si256(o, v);
            }
        }
}

__attribute__((target("avx2"))) static void copy_avx2(char *d, char *d2, const char *s, size_t n, int nt)
{
    if (nt) /* a constant in each inlined body: no branch per store */
        copy_avx2_body(d, d2, s, n, 1);
    else
        copy_avx2_body(d, d2, s, n, 0);
}

__attribute__((always_inline)) static inline void copy_sse2_body(char *d, char *d2, const char *s, size_t n, int nt)
{
    for (size_t i = 0; i < n; i += 256)
        for (size_t j = 0; j < 256; j += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i + j));
            for (int k = 0; k < (d2 ? 2 : 1); k++) {
                __m128i *o = (__m128i *)((k ? d2 : d) + i + j);
                if (nt)
                    _mm_stream_si128(o, v);
                else
                    _mm_store_si128(o, v);
            }
        }
}

static void copy_sse2(char *d, char *d2, const char *s, size_t n, int nt)
{
    if (nt) /* a constant in each inlined body: no branch per store */
        copy_sse2_body(d, d2, s, n, 1);
    else
        copy_sse2_body(d, d2, s, n, 0);
}

typedef void (*copy_fn_t)(char *, char *, const char *, size_t, int);

/* The level the reductions use (device/reduce.h: cpuid once, or what a
 * test forced with dev_simd_force), so that one choice covers both and the
 * tests reach every kernel here too. */
static copy_fn_t copy_pick(void)
{
    switch (dev_simd_current()) {
    case DEV_SIMD_AVX512: return copy_avx512;
    case DEV_SIMD_AVX2: return copy_avx2;
    default: return copy_sse2; /* every x86-64 has SSE2 */
    }
}

static void copy_vec(char *d, char *d2, const char *s, size_t bytes, int nt)
{
    copy_fn_t fn = copy_pick();
    size_t head = (64 - ((uintptr_t)d & 63)) & 63;
    if (head > bytes)
        head = bytes;
    memcpy(d, s, head);
    if (d2)
        memcpy(d2, s, head);
    d += head, s += head, bytes -= head;
    if (d2)
        d2 += head;
    size_t body = bytes & ~(size_t)255;
    if (body)
        fn(d, d2, s, body, nt);
    memcpy(d + body, s + body, bytes - body);
    if (d2)
        memcpy(d2 + body, s + body, bytes - body);
}

void dev_copy_stream(void *dst, const void *src, size_t bytes) { copy_vec(dst, NULL, src, bytes, 1); }

/* Both destinations through one pass where they can both be aligned. */
static void copy_two(void *dst, void *dst2, const void *src, size_t bytes, int nt)
{
    if (((uintptr_t)dst - (uintptr_t)dst2) % 64 == 0) {
        copy_vec(dst, dst2, src, bytes, nt);
    } else { /* the two cannot both be aligned: one after the other */
        copy_vec(dst, NULL, src, bytes, nt);
        copy_vec(dst2, NULL, src, bytes, nt);
    }
}

void dev_copy_stream2(void *dst, void *dst2, const void *src, size_t bytes) { copy_two(dst, dst2, src, bytes, 1); }

void dev_copy2(void *dst, void *dst2, const void *src, size_t bytes) { copy_two(dst, dst2, src, bytes, 0); }

void dev_copy_fence(void) { _mm_sfence(); }

#else
void dev_copy_stream(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void dev_copy_stream2(void *dst, void *dst2, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    memcpy(dst2, src, bytes);
}
void dev_copy2(void *dst, void *dst2, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    memcpy(dst2, src, bytes);
}
void dev_copy_fence(void) {}
#endif
