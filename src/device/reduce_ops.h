/*
 * reduce_ops.h - the one definition of each reduction operator.
 *
 * Host kernels (reduce_host.c) and, later, CUDA kernels include this file so
 * an operator's semantics are written once. Integer sum and prod wrap modulo
 * 2^bits (computed in the unsigned type, so signed overflow is defined);
 * min/max on floats use plain comparisons so they vectorise.
 */
#ifndef CCL_DEVICE_REDUCE_OPS_H
#define CCL_DEVICE_REDUCE_OPS_H

#include <stdint.h>

#ifdef __CUDACC__
#define DEV_FN static inline __host__ __device__
#else
#define DEV_FN static inline
#endif

/* One macro per element type: T is the C type, U the unsigned type used
 * for wrapping arithmetic (T itself for floats). */
#define DEV_DEFINE_OPS(name, T, U)                                              \
    DEV_FN T dev_sum_##name(T a, T b) { return (T)((U)a + (U)b); }              \
    DEV_FN T dev_prod_##name(T a, T b) { return (T)((U)a * (U)b); }             \
    DEV_FN T dev_max_##name(T a, T b) { return a > b ? a : b; }                 \
    DEV_FN T dev_min_##name(T a, T b) { return a < b ? a : b; }                 \
    /* Divide in the promoted type: n converted to an 8-bit T would wrap at \
     * 128/256 ranks (and divide by zero at 256). */                          \
    DEV_FN T dev_div_##name(T a, int n) { return (T)(a / n); }

DEV_DEFINE_OPS(i8, int8_t, uint8_t)
DEV_DEFINE_OPS(u8, uint8_t, uint8_t)
DEV_DEFINE_OPS(i32, int32_t, uint32_t)
DEV_DEFINE_OPS(u32, uint32_t, uint32_t)
DEV_DEFINE_OPS(i64, int64_t, uint64_t)
DEV_DEFINE_OPS(u64, uint64_t, uint64_t)
DEV_DEFINE_OPS(f32, float, float)
DEV_DEFINE_OPS(f64, double, double)

#endif
