/*
 * reduce_simd_x86.c - AVX-512 and AVX2 kernels for float32, float16,
 * bfloat16 and float8 (see reduce_simd.h), compiled with per-function
 * target attributes so the file builds for any x86-64 and reduce_host.c
 * calls them only after cpuid said yes.
 *
 * Every kernel widens its inputs to float vectors, applies the float
 * operator, and narrows back, exactly as reduce_ops.h defines it:
 *   - float16 uses VCVTPH2PS / VCVTPS2PH with round-to-nearest-even, whose
 *     results (NaN bits, subnormals, overflow to infinity) dtype_conv.h
 *     matches bit for bit;
 *   - bfloat16 widens by interleaving with zeros and narrows with the same
 *     integer nearest-even rounding as dev_f32_to_bf16 (VCVTNEPS2BF16 would
 *     flush subnormals and so differ);
 *   - float8 converts with integer operations (section "float8" below);
 *   - sum and prod turn any NaN into the canonical one, max/min are
 *     MAXPS/MINPS with the operands in the order `a > b ? a : b` needs.
 * Element counts that do not fill a vector go through the scalar operators
 * themselves. Outputs of nt_from bytes or more are streamed past the
 * caches (after a scalar head that aligns dst to 64 bytes) and fenced
 * before returning, so callers see ordinary stores.
 */
#include "device/reduce_simd.h"

#if defined(__x86_64__)

#include "device/reduce_ops.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define T256 __attribute__((target("avx2,f16c")))
#define INL static inline __attribute__((always_inline))

/*
 * A kernel is a loop over "units": `lvl_ty_op(x, y)` loads one unit of
 * each source, computes, and returns the unit of results packed for one
 * store (`lvl_ty_store` / `lvl_ty_stream`). Units are 64 bytes of output
 * for AVX-512 and 32 for AVX2.
 *
 * The float operators come in two flavours of NaN handling. For float32
 * and float16, sum and prod replace a NaN by the canonical float NaN
 * 0x7fffffff (narrowed by VCVTPS2PH to 0x7fff, as dev_f32_to_f16 does). The
 * bfloat16 narrowing below is the bare rounding x + 0x7fff + lsb, which
 * would carry 0x7fffffff into the sign bit, so its sum and prod use
 * 0x7fff0000 instead: another NaN whose rounding gives 0x7fff, the bits
 * dev_f32_to_bf16 gives for the canonical NaN. Its max/min set the quiet
 * bit of a NaN they pick (whose low 16 bits are zero: it came from a
 * bfloat16), which the rounding then keeps, as dev_f32_to_bf16 does.
 */

/* ---- AVX-512 operators on 16 floats ----------------------------------------- */

