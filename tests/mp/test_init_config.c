/*
 * test_init_config.c - ccl_comm_init_rank_config and the nonblocking init
 * (ccl_config_t.blocking = 0), across forked ranks:
 *  - nonblocking: 4 ranks; rank 3 starts its init 300 ms late, so the
 *    others' comms cannot be ready before: for them init returns
 *    CCL_IN_PROGRESS with a comm, ccl_comm_get_async_error says
 *    CCL_IN_PROGRESS, count and rank answer, an allreduce is refused with
 *    CCL_ERR_INVALID_USAGE and changes nothing; once every rank polled
 *    CCL_SUCCESS, allreduces (odd count, in and out of place) match the
 *    serial reference, and destroy succeeds; once on one host, once on two
 *    fake hosts (CCL_HOSTID: the init thread also connects the network);
 *  - abort: rank 3 never calls init; ranks 0-2 abort their nonblocking
 *    init after 300 ms: abort returns within 1 s (the init's waits are
 *    cancelled, not timed out), the handle is gone afterwards, and no
 *    /dev/shm segment or mapping is left;
 *  - failed: rank 3 never calls init, CCL_TIMEOUT=3: the others' async
 *    error turns from CCL_IN_PROGRESS into CCL_ERR_TIMEOUT (or
 *    CCL_ERR_REMOTE, told by a rank that gave up first) with a message, a
 *    collective is CCL_ERR_INVALID_USAGE saying the init failed, and
 *    destroy frees it;
 *  - config: a config without CCL_CONFIG_INITIALIZER's magic or size, or
 *    with blocking = 2, is CCL_ERR_INVALID_ARGUMENT with *comm NULL; a NULL
 *    config and blocking = 1 init as ccl_comm_init_rank does; a 1-rank
 *    nonblocking init becomes ready and runs an allreduce.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_common.h"
#include "test_launch.h"
#include "test_res.h"

#define NRANKS 4
#define LATE_RANK 3
#define READY_BOUND_S 20.0 /* polls give up after this */
#define ABORT_BOUND_S 1.0
#define COUNT 1001

/* A nonblocking init, which must return CCL_IN_PROGRESS and a comm. */
static ccl_comm_t start_nonblocking(tst_ctx_t *ctx, const char *what)
{
    ccl_config_t config = CCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ccl_comm_t comm = NULL;
    tst_set_case(ctx, "%s", what);
    ccl_result_t rc = ccl_comm_init_rank_config(&comm, ctx->nranks, ctx->id, ctx->rank, &config);
    if (rc != CCL_IN_PROGRESS || !comm)
        tst_fatal(ctx, "%s returned %s with comm %p, expected CCL_IN_PROGRESS and a comm: %s", what,
                  ccl_get_error_string(rc), (void *)comm, ccl_get_last_error(NULL));
    return comm;
}

/* Polls until the async error is no longer CCL_IN_PROGRESS; returns it. */
static ccl_result_t poll_init(tst_ctx_t *ctx, ccl_comm_t comm)
{
    double t0 = tst_now();
    ccl_result_t async = CCL_IN_PROGRESS;
    while (async == CCL_IN_PROGRESS && tst_now() - t0 < READY_BOUND_S) {
        TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
        if (async == CCL_IN_PROGRESS)
            usleep(1000);
    }
    return async;
}

static void check_allreduce(tst_ctx_t *ctx, ccl_comm_t comm, int in_place)
{
    static float send[COUNT], recv[COUNT];
    for (int i = 0; i < COUNT; i++)
        send[i] = (float)((ctx->rank + 1) * (i % 7));
    memcpy(recv, send, sizeof recv);
    TST_CCL(ctx, comm, ccl_allreduce(send, in_place ? send : recv, COUNT, CCL_FLOAT32, CCL_SUM, comm, NULL));
    const float *out = in_place ? send : recv;
    float ranks_sum = (float)(ctx->nranks * (ctx->nranks + 1) / 2);
    for (int i = 0; i < COUNT; i++)
        if (out[i] != ranks_sum * (float)(i % 7)) {
            tst_fail(ctx, "allreduce (%s) element %d is %g, expected %g", in_place ? "in place" : "out of place", i,
                     (double)out[i], (double)(ranks_sum * (float)(i % 7)));
            return;
        }
}

