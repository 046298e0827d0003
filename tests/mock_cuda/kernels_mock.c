/*
 * kernels_mock.c - the mock build's kernels: every entry point of
 * src/device/kernels_cuda.h (the reduction, the copy, the hold of
 * wait_cuda.cu) as host code that runs on the stream's worker thread in
 * stream order. `make CUDA=mock` compiles this file into libccl in place
 * of the .cu files of src/device.
 *
 * A launch is cudaLaunchHostFunc with the arguments copied at the call
 * (a kernel's parameters are, and a premulsum scalar is read at the
 * call): the kernels use the public runtime API only, so they run on any
 * runtime, the mock's or a real one. The reduction is the host path's own
 * (dev_premul, dev_reduce, dev_postop of reduce_host.c, applied in source
 * order as the CUDA kernel applies reduce_ops.h), through a buffer per
 * chunk so that a destination may be any of the sources: the results are
 * the host path's bits, as the CUDA kernels' are.
 *
 * What a GPU would refuse is refused at the launch: a pointer the GPU
 * cannot reach (pageable host memory: the kernel would fault) and one not
 * aligned to its element (a misaligned-address fault).
 */
#include "core/err.h"
#include "device/kernels_cuda.h"
#include "device/reduce.h"

#include <cuda_runtime_api.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MOCK_K_CHUNK 4096 /* elements reduced per pass through the buffer */

typedef struct {
    dev_cuda_reduce_t r;
    unsigned char premul[8]; /* the scalar, copied at the launch */
    unsigned char buf[];     /* MOCK_K_CHUNK elements */
} mock_k_reduce_t;

typedef struct {
    void *dst, *dst2;
    const void *src;
    size_t bytes;
} mock_k_copy_t;

typedef struct {
    volatile uint32_t *flag;
    uint32_t target;
} mock_k_wait_t;

/* A pointer the kernel would dereference: it must be memory a GPU reaches
 * and aligned to align bytes. */
static ccl_result_t mock_k_check(const char *kernel, const char *what, const void *p, size_t align)
{
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess || at.type == cudaMemoryTypeUnregistered) {
        cudaGetLastError();
        return err_set(CCL_ERR_CUDA, "%s: %s %p is not device-accessible memory (the kernel would fault)", kernel,
                       what, p);
    }
    if ((uintptr_t)p % align != 0)
        return err_set(CCL_ERR_CUDA, "%s: %s %p is not aligned to its %zu-byte elements (misaligned address)", kernel,
                       what, p, align);
    return CCL_SUCCESS;
}

/* Launches fn on the stream with a copy of args (size bytes, plus extra
 * bytes of scratch after them); fn frees it. */
