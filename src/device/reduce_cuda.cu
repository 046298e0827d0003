/*
 * reduce_cuda.cu - the reduction kernels: one per (dtype, op) for sum, prod,
 * max and min; avg is sum followed by the division, premulsum is sum with
 * the own input multiplied first (both are flags of the same kernel).
 *
 * The operators come from reduce_ops.h, the host path's own definitions
 * (DEV_FN is __host__ __device__ under nvcc), so each element is computed
 * by the same code on both sides: same rounding, same NaN, bit for bit.
 *
 * Each thread reduces 16 bytes of every source per step when all pointers
 * are 16-byte aligned (one LDG.128 per source, all of them issued before
 * the first use), else one element; the loads of one step are independent,
 * so up to DEV_CUDA_MAX_SRCS of them are in flight per thread. Sources are
 * combined in order, rounding to the storage type after each operator, as
 * the host path does pairwise.
 *
 * Kernels are extern "C" with fixed names (dev_k_reduce_<op>_<type>) so
 * tests/gpu/check_fatbin.sh can find every one of them in the library.
 */
#include "device/kernels_cuda.h"
#include "device/launch_cuda.cuh"
#include "device/reduce_ops.h"

#include <stdio.h>
#include <string.h>

/* Everything a kernel needs, passed by value (kernel parameter space). */
typedef struct {
    const void *src[DEV_CUDA_MAX_SRCS];
    void *dst[2];
    size_t count;
    int nsrc, ndst;
    int avg_ranks;  /* > 1: divide by it at the end */
    int has_premul;
    int vec;        /* every pointer is 16-byte aligned */
    uint64_t premul; /* the scalar's bytes, low bytes first */
} dev_kargs_t;

template <typename T> union dev_pack16 {
    uint4 v;
    T e[16 / sizeof(T)];
};

