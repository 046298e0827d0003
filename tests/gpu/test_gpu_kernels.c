/*
 * test_gpu_kernels.c - the CUDA kernels of src/device against the host
 * path, bit for bit (needs a GPU; tests/gpu/run.sh runs it).
 *
 * Reduction: every dtype x op (sum, prod, max, min, avg, premulsum) x 1, 2,
 * 3 and 8 sources x one or two destinations, in place and not, on 16-byte
 * aligned buffers (vector path) and element-aligned ones (scalar path),
 * for counts that leave a tail after the last whole vector. Inputs are
 * random bit patterns, so floats include NaN, infinities, subnormals and
 * -0; the reference is the host kernels (dev_reduce, dev_premul,
 * dev_postop) applied in the same order, and the two must agree in every
 * bit: both run reduce_ops.h's operators.
 *
 * Copy: every offset 0..15 of source and destinations, odd sizes, one and
 * two destinations. Hold: a stream held on a pinned flag does not finish
 * before the host writes the flag and does after, for the driver's stream
 * wait and for the polling kernel.
 */
#include "device/cuda_rt.h"
#include "device/kernels_cuda.h"
#include "device/reduce.h"

#include "gpu_test.h"

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_COUNT ((size_t)1 << 20)
#define PAD 64

static int failures, cases;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static void fill_random(void *buf, size_t bytes)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t v = rng();
        memcpy(p + i, &v, bytes - i < 8 ? bytes - i : 8);
    }
}

/* op index 5 is premulsum: sum with the first source multiplied first. */
#define NUM_TEST_OPS 6
static const char *op_label(int op) { return op == 5 ? "premulsum" : dev_op_name((ccl_redop_t)op); }

static void report(const char *what, ccl_datatype_t dt, int op, int nsrc, int ndst, int inplace, size_t off,
                   size_t count, const unsigned char *got, const unsigned char *want)
{
    size_t esz = dev_dtype_size(dt), i = 0;
    while (i < count && memcmp(got + i * esz, want + i * esz, esz) == 0)
        i++;
    char g[40] = "", w[40] = "";
    for (size_t b = 0; b < esz && i < count; b++) {
        sprintf(g + 2 * b, "%02x", got[i * esz + esz - 1 - b]);
        sprintf(w + 2 * b, "%02x", want[i * esz + esz - 1 - b]);
    }
    if (failures++ < 20)
        printf("FAIL %s: %s %s, %d sources, %d destinations%s, offset %zu, count %zu: element %zu is 0x%s, "
               "host path says 0x%s\n", what, dev_dtype_name(dt), op_label(op), nsrc, ndst,
               inplace ? ", in place" : "", off, count, i, g, w);
}

/* One reduction case; host_src holds DEV_CUDA_MAX_SRCS random inputs. */
static void reduce_case(ccl_datatype_t dt, int op, int nsrc, int ndst, int inplace, size_t off, size_t count,
                        unsigned char **host_src, unsigned char *dev_src[], unsigned char *dev_dst[2],
                        unsigned char *ref, unsigned char *got, cudaStream_t s)
{
    size_t esz = dev_dtype_size(dt), bytes = count * esz;
    unsigned char scalar[8];
    fill_random(scalar, sizeof scalar);
    ccl_redop_t kop = op == 5 ? CCL_SUM : (ccl_redop_t)op;
    /* Host reference, in the kernels' order. */
    if (op == 5)
        dev_premul(dt, ref, host_src[0] + off, count, scalar);
    else
        memcpy(ref, host_src[0] + off, bytes);
    for (int k = 1; k < nsrc; k++)
        dev_reduce(dt, kop, ref, NULL, ref, host_src[k] + off, count);
    dev_postop(dt, kop, ref, count, nsrc);

    dev_cuda_reduce_t r = {.dtype = dt, .op = kop, .nsrc = nsrc, .ndst = ndst, .count = count,
                           .avg_ranks = nsrc, .premul = op == 5 ? scalar : NULL};
    for (int k = 0; k < nsrc; k++) {
        GPU_OK(cudaMemcpyAsync(dev_src[k] + off, host_src[k] + off, bytes, cudaMemcpyHostToDevice, s));
        r.src[k] = dev_src[k] + off;
    }
    r.dst[0] = inplace ? dev_src[0] + off : dev_dst[0] + off;
    r.dst[1] = dev_dst[1] + off;
    GPU_CCL_OK(dev_cuda_reduce(&r, s));
    for (int d = 0; d < ndst; d++) {
        GPU_OK(cudaMemcpyAsync(got, r.dst[d], bytes, cudaMemcpyDeviceToHost, s));
        GPU_OK(cudaStreamSynchronize(s));
        cases++;
        if (memcmp(got, ref, bytes) != 0)
            report(d ? "reduce (second destination)" : "reduce", dt, op, nsrc, ndst, inplace, off, count, got, ref);
    }
}

