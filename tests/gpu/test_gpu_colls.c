/*
 * test_gpu_colls.c - every collective on device buffers, checked against
 * the host reference (needs a GPU; tests/gpu/run.sh runs it).
 *
 * The sweep of tests/mp/test_colls (tests/common/test_coll.c: every
 * collective x dtype x op with premulsum, counts 0..1021 and one of 65537,
 * in place on all or on even ranks only, misaligned buffers, NULL for
 * buffers a rank does not use, roots 0 / last / middle), with each case's
 * host buffers mirrored into device memory, guard bytes included: the case
 * is prepared on the host, copied to the GPU, run there with the device
 * pointers, copied back whole and verified on the host, so results, guard
 * bytes and inputs that must stay untouched are all checked.
 *
 * Ranks are forked processes sharing the GPUs (rank r on device r mod
 * count), 1 to 8 of them by default (argv: rank counts). Calls go on each
 * rank's CUDA stream, up to BATCH of them queued before the rank waits
 * (the staged path's pipelining), except that one case in three per rank
 * is a blocking call (NULL stream) after the stream drained; ranks choose
 * differently, so blocking and queued calls meet in one collective.
 *
 * Where P2P is on (the default), allreduce, allgather, reduce-scatter,
 * broadcast and reduce run on the device executor and the rest staged,
 * mixed on one stream. Two modes look at the P2P path alone, on those
 * collectives only, with small P2P slots (CCL_P2P_BUFFSIZE=64K: 8 KiB
 * slices, so the big count runs many slices per step and the FIFOs wrap):
 *   --p2p     every call with a count must have gone through the device
 *             executor (its counter moves by one; premulsum calls may
 *             stage, when their scalar lives in device memory);
 *   --staged  CCL_P2P_DISABLE=1: none may, and the results are the same.
 */
#include "core/comm.h"
#include "exec/exec.h"
#include "device/cuda_rt.h"
#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"

#include "gpu_test.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 4

enum { MODE_ALL, MODE_P2P, MODE_STAGED };
static int gpu_mode = MODE_ALL;

/* The collectives the device executor runs. */
static int p2p_coll(tst_coll_t c)
{
    return c == TST_ALLREDUCE || c == TST_ALLGATHER || c == TST_REDUCE_SCATTER || c == TST_BROADCAST ||
           c == TST_BCAST || c == TST_REDUCE;
}
#define SLOT_BYTES ((size_t)16 << 20) /* device room per buffer of a case */

typedef struct {
    tst_case_t c;
    tst_bufs_t b;
    unsigned char *dsend, *drecv; /* this slot's device mirrors */
    char what[200];
} gpu_case_t;

typedef struct {
    tst_ctx_t *ctx;
    ccl_comm_t comm;
    cudaStream_t stream;
    gpu_case_t q[BATCH];
    int nq;
    long checked;
    long p2p_calls; /* of them, run by the device executor */
} gpu_rank_t;

/* Where a host pointer of the case lies in the device mirrors. */
static void *to_device(const gpu_case_t *g, const void *p)
{
    const unsigned char *h = p;
    const tst_gbuf_t *s = &g->b.send, *r = &g->b.recv;
    if (!p)
        return NULL;
    if (s->base && h >= s->base && h < s->base + s->total)
        return g->dsend + (h - s->base);
    if (r->base && h >= r->base && h < r->base + r->total)
        return g->drecv + (h - r->base);
    return (void *)p; /* not a case buffer: leave it (never happens) */
}

static void copy_mirror(gpu_rank_t *R, unsigned char *dev, const tst_gbuf_t *g, int to_device_side)
{
    if (!g->base)
        return;
    if (g->total > SLOT_BYTES)
        tst_fatal(R->ctx, "case buffer of %zu bytes exceeds the %zu-byte device slot", g->total, SLOT_BYTES);
    if (to_device_side)
        GPU_RANK_OK(R->ctx, cudaMemcpyAsync(dev, g->base, g->total, cudaMemcpyHostToDevice, R->stream));
    else
        GPU_RANK_OK(R->ctx, cudaMemcpyAsync(g->base, dev, g->total, cudaMemcpyDeviceToHost, R->stream));
}