/* One operator as the kernel body sees it. */
#define DEV_CUDA_OP(opn, name, T)                                                           \
    struct dev_op_##opn##_##name {                                                          \
        typedef T type;                                                                     \
        static __device__ __forceinline__ T apply(T a, T b) { return dev_##opn##_##name(a, b); } \
        static __device__ __forceinline__ T premul(T s, T x) { return dev_prod_##name(s, x); } \
        static __device__ __forceinline__ T div(T a, int n) { return dev_div_##name(a, n); } \
    };

/* One operator over the elements of two 16-byte vectors. */
template <class Op> static __device__ __forceinline__ uint4 dev_combine(uint4 x, uint4 y)
{
    typedef typename Op::type T;
    dev_pack16<T> a, b;
    a.v = x;
    b.v = y;
#pragma unroll
    for (int j = 0; j < (int)(16 / sizeof(T)); j++)
        a.e[j] = Op::apply(a.e[j], b.e[j]);
    return a.v;
}

/* The same, as a call: sources after the second (one-shot and local
 * reductions over many ranks) reuse one copy of the code instead of six
 * more inlined ones, which keeps the library's GPU code a third the size;
 * the call costs nothing a memory-bound loop would notice. */
template <class Op> static __device__ __noinline__ uint4 dev_combine_call(uint4 x, uint4 y)
{
    return dev_combine<Op>(x, y);
}

template <class Op>
static __device__ __forceinline__ typename Op::type dev_finish(const dev_kargs_t &a, typename Op::type v)
{
    return a.avg_ranks > 1 ? Op::div(v, a.avg_ranks) : v;
}

template <class Op> static __device__ void dev_reduce_body(const dev_kargs_t &a)
{
    typedef typename Op::type T;
    constexpr int V = 16 / sizeof(T);
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nthreads = (size_t)gridDim.x * blockDim.x;
    union {
        uint64_t u;
        T t;
    } scalar;
    scalar.u = a.premul;
    size_t done = 0;
    if (a.vec) {
        const size_t nvec = a.count / V;
        for (size_t i = tid; i < nvec; i += nthreads) {
            /* Raw vectors, not an array of unions: the unions would be
             * kept in local memory. */
            uint4 raw[DEV_CUDA_MAX_SRCS];
#pragma unroll
            for (int s = 0; s < DEV_CUDA_MAX_SRCS; s++)
                if (s < a.nsrc)
                    raw[s] = static_cast<const uint4 *>(a.src[s])[i];
            dev_pack16<T> acc;
            acc.v = raw[0];
            if (a.has_premul) {
#pragma unroll
                for (int j = 0; j < V; j++)
                    acc.e[j] = Op::premul(scalar.t, acc.e[j]);
            }
            if (a.nsrc > 1)
                acc.v = dev_combine<Op>(acc.v, raw[1]);
#pragma unroll
            for (int s = 2; s < DEV_CUDA_MAX_SRCS; s++)
                if (s < a.nsrc)
                    acc.v = dev_combine_call<Op>(acc.v, raw[s]);
#pragma unroll
            for (int j = 0; j < V; j++)
                acc.e[j] = dev_finish<Op>(a, acc.e[j]);
            static_cast<uint4 *>(a.dst[0])[i] = acc.v;
            if (a.ndst > 1)
                static_cast<uint4 *>(a.dst[1])[i] = acc.v;
        }
        done = nvec * V;
    }
    /* The tail after the last whole vector, or everything when unaligned. */
    for (size_t i = done + tid; i < a.count; i += nthreads) {
        T acc = static_cast<const T *>(a.src[0])[i];
        if (a.has_premul)
            acc = Op::premul(scalar.t, acc);
        /* Unrolled with constant indices: a run-time index into the
         * kernel's parameters would copy them to local memory. */
#pragma unroll
        for (int s = 1; s < DEV_CUDA_MAX_SRCS; s++)
            if (s < a.nsrc)
                acc = Op::apply(acc, static_cast<const T *>(a.src[s])[i]);
        acc = dev_finish<Op>(a, acc);
        static_cast<T *>(a.dst[0])[i] = acc;
        if (a.ndst > 1)
            static_cast<T *>(a.dst[1])[i] = acc;
    }
}

#define DEV_CUDA_KERNEL(opn, name, T)                                                       \
    DEV_CUDA_OP(opn, name, T)                                                               \
    extern "C" __global__ void __launch_bounds__(DEV_CUDA_THREADS)                          \
        dev_k_reduce_##opn##_##name(dev_kargs_t a)                                          \
    {                                                                                       \
        dev_reduce_body<dev_op_##opn##_##name>(a);                                          \
    }

#define DEV_CUDA_TYPE_KERNELS(name, T)                                                      \
    DEV_CUDA_KERNEL(sum, name, T)                                                           \
    DEV_CUDA_KERNEL(prod, name, T)                                                          \
    DEV_CUDA_KERNEL(max, name, T)                                                           \
    DEV_CUDA_KERNEL(min, name, T)

DEV_CUDA_TYPE_KERNELS(i8, int8_t)
DEV_CUDA_TYPE_KERNELS(u8, uint8_t)
DEV_CUDA_TYPE_KERNELS(i32, int32_t)
DEV_CUDA_TYPE_KERNELS(u32, uint32_t)
DEV_CUDA_TYPE_KERNELS(i64, int64_t)
DEV_CUDA_TYPE_KERNELS(u64, uint64_t)
DEV_CUDA_TYPE_KERNELS(f16, uint16_t)
DEV_CUDA_TYPE_KERNELS(bf16, uint16_t)
DEV_CUDA_TYPE_KERNELS(f32, float)
DEV_CUDA_TYPE_KERNELS(f64, double)
DEV_CUDA_TYPE_KERNELS(e4m3, uint8_t)
DEV_CUDA_TYPE_KERNELS(e5m2, uint8_t)

typedef void (*dev_kernel_fn)(dev_kargs_t);

#define DEV_CUDA_ROW(name)                                                                  \
    {dev_k_reduce_sum_##name, dev_k_reduce_prod_##name, dev_k_reduce_max_##name,            \
     dev_k_reduce_min_##name}

/* [dtype][op] in ccl_datatype_t and ccl_redop_t order (avg uses the sum
 * kernel); C++ has no array designators, so the rows follow the enum. */
static const dev_kernel_fn dev_cuda_kernels[CCL_NUM_DTYPES][4] = {
    DEV_CUDA_ROW(i8),  DEV_CUDA_ROW(u8),  DEV_CUDA_ROW(i32), DEV_CUDA_ROW(u32),
    DEV_CUDA_ROW(i64), DEV_CUDA_ROW(u64), DEV_CUDA_ROW(f16), DEV_CUDA_ROW(f32),
    DEV_CUDA_ROW(f64), DEV_CUDA_ROW(bf16), DEV_CUDA_ROW(e4m3), DEV_CUDA_ROW(e5m2),
};
static_assert(CCL_INT8 == 0 && CCL_UINT8 == 1 && CCL_INT32 == 2 && CCL_UINT32 == 3 && CCL_INT64 == 4 &&
                  CCL_UINT64 == 5 && CCL_FLOAT16 == 6 && CCL_FLOAT32 == 7 && CCL_FLOAT64 == 8 &&
                  CCL_BFLOAT16 == 9 && CCL_FLOAT8_E4M3 == 10 && CCL_FLOAT8_E5M2 == 11 && CCL_NUM_DTYPES == 12,
              "the kernel table follows ccl_datatype_t");
static_assert(CCL_SUM == 0 && CCL_PROD == 1 && CCL_MAX == 2 && CCL_MIN == 3, "the kernel table follows ccl_redop_t");

static const size_t dev_cuda_sizes[CCL_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

/* For messages: the kernels' names, in the table's order. */
static const char *const dev_cuda_op_names[4] = {"sum", "prod", "max", "min"};
static const char *const dev_cuda_type_names[CCL_NUM_DTYPES] = {"i8",  "u8",  "i32",  "u32",  "i64",  "u64",
                                                               "f16", "f32", "f64", "bf16", "e4m3", "e5m2"};

extern "C" ccl_result_t dev_cuda_load_kernels(void)
{
    ccl_result_t res = CCL_SUCCESS;
    char name[64];
    for (int t = 0; t < CCL_NUM_DTYPES; t++)
        for (int op = 0; op < 4; op++) {
            snprintf(name, sizeof name, "dev_k_reduce_%s_%s", dev_cuda_op_names[op], dev_cuda_type_names[t]);
            CCL_TRY(dev_cuda_load((const void *)dev_cuda_kernels[t][op], name));
        }
    CCL_TRY(dev_cuda_load_copy_kernels());
    CCL_TRY(dev_cuda_load_wait_kernel());
out:
    return res;
}

extern "C" ccl_result_t dev_cuda_reduce(const dev_cuda_reduce_t *r, void *stream)
{
    ccl_result_t res = dev_cuda_reduce_check(r);
    if (res != CCL_SUCCESS)
        return res;
    if (r->count == 0)
        return CCL_SUCCESS;
    size_t esz = dev_cuda_sizes[r->dtype];
    dev_kargs_t a;
    memset(&a, 0, sizeof a);
    uintptr_t bits = 0;
    for (int s = 0; s < r->nsrc; s++) {
        a.src[s] = r->src[s];
        bits |= (uintptr_t)r->src[s];
    }
    for (int d = 0; d < r->ndst; d++) {
        a.dst[d] = r->dst[d];
        bits |= (uintptr_t)r->dst[d];
    }
    a.count = r->count;
    a.nsrc = r->nsrc;
    a.ndst = r->ndst;
    a.avg_ranks = r->op == CCL_AVG ? r->avg_ranks : 0;
    a.vec = (bits & 15) == 0;
    if (r->premul) {
        a.has_premul = 1;
        memcpy(&a.premul, r->premul, esz);
    }
    size_t items = a.vec ? r->count / (16 / esz) + r->count % (16 / esz) : r->count;
    int slot = r->op == CCL_AVG ? CCL_SUM : (int)r->op;
    dev_cuda_kernels[r->dtype][slot]<<<dev_cuda_blocks(items), DEV_CUDA_THREADS, 0, (cudaStream_t)stream>>>(a);
    return dev_cuda_launched("dev_cuda_reduce");
}
