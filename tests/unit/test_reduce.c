/*
 * test_reduce.c - host reduction and copy kernels (src/device/reduce.h,
 * src/device/copy.h).
 *
 * Covers dtype/op metadata (sizes, names, which dtypes the host path
 * implements), dev_reduce for every supported (dtype, op) against a plain
 * scalar reference on random data at sizes that hit the SIMD heads, bodies
 * and tails, out of place, in place on either source, with a second
 * destination, and with sources and destinations at different
 * misalignments (guard bytes catch writes outside the destinations, and the
 * sources must stay unchanged); integer wraparound of sum and prod at the
 * type's edges; avg as sum followed by dev_postop's division by nranks (C
 * integer division for integer types), and dev_postop being a no-op for the
 * other ops and for one rank; dev_copy_stream (and dev_copy_stream2 and
 * dev_copy2, to two places) + dev_copy_fence, at every SIMD level, for every
 * destination and source misalignment 0..63 and every length 0..600, plus
 * large copies, with the bytes around the destination left untouched.
 *
 * The narrow floats (float16, bfloat16, float8 E4M3/E5M2) are checked
 * against a reference written here from the formats' definitions with
 * double arithmetic (no code shared with dtype_conv.h): every bit pattern
 * to float and back, ties and neighbours of every representable value,
 * a stride through all 2^32 floats, overflow (float16/bfloat16 to
 * infinity, float8 saturating), NaN bits, and every op on random bit
 * patterns. Float sum/prod/avg give the canonical NaN. dev_premul for every
 * dtype. Every SIMD level (dev_simd_force) must give the scalar level's
 * bits for every dtype and op, on special values, on every float16 and
 * bfloat16 pattern against many partners, past the non-temporal threshold,
 * and for avg's division and premul.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/copy.h"
#include "device/dtype_conv.h"
#include "device/reduce.h"

#define GUARD 64           /* guard bytes on each side of a test buffer */
#define GUARD_BYTE 0xA5
#define MAX_MISALIGN_ELEMS 3

static const ccl_datatype_t supported_dtypes[] = {
    CCL_INT8,    CCL_UINT8,   CCL_INT32,    CCL_UINT32,      CCL_INT64,      CCL_UINT64,
    CCL_FLOAT16, CCL_FLOAT32, CCL_FLOAT64,  CCL_BFLOAT16,    CCL_FLOAT8_E4M3, CCL_FLOAT8_E5M2};
#define NUM_SUPPORTED ((int)(sizeof supported_dtypes / sizeof supported_dtypes[0]))

static const ccl_redop_t all_ops[] = {CCL_SUM, CCL_PROD, CCL_MAX, CCL_MIN, CCL_AVG};
#define NUM_OPS ((int)(sizeof all_ops / sizeof all_ops[0]))

/* Sizes around the 64-byte vector widths of every element size (64 int8s,
 * 16 floats, 8 doubles per AVX-512 vector) and their unrolled multiples. */
static const size_t sizes[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65,
                               127, 128, 129, 255, 256, 257, 1000, 4099};
#define NUM_SIZES ((int)(sizeof sizes / sizeof sizes[0]))

/* ---- random numbers (splitmix64) --------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Finite floats over a wide range of magnitudes and both signs, some exact
 * zeros and small integers (so max/min see ties). */
static double rng_float(uint64_t *s)
{
    uint64_t r = rng_next(s);
    switch (r & 7) {
    case 0: return 0.0;
    case 1: return (double)((int)((r >> 8) % 21) - 10);
    default: {
        double m = (double)((r >> 11) % 2000001) - 1000000.0;
        int e = (int)((r >> 40) % 41) - 30;
        return ldexp(m, e);
    }
    }
}

static void fill_random(void *buf, ccl_datatype_t dt, size_t n, uint64_t *s)
{
    switch (dt) {
    case CCL_FLOAT32:
        for (size_t i = 0; i < n; i++)
            ((float *)buf)[i] = (float)rng_float(s);
        break;
    case CCL_FLOAT64:
        for (size_t i = 0; i < n; i++)
            ((double *)buf)[i] = rng_float(s);
        break;
    default: {
        /* Integers: every bit pattern, so sums and products wrap often. */
        unsigned char *p = buf;
        size_t bytes = n * dev_dtype_size(dt);
        for (size_t i = 0; i < bytes; i++)
            p[i] = (unsigned char)rng_next(s);
        break;
    }
    }
}

/* ---- the scalar reference ------------------------------------------------ */
/* Integers: sum and product modulo 2^64 in uint64_t, then truncated to the
 * type's width (mod 2^bits, two's complement), which is what NCCL computes.
 * avg's division is C's truncating division of the wrapped sum. */

#define REF_INT(name, T, U)                                                          \
    static T ref_##name(ccl_redop_t op, T a, T b)                                    \
    {                                                                                \
        switch (op) {                                                                \
        case CCL_SUM:                                                                \
        case CCL_AVG: return (T)(U)((uint64_t)(U)a + (uint64_t)(U)b);                \
        case CCL_PROD: return (T)(U)((uint64_t)(U)a * (uint64_t)(U)b);               \
        case CCL_MAX: return a >= b ? a : b;                                         \
        case CCL_MIN: return a <= b ? a : b;                                         \
        default: return 0;                                                           \
        }                                                                            \
    }                                                                                \
    static T ref_div_##name(T v, int n) { return (T)((int64_t)v / (int64_t)n); }

#define REF_UINT(name, T)                                                            \
    static T ref_##name(ccl_redop_t op, T a, T b)                                    \
    {                                                                                \
        switch (op) {                                                                \
        case CCL_SUM:                                                                \
        case CCL_AVG: return (T)((uint64_t)a + (uint64_t)b);                         \
        case CCL_PROD: return (T)((uint64_t)a * (uint64_t)b);                        \
        case CCL_MAX: return a >= b ? a : b;                                         \
        case CCL_MIN: return a <= b ? a : b;                                         \
        default: return 0;                                                           \
        }                                                                            \
    }                                                                                \
    static T ref_div_##name(T v, int n) { return (T)((uint64_t)v / (uint64_t)n); }

#define REF_FLT(name, T)                                                             \
    static T ref_##name(ccl_redop_t op, T a, T b)                                    \
    {                                                                                \
        switch (op) {                                                                \
        case CCL_SUM:                                                                \
        case CCL_AVG: return a + b;                                                  \
        case CCL_PROD: return a * b;                                                 \
        case CCL_MAX: return a >= b ? a : b;                                         \
        case CCL_MIN: return a <= b ? a : b;                                         \
        default: return 0;                                                           \
        }                                                                            \
    }                                                                                \
    static T ref_div_##name(T v, int n) { return v / (T)n; }

REF_INT(i8, int8_t, uint8_t)
REF_UINT(u8, uint8_t)
REF_INT(i32, int32_t, uint32_t)
REF_UINT(u32, uint32_t)
REF_INT(i64, int64_t, uint64_t)
REF_UINT(u64, uint64_t)
REF_FLT(f32, float)
REF_FLT(f64, double)

/* ---- narrow floats: an independent reference ----------------------------- */
/* Decodes and encodes float16, bfloat16 and float8 from the formats'
 * definitions with double arithmetic (frexp, ldexp, rint for ties-to-even),
 * sharing no code with dtype_conv.h. Sums and products of two narrow values
 * are exact in double, so one rounding gives the correctly rounded result
 * that float arithmetic plus dtype_conv.h's rounding must also produce. */

typedef struct {
    const char *name;
    int ebits, mbits, bias;
    int fn;            /* E4M3FN: no infinity, NaN only at all-ones */
    int saturate;      /* overflow and infinity give max finite, not infinity */
    double max_finite;
    uint32_t canon_nan; /* what the canonical float NaN converts to */
} nfmt_t;

static const nfmt_t fmt_f16 = {"float16", 5, 10, 15, 0, 0, 65504.0, 0x7fff};
static const nfmt_t fmt_bf16 = {"bfloat16", 8, 7, 127, 0, 0, 0x1.fep127, 0x7fff};
static const nfmt_t fmt_e4m3 = {"float8_e4m3", 4, 3, 7, 1, 1, 448.0, 0x7f};
static const nfmt_t fmt_e5m2 = {"float8_e5m2", 5, 2, 15, 0, 1, 57344.0, 0x7f};

static uint32_t nref_sign_bit(const nfmt_t *f) { return 1u << (f->ebits + f->mbits); }
static uint32_t nref_emask(const nfmt_t *f) { return (1u << f->ebits) - 1; }
static uint32_t nref_mmask(const nfmt_t *f) { return (1u << f->mbits) - 1; }

static int nref_isnan(const nfmt_t *f, uint32_t c)
{
    uint32_t e = (c >> f->mbits) & nref_emask(f), m = c & nref_mmask(f);
    if (f->fn)
        return e == nref_emask(f) && m == nref_mmask(f);
    return e == nref_emask(f) && m != 0;
}

/* Value of a non-NaN code. */
static double nref_decode(const nfmt_t *f, uint32_t c)
{
    uint32_t e = (c >> f->mbits) & nref_emask(f), m = c & nref_mmask(f);
    double sign = (c & nref_sign_bit(f)) ? -1.0 : 1.0;
    if (!f->fn && e == nref_emask(f))
        return sign * INFINITY;
    if (e == 0)
        return sign * ldexp((double)m, 1 - f->bias - f->mbits);
    return sign * ldexp(1.0 + ldexp((double)m, -f->mbits), (int)e - f->bias);
}

/* Code of a non-NaN double, rounded to nearest even. */
static uint32_t nref_encode(const nfmt_t *f, double v)
{
    uint32_t s = signbit(v) ? nref_sign_bit(f) : 0;
    double a = fabs(v);
    uint32_t inf_code = nref_emask(f) << f->mbits;
    if (a == 0)
        return s;
    if (!isinf(a)) {
        int ex;
        frexp(a, &ex); /* a in [2^(ex-1), 2^ex) */
        int q = ex - 1 < 1 - f->bias ? 1 - f->bias : ex - 1;
        double ulp = ldexp(1.0, q - f->mbits);
        a = rint(a / ulp) * ulp; /* the default rounding mode: ties to even */
    }
    if (a > f->max_finite) {
        if (!f->saturate)
            return s | inf_code;
        a = f->max_finite;
    }
    if (a < ldexp(1.0, 1 - f->bias))
        return s | (uint32_t)(a / ldexp(1.0, 1 - f->bias - f->mbits));
    int ex;
    frexp(a, &ex);
    int e = ex - 1;
    uint32_t m = (uint32_t)((a / ldexp(1.0, e) - 1.0) * ldexp(1.0, f->mbits));
    return s | ((uint32_t)(e + f->bias) << f->mbits) | m;
}

/* A NaN code after a trip through float and back: quiet bit set (float16:
 * as F16C does), float8 NaN turns into the all-ones one. */
static uint32_t nref_quiet(const nfmt_t *f, uint32_t c)
{
    if (f == &fmt_f16)
        return c | 0x200;
    if (f == &fmt_bf16)
        return c | 0x40;
    return (c & nref_sign_bit(f)) | 0x7f;
}

/* Narrow result of a float NaN with bits x (dtype_conv.h's contract). */
static uint32_t nref_nan_from_f32(const nfmt_t *f, uint32_t x)
{
    uint32_t s = (x >> 31) ? nref_sign_bit(f) : 0;
    if (f == &fmt_f16)
        return s | 0x7e00 | ((x >> 13) & 0x3ff);
    if (f == &fmt_bf16)
        return (x >> 16) | 0x40;
    return s | 0x7f;
}

