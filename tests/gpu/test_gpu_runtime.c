/*
 * test_gpu_runtime.c - the CUDA runtime behaviour that ccl's device path
 * and its P2P transport build on, checked on two forked processes: on a
 * GPU it says what CUDA does, against the mock (tests/mock_cuda) that the
 * mock does the same.
 *
 *   ipc        device memory exported with cudaIpcGetMemHandle (from an
 *              interior pointer) and opened by the peer: the allocation's
 *              base comes back, the same address when opened twice;
 *              cuMemGetAddressRange gives base and size; stream copies
 *              from and into the peer's buffer are seen by both sides
 *   memops     a shared host segment registered (cudaHostRegister) in both
 *              processes: one stream waits on a word of it
 *              (cuStreamWaitValue32) before copying from it, the peer
 *              releases it with cuStreamWriteValue32 from its own stream
 *   ipc_event  an interprocess event recorded behind a held stream in one
 *              process, waited for (cudaStreamWaitEvent) in the other
 *   legacy     the legacy default stream waits for a blocking stream's
 *              work, and not for a non-blocking stream's
 *
 * No CUDA call happens before the fork (CUDA does not survive one); the
 * handles go through a shared anonymous mapping made before it.
 */
#include "device/cuda_rt.h"
#include "test_common.h"
#include "test_launch.h"

#include "gpu_test.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BUF_BYTES ((size_t)1 << 20)
#define INNER 4096 /* the exported pointer's offset into its allocation */

typedef CUresult (*wait_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*write_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);

/* Shared by the two processes (mapped before the fork). */
typedef struct {
    cudaIpcMemHandle_t mem[2];
    cudaIpcEventHandle_t event;
    volatile uint32_t go, ack; /* memops: registered in both processes */
    unsigned char data[BUF_BYTES];
} shared_t;

static shared_t *sh;
static wait_fn wait_value;
static write_fn write_value;
static range_fn address_range;

static void *entry(tst_ctx_t *ctx, const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    GPU_RANK_OK(ctx, cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !fn)
        tst_fatal(ctx, "the driver has no %s", name);
    return fn;
}

static void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

/* Host-side wait for a word with a deadline (the peer's stream writes it). */
static int host_wait(volatile uint32_t *w, uint32_t v, double limit_s)
{
    double t0 = tst_now();
    while (__atomic_load_n(w, __ATOMIC_ACQUIRE) != v)
        if (tst_now() - t0 > limit_s)
            return 0;
        else
            sleep_ms(1);
    return 1;
}

static size_t count_not(const unsigned char *p, size_t n, unsigned char v)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += p[i] != v;
    return bad;
}

static void case_ipc(tst_ctx_t *ctx, cudaStream_t s)
{
    int me = ctx->rank, peer = 1 - me;
    unsigned char *mine = NULL, *theirs = NULL, *again = NULL, *host = malloc(BUF_BYTES);
    GPU_RANK_OK(ctx, cudaMalloc((void **)&mine, BUF_BYTES));
    GPU_RANK_OK(ctx, cudaMemsetAsync(mine, 0x10 + me, BUF_BYTES, s));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    GPU_RANK_OK(ctx, cudaIpcGetMemHandle(&sh->mem[me], mine + INNER));
    CUdeviceptr base = 0;
    size_t size = 0;
    if (address_range(&base, &size, (CUdeviceptr)(uintptr_t)(mine + INNER)) != CUDA_SUCCESS ||
        base != (CUdeviceptr)(uintptr_t)mine || size < BUF_BYTES)
        tst_fail(ctx, "ipc: cuMemGetAddressRange of an interior pointer: base %p size %zu, want %p and >= %zu",
                 (void *)(uintptr_t)base, size, (void *)mine, BUF_BYTES);
    tst_barrier(ctx);
    GPU_RANK_OK(ctx, cudaIpcOpenMemHandle((void **)&theirs, sh->mem[peer], cudaIpcMemLazyEnablePeerAccess));
    GPU_RANK_OK(ctx, cudaIpcOpenMemHandle((void **)&again, sh->mem[peer], cudaIpcMemLazyEnablePeerAccess));
    if (again != theirs)
        tst_fail(ctx, "ipc: one handle opened twice gave %p and %p", (void *)theirs, (void *)again);
    struct cudaPointerAttributes at;
    GPU_RANK_OK(ctx, cudaPointerGetAttributes(&at, theirs + 100));
    if (at.type != cudaMemoryTypeDevice)
        tst_fail(ctx, "ipc: an opened peer buffer is memory type %d, not device", (int)at.type);
    /* The peer's buffer, whole (from its base, not from the exported
     * interior pointer), into a local one and back to the host. */
    unsigned char *copy = NULL;
    GPU_RANK_OK(ctx, cudaMalloc((void **)&copy, BUF_BYTES));
    GPU_RANK_OK(ctx, cudaMemcpyAsync(copy, theirs, BUF_BYTES, cudaMemcpyDefault, s));
    GPU_RANK_OK(ctx, cudaMemcpyAsync(host, copy, BUF_BYTES, cudaMemcpyDefault, s));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    size_t bad = count_not(host, BUF_BYTES, (unsigned char)(0x10 + peer));
    if (bad)
        tst_fail(ctx, "ipc: %zu bytes of the peer's buffer read wrong", bad);
    tst_barrier(ctx);
    /* Each writes the second half of the peer's buffer. */
    GPU_RANK_OK(ctx, cudaMemsetAsync(copy, 0x20 + me, BUF_BYTES / 2, s));
    GPU_RANK_OK(ctx, cudaMemcpyAsync(theirs + BUF_BYTES / 2, copy, BUF_BYTES / 2, cudaMemcpyDeviceToDevice, s));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    tst_barrier(ctx);
    GPU_RANK_OK(ctx, cudaMemcpy(host, mine, BUF_BYTES, cudaMemcpyDeviceToHost));
    bad = count_not(host, BUF_BYTES / 2, (unsigned char)(0x10 + me)) +
          count_not(host + BUF_BYTES / 2, BUF_BYTES / 2, (unsigned char)(0x20 + peer));
    if (bad)
        tst_fail(ctx, "ipc: %zu bytes of my buffer wrong after the peer wrote its second half", bad);
    GPU_RANK_OK(ctx, cudaIpcCloseMemHandle(again));
    GPU_RANK_OK(ctx, cudaIpcCloseMemHandle(theirs));
    tst_barrier(ctx); /* nobody frees what the other still has open */
    GPU_RANK_OK(ctx, cudaFree(copy));
    GPU_RANK_OK(ctx, cudaFree(mine));
    free(host);
}

