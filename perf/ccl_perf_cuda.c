/*
 * ccl_perf_cuda.c - ccl-perf -m device: each rank's buffers in GPU memory
 * and its calls on a CUDA stream, as nccl-tests runs them.
 *
 * Inputs are still written and results still checked in host buffers (the
 * same code as -m host): before a checked call the filled host buffers are
 * copied to the GPU, after it the receive buffer comes back. Timed calls
 * only touch device memory. A build without CUDA (CCL_PERF_WITH_CUDA
 * unset) compiles the stubs at the end, which say so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccl_perf.h"

#ifdef CCL_PERF_WITH_CUDA
#include <cuda_runtime_api.h>

static void dev_die(const struct perf_ctx *x, const char *call, cudaError_t e)
{
    fprintf(stderr, "ccl-perf: rank %d: %s failed: %s (%s)\n", x->rank, call, cudaGetErrorString(e),
            cudaGetErrorName(e));
    exit(EXIT_FAILURE);
}

#define DEV_CHECK(x, call)                    \
    do {                                      \
        cudaError_t e_ = (call);              \
        if (e_ != cudaSuccess)                \
            dev_die((x), #call, e_);          \
    } while (0)

int perf_dev_available(char *msg, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0)
        return 1;
    /* The wording of the library's own refusal (src/core/dev_stream.c). */
    snprintf(msg, len, "device buffer passed but no CUDA driver/GPU: %s",
             e == cudaSuccess || e == cudaErrorNoDevice ? "no GPU: the CUDA driver sees no device"
             : e == cudaErrorInsufficientDriver         ? "no CUDA driver (libcuda.so.1 cannot be loaded, or is too old)"
                                                        : cudaGetErrorString(e));
    return 0;
}

void perf_dev_setup(struct perf_ctx *x, int local_rank)
{
    int n = 0;
    struct cudaDeviceProp p;
    cudaStream_t s;
    DEV_CHECK(x, cudaGetDeviceCount(&n));
    x->device = local_rank % n;
    DEV_CHECK(x, cudaSetDevice(x->device));
    DEV_CHECK(x, cudaGetDeviceProperties(&p, x->device));
    snprintf(x->device_name, sizeof x->device_name, "GPU %d: %.80s", x->device, p.name);
    DEV_CHECK(x, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    x->cuda_stream = s;
    DEV_CHECK(x, cudaMalloc(&x->send, x->send_cap));
    DEV_CHECK(x, cudaMalloc(&x->recv, x->recv_cap));
    /* Timed calls rotate over slices nobody fills: PERF_FILL_BYTE, as the
     * host buffers, not garbage that might send the host part down a NaN
     * or denormal path. On the rank's stream: a non-blocking stream is not
     * ordered after the legacy one that cudaMemset uses, so the fill could
     * land after an upload. */
    DEV_CHECK(x, cudaMemsetAsync(x->send, PERF_FILL_BYTE, x->send_cap, s));
    DEV_CHECK(x, cudaMemsetAsync(x->recv, PERF_FILL_BYTE, x->recv_cap, s));
    DEV_CHECK(x, cudaStreamSynchronize(s));
}

void perf_dev_upload(struct perf_ctx *x, size_t bytes)
{
    cudaStream_t s = x->cuda_stream;
    DEV_CHECK(x, cudaMemcpyAsync(x->send, x->hsend, bytes < x->send_cap ? bytes : x->send_cap,
                                 cudaMemcpyHostToDevice, s));
    DEV_CHECK(x, cudaMemcpyAsync(x->recv, x->hrecv, bytes < x->recv_cap ? bytes : x->recv_cap,
                                 cudaMemcpyHostToDevice, s));
    DEV_CHECK(x, cudaStreamSynchronize(s));
}

void perf_dev_download(struct perf_ctx *x, size_t bytes)
{
    cudaStream_t s = x->cuda_stream;
    DEV_CHECK(x, cudaMemcpyAsync(x->hrecv, x->recv, bytes < x->recv_cap ? bytes : x->recv_cap,
                                 cudaMemcpyDeviceToHost, s));
    DEV_CHECK(x, cudaStreamSynchronize(s));
}

void perf_dev_sync(struct perf_ctx *x)
{
    DEV_CHECK(x, cudaStreamSynchronize((cudaStream_t)x->cuda_stream));
}

void perf_dev_release(struct perf_ctx *x)
{
    cudaFree(x->send);
    cudaFree(x->recv);
    cudaStreamDestroy((cudaStream_t)x->cuda_stream);
    x->send = x->recv = NULL;
}

#else /* built without CUDA */

int perf_dev_available(char *msg, size_t len)
{
    snprintf(msg, len, "this ccl-perf was built without CUDA (make CUDA=0, or nvcc was not found)");
    return 0;
}

static void no_cuda(const struct perf_ctx *x)
{
    fprintf(stderr, "ccl-perf: rank %d: -m device in a build without CUDA\n", x->rank);
    exit(EXIT_FAILURE);
}

void perf_dev_setup(struct perf_ctx *x, int local_rank) { no_cuda(x); }
void perf_dev_upload(struct perf_ctx *x, size_t bytes) { no_cuda(x); }
void perf_dev_download(struct perf_ctx *x, size_t bytes) { no_cuda(x); }
void perf_dev_sync(struct perf_ctx *x) { no_cuda(x); }
void perf_dev_release(struct perf_ctx *x) { no_cuda(x); }

#endif