/* a op b on codes: sum/prod/div give the canonical NaN for any NaN result;
 * max/min pick an operand with `>`/`<` like the float operators, and the
 * pick goes through float and back too (so an E5M2 infinity saturates). */
static uint32_t nref_op(const nfmt_t *f, ccl_redop_t op, uint32_t ca, uint32_t cb)
{
    int na = nref_isnan(f, ca), nb = nref_isnan(f, cb);
    double a = na ? NAN : nref_decode(f, ca), b = nb ? NAN : nref_decode(f, cb), r;
    switch (op) {
    case CCL_SUM:
    case CCL_AVG: r = a + b; break;
    case CCL_PROD: r = a * b; break;
    case CCL_MAX: {
        uint32_t c = a > b ? ca : cb;
        return nref_isnan(f, c) ? nref_quiet(f, c) : nref_encode(f, nref_decode(f, c));
    }
    case CCL_MIN: {
        uint32_t c = a < b ? ca : cb;
        return nref_isnan(f, c) ? nref_quiet(f, c) : nref_encode(f, nref_decode(f, c));
    }
    default: return 0;
    }
    return isnan(r) ? f->canon_nan : nref_encode(f, r);
}

static uint32_t nref_div(const nfmt_t *f, uint32_t c, int n)
{
    if (nref_isnan(f, c))
        return f->canon_nan;
    return nref_encode(f, nref_decode(f, c) / n);
}

#define REF_NARROW(name, T, fmt)                                                     \
    static T ref_##name(ccl_redop_t op, T a, T b) { return (T)nref_op(&fmt, op, a, b); } \
    static T ref_div_##name(T v, int n) { return (T)nref_div(&fmt, v, n); }

REF_NARROW(f16, uint16_t, fmt_f16)
REF_NARROW(bf16, uint16_t, fmt_bf16)
REF_NARROW(e4m3, uint8_t, fmt_e4m3)
REF_NARROW(e5m2, uint8_t, fmt_e5m2)

/* Counts elements where got[i] != ref(a[i], b[i]) (then divided by nranks
 * when nranks > 1 and op is avg); *first gets the first bad index and the
 * two values as text. Floats compare by value (a +0/-0 tie may come back
 * as either). */
typedef struct {
    size_t first;
    char want[48], got[48];
} mismatch_t;

#define CHECK_BODY(name, T, FMT, CAST)                                                  \
    {                                                                                   \
        const T *g = got, *x = a, *y = b;                                               \
        for (size_t i = 0; i < n; i++) {                                                \
            T w = ref_##name(op, x[i], y[i]);                                           \
            if (op == CCL_AVG && nranks > 1)                                            \
                w = ref_div_##name(w, nranks);                                          \
            if (!(g[i] == w)) {                                                         \
                if (bad++ == 0) {                                                       \
                    mm->first = i;                                                      \
                    snprintf(mm->want, sizeof mm->want, FMT, (CAST)w);                  \
                    snprintf(mm->got, sizeof mm->got, FMT, (CAST)g[i]);                 \
                }                                                                       \
            }                                                                           \
        }                                                                               \
    }

static size_t count_bad(ccl_datatype_t dt, ccl_redop_t op, int nranks, const void *got,
                        const void *a, const void *b, size_t n, mismatch_t *mm)
{
    size_t bad = 0;
    switch (dt) {
    case CCL_INT8: CHECK_BODY(i8, int8_t, "%lld", long long) break;
    case CCL_UINT8: CHECK_BODY(u8, uint8_t, "%llu", unsigned long long) break;
    case CCL_INT32: CHECK_BODY(i32, int32_t, "%lld", long long) break;
    case CCL_UINT32: CHECK_BODY(u32, uint32_t, "%llu", unsigned long long) break;
    case CCL_INT64: CHECK_BODY(i64, int64_t, "%lld", long long) break;
    case CCL_UINT64: CHECK_BODY(u64, uint64_t, "%llu", unsigned long long) break;
    case CCL_FLOAT32: CHECK_BODY(f32, float, "%.9g", double) break;
    case CCL_FLOAT64: CHECK_BODY(f64, double, "%.17g", double) break;
    case CCL_FLOAT16: CHECK_BODY(f16, uint16_t, "0x%04x", unsigned) break;
    case CCL_BFLOAT16: CHECK_BODY(bf16, uint16_t, "0x%04x", unsigned) break;
    case CCL_FLOAT8_E4M3: CHECK_BODY(e4m3, uint8_t, "0x%02x", unsigned) break;
    case CCL_FLOAT8_E5M2: CHECK_BODY(e5m2, uint8_t, "0x%02x", unsigned) break;
    default: fail_msg("count_bad: dtype %d not handled", (int)dt);
    }
    return bad;
}

/* ---- guarded buffers ------------------------------------------------------ */

typedef struct {
    unsigned char *mem;
    unsigned char *p;
    size_t bytes;
} gbuf_t;

/* p sits `misalign` bytes past a 64-byte boundary, GUARD bytes of
 * GUARD_BYTE on each side. */
static void gbuf_alloc(gbuf_t *g, size_t bytes, size_t misalign)
{
    size_t total = GUARD + misalign + bytes + GUARD;
    g->mem = aligned_alloc(64, (total + 63) & ~(size_t)63);
    assert_non_null(g->mem);
    memset(g->mem, GUARD_BYTE, total);
    g->p = g->mem + GUARD + misalign;
    g->bytes = bytes;
}

/* 0 when the GUARD bytes on either side of p are intact. */
static int gbuf_guards_ok(const gbuf_t *g)
{
    for (size_t i = 0; i < GUARD; i++)
        if (g->p[-(ptrdiff_t)GUARD + (ptrdiff_t)i] != GUARD_BYTE || g->p[g->bytes + i] != GUARD_BYTE)
            return 0;
    return 1;
}

static void gbuf_free(gbuf_t *g)
{
    free(g->mem);
    g->mem = g->p = NULL;
}

/* ---- metadata -------------------------------------------------------------- */

static void test_dtype_metadata(void **state)
{
    (void)state;
    static const struct {
        ccl_datatype_t dt;
        size_t size;
        const char *name;
        int supported;
    } rows[] = {
        {CCL_INT8, 1, "int8", 1},
        {CCL_UINT8, 1, "uint8", 1},
        {CCL_INT32, 4, "int32", 1},
        {CCL_UINT32, 4, "uint32", 1},
        {CCL_INT64, 8, "int64", 1},
        {CCL_UINT64, 8, "uint64", 1},
        {CCL_FLOAT16, 2, "float16", 1},
        {CCL_FLOAT32, 4, "float32", 1},
        {CCL_FLOAT64, 8, "float64", 1},
        {CCL_BFLOAT16, 2, "bfloat16", 1},
        {CCL_FLOAT8_E4M3, 1, "float8_e4m3", 1},
        {CCL_FLOAT8_E5M2, 1, "float8_e5m2", 1},
    };
    assert_int_equal(sizeof rows / sizeof rows[0], CCL_NUM_DTYPES);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_int_equal(dev_dtype_size(rows[i].dt), rows[i].size);
        assert_string_equal(dev_dtype_name(rows[i].dt), rows[i].name);
        assert_int_equal(dev_dtype_supported(rows[i].dt) != 0, rows[i].supported);
    }
    /* Values outside the enum. */
    static const int outside[] = {CCL_NUM_DTYPES, CCL_NUM_DTYPES + 1, 100, -1};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        ccl_datatype_t dt = (ccl_datatype_t)outside[i];
        assert_int_equal(dev_dtype_size(dt), 0);
        assert_string_equal(dev_dtype_name(dt), "invalid");
        assert_false(dev_dtype_supported(dt));
    }
}

static void test_op_names(void **state)
{
    (void)state;
    assert_string_equal(dev_op_name(CCL_SUM), "sum");
    assert_string_equal(dev_op_name(CCL_PROD), "prod");
    assert_string_equal(dev_op_name(CCL_MAX), "max");
    assert_string_equal(dev_op_name(CCL_MIN), "min");
    assert_string_equal(dev_op_name(CCL_AVG), "avg");
    assert_string_equal(dev_op_name(CCL_NUM_OPS), "invalid");
    assert_string_equal(dev_op_name((ccl_redop_t)-1), "invalid");
    assert_string_equal(dev_op_name((ccl_redop_t)77), "invalid");
}

/* ---- dev_reduce against the reference ------------------------------------ */

/* Where the destinations are, relative to the sources. */
typedef enum {
    ALIAS_NONE,     /* dst separate, no dst2 */
    ALIAS_A,        /* dst == a */
    ALIAS_B,        /* dst == b */
    ALIAS_NONE_D2,  /* dst separate, dst2 separate */
    ALIAS_A_D2,     /* dst == a, dst2 separate */
    ALIAS_B_D2,     /* dst == b, dst2 separate */
    NUM_ALIAS
} alias_t;

static const char *const alias_names[NUM_ALIAS] = {"dst", "dst=a", "dst=b", "dst+dst2",
                                                   "dst=a+dst2", "dst=b+dst2"};

/* One case: returns the number of failed checks (and prints them). */
static int run_reduce_case(ccl_datatype_t dt, ccl_redop_t op, size_t n, alias_t alias,
                           size_t mis_a, size_t mis_b, size_t mis_d, uint64_t seed)
{
    size_t es = dev_dtype_size(dt), bytes = n * es;
    gbuf_t a, b, d, d2;
    gbuf_alloc(&a, bytes, mis_a * es);
    gbuf_alloc(&b, bytes, mis_b * es);
    gbuf_alloc(&d, bytes, mis_d * es);
    gbuf_alloc(&d2, bytes, ((mis_d + 1) % (MAX_MISALIGN_ELEMS + 1)) * es);
    unsigned char *a0 = malloc(bytes + 1), *b0 = malloc(bytes + 1);
    assert_non_null(a0);
    assert_non_null(b0);
    uint64_t s = seed;
    fill_random(a.p, dt, n, &s);
    fill_random(b.p, dt, n, &s);
    memcpy(a0, a.p, bytes);
    memcpy(b0, b.p, bytes);

    void *dst = d.p;
    if (alias == ALIAS_A || alias == ALIAS_A_D2)
        dst = a.p;
    else if (alias == ALIAS_B || alias == ALIAS_B_D2)
        dst = b.p;
    void *dst2 = (alias >= ALIAS_NONE_D2) ? d2.p : NULL;

    dev_reduce(dt, op, dst, dst2, a.p, b.p, n);
    if (op == CCL_AVG)
        dev_postop(dt, op, dst, n, 1); /* one rank: must be the plain sum */

    int failures = 0;
    mismatch_t mm;
    size_t bad = count_bad(dt, op, 1, dst, a0, b0, n, &mm);
    if (bad) {
        print_error("%s %s n=%zu %s mis(a,b,d)=(%zu,%zu,%zu): %zu bad, first [%zu] want %s got %s\n",
                    dev_dtype_name(dt), dev_op_name(op), n, alias_names[alias], mis_a, mis_b,
                    mis_d, bad, mm.first, mm.want, mm.got);
        failures++;
    }
    if (dst2 && memcmp(dst2, dst, bytes) != 0) {
        print_error("%s %s n=%zu %s: dst2 differs from dst\n", dev_dtype_name(dt), dev_op_name(op),
                    n, alias_names[alias]);
        failures++;
    }
    /* Sources that are not a destination are read only. */
    if (dst != a.p && memcmp(a.p, a0, bytes) != 0) {
        print_error("%s %s n=%zu %s: source a was modified\n", dev_dtype_name(dt),
                    dev_op_name(op), n, alias_names[alias]);
        failures++;
    }
    if (dst != b.p && memcmp(b.p, b0, bytes) != 0) {
        print_error("%s %s n=%zu %s: source b was modified\n", dev_dtype_name(dt),
                    dev_op_name(op), n, alias_names[alias]);
        failures++;
    }
    /* dst2 unused: untouched entirely. */
    if (!dst2) {
        for (size_t i = 0; i < bytes; i++)
            if (d2.p[i] != GUARD_BYTE) {
                print_error("%s %s n=%zu %s: dst2 buffer written though dst2 was NULL\n",
                            dev_dtype_name(dt), dev_op_name(op), n, alias_names[alias]);
                failures++;
                break;
            }
    }
    if (dst != d.p) {
        for (size_t i = 0; i < bytes; i++)
            if (d.p[i] != GUARD_BYTE) {
                print_error("%s %s n=%zu %s: separate dst buffer written though dst aliased a source\n",
                            dev_dtype_name(dt), dev_op_name(op), n, alias_names[alias]);
                failures++;
                break;
            }
    }
    if (!gbuf_guards_ok(&a) || !gbuf_guards_ok(&b) || !gbuf_guards_ok(&d) || !gbuf_guards_ok(&d2)) {
        print_error("%s %s n=%zu %s mis(a,b,d)=(%zu,%zu,%zu): write outside a buffer (guard damaged)\n",
                    dev_dtype_name(dt), dev_op_name(op), n, alias_names[alias], mis_a, mis_b, mis_d);
        failures++;
    }
    free(a0);
    free(b0);
    gbuf_free(&a);
    gbuf_free(&b);
    gbuf_free(&d);
    gbuf_free(&d2);
    return failures;
}

