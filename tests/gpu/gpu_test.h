/*
 * gpu_test.h - what the GPU test programs share: a CUDA call that must
 * succeed, in a plain program (exits) and on a forked rank (tst_fatal).
 */
#ifndef CCL_TESTS_GPU_TEST_H
#define CCL_TESTS_GPU_TEST_H

#include "device/cuda_rt.h"
#include "test_launch.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define GPU_OK(call)                                                                               \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The same for a ccl_result_t. */
#define GPU_CCL_OK(call)                                                                           \
    do {                                                                                           \
        ccl_result_t r_ = (call);                                                                  \
        if (r_ != CCL_SUCCESS) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, ccl_get_error_string(r_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* On a rank of tst_run_ranks (test_launch.h): fatal for the rank. */
#define GPU_RANK_OK(ctx, call)                                                                     \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            tst_fatal((ctx), "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_));  \
    } while (0)

/* A forked rank's GPU: rank r on device r mod count (fatal without one). */
static inline void gpu_rank_device(tst_ctx_t *ctx)
{
    int ndev = 0;
    const char *why = NULL;
    if (!dev_cuda_usable(&why))
        tst_fatal(ctx, "no GPU: %s", why);
    GPU_RANK_OK(ctx, cudaGetDeviceCount(&ndev));
    GPU_RANK_OK(ctx, cudaSetDevice(ctx->rank % ndev));
}

#endif