static int nonblocking_body(tst_ctx_t *ctx, void *arg)
{
    /* With arg, ranks 0-1 and 2-3 are two fake hosts: the init also makes
     * net connections, in its thread. */
    if (arg)
        setenv("CCL_HOSTID", ctx->rank < ctx->nranks / 2 ? "init-config-node0" : "init-config-node1", 1);
    if (ctx->rank == LATE_RANK)
        usleep(300 * 1000);
    ccl_comm_t comm = start_nonblocking(ctx, "nonblocking ccl_comm_init_rank_config");
    ccl_result_t rc;
    if (ctx->rank != LATE_RANK) {
        /* Rank 3 has not started: nothing can be ready yet. */
        tst_set_case(ctx, "calls on a comm whose init runs");
        ccl_result_t async = CCL_SUCCESS;
        TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
        if (async != CCL_IN_PROGRESS)
            tst_fail(ctx, "async error before rank %d started is %s, expected CCL_IN_PROGRESS", LATE_RANK,
                     ccl_get_error_string(async));
        int n = -1, r = -1;
        TST_CCL(ctx, comm, ccl_comm_count(comm, &n));
        TST_CCL(ctx, comm, ccl_comm_user_rank(comm, &r));
        if (n != ctx->nranks || r != ctx->rank)
            tst_fail(ctx, "count %d / rank %d during init, expected %d / %d", n, r, ctx->nranks, ctx->rank);
        float buf[3] = {1, 2, 3};
        rc = ccl_allreduce(buf, buf, 3, CCL_FLOAT32, CCL_SUM, comm, NULL);
        if (rc != CCL_ERR_INVALID_USAGE || !strstr(ccl_get_last_error(comm), "not ready"))
            tst_fail(ctx, "allreduce during init returned %s (%s), expected CCL_ERR_INVALID_USAGE saying not ready",
                     ccl_get_error_string(rc), ccl_get_last_error(comm));
        if (buf[0] != 1 || buf[1] != 2 || buf[2] != 3)
            tst_fail(ctx, "the refused allreduce changed its buffer");
    }
    tst_set_case(ctx, "polling ccl_comm_get_async_error until ready");
    ccl_result_t async = poll_init(ctx, comm);
    if (async != CCL_SUCCESS)
        tst_fatal(ctx, "nonblocking init ended with %s: %s", ccl_get_error_string(async), ccl_get_last_error(comm));
    tst_set_case(ctx, "allreduce on the ready comm");
    check_allreduce(ctx, comm, 0);
    check_allreduce(ctx, comm, 1);
    tst_comm_destroy(ctx, comm);
    return 0;
}

static int abort_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    if (ctx->rank == LATE_RANK)
        return 0; /* never joins */
    ccl_comm_t comm = start_nonblocking(ctx, "nonblocking init that one rank never joins");
    ccl_result_t rc;
    usleep(300 * 1000);
    ccl_result_t async = CCL_SUCCESS;
    TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
    if (async != CCL_IN_PROGRESS)
        tst_fail(ctx, "async error with rank %d missing is %s, expected CCL_IN_PROGRESS", LATE_RANK,
                 ccl_get_error_string(async));
    tst_set_case(ctx, "ccl_comm_abort of the init");
    double t0 = tst_now();
    TST_CCL(ctx, comm, ccl_comm_abort(comm));
    double dt = tst_now() - t0;
    if (dt > ABORT_BOUND_S)
        tst_fail(ctx, "abort of a running init took %.2f s (bound %.1f s)", dt, ABORT_BOUND_S);
    rc = ccl_comm_get_async_error(comm, &async);
    if (rc != CCL_ERR_NULL_COMM)
        tst_fail(ctx, "the aborted comm still answers: %s", ccl_get_error_string(rc));
    char first[512];
    int own = tst_own_ccl_shm_maps(first, sizeof first);
    if (own > 0)
        tst_fail(ctx, "%d ccl shm mappings remain after the abort, e.g. %s", own, first);
    return 0;
}