static void reduce_sweep(ccl_datatype_t dt)
{
    assert_true(dev_dtype_supported(dt));
    int failures = 0;
    uint64_t seed = 0x1234 + (uint64_t)dt * 1000003;
    for (int o = 0; o < NUM_OPS; o++) {
        for (int z = 0; z < NUM_SIZES; z++) {
            for (int al = 0; al < NUM_ALIAS; al++) {
                /* Aligned everywhere, then the three pointers at different
                 * element offsets from a 64-byte boundary (so the vector
                 * loop cannot align them all by peeling). */
                static const size_t mis[][3] = {{0, 0, 0}, {1, 1, 1}, {1, 2, 3}, {3, 0, 1}};
                for (size_t m = 0; m < sizeof mis / sizeof mis[0]; m++) {
                    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                    failures += run_reduce_case(dt, all_ops[o], sizes[z], (alias_t)al, mis[m][0],
                                                mis[m][1], mis[m][2], seed);
                    if (failures > 20)
                        fail_msg("too many failures for %s", dev_dtype_name(dt));
                }
            }
        }
    }
    assert_int_equal(failures, 0);
}

static void test_reduce_int8(void **state) { (void)state; reduce_sweep(CCL_INT8); }
static void test_reduce_uint8(void **state) { (void)state; reduce_sweep(CCL_UINT8); }
static void test_reduce_int32(void **state) { (void)state; reduce_sweep(CCL_INT32); }
static void test_reduce_uint32(void **state) { (void)state; reduce_sweep(CCL_UINT32); }
static void test_reduce_int64(void **state) { (void)state; reduce_sweep(CCL_INT64); }
static void test_reduce_uint64(void **state) { (void)state; reduce_sweep(CCL_UINT64); }
static void test_reduce_float32(void **state) { (void)state; reduce_sweep(CCL_FLOAT32); }
static void test_reduce_float64(void **state) { (void)state; reduce_sweep(CCL_FLOAT64); }
static void test_reduce_float16(void **state) { (void)state; reduce_sweep(CCL_FLOAT16); }
static void test_reduce_bfloat16(void **state) { (void)state; reduce_sweep(CCL_BFLOAT16); }
static void test_reduce_e4m3(void **state) { (void)state; reduce_sweep(CCL_FLOAT8_E4M3); }
static void test_reduce_e5m2(void **state) { (void)state; reduce_sweep(CCL_FLOAT8_E5M2); }

/* ---- wraparound at the type's edges ------------------------------------- */

/* Reduces a constant pair over 67 elements (a vector body and a tail) and
 * checks every element against a literal. */
#define WRAP_CASE(T, dt, op, va, vb, want)                                         \
    do {                                                                           \
        T xa[67], xb[67], xd[67];                                                  \
        for (int i_ = 0; i_ < 67; i_++) {                                          \
            xa[i_] = (T)(va);                                                      \
            xb[i_] = (T)(vb);                                                      \
            xd[i_] = 0;                                                            \
        }                                                                          \
        dev_reduce(dt, op, xd, NULL, xa, xb, 67);                                  \
        for (int i_ = 0; i_ < 67; i_++) {                                          \
            if (xd[i_] != (T)(want)) {                                             \
                print_error("%s %s(%s, %s) at [%d]: want %s\n", #dt, #op, #va, #vb, \
                            i_, #want);                                            \
                fail();                                                            \
            }                                                                      \
        }                                                                          \
    } while (0)

static void test_integer_wraparound(void **state)
{
    (void)state;
    WRAP_CASE(int8_t, CCL_INT8, CCL_SUM, 127, 1, -128);
    WRAP_CASE(int8_t, CCL_INT8, CCL_SUM, -128, -1, 127);
    WRAP_CASE(int8_t, CCL_INT8, CCL_SUM, 100, 100, -56);
    WRAP_CASE(int8_t, CCL_INT8, CCL_SUM, -128, -128, 0);
    WRAP_CASE(int8_t, CCL_INT8, CCL_PROD, 64, 2, -128);
    WRAP_CASE(int8_t, CCL_INT8, CCL_PROD, -128, -1, -128);
    WRAP_CASE(int8_t, CCL_INT8, CCL_PROD, 16, 16, 0);
    WRAP_CASE(int8_t, CCL_INT8, CCL_PROD, 127, 127, 1);
    WRAP_CASE(int8_t, CCL_INT8, CCL_AVG, 127, 1, -128); /* avg reduces as sum */
    WRAP_CASE(int8_t, CCL_INT8, CCL_MAX, -128, 127, 127);
    WRAP_CASE(int8_t, CCL_INT8, CCL_MIN, -128, 127, -128);
    WRAP_CASE(uint8_t, CCL_UINT8, CCL_SUM, 255, 1, 0);
    WRAP_CASE(uint8_t, CCL_UINT8, CCL_SUM, 200, 100, 44);
    WRAP_CASE(uint8_t, CCL_UINT8, CCL_PROD, 200, 2, 144);
    WRAP_CASE(uint8_t, CCL_UINT8, CCL_PROD, 255, 255, 1);
    WRAP_CASE(uint8_t, CCL_UINT8, CCL_MAX, 0, 255, 255);  /* unsigned compare */
    WRAP_CASE(uint8_t, CCL_UINT8, CCL_MIN, 128, 127, 127);
    WRAP_CASE(int32_t, CCL_INT32, CCL_SUM, INT32_MAX, 1, INT32_MIN);
    WRAP_CASE(int32_t, CCL_INT32, CCL_PROD, 65536, 65536, 0);
    WRAP_CASE(int32_t, CCL_INT32, CCL_PROD, INT32_MIN, -1, INT32_MIN);
    WRAP_CASE(uint32_t, CCL_UINT32, CCL_SUM, 0xFFFFFFFFu, 2, 1);
    WRAP_CASE(uint32_t, CCL_UINT32, CCL_PROD, 0xFFFFFFFFu, 0xFFFFFFFFu, 1);
    WRAP_CASE(uint32_t, CCL_UINT32, CCL_MAX, 0x80000000u, 0x7FFFFFFFu, 0x80000000u);
    WRAP_CASE(int64_t, CCL_INT64, CCL_SUM, INT64_MAX, 1, INT64_MIN);
    WRAP_CASE(int64_t, CCL_INT64, CCL_PROD, 4294967296LL, 4294967296LL, 0);
    WRAP_CASE(int64_t, CCL_INT64, CCL_PROD, INT64_MAX, INT64_MAX, 1);
    WRAP_CASE(int64_t, CCL_INT64, CCL_MIN, INT64_MIN, INT64_MAX, INT64_MIN);
    WRAP_CASE(uint64_t, CCL_UINT64, CCL_SUM, UINT64_MAX, 1, 0);
    WRAP_CASE(uint64_t, CCL_UINT64, CCL_PROD, UINT64_MAX, UINT64_MAX, 1);
    WRAP_CASE(uint64_t, CCL_UINT64, CCL_MAX, 1ULL << 63, (1ULL << 63) - 1, 1ULL << 63);
}

/* Float special values: exact results by IEEE rules. */
static void test_float_specials(void **state)
{
    (void)state;
    WRAP_CASE(float, CCL_FLOAT32, CCL_SUM, 0.1f, 0.2f, 0.1f + 0.2f);
    WRAP_CASE(float, CCL_FLOAT32, CCL_SUM, 16777216.0f, 1.0f, 16777216.0f); /* rounds to even */
    WRAP_CASE(float, CCL_FLOAT32, CCL_PROD, 3.0e38f, 10.0f, INFINITY);
    WRAP_CASE(float, CCL_FLOAT32, CCL_MAX, -INFINITY, -3.5f, -3.5f);
    WRAP_CASE(float, CCL_FLOAT32, CCL_MIN, INFINITY, 1.0e-40f, 1.0e-40f); /* subnormal */
    WRAP_CASE(float, CCL_FLOAT32, CCL_SUM, 1.0e-40f, 1.0e-40f, 1.0e-40f + 1.0e-40f);
    WRAP_CASE(double, CCL_FLOAT64, CCL_SUM, 9007199254740992.0, 1.0, 9007199254740992.0);
    WRAP_CASE(double, CCL_FLOAT64, CCL_PROD, 1.0e300, 1.0e300, INFINITY);
    WRAP_CASE(double, CCL_FLOAT64, CCL_PROD, -2.5, 4.0, -10.0);
    WRAP_CASE(double, CCL_FLOAT64, CCL_MAX, -1.0, -2.0, -1.0);
    WRAP_CASE(double, CCL_FLOAT64, CCL_MIN, -1.0, -2.0, -2.0);
}

/* ---- conversions (dtype_conv.h) against the reference --------------------- */

typedef float (*to_f32_fn)(uint32_t);
typedef uint32_t (*from_f32_fn)(float);
static float w_f16_to(uint32_t c) { return dev_f16_to_f32((uint16_t)c); }
static float w_bf16_to(uint32_t c) { return dev_bf16_to_f32((uint16_t)c); }
static float w_e4m3_to(uint32_t c) { return dev_e4m3_to_f32((uint8_t)c); }
static float w_e5m2_to(uint32_t c) { return dev_e5m2_to_f32((uint8_t)c); }
static uint32_t w_f16_from(float f) { return dev_f32_to_f16(f); }
static uint32_t w_bf16_from(float f) { return dev_f32_to_bf16(f); }
static uint32_t w_e4m3_from(float f) { return dev_f32_to_e4m3(f); }
static uint32_t w_e5m2_from(float f) { return dev_f32_to_e5m2(f); }

static const struct conv_case {
    const nfmt_t *fmt;
    to_f32_fn to;
    from_f32_fn from;
} conv_cases[] = {
    {&fmt_f16, w_f16_to, w_f16_from},
    {&fmt_bf16, w_bf16_to, w_bf16_from},
    {&fmt_e4m3, w_e4m3_to, w_e4m3_from},
    {&fmt_e5m2, w_e5m2_to, w_e5m2_from},
};

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The expected narrow code of float f. */
static uint32_t conv_expect(const nfmt_t *fmt, float f)
{
    return isnan(f) ? nref_nan_from_f32(fmt, f32_bits(f)) : nref_encode(fmt, (double)f);
}

/* Every bit pattern: to float gives the defined value (NaN: a NaN of the
 * same sign; float16 NaN exactly as F16C widens it, bfloat16 NaN keeps its
 * bits), and back to the type gives the same pattern (NaN: made quiet;
 * E5M2 infinity: max finite, since float8 conversions saturate). */
static void test_conv_exhaustive(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++) {
        const struct conv_case *cc = &conv_cases[k];
        const nfmt_t *f = cc->fmt;
        uint32_t ncodes = nref_sign_bit(f) << 1;
        for (uint32_t c = 0; c < ncodes; c++) {
            float x = cc->to(c);
            uint32_t xb = f32_bits(x), back = cc->from(x);
            int bad = 0;
            if (nref_isnan(f, c)) {
                uint32_t want_bits = 0;
                if (f == &fmt_f16)
                    want_bits = ((c & 0x8000u) << 16) | 0x7fc00000u | ((c & 0x3ffu) << 13);
                else if (f == &fmt_bf16)
                    want_bits = c << 16;
                bad = !isnan(x) || (signbit(x) != 0) != ((c & nref_sign_bit(f)) != 0) ||
                      (want_bits && xb != want_bits) || back != nref_quiet(f, c);
            } else {
                double v = nref_decode(f, c);
                uint32_t want_back = (f == &fmt_e5m2 && isinf(v)) ? (c & 0x80u) | 0x7bu : c;
                bad = f32_bits((float)v) != xb || back != want_back;
            }
            if (bad && failures++ < 10)
                print_error("%s code 0x%x: to float 0x%08x, back 0x%x\n", f->name, c, xb, back);
        }
    }
    assert_int_equal(failures, 0);
}