T512 INL __m512 v16_nan_to(__m512 r, int bits)
{
    __mmask16 nan = _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(r, nan, _mm512_castsi512_ps(_mm512_set1_epi32(bits)));
}
T512 INL __m512 v16_quiet(__m512 r)
{
    __mmask16 nan = _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
    return _mm512_mask_or_ps(r, nan, r, _mm512_castsi512_ps(_mm512_set1_epi32(0x400000)));
}
T512 INL __m512 v16_sum(__m512 a, __m512 b) { return v16_nan_to(_mm512_add_ps(a, b), (int)DEV_NAN_F32_BITS); }
T512 INL __m512 v16_prod(__m512 a, __m512 b) { return v16_nan_to(_mm512_mul_ps(a, b), (int)DEV_NAN_F32_BITS); }
T512 INL __m512 v16_max(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
T512 INL __m512 v16_min(__m512 a, __m512 b) { return _mm512_min_ps(a, b); }
T512 INL __m512 v16_bf_sum(__m512 a, __m512 b) { return v16_nan_to(_mm512_add_ps(a, b), 0x7fff0000); }
T512 INL __m512 v16_bf_prod(__m512 a, __m512 b) { return v16_nan_to(_mm512_mul_ps(a, b), 0x7fff0000); }
T512 INL __m512 v16_bf_max(__m512 a, __m512 b) { return v16_quiet(_mm512_max_ps(a, b)); }
T512 INL __m512 v16_bf_min(__m512 a, __m512 b) { return v16_quiet(_mm512_min_ps(a, b)); }

/* Nearest-even rounding of 16 floats to the bfloat16 in their top halves
 * (NaN lanes prepared by the operator, see above). */
T512 INL __m512i v16_round_bf16(__m512 v)
{
    __m512i x = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    return _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
}

/* ---- AVX-512 units: 64 bytes of output ---------------------------------------- */

#define AVX512_UNITS(op)                                                                   \
    T512 INL __m512 avx512_f32_##op(const char *x, const char *y)                          \
    {                                                                                      \
        return v16_##op(_mm512_loadu_ps(x), _mm512_loadu_ps(y));                           \
    }                                                                                      \
    /* 32 halves: widen each 256-bit half, compute, narrow, rejoin. */                     \
    T512 INL __m512i avx512_f16_##op(const char *x, const char *y)                         \
    {                                                                                      \
        __m512i a = _mm512_loadu_si512(x), b = _mm512_loadu_si512(y);                      \
        __m512 lo = v16_##op(_mm512_cvtph_ps(_mm512_castsi512_si256(a)),                   \
                             _mm512_cvtph_ps(_mm512_castsi512_si256(b)));                  \
        __m512 hi = v16_##op(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(a, 1)),             \
                             _mm512_cvtph_ps(_mm512_extracti64x4_epi64(b, 1)));            \
        __m256i l = _mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);    \
        __m256i h = _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);    \
        return _mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1);                        \
    }                                                                                      \
    /* 32 bfloat16: interleaving with zeros puts each in the top half of a   \
     * 32-bit lane (elements 0-3, 8-11, ... in `lo`); the saturating pack is \
     * the exact inverse (lanes hold 0..0xffff), so the order comes back. */ \
    T512 INL __m512i avx512_bf16_##op(const char *x, const char *y)                        \
    {                                                                                      \
        __m512i a = _mm512_loadu_si512(x), b = _mm512_loadu_si512(y);                      \
        __m512i z = _mm512_setzero_si512();                                                \
        __m512 lo = v16_bf_##op(_mm512_castsi512_ps(_mm512_unpacklo_epi16(z, a)),          \
                                _mm512_castsi512_ps(_mm512_unpacklo_epi16(z, b)));         \
        __m512 hi = v16_bf_##op(_mm512_castsi512_ps(_mm512_unpackhi_epi16(z, a)),          \
                                _mm512_castsi512_ps(_mm512_unpackhi_epi16(z, b)));         \
        return _mm512_packus_epi32(v16_round_bf16(lo), v16_round_bf16(hi));                \
    }

AVX512_UNITS(sum)
AVX512_UNITS(prod)
AVX512_UNITS(max)
AVX512_UNITS(min)

T512 INL void avx512_f32_store(char *p, __m512 v) { _mm512_storeu_ps(p, v); }
T512 INL void avx512_f32_stream(char *p, __m512 v) { _mm512_stream_ps((float *)p, v); }
T512 INL void avx512_f16_store(char *p, __m512i v) { _mm512_storeu_si512(p, v); }
T512 INL void avx512_f16_stream(char *p, __m512i v) { _mm512_stream_si512((void *)p, v); }
#define avx512_bf16_store avx512_f16_store
#define avx512_bf16_stream avx512_f16_stream
typedef __m512 avx512_f32_t;
typedef __m512i avx512_f16_t;
typedef __m512i avx512_bf16_t;

/* ---- AVX2 operators on 8 floats --------------------------------------------- */

