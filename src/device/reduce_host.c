/*
 * reduce_host.c - host kernels for every (dtype, op), with the SIMD level
 * chosen at run time.
 *
 * Each generic kernel is a plain loop over the shared operators of
 * reduce_ops.h, compiled three times: for baseline x86-64 (the portable
 * "scalar" level; the compiler may still use SSE2), for AVX2 and for
 * AVX-512, through per-function target attributes. The AVX2 and AVX-512
 * tables then take the hand-written float kernels of reduce_simd_x86.c
 * (float32, float16, bfloat16, float8). cpuid picks the best level the first time a kernel is
 * needed; dev_simd_force() overrides it for benchmarks and tests. Plain
 * target attributes (rather than target_clones) keep every level callable
 * on demand and build under clang and AddressSanitizer alike.
 *
 * Every level computes the same function bit for bit: the operators are
 * defined once, no contraction or reassociation is possible in them, and
 * the hand-written kernels reproduce them exactly (tests/unit/test_reduce.c
 * compares all levels on NaN, infinity and subnormal inputs).
 *
 * `ivdep` tells the vectoriser that dst may alias a source only
 * element-for-element (in-place collectives), so it needs no runtime alias
 * check that would fall back to scalar code.
 */
#include "device/reduce.h"
#include "device/reduce_ops.h"
#include "device/reduce_simd.h"

#include <string.h>

#if defined(__clang__)
#define DEV_IVDEP /* clang's equivalent warns on loops it cannot vectorise */
#else
#define DEV_IVDEP _Pragma("GCC ivdep")
#endif

#if defined(DEV_HAVE_X86_SIMD)
#define DEV_TGT_scalar
#define DEV_TGT_avx2 __attribute__((target("avx2,f16c")))
#define DEV_TGT_avx512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#endif

/* nt_from: outputs of at least this many bytes are streamed (non-temporal
 * stores) by the kernels that can (the hand-written ones); the others
 * ignore it. */
typedef void (*dev_kernel_t)(void *dst, void *dst2, const void *a, const void *b, size_t n, size_t nt_from);
typedef void (*dev_div_kernel_t)(void *buf, size_t n, int nranks);
typedef void (*dev_premul_kernel_t)(void *dst, const void *src, size_t n, const void *scalar);

/* `unused`: the AVX tables take hand-written kernels for some types. */
#define DEV_KERNEL(lvl, name, T, opn)                                                       \
    DEV_TGT_##lvl __attribute__((unused)) static void k_##opn##_##name##_##lvl(void *dst, void *dst2, const void *a, \
                                                       const void *b, size_t n, size_t nt_from) \
    {                                                                                       \
        (void)nt_from; /* plain stores: the compiler's loops cannot stream */               \
        T *d = dst, *d2 = dst2;                                                             \
        const T *x = a, *y = b;                                                             \
        if (d2) {                                                                           \
            DEV_IVDEP for (size_t i = 0; i < n; i++)                                        \
            {                                                                               \
                T v = dev_##opn##_##name(x[i], y[i]);                                       \
                d[i] = v;                                                                   \
                d2[i] = v;                                                                  \
            }                                                                               \
        } else {                                                                            \
            DEV_IVDEP for (size_t i = 0; i < n; i++) d[i] = dev_##opn##_##name(x[i], y[i]); \
        }                                                                                   \
    }

#define DEV_TYPE_KERNELS(lvl, name, T)                                                      \
    DEV_KERNEL(lvl, name, T, sum)                                                           \
    DEV_KERNEL(lvl, name, T, prod)                                                          \
    DEV_KERNEL(lvl, name, T, max)                                                           \
    DEV_KERNEL(lvl, name, T, min)                                                           \
    DEV_TGT_##lvl __attribute__((unused)) static void k_div_##name##_##lvl(void *buf, size_t n, int nranks)         \
    {                                                                                       \
        T *d = buf;                                                                         \
        for (size_t i = 0; i < n; i++)                                                      \
            d[i] = dev_div_##name(d[i], nranks);                                            \
    }                                                                                       \
    DEV_TGT_##lvl __attribute__((unused)) static void k_premul_##name##_##lvl(              \
        void *dst, const void *src, size_t n, const void *scalar)                           \
    {                                                                                       \
        T *d = dst, s;                                                                      \
        const T *x = src;                                                                   \
        memcpy(&s, scalar, sizeof s); /* may be unaligned */                                \
        DEV_IVDEP for (size_t i = 0; i < n; i++) d[i] = dev_prod_##name(s, x[i]);           \
    }

