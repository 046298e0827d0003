/*
 * copy_host.c - non-temporal copies with run-time ISA choice (see copy.h).
 *
 * The unaligned head and the tail go through memcpy; the aligned body uses
 * the widest streaming store the CPU has.
 */
#include "device/copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static void copy_nt_avx512(char *d, const char *s, size_t n)
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
    }
}

__attribute__((target("avx2"))) static void copy_nt_avx2(char *d, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 256)
        for (size_t j = 0; j < 256; j += 32)
            _mm256_stream_si256((__m256i *)(d + i + j), _mm256_loadu_si256((const __m256i *)(s + i + j)));
}

static void copy_nt_sse2(char *d, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 256)
        for (size_t j = 0; j < 256; j += 16)
            _mm_stream_si128((__m128i *)(d + i + j), _mm_loadu_si128((const __m128i *)(s + i + j)));
}

typedef void (*copy_fn_t)(char *, const char *, size_t);

static copy_fn_t copy_pick(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return copy_nt_avx512;
    if (__builtin_cpu_supports("avx2"))
        return copy_nt_avx2;
    return copy_nt_sse2;
}

void dev_copy_stream(void *dst, const void *src, size_t bytes)
{
    static copy_fn_t fn;
    if (!fn)
        fn = copy_pick(); /* idempotent: a race only repeats the choice */
    char *d = dst;
    const char *s = src;
    size_t head = (64 - ((uintptr_t)d & 63)) & 63;
    if (head > bytes)
        head = bytes;
    memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    size_t body = bytes & ~(size_t)255;
    if (body)
        fn(d, s, body);
    memcpy(d + body, s + body, bytes - body);
}

void dev_copy_fence(void) { _mm_sfence(); }

#else
void dev_copy_stream(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void dev_copy_fence(void) {}
#endif
