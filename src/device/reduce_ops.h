/*
 * reduce_ops.h - the one definition of each reduction operator.
 *
 * Host kernels (reduce_host.c, reduce_simd.c) and, later, CUDA kernels
 * include this file so an operator's semantics are written once. Each
 * element type has sum, prod, max, min and div (avg's final division by the
 * rank count); names are dev_<op>_<type> with types i8 u8 i32 u32 i64 u64
 * f32 f64 and the narrow floats f16 bf16 e4m3 e5m2 (raw storage values).
 *
 * Integers: sum and prod wrap modulo 2^bits (computed in the unsigned type,
 * so signed overflow is defined); div is C's truncating division.
 *
 * float/double: sum, prod and div return one canonical NaN (all payload bits
 * set, positive; what NVIDIA GPUs produce) whenever the result is NaN. IEEE
 * leaves the NaN chosen from two NaN operands to the implementation, and a
 * compiler may swap the operands of a commutative add, so without this two
 * builds (or a scalar and a SIMD loop) could disagree in the bits of a NaN.
 * max/min are plain comparisons, `a > b ? a : b`, which is what x86's
 * MAXPS/MINPS compute for every input (including NaN and +-0), so they
 * vectorise and return one of their inputs unchanged.
 *
 * Narrow floats (float16, bfloat16, float8): convert to float, apply the
 * float operator, round back (dtype_conv.h: nearest even; float16 and
 * bfloat16 overflow to infinity, float8 saturates). Float has more than
 * twice the precision of each, plus two bits, so rounding twice gives the
 * correctly rounded result for sum, prod and div.
 */
#ifndef CCL_DEVICE_REDUCE_OPS_H
#define CCL_DEVICE_REDUCE_OPS_H

#include "device/dtype_conv.h"

#include <stdint.h>

#define DEV_NAN_F32_BITS 0x7fffffffu
#define DEV_NAN_F64_BITS 0x7fffffffffffffffull

/* Integers: T is the C type, U the unsigned type for wrapping arithmetic. */
#define DEV_DEFINE_INT_OPS(name, T, U)                                          \
    DEV_FN T dev_sum_##name(T a, T b) { return (T)((U)a + (U)b); }              \
    DEV_FN T dev_prod_##name(T a, T b) { return (T)((U)a * (U)b); }             \
    DEV_FN T dev_max_##name(T a, T b) { return a > b ? a : b; }                 \
    DEV_FN T dev_min_##name(T a, T b) { return a < b ? a : b; }                 \
    /* Divide in the promoted type: n converted to an 8-bit T would wrap at \
     * 128/256 ranks (and divide by zero at 256). */                          \
    DEV_FN T dev_div_##name(T a, int n) { return (T)(a / n); }

DEV_DEFINE_INT_OPS(i8, int8_t, uint8_t)
DEV_DEFINE_INT_OPS(u8, uint8_t, uint8_t)
DEV_DEFINE_INT_OPS(i32, int32_t, uint32_t)
DEV_DEFINE_INT_OPS(u32, uint32_t, uint32_t)
DEV_DEFINE_INT_OPS(i64, int64_t, uint64_t)
DEV_DEFINE_INT_OPS(u64, uint64_t, uint64_t)

/* Any NaN becomes the canonical one (see the top of the file). `r != r` is
 * the NaN test that needs no libm and vectorises to a compare and blend. */
DEV_FN float dev_canon_f32(float r) { return r != r ? dev_bits_f32(DEV_NAN_F32_BITS) : r; }
DEV_FN double dev_canon_f64(double r) { return r != r ? dev_bits_f64(DEV_NAN_F64_BITS) : r; }

#define DEV_DEFINE_FLT_OPS(name, T, canon)                                      \
    DEV_FN T dev_sum_##name(T a, T b) { return canon(a + b); }                  \
    DEV_FN T dev_prod_##name(T a, T b) { return canon(a * b); }                 \
    DEV_FN T dev_max_##name(T a, T b) { return a > b ? a : b; }                 \
    DEV_FN T dev_min_##name(T a, T b) { return a < b ? a : b; }                 \
    DEV_FN T dev_div_##name(T a, int n) { return canon(a / (T)n); }

DEV_DEFINE_FLT_OPS(f32, float, dev_canon_f32)
DEV_DEFINE_FLT_OPS(f64, double, dev_canon_f64)

/* Narrow floats: S is the storage type, to/from the dtype_conv.h pair. */
#define DEV_DEFINE_NARROW_OPS(name, S, to, from)                                \
    DEV_FN S dev_sum_##name(S a, S b) { return from(dev_sum_f32(to(a), to(b))); }   \
    DEV_FN S dev_prod_##name(S a, S b) { return from(dev_prod_f32(to(a), to(b))); } \
    DEV_FN S dev_max_##name(S a, S b) { return from(dev_max_f32(to(a), to(b))); }   \
    DEV_FN S dev_min_##name(S a, S b) { return from(dev_min_f32(to(a), to(b))); }   \
    DEV_FN S dev_div_##name(S a, int n) { return from(dev_div_f32(to(a), n)); }

DEV_DEFINE_NARROW_OPS(f16, uint16_t, dev_f16_to_f32, dev_f32_to_f16)
DEV_DEFINE_NARROW_OPS(bf16, uint16_t, dev_bf16_to_f32, dev_f32_to_bf16)
DEV_DEFINE_NARROW_OPS(e4m3, uint8_t, dev_e4m3_to_f32, dev_f32_to_e4m3)
DEV_DEFINE_NARROW_OPS(e5m2, uint8_t, dev_e5m2_to_f32, dev_f32_to_e5m2)

#endif
