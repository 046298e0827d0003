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
 *
 * Loading is CUDA's too. CUDA loads a kernel at its first launch unless it
 * was loaded before (CUDA_MODULE_LOADING=LAZY, the default since 12.2),
 * and loading may synchronise the context; the mock takes the worst case:
 * a kernel's first launch on a device, and dev_cuda_load_kernels when it
 * loads anything, first wait for every stream of the device to drain
 * (cudaDeviceSynchronize). A launch behind a held stream then hangs here
 * as it did on an H200. CUDA_MODULE_LOADING=EAGER loads everything at the
 * first launch or load, as CUDA does at start.
 */
#include "base/err.h"
#include "device/kernels_cuda.h"
#include "device/reduce.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MOCK_K_CHUNK 4096 /* elements reduced per pass through the buffer */

/* Kernel numbers for loading: the reductions [dtype][op slot], the copy
 * kernels by unit width (16, 8, 4, 2, 1 bytes), the hold. */
#define MOCK_K_REDUCE(t, slot) ((t) * 4 + (slot))
#define MOCK_K_COPY(w) (CCL_NUM_DTYPES * 4 + (w))
#define MOCK_K_WAIT (CCL_NUM_DTYPES * 4 + 5)
#define MOCK_K_COUNT (MOCK_K_WAIT + 1)
#define MOCK_K_DEVICES 64

static pthread_mutex_t mock_k_load_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char mock_k_loaded[MOCK_K_DEVICES][MOCK_K_COUNT];

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

/* Kernel k (or all of them, k < 0) loaded on the current device; loading
 * anything first synchronises the device, as CUDA may. */
static void mock_k_load(int k)
{
    int dev = 0, sync = 0;
    const char *mode = getenv("CUDA_MODULE_LOADING");
    int eager = mode && strcmp(mode, "EAGER") == 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= MOCK_K_DEVICES) {
        cudaGetLastError();
        return;
    }
    pthread_mutex_lock(&mock_k_load_lock);
    for (int i = 0; i < MOCK_K_COUNT; i++)
        if ((k < 0 || i == k || eager) && !mock_k_loaded[dev][i]) {
            mock_k_loaded[dev][i] = 1;
            sync = !eager;
        }
    pthread_mutex_unlock(&mock_k_load_lock);
    if (sync)
        cudaDeviceSynchronize();
}

ccl_result_t dev_cuda_load_kernels(void)
{
    mock_k_load(-1);
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
    mock_k_load(MOCK_K_REDUCE((int)r->dtype, r->op == CCL_AVG ? CCL_SUM : (int)r->op));
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
    /* copy_cuda.cu's choice of kernel: the widest unit every address allows. */
    uintptr_t bits = (uintptr_t)dst | (uintptr_t)src | (dst2 ? (uintptr_t)dst2 : 0);
    int w = bits % 16 == 0 ? 0 : bits % 8 == 0 ? 1 : bits % 4 == 0 ? 2 : bits % 2 == 0 ? 3 : 4;
    mock_k_load(MOCK_K_COPY(w));
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
    mock_k_load(MOCK_K_WAIT);
    res = mock_k_launch("dev_cuda_wait_flag", stream, mock_k_wait_flag, &k, sizeof k, 0);
out:
    return res;
}
