/*
 * nccl_ref.c - NCCL's figures on the same GPU, for tests/gpu/run.sh's
 * table (built only where NCCL is installed beside CUDA; needs a GPU).
 *
 * One rank (ncclCommInitAll on device 0): allreduce of SIZE bytes of
 * float32 out of place, which on one rank is NCCL's device copy; its algbw
 * sits next to ccl's kernel figures. Then it asks NCCL for 4 ranks on that
 * one GPU, which NCCL refuses (one rank per GPU), and prints why, so the
 * table can say what there is no NCCL figure for.
 *
 * Output: "bench nccl-allreduce-1rank <bytes> <ms> <algbw GB/s>" and
 * "# nccl: ..." lines.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define ITERS 20

int main(int argc, char **argv)
{
    size_t size = (argc > 1 ? (size_t)atol(argv[1]) : 1024) << 20;
    int version = 0, dev0[4] = {0, 0, 0, 0};
    ncclComm_t comm, four[4];
    void *send, *recv;
    cudaStream_t s;
    cudaEvent_t t0, t1;
    float ms = 0;
    ncclGetVersion(&version);
    printf("# nccl: version %d.%d.%d\n", version / 10000, version / 100 % 100, version % 100);
    if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&s) != cudaSuccess ||
        cudaMalloc(&send, size) != cudaSuccess || cudaMalloc(&recv, size) != cudaSuccess) {
        printf("# nccl: no GPU memory for %zu MiB\n", size >> 20);
        return 1;
    }
    cudaMemset(send, 0, size);
    ncclResult_t r = ncclCommInitAll(&comm, 1, dev0);
    if (r != ncclSuccess) {
        printf("# nccl: ncclCommInitAll(1 rank): %s\n", ncclGetErrorString(r));
        return 1;
    }
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    for (int i = 0; i < 3; i++)
        ncclAllReduce(send, recv, size / 4, ncclFloat32, ncclSum, comm, s);
    cudaEventRecord(t0, s);
    for (int i = 0; i < ITERS; i++)
        ncclAllReduce(send, recv, size / 4, ncclFloat32, ncclSum, comm, s);
    cudaEventRecord(t1, s);
    cudaEventSynchronize(t1);
    cudaEventElapsedTime(&ms, t0, t1);
    double per = ms / ITERS;
    printf("bench nccl-allreduce-1rank %zu %.3f %.1f\n", size, per, (double)size / (per * 1e-3) / 1e9);
    ncclCommDestroy(comm);

    r = ncclCommInitAll(four, 4, dev0);
    if (r == ncclSuccess) {
        printf("# nccl: 4 ranks on one GPU accepted\n");
        for (int i = 0; i < 4; i++)
            ncclCommDestroy(four[i]);
    } else {
        printf("# nccl: 4 ranks on one GPU: %s (%s)\n", ncclGetErrorString(r), ncclGetLastError(NULL));
    }
    cudaFree(send);
    cudaFree(recv);
    return 0;
}
