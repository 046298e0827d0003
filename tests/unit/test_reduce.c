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
 * other ops and for one rank; dev_copy_stream + dev_copy_fence for every
 * destination and source misalignment 0..63 and every length 0..600, plus
 * large copies, with the bytes around the destination left untouched.
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
#include "device/reduce.h"

#define GUARD 64           /* guard bytes on each side of a test buffer */
#define GUARD_BYTE 0xA5
#define MAX_MISALIGN_ELEMS 3

static const ccl_datatype_t supported_dtypes[] = {CCL_INT8,  CCL_UINT8,  CCL_INT32,   CCL_UINT32,
                                                  CCL_INT64, CCL_UINT64, CCL_FLOAT32, CCL_FLOAT64};
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
        {CCL_FLOAT16, 2, "float16", 0},
        {CCL_FLOAT32, 4, "float32", 1},
        {CCL_FLOAT64, 8, "float64", 1},
        {CCL_BFLOAT16, 2, "bfloat16", 0},
        {CCL_FLOAT8_E4M3, 1, "float8_e4m3", 0},
        {CCL_FLOAT8_E5M2, 1, "float8_e5m2", 0},
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

static void test_copy_stream_small_all_alignments(void **state)
{
    (void)state;
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

static void test_copy_stream_large(void **state)
{
    (void)state;
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
        cmocka_unit_test(test_integer_wraparound),
        cmocka_unit_test(test_float_specials),
        cmocka_unit_test(test_avg_postop),
        cmocka_unit_test(test_avg_integer_division_literals),
        cmocka_unit_test(test_postop_noop),
        cmocka_unit_test(test_copy_stream_small_all_alignments),
        cmocka_unit_test(test_copy_stream_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
