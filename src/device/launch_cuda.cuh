/*
 * launch_cuda.cuh - internal to the .cu files of src/device: how big a grid
 * a memory-bound kernel gets, and how a CUDA error becomes ccl's error.
 *
 * The kernels are grid-stride loops, so any grid is correct; the grid only
 * has to be large enough to keep every multiprocessor's memory pipeline
 * busy (a few blocks per SM) and no larger than the work, so a slot-sized
 * slice does not launch thousands of idle blocks.
 */
#ifndef CCL_DEVICE_LAUNCH_CUDA_CUH
#define CCL_DEVICE_LAUNCH_CUDA_CUH

#include <cuda_runtime.h>

extern "C" {
#include "base/err.h"
}

#define DEV_CUDA_THREADS 512
#define DEV_CUDA_BLOCKS_PER_SM 4
#define DEV_CUDA_MAX_DEVICES 64

/* Multiprocessors of the current device, asked once per device (a race
 * only asks twice). */
static inline int dev_cuda_sm_count(void)
{
    static int cached[DEV_CUDA_MAX_DEVICES];
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0)
        return 1;
    if (dev < DEV_CUDA_MAX_DEVICES && (n = __atomic_load_n(&cached[dev], __ATOMIC_RELAXED)) > 0)
        return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1)
        n = 1;
    if (dev < DEV_CUDA_MAX_DEVICES)
        __atomic_store_n(&cached[dev], n, __ATOMIC_RELAXED);
    return n;
}

/* Blocks of DEV_CUDA_THREADS for `items` units of work, one per thread. */
static inline unsigned dev_cuda_blocks(size_t items)
{
    size_t need = (items + DEV_CUDA_THREADS - 1) / DEV_CUDA_THREADS;
    size_t most = (size_t)dev_cuda_sm_count() * DEV_CUDA_BLOCKS_PER_SM;
    if (need > most)
        need = most;
    return need ? (unsigned)need : 1u;
}

/* The launch's own error (bad configuration, no kernel image for this
 * GPU); errors of earlier asynchronous work stay for the caller's stream
 * to report. */
static inline ccl_result_t dev_cuda_launched(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return CCL_SUCCESS;
    return err_set(CCL_ERR_CUDA, "%s: kernel launch failed: %s (%s)", what, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

/* Loads one kernel on the current device: cudaFuncGetAttributes does
 * (kernels_cuda.h, dev_cuda_load_kernels, says why ccl loads them early). */
static inline ccl_result_t dev_cuda_load(const void *kernel, const char *name)
{
    struct cudaFuncAttributes at;
    cudaError_t e = cudaFuncGetAttributes(&at, kernel);
    if (e == cudaSuccess)
        return CCL_SUCCESS;
    cudaGetLastError();
    return err_set(CCL_ERR_CUDA, "loading the GPU kernel %s failed: %s (%s)", name, cudaGetErrorString(e),
                   cudaGetErrorName(e));
}

/* The kernels of copy_cuda.cu and wait_cuda.cu (reduce_cuda.cu's
 * dev_cuda_load_kernels loads them with its own). */
extern "C" ccl_result_t dev_cuda_load_copy_kernels(void);
extern "C" ccl_result_t dev_cuda_load_wait_kernel(void);

#endif
