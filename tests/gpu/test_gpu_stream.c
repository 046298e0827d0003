/*
 * test_gpu_stream.c - what a CUDA stream promises for collectives on device
 * buffers (needs a GPU; tests/gpu/run.sh runs it, once per
 * CCL_CUDA_STREAM_WAIT mode):
 *
 *   async      the call returns while the stream is still blocked upstream,
 *              and the result appears once the stream runs;
 *   order      a premulsum scalar in device memory is read in stream order
 *              (a later write on the stream does not change this call);
 *   many       60 calls queued back to back on one stream (staging areas
 *              reused, the hold counter advancing), checked at the end;
 *   mixed      host send buffer, device receive buffer, on the stream;
 *   group      a send/recv ring in a group on the stream, and a barrier;
 *   refused    device buffers on a ccl host stream: CCL_ERR_INVALID_USAGE;
 *   blocking   device buffers with the NULL stream: done when it returns;
 *   init_all   two ranks in one process (ccl_comm_init_all), one thread,
 *              a CUDA stream each: queued calls of both ranks complete;
 *   deep       (2 and 3 ranks, 8 KiB P2P slices, in a process of its own
 *              run first) a staged alltoall, then a
 *              16 MiB allreduce over P2P, on one stream held upstream: the
 *              allreduce queues more work than CUDA's launch queue holds
 *              behind the alltoall's hold, so queueing blocks until the
 *              stream moves, which takes the alltoall's worker; it must not
 *              need anything the blocked call holds.
 */
#include "core/comm.h"
#include "exec/exec.h"
#include "device/cuda_rt.h"
#include "test_common.h"
#include "test_launch.h"

#include "gpu_test.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define COUNT 100003 /* odd: no whole number of vectors */

static void setup_device(tst_ctx_t *ctx) { gpu_rank_device(ctx); }

/* buf[i] = base + i (as float), on the device. */
static float *device_floats(tst_ctx_t *ctx, size_t n, float base, cudaStream_t s)
{
    float *h = malloc(n * sizeof *h), *d = NULL;
    for (size_t i = 0; i < n; i++)
        h[i] = base + (float)(i % 1000);
    GPU_RANK_OK(ctx, cudaMalloc((void **)&d, n * sizeof *d));
    GPU_RANK_OK(ctx, cudaMemcpyAsync(d, h, n * sizeof *d, cudaMemcpyHostToDevice, s));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    free(h);
    return d;
}

/* Counts elements of device buffer d that are not want(i). */
static size_t count_wrong(tst_ctx_t *ctx, const float *d, size_t n, float scale, float add)
{
    float *h = malloc(n * sizeof *h);
    GPU_RANK_OK(ctx, cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += h[i] != scale * (float)(i % 1000) + add;
    free(h);
    return bad;
}

/* Sum over ranks r of (r + i%1000) = n*(i%1000) + n(n-1)/2. */
static float rank_sum(int n) { return (float)(n * (n - 1) / 2); }

/* ---- a gate that holds a stream from the host ---------------------------------- */

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
} gate_t;