T256 INL __m256 v8_nan_to(__m256 r, int bits)
{
    __m256 nan = _mm256_cmp_ps(r, r, _CMP_UNORD_Q);
    return _mm256_blendv_ps(r, _mm256_castsi256_ps(_mm256_set1_epi32(bits)), nan);
}
T256 INL __m256 v8_quiet(__m256 r)
{
    __m256 nan = _mm256_cmp_ps(r, r, _CMP_UNORD_Q);
    return _mm256_or_ps(r, _mm256_and_ps(nan, _mm256_castsi256_ps(_mm256_set1_epi32(0x400000))));
}
T256 INL __m256 v8_sum(__m256 a, __m256 b) { return v8_nan_to(_mm256_add_ps(a, b), (int)DEV_NAN_F32_BITS); }
T256 INL __m256 v8_prod(__m256 a, __m256 b) { return v8_nan_to(_mm256_mul_ps(a, b), (int)DEV_NAN_F32_BITS); }
T256 INL __m256 v8_max(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
T256 INL __m256 v8_min(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
T256 INL __m256 v8_bf_sum(__m256 a, __m256 b) { return v8_nan_to(_mm256_add_ps(a, b), 0x7fff0000); }
T256 INL __m256 v8_bf_prod(__m256 a, __m256 b) { return v8_nan_to(_mm256_mul_ps(a, b), 0x7fff0000); }
T256 INL __m256 v8_bf_max(__m256 a, __m256 b) { return v8_quiet(_mm256_max_ps(a, b)); }
T256 INL __m256 v8_bf_min(__m256 a, __m256 b) { return v8_quiet(_mm256_min_ps(a, b)); }

T256 INL __m256i v8_round_bf16(__m256 v)
{
    __m256i x = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
}

/* ---- AVX2 units: 32 bytes of output ---------------------------------------------- */

#define AVX2_UNITS(op)                                                                     \
    T256 INL __m256 avx2_f32_##op(const char *x, const char *y)                            \
    {                                                                                      \
        return v8_##op(_mm256_loadu_ps((const float *)x), _mm256_loadu_ps((const float *)y)); \
    }                                                                                      \
    T256 INL __m256i avx2_f16_##op(const char *x, const char *y)                           \
    {                                                                                      \
        __m256i a = _mm256_loadu_si256((const __m256i *)x);                                \
        __m256i b = _mm256_loadu_si256((const __m256i *)y);                                \
        __m256 lo = v8_##op(_mm256_cvtph_ps(_mm256_castsi256_si128(a)),                    \
                            _mm256_cvtph_ps(_mm256_castsi256_si128(b)));                   \
        __m256 hi = v8_##op(_mm256_cvtph_ps(_mm256_extracti128_si256(a, 1)),               \
                            _mm256_cvtph_ps(_mm256_extracti128_si256(b, 1)));              \
        __m128i l = _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT);                        \
        __m128i h = _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT);                        \
        return _mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1);                   \
    }                                                                                      \
    T256 INL __m256i avx2_bf16_##op(const char *x, const char *y)                          \
    {                                                                                      \
        __m256i a = _mm256_loadu_si256((const __m256i *)x);                                \
        __m256i b = _mm256_loadu_si256((const __m256i *)y);                                \
        __m256i z = _mm256_setzero_si256();                                                \
        __m256 lo = v8_bf_##op(_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, a)),           \
                               _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, b)));          \
        __m256 hi = v8_bf_##op(_mm256_castsi256_ps(_mm256_unpackhi_epi16(z, a)),           \
                               _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, b)));          \
        return _mm256_packus_epi32(v8_round_bf16(lo), v8_round_bf16(hi));                  \
    }

AVX2_UNITS(sum)
AVX2_UNITS(prod)
AVX2_UNITS(max)
AVX2_UNITS(min)

T256 INL void avx2_f32_store(char *p, __m256 v) { _mm256_storeu_ps((float *)p, v); }
T256 INL void avx2_f32_stream(char *p, __m256 v) { _mm256_stream_ps((float *)p, v); }
T256 INL void avx2_f16_store(char *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }
T256 INL void avx2_f16_stream(char *p, __m256i v) { _mm256_stream_si256((__m256i *)p, v); }
#define avx2_bf16_store avx2_f16_store
#define avx2_bf16_stream avx2_f16_stream
typedef __m256 avx2_f32_t;
typedef __m256i avx2_f16_t;
typedef __m256i avx2_bf16_t;

/* ---- float8: widening and narrowing with integer operations ------------------ */

