/*
 * gpu_probe.c - says whether this machine can run the GPU tests: exit 0
 * and one line per GPU (name, memory, compute capability, driver), or exit
 * 77 and why not (no driver, no GPU). tests/gpu/run.sh and run_all.sh ask
 * it before running anything on a GPU.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void)
{
    int n = 0, drv = 0, rt = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("no CUDA GPU here: %s\n", e == cudaSuccess ? "the driver sees no device"
               : e == cudaErrorInsufficientDriver ? "no CUDA driver (libcuda.so.1)" : cudaGetErrorString(e));
        return 77;
    }
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    for (int d = 0; d < n; d++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
            continue;
        printf("GPU %d: %s, %.1f GiB, sm_%d%d, %d SMs, driver CUDA %d.%d, runtime %d.%d\n", d, p.name,
               p.totalGlobalMem / 1073741824.0, p.major, p.minor, p.multiProcessorCount, drv / 1000,
               drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    }
    return 0;
}
