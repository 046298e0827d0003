/*
 * test_gpu_p2p.c - the P2P path's life cycle and ordering (needs a GPU or
 * the mock GPU; the data sweep over collectives, dtypes and ops is
 * test_gpu_colls --p2p). Ranks are forked processes sharing the GPUs.
 *
 *   order     calls of one comm on two streams, the first one held back by
 *             a long copy ahead of it: the second must still run after it
 *             (the connections' positions are handed out in call order)
 *   destroy   calls queued, then ccl_comm_destroy at once: destroy waits
 *             for the GPU, the results are right
 *   mixed     staged calls (alltoall) queued before the first P2P call: the
 *             P2P setup must not wait on their workers, nor they on it
 *   abort     rank 0 queues an allreduce no other rank makes: its stream
 *             waits on its peers; ccl_comm_abort lets it go (bounded)
 *   disagree  CCL_P2P_DISABLE=1 on rank 1 only: every rank agrees on off,
 *             the calls stage and are right
 *   peer_exit the last rank dies (SIGKILL) once P2P is up; the others then
 *             queue an allreduce on a stream (peer_exit) or make a
 *             blocking one (peer_exit_blocking): the stream must be let go
 *             and the error, naming the dead rank, must reach
 *             ccl_comm_get_async_error or the blocking call, within seconds
 * Every case asserts which path ran with the device executor's counter.
 */
#include "core/comm.h"
#include "exec/exec.h"
#include "device/cuda_rt.h"
#include "test_common.h"
#include "test_launch.h"

#include "gpu_test.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COUNT 300007 /* odd, and several slices of the default slot */

static int32_t input(int rank, size_t i, int salt) { return (int32_t)((i % 977) * (rank + 1) + salt * 7 + rank); }

