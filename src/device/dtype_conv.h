/*
 * dtype_conv.h - conversions between float and the narrow float types
 * (IEEE binary16, bfloat16, OCP float8 E4M3FN and E5M2), the one definition
 * used by host kernels, CUDA kernels (DEV_FN is __host__ __device__ under
 * nvcc) and the tests' references.
 *
 * Narrow values live in their raw storage (uint16_t / uint8_t); arithmetic on
 * them converts to float, computes, and rounds back with these functions.
 * Every conversion is written with integer operations on the bit patterns,
 * not with float arithmetic, so the result does not depend on the FPU's
 * flush-to-zero/denormals-are-zero modes and subnormals are exact.
 *
 * Rounding is to nearest, ties to even, everywhere. What happens past the
 * largest finite value differs by type, as the formats' users expect:
 *   - float16 and bfloat16 overflow to infinity (IEEE);
 *   - float8 (both kinds) saturates: finite values beyond the largest
 *     finite one, and infinities, become +-max finite (CUDA's
 *     __NV_SATFINITE), since E4M3FN has no infinity at all.
 * NaN stays NaN and keeps its sign. The float16 conversions treat NaN bits
 * exactly as x86's F16C instructions do (quiet bit set, payload truncated or
 * shifted), so the host SIMD path using F16C and the portable path agree bit
 * for bit. bfloat16 sets the quiet bit and keeps the top of the payload;
 * float8 NaN is S.1111.111 for E4M3 and S.11111.11 for E5M2.
 */
#ifndef CCL_DEVICE_DTYPE_CONV_H
#define CCL_DEVICE_DTYPE_CONV_H

#include <stdint.h>
#ifndef __CUDA_ARCH__
#include <string.h>
#endif

#ifndef DEV_FN
#ifdef __CUDACC__
#define DEV_FN static inline __host__ __device__
#else
#define DEV_FN static inline
#endif
#endif

/* ---- bit casts ----------------------------------------------------------- */

DEV_FN uint32_t dev_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

DEV_FN float dev_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

DEV_FN uint64_t dev_f64_bits(double f)
{
#ifdef __CUDA_ARCH__
    return (uint64_t)__double_as_longlong(f);
#else
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

DEV_FN double dev_bits_f64(uint64_t u)
{
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)u);
#else
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* ---- float -> narrow: the shared rounding step --------------------------- */

/* Shifts m right by sh (1..31) bits, rounding to nearest, ties to even. */
DEV_FN uint32_t dev_rne_shift(uint32_t m, int sh)
{
    uint32_t half = 1u << (sh - 1);
    uint32_t rem = m & ((half << 1) - 1);
    uint32_t r = m >> sh;
    return r + (rem > half || (rem == half && (r & 1)));
}

/* The magnitude code (exponent and mantissa bits, no sign) of the finite,
 * non-negative float with bits `ax` in a format with `mbits` mantissa bits
 * and exponent bias `bias`, rounded to nearest even. The exponent field is
 * not bounded: a result past the format's largest finite code is the caller's
 * to turn into infinity or to saturate. Codes are monotonic in the value, so
 * a rounding carry from the largest mantissa into the next exponent is the
 * right code. */
DEV_FN uint32_t dev_f32_round_code(uint32_t ax, int mbits, int bias)
{
    int e = (int)(ax >> 23);
    int emin = 127 - bias + 1; /* float exponent field of the format's smallest normal */
    if (e >= emin) {
        /* Normal: rebias, then round away 23 - mbits mantissa bits (the
         * carry may run into the exponent, which is still right). */
        uint32_t r = ax - ((uint32_t)(127 - bias) << 23);
        return dev_rne_shift(r, 23 - mbits);
    }
    /* Subnormal in the format (or zero): the value is m * 2^(ee - 150); its
     * unit is 2^(1 - bias - mbits), so the code is m * 2^(ee - 151 + bias +
     * mbits), a right shift of sh bits. */
    uint32_t m = (ax & 0x7fffffu) | (e ? 0x800000u : 0);
    int ee = e ? e : 1;
    int sh = 151 - bias - mbits - ee;
    if (sh > 24)
        return 0; /* m < 2^24 <= half a unit */
    return dev_rne_shift(m, sh);
}

/* ---- float16 (IEEE binary16) --------------------------------------------- */

DEV_FN float dev_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f) /* inf, or NaN made quiet (as VCVTPH2PS does) */
        return dev_bits_f32(s | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
    if (e == 0) /* zero or subnormal: m * 2^-24, exact and normal in float */
        return dev_bits_f32(s | dev_f32_bits((float)m * 0x1p-24f));
    return dev_bits_f32(s | ((e + 112) << 23) | (m << 13));
}

DEV_FN uint16_t dev_f32_to_f16(float f)
{
    uint32_t x = dev_f32_bits(f);
    uint16_t s = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, top payload bits (as VCVTPS2PH) */
        return (uint16_t)(s | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax == 0x7f800000u)
        return (uint16_t)(s | 0x7c00u);
    uint32_t c = dev_f32_round_code(ax, 10, 15);
    return (uint16_t)(s | (c >= 0x7c00u ? 0x7c00u : c)); /* overflow: infinity */
}

/* ---- bfloat16 (the top half of a float) ---------------------------------- */

DEV_FN float dev_bf16_to_f32(uint16_t h) { return dev_bits_f32((uint32_t)h << 16); }

DEV_FN uint16_t dev_f32_to_bf16(float f)
{
    uint32_t x = dev_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it NaN (and quiet) */
        return (uint16_t)((x >> 16) | 0x40u);
    /* Round the low 16 bits away; a carry out of the largest finite value
     * reaches the infinity code, which is IEEE overflow. */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- float8 E4M3FN: bias 7, no infinity, NaN = S.1111.111, max 448 ------- */

DEV_FN float dev_e4m3_to_f32(uint8_t v)
{
    uint32_t s = (uint32_t)(v & 0x80u) << 24;
    uint32_t e = (v >> 3) & 0xfu;
    uint32_t m = v & 0x7u;
    if (e == 0xf && m == 0x7)
        return dev_bits_f32(s | 0x7fc00000u);
    if (e == 0) /* m * 2^-9 */
        return dev_bits_f32(s | dev_f32_bits((float)m * 0x1p-9f));
    return dev_bits_f32(s | ((e + 120) << 23) | (m << 20));
}

DEV_FN uint8_t dev_f32_to_e4m3(float f)
{
    uint32_t x = dev_f32_bits(f);
    uint8_t s = (uint8_t)((x >> 24) & 0x80u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (uint8_t)(s | 0x7fu);
    if (ax >= 0x43e00000u) /* >= 448 (and infinity): saturate */
        return (uint8_t)(s | 0x7eu);
    return (uint8_t)(s | dev_f32_round_code(ax, 3, 7)); /* < 448 rounds to <= 448 */
}

/* ---- float8 E5M2: bias 15, IEEE-like, max 57344 ---------------------------- */

/* E5M2 is the top byte of a float16, so widening goes through float16. */
DEV_FN float dev_e5m2_to_f32(uint8_t v) { return dev_f16_to_f32((uint16_t)((uint16_t)v << 8)); }

DEV_FN uint8_t dev_f32_to_e5m2(float f)
{
    uint32_t x = dev_f32_bits(f);
    uint8_t s = (uint8_t)((x >> 24) & 0x80u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u)
        return (uint8_t)(s | 0x7fu);
    if (ax >= 0x47600000u) /* >= 57344 (and infinity): saturate */
        return (uint8_t)(s | 0x7bu);
    return (uint8_t)(s | dev_f32_round_code(ax, 2, 15));
}

#endif