static int failed_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    if (ctx->rank == LATE_RANK)
        return 0;
    ccl_comm_t comm = start_nonblocking(ctx, "nonblocking init that times out");
    ccl_result_t rc;
    ccl_result_t async = poll_init(ctx, comm);
    const char *msg = ccl_get_last_error(comm);
    /* Timed out, or (a rank that was slower to give up) told so by the
     * bootstrap root or a neighbour that gave up first. */
    if ((async != CCL_ERR_TIMEOUT && async != CCL_ERR_REMOTE) || !strstr(msg, "nonblocking init"))
        tst_fail(ctx, "init without rank %d ended with %s (%s), expected CCL_ERR_TIMEOUT or CCL_ERR_REMOTE from "
                 "the nonblocking init", LATE_RANK, ccl_get_error_string(async), msg);
    float buf[2] = {5, 6};
    rc = ccl_allreduce(buf, buf, 2, CCL_FLOAT32, CCL_SUM, comm, NULL);
    if (rc != CCL_ERR_INVALID_USAGE || !strstr(ccl_get_last_error(NULL), "init failed"))
        tst_fail(ctx, "allreduce on a failed init's comm returned %s (%s), expected CCL_ERR_INVALID_USAGE",
                 ccl_get_error_string(rc), ccl_get_last_error(NULL));
    tst_set_case(ctx, "destroy of a failed init's comm");
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
    if (ccl_comm_destroy(comm) != CCL_ERR_NULL_COMM)
        tst_fail(ctx, "a second destroy of the failed comm did not return CCL_ERR_NULL_COMM");
    return 0;
}

static void expect_refused(tst_ctx_t *ctx, const char *what, const ccl_config_t *config)
{
    ccl_comm_t comm = (ccl_comm_t)(uintptr_t)1; /* must come back NULL */
    ccl_unique_id_t id;
    memset(&id, 0, sizeof id);
    ccl_result_t rc = ccl_comm_init_rank_config(&comm, 1, id, 0, config);
    if (rc != CCL_ERR_INVALID_ARGUMENT || comm != NULL || !strstr(ccl_get_last_error(NULL), "config"))
        tst_fail(ctx, "%s: returned %s with comm %p (%s), expected CCL_ERR_INVALID_ARGUMENT and NULL", what,
                 ccl_get_error_string(rc), (void *)comm, ccl_get_last_error(NULL));
}

static int config_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_config_t bad = CCL_CONFIG_INITIALIZER;
    bad.magic = 0;
    expect_refused(ctx, "magic 0", &bad);
    bad = (ccl_config_t)CCL_CONFIG_INITIALIZER;
    bad.size = sizeof(size_t);
    expect_refused(ctx, "size too small", &bad);
    bad = (ccl_config_t)CCL_CONFIG_INITIALIZER;
    bad.blocking = 2;
    expect_refused(ctx, "blocking = 2", &bad);

    for (int k = 0; k < 3; k++) {
        ccl_unique_id_t id;
        TST_CCL(ctx, NULL, ccl_get_unique_id(&id));
        ccl_config_t config = CCL_CONFIG_INITIALIZER;
        config.blocking = k == 2 ? 0 : 1;
        ccl_comm_t comm = NULL;
        tst_set_case(ctx, "1-rank init, config %s", k == 0 ? "NULL" : k == 1 ? "blocking" : "nonblocking");
        ccl_result_t rc = ccl_comm_init_rank_config(&comm, 1, id, 0, k == 0 ? NULL : &config);
        if (rc != (k == 2 ? CCL_IN_PROGRESS : CCL_SUCCESS) || !comm)
            tst_fatal(ctx, "init returned %s: %s", ccl_get_error_string(rc), ccl_get_last_error(NULL));
        if (k == 2 && poll_init(ctx, comm) != CCL_SUCCESS)
            tst_fatal(ctx, "1-rank nonblocking init failed: %s", ccl_get_last_error(comm));
        check_allreduce(ctx, comm, 0);
        tst_comm_destroy(ctx, comm);
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* Bounds the failed scenario; the others never wait that long. */
    setenv("CCL_TIMEOUT", "3", 1);
    int failed = 0;
    /* First: ccl reads the CCL_* table once per process, and the ranks set
     * CCL_HOSTID before their first call, which only works while the
     * parent they fork from has not read it (it does after forking them). */
    if (tst_scenario_wanted(argc, argv, "net"))
        failed += tst_run_ranks("init_config: nonblocking, 2 fake hosts", NRANKS, 60, nonblocking_body, "net") != 0;
    if (tst_scenario_wanted(argc, argv, "config"))
        failed += tst_run_ranks("init_config: config", 1, 60, config_body, NULL) != 0;
    if (tst_scenario_wanted(argc, argv, "nonblocking"))
        failed += tst_run_ranks("init_config: nonblocking", NRANKS, 60, nonblocking_body, NULL) != 0;
    if (tst_scenario_wanted(argc, argv, "abort"))
        failed += tst_run_ranks_shm_clean("init_config: abort", NRANKS, 60, abort_body, NULL);
    if (tst_scenario_wanted(argc, argv, "failed"))
        failed += tst_run_ranks("init_config: failed", NRANKS, 60, failed_body, NULL) != 0;
    printf("test_init_config: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