/* Float -> narrow around every representable value: the value itself, the
 * midpoint to the next one (a tie), one float step either side of the
 * midpoint, both signs; then past the largest finite value. */
static void test_conv_ties_and_neighbours(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++) {
        const struct conv_case *cc = &conv_cases[k];
        const nfmt_t *f = cc->fmt;
        uint32_t top = nref_sign_bit(f); /* positive codes, increasing in value */
        for (uint32_t c = 0; c + 1 < top; c++) {
            if (nref_isnan(f, c) || nref_isnan(f, c + 1) || isinf(nref_decode(f, c)))
                continue;
            double lo = nref_decode(f, c), hi = nref_decode(f, c + 1);
            if (isinf(hi)) /* the would-be next value past the largest finite one */
                hi = lo + (lo - nref_decode(f, c - 1));
            float mid = (float)((lo + hi) / 2); /* exact: one more bit than the type */
            float probes[] = {(float)lo, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
            for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
                for (int sg = 0; sg < 2; sg++) {
                    float x = sg ? -probes[p] : probes[p];
                    uint32_t got = cc->from(x), want = conv_expect(f, x);
                    if (got != want && failures++ < 10)
                        print_error("%s from %a (0x%08x): got 0x%x want 0x%x\n", f->name, (double)x,
                                    f32_bits(x), got, want);
                }
            }
        }
    }
    assert_int_equal(failures, 0);
}

/* Float -> narrow over a stride through all 2^32 float bit patterns
 * (every exponent, NaN payloads, subnormals). */
static void test_conv_float_sweep(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t k = 0; k < sizeof conv_cases / sizeof conv_cases[0]; k++) {
        const struct conv_case *cc = &conv_cases[k];
        for (uint64_t b = 0; b < (1ull << 32); b += 1021) {
            float x = bits_f32((uint32_t)b);
            uint32_t got = cc->from(x), want = conv_expect(cc->fmt, x);
            if (got != want && failures++ < 10)
                print_error("%s from 0x%08x: got 0x%x want 0x%x\n", cc->fmt->name, (uint32_t)b, got,
                            want);
        }
    }
    assert_int_equal(failures, 0);
}