static void CUDART_CB gate_wait(void *arg)
{
    gate_t *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static void gate_open(gate_t *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* ---- cases on forked ranks ---------------------------------------------------------- */

static void case_async(tst_ctx_t *ctx, ccl_comm_t comm, cudaStream_t s)
{
    int n = ctx->nranks;
    float *buf = device_floats(ctx, COUNT, (float)ctx->rank, s);
    gate_t g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    GPU_RANK_OK(ctx, cudaLaunchHostFunc(s, gate_wait, &g));
    double t0 = tst_now();
    TST_CCL(ctx, comm, ccl_allreduce(buf, buf, COUNT, CCL_FLOAT32, CCL_SUM, comm, (ccl_stream_t)s));
    double took = tst_now() - t0;
    if (took > 0.5)
        tst_fail(ctx, "async: ccl_allreduce on a held stream took %.3f s to return", took);
    usleep(100 * 1000);
    if (cudaStreamQuery(s) != cudaErrorNotReady)
        tst_fail(ctx, "async: the stream finished while still held upstream");
    if (count_wrong(ctx, buf, COUNT, 1.0f, (float)ctx->rank) != 0)
        tst_fail(ctx, "async: the buffer changed before the stream reached the call");
    gate_open(&g);
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    size_t bad = count_wrong(ctx, buf, COUNT, (float)n, rank_sum(n));
    if (bad)
        tst_fail(ctx, "async: %zu wrong elements after the stream ran", bad);
    cudaFree(buf);
}

static void case_order(tst_ctx_t *ctx, ccl_comm_t comm, cudaStream_t s)
{
    int n = ctx->nranks;
    float *buf = device_floats(ctx, COUNT, (float)ctx->rank, s), *scalar = NULL;
    float two = 2.0f, five = 5.0f;
    GPU_RANK_OK(ctx, cudaMalloc((void **)&scalar, sizeof *scalar));
    GPU_RANK_OK(ctx, cudaMemcpy(scalar, &five, sizeof five, cudaMemcpyHostToDevice));
    ccl_redop_t op;
    TST_CCL(ctx, comm, ccl_redop_create_premulsum(&op, scalar, CCL_FLOAT32, CCL_SCALAR_DEVICE, comm));
    /* On the stream: scalar = 2, the call, scalar = 5. The call sees 2. */
    GPU_RANK_OK(ctx, cudaMemcpyAsync(scalar, &two, sizeof two, cudaMemcpyHostToDevice, s));
    TST_CCL(ctx, comm, ccl_allreduce(buf, buf, COUNT, CCL_FLOAT32, op, comm, (ccl_stream_t)s));
    GPU_RANK_OK(ctx, cudaMemcpyAsync(scalar, &five, sizeof five, cudaMemcpyHostToDevice, s));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    size_t bad = count_wrong(ctx, buf, COUNT, 2.0f * (float)n, 2.0f * rank_sum(n));
    if (bad)
        tst_fail(ctx, "order: %zu wrong elements (premulsum with a device scalar read out of stream order?)", bad);
    TST_CCL(ctx, comm, ccl_redop_destroy(op, comm));
    cudaFree(scalar);
    cudaFree(buf);
}

static void case_many(tst_ctx_t *ctx, ccl_comm_t comm, cudaStream_t s)
{
    enum { CALLS = 60 };
    int n = ctx->nranks;
    float *bufs[CALLS];
    for (int i = 0; i < CALLS; i++)
        bufs[i] = device_floats(ctx, COUNT / 10 + (size_t)i, (float)ctx->rank, s);
    for (int i = 0; i < CALLS; i++) {
        size_t cnt = COUNT / 10 + (size_t)i;
        if (i % 3 == 2) /* every third call a broadcast from a rotating root */
            TST_CCL(ctx, comm, ccl_broadcast(bufs[i], bufs[i], cnt, CCL_FLOAT32, i % n, comm, (ccl_stream_t)s));
        else
            TST_CCL(ctx, comm, ccl_allreduce(bufs[i], bufs[i], cnt, CCL_FLOAT32, CCL_SUM, comm, (ccl_stream_t)s));
    }
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    for (int i = 0; i < CALLS; i++) {
        size_t cnt = COUNT / 10 + (size_t)i;
        size_t bad = i % 3 == 2 ? count_wrong(ctx, bufs[i], cnt, 1.0f, (float)(i % n))
                                : count_wrong(ctx, bufs[i], cnt, (float)n, rank_sum(n));
        if (bad)
            tst_fail(ctx, "many: call %d: %zu wrong elements", i, bad);
        cudaFree(bufs[i]);
    }
}

static void case_mixed(tst_ctx_t *ctx, ccl_comm_t comm, cudaStream_t s)
{
    int n = ctx->nranks;
    float *host = malloc(COUNT * sizeof *host), *dev = NULL;
    for (size_t i = 0; i < COUNT; i++)
        host[i] = (float)ctx->rank + (float)(i % 1000);
    GPU_RANK_OK(ctx, cudaMalloc((void **)&dev, (size_t)n * COUNT * sizeof *dev));
    TST_CCL(ctx, comm, ccl_allgather(host, dev, COUNT, CCL_FLOAT32, comm, (ccl_stream_t)s));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    for (int r = 0; r < n; r++) {
        size_t bad = count_wrong(ctx, dev + (size_t)r * COUNT, COUNT, 1.0f, (float)r);
        if (bad)
            tst_fail(ctx, "mixed: block %d: %zu wrong elements", r, bad);
    }
    free(host);
    cudaFree(dev);
}

static void case_group(tst_ctx_t *ctx, ccl_comm_t comm, cudaStream_t s)
{
    int n = ctx->nranks, next = (ctx->rank + 1) % n, prev = (ctx->rank + n - 1) % n;
    float *send = device_floats(ctx, COUNT, (float)ctx->rank, s), *recv = NULL;
    GPU_RANK_OK(ctx, cudaMalloc((void **)&recv, COUNT * sizeof *recv));
    TST_CCL(ctx, comm, ccl_group_start());
    TST_CCL(ctx, comm, ccl_send(send, COUNT, CCL_FLOAT32, next, comm, (ccl_stream_t)s));
    TST_CCL(ctx, comm, ccl_recv(recv, COUNT, CCL_FLOAT32, prev, comm, (ccl_stream_t)s));
    TST_CCL(ctx, comm, ccl_group_end());
    TST_CCL(ctx, comm, ccl_barrier(comm, (ccl_stream_t)s));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    size_t bad = count_wrong(ctx, recv, COUNT, 1.0f, (float)prev);
    if (bad)
        tst_fail(ctx, "group: %zu wrong elements received from rank %d", bad, prev);
    cudaFree(send);
    cudaFree(recv);
}

static void case_refused(tst_ctx_t *ctx, ccl_comm_t comm, cudaStream_t s)
{
    float *buf = device_floats(ctx, 16, 0.0f, s);
    ccl_stream_t hs;
    TST_CCL(ctx, comm, ccl_stream_create(&hs));
    ccl_result_t rc = ccl_allreduce(buf, buf, 16, CCL_FLOAT32, CCL_SUM, comm, hs);
    if (rc != CCL_ERR_INVALID_USAGE || !strstr(ccl_get_last_error(comm), "device buffers on a ccl host stream"))
        tst_fail(ctx, "refused: device buffers on a host stream gave %s: %s", ccl_get_error_string(rc),
                 ccl_get_last_error(comm));
    TST_CCL(ctx, comm, ccl_stream_destroy(hs));
    cudaFree(buf);
}

static void case_blocking(tst_ctx_t *ctx, ccl_comm_t comm, cudaStream_t s)
{
    int n = ctx->nranks;
    float *buf = device_floats(ctx, COUNT, (float)ctx->rank, s);
    TST_CCL(ctx, comm, ccl_allreduce(buf, buf, COUNT, CCL_FLOAT32, CCL_SUM, comm, NULL));
    size_t bad = count_wrong(ctx, buf, COUNT, (float)n, rank_sum(n));
    if (bad)
        tst_fail(ctx, "blocking: %zu wrong elements when the call returned", bad);
    cudaFree(buf);
}

static int stream_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    setup_device(ctx);
    cudaStream_t s;
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ccl_comm_t comm = tst_comm_init(ctx);
    static const struct {
        const char *name;
        void (*fn)(tst_ctx_t *, ccl_comm_t, cudaStream_t);
    } cases[] = {{"async", case_async},   {"order", case_order}, {"many", case_many},
                 {"mixed", case_mixed},   {"group", case_group}, {"refused", case_refused},
                 {"blocking", case_blocking}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tst_set_case(ctx, "%s", cases[i].name);
        cases[i].fn(ctx, comm, s);
        tst_barrier(ctx);
    }
    tst_comm_destroy(ctx, comm);
    cudaStreamDestroy(s);
    return 0;
}

/* ---- deep: a P2P call queued behind a staged one ------------------------------------ */

#define DEEP_A2A 1000                  /* floats per peer */
#define DEEP_COUNT ((size_t)4 << 20)   /* 16 MiB of floats: ~2000 slices of 8 KiB on 2 ranks */

static void *deep_opener(void *arg)
{
    usleep(300 * 1000); /* long enough for the allreduce to fill the stream's queue */
    gate_open(arg);
    return NULL;
}

static int deep_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    int n = ctx->nranks;
    setup_device(ctx);
    cudaStream_t s;
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ccl_comm_t comm = tst_comm_init(ctx);
    tst_set_case(ctx, "deep");
    float *send = device_floats(ctx, (size_t)n * DEEP_A2A, (float)ctx->rank, s), *recv = NULL;
    float *big = device_floats(ctx, DEEP_COUNT, (float)ctx->rank, s);
    GPU_RANK_OK(ctx, cudaMalloc((void **)&recv, (size_t)n * DEEP_A2A * sizeof *recv));
    gate_t g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    GPU_RANK_OK(ctx, cudaLaunchHostFunc(s, gate_wait, &g));
    pthread_t opener;
    if (pthread_create(&opener, NULL, deep_opener, &g) != 0)
        tst_fatal(ctx, "deep: pthread_create failed");
    unsigned long before = atomic_load(&exec_device_calls);
    TST_CCL(ctx, comm, ccl_alltoall(send, recv, DEEP_A2A, CCL_FLOAT32, comm, (ccl_stream_t)s));
    unsigned long staged = atomic_load(&exec_device_calls) - before;
    TST_CCL(ctx, comm, ccl_allreduce(big, big, DEEP_COUNT, CCL_FLOAT32, CCL_SUM, comm, (ccl_stream_t)s));
    unsigned long p2p = atomic_load(&exec_device_calls) - before - staged;
    pthread_join(opener, NULL);
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    if (staged != 0 || p2p != 1)
        tst_fail(ctx, "deep: the alltoall must stage and the allreduce go over P2P (device executor calls "
                 "+%lu, +%lu): the case tests nothing", staged, p2p);
    /* recv[j][i] is rank j's send[rank][i] = j + (rank * DEEP_A2A + i) % 1000. */
    float *h = malloc((size_t)n * DEEP_A2A * sizeof *h);
    GPU_RANK_OK(ctx, cudaMemcpy(h, recv, (size_t)n * DEEP_A2A * sizeof *h, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < DEEP_A2A; i++)
            bad += h[(size_t)j * DEEP_A2A + i] != (float)j + (float)((ctx->rank * DEEP_A2A + i) % 1000);
    free(h);
    if (bad)
        tst_fail(ctx, "deep: %zu wrong alltoall elements", bad);
    if ((bad = count_wrong(ctx, big, DEEP_COUNT, (float)n, rank_sum(n))) != 0)
        tst_fail(ctx, "deep: %zu wrong allreduce elements", bad);
    tst_comm_destroy(ctx, comm);
    cudaFree(send);
    cudaFree(recv);
    cudaFree(big);
    cudaStreamDestroy(s);
    return 0;
}

/* Two ranks in this process, one thread: their queued calls must not wait
 * for each other's workers. */
static int init_all_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    enum { N = 2 };
    setup_device(ctx);
    ccl_comm_t comms[N];
    cudaStream_t s[N];
    float *buf[N];
    TST_CCL(ctx, NULL, ccl_comm_init_all(comms, N, NULL));
    for (int r = 0; r < N; r++) {
        GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
        buf[r] = device_floats(ctx, COUNT, (float)r, s[r]);
    }
    for (int r = 0; r < N; r++)
        TST_CCL(ctx, comms[r], ccl_allreduce(buf[r], buf[r], COUNT, CCL_FLOAT32, CCL_SUM, comms[r],
                                             (ccl_stream_t)s[r]));
    for (int r = 0; r < N; r++) {
        GPU_RANK_OK(ctx, cudaStreamSynchronize(s[r]));
        size_t bad = count_wrong(ctx, buf[r], COUNT, (float)N, rank_sum(N));
        if (bad)
            tst_fail(ctx, "init_all: rank %d: %zu wrong elements", r, bad);
    }
    /* Rank 0 queues a small and then a large call before rank 1 queues
     * its own; the large one finds a free staging area that is too small.
     * Replacing it must not wait for the device (cudaFreeHost does): rank
     * 0's stream is held for a call that needs rank 1's, not queued yet.
     * Round 0 gives each stream two areas, round 1 is the case. */
    enum { BIG = (3 << 20) / (int)sizeof(float) }; /* past the 2 MiB an area starts with */
    float *big[N];
    for (int r = 0; r < N; r++)
        big[r] = device_floats(ctx, BIG, (float)r, s[r]);
    for (int round = 0; round < 2; round++) {
        for (int r = 0; r < N; r++) {
            TST_CCL(ctx, comms[r], ccl_allreduce(buf[r], buf[r], COUNT, CCL_FLOAT32, CCL_SUM, comms[r],
                                                 (ccl_stream_t)s[r]));
            if (round == 0)
                TST_CCL(ctx, comms[r], ccl_allreduce(buf[r], buf[r], COUNT, CCL_FLOAT32, CCL_SUM, comms[r],
                                                     (ccl_stream_t)s[r]));
            else
                TST_CCL(ctx, comms[r], ccl_allreduce(big[r], big[r], BIG, CCL_FLOAT32, CCL_SUM, comms[r],
                                                     (ccl_stream_t)s[r]));
        }
        for (int r = 0; r < N; r++)
            GPU_RANK_OK(ctx, cudaStreamSynchronize(s[r]));
    }
    for (int r = 0; r < N; r++) {
        /* buf: three more sums of two equal buffers; big: one sum. */
        size_t bad = count_wrong(ctx, buf[r], COUNT, 16.0f, 8.0f * rank_sum(N)) +
                     count_wrong(ctx, big[r], BIG, (float)N, rank_sum(N));
        if (bad)
            tst_fail(ctx, "init_all: rank %d: %zu wrong elements after a small and a large call queued", r, bad);
    }
    for (int r = 0; r < N; r++) {
        TST_CCL(ctx, comms[r], ccl_comm_destroy(comms[r]));
        cudaFree(buf[r]);
        cudaFree(big[r]);
        cudaStreamDestroy(s[r]);
    }
    return 0;
}