/*
 * Float8 has no conversion instructions on these CPUs, so the vectors do
 * what dtype_conv.h does, lane by lane, with integer operations (no
 * dependence on MXCSR's FTZ/DAZ):
 *   - E4M3 widens by moving the 7 magnitude bits under float's exponent and
 *     rebiasing; its subnormals (exponent 0) are the exact product m * 2^-9;
 *   - E5M2 is the top byte of a float16 and widens through VCVTPH2PS, as
 *     dev_e5m2_to_f32 goes through dev_f16_to_f32;
 *   - narrowing rounds to nearest even with a per-lane shift: 23 - mbits
 *     mantissa bits for results in the format's normal range, more for its
 *     subnormals (dev_f32_round_code), then saturates (SATFINITE) and maps
 *     NaN to S.1111111.
 * Two float8 operands take 256 x 256 values, which the unit test checks
 * exhaustively against the scalar operators.
 */
#define F8_NAN_CODE 0x7f
#define E4M3_MBITS 3
#define E4M3_BIAS 7
#define E4M3_SAT_FROM 0x43e00000 /* 448.0f and above saturate */
#define E4M3_SAT_CODE 0x7e
#define E5M2_MBITS 2
#define E5M2_BIAS 15
#define E5M2_SAT_FROM 0x47600000 /* 57344.0f */
#define E5M2_SAT_CODE 0x7b

T512 INL __m512 v16_from_e4m3(__m128i bytes)
{
    __m512i c = _mm512_cvtepu8_epi32(bytes);
    __m512i mag = _mm512_and_si512(c, _mm512_set1_epi32(0x7f));
    __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
    __m512i bits = _mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23));
    __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(mag), _mm512_set1_ps(0x1p-9f));
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(8)),
                                 _mm512_castps_si512(sub));
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7f)),
                                 _mm512_set1_epi32(0x7fc00000));
    return _mm512_castsi512_ps(_mm512_or_si512(bits, sign));
}

T512 INL __m512 v16_from_e5m2(__m128i bytes)
{
    return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(bytes), 8));
}

T512 INL __m128i v16_to_f8(__m512 v, int mbits, int bias, int sat_from, int sat_code)
{
    __m512i one = _mm512_set1_epi32(1);
    __m512i x = _mm512_castps_si512(v);
    __m512i sign = _mm512_and_si512(_mm512_srli_epi32(x, 24), _mm512_set1_epi32(0x80));
    __m512i ax = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
    __m512i e = _mm512_srli_epi32(ax, 23);
    __mmask16 normal = _mm512_cmpge_epi32_mask(e, _mm512_set1_epi32(128 - bias));
    /* Subnormal in the format: the full significand, shifted by at most 25
     * (beyond that it is below half a unit and rounds to zero). */
    __m512i m = _mm512_and_si512(ax, _mm512_set1_epi32(0x7fffff));
    m = _mm512_mask_or_epi32(m, _mm512_test_epi32_mask(e, e), m, _mm512_set1_epi32(0x800000));
    __m512i sh = _mm512_min_epi32(_mm512_sub_epi32(_mm512_set1_epi32(151 - bias - mbits),
                                                   _mm512_max_epi32(e, one)),
                                  _mm512_set1_epi32(25));
    __m512i val = _mm512_mask_sub_epi32(m, normal, ax, _mm512_set1_epi32((127 - bias) << 23));
    sh = _mm512_mask_mov_epi32(sh, normal, _mm512_set1_epi32(23 - mbits));
    __m512i half = _mm512_sllv_epi32(one, _mm512_sub_epi32(sh, one));
    __m512i rem = _mm512_and_si512(val, _mm512_sub_epi32(_mm512_add_epi32(half, half), one));
    __m512i r = _mm512_srlv_epi32(val, sh);
    __mmask16 up = _mm512_cmpgt_epi32_mask(rem, half) |
                   (_mm512_cmpeq_epi32_mask(rem, half) & _mm512_test_epi32_mask(r, one));
    r = _mm512_mask_add_epi32(r, up, r, one);
    r = _mm512_mask_mov_epi32(r, _mm512_cmpge_epi32_mask(ax, _mm512_set1_epi32(sat_from)),
                              _mm512_set1_epi32(sat_code));
    r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epi32_mask(ax, _mm512_set1_epi32(0x7f800000)),
                              _mm512_set1_epi32(F8_NAN_CODE));
    return _mm512_cvtepi32_epi8(_mm512_or_si512(r, sign));
}

