/*
 * copy_cuda.cu - the copy kernel: one source into one or two destinations
 * (COPY, and RECV_COPY_SEND's user buffer and next slot in one read).
 *
 * The unit is the widest of 16, 8, 4, 2 or 1 bytes that divides every
 * address, so buffers at any offset copy correctly and aligned ones move
 * 16 bytes per thread per step; bytes past the last whole unit go one by
 * one. A single destination could use cudaMemcpyAsync; the kernel exists
 * for two, and so the benchmarks compare like with like.
 */
#include "device/kernels_cuda.h"
#include "device/launch_cuda.cuh"

template <typename U>
static __device__ void dev_copy_body(void *dst, void *dst2, const void *src, size_t bytes)
{
    const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    const size_t nthreads = (size_t)gridDim.x * blockDim.x;
    const size_t n = bytes / sizeof(U);
    const U *s = static_cast<const U *>(src);
    U *d = static_cast<U *>(dst), *d2 = static_cast<U *>(dst2);
    for (size_t i = tid; i < n; i += nthreads) {
        U v = s[i];
        d[i] = v;
        if (d2)
            d2[i] = v;
    }
    for (size_t i = n * sizeof(U) + tid; i < bytes; i += nthreads) {
        unsigned char v = static_cast<const unsigned char *>(src)[i];
        static_cast<unsigned char *>(dst)[i] = v;
        if (dst2)
            static_cast<unsigned char *>(dst2)[i] = v;
    }
}

#define DEV_CUDA_COPY_KERNEL(w, U)                                                                \
    extern "C" __global__ void __launch_bounds__(DEV_CUDA_THREADS)                                \
        dev_k_copy##w(void *dst, void *dst2, const void *src, size_t bytes)                       \
    {                                                                                             \
        dev_copy_body<U>(dst, dst2, src, bytes);                                                  \
    }

DEV_CUDA_COPY_KERNEL(16, uint4)
DEV_CUDA_COPY_KERNEL(8, uint2)
DEV_CUDA_COPY_KERNEL(4, unsigned int)
DEV_CUDA_COPY_KERNEL(2, unsigned short)
DEV_CUDA_COPY_KERNEL(1, unsigned char)

extern "C" ccl_result_t dev_cuda_load_copy_kernels(void)
{
    ccl_result_t res = CCL_SUCCESS;
    CCL_TRY(dev_cuda_load((const void *)dev_k_copy16, "dev_k_copy16"));
    CCL_TRY(dev_cuda_load((const void *)dev_k_copy8, "dev_k_copy8"));
    CCL_TRY(dev_cuda_load((const void *)dev_k_copy4, "dev_k_copy4"));
    CCL_TRY(dev_cuda_load((const void *)dev_k_copy2, "dev_k_copy2"));
    CCL_TRY(dev_cuda_load((const void *)dev_k_copy1, "dev_k_copy1"));
out:
    return res;
}

extern "C" ccl_result_t dev_cuda_copy(void *dst, void *dst2, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0)
        return CCL_SUCCESS;
    uintptr_t bits = (uintptr_t)dst | (uintptr_t)dst2 | (uintptr_t)src;
    cudaStream_t s = (cudaStream_t)stream;
    if ((bits & 15) == 0)
        dev_k_copy16<<<dev_cuda_blocks(bytes / 16 + 1), DEV_CUDA_THREADS, 0, s>>>(dst, dst2, src, bytes);
    else if ((bits & 7) == 0)
        dev_k_copy8<<<dev_cuda_blocks(bytes / 8 + 1), DEV_CUDA_THREADS, 0, s>>>(dst, dst2, src, bytes);
    else if ((bits & 3) == 0)
        dev_k_copy4<<<dev_cuda_blocks(bytes / 4 + 1), DEV_CUDA_THREADS, 0, s>>>(dst, dst2, src, bytes);
    else if ((bits & 1) == 0)
        dev_k_copy2<<<dev_cuda_blocks(bytes / 2 + 1), DEV_CUDA_THREADS, 0, s>>>(dst, dst2, src, bytes);
    else
        dev_k_copy1<<<dev_cuda_blocks(bytes), DEV_CUDA_THREADS, 0, s>>>(dst, dst2, src, bytes);
    return dev_cuda_launched("dev_cuda_copy");
}
