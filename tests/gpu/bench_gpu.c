/*
 * bench_gpu.c - the reduction kernel's bandwidth against a device copy in
 * the same run (needs a GPU; tests/gpu/run.sh runs it and puts the figures
 * in its table).
 *
 * dst = a + b over two buffers of SIZE bytes (1 GiB by default; argv[1] in
 * MiB) for float32 and bfloat16, timed with CUDA events over ITERS calls
 * after a warmup; the bytes counted are what the kernel moves: two reads
 * and a write. The references moved the same way: cudaMemcpy device to
 * device and ccl's copy kernel (one read, one write each). The kernel is
 * memory-bound, so its bandwidth should be close to the copy's.
 *
 * Output, one line each, for run.sh to pick up:
 *   bench <name> <bytes moved per call> <ms per call> <GB/s>
 */
#include "device/kernels_cuda.h"

#include "gpu_test.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERS 20

typedef enum { RUN_REDUCE_F32, RUN_REDUCE_BF16, RUN_MEMCPY, RUN_COPY_KERNEL } what_t;

static void *a_buf, *b_buf, *d_buf;
static size_t size;

static void run_once(what_t w, cudaStream_t s)
{
    dev_cuda_reduce_t r = {.op = CCL_SUM, .nsrc = 2, .ndst = 1, .src = {a_buf, b_buf}, .dst = {d_buf}};
    switch (w) {
    case RUN_REDUCE_F32:
        r.dtype = CCL_FLOAT32;
        r.count = size / 4;
        if (dev_cuda_reduce(&r, s) != CCL_SUCCESS)
            exit(1);
        break;
    case RUN_REDUCE_BF16:
        r.dtype = CCL_BFLOAT16;
        r.count = size / 2;
        if (dev_cuda_reduce(&r, s) != CCL_SUCCESS)
            exit(1);
        break;
    case RUN_MEMCPY: GPU_OK(cudaMemcpyAsync(d_buf, a_buf, size, cudaMemcpyDeviceToDevice, s)); break;
    case RUN_COPY_KERNEL:
        if (dev_cuda_copy(d_buf, NULL, a_buf, size, s) != CCL_SUCCESS)
            exit(1);
        break;
    }
}

static double bench(const char *name, what_t w, size_t moved, cudaStream_t s)
{
    cudaEvent_t t0, t1;
    float ms = 0;
    GPU_OK(cudaEventCreate(&t0));
    GPU_OK(cudaEventCreate(&t1));
    for (int i = 0; i < 3; i++)
        run_once(w, s);
    GPU_OK(cudaEventRecord(t0, s));
    for (int i = 0; i < ITERS; i++)
        run_once(w, s);
    GPU_OK(cudaEventRecord(t1, s));
    GPU_OK(cudaEventSynchronize(t1));
    GPU_OK(cudaEventElapsedTime(&ms, t0, t1));
    double per = ms / ITERS, gbs = (double)moved / (per * 1e-3) / 1e9;
    printf("bench %s %zu %.3f %.1f\n", name, moved, per, gbs);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return gbs;
}

int main(int argc, char **argv)
{
    size = (argc > 1 ? (size_t)atol(argv[1]) : 1024) << 20;
    cudaStream_t s;
    GPU_OK(cudaSetDevice(0));
    GPU_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    GPU_OK(cudaMalloc(&a_buf, size));
    GPU_OK(cudaMalloc(&b_buf, size));
    GPU_OK(cudaMalloc(&d_buf, size));
    /* Small finite values: no NaN or denormal paths, for either type. */
    GPU_OK(cudaMemset(a_buf, 0x3c, size));
    GPU_OK(cudaMemset(b_buf, 0x3d, size));
    double copy = bench("memcpy-d2d", RUN_MEMCPY, 2 * size, s);
    double kcopy = bench("copy-kernel", RUN_COPY_KERNEL, 2 * size, s);
    double f32 = bench("reduce-f32-sum", RUN_REDUCE_F32, 3 * size, s);
    double bf16 = bench("reduce-bf16-sum", RUN_REDUCE_BF16, 3 * size, s);
    printf("# %zu MiB buffers: reduce f32 at %.0f%%, bf16 at %.0f%%, copy kernel at %.0f%% of cudaMemcpy D2D\n",
           size >> 20, 100 * f32 / copy, 100 * bf16 / copy, 100 * kcopy / copy);
    cudaFree(a_buf);
    cudaFree(b_buf);
    cudaFree(d_buf);
    cudaStreamDestroy(s);
    return 0;
}
