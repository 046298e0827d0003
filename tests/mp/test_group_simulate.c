/*
 * test_group_simulate.c - ccl_group_simulate_end, on 2 and 3 forked ranks:
 * it ends the group, runs nothing (the receive buffer keeps its sentinel,
 * and a later ccl_group_end finds no group), and reports the tuner's
 * modelled time: positive, growing with the size, additive over the calls
 * of one comm (a lone call no more than its share), the same on every rank, also for a send/recv ring. A bad
 * info struct is refused with the group left open (its ccl_group_end then
 * runs the queued allreduce, checked); an inner end of a nested group only
 * closes that level. After all of it, real calls still run (a simulated
 * group left nothing pending: destroy would hang otherwise).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_common.h"
#include "test_launch.h"

#define BIG (16u << 20) /* floats: 64 MiB */
#define SENTINEL -7.0f

static float *sendbuf, *recvbuf;

/* The modelled time of one group of n allreduces of count floats. */
static float simulate_allreduces(tst_ctx_t *ctx, ccl_comm_t comm, size_t count, int n)
{
    ccl_sim_info_t info = CCL_SIM_INFO_INITIALIZER;
    TST_CCL(ctx, comm, ccl_group_start());
    for (int i = 0; i < n; i++)
        TST_CCL(ctx, comm, ccl_allreduce(sendbuf, recvbuf, count, CCL_FLOAT32, CCL_SUM, comm, NULL));
    TST_CCL(ctx, comm, ccl_group_simulate_end(&info));
    return info.estimated_time_us;
}

static void check_same_on_all(tst_ctx_t *ctx, ccl_comm_t comm, float v, const char *what)
{
    float lo[1] = {v}, hi[1] = {v};
    TST_CCL(ctx, comm, ccl_allreduce(lo, lo, 1, CCL_FLOAT32, CCL_MIN, comm, NULL));
    TST_CCL(ctx, comm, ccl_allreduce(hi, hi, 1, CCL_FLOAT32, CCL_MAX, comm, NULL));
    if (lo[0] != hi[0])
        tst_fail(ctx, "%s: ranks' estimates differ (%g to %g us)", what, (double)lo[0], (double)hi[0]);
}

