/*
 * reduce.h - element types, reductions and copies on host memory.
 *
 * The executor calls these on slot-sized slices; each call is one pass over
 * memory (a fused reduce writes both of its destinations in that pass).
 */
#ifndef CCL_DEVICE_REDUCE_H
#define CCL_DEVICE_REDUCE_H

#include "ccl.h"
#include <stddef.h>

/* Element sizes by dtype; dev_dtype_size is inline because every call
 * asks it several times (argument checks, extents, the board). */
extern const unsigned char dev_dtype_sizes[CCL_NUM_DTYPES];

/* 0 for a dtype value outside the enum. */
static inline size_t dev_dtype_size(ccl_datatype_t dtype)
{
    return (unsigned)dtype < CCL_NUM_DTYPES ? dev_dtype_sizes[dtype] : 0;
}
const char *dev_dtype_name(ccl_datatype_t dtype);
const char *dev_op_name(ccl_redop_t op);
/* Whether the host path implements this dtype: every ccl_datatype_t value
 * (0 only for values outside the enum). */
int dev_dtype_supported(ccl_datatype_t dtype);

/* dst = a op b (elementwise, n elements); also into dst2 when not NULL.
 * dst and dst2 may each alias a or b exactly (in place: the fused 2-rank
 * allreduce writes dst2 over the peer's input when the peer is in place),
 * as every kernel loads an element before it stores it. dtype/op must be
 * supported. */
void dev_reduce(ccl_datatype_t dtype, ccl_redop_t op, void *dst, void *dst2,
                const void *a, const void *b, size_t n);
/* dev_reduce with non-temporal stores into dst and dst2 (whichever has
 * dst's alignment to 64 bytes), fenced before it returns, whatever n: for
 * results no core reads soon. Only where dev_reduce_streams(dtype) (the
 * hand-written float kernels, from AVX2); otherwise plain stores. */
void dev_reduce_stream(ccl_datatype_t dtype, ccl_redop_t op, void *dst, void *dst2, const void *a, const void *b,
                       size_t n);
int dev_reduce_streams(ccl_datatype_t dtype);
/* The op's final transform (CCL_AVG: divide by nranks); no-op for others. */
void dev_postop(ccl_datatype_t dtype, ccl_redop_t op, void *buf, size_t n, int nranks);
/* dst[i] = scalar * src[i] (n elements), scalar being one element of dtype
 * (any alignment): the first half of a premulsum operator, which multiplies
 * each rank's input and then sums. Integers wrap; narrow floats multiply in
 * float and round back (reduce_ops.h). dst may equal src. */
void dev_premul(ccl_datatype_t dtype, void *dst, const void *src, size_t n, const void *scalar);

/* SIMD levels of the host kernels. Every level computes the same bits; they
 * differ only in speed. "scalar" is the portable C loop (which the compiler
 * may still vectorise for baseline x86-64). */
typedef enum {
    DEV_SIMD_SCALAR = 0,
    DEV_SIMD_AVX2 = 1,   /* AVX2 + F16C */
    DEV_SIMD_AVX512 = 2, /* AVX-512 F, BW, VL, DQ */
    DEV_SIMD_NUM_LEVELS
} dev_simd_t;

/* The best level this CPU runs (what the kernels use unless forced). */
dev_simd_t dev_simd_best(void);
/* Makes every later call in this process use `level`, lowered to
 * dev_simd_best() when the CPU lacks it (an out-of-range level means the
 * best); returns the level now in use. For benchmarks and tests: switching
 * while other threads reduce is safe, but which level a running call uses
 * is then unspecified. */
dev_simd_t dev_simd_force(dev_simd_t level);
dev_simd_t dev_simd_current(void);
const char *dev_simd_name(dev_simd_t level);

#endif