/* argv: rank counts (default 1 to 3). */
int main(int argc, char **argv)
{
    /* No CUDA call before the ranks are forked. */
    int failed = 0, counts[TST_MAX_RANKS], ncounts = 0;
    for (int i = 1; i < argc && ncounts < TST_MAX_RANKS; i++) {
        int n = atoi(argv[i]);
        if (n < 1 || n > TST_MAX_RANKS) {
            fprintf(stderr, "usage: %s [rank count 1..%d ...]\n", argv[0], TST_MAX_RANKS);
            return 2;
        }
        counts[ncounts++] = n;
    }
    for (int n = 1; ncounts == 0 && n <= 3; n++)
        counts[n - 1] = n;
    if (ncounts == 0)
        ncounts = 3;
    /* deep first, in a child with small P2P slots: ccl reads its parameters
     * once per process, so the setting must come before any ccl call. */
    pid_t deep = fork();
    if (deep < 0) {
        perror("fork");
        return 1;
    }
    if (deep == 0) {
        int deep_failed = 0;
        setenv("CCL_P2P_BUFFSIZE", "64K", 1);
        for (int i = 0; i < ncounts; i++)
            if (counts[i] >= 2)
                deep_failed += tst_run_ranks("gpu_stream_deep", counts[i], tst_timeout(120), deep_body, NULL) != 0;
        _exit(deep_failed ? 1 : 0);
    }
    int status = 0;
    if (waitpid(deep, &status, 0) != deep || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        failed++;
    for (int i = 0; i < ncounts; i++)
        failed += tst_run_ranks("gpu_stream", counts[i], tst_timeout(120), stream_body, NULL) != 0;
    failed += tst_run_ranks("gpu_stream_init_all", 1, tst_timeout(60), init_all_body, NULL) != 0;
    printf("test_gpu_stream: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