#define DEV_LEVEL_KERNELS(lvl)                                                              \
    DEV_TYPE_KERNELS(lvl, i8, int8_t)                                                       \
    DEV_TYPE_KERNELS(lvl, u8, uint8_t)                                                      \
    DEV_TYPE_KERNELS(lvl, i32, int32_t)                                                     \
    DEV_TYPE_KERNELS(lvl, u32, uint32_t)                                                    \
    DEV_TYPE_KERNELS(lvl, i64, int64_t)                                                     \
    DEV_TYPE_KERNELS(lvl, u64, uint64_t)                                                    \
    DEV_TYPE_KERNELS(lvl, f32, float)                                                       \
    DEV_TYPE_KERNELS(lvl, f64, double)                                                      \
    DEV_TYPE_KERNELS(lvl, f16, uint16_t)                                                    \
    DEV_TYPE_KERNELS(lvl, bf16, uint16_t)                                                   \
    DEV_TYPE_KERNELS(lvl, e4m3, uint8_t)                                                    \
    DEV_TYPE_KERNELS(lvl, e5m2, uint8_t)

#if !defined(DEV_HAVE_X86_SIMD)
#define DEV_TGT_scalar
#endif
DEV_LEVEL_KERNELS(scalar)
#if defined(DEV_HAVE_X86_SIMD)
DEV_LEVEL_KERNELS(avx2)
DEV_LEVEL_KERNELS(avx512)
#endif

typedef struct {
    dev_kernel_t k[4]; /* sum, prod, max, min: avg reduces with sum */
    dev_div_kernel_t div;
    dev_premul_kernel_t premul;
    int streams; /* the binary kernels honour nt_from */
} dev_kernels_t;

#define DEV_ROW(lvl, name)                                                                  \
    {{k_sum_##name##_##lvl, k_prod_##name##_##lvl, k_max_##name##_##lvl, k_min_##name##_##lvl}, \
     k_div_##name##_##lvl, k_premul_##name##_##lvl, 0}

/* float32: the hand-written binary kernels of reduce_simd_x86.c, the
 * compiler's loops for div and premul. */
#define DEV_ROW_SIMD(lvl, name)                                                             \
    {{dev_##lvl##_sum_##name, dev_##lvl##_prod_##name, dev_##lvl##_max_##name,              \
      dev_##lvl##_min_##name},                                                              \
     k_div_##name##_##lvl, k_premul_##name##_##lvl, 1}

/* The narrow floats: every kernel hand-written. */
#define DEV_ROW_NARROW(lvl, name)                                                           \
    {{dev_##lvl##_sum_##name, dev_##lvl##_prod_##name, dev_##lvl##_max_##name,              \
      dev_##lvl##_min_##name},                                                              \
     dev_##lvl##_div_##name, dev_##lvl##_premul_##name, 1}

#define DEV_TABLE(lvl, ROWF, ROWN)                                                          \
    {                                                                                       \
        [CCL_INT8] = DEV_ROW(lvl, i8), [CCL_UINT8] = DEV_ROW(lvl, u8),                      \
        [CCL_INT32] = DEV_ROW(lvl, i32), [CCL_UINT32] = DEV_ROW(lvl, u32),                  \
        [CCL_INT64] = DEV_ROW(lvl, i64), [CCL_UINT64] = DEV_ROW(lvl, u64),                  \
        [CCL_FLOAT16] = ROWN(lvl, f16), [CCL_FLOAT32] = ROWF(lvl, f32),                     \
        [CCL_FLOAT64] = DEV_ROW(lvl, f64), [CCL_BFLOAT16] = ROWN(lvl, bf16),                \
        [CCL_FLOAT8_E4M3] = ROWN(lvl, e4m3), [CCL_FLOAT8_E5M2] = ROWN(lvl, e5m2),           \
    }

static const dev_kernels_t dev_tables[DEV_SIMD_NUM_LEVELS][CCL_NUM_DTYPES] = {
    [DEV_SIMD_SCALAR] = DEV_TABLE(scalar, DEV_ROW, DEV_ROW),
#if defined(DEV_HAVE_X86_SIMD)
    [DEV_SIMD_AVX2] = DEV_TABLE(avx2, DEV_ROW_SIMD, DEV_ROW_NARROW),
    [DEV_SIMD_AVX512] = DEV_TABLE(avx512, DEV_ROW_SIMD, DEV_ROW_NARROW),
#else
    [DEV_SIMD_AVX2] = DEV_TABLE(scalar, DEV_ROW, DEV_ROW),
    [DEV_SIMD_AVX512] = DEV_TABLE(scalar, DEV_ROW, DEV_ROW),
#endif
};

/* ---- SIMD level ----------------------------------------------------------- */

/* The table in use; NULL until the first call picks one from cpuid. A race
 * between two first calls only repeats the same choice. */
static const dev_kernels_t *dev_cur;

#if defined(DEV_HAVE_X86_SIMD)
#include <cpuid.h>

/* cpuid and XCR0 directly (not __builtin_cpu_supports, whose feature names
 * differ between compilers): the CPU must have the instructions and the OS
 * must save the vector registers they use. */
static dev_simd_t dev_cpu_level(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return DEV_SIMD_SCALAR;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx || !f16c)
        return DEV_SIMD_SCALAR;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0x6) != 0x6) /* XMM and YMM state */
        return DEV_SIMD_SCALAR;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 5) & 1)) /* AVX2 */
        return DEV_SIMD_SCALAR;
    unsigned avx512 = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31); /* F DQ BW VL */
    if ((b & avx512) == avx512 && (lo & 0xe0) == 0xe0) /* opmask and ZMM state */
        return DEV_SIMD_AVX512;
    return DEV_SIMD_AVX2;
}
#endif