static ccl_result_t mock_k_launch(const char *kernel, void *stream, cudaHostFn_t fn, const void *args, size_t size,
                                  size_t extra)
{
    void *k = malloc(size + extra);
    if (!k)
        return err_set(CCL_ERR_SYSTEM, "%s: out of memory", kernel);
    memcpy(k, args, size);
    cudaError_t e = cudaLaunchHostFunc((cudaStream_t)stream, fn, k);
    if (e == cudaSuccess)
        return CCL_SUCCESS;
    cudaGetLastError();
    free(k);
    return err_set(CCL_ERR_CUDA, "%s: kernel launch failed: %s (%s)", kernel, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

/* ---- reduction -------------------------------------------------------------------------- */

static void CUDART_CB mock_k_reduce(void *arg)
{
    mock_k_reduce_t *k = arg;
    const dev_cuda_reduce_t *r = &k->r;
    size_t esz = dev_dtype_size(r->dtype);
    for (size_t at = 0; at < r->count; at += MOCK_K_CHUNK) {
        size_t n = r->count - at < MOCK_K_CHUNK ? r->count - at : MOCK_K_CHUNK;
        size_t off = at * esz;
        if (r->premul) /* the copy taken at the launch */
            dev_premul(r->dtype, k->buf, (const char *)r->src[0] + off, n, k->premul);
        else
            memcpy(k->buf, (const char *)r->src[0] + off, n * esz);
        for (int s = 1; s < r->nsrc; s++)
            dev_reduce(r->dtype, r->op, k->buf, NULL, k->buf, (const char *)r->src[s] + off, n);
        dev_postop(r->dtype, r->op, k->buf, n, r->avg_ranks);
        for (int d = 0; d < r->ndst; d++)
            memcpy((char *)r->dst[d] + off, k->buf, n * esz);
    }
    free(k);
}

ccl_result_t dev_cuda_reduce(const dev_cuda_reduce_t *r, void *stream)
{
    ccl_result_t res = CCL_SUCCESS;
    mock_k_reduce_t k;
    CCL_TRY(dev_cuda_reduce_check(r));
    if (r->count == 0)
        return CCL_SUCCESS;
    size_t esz = dev_dtype_size(r->dtype);
    for (int s = 0; s < r->nsrc; s++)
        CCL_TRY(mock_k_check("dev_cuda_reduce", "a source", r->src[s], esz));
    for (int d = 0; d < r->ndst; d++)
        CCL_TRY(mock_k_check("dev_cuda_reduce", "a destination", r->dst[d], esz));
    k.r = *r;
    /* The kernel's own rules: avg divides only when asked, and premul
     * takes the scalar as it is now. */
    k.r.avg_ranks = r->op == CCL_AVG ? r->avg_ranks : 0;
    if (r->premul)
        memcpy(k.premul, r->premul, esz);
    res = mock_k_launch("dev_cuda_reduce", stream, mock_k_reduce, &k, sizeof k, MOCK_K_CHUNK * esz);
out:
    return res;
}

/* ---- copy --------------------------------------------------------------------------------- */

static void CUDART_CB mock_k_copy(void *arg)
{
    mock_k_copy_t *k = arg;
    memmove(k->dst, k->src, k->bytes);
    if (k->dst2)
        memmove(k->dst2, k->src, k->bytes);
    free(k);
}

ccl_result_t dev_cuda_copy(void *dst, void *dst2, const void *src, size_t bytes, void *stream)
{
    ccl_result_t res = CCL_SUCCESS;
    if (bytes == 0)
        return CCL_SUCCESS;
    CCL_TRY(mock_k_check("dev_cuda_copy", "the source", src, 1));
    CCL_TRY(mock_k_check("dev_cuda_copy", "the destination", dst, 1));
    if (dst2)
        CCL_TRY(mock_k_check("dev_cuda_copy", "the second destination", dst2, 1));
    mock_k_copy_t k = {dst, dst2, src, bytes};
    res = mock_k_launch("dev_cuda_copy", stream, mock_k_copy, &k, sizeof k, 0);
out:
    return res;
}

/* ---- hold --------------------------------------------------------------------------------- */

/* wait_cuda.cu's kernel: polls the flag, sleeping between looks. */
static void CUDART_CB mock_k_wait_flag(void *arg)
{
    mock_k_wait_t *k = arg;
    struct timespec nap = {0, 2000}; /* wait_cuda.cu's DEV_WAIT_SLEEP_NS, grown to 100 us */
    while ((int32_t)(__atomic_load_n(k->flag, __ATOMIC_ACQUIRE) - k->target) < 0) {
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 100000)
            nap.tv_nsec *= 2;
    }
    free(k);
}

ccl_result_t dev_cuda_wait_flag(volatile uint32_t *flag, uint32_t target, void *stream)
{
    ccl_result_t res = CCL_SUCCESS;
    CCL_TRY(mock_k_check("dev_cuda_wait_flag", "the flag", (const void *)flag, sizeof *flag));
    mock_k_wait_t k = {flag, target};
    res = mock_k_launch("dev_cuda_wait_flag", stream, mock_k_wait_flag, &k, sizeof k, 0);
out:
    return res;
}