/* Literal cases, worked out by hand from the format definitions. */
static void test_conv_literals(void **state)
{
    (void)state;
    /* float16: ties to even, overflow to infinity at 65520, subnormals. */
    assert_int_equal(dev_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);          /* tie -> even */
    assert_int_equal(dev_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);      /* tie -> even (up) */
    assert_int_equal(dev_f32_to_f16(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);
    assert_int_equal(dev_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(dev_f32_to_f16(65519.996f), 0x7bff);
    assert_int_equal(dev_f32_to_f16(65520.0f), 0x7c00);                 /* tie past max: inf */
    assert_int_equal(dev_f32_to_f16(-1e9f), 0xfc00);
    assert_int_equal(dev_f32_to_f16(-INFINITY), 0xfc00);
    assert_int_equal(dev_f32_to_f16(0x1p-24f), 0x0001);                 /* smallest subnormal */
    assert_int_equal(dev_f32_to_f16(0x1p-25f), 0x0000);                 /* tie -> even 0 */
    assert_int_equal(dev_f32_to_f16(0x1.000002p-25f), 0x0001);
    assert_int_equal(dev_f32_to_f16(3 * 0x1p-25f), 0x0002);             /* tie 1.5 -> 2 */
    assert_int_equal(dev_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(dev_f32_to_f16(0x1.ff8p-15f), 0x03ff);             /* largest subnormal */
    assert_int_equal(dev_f32_to_f16(0x1.ffcp-15f), 0x0400);             /* tie -> even: normal */
    assert_int_equal(dev_f32_to_f16(1e-45f), 0x0000);                   /* float subnormal */
    assert_true(dev_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(dev_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(dev_f16_to_f32(0xfc00) == -INFINITY);
    /* bfloat16: the top half of a float, rounded. */
    assert_int_equal(dev_f32_to_bf16(bits_f32(0x3f808000u)), 0x3f80);  /* tie -> even */
    assert_int_equal(dev_f32_to_bf16(bits_f32(0x3f818000u)), 0x3f82);  /* tie -> even (up) */
    assert_int_equal(dev_f32_to_bf16(bits_f32(0x3f808001u)), 0x3f81);
    assert_int_equal(dev_f32_to_bf16(bits_f32(0x7f7f7fffu)), 0x7f7f);
    assert_int_equal(dev_f32_to_bf16(bits_f32(0x7f7f8000u)), 0x7f80);  /* overflow: inf */
    assert_int_equal(dev_f32_to_bf16(bits_f32(0x00008000u)), 0x0000);  /* subnormal tie */
    assert_int_equal(dev_f32_to_bf16(bits_f32(0x00018000u)), 0x0002);
    assert_int_equal(dev_f32_to_bf16(bits_f32(0xff800000u)), 0xff80);
    assert_int_equal(dev_f32_to_bf16(bits_f32(0x7f800001u)), 0x7fc0);  /* sNaN: quiet NaN */
    assert_int_equal(dev_f32_to_bf16(bits_f32(0xffffffffu)), 0xffff);
    /* float8 E4M3FN: max 448, saturating, no infinity. */
    assert_int_equal(dev_f32_to_e4m3(448.0f), 0x7e);
    assert_int_equal(dev_f32_to_e4m3(464.0f), 0x7e);                   /* would round to 480 */
    assert_int_equal(dev_f32_to_e4m3(1e30f), 0x7e);
    assert_int_equal(dev_f32_to_e4m3(INFINITY), 0x7e);
    assert_int_equal(dev_f32_to_e4m3(-INFINITY), 0xfe);
    assert_int_equal(dev_f32_to_e4m3(NAN), 0x7f);
    assert_int_equal(dev_f32_to_e4m3(-NAN), 0xff);
    assert_int_equal(dev_f32_to_e4m3(0x1p-9f), 0x01);                  /* smallest subnormal */
    assert_int_equal(dev_f32_to_e4m3(0x1p-10f), 0x00);                 /* tie -> even 0 */
    assert_int_equal(dev_f32_to_e4m3(3 * 0x1p-10f), 0x02);             /* tie 1.5 -> 2 */
    assert_int_equal(dev_f32_to_e4m3(1.0625f), 0x38);                  /* tie -> even 1.0 */
    assert_int_equal(dev_f32_to_e4m3(1.1875f), 0x3a);                  /* tie -> even 1.25 */
    assert_true(dev_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(dev_e4m3_to_f32(0x01) == 0x1p-9f);
    assert_true(dev_e4m3_to_f32(0x78) == 256.0f); /* S.1111.000 is finite in E4M3FN */
    assert_true(isnan(dev_e4m3_to_f32(0x7f)) && isnan(dev_e4m3_to_f32(0xff)));
    /* float8 E5M2: max 57344, saturating; has infinity and NaN codes. */
    assert_int_equal(dev_f32_to_e5m2(57344.0f), 0x7b);
    assert_int_equal(dev_f32_to_e5m2(61440.0f), 0x7b);                 /* would round to inf */
    assert_int_equal(dev_f32_to_e5m2(-INFINITY), 0xfb);
    assert_int_equal(dev_f32_to_e5m2(NAN), 0x7f);
    assert_int_equal(dev_f32_to_e5m2(0x1p-16f), 0x01);
    assert_int_equal(dev_f32_to_e5m2(0x1p-17f), 0x00);
    assert_int_equal(dev_f32_to_e5m2(3 * 0x1p-17f), 0x02);
    assert_int_equal(dev_f32_to_e5m2(1.125f), 0x3c);                   /* tie -> even 1.0 */
    assert_int_equal(dev_f32_to_e5m2(1.375f), 0x3e);                   /* tie -> even 1.5 */
    assert_true(dev_e5m2_to_f32(0x7c) == INFINITY);
    assert_true(dev_e5m2_to_f32(0x7b) == 57344.0f);
    assert_true(isnan(dev_e5m2_to_f32(0x7d)));
}

/* Narrow-type arithmetic at the edges: overflow, saturation, NaN. */
static void test_narrow_op_literals(void **state)
{
    (void)state;
    WRAP_CASE(uint16_t, CCL_FLOAT16, CCL_SUM, 0x7bff, 0x5000, 0x7c00);   /* 65504 + 32 -> inf */
    WRAP_CASE(uint16_t, CCL_FLOAT16, CCL_SUM, 0x7bff, 0x4c00, 0x7c00);   /* 65504 + 16: tie -> inf */
    WRAP_CASE(uint16_t, CCL_FLOAT16, CCL_SUM, 0x7bff, 0x4800, 0x7bff);   /* 65504 + 8 */
    WRAP_CASE(uint16_t, CCL_FLOAT16, CCL_SUM, 0x0001, 0x0001, 0x0002);   /* subnormals */
    WRAP_CASE(uint16_t, CCL_FLOAT16, CCL_SUM, 0x7c00, 0xfc00, 0x7fff);   /* inf - inf: NaN */
    WRAP_CASE(uint16_t, CCL_FLOAT16, CCL_PROD, 0x3c00, 0x7d00, 0x7fff);  /* NaN in: canonical */
    WRAP_CASE(uint16_t, CCL_FLOAT16, CCL_MAX, 0x3c00, 0x7d00, 0x7f00);   /* picked NaN, quiet */
    WRAP_CASE(uint16_t, CCL_FLOAT16, CCL_MAX, 0x7d00, 0x3c00, 0x3c00);
    WRAP_CASE(uint16_t, CCL_BFLOAT16, CCL_SUM, 0x3f80, 0x3b80, 0x3f80);  /* 1 + 2^-8: tie -> even */
    WRAP_CASE(uint16_t, CCL_BFLOAT16, CCL_SUM, 0x7f7f, 0x7f7f, 0x7f80);  /* overflow: inf */
    WRAP_CASE(uint16_t, CCL_BFLOAT16, CCL_PROD, 0x0001, 0x3f00, 0x0000); /* 2^-133 / 2: tie -> 0 */
    WRAP_CASE(uint16_t, CCL_BFLOAT16, CCL_MIN, 0x8000, 0x0000, 0x0000);  /* -0 < +0 is false */
    WRAP_CASE(uint8_t, CCL_FLOAT8_E4M3, CCL_SUM, 0x7e, 0x7e, 0x7e);      /* 448 + 448: saturate */
    WRAP_CASE(uint8_t, CCL_FLOAT8_E4M3, CCL_PROD, 0xfe, 0x7e, 0xfe);
    WRAP_CASE(uint8_t, CCL_FLOAT8_E4M3, CCL_SUM, 0x7f, 0x00, 0x7f);      /* NaN */
    WRAP_CASE(uint8_t, CCL_FLOAT8_E4M3, CCL_SUM, 0x01, 0x01, 0x02);
    WRAP_CASE(uint8_t, CCL_FLOAT8_E5M2, CCL_SUM, 0x7b, 0x7b, 0x7b);      /* saturate */
    WRAP_CASE(uint8_t, CCL_FLOAT8_E5M2, CCL_SUM, 0x7c, 0x3c, 0x7b);      /* inf in: saturates */
    WRAP_CASE(uint8_t, CCL_FLOAT8_E5M2, CCL_SUM, 0x7c, 0xfc, 0x7f);      /* inf - inf: NaN */
    WRAP_CASE(uint8_t, CCL_FLOAT8_E5M2, CCL_MAX, 0xfc, 0x00, 0x00);
}

/* float/double: every NaN result of sum, prod and avg's division is the
 * canonical NaN (all payload bits, positive), whatever the NaN operands. */
static void test_float_nan_canonical(void **state)
{
    (void)state;
    static const uint32_t nans32[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffa5a5a5u, 0x7fffffffu};
    float xs[67], ys[67], d[67];
    for (size_t i = 0; i < sizeof nans32 / sizeof nans32[0]; i++) {
        for (size_t j = 0; j < sizeof nans32 / sizeof nans32[0]; j++) {
            for (int k = 0; k < 67; k++) {
                xs[k] = bits_f32(nans32[i]);
                ys[k] = (k % 3 == 0) ? bits_f32(nans32[j]) : (k % 3 == 1 ? 1.0f : INFINITY);
            }
            for (int op = CCL_SUM; op <= CCL_PROD; op++) {
                dev_reduce(CCL_FLOAT32, (ccl_redop_t)op, d, NULL, xs, ys, 67);
                for (int k = 0; k < 67; k++)
                    assert_int_equal(f32_bits(d[k]), 0x7fffffffu);
                dev_reduce(CCL_FLOAT32, (ccl_redop_t)op, d, NULL, ys, xs, 67);
                for (int k = 0; k < 67; k++)
                    assert_int_equal(f32_bits(d[k]), 0x7fffffffu);
            }
        }
    }
    for (int k = 0; k < 67; k++) {
        xs[k] = INFINITY;
        ys[k] = (k & 1) ? -INFINITY : 0.0f;
    }
    dev_reduce(CCL_FLOAT32, CCL_SUM, d, NULL, xs, ys, 67);  /* inf - inf */
    for (int k = 1; k < 67; k += 2)
        assert_int_equal(f32_bits(d[k]), 0x7fffffffu);
    dev_reduce(CCL_FLOAT32, CCL_PROD, d, NULL, xs, ys, 67); /* inf * 0 */
    for (int k = 0; k < 67; k += 2)
        assert_int_equal(f32_bits(d[k]), 0x7fffffffu);
    d[0] = bits_f32(0xff800001u);
    dev_postop(CCL_FLOAT32, CCL_AVG, d, 1, 3);
    assert_int_equal(f32_bits(d[0]), 0x7fffffffu);
    double xd[9], yd[9], dd[9];
    for (int k = 0; k < 9; k++) {
        uint64_t na = 0xfff0000000000001ull + (uint64_t)k, nb = 0x7ff8000000000000ull;
        memcpy(&xd[k], &na, 8);
        memcpy(&yd[k], &nb, 8);
    }
    dev_reduce(CCL_FLOAT64, CCL_SUM, dd, NULL, xd, yd, 9);
    for (int k = 0; k < 9; k++) {
        uint64_t u;
        memcpy(&u, &dd[k], 8);
        assert_true(u == 0x7fffffffffffffffull);
    }
    /* max/min pick an operand, NaN or not, bit for bit. */
    for (int k = 0; k < 67; k++) {
        xs[k] = bits_f32(0xffa5a5a5u);
        ys[k] = 2.0f;
    }
    dev_reduce(CCL_FLOAT32, CCL_MAX, d, NULL, ys, xs, 67);
    for (int k = 0; k < 67; k++)
        assert_int_equal(f32_bits(d[k]), 0xffa5a5a5u);
    dev_reduce(CCL_FLOAT32, CCL_MIN, d, NULL, xs, ys, 67);
    for (int k = 0; k < 67; k++)
        assert_true(d[k] == 2.0f);
}

/* Narrow avg: sum, then divide in float and round back. */
static void test_avg_narrow_literals(void **state)
{
    (void)state;
    uint16_t h[3] = {0x3c00, 0x0001, 0x7bff};  /* 1, 2^-24, 65504 */
    dev_postop(CCL_FLOAT16, CCL_AVG, h, 3, 3);
    assert_int_equal(h[0], 0x3555);            /* 1/3 = 0x1.555p-2 rounded */
    assert_int_equal(h[1], 0x0000);            /* 2^-24 / 3 < half a subnormal */
    assert_int_equal(h[2], 0x7555);            /* 21834.67 -> 21840 */
    uint16_t b[2] = {0x3f80, 0x0002};          /* 1, 2^-132 */
    dev_postop(CCL_BFLOAT16, CCL_AVG, b, 2, 4);
    assert_int_equal(b[0], 0x3e80);
    assert_int_equal(b[1], 0x0000);            /* 2^-134: tie -> even 0 */
    uint8_t e4[2] = {0x7e, 0x08};              /* 448, 2^-6 */
    dev_postop(CCL_FLOAT8_E4M3, CCL_AVG, e4, 2, 7);
    assert_int_equal(e4[0], 0x68);             /* 64 */
    assert_int_equal(e4[1], 0x01);             /* 2^-6/7 -> 2^-9 (1.14 units) */
    uint8_t e5[1] = {0x7b};
    dev_postop(CCL_FLOAT8_E5M2, CCL_AVG, e5, 1, 1024);
    assert_int_equal(e5[0], 0x53);             /* 56 */
}

/* ---- dev_premul ------------------------------------------------------------ */

static int premul_check(ccl_datatype_t dt, const void *got, const void *scalar, const void *src,
                        size_t n)
{
    size_t es = dev_dtype_size(dt);
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++) {
        const unsigned char *g = (const unsigned char *)got + i * es;
        const unsigned char *x = (const unsigned char *)src + i * es;
        unsigned char want[8];
#define PM_CASE(DT, name, T)                                                            \
    case DT: {                                                                          \
        T s_, x_, w_;                                                                   \
        memcpy(&s_, scalar, sizeof s_);                                                 \
        memcpy(&x_, x, sizeof x_);                                                      \
        w_ = ref_##name(CCL_PROD, s_, x_);                                              \
        memcpy(want, &w_, sizeof w_);                                                   \
        break;                                                                          \
    }
        switch (dt) {
        PM_CASE(CCL_INT8, i8, int8_t)
        PM_CASE(CCL_UINT8, u8, uint8_t)
        PM_CASE(CCL_INT32, i32, int32_t)
        PM_CASE(CCL_UINT32, u32, uint32_t)
        PM_CASE(CCL_INT64, i64, int64_t)
        PM_CASE(CCL_UINT64, u64, uint64_t)
        PM_CASE(CCL_FLOAT16, f16, uint16_t)
        PM_CASE(CCL_FLOAT32, f32, float)
        PM_CASE(CCL_FLOAT64, f64, double)
        PM_CASE(CCL_BFLOAT16, bf16, uint16_t)
        PM_CASE(CCL_FLOAT8_E4M3, e4m3, uint8_t)
        PM_CASE(CCL_FLOAT8_E5M2, e5m2, uint8_t)
        default: fail();
        }
#undef PM_CASE
        /* The float references are finite here (fill_random), so bits. */
        if (memcmp(g, want, es) != 0) {
            print_error("premul %s n=%zu: element %zu differs\n", dev_dtype_name(dt), n, i);
            bad = 1;
        }
    }
    return bad;
}

static void test_premul(void **state)
{
    (void)state;
    uint64_t s = 4321;
    int failures = 0;
    static const size_t pm_sizes[] = {0, 1, 7, 33, 64, 1001, 4099};
    for (int t = 0; t < NUM_SUPPORTED; t++) {
        ccl_datatype_t dt = supported_dtypes[t];
        size_t es = dev_dtype_size(dt);
        for (size_t z = 0; z < sizeof pm_sizes / sizeof pm_sizes[0]; z++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                size_t n = pm_sizes[z], bytes = n * es;
                gbuf_t src, dst;
                gbuf_alloc(&src, bytes, es * (size_t)(1 + inplace));
                gbuf_alloc(&dst, bytes, es * 3);
                fill_random(src.p, dt, n, &s);
                unsigned char *orig = malloc(bytes + 1), sc[9];
                uint64_t scv;
                assert_non_null(orig);
                memcpy(orig, src.p, bytes);
                fill_random(&scv, dt, 1, &s);
                memcpy(sc + 1, &scv, es); /* an unaligned scalar */
                void *out = inplace ? src.p : dst.p;
                dev_premul(dt, out, src.p, n, sc + 1);
                failures += premul_check(dt, out, sc + 1, orig, n);
                if (!inplace && memcmp(src.p, orig, bytes) != 0) {
                    print_error("premul %s: source modified\n", dev_dtype_name(dt));
                    failures++;
                }
                if (!gbuf_guards_ok(&src) || !gbuf_guards_ok(&dst)) {
                    print_error("premul %s n=%zu: guard damaged\n", dev_dtype_name(dt), n);
                    failures++;
                }
                free(orig);
                gbuf_free(&src);
                gbuf_free(&dst);
            }
        }
    }
    /* Literals: wrapping and narrow rounding. */
    int8_t i8s = -128, i8v[3] = {1, -1, 3};
    dev_premul(CCL_INT8, i8v, i8v, 3, &i8s);
    assert_true(i8v[0] == -128 && i8v[1] == -128 && i8v[2] == -128);
    uint16_t hs = 0x3555, hv[2] = {0x4200, 0x7bff}; /* (1/3) * 3, (1/3) * 65504 */
    dev_premul(CCL_FLOAT16, hv, hv, 2, &hs);
    assert_int_equal(hv[0], 0x3c00);
    assert_int_equal(hv[1], 0x7554); /* 21829.3 -> 21824 */
    uint8_t e4s = 0x48, e4v[1] = {0x7e}; /* 4 * 448: saturates */
    dev_premul(CCL_FLOAT8_E4M3, e4v, e4v, 1, &e4s);
    assert_int_equal(e4v[0], 0x7e);
    assert_int_equal(failures, 0);
}

/* ---- avg: sum, then dev_postop divides by nranks ------------------------- */

static void test_avg_postop(void **state)
{
    (void)state;
    /* Rank counts that every supported type can hold (int8 reaches 127). */
    /* Past 127 and 255 catches a divisor narrowed to the element type. */
    static const int nranks_list[] = {2, 3, 4, 5, 7, 8, 16, 63, 64, 100, 127, 128, 200, 255, 256, 300, 1024};
    static const size_t n_list[] = {0, 1, 17, 64, 65, 1000};
    uint64_t s = 99;
    int failures = 0;
    for (int t = 0; t < NUM_SUPPORTED; t++) {
        ccl_datatype_t dt = supported_dtypes[t];
        size_t es = dev_dtype_size(dt);
        for (size_t r = 0; r < sizeof nranks_list / sizeof nranks_list[0]; r++) {
            for (size_t k = 0; k < sizeof n_list / sizeof n_list[0]; k++) {
                size_t n = n_list[k], bytes = n * es;
                gbuf_t a, b, d;
                gbuf_alloc(&a, bytes, 0);
                gbuf_alloc(&b, bytes, 0);
                gbuf_alloc(&d, bytes, es);
                fill_random(a.p, dt, n, &s);
                fill_random(b.p, dt, n, &s);
                dev_reduce(dt, CCL_AVG, d.p, NULL, a.p, b.p, n);
                dev_postop(dt, CCL_AVG, d.p, n, nranks_list[r]);
                mismatch_t mm;
                size_t bad = count_bad(dt, CCL_AVG, nranks_list[r], d.p, a.p, b.p, n, &mm);
                if (bad || !gbuf_guards_ok(&d)) {
                    print_error("avg %s nranks=%d n=%zu: %zu bad, first [%zu] want %s got %s%s\n",
                                dev_dtype_name(dt), nranks_list[r], n, bad, mm.first, mm.want,
                                mm.got, gbuf_guards_ok(&d) ? "" : " (guard damaged)");
                    failures++;
                }
                gbuf_free(&a);
                gbuf_free(&b);
                gbuf_free(&d);
            }
        }
    }
    assert_int_equal(failures, 0);
}

/* Truncating integer division, spelled out (C99 rounds toward zero). */
static void test_avg_integer_division_literals(void **state)
{
    (void)state;
    int8_t i8[4] = {-7, 7, -128, 127};
    dev_postop(CCL_INT8, CCL_AVG, i8, 4, 2);
    assert_int_equal(i8[0], -3);
    assert_int_equal(i8[1], 3);
    assert_int_equal(i8[2], -64);
    assert_int_equal(i8[3], 63);
    uint8_t u8[3] = {255, 5, 1};
    dev_postop(CCL_UINT8, CCL_AVG, u8, 3, 4);
    assert_int_equal(u8[0], 63);
    assert_int_equal(u8[1], 1);
    assert_int_equal(u8[2], 0);
    int32_t i32[3] = {-10, INT32_MIN, 10};
    dev_postop(CCL_INT32, CCL_AVG, i32, 3, 3);
    assert_int_equal(i32[0], -3);
    assert_int_equal(i32[1], -715827882);
    assert_int_equal(i32[2], 3);
    uint32_t u32[1] = {0xFFFFFFFFu};
    dev_postop(CCL_UINT32, CCL_AVG, u32, 1, 1000);
    assert_int_equal(u32[0], 4294967u);
    int64_t i64[2] = {INT64_MIN, -1};
    dev_postop(CCL_INT64, CCL_AVG, i64, 2, 1024);
    assert_true(i64[0] == INT64_MIN / 1024);
    assert_true(i64[1] == 0);
    uint64_t u64[1] = {UINT64_MAX};
    dev_postop(CCL_UINT64, CCL_AVG, u64, 1, 3);
    assert_true(u64[0] == 6148914691236517205ULL);
    float f32[2] = {1.0f, -7.0f};
    dev_postop(CCL_FLOAT32, CCL_AVG, f32, 2, 4);
    assert_true(f32[0] == 0.25f && f32[1] == -1.75f);
    double f64[1] = {1.0};
    dev_postop(CCL_FLOAT64, CCL_AVG, f64, 1, 3);
    assert_true(f64[0] == 1.0 / 3.0);
}

/* dev_postop changes nothing for ops other than avg, nor for one rank. */
static void test_postop_noop(void **state)
{
    (void)state;
    uint64_t s = 7;
    for (int t = 0; t < NUM_SUPPORTED; t++) {
        ccl_datatype_t dt = supported_dtypes[t];
        size_t n = 129, bytes = n * dev_dtype_size(dt);
        unsigned char *buf = malloc(bytes), *orig = malloc(bytes);
        assert_non_null(buf);
        assert_non_null(orig);
        fill_random(buf, dt, n, &s);
        memcpy(orig, buf, bytes);
        for (int o = 0; o < NUM_OPS; o++) {
            if (all_ops[o] != CCL_AVG) {
                dev_postop(dt, all_ops[o], buf, n, 4);
                assert_memory_equal(buf, orig, bytes);
            }
        }
        dev_postop(dt, CCL_AVG, buf, n, 1);
        assert_memory_equal(buf, orig, bytes);
        free(buf);
        free(orig);
    }
}

/* ---- SIMD levels: the same bits as the portable loop ----------------------- */

/* Bit patterns a float kernel must treat carefully, per element size. */
static const uint32_t specials32[] = {
    0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
    0xffa5a5a5u, 0x7fffffffu, 0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu, 0xff7fffffu,
    0x3f800000u, 0x477fe000u, 0x477ff000u, 0x33800000u, 0x33000000u, 0x3f808000u, 0x7f7f8000u,
    0x00008000u, 0x43e00000u, 0x47600000u};
static const uint16_t specials16[] = {
    0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7d00, 0xfe01, 0x7fff, 0x0001, 0x83ff, 0x0400,
    0x7bff, 0xfbff, 0x3c00, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x0080, 0x007f, 0x7f7f, 0x3f80};
static const uint8_t specials8[] = {0x00, 0x80, 0x7f, 0xff, 0x7e, 0xfe, 0x7c, 0xfc,
                                    0x7b, 0x7d, 0x01, 0x81, 0x08, 0x07, 0x38, 0x3c};

/* Random bits, a quarter of them replaced by special patterns. */
static void fill_bits(void *buf, ccl_datatype_t dt, size_t n, uint64_t *s)
{
    size_t es = dev_dtype_size(dt);
    unsigned char *p = buf;
    for (size_t i = 0; i < n * es; i++)
        p[i] = (unsigned char)rng_next(s);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_next(s);
        if ((r & 3) != 0)
            continue;
        r >>= 2;
        if (es == 4)
            memcpy(p + i * 4, &specials32[r % (sizeof specials32 / 4)], 4);
        else if (es == 2)
            memcpy(p + i * 2, &specials16[r % (sizeof specials16 / 2)], 2);
        else if (es == 1)
            p[i] = specials8[r % sizeof specials8];
    }
}

static int levels_differ(dev_simd_t lvl, const char *what, ccl_datatype_t dt, size_t n,
                         const void *want, const void *got, size_t bytes)
{
    if (memcmp(want, got, bytes) == 0)
        return 0;
    size_t es = dev_dtype_size(dt), i = 0;
    while (memcmp((const char *)want + i * es, (const char *)got + i * es, es) == 0)
        i++;
    uint64_t w = 0, g = 0;
    memcpy(&w, (const char *)want + i * es, es);
    memcpy(&g, (const char *)got + i * es, es);
    print_error("%s %s %s n=%zu: [%zu] scalar 0x%llx, %s 0x%llx\n", dev_simd_name(lvl), what,
                dev_dtype_name(dt), n, i, (unsigned long long)w, dev_simd_name(lvl),
                (unsigned long long)g);
    return 1;
}

/* One reduce at every level above scalar, compared bit for bit with the
 * scalar level. Buffers: a, b, dst, dst2 at the given byte offsets in
 * their own allocations; alias 0: dst separate, 1: dst == a, 2: dst == b. */
static int compare_levels_reduce(ccl_datatype_t dt, ccl_redop_t op, size_t n, int alias,
                                 int with_dst2, const size_t off[4], uint64_t seed)
{
    size_t es = dev_dtype_size(dt), bytes = n * es;
    unsigned char *mem[4], *p[4];
    for (int k = 0; k < 4; k++) {
        mem[k] = malloc(bytes + 128);
        assert_non_null(mem[k]);
        p[k] = mem[k] + off[k];
    }
    unsigned char *a0 = malloc(bytes + 1), *b0 = malloc(bytes + 1);
    unsigned char *want = malloc(bytes + 1), *want2 = malloc(bytes + 1);
    assert_true(a0 && b0 && want && want2);
    uint64_t s = seed;
    fill_bits(a0, dt, n, &s);
    fill_bits(b0, dt, n, &s);
    int failures = 0;
    dev_simd_t best = dev_simd_best();
    for (int l = DEV_SIMD_SCALAR; l <= (int)best; l++) {
        dev_simd_force((dev_simd_t)l);
        memcpy(p[0], a0, bytes);
        memcpy(p[1], b0, bytes);
        memset(p[2], 0x5a, bytes);
        memset(p[3], 0x5a, bytes);
        void *dst = alias == 1 ? p[0] : alias == 2 ? p[1] : p[2];
        dev_reduce(dt, op, dst, with_dst2 ? p[3] : NULL, p[0], p[1], n);
        if (l == DEV_SIMD_SCALAR) {
            memcpy(want, dst, bytes);
            memcpy(want2, p[3], bytes);
            continue;
        }
        failures += levels_differ((dev_simd_t)l, dev_op_name(op), dt, n, want, dst, bytes);
        if (with_dst2)
            failures += levels_differ((dev_simd_t)l, "dst2", dt, n, want2, p[3], bytes);
    }
    dev_simd_force(best);
    for (int k = 0; k < 4; k++)
        free(mem[k]);
    free(a0);
    free(b0);
    free(want);
    free(want2);
    return failures;
}

static void test_simd_levels_bitwise(void **state)
{
    (void)state;
    dev_simd_t best = dev_simd_best();
    print_message("SIMD levels compared with scalar: up to %s\n", dev_simd_name(best));
    if (best == DEV_SIMD_SCALAR)
        skip();
    static const size_t lens[] = {0, 1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 4099};
    static const size_t offs[][4] = {{0, 0, 0, 0}, {1, 2, 3, 5}, {3, 1, 0, 2}, {2, 2, 1, 7}};
    static const ccl_redop_t ops4[] = {CCL_SUM, CCL_PROD, CCL_MAX, CCL_MIN};
    uint64_t seed = 77;
    int failures = 0;
    for (int t = 0; t < NUM_SUPPORTED; t++) {
        ccl_datatype_t dt = supported_dtypes[t];
        size_t es = dev_dtype_size(dt);
        for (int o = 0; o < 4; o++)
            for (size_t z = 0; z < sizeof lens / sizeof lens[0]; z++)
                for (int alias = 0; alias < 3; alias++)
                    for (size_t m = 0; m < sizeof offs / sizeof offs[0]; m++) {
                        size_t off[4];
                        for (int k = 0; k < 4; k++)
                            off[k] = offs[m][k] * es;
                        failures += compare_levels_reduce(dt, ops4[o], lens[z], alias, (int)(m & 1),
                                                          off, seed++);
                        if (failures > 20)
                            fail_msg("too many differences");
                    }
    }
    assert_int_equal(failures, 0);
}

/* Outputs past the non-temporal threshold (8 MiB): streaming stores after
 * an unaligned head, dst2 at the same and at a different 64-byte phase. */
static void test_simd_levels_large(void **state)
{
    (void)state;
    if (dev_simd_best() == DEV_SIMD_SCALAR)
        skip();
    static const ccl_datatype_t dts[] = {CCL_FLOAT32, CCL_FLOAT16, CCL_BFLOAT16, CCL_FLOAT8_E4M3,
                                         CCL_FLOAT8_E5M2};
    static const ccl_redop_t ops4[] = {CCL_SUM, CCL_PROD, CCL_MAX, CCL_MIN};
    int failures = 0;
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        size_t es = dev_dtype_size(dts[t]), n = ((size_t)9 << 20) / es + 13;
        for (size_t o = 0; o < 4; o++) {
            size_t off_same[4] = {0, es, 3 * es, 3 * es}, off_diff[4] = {es, 0, 5 * es, 0};
            failures += compare_levels_reduce(dts[t], ops4[o], n, (int)(o & 1), 1,
                                              (o & 2) ? off_diff : off_same, 1000 + o);
            failures += compare_levels_reduce(dts[t], ops4[o], n, 2, 0, off_diff, 2000 + o);
        }
    }
    assert_int_equal(failures, 0);
}

/* dev_reduce_stream (the fused 2-rank allreduce's slices, any length):
 * non-temporal stores after a head that aligns dst to 64 bytes, dst2 at
 * the same or another 64-byte phase, at every level, against dev_reduce
 * at the scalar level, bit for bit, with the guard bytes around both
 * outputs untouched. Outputs shorter than their head (which once ran past
 * the end) included. Every dtype: those whose kernels cannot stream store
 * plainly. */
static void test_reduce_stream_all_alignments(void **state)
{
    (void)state;
    static const ccl_redop_t ops4[] = {CCL_SUM, CCL_PROD, CCL_MAX, CCL_MIN};
    static const size_t lens[] = {0, 1, 2, 3, 5, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129, 255, 257, 300};
    enum { PAD = 128 };
    size_t cap = 300 * 8 + 2 * PAD;
    unsigned char *a = malloc(cap), *b = malloc(cap), *want = malloc(cap), *d1 = malloc(cap), *d2 = malloc(cap);
    assert_true(a && b && want && d1 && d2);
    dev_simd_t best = dev_simd_best();
    uint64_t seed = 4242;
    int failures = 0;
    for (int t = 0; t < NUM_SUPPORTED; t++) {
        ccl_datatype_t dt = supported_dtypes[t];
        size_t es = dev_dtype_size(dt);
        for (int o = 0; o < 4; o++)
            for (size_t z = 0; z < sizeof lens / sizeof lens[0]; z++) {
                size_t n = lens[z], bytes = n * es;
                fill_bits(a, dt, n, &seed);
                fill_bits(b, dt, n, &seed);
                dev_simd_force(DEV_SIMD_SCALAR);
                dev_reduce(dt, ops4[o], want, NULL, a, b, n);
                for (int l = DEV_SIMD_SCALAR; l <= (int)best; l++) {
                    dev_simd_force((dev_simd_t)l);
                    for (size_t m1 = 0; m1 < 64; m1 += es)
                        for (int phase = 0; phase < 2; phase++) {
                            size_t m2 = phase ? (m1 + 3 * es) % 64 : m1;
                            memset(d1, GUARD_BYTE, cap);
                            memset(d2, GUARD_BYTE, cap);
                            dev_reduce_stream(dt, ops4[o], d1 + PAD + m1, d2 + PAD + m2, a, b, n);
                            int bad = memcmp(d1 + PAD + m1, want, bytes) || memcmp(d2 + PAD + m2, want, bytes);
                            for (size_t i = 0; i < cap && !bad; i++)
                                bad = ((i < PAD + m1 || i >= PAD + m1 + bytes) && d1[i] != GUARD_BYTE) ||
                                      ((i < PAD + m2 || i >= PAD + m2 + bytes) && d2[i] != GUARD_BYTE);
                            if (bad && failures++ < 10)
                                print_error("%s stream %s %s n=%zu dst%%64=%zu dst2%%64=%zu: wrong result or guard\n",
                                            dev_simd_name((dev_simd_t)l), dev_dtype_name(dt), dev_op_name(ops4[o]),
                                            n, m1, m2);
                        }
                }
            }
    }
    dev_simd_force(best);
    free(a);
    free(b);
    free(want);
    free(d1);
    free(d2);
    assert_int_equal(failures, 0);
}

/* float16 and bfloat16: every bit pattern against a spread of partners
 * (rotations of all patterns, and each special), every op, every level. */
static void test_simd_levels_all_half_pairs(void **state)
{
    (void)state;
    dev_simd_t best = dev_simd_best();
    if (best == DEV_SIMD_SCALAR)
        skip();
    static const ccl_datatype_t dts[] = {CCL_FLOAT16, CCL_BFLOAT16};
    static const ccl_redop_t ops4[] = {CCL_SUM, CCL_PROD, CCL_MAX, CCL_MIN};
    static const uint32_t rot[] = {1, 0x0400, 0x3c00, 0x7c01, 0x8000, 0x8001, 0xbc00, 0x1234};
    enum { NP = 65536 };
    size_t nb = sizeof rot / sizeof rot[0] + sizeof specials16 / sizeof specials16[0];
    size_t n = NP * nb;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2), *want = malloc(n * 2), *got = malloc(n * 2);
    assert_true(a && b && want && got);
    for (size_t j = 0; j < nb; j++)
        for (uint32_t c = 0; c < NP; c++) {
            a[j * NP + c] = (uint16_t)c;
            b[j * NP + c] = j < sizeof rot / sizeof rot[0]
                                ? (uint16_t)(c + rot[j])
                                : specials16[j - sizeof rot / sizeof rot[0]];
        }
    int failures = 0;
    for (size_t t = 0; t < 2; t++)
        for (size_t o = 0; o < 4; o++) {
            dev_simd_force(DEV_SIMD_SCALAR);
            dev_reduce(dts[t], ops4[o], want, NULL, a, b, n);
            for (int l = DEV_SIMD_SCALAR + 1; l <= (int)best; l++) {
                dev_simd_force((dev_simd_t)l);
                dev_reduce(dts[t], ops4[o], got, NULL, a, b, n);
                failures += levels_differ((dev_simd_t)l, dev_op_name(ops4[o]), dts[t], n, want, got,
                                          n * 2);
                dev_reduce(dts[t], ops4[o], got, NULL, b, a, n); /* operands swapped */
                dev_simd_force(DEV_SIMD_SCALAR);
                dev_reduce(dts[t], ops4[o], want, NULL, b, a, n);
                failures += levels_differ((dev_simd_t)l, "swapped", dts[t], n, want, got, n * 2);
                dev_reduce(dts[t], ops4[o], want, NULL, a, b, n);
            }
        }
    dev_simd_force(best);
    free(a);
    free(b);
    free(want);
    free(got);
    assert_int_equal(failures, 0);
}

/* premul of n elements of src at level l, against the scalar level. */
static int premul_levels_differ(dev_simd_t l, ccl_datatype_t dt, void *want, void *got,
                                const void *src, size_t n, const void *scalar)
{
    dev_simd_force(DEV_SIMD_SCALAR);
    dev_premul(dt, want, src, n, scalar);
    dev_simd_force(l);
    dev_premul(dt, got, src, n, scalar);
    return levels_differ(l, "premul", dt, n, want, got, n * dev_dtype_size(dt));
}

/* avg's division of a copy of src at level l, against the scalar level. */
static int avg_levels_differ(dev_simd_t l, ccl_datatype_t dt, void *want, void *got,
                             const void *src, size_t n, int nranks)
{
    size_t bytes = n * dev_dtype_size(dt);
    dev_simd_force(DEV_SIMD_SCALAR);
    memcpy(want, src, bytes);
    dev_postop(dt, CCL_AVG, want, n, nranks);
    dev_simd_force(l);
    memcpy(got, src, bytes);
    dev_postop(dt, CCL_AVG, got, n, nranks);
    return levels_differ(l, "avg", dt, n, want, got, bytes);
}

/* float8: all 256 x 256 operand pairs, every op, every level, as one
 * reduce (so vector bodies, not only scalar tails, see every pair), plus
 * premul of every pattern by every scalar and avg of every pattern. */
static void test_simd_levels_all_f8_pairs(void **state)
{
    (void)state;
    dev_simd_t best = dev_simd_best();
    if (best == DEV_SIMD_SCALAR)
        skip();
    static const ccl_datatype_t dts[] = {CCL_FLOAT8_E4M3, CCL_FLOAT8_E5M2};
    static const ccl_redop_t ops4[] = {CCL_SUM, CCL_PROD, CCL_MAX, CCL_MIN};
    enum { N = 65536 };
    uint8_t *a = malloc(N), *b = malloc(N), *want = malloc(N), *got = malloc(N);
    assert_true(a && b && want && got);
    for (uint32_t i = 0; i < N; i++) {
        a[i] = (uint8_t)(i >> 8);
        b[i] = (uint8_t)i;
    }
    int failures = 0;
    for (size_t t = 0; t < 2; t++) {
        for (int l = DEV_SIMD_SCALAR + 1; l <= (int)best; l++) {
            for (size_t o = 0; o < 4; o++) {
                dev_simd_force(DEV_SIMD_SCALAR);
                dev_reduce(dts[t], ops4[o], want, NULL, a, b, N);
                dev_simd_force((dev_simd_t)l);
                dev_reduce(dts[t], ops4[o], got, NULL, a, b, N);
                failures += levels_differ((dev_simd_t)l, dev_op_name(ops4[o]), dts[t], N, want, got, N);
            }
            for (uint32_t sc = 0; sc < 256; sc++) {
                uint8_t scalar = (uint8_t)sc;
                failures += premul_levels_differ((dev_simd_t)l, dts[t], want, got, b, 256, &scalar);
            }
            static const int nr[] = {2, 3, 5, 7, 8, 1000};
            for (size_t r = 0; r < sizeof nr / sizeof nr[0]; r++)
                failures += avg_levels_differ((dev_simd_t)l, dts[t], want, got, b, 256, nr[r]);
        }
    }
    dev_simd_force(best);
    free(a);
    free(b);
    free(want);
    free(got);
    assert_int_equal(failures, 0);
}

/* float16 and bfloat16 premul and avg over every bit pattern (the scalars
 * from the specials and a spread of patterns). */
static void test_simd_levels_half_unary_all(void **state)
{
    (void)state;
    dev_simd_t best = dev_simd_best();
    if (best == DEV_SIMD_SCALAR)
        skip();
    static const ccl_datatype_t dts[] = {CCL_FLOAT16, CCL_BFLOAT16};
    enum { N = 65536 };
    uint16_t *x = malloc(N * 2), *want = malloc(N * 2), *got = malloc(N * 2);
    assert_true(x && want && got);
    for (uint32_t i = 0; i < N; i++)
        x[i] = (uint16_t)i;
    int failures = 0;
    for (size_t t = 0; t < 2; t++)
        for (int l = DEV_SIMD_SCALAR + 1; l <= (int)best; l++) {
            size_t nsc = sizeof specials16 / sizeof specials16[0];
            for (size_t k = 0; k < nsc + 16; k++) {
                uint16_t scalar = k < nsc ? specials16[k] : (uint16_t)((k - nsc) * 0x1111u + 0x0123u);
                failures += premul_levels_differ((dev_simd_t)l, dts[t], want, got, x, N, &scalar);
            }
            static const int nr[] = {2, 3, 7, 1000};
            for (size_t r = 0; r < sizeof nr / sizeof nr[0]; r++)
                failures += avg_levels_differ((dev_simd_t)l, dts[t], want, got, x, N, nr[r]);
        }
    dev_simd_force(best);
    free(x);
    free(want);
    free(got);
    assert_int_equal(failures, 0);
}

/* avg's division and premul at every level. */
static void test_simd_levels_postop_premul(void **state)
{
    (void)state;
    dev_simd_t best = dev_simd_best();
    if (best == DEV_SIMD_SCALAR)
        skip();
    int failures = 0;
    uint64_t s = 31337;
    for (int t = 0; t < NUM_SUPPORTED; t++) {
        ccl_datatype_t dt = supported_dtypes[t];
        size_t es = dev_dtype_size(dt), n = 1031, bytes = n * es;
        unsigned char *src = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes), sc[8];
        assert_true(src && want && got);
        fill_bits(src, dt, n, &s);
        fill_bits(sc, dt, 1, &s);
        for (int l = DEV_SIMD_SCALAR + 1; l <= (int)best; l++) {
            static const int nr[] = {2, 3, 7, 1000};
            for (size_t r = 0; r < sizeof nr / sizeof nr[0]; r++)
                failures += avg_levels_differ((dev_simd_t)l, dt, want, got, src, n, nr[r]);
            failures += premul_levels_differ((dev_simd_t)l, dt, want, got, src, n, sc);
        }
        free(src);
        free(want);
        free(got);
    }
    dev_simd_force(best);
    assert_int_equal(failures, 0);
}