static void test_reduce(cudaStream_t s)
{
    static const int nsrcs[] = {1, 2, 3, 8};
    static const size_t counts[] = {1, 37, 4099};
    unsigned char *host_src[DEV_CUDA_MAX_SRCS], *dev_src[DEV_CUDA_MAX_SRCS], *dev_dst[2];
    size_t cap = MAX_COUNT * 8 + PAD;
    for (int k = 0; k < DEV_CUDA_MAX_SRCS; k++) {
        host_src[k] = malloc(cap);
        fill_random(host_src[k], cap);
        GPU_OK(cudaMalloc((void **)&dev_src[k], cap));
    }
    for (int d = 0; d < 2; d++)
        GPU_OK(cudaMalloc((void **)&dev_dst[d], cap));
    unsigned char *ref = malloc(cap), *got = malloc(cap);
    for (int t = 0; t < CCL_NUM_DTYPES; t++) {
        ccl_datatype_t dt = (ccl_datatype_t)t;
        size_t esz = dev_dtype_size(dt);
        for (int op = 0; op < NUM_TEST_OPS; op++) {
            for (size_t i = 0; i < sizeof nsrcs / sizeof nsrcs[0]; i++)
                for (int ndst = 1; ndst <= 2; ndst++)
                    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                        int inplace = (int)((c + i) & 1);
                        reduce_case(dt, op, nsrcs[i], ndst, inplace, 0, counts[c], host_src, dev_src, dev_dst,
                                    ref, got, s);
                        reduce_case(dt, op, nsrcs[i], ndst, !inplace, esz, counts[c], host_src, dev_src,
                                    dev_dst, ref, got, s);
                    }
            /* A large one per (dtype, op): many blocks, the grid-stride loop. */
            reduce_case(dt, op, 2, 1, 0, 0, MAX_COUNT + 3, host_src, dev_src, dev_dst, ref, got, s);
        }
    }
    for (int k = 0; k < DEV_CUDA_MAX_SRCS; k++) {
        free(host_src[k]);
        cudaFree(dev_src[k]);
    }
    cudaFree(dev_dst[0]);
    cudaFree(dev_dst[1]);
    free(ref);
    free(got);
}

static void test_copy(cudaStream_t s)
{
    size_t cap = 1 << 16;
    unsigned char *src = malloc(cap), *got = malloc(cap), *dsrc, *d1, *d2;
    fill_random(src, cap);
    GPU_OK(cudaMalloc((void **)&dsrc, cap));
    GPU_OK(cudaMalloc((void **)&d1, cap));
    GPU_OK(cudaMalloc((void **)&d2, cap));
    GPU_OK(cudaMemcpy(dsrc, src, cap, cudaMemcpyHostToDevice));
    static const size_t sizes[] = {1, 3, 16, 17, 255, 4096, 40000};
    for (size_t so = 0; so < 16; so++)
        for (size_t doff = 0; doff < 16; doff += 3)
            for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
                for (int two = 0; two < 2; two++) {
                    size_t n = sizes[z];
                    GPU_CCL_OK(dev_cuda_copy(d1 + doff, two ? d2 + (15 - doff) : NULL, dsrc + so, n, s));
                    for (int d = 0; d <= two; d++) {
                        GPU_OK(cudaMemcpyAsync(got, d ? d2 + (15 - doff) : d1 + doff, n, cudaMemcpyDeviceToHost, s));
                        GPU_OK(cudaStreamSynchronize(s));
                        cases++;
                        if (memcmp(got, src + so, n) != 0 && failures++ < 20)
                            printf("FAIL copy: %zu bytes from offset %zu to offset %zu (destination %d)\n", n, so,
                                   d ? 15 - doff : doff, d + 1);
                    }
                }
    cudaFree(dsrc);
    cudaFree(d1);
    cudaFree(d2);
    free(src);
    free(got);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A held stream stays busy until the flag is written, then drains. */
static void test_hold(cudaStream_t s)
{
    volatile uint32_t *flag;
    GPU_CCL_OK(dev_host_alloc((void **)&flag, sizeof *flag));
    *flag = 0;
    for (int use_kernel = 0; use_kernel < 2; use_kernel++) {
        /* From 0 for each way: the last one left the flag at 3, which
         * would release the next holds at once. */
        *flag = 0;
        for (uint32_t target = 1; target <= 3; target++) {
            GPU_CCL_OK(dev_stream_hold(flag, target, s, use_kernel));
            sleep_ms(20);
            cases++;
            if (cudaStreamQuery(s) != cudaErrorNotReady && failures++ < 20)
                printf("FAIL hold (%s): the stream finished before the flag reached %u\n",
                       use_kernel ? "kernel" : "stream wait", target);
            __atomic_store_n(flag, target, __ATOMIC_RELEASE);
            GPU_OK(cudaStreamSynchronize(s));
        }
    }
    /* Serial numbers: a target just past a wrap is reached by 0. */
    *flag = 0xfffffffeu;
    GPU_CCL_OK(dev_stream_hold(flag, 0xffffffffu, s, 1));
    *flag = 0;
    GPU_OK(cudaStreamSynchronize(s));
    cases++;
    dev_host_free((void *)flag);
}

int main(void)
{
    const char *why = NULL;
    if (!dev_cuda_usable(&why)) {
        printf("test_gpu_kernels: skipped: %s\n", why);
        return 77;
    }
    cudaStream_t s;
    GPU_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    test_reduce(s);
    test_copy(s);
    test_hold(s);
    GPU_OK(cudaStreamDestroy(s));
    printf("test_gpu_kernels: %d checks, %d failed: %s\n", cases, failures, failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