dev_simd_t dev_simd_best(void)
{
#if defined(DEV_HAVE_X86_SIMD)
    static int best = -1; /* cpuid once; a race only repeats it */
    int v = __atomic_load_n(&best, __ATOMIC_RELAXED);
    if (v < 0) {
        v = (int)dev_cpu_level();
        __atomic_store_n(&best, v, __ATOMIC_RELAXED);
    }
    return (dev_simd_t)v;
#else
    return DEV_SIMD_SCALAR;
#endif
}

dev_simd_t dev_simd_force(dev_simd_t level)
{
    dev_simd_t best = dev_simd_best();
    if ((unsigned)level >= DEV_SIMD_NUM_LEVELS || level > best)
        level = best;
    __atomic_store_n(&dev_cur, dev_tables[level], __ATOMIC_RELEASE);
    return level;
}

static const dev_kernels_t *dev_table(void)
{
    const dev_kernels_t *t = __atomic_load_n(&dev_cur, __ATOMIC_ACQUIRE);
    if (!t) {
        t = dev_tables[dev_simd_best()];
        __atomic_store_n(&dev_cur, t, __ATOMIC_RELEASE);
    }
    return t;
}

dev_simd_t dev_simd_current(void)
{
    const dev_kernels_t *t = dev_table();
    for (int l = DEV_SIMD_NUM_LEVELS - 1; l > 0; l--)
        if (t == dev_tables[l])
            return (dev_simd_t)l;
    return DEV_SIMD_SCALAR;
}

const char *dev_simd_name(dev_simd_t level)
{
    static const char *names[DEV_SIMD_NUM_LEVELS] = {"scalar", "avx2", "avx512"};
    return ((unsigned)level < DEV_SIMD_NUM_LEVELS) ? names[level] : "invalid";
}

/* ---- metadata and entry points ------------------------------------------- */

const unsigned char dev_dtype_sizes[CCL_NUM_DTYPES] = {
    [CCL_INT8] = 1,    [CCL_UINT8] = 1,   [CCL_INT32] = 4,    [CCL_UINT32] = 4,
    [CCL_INT64] = 8,   [CCL_UINT64] = 8,  [CCL_FLOAT16] = 2,  [CCL_FLOAT32] = 4,
    [CCL_FLOAT64] = 8, [CCL_BFLOAT16] = 2, [CCL_FLOAT8_E4M3] = 1, [CCL_FLOAT8_E5M2] = 1,
};

static const char *const dev_type_names[CCL_NUM_DTYPES] = {
    [CCL_INT8] = "int8",       [CCL_UINT8] = "uint8",       [CCL_INT32] = "int32",
    [CCL_UINT32] = "uint32",   [CCL_INT64] = "int64",       [CCL_UINT64] = "uint64",
    [CCL_FLOAT16] = "float16", [CCL_FLOAT32] = "float32",   [CCL_FLOAT64] = "float64",
    [CCL_BFLOAT16] = "bfloat16", [CCL_FLOAT8_E4M3] = "float8_e4m3", [CCL_FLOAT8_E5M2] = "float8_e5m2",
};

const char *dev_dtype_name(ccl_datatype_t dtype)
{
    return ((unsigned)dtype < CCL_NUM_DTYPES) ? dev_type_names[dtype] : "invalid";
}

const char *dev_op_name(ccl_redop_t op)
{
    static const char *names[CCL_NUM_OPS] = {"sum", "prod", "max", "min", "avg"};
    return ((unsigned)op < CCL_NUM_OPS) ? names[op] : "invalid";
}

int dev_dtype_supported(ccl_datatype_t dtype)
{
    return (unsigned)dtype < CCL_NUM_DTYPES;
}

void dev_reduce(ccl_datatype_t dtype, ccl_redop_t op, void *dst, void *dst2, const void *a,
                const void *b, size_t n)
{
    int slot = (op == CCL_AVG) ? CCL_SUM : (int)op;
    dev_table()[dtype].k[slot](dst, dst2, a, b, n, DEV_NT_MIN_BYTES);
}

int dev_reduce_streams(ccl_datatype_t dtype)
{
    return dev_table()[dtype].streams;
}

void dev_reduce_stream(ccl_datatype_t dtype, ccl_redop_t op, void *dst, void *dst2, const void *a, const void *b,
                       size_t n)
{
    int slot = (op == CCL_AVG) ? CCL_SUM : (int)op;
    dev_table()[dtype].k[slot](dst, dst2, a, b, n, 0);
}

void dev_postop(ccl_datatype_t dtype, ccl_redop_t op, void *buf, size_t n, int nranks)
{
    if (op == CCL_AVG && nranks > 1)
        dev_table()[dtype].div(buf, n, nranks);
}

void dev_premul(ccl_datatype_t dtype, void *dst, const void *src, size_t n, const void *scalar)
{
    dev_table()[dtype].premul(dst, src, n, scalar);
}