/* dev_simd_force: levels past the CPU's best are lowered to it. */
static void test_simd_force(void **state)
{
    (void)state;
    dev_simd_t best = dev_simd_best();
    assert_int_equal(dev_simd_current(), best);
    assert_int_equal(dev_simd_force(DEV_SIMD_SCALAR), DEV_SIMD_SCALAR);
    assert_int_equal(dev_simd_current(), DEV_SIMD_SCALAR);
    assert_int_equal(dev_simd_force(DEV_SIMD_AVX512), best);
    assert_int_equal(dev_simd_force((dev_simd_t)99), best);
    assert_int_equal(dev_simd_current(), best);
    assert_string_equal(dev_simd_name(DEV_SIMD_SCALAR), "scalar");
    assert_string_equal(dev_simd_name(DEV_SIMD_AVX2), "avx2");
    assert_string_equal(dev_simd_name(DEV_SIMD_AVX512), "avx512");
    assert_string_equal(dev_simd_name((dev_simd_t)7), "invalid");
}

/* ---- dev_copy_stream ------------------------------------------------------- */

#define COPY_MAX_SMALL 600
#define COPY_MIS 64

/* Source bytes never equal GUARD_BYTE, so a destination byte the copy
 * skipped is always seen. */
static void fill_copy_source(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)rng_next(&s);
        p[i] = (c == GUARD_BYTE) ? (unsigned char)(c ^ 0xFF) : c;
    }
}

