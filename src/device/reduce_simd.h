/*
 * reduce_simd.h - internal to src/device: the hand-written x86 kernels of
 * reduce_simd_x86.c, which reduce_host.c puts in its AVX2 and AVX-512
 * tables in place of the compiler-vectorised loops.
 *
 * They cover the types a compiler does not vectorise by itself: float32
 * (plus non-temporal stores for large outputs), float16 (F16C conversions),
 * bfloat16 and float8 (integer rounding), for sum, prod, max and min, and
 * for the narrow floats also avg's division and premul. Each gives the same bits as the portable loop over
 * reduce_ops.h for every input; the unit tests compare them.
 */
#ifndef CCL_DEVICE_REDUCE_SIMD_H
#define CCL_DEVICE_REDUCE_SIMD_H

#include <stddef.h>

/* dev_reduce's outputs at least this large are written with non-temporal
 * stores (the kernels take the size as nt_from; dev_reduce_stream passes
 * 0): the
 * result cannot stay in a core's caches anyway, and streaming it skips the
 * read-for-ownership of every destination line (a quarter of the traffic
 * of dst = a + b). On the 2-core Zen 5 VM, float32 sum at 16-64 MiB ran at
 * ~70% of memcpy's bandwidth with cached stores and ~130% streaming
 * (reduce-bench). Smaller outputs, such as a collective's slot-sized
 * slices, stay cached for the step that reads them next. */
#define DEV_NT_MIN_BYTES ((size_t)8 << 20)

#if defined(__x86_64__)
#define DEV_HAVE_X86_SIMD 1

#define DEV_SIMD_DECLARE(lvl, ty)                                                               \
    void dev_##lvl##_sum_##ty(void *dst, void *dst2, const void *a, const void *b, size_t n, size_t nt_from);  \
    void dev_##lvl##_prod_##ty(void *dst, void *dst2, const void *a, const void *b, size_t n, size_t nt_from); \
    void dev_##lvl##_max_##ty(void *dst, void *dst2, const void *a, const void *b, size_t n, size_t nt_from);  \
    void dev_##lvl##_min_##ty(void *dst, void *dst2, const void *a, const void *b, size_t n, size_t nt_from);

/* avg's division and premul, for the narrow floats. */
#define DEV_SIMD_DECLARE_UNARY(lvl, ty)                                                          \
    void dev_##lvl##_div_##ty(void *buf, size_t n, int nranks);                                  \
    void dev_##lvl##_premul_##ty(void *dst, const void *src, size_t n, const void *scalar);

DEV_SIMD_DECLARE(avx512, f32)
DEV_SIMD_DECLARE(avx2, f32)
#define DEV_SIMD_DECLARE_NARROW(ty)                                                              \
    DEV_SIMD_DECLARE(avx512, ty)                                                                 \
    DEV_SIMD_DECLARE(avx2, ty)                                                                   \
    DEV_SIMD_DECLARE_UNARY(avx512, ty)                                                           \
    DEV_SIMD_DECLARE_UNARY(avx2, ty)
DEV_SIMD_DECLARE_NARROW(f16)
DEV_SIMD_DECLARE_NARROW(bf16)
DEV_SIMD_DECLARE_NARROW(e4m3)
DEV_SIMD_DECLARE_NARROW(e5m2)

#undef DEV_SIMD_DECLARE_NARROW
#undef DEV_SIMD_DECLARE_UNARY
#undef DEV_SIMD_DECLARE
#endif

#endif
