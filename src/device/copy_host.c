/*
 * copy_host.c - non-temporal copies with run-time ISA choice (see copy.h).
 *
 * The unaligned head and the tail go through memcpy; the aligned body uses
 * the widest streaming store the CPU has. dev_copy_stream2 writes the same
 * bytes to two places while it reads them once: a broadcast's root and
 * its reader together write two copies of the buffer (copy.h).
 */
#include "device/copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

/* Each kernel writes the bytes to d and, when d2 is not NULL, to d2 as
 * well (d2 - d a multiple of 64): one read, two writes. The branch is the
 * same on every iteration; the loops are bound by memory, not by it. */
__attribute__((target("avx512f"))) static void copy_nt_avx512(char *d, char *d2, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 256) {
        __m512i a = _mm512_loadu_si512((const void *)(s + i));
        __m512i b = _mm512_loadu_si512((const void *)(s + i + 64));
        __m512i c = _mm512_loadu_si512((const void *)(s + i + 128));
        __m512i e = _mm512_loadu_si512((const void *)(s + i + 192));
        _mm512_stream_si512((void *)(d + i), a);
        _mm512_stream_si512((void *)(d + i + 64), b);
        _mm512_stream_si512((void *)(d + i + 128), c);
        _mm512_stream_si512((void *)(d + i + 192), e);
        if (d2) {
            _mm512_stream_si512((void *)(d2 + i), a);
            _mm512_stream_si512((void *)(d2 + i + 64), b);
            _mm512_stream_si512((void *)(d2 + i + 128), c);
            _mm512_stream_si512((void *)(d2 + i + 192), e);
        }
    }
}

__attribute__((target("avx2"))) static void copy_nt_avx2(char *d, char *d2, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 256)
        for (size_t j = 0; j < 256; j += 32) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(s + i + j));
            _mm256_stream_si256((__m256i *)(d + i + j), v);
            if (d2)
                _mm256_stream_si256((__m256i *)(d2 + i + j), v);
        }
}

static void copy_nt_sse2(char *d, char *d2, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 256)
        for (size_t j = 0; j < 256; j += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i + j));
            _mm_stream_si128((__m128i *)(d + i + j), v);
            if (d2)
                _mm_stream_si128((__m128i *)(d2 + i + j), v);
        }
}

typedef void (*copy_fn_t)(char *, char *, const char *, size_t);

static copy_fn_t copy_pick(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return copy_nt_avx512;
    if (__builtin_cpu_supports("avx2"))
        return copy_nt_avx2;
    return copy_nt_sse2;
}

static void copy_stream(char *d, char *d2, const char *s, size_t bytes)
{
    static copy_fn_t fn;
    if (!fn)
        fn = copy_pick(); /* idempotent: a race only repeats the choice */
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
        fn(d, d2, s, body);
    memcpy(d + body, s + body, bytes - body);
    if (d2)
        memcpy(d2 + body, s + body, bytes - body);
}

void dev_copy_stream(void *dst, const void *src, size_t bytes) { copy_stream(dst, NULL, src, bytes); }

void dev_copy_stream2(void *dst, void *dst2, const void *src, size_t bytes)
{
    if (((uintptr_t)dst - (uintptr_t)dst2) % 64 == 0) {
        copy_stream(dst, dst2, src, bytes);
    } else { /* the two cannot both be aligned: one after the other */
        copy_stream(dst, NULL, src, bytes);
        copy_stream(dst2, NULL, src, bytes);
    }
}

void dev_copy_fence(void) { _mm_sfence(); }

#else
void dev_copy_stream(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void dev_copy_stream2(void *dst, void *dst2, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
    memcpy(dst2, src, bytes);
}
void dev_copy_fence(void) {}
#endif