/* All GUARD_BYTE, for memcmp against the bytes around a destination. */
static unsigned char guard_ref[(1u << 20) + 512];

/* Region of `span` bytes filled with GUARD_BYTE; the copy landed at doff. */
static int check_copy(const unsigned char *region, size_t span, size_t doff,
                      const unsigned char *src, size_t len)
{
    if (memcmp(region, guard_ref, doff) != 0)
        return -1; /* wrote before dst */
    if (memcmp(region + doff, src, len) != 0)
        return -2;
    if (memcmp(region + doff + len, guard_ref, span - doff - len) != 0)
        return -3; /* wrote after dst */
    return 0;
}

static void copy_stream_small_all_alignments(void)
{
    /* dst region: a guard line, then up to 63 bytes of misalignment, the
     * copy, and a guard line after it. */
    const size_t span = 64 + COPY_MIS + COPY_MAX_SMALL + 64;
    unsigned char *dregion = aligned_alloc(64, (span + 63) & ~(size_t)63);
    unsigned char *sregion = aligned_alloc(64, (COPY_MIS + COPY_MAX_SMALL + 64 + 63) & ~(size_t)63);
    assert_non_null(dregion);
    assert_non_null(sregion);
    fill_copy_source(sregion, COPY_MIS + COPY_MAX_SMALL + 64, 4242);
    memset(dregion, GUARD_BYTE, span);
    size_t failures = 0;
    for (size_t dm = 0; dm < COPY_MIS; dm++) {
        for (size_t sm = 0; sm < COPY_MIS; sm++) {
            for (size_t len = 0; len <= COPY_MAX_SMALL; len++) {
                size_t doff = 64 + dm;
                dev_copy_stream(dregion + doff, sregion + sm, len);
                dev_copy_fence();
                int rc = check_copy(dregion, span, doff, sregion + sm, len);
                if (rc != 0) {
                    if (failures++ < 10)
                        print_error("copy dst%%64=%zu src%%64=%zu len=%zu: %s\n", dm, sm, len,
                                    rc == -1 ? "wrote before dst" : rc == -2 ? "wrong bytes"
                                                                             : "wrote after dst");
                    memset(dregion, GUARD_BYTE, span);
                } else {
                    memset(dregion + doff, GUARD_BYTE, len);
                }
            }
        }
    }
    free(dregion);
    free(sregion);
    assert_int_equal(failures, 0);
}