/* Copies every queued case back, waits, verifies, releases. */
static void drain(gpu_rank_t *R)
{
    char msg[600];
    for (int i = 0; i < R->nq; i++) {
        copy_mirror(R, R->q[i].dsend, &R->q[i].b.send, 0);
        copy_mirror(R, R->q[i].drecv, &R->q[i].b.recv, 0);
    }
    GPU_RANK_OK(R->ctx, cudaStreamSynchronize(R->stream));
    for (int i = 0; i < R->nq; i++) {
        gpu_case_t *g = &R->q[i];
        if (tst_case_verify(&g->c, R->ctx->rank, R->ctx->nranks, &g->b, msg, sizeof msg))
            tst_fail(R->ctx, "%s", msg);
        R->checked++;
        tst_case_release(&g->b);
    }
    R->nq = 0;
}

static void run_case(gpu_rank_t *R, const tst_case_t *c, int blocking)
{
    if (blocking || R->nq == BATCH)
        drain(R); /* a blocking call comes after the stream's calls, as on every rank */
    gpu_case_t *g = &R->q[R->nq];
    g->c = *c;
    tst_case_str(c, R->ctx->nranks, g->what, sizeof g->what);
    tst_set_case(R->ctx, "%s%s", g->what, blocking ? " (NULL stream)" : " (CUDA stream)");
    tst_case_prepare(c, R->ctx->rank, R->ctx->nranks, &g->b, 0);
    copy_mirror(R, g->dsend, &g->b.send, 1);
    copy_mirror(R, g->drecv, &g->b.recv, 1);
    if (blocking)
        GPU_RANK_OK(R->ctx, cudaStreamSynchronize(R->stream));
    /* Issue with the device pointers; the scalar of a premulsum operator
     * stays in host memory (read when the call runs). */
    void *hs = g->b.sendp, *hr = g->b.recvp;
    g->b.sendp = to_device(g, hs);
    g->b.recvp = to_device(g, hr);
    unsigned long before = atomic_load(&exec_device_calls);
    ccl_result_t rc = tst_case_issue(c, &g->b, R->comm, blocking ? NULL : (ccl_stream_t)R->stream);
    unsigned long ran = atomic_load(&exec_device_calls) - before;
    g->b.sendp = hs;
    g->b.recvp = hr;
    if (rc != CCL_SUCCESS)
        tst_fatal(R->ctx, "%s returned %d (%s): %s", g->what, (int)rc, ccl_get_error_string(rc),
                  ccl_get_last_error(R->comm));
    R->p2p_calls += (long)ran;
    if (gpu_mode == MODE_P2P && c->count && c->op != TST_OP_PREMULSUM && ran != 1)
        tst_fail(R->ctx, "%s: did not run over P2P (device executor calls +%lu)", g->what, ran);
    if ((gpu_mode == MODE_STAGED || !p2p_coll(c->coll)) && ran != 0)
        tst_fail(R->ctx, "%s: ran over P2P (device executor calls +%lu)%s", g->what, ran,
                 gpu_mode == MODE_STAGED ? " with CCL_P2P_DISABLE=1" : "");
    R->nq++;
    if (blocking)
        drain(R);
}

