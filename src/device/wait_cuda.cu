/*
 * wait_cuda.cu - holds a CUDA stream until the host says go: the device
 * side of the staged path (src/core/dev_stream.c), where the host runs the
 * collective between the stream's copy out of device memory and its copy
 * back in.
 *
 * One thread polls a word of pinned, mapped host memory that the host
 * writes when it is done. It sleeps between polls (__nanosleep, sm_70 and
 * up) so a waiting stream costs one resident warp and a trickle of reads
 * over the bus, not a spinning SM. The flag counts jobs, so one word serves
 * every job of a stream; the comparison is on serial numbers and survives
 * wrap-around.
 */
#include "device/kernels_cuda.h"
#include "device/launch_cuda.cuh"

#define DEV_WAIT_SLEEP_NS 2000

extern "C" __global__ void dev_k_wait_flag(volatile uint32_t *flag, uint32_t target)
{
    while ((int32_t)(*flag - target) < 0)
        __nanosleep(DEV_WAIT_SLEEP_NS);
    /* What the host wrote before the flag (the staged results it is about
     * to copy in) is ordered before this stream's next work. */
    __threadfence_system();
}

extern "C" ccl_result_t dev_cuda_load_wait_kernel(void)
{
    return dev_cuda_load((const void *)dev_k_wait_flag, "dev_k_wait_flag");
}

extern "C" ccl_result_t dev_cuda_wait_flag(volatile uint32_t *flag, uint32_t target, void *stream)
{
    dev_k_wait_flag<<<1, 1, 0, (cudaStream_t)stream>>>(flag, target);
    return dev_cuda_launched("dev_cuda_wait_flag");
}