static int simulate_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    sendbuf = malloc(BIG * sizeof *sendbuf);
    recvbuf = malloc(BIG * sizeof *recvbuf);
    for (size_t i = 0; i < BIG; i++) {
        sendbuf[i] = (float)(ctx->rank + 1);
        recvbuf[i] = SENTINEL;
    }

    tst_set_case(ctx, "simulated allreduces of 8 B, 1 MiB, 64 MiB");
    float t8 = simulate_allreduces(ctx, comm, 2, 1);
    float t1m = simulate_allreduces(ctx, comm, 1u << 18, 1);
    float t64m = simulate_allreduces(ctx, comm, BIG, 1);
    if (!(t8 > 0 && t1m > t8 && t64m > t1m) || !isfinite(t64m))
        tst_fail(ctx, "estimates not positive and growing with size: 8 B %g us, 1 MiB %g, 64 MiB %g", (double)t8,
                 (double)t1m, (double)t64m);
    if (ctx->rank == 0)
        printf("  %d ranks, modelled allreduce: 8 B %.1f us, 1 MiB %.1f us, 64 MiB %.1f us\n", ctx->nranks,
               (double)t8, (double)t1m, (double)t64m);
    for (size_t i = 0; i < BIG; i += 4093)
        if (recvbuf[i] != SENTINEL) {
            tst_fail(ctx, "a simulated group wrote the receive buffer (element %zu is %g)", i, (double)recvbuf[i]);
            break;
        }
    ccl_result_t rc = ccl_group_end();
    if (rc != CCL_ERR_GROUP)
        tst_fail(ctx, "ccl_group_end after ccl_group_simulate_end returned %s, expected CCL_ERR_GROUP (no group)",
                 ccl_get_error_string(rc));
    check_same_on_all(ctx, comm, t1m, "1 MiB allreduce");

    /* Grouped calls add up; a lone call may take a path a group cannot
     * (the fused 2-rank allreduce, ALGO_PAIR), so it costs no more than
     * its share of a group. */
    tst_set_case(ctx, "three 4 MiB allreduces in one group against two, and one alone");
    float one = simulate_allreduces(ctx, comm, 1u << 20, 1), two = simulate_allreduces(ctx, comm, 1u << 20, 2),
          three = simulate_allreduces(ctx, comm, 1u << 20, 3);
    if (fabsf(2 * three - 3 * two) > 1e-3f * three)
        tst_fail(ctx, "three calls model %g us, two %g: not additive", (double)three, (double)two);
    if (!(one > 0) || one > two / 2 * 1.001f)
        tst_fail(ctx, "one call alone models %g us, more than half of two grouped (%g)", (double)one, (double)two);

    tst_set_case(ctx, "a send/recv ring, simulated");
    {
        ccl_sim_info_t info = CCL_SIM_INFO_INITIALIZER;
        int next = (ctx->rank + 1) % ctx->nranks, prev = (ctx->rank + ctx->nranks - 1) % ctx->nranks;
        TST_CCL(ctx, comm, ccl_group_start());
        TST_CCL(ctx, comm, ccl_send(sendbuf, 4096, CCL_FLOAT32, next, comm, NULL));
        TST_CCL(ctx, comm, ccl_recv(recvbuf, 4096, CCL_FLOAT32, prev, comm, NULL));
        TST_CCL(ctx, comm, ccl_group_simulate_end(&info));
        if (!(info.estimated_time_us > 0) || !isfinite(info.estimated_time_us))
            tst_fail(ctx, "send/recv ring estimate is %g us", (double)info.estimated_time_us);
        check_same_on_all(ctx, comm, info.estimated_time_us, "send/recv ring");
    }

    tst_set_case(ctx, "nested groups: the inner simulate end reports nothing");
    {
        ccl_sim_info_t inner = CCL_SIM_INFO_INITIALIZER, outer = CCL_SIM_INFO_INITIALIZER;
        TST_CCL(ctx, comm, ccl_group_start());
        TST_CCL(ctx, comm, ccl_group_start());
        TST_CCL(ctx, comm, ccl_allreduce(sendbuf, recvbuf, 1u << 18, CCL_FLOAT32, CCL_SUM, comm, NULL));
        TST_CCL(ctx, comm, ccl_group_simulate_end(&inner));
        TST_CCL(ctx, comm, ccl_group_simulate_end(&outer));
        if (inner.estimated_time_us != 0 || outer.estimated_time_us != t1m)
            tst_fail(ctx, "nested: inner %g us (expected 0), outer %g (expected %g, the 1 MiB estimate)",
                     (double)inner.estimated_time_us, (double)outer.estimated_time_us, (double)t1m);
    }

    tst_set_case(ctx, "a bad info struct leaves the group open; ccl_group_end runs it");
    {
        ccl_sim_info_t bad = CCL_SIM_INFO_INITIALIZER;
        bad.magic = 0;
        size_t count = 100003;
        TST_CCL(ctx, comm, ccl_group_start());
        TST_CCL(ctx, comm, ccl_allreduce(sendbuf, recvbuf, count, CCL_FLOAT32, CCL_SUM, comm, NULL));
        rc = ccl_group_simulate_end(&bad);
        if (rc != CCL_ERR_INVALID_ARGUMENT)
            tst_fail(ctx, "simulate end with magic 0 returned %s", ccl_get_error_string(rc));
        rc = ccl_group_simulate_end(NULL);
        if (rc != CCL_ERR_INVALID_ARGUMENT)
            tst_fail(ctx, "simulate end with NULL returned %s", ccl_get_error_string(rc));
        TST_CCL(ctx, comm, ccl_group_end());
        float want = (float)(ctx->nranks * (ctx->nranks + 1) / 2);
        for (size_t i = 0; i < count; i++)
            if (recvbuf[i] != want) {
                tst_fail(ctx, "the group's allreduce gave %g at %zu, expected %g", (double)recvbuf[i], i,
                         (double)want);
                break;
            }
    }
    tst_comm_destroy(ctx, comm);
    free(sendbuf);
    free(recvbuf);
    return 0;
}

int main(void)
{
    int failed = 0;
    for (int n = 2; n <= 3; n++)
        failed += tst_run_ranks("group_simulate", n, 120, simulate_body, NULL) != 0;
    printf("test_group_simulate: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