static void copy_stream_large(void)
{
    static const size_t lens[] = {(1u << 20) + 7, (1u << 20), 65536 + 63, 4095, 4097, 256 * 3 + 1};
    static const size_t mis[][2] = {{0, 0}, {1, 0}, {0, 1}, {13, 51}, {63, 63}, {32, 7}};
    const size_t maxlen = (1u << 20) + 7;
    const size_t span = 64 + 64 + maxlen + 64;
    unsigned char *dregion = aligned_alloc(64, (span + 63) & ~(size_t)63);
    unsigned char *sregion = aligned_alloc(64, (64 + maxlen + 63) & ~(size_t)63);
    assert_non_null(dregion);
    assert_non_null(sregion);
    fill_copy_source(sregion, 64 + maxlen, 777);
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        for (size_t m = 0; m < sizeof mis / sizeof mis[0]; m++) {
            memset(dregion, GUARD_BYTE, span);
            size_t doff = 64 + mis[m][0];
            dev_copy_stream(dregion + doff, sregion + mis[m][1], lens[l]);
            dev_copy_fence();
            int rc = check_copy(dregion, span, doff, sregion + mis[m][1], lens[l]);
            if (rc != 0) {
                print_error("copy len=%zu dst%%64=%zu src%%64=%zu failed (%d)\n", lens[l], mis[m][0],
                            mis[m][1], rc);
                fail();
            }
        }
    }
    free(dregion);
    free(sregion);
}

/* Two destinations at every mix of alignments: equal ones take the fused
 * loop (one read, two stores: streaming ones, and plain ones for
 * dev_copy2), unequal ones two copies. */
static void copy2_all_alignments(int streaming)
{
    static const size_t lens[] = {0, 1, 63, 64, 255, 256, 257, 4095, 65536 + 63, (1u << 20) + 7};
    static const size_t mis[] = {0, 1, 13, 63};
    const size_t maxlen = (1u << 20) + 7;
    const size_t span = 64 + 64 + maxlen + 64;
    unsigned char *d1 = aligned_alloc(64, (span + 63) & ~(size_t)63);
    unsigned char *d2 = aligned_alloc(64, (span + 63) & ~(size_t)63);
    unsigned char *src = aligned_alloc(64, (64 + maxlen + 63) & ~(size_t)63);
    assert_non_null(d1);
    assert_non_null(d2);
    assert_non_null(src);
    fill_copy_source(src, 64 + maxlen, 99);
    size_t failures = 0;
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (size_t a = 0; a < sizeof mis / sizeof mis[0]; a++)
            for (size_t b = 0; b < sizeof mis / sizeof mis[0]; b++)
                for (size_t sm = 0; sm < 8; sm += 7) {
                    size_t o1 = 64 + mis[a], o2 = 64 + mis[b];
                    memset(d1, GUARD_BYTE, span);
                    memset(d2, GUARD_BYTE, span);
                    if (streaming) {
                        dev_copy_stream2(d1 + o1, d2 + o2, src + sm, lens[l]);
                        dev_copy_fence();
                    } else {
                        dev_copy2(d1 + o1, d2 + o2, src + sm, lens[l]);
                    }
                    int rc1 = check_copy(d1, span, o1, src + sm, lens[l]);
                    int rc2 = check_copy(d2, span, o2, src + sm, lens[l]);
                    if ((rc1 || rc2) && failures++ < 10)
                        print_error("copy2 (%s) len=%zu dst%%64=%zu,%zu src%%64=%zu: %d %d\n",
                                    streaming ? "streaming" : "plain", lens[l], mis[a], mis[b], sm, rc1, rc2);
                }
    free(d1);
    free(d2);
    free(src);
    assert_int_equal(failures, 0);
}

static void copy_stream2(void) { copy2_all_alignments(1); }
static void copy2_plain(void) { copy2_all_alignments(0); }

/* The copies pick their kernel by the reductions' SIMD level: run each
 * check at every level this CPU has, so the AVX2 and SSE2 kernels are
 * tested on an AVX-512 machine too. */
static void at_every_level(void (*check)(void))
{
    dev_simd_t best = dev_simd_best();
    for (int l = DEV_SIMD_SCALAR; l <= (int)best; l++) {
        dev_simd_force((dev_simd_t)l);
        check();
    }
    dev_simd_force(best);
}

static void test_copy_stream_small_all_alignments(void **state)
{
    (void)state;
    at_every_level(copy_stream_small_all_alignments);
}

static void test_copy_stream_large(void **state)
{
    (void)state;
    at_every_level(copy_stream_large);
}

static void test_copy_stream2(void **state)
{
    (void)state;
    at_every_level(copy_stream2);
}

static void test_copy2_plain(void **state)
{
    (void)state;
    at_every_level(copy2_plain);
}

int main(void)
{
    memset(guard_ref, GUARD_BYTE, sizeof guard_ref);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_metadata),
        cmocka_unit_test(test_op_names),
        cmocka_unit_test(test_reduce_int8),
        cmocka_unit_test(test_reduce_uint8),
        cmocka_unit_test(test_reduce_int32),
        cmocka_unit_test(test_reduce_uint32),
        cmocka_unit_test(test_reduce_int64),
        cmocka_unit_test(test_reduce_uint64),
        cmocka_unit_test(test_reduce_float32),
        cmocka_unit_test(test_reduce_float64),
        cmocka_unit_test(test_reduce_float16),
        cmocka_unit_test(test_reduce_bfloat16),
        cmocka_unit_test(test_reduce_e4m3),
        cmocka_unit_test(test_reduce_e5m2),
        cmocka_unit_test(test_conv_exhaustive),
        cmocka_unit_test(test_conv_ties_and_neighbours),
        cmocka_unit_test(test_conv_float_sweep),
        cmocka_unit_test(test_conv_literals),
        cmocka_unit_test(test_integer_wraparound),
        cmocka_unit_test(test_narrow_op_literals),
        cmocka_unit_test(test_float_nan_canonical),
        cmocka_unit_test(test_float_specials),
        cmocka_unit_test(test_avg_postop),
        cmocka_unit_test(test_avg_integer_division_literals),
        cmocka_unit_test(test_avg_narrow_literals),
        cmocka_unit_test(test_postop_noop),
        cmocka_unit_test(test_premul),
        cmocka_unit_test(test_simd_force),
        cmocka_unit_test(test_simd_levels_bitwise),
        cmocka_unit_test(test_simd_levels_large),
        cmocka_unit_test(test_reduce_stream_all_alignments),
        cmocka_unit_test(test_simd_levels_all_half_pairs),
        cmocka_unit_test(test_simd_levels_all_f8_pairs),
        cmocka_unit_test(test_simd_levels_half_unary_all),
        cmocka_unit_test(test_simd_levels_postop_premul),
        cmocka_unit_test(test_copy_stream_small_all_alignments),
        cmocka_unit_test(test_copy_stream_large),
        cmocka_unit_test(test_copy_stream2),
        cmocka_unit_test(test_copy2_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
