/*
 * reduce_host.c - host kernels for every (dtype, op), with SIMD chosen at
 * run time.
 *
 * Each kernel is a plain loop over the shared operators of reduce_ops.h.
 * GCC's target_clones compiles it for AVX-512, AVX2 and baseline x86-64 and
 * picks one from cpuid when the library loads, so one binary is fast on every
 * machine. `ivdep` tells the vectoriser that dst may alias a source only
 * element-for-element (in-place collectives), so it needs no runtime alias
 * check that would fall back to scalar code.
 */
#include "device/reduce.h"
#include "device/reduce_ops.h"

#include <string.h>

#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define DEV_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DEV_SIMD
#endif

typedef void (*dev_kernel_t)(void *dst, void *dst2, const void *a, const void *b, size_t n);
typedef void (*dev_div_kernel_t)(void *buf, size_t n, int nranks);
typedef void (*dev_premul_kernel_t)(void *dst, const void *src, size_t n, const void *scalar);

#define DEV_KERNEL(name, T, opn)                                                        \
    DEV_SIMD static void k_##opn##_##name(void *dst, void *dst2, const void *a,         \
                                          const void *b, size_t n)                      \
    {                                                                                   \
        T *d = dst, *d2 = dst2;                                                         \
        const T *x = a, *y = b;                                                         \
        if (d2) {                                                                       \
            _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++)                         \
            {                                                                           \
                T v = dev_##opn##_##name(x[i], y[i]);                                   \
                d[i] = v;                                                               \
                d2[i] = v;                                                              \
            }                                                                           \
        } else {                                                                        \
            _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++) d[i] =                  \
                dev_##opn##_##name(x[i], y[i]);                                         \
        }                                                                               \
    }

#define DEV_TYPE_KERNELS(name, T)                                              \
    DEV_KERNEL(name, T, sum)                                                   \
    DEV_KERNEL(name, T, prod)                                                  \
    DEV_KERNEL(name, T, max)                                                   \
    DEV_KERNEL(name, T, min)                                                   \
    DEV_SIMD static void k_div_##name(void *buf, size_t n, int nranks)         \
    {                                                                          \
        T *d = buf;                                                            \
        for (size_t i = 0; i < n; i++)                                         \
            d[i] = dev_div_##name(d[i], nranks);                               \
    }                                                                          \
    DEV_SIMD static void k_premul_##name(void *dst, const void *src, size_t n, \
                                         const void *scalar)                   \
    {                                                                          \
        T *d = dst, s;                                                         \
        const T *x = src;                                                      \
        memcpy(&s, scalar, sizeof s); /* may be unaligned */                   \
        _Pragma("GCC ivdep") for (size_t i = 0; i < n; i++) d[i] =             \
            dev_prod_##name(s, x[i]);                                          \
    }

DEV_TYPE_KERNELS(i8, int8_t)
DEV_TYPE_KERNELS(u8, uint8_t)
DEV_TYPE_KERNELS(i32, int32_t)
DEV_TYPE_KERNELS(u32, uint32_t)
DEV_TYPE_KERNELS(i64, int64_t)
DEV_TYPE_KERNELS(u64, uint64_t)
DEV_TYPE_KERNELS(f32, float)
DEV_TYPE_KERNELS(f64, double)
DEV_TYPE_KERNELS(f16, uint16_t)
DEV_TYPE_KERNELS(bf16, uint16_t)
DEV_TYPE_KERNELS(e4m3, uint8_t)
DEV_TYPE_KERNELS(e5m2, uint8_t)

typedef struct {
    const char *name;
    size_t size;
    dev_kernel_t k[4]; /* sum, prod, max, min: avg reduces with sum */
    dev_div_kernel_t div;
    dev_premul_kernel_t premul;
} dev_type_t;

#define DEV_ROW(name, T, label) \
    {label, sizeof(T), {k_sum_##name, k_prod_##name, k_max_##name, k_min_##name}, k_div_##name, \
     k_premul_##name}

static const dev_type_t dev_types[CCL_NUM_DTYPES] = {
    [CCL_INT8] = DEV_ROW(i8, int8_t, "int8"),
    [CCL_UINT8] = DEV_ROW(u8, uint8_t, "uint8"),
    [CCL_INT32] = DEV_ROW(i32, int32_t, "int32"),
    [CCL_UINT32] = DEV_ROW(u32, uint32_t, "uint32"),
    [CCL_INT64] = DEV_ROW(i64, int64_t, "int64"),
    [CCL_UINT64] = DEV_ROW(u64, uint64_t, "uint64"),
    [CCL_FLOAT16] = DEV_ROW(f16, uint16_t, "float16"),
    [CCL_FLOAT32] = DEV_ROW(f32, float, "float32"),
    [CCL_FLOAT64] = DEV_ROW(f64, double, "float64"),
    [CCL_BFLOAT16] = DEV_ROW(bf16, uint16_t, "bfloat16"),
    [CCL_FLOAT8_E4M3] = DEV_ROW(e4m3, uint8_t, "float8_e4m3"),
    [CCL_FLOAT8_E5M2] = DEV_ROW(e5m2, uint8_t, "float8_e5m2"),
};

size_t dev_dtype_size(ccl_datatype_t dtype)
{
    return ((unsigned)dtype < CCL_NUM_DTYPES) ? dev_types[dtype].size : 0;
}

const char *dev_dtype_name(ccl_datatype_t dtype)
{
    return ((unsigned)dtype < CCL_NUM_DTYPES) ? dev_types[dtype].name : "invalid";
}

const char *dev_op_name(ccl_redop_t op)
{
    static const char *names[CCL_NUM_OPS] = {"sum", "prod", "max", "min", "avg"};
    return ((unsigned)op < CCL_NUM_OPS) ? names[op] : "invalid";
}

int dev_dtype_supported(ccl_datatype_t dtype)
{
    return (unsigned)dtype < CCL_NUM_DTYPES && dev_types[dtype].k[0] != NULL;
}

void dev_reduce(ccl_datatype_t dtype, ccl_redop_t op, void *dst, void *dst2, const void *a,
                const void *b, size_t n)
{
    int slot = (op == CCL_AVG) ? CCL_SUM : (int)op;
    dev_types[dtype].k[slot](dst, dst2, a, b, n);
}

void dev_postop(ccl_datatype_t dtype, ccl_redop_t op, void *buf, size_t n, int nranks)
{
    if (op == CCL_AVG && nranks > 1)
        dev_types[dtype].div(buf, n, nranks);
}

void dev_premul(ccl_datatype_t dtype, void *dst, const void *src, size_t n, const void *scalar)
{
    dev_types[dtype].premul(dst, src, n, scalar);
}