static int gpu_colls_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    static const size_t counts[] = {0, 1, 7, 1021};
    const int ncounts = (int)(sizeof counts / sizeof counts[0]);
    int n = ctx->nranks;
    gpu_rank_device(ctx);
    gpu_rank_t R = {.ctx = ctx};
    GPU_RANK_OK(ctx, cudaStreamCreateWithFlags(&R.stream, cudaStreamNonBlocking));
    for (int i = 0; i < BATCH; i++) {
        GPU_RANK_OK(ctx, cudaMalloc((void **)&R.q[i].dsend, SLOT_BYTES));
        GPU_RANK_OK(ctx, cudaMalloc((void **)&R.q[i].drecv, SLOT_BYTES));
    }
    R.comm = tst_comm_init(ctx);
    int roots[3] = {0, n - 1, n / 2}, nroots = n == 1 ? 1 : n == 2 ? 2 : 3;
    uint64_t seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    int k = 0;
    for (int coll = 0; coll < TST_NUM_COLLS; coll++) {
        if (gpu_mode != MODE_ALL && !p2p_coll((tst_coll_t)coll))
            continue;
        int nops = tst_coll_reduces((tst_coll_t)coll) ? tst_num_ops : 1;
        for (int d = 0; d < tst_num_dtypes; d++) {
            size_t esz = tst_dtype_size(tst_dtypes[d]);
            for (int o = 0; o < nops; o++) {
                /* Every (coll, dtype, op) once per placement with a count
                 * that cycles, and the big count for one op per dtype. */
                int big = o == d % nops;
                for (int inplace = 0; inplace < (tst_coll_has_inplace((tst_coll_t)coll) ? 2 : 1); inplace++) {
                    for (int c = 0; c < 1 + big; c++, k++) {
                        tst_case_t tc = {
                            .coll = (tst_coll_t)coll,
                            .dt = tst_dtypes[d],
                            .op = tst_coll_reduces((tst_coll_t)coll) ? tst_ops[o] : TST_OP_COPY,
                            .count = c ? TST_SWEEP_BIG_COUNT : counts[(d + o + inplace) % ncounts],
                            .inplace = inplace && (k & 8) ? TST_INPLACE_MIXED : inplace,
                            .misalign = (k & 2) ? esz : 0,
                            .seed = tst_case_seed(seed, (uint64_t)n, (uint64_t)coll * 16 + (uint64_t)d,
                                                  (uint64_t)o, (uint64_t)c * 2 + (uint64_t)inplace),
                            .root = roots[(d + o + c + inplace) % nroots],
                            .null_unused = (k >> 2) & 1,
                        };
                        run_case(&R, &tc, (k + ctx->rank) % (gpu_mode == MODE_ALL ? 3 : 5) == 0);
                    }
                }
            }
        }
    }
    drain(&R);
    tst_comm_destroy(ctx, R.comm);
    for (int i = 0; i < BATCH; i++) {
        cudaFree(R.q[i].dsend);
        cudaFree(R.q[i].drecv);
    }
    cudaStreamDestroy(R.stream);
    if (ctx->rank == 0)
        printf("  %d ranks: %ld cases checked on rank 0, %ld of them over P2P\n", n, R.checked, R.p2p_calls);
    if (gpu_mode == MODE_ALL && !getenv("CCL_P2P_DISABLE") && R.p2p_calls == 0)
        tst_fail(ctx, "no call went over P2P");
    return 0;
}

int main(int argc, char **argv)
{
    /* No CUDA call here: the ranks are forked, and CUDA does not survive a
     * fork of a process that initialised it. */
    static const int defaults[] = {1, 2, 3, 4, 5, 6, 7, 8};
    int first = 1;
    if (argc > 1 && (strcmp(argv[1], "--p2p") == 0 || strcmp(argv[1], "--staged") == 0)) {
        gpu_mode = strcmp(argv[1], "--p2p") == 0 ? MODE_P2P : MODE_STAGED;
        first = 2;
        setenv("CCL_P2P_BUFFSIZE", "64K", 1);
        if (gpu_mode == MODE_STAGED)
            setenv("CCL_P2P_DISABLE", "1", 1);
        else
            unsetenv("CCL_P2P_DISABLE");
    }
    int nlist = argc > first ? argc - first : (int)(sizeof defaults / sizeof defaults[0]);
    int failed = 0;
    for (int i = 0; i < nlist; i++) {
        int n = argc > first ? atoi(argv[i + first]) : defaults[i];
        failed += tst_run_ranks("gpu_colls", n, tst_timeout(120), gpu_colls_body, NULL) != 0;
    }
    printf("test_gpu_colls: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