/* A device buffer holding input(rank, i, salt). */
static int32_t *device_input(tst_ctx_t *ctx, int salt)
{
    int32_t *h = malloc(COUNT * sizeof *h), *d = NULL;
    if (!h)
        tst_fatal(ctx, "out of memory");
    for (size_t i = 0; i < COUNT; i++)
        h[i] = input(ctx->rank, i, salt);
    GPU_RANK_OK(ctx, cudaMalloc((void **)&d, COUNT * sizeof *d));
    GPU_RANK_OK(ctx, cudaMemcpy(d, h, COUNT * sizeof *d, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* Checks d against the allreduce sum of input(., i, salt) over `n` ranks. */
static void check_sum(tst_ctx_t *ctx, const int32_t *d, int salt, const char *what)
{
    int32_t *h = malloc(COUNT * sizeof *h);
    if (!h)
        tst_fatal(ctx, "out of memory");
    GPU_RANK_OK(ctx, cudaMemcpy(h, d, COUNT * sizeof *h, cudaMemcpyDeviceToHost));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < COUNT; i++) {
        int32_t want = 0;
        for (int r = 0; r < ctx->nranks; r++)
            want += input(r, i, salt);
        if (h[i] != want && !bad++)
            first = i;
    }
    if (bad)
        tst_fail(ctx, "%s: %zu wrong elements, first [%zu] = %d", what, bad, first, h[first]);
    free(h);
}

static void expect_p2p(tst_ctx_t *ctx, unsigned long want, const char *what)
{
    unsigned long got = atomic_load(&exec_device_calls);
    if (got != want)
        tst_fail(ctx, "%s: %lu calls ran on the device executor, expected %lu", what, got, want);
}

static int order_body(tst_ctx_t *ctx, void *arg)
{
    gpu_rank_device(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    cudaStream_t a, b;
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    int32_t *x = device_input(ctx, 1), *y = device_input(ctx, 2);
    size_t big = (size_t)64 << 20;
    char *s1 = NULL, *s2 = NULL;
    GPU_RANK_OK(ctx, cudaMalloc((void **)&s1, big));
    GPU_RANK_OK(ctx, cudaMalloc((void **)&s2, big));
    for (int rep = 0; rep < 3; rep++) {
        /* Stream a is busy for a while before its call; b is idle. */
        GPU_RANK_OK(ctx, cudaMemcpyAsync(s2, s1, big, cudaMemcpyDeviceToDevice, a));
        TST_CCL(ctx, comm, ccl_allreduce(x, x, COUNT, CCL_INT32, CCL_SUM, comm, (ccl_stream_t)a));
        TST_CCL(ctx, comm, ccl_allreduce(y, y, COUNT, CCL_INT32, CCL_SUM, comm, (ccl_stream_t)b));
        GPU_RANK_OK(ctx, cudaStreamSynchronize(a));
        GPU_RANK_OK(ctx, cudaStreamSynchronize(b));
        check_sum(ctx, x, 1, "order: the call on the busy stream");
        check_sum(ctx, y, 2, "order: the call on the idle stream");
        cudaFree(x);
        cudaFree(y);
        x = device_input(ctx, 1);
        y = device_input(ctx, 2);
        tst_barrier(ctx);
    }
    expect_p2p(ctx, 6, "order");
    tst_comm_destroy(ctx, comm);
    cudaFree(x);
    cudaFree(y);
    cudaFree(s1);
    cudaFree(s2);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    return 0;
}

static int destroy_body(tst_ctx_t *ctx, void *arg)
{
    enum { N = 6 };
    gpu_rank_device(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    cudaStream_t s;
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int32_t *buf[N];
    for (int k = 0; k < N; k++)
        buf[k] = device_input(ctx, k);
    for (int k = 0; k < N; k++)
        TST_CCL(ctx, comm, ccl_allreduce(buf[k], buf[k], COUNT, CCL_INT32, CCL_SUM, comm, (ccl_stream_t)s));
    /* No synchronisation: destroy must wait for the GPU before it frees
     * the slots the queued calls use. */
    TST_CCL(ctx, NULL, ccl_comm_destroy(comm));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    for (int k = 0; k < N; k++) {
        check_sum(ctx, buf[k], k, "destroy");
        cudaFree(buf[k]);
    }
    expect_p2p(ctx, N, "destroy");
    cudaStreamDestroy(s);
    return 0;
}

static int mixed_body(tst_ctx_t *ctx, void *arg)
{
    enum { K = 3 };
    gpu_rank_device(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    cudaStream_t s;
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int32_t *x = device_input(ctx, 4), *a2a[K], *out[K];
    size_t block = COUNT / (size_t)ctx->nranks;
    for (int k = 0; k < K; k++) {
        a2a[k] = device_input(ctx, k);
        GPU_RANK_OK(ctx, cudaMalloc((void **)&out[k], COUNT * sizeof(int32_t)));
        TST_CCL(ctx, comm, ccl_alltoall(a2a[k], out[k], block, CCL_INT32, comm, (ccl_stream_t)s));
    }
    TST_CCL(ctx, comm, ccl_allreduce(x, x, COUNT, CCL_INT32, CCL_SUM, comm, (ccl_stream_t)s));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
    check_sum(ctx, x, 4, "mixed: the P2P call after staged ones");
    /* Block j of the result is rank j's block `rank` of its input. */
    int32_t *h = malloc(COUNT * sizeof *h);
    if (!h)
        tst_fatal(ctx, "out of memory");
    for (int k = 0; k < K; k++) {
        GPU_RANK_OK(ctx, cudaMemcpy(h, out[k], block * (size_t)ctx->nranks * sizeof *h, cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (int j = 0; j < ctx->nranks; j++)
            for (size_t i = 0; i < block; i++)
                bad += h[(size_t)j * block + i] != input(j, (size_t)ctx->rank * block + i, k);
        if (bad)
            tst_fail(ctx, "mixed: staged alltoall %d: %zu wrong elements", k, bad);
        cudaFree(a2a[k]);
        cudaFree(out[k]);
    }
    free(h);
    expect_p2p(ctx, 1, "mixed");
    tst_comm_destroy(ctx, comm);
    cudaFree(x);
    cudaStreamDestroy(s);
    return 0;
}

/* A comm, a stream and a device buffer (input salt), after one checked
 * allreduce on every rank: P2P is up. Ends with a barrier. */
static ccl_comm_t p2p_up(tst_ctx_t *ctx, cudaStream_t *s, int32_t **x, int salt, const char *what)
{
    gpu_rank_device(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
    *x = device_input(ctx, salt);
    TST_CCL(ctx, comm, ccl_allreduce(*x, *x, COUNT, CCL_INT32, CCL_SUM, comm, (ccl_stream_t)*s));
    GPU_RANK_OK(ctx, cudaStreamSynchronize(*s));
    check_sum(ctx, *x, salt, what);
    tst_barrier(ctx);
    return comm;
}

static int abort_body(tst_ctx_t *ctx, void *arg)
{
    cudaStream_t s;
    int32_t *x;
    ccl_comm_t comm = p2p_up(ctx, &s, &x, 3, "abort: the first call");
    if (ctx->rank == 0) {
        TST_CCL(ctx, comm, ccl_allreduce(x, x, COUNT, CCL_INT32, CCL_SUM, comm, (ccl_stream_t)s));
        usleep(300 * 1000);
        if (cudaStreamQuery(s) != cudaErrorNotReady)
            tst_fail(ctx, "abort: a call no peer joined has finished");
        cudaGetLastError();
        double t0 = tst_now();
        TST_CCL(ctx, NULL, ccl_comm_abort(comm));
        GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
        double t = tst_now() - t0;
        if (t > 10.0)
            tst_fail(ctx, "abort: the stream took %.1f s to be let go", t);
        printf("  abort: the waiting stream was let go %.3f s after ccl_comm_abort\n", t);
    }
    tst_barrier(ctx);
    if (ctx->rank != 0)
        TST_CCL(ctx, NULL, ccl_comm_abort(comm));
    expect_p2p(ctx, ctx->rank == 0 ? 2 : 1, "abort");
    cudaFree(x);
    cudaStreamDestroy(s);
    return 0;
}

static int peer_exit_body(tst_ctx_t *ctx, void *arg)
{
    int blocking = arg != NULL;
    int dead = ctx->nranks - 1;
    cudaStream_t s;
    int32_t *x;
    ccl_comm_t comm = p2p_up(ctx, &s, &x, 5, "peer_exit: the first call");
    if (ctx->rank == dead)
        tst_sigkill_self(ctx);
    double t0 = tst_now();
    ccl_result_t res, async = CCL_SUCCESS;
    if (blocking) {
        res = ccl_allreduce(x, x, COUNT, CCL_INT32, CCL_SUM, comm, NULL);
    } else {
        res = ccl_allreduce(x, x, COUNT, CCL_INT32, CCL_SUM, comm, (ccl_stream_t)s);
        GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
        TST_CCL(ctx, NULL, ccl_comm_get_async_error(comm, &async));
    }
    double t = tst_now() - t0;
    ccl_result_t got = blocking ? res : async;
    const char *msg = ccl_get_last_error(comm);
    char name[32];
    snprintf(name, sizeof name, "rank %d", dead);
    if (!blocking && res != CCL_SUCCESS)
        tst_fail(ctx, "peer_exit: queueing the call failed (%d: %s); the peer was alive then", (int)res, msg);
    if (got != CCL_ERR_REMOTE || !strstr(msg, name))
        tst_fail(ctx, "peer_exit%s: got %d (%s), expected CCL_ERR_REMOTE naming %s", blocking ? "_blocking" : "",
                 (int)got, msg, name);
    if (t > 10.0)
        tst_fail(ctx, "peer_exit: the failure took %.1f s to surface", t);
    if (ctx->rank == 0)
        printf("  peer_exit%s: %s reported %.3f s after the call: %s\n", blocking ? "_blocking" : "",
               blocking ? "the blocking call" : "ccl_comm_get_async_error", t, msg);
    expect_p2p(ctx, 2, "peer_exit");
    TST_CCL(ctx, NULL, ccl_comm_abort(comm));
    cudaFree(x);
    cudaStreamDestroy(s);
    return 0;
}

static int disagree_body(tst_ctx_t *ctx, void *arg)
{
    if (ctx->rank == 1)
        setenv("CCL_P2P_DISABLE", "1", 1); /* before ccl reads its parameters */
    else
        unsetenv("CCL_P2P_DISABLE");
    gpu_rank_device(ctx);
    ccl_comm_t comm = tst_comm_init(ctx);
    cudaStream_t s;
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int k = 0; k < 3; k++) {
        int32_t *x = device_input(ctx, k);
        TST_CCL(ctx, comm, ccl_allreduce(x, x, COUNT, CCL_INT32, CCL_SUM, comm, (ccl_stream_t)s));
        GPU_RANK_OK(ctx, cudaStreamSynchronize(s));
        check_sum(ctx, x, k, "disagree");
        cudaFree(x);
    }
    expect_p2p(ctx, 0, "disagree (CCL_P2P_DISABLE=1 on rank 1)");
    tst_comm_destroy(ctx, comm);
    cudaStreamDestroy(s);
    return 0;
}

int main(int argc, char **argv)
{
    /* No CUDA call before the ranks are forked. */
    static const struct {
        const char *name;
        tst_rank_fn fn;
        int nranks[3];
    } cases[] = {/* First: the launcher reads ccl's parameters in this process
                  * once it has forked the first ranks, and later ranks
                  * inherit them; only the first ranks can still differ. */
                 {"gpu_p2p_disagree", disagree_body, {3, 0, 0}},
                 {"gpu_p2p_order", order_body, {1, 2, 4}},
                 {"gpu_p2p_destroy", destroy_body, {1, 3, 5}},
                 {"gpu_p2p_mixed", mixed_body, {2, 3, 0}},
                 {"gpu_p2p_abort", abort_body, {2, 3, 0}},
                 {"gpu_p2p_peer_exit", peer_exit_body, {2, 3, 0}}};
    unsetenv("CCL_P2P_DISABLE");
    int failed = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int i = 0; i < 3 && cases[c].nranks[i]; i++)
            failed += tst_run_ranks(cases[c].name, cases[c].nranks[i], tst_timeout(120), cases[c].fn, NULL) != 0;
    /* The blocking variant: arg non-NULL. */
    static int blocking = 1;
    failed += tst_run_ranks("gpu_p2p_peer_exit_blocking", 3, tst_timeout(120), peer_exit_body, &blocking) != 0;
    printf("test_gpu_p2p: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