T256 INL __m256 v8_from_e4m3(__m128i bytes)
{
    __m256i c = _mm256_cvtepu8_epi32(bytes);
    __m256i mag = _mm256_and_si256(c, _mm256_set1_epi32(0x7f));
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
    __m256i bits = _mm256_add_epi32(_mm256_slli_epi32(mag, 20), _mm256_set1_epi32(120 << 23));
    __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(0x1p-9f));
    bits = _mm256_blendv_epi8(bits, _mm256_castps_si256(sub),
                              _mm256_cmpgt_epi32(_mm256_set1_epi32(8), mag));
    bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7fc00000),
                              _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7f)));
    return _mm256_castsi256_ps(_mm256_or_si256(bits, sign));
}

T256 INL __m256 v8_from_e5m2(__m128i bytes)
{
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(bytes), 8));
}

/* The 8 codes land in the low 8 bytes. */
T256 INL __m128i v8_to_f8(__m256 v, int mbits, int bias, int sat_from, int sat_code)
{
    __m256i one = _mm256_set1_epi32(1);
    __m256i x = _mm256_castps_si256(v);
    __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 24), _mm256_set1_epi32(0x80));
    __m256i ax = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    __m256i e = _mm256_srli_epi32(ax, 23);
    __m256i normal = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(127 - bias));
    __m256i m = _mm256_and_si256(ax, _mm256_set1_epi32(0x7fffff));
    __m256i implicit = _mm256_andnot_si256(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()),
                                           _mm256_set1_epi32(0x800000));
    m = _mm256_or_si256(m, implicit);
    __m256i sh = _mm256_min_epi32(_mm256_sub_epi32(_mm256_set1_epi32(151 - bias - mbits),
                                                   _mm256_max_epi32(e, one)),
                                  _mm256_set1_epi32(25));
    __m256i val = _mm256_blendv_epi8(m, _mm256_sub_epi32(ax, _mm256_set1_epi32((127 - bias) << 23)),
                                     normal);
    sh = _mm256_blendv_epi8(sh, _mm256_set1_epi32(23 - mbits), normal);
    __m256i half = _mm256_sllv_epi32(one, _mm256_sub_epi32(sh, one));
    __m256i rem = _mm256_and_si256(val, _mm256_sub_epi32(_mm256_add_epi32(half, half), one));
    __m256i r = _mm256_srlv_epi32(val, sh);
    __m256i tie_odd = _mm256_and_si256(_mm256_cmpeq_epi32(rem, half),
                                       _mm256_cmpeq_epi32(_mm256_and_si256(r, one), one));
    __m256i up = _mm256_or_si256(_mm256_cmpgt_epi32(rem, half), tie_odd);
    r = _mm256_sub_epi32(r, up); /* up is -1 where rounding up */
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(sat_code),
                           _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(sat_from - 1)));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(F8_NAN_CODE),
                           _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7f800000)));
    r = _mm256_or_si256(r, sign);
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    return _mm_packus_epi16(w, w);
}

/* ---- narrow floats as vectors of floats: 16 (AVX-512) or 8 (AVX2) elements --- */

/* get: load and widen; put: narrow and store. bfloat16's put expects NaN
 * lanes prepared as its operators above prepare them. */