static void case_memops(tst_ctx_t *ctx, cudaStream_t s)
{
    GPU_RANK_OK(ctx, cudaHostRegister(sh, sizeof *sh, cudaHostRegisterMapped | cudaHostRegisterPortable));
    void *dgo = NULL, *dack = NULL;
    GPU_RANK_OK(ctx, cudaHostGetDevicePointer(&dgo, (void *)&sh->go, 0));
    GPU_RANK_OK(ctx, cudaHostGetDevicePointer(&dack, (void *)&sh->ack, 0));
    if (ctx->rank == 0) {
        unsigned char *dev = NULL, *host = malloc(BUF_BYTES);
        GPU_RANK_OK(ctx, cudaMalloc((void **)&dev, BUF_BYTES));
        if (wait_value((CUstream)s, (CUdeviceptr)(uintptr_t)dgo, 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS)
            tst_fatal(ctx, "memops: cuStreamWaitValue32 on registered shared memory failed");
        GPU_RANK_OK(ctx, cudaMemcpyAsync(dev, sh->data, BUF_BYTES, cudaMemcpyHostToDevice, s));
        if (write_value((CUstream)s, (CUdeviceptr)(uintptr_t)dack, 1, 0) != CUDA_SUCCESS)
            tst_fatal(ctx, "memops: cuStreamWriteValue32 failed");
        sleep_ms(50);
        if (cudaStreamQuery(s) != cudaErrorNotReady)
            tst_fail(ctx, "memops: the stream went past cuStreamWaitValue32 before the word was written");
        tst_barrier(ctx); /* the peer fills data, then releases the word from its stream */
        GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
        GPU_RANK_OK(ctx, cudaMemcpy(host, dev, BUF_BYTES, cudaMemcpyDeviceToHost));
        size_t bad = count_not(host, BUF_BYTES, 0x5a);
        if (bad)
            tst_fail(ctx, "memops: %zu bytes copied out of the shared segment are wrong", bad);
        GPU_RANK_OK(ctx, cudaFree(dev));
        free(host);
    } else {
        tst_barrier(ctx);
        memset(sh->data, 0x5a, BUF_BYTES);
        if (write_value((CUstream)s, (CUdeviceptr)(uintptr_t)dgo, 1, 0) != CUDA_SUCCESS)
            tst_fatal(ctx, "memops: cuStreamWriteValue32 failed");
        GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
        if (!host_wait(&sh->ack, 1, 10))
            tst_fail(ctx, "memops: the peer's stream never wrote the acknowledgement");
    }
    tst_barrier(ctx);
    GPU_RANK_OK(ctx, cudaHostUnregister(sh));
}

static void case_ipc_event(tst_ctx_t *ctx, cudaStream_t s)
{
    volatile uint32_t *flag = NULL;
    cudaEvent_t ev;
    GPU_RANK_OK(ctx, cudaHostAlloc((void **)&flag, sizeof *flag, cudaHostAllocMapped));
    *flag = 0;
    if (ctx->rank == 0) {
        GPU_RANK_OK(ctx, cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
        GPU_RANK_OK(ctx, cudaIpcGetEventHandle(&sh->event, ev));
        if (dev_stream_hold(flag, 1, s, 0) != CCL_SUCCESS)
            tst_fatal(ctx, "ipc_event: holding the stream failed");
        GPU_RANK_OK(ctx, cudaEventRecord(ev, s));
        tst_barrier(ctx); /* the peer waits for the event behind the hold */
        tst_barrier(ctx); /* the peer saw it pending */
        __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
        GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
        tst_barrier(ctx);
    } else {
        unsigned char *dev = NULL;
        unsigned char byte = 0;
        GPU_RANK_OK(ctx, cudaMalloc((void **)&dev, 1));
        GPU_RANK_OK(ctx, cudaMemsetAsync(dev, 0, 1, s));
        tst_barrier(ctx);
        GPU_RANK_OK(ctx, cudaIpcOpenEventHandle(&ev, sh->event));
        GPU_RANK_OK(ctx, cudaStreamWaitEvent(s, ev, 0));
        GPU_RANK_OK(ctx, cudaMemsetAsync(dev, 7, 1, s));
        sleep_ms(50);
        if (cudaEventQuery(ev) != cudaErrorNotReady || cudaStreamQuery(s) != cudaErrorNotReady)
            tst_fail(ctx, "ipc_event: the event or the stream waiting for it finished while the peer was held");
        cudaGetLastError();
        tst_barrier(ctx);
        GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
        GPU_RANK_OK(ctx, cudaMemcpy(&byte, dev, 1, cudaMemcpyDeviceToHost));
        if (byte != 7 || cudaEventQuery(ev) != cudaSuccess)
            tst_fail(ctx, "ipc_event: after the peer's release: byte %d (want 7), event %s", byte,
                     cudaGetErrorName(cudaEventQuery(ev)));
        tst_barrier(ctx);
        GPU_RANK_OK(ctx, cudaFree(dev));
    }
    GPU_RANK_OK(ctx, cudaEventDestroy(ev));
    GPU_RANK_OK(ctx, cudaFreeHost((void *)flag));
}

static void case_legacy(tst_ctx_t *ctx, cudaStream_t nonblocking)
{
    volatile uint32_t *flag = NULL;
    unsigned char *dev = NULL;
    cudaStream_t blocking;
    GPU_RANK_OK(ctx, cudaStreamCreate(&blocking));
    GPU_RANK_OK(ctx, cudaHostAlloc((void **)&flag, sizeof *flag, cudaHostAllocMapped));
    GPU_RANK_OK(ctx, cudaMalloc((void **)&dev, 64));
    for (int nb = 0; nb < 2; nb++) {
        cudaStream_t s = nb ? nonblocking : blocking;
        *flag = 0;
        if (dev_stream_hold(flag, 1, s, 0) != CCL_SUCCESS)
            tst_fatal(ctx, "legacy: holding the stream failed");
        GPU_RANK_OK(ctx, cudaMemsetAsync(dev, 1, 64, NULL));
        sleep_ms(30);
        cudaError_t q = cudaStreamQuery(NULL);
        if (nb == 0 && q != cudaErrorNotReady)
            tst_fail(ctx, "legacy: the NULL stream ran ahead of a held blocking stream");
        if (nb == 1 && q != cudaSuccess)
            tst_fail(ctx, "legacy: the NULL stream waited for a non-blocking stream (%s)", cudaGetErrorName(q));
        __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
        GPU_RANK_OK(ctx, cudaDeviceSynchronize());
    }
    GPU_RANK_OK(ctx, cudaFree(dev));
    GPU_RANK_OK(ctx, cudaFreeHost((void *)flag));
    GPU_RANK_OK(ctx, cudaStreamDestroy(blocking));
}

static int runtime_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    const char *why = NULL;
    if (!dev_cuda_usable(&why))
        tst_fatal(ctx, "no GPU: %s", why);
    GPU_RANK_OK(ctx, cudaSetDevice(0));
    wait_value = (wait_fn)entry(ctx, "cuStreamWaitValue32");
    write_value = (write_fn)entry(ctx, "cuStreamWriteValue32");
    address_range = (range_fn)entry(ctx, "cuMemGetAddressRange");
    cudaStream_t s;
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    static const struct {
        const char *name;
        void (*fn)(tst_ctx_t *, cudaStream_t);
    } cases[] = {{"ipc", case_ipc}, {"memops", case_memops}, {"ipc_event", case_ipc_event}, {"legacy", case_legacy}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tst_set_case(ctx, "%s", cases[i].name);
        cases[i].fn(ctx, s);
        tst_barrier(ctx);
    }
    GPU_RANK_OK(ctx, cudaStreamDestroy(s));
    return 0;
}

int main(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    int failed = tst_run_ranks("gpu_runtime", 2, tst_timeout(60), runtime_body, NULL) != 0;
    printf("test_gpu_runtime: %s\n", failed ? "FAILED" : "passed");
    return failed;
}