T512 INL __m512 v16_get_f16(const char *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
T512 INL void v16_put_f16(char *p, __m512 v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
T512 INL __m512 v16_get_bf16(const char *p)
{
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
T512 INL void v16_put_bf16(char *p, __m512 v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(v16_round_bf16(v)));
}
T512 INL __m512 v16_get_e4m3(const char *p) { return v16_from_e4m3(_mm_loadu_si128((const __m128i *)p)); }
T512 INL __m512 v16_get_e5m2(const char *p) { return v16_from_e5m2(_mm_loadu_si128((const __m128i *)p)); }
T512 INL __m128i v16_pack_e4m3(__m512 v) { return v16_to_f8(v, E4M3_MBITS, E4M3_BIAS, E4M3_SAT_FROM, E4M3_SAT_CODE); }
T512 INL __m128i v16_pack_e5m2(__m512 v) { return v16_to_f8(v, E5M2_MBITS, E5M2_BIAS, E5M2_SAT_FROM, E5M2_SAT_CODE); }
T512 INL void v16_put_e4m3(char *p, __m512 v) { _mm_storeu_si128((__m128i *)p, v16_pack_e4m3(v)); }
T512 INL void v16_put_e5m2(char *p, __m512 v) { _mm_storeu_si128((__m128i *)p, v16_pack_e5m2(v)); }

T256 INL __m256 v8_get_f16(const char *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
T256 INL void v8_put_f16(char *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
T256 INL __m256 v8_get_bf16(const char *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
T256 INL void v8_put_bf16(char *p, __m256 v)
{
    __m256i r = v8_round_bf16(v);
    _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
}
T256 INL __m256 v8_get_e4m3(const char *p) { return v8_from_e4m3(_mm_loadl_epi64((const __m128i *)p)); }
T256 INL __m256 v8_get_e5m2(const char *p) { return v8_from_e5m2(_mm_loadl_epi64((const __m128i *)p)); }
T256 INL __m128i v8_pack_e4m3(__m256 v) { return v8_to_f8(v, E4M3_MBITS, E4M3_BIAS, E4M3_SAT_FROM, E4M3_SAT_CODE); }
T256 INL __m128i v8_pack_e5m2(__m256 v) { return v8_to_f8(v, E5M2_MBITS, E5M2_BIAS, E5M2_SAT_FROM, E5M2_SAT_CODE); }
T256 INL void v8_put_e4m3(char *p, __m256 v) { _mm_storel_epi64((__m128i *)p, v8_pack_e4m3(v)); }
T256 INL void v8_put_e5m2(char *p, __m256 v) { _mm_storel_epi64((__m128i *)p, v8_pack_e5m2(v)); }

/* float8 units for the kernel loop below: 16 bytes of output (AVX-512), 8
 * (AVX2). Float8 has no NaN payload to keep, so the float operators'
 * canonical NaN serves (it narrows to 0x7f, as dev_f32_to_e4m3 makes it). */
#define F8_UNITS(ty, op)                                                                   \
    T512 INL __m128i avx512_##ty##_##op(const char *x, const char *y)                      \
    {                                                                                      \
        return v16_pack_##ty(v16_##op(v16_get_##ty(x), v16_get_##ty(y)));                 \
    }                                                                                      \
    T256 INL __m128i avx2_##ty##_##op(const char *x, const char *y)                        \
    {                                                                                      \
        return v8_pack_##ty(v8_##op(v8_get_##ty(x), v8_get_##ty(y)));                      \
    }
#define F8_ALL_UNITS(ty) F8_UNITS(ty, sum) F8_UNITS(ty, prod) F8_UNITS(ty, max) F8_UNITS(ty, min)
F8_ALL_UNITS(e4m3)
F8_ALL_UNITS(e5m2)

T512 INL void avx512_e4m3_store(char *p, __m128i v) { _mm_storeu_si128((__m128i *)p, v); }
T512 INL void avx512_e4m3_stream(char *p, __m128i v) { _mm_stream_si128((__m128i *)p, v); }
T256 INL void avx2_e4m3_store(char *p, __m128i v) { _mm_storel_epi64((__m128i *)p, v); }
T256 INL void avx2_e4m3_stream(char *p, __m128i v) { _mm_stream_si64((long long *)p, _mm_cvtsi128_si64(v)); }
#define avx512_e5m2_store avx512_e4m3_store
#define avx512_e5m2_stream avx512_e4m3_stream
#define avx2_e5m2_store avx2_e4m3_store
#define avx2_e5m2_stream avx2_e4m3_stream
typedef __m128i avx512_e4m3_t;
typedef __m128i avx512_e5m2_t;
typedef __m128i avx2_e4m3_t;
typedef __m128i avx2_e5m2_t;

/* ---- the kernels ------------------------------------------------------------ */

#define CTYPE_f32 float
#define CTYPE_f16 uint16_t
#define CTYPE_bf16 uint16_t
#define CTYPE_e4m3 uint8_t
#define CTYPE_e5m2 uint8_t

/* Elements [from, to) through the scalar operators: heads and tails. */
#define SCALAR_RANGE(ty, op, from, to)                                                      \
    for (size_t i_ = (from); i_ < (to); i_++) {                                             \
        CTYPE_##ty r_ = dev_##op##_##ty(((const CTYPE_##ty *)a)[i_], ((const CTYPE_##ty *)b)[i_]); \
        ((CTYPE_##ty *)dst)[i_] = r_;                                                       \
        if (dst2)                                                                           \
            ((CTYPE_##ty *)dst2)[i_] = r_;                                                  \
    }

/* Units of UB output bytes, four per round; `st`/`st2` store to dst/dst2
 * (plain or streaming). A round's loads come before its stores, so dst may
 * alias a or b. */
#define UNIT_LOOP(lvl, ty, op, UB, st, st2)                                                 \
    for (; i + 4 * UE <= n; i += 4 * UE) {                                                  \
        const char *x_ = (const char *)a + i * ES, *y_ = (const char *)b + i * ES;          \
        char *d_ = (char *)dst + i * ES;                                                    \
        lvl##_##ty##_t r0 = lvl##_##ty##_##op(x_, y_);                                      \
        lvl##_##ty##_t r1 = lvl##_##ty##_##op(x_ + (UB), y_ + (UB));                        \
        lvl##_##ty##_t r2 = lvl##_##ty##_##op(x_ + 2 * (UB), y_ + 2 * (UB));                \
        lvl##_##ty##_t r3 = lvl##_##ty##_##op(x_ + 3 * (UB), y_ + 3 * (UB));                \
        lvl##_##ty##_##st(d_, r0);                                                          \
        lvl##_##ty##_##st(d_ + (UB), r1);                                                   \
        lvl##_##ty##_##st(d_ + 2 * (UB), r2);                                               \
        lvl##_##ty##_##st(d_ + 3 * (UB), r3);                                               \
        if (dst2) {                                                                         \
            char *e_ = (char *)dst2 + i * ES;                                               \
            lvl##_##ty##_##st2(e_, r0);                                                     \
            lvl##_##ty##_##st2(e_ + (UB), r1);                                              \
            lvl##_##ty##_##st2(e_ + 2 * (UB), r2);                                          \
            lvl##_##ty##_##st2(e_ + 3 * (UB), r3);                                          \
        }                                                                                   \
    }                                                                                       \
    for (; i + UE <= n; i += UE) {                                                          \
        lvl##_##ty##_t r_ = lvl##_##ty##_##op((const char *)a + i * ES, (const char *)b + i * ES); \
        lvl##_##ty##_##st((char *)dst + i * ES, r_);                                        \
        if (dst2)                                                                           \
            lvl##_##ty##_##st2((char *)dst2 + i * ES, r_);                                  \
    }

#define KERNEL(lvl, TGT, UB, ty, op)                                                        \
    TGT void dev_##lvl##_##op##_##ty(void *dst, void *dst2, const void *a, const void *b,   \
                                     size_t n, size_t nt_from)                              \
    {                                                                                       \
        enum { ES = sizeof(CTYPE_##ty), UE = (UB) / sizeof(CTYPE_##ty) };                   \
        size_t i = 0;                                                                       \
        if (n * ES >= nt_from && (uintptr_t)dst % ES == 0) {                                \
            size_t head = ((64 - ((uintptr_t)dst & 63)) & 63) / ES;                         \
            if (head > n) /* a short output that never reaches a 64-byte boundary */          \
                head = n;                                                                   \
            SCALAR_RANGE(ty, op, 0, head)                                                   \
            i = head;                                                                       \
            if (!dst2 || (((uintptr_t)dst2 - (uintptr_t)dst) & 63) == 0) {                  \
                UNIT_LOOP(lvl, ty, op, UB, stream, stream)                                  \
            } else {                                                                        \
                UNIT_LOOP(lvl, ty, op, UB, stream, store)                                   \
            }                                                                               \
            SCALAR_RANGE(ty, op, i, n)                                                      \
            _mm_sfence();                                                                   \
            return;                                                                         \
        }                                                                                   \
        UNIT_LOOP(lvl, ty, op, UB, store, store)                                            \
        SCALAR_RANGE(ty, op, i, n)                                                          \
    }

#define KERNELS(lvl, TGT, UB, ty)                                                           \
    KERNEL(lvl, TGT, UB, ty, sum)                                                           \
    KERNEL(lvl, TGT, UB, ty, prod)                                                          \
    KERNEL(lvl, TGT, UB, ty, max)                                                           \
    KERNEL(lvl, TGT, UB, ty, min)

KERNELS(avx512, T512, 64, f32)
KERNELS(avx512, T512, 64, f16)
KERNELS(avx512, T512, 64, bf16)
KERNELS(avx2, T256, 32, f32)
KERNELS(avx2, T256, 32, f16)
KERNELS(avx2, T256, 32, bf16)
KERNELS(avx512, T512, 16, e4m3)
KERNELS(avx512, T512, 16, e5m2)
KERNELS(avx2, T256, 8, e4m3)
KERNELS(avx2, T256, 8, e5m2)

/*
 * avg's division and premul's product for the narrow floats: widen, apply
 * the float operator, narrow, VE elements at a time (the compiler cannot
 * vectorise the scalar conversions' branches). NANB is the NaN the put
 * needs (see the operators at the top). The scalar operators finish the
 * tail; dst may be src.
 */
#define UNARY_KERNELS(lvl, TGT, V, VT, VE, ty, NANB)                                            TGT void dev_##lvl##_div_##ty(void *buf, size_t n, int nranks)                              {                                                                                               enum { ES = sizeof(CTYPE_##ty) };                                                           VT d = V##_set1((float)nranks);                                                             char *p = buf;                                                                              size_t i = 0;                                                                               for (; i + VE <= n; i += VE)                                                                    V##_put_##ty(p + i * ES, V##_nan_to(V##_div(V##_get_##ty(p + i * ES), d), NANB));         for (; i < n; i++)                                                                              ((CTYPE_##ty *)buf)[i] = dev_div_##ty(((CTYPE_##ty *)buf)[i], nranks);              }                                                                                           TGT void dev_##lvl##_premul_##ty(void *dst, const void *src, size_t n, const void *scalar)     {                                                                                               enum { ES = sizeof(CTYPE_##ty) };                                                           CTYPE_##ty s;                                                                               memcpy(&s, scalar, sizeof s); /* may be unaligned */                                        VT sv = V##_set1(dev_##ty##_to_f32(s));                                                     const char *x = src;                                                                        size_t i = 0;                                                                               for (; i + VE <= n; i += VE)                                                                    V##_put_##ty((char *)dst + i * ES,                                                                       V##_nan_to(V##_mul(V##_get_##ty(x + i * ES), sv), NANB));                  for (; i < n; i++)                                                                              ((CTYPE_##ty *)dst)[i] = dev_prod_##ty(s, ((const CTYPE_##ty *)src)[i]);            }

#define v16_set1 _mm512_set1_ps
#define v16_div _mm512_div_ps
#define v16_mul _mm512_mul_ps
#define v8_set1 _mm256_set1_ps
#define v8_div _mm256_div_ps
#define v8_mul _mm256_mul_ps

#define NAN_CANON ((int)DEV_NAN_F32_BITS)
#define NAN_BF16 0x7fff0000
UNARY_KERNELS(avx512, T512, v16, __m512, 16, f16, NAN_CANON)
UNARY_KERNELS(avx512, T512, v16, __m512, 16, bf16, NAN_BF16)
UNARY_KERNELS(avx512, T512, v16, __m512, 16, e4m3, NAN_CANON)
UNARY_KERNELS(avx512, T512, v16, __m512, 16, e5m2, NAN_CANON)
UNARY_KERNELS(avx2, T256, v8, __m256, 8, f16, NAN_CANON)
UNARY_KERNELS(avx2, T256, v8, __m256, 8, bf16, NAN_BF16)
UNARY_KERNELS(avx2, T256, v8, __m256, 8, e4m3, NAN_CANON)
UNARY_KERNELS(avx2, T256, v8, __m256, 8, e5m2, NAN_CANON)

#endif
