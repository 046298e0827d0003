/*
 * test_finalize.c - ccl_comm_finalize, across forked ranks (3: an odd
 * count):
 *  - blocking: each rank queues allreduces (odd count) on a ccl stream and
 *    finalizes without synchronizing it; rank 0 comes 300 ms late. When
 *    finalize returns, the results must be right on this rank without a
 *    stream synchronize, and not before the late rank came (>= 250 ms on
 *    the others). After it: collectives are CCL_ERR_INVALID_USAGE saying
 *    "finalized" and change nothing, a second finalize too; count, rank and
 *    the async error (CCL_SUCCESS) answer; destroy succeeds, a second one is
 *    CCL_ERR_NULL_COMM. Before it, a finalize inside a group that holds a
 *    call on the comm is CCL_ERR_GROUP and changes nothing;
 *  - nonblocking: a comm from ccl_config_t.blocking = 0 on two fake hosts
 *    (the barrier crosses the net transport): finalize returns
 *    CCL_IN_PROGRESS; while the late rank is missing the async error stays
 *    CCL_IN_PROGRESS, then turns CCL_SUCCESS; calls meanwhile are refused;
 *  - abort: nonblocking, rank 2 never finalizes: ranks 0-1 abort their
 *    finalize after 300 ms, the abort returns within 1 s and the handle is
 *    gone; no /dev/shm entry is left;
 *  - gone: rank 2 destroys its comm without finalizing and exits; the
 *    others' blocking finalize fails within CCL_TIMEOUT (not a hang) with
 *    an error naming rank 2, and destroy then frees the comm.
 * argv[1], if given, runs one scenario (blocking, nonblocking, abort, gone).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_common.h"
#include "test_launch.h"
#include "test_res.h"

#define NRANKS 3
#define LATE_MS 300
#define COUNT 100003 /* prime */
#define NCALLS 4
#define POLL_BOUND_S 20.0
#define ABORT_BOUND_S 1.0
#define GONE_BOUND_S 4.0 /* CCL_TIMEOUT is 3 */

static float send_buf[NCALLS][COUNT], recv_buf[NCALLS][COUNT];

static float input(int rank, int call, int i)
{
    return (float)((rank + 1) * ((i + call) % 13));
}

static void check_results(tst_ctx_t *ctx)
{
    float ranks_sum = (float)(ctx->nranks * (ctx->nranks + 1) / 2);
    for (int c = 0; c < NCALLS; c++) {
        /* Odd calls ran in place. */
        const float *out = c % 2 ? send_buf[c] : recv_buf[c];
        for (int i = 0; i < COUNT; i++) {
            float want = ranks_sum * (float)((i + c) % 13);
            if (out[i] != want) {
                tst_fail(ctx, "allreduce %d element %d is %g after finalize, expected %g", c, i, (double)out[i],
                         (double)want);
                break;
            }
        }
    }
}

/* The queued calls finalize must wait for. */
static void queue_allreduces(tst_ctx_t *ctx, ccl_comm_t comm, ccl_stream_t stream)
{
    for (int c = 0; c < NCALLS; c++) {
        for (int i = 0; i < COUNT; i++)
            send_buf[c][i] = input(ctx->rank, c, i);
        memset(recv_buf[c], 0xff, sizeof recv_buf[c]);
        TST_CCL(ctx, comm,
                ccl_allreduce(send_buf[c], c % 2 ? send_buf[c] : recv_buf[c], COUNT, CCL_FLOAT32, CCL_SUM, comm,
                              stream));
    }
}

/* Everything a finalized comm must refuse, and what it must still answer;
 * `done` is the async state expected (CCL_SUCCESS after a finished one). */
static void check_finalized(tst_ctx_t *ctx, ccl_comm_t comm, ccl_result_t done)
{
    float buf[3] = {1, 2, 3};
    ccl_result_t rc = ccl_allreduce(buf, buf, 3, CCL_FLOAT32, CCL_SUM, comm, NULL);
    if (rc != CCL_ERR_INVALID_USAGE || !strstr(ccl_get_last_error(NULL), "finalized"))
        tst_fail(ctx, "allreduce on a finalized comm returned %s (%s), expected CCL_ERR_INVALID_USAGE saying "
                 "finalized", ccl_get_error_string(rc), ccl_get_last_error(NULL));
    rc = ccl_broadcast(buf, buf, 3, CCL_FLOAT32, 0, comm, NULL);
    if (rc != CCL_ERR_INVALID_USAGE)
        tst_fail(ctx, "broadcast on a finalized comm returned %s, expected CCL_ERR_INVALID_USAGE",
                 ccl_get_error_string(rc));
    if (buf[0] != 1 || buf[1] != 2 || buf[2] != 3)
        tst_fail(ctx, "a refused call on the finalized comm changed its buffer");
    rc = ccl_comm_finalize(comm);
    if (rc != CCL_ERR_INVALID_USAGE || !strstr(ccl_get_last_error(NULL), "finalized"))
        tst_fail(ctx, "a second finalize returned %s (%s), expected CCL_ERR_INVALID_USAGE",
                 ccl_get_error_string(rc), ccl_get_last_error(NULL));
    ccl_comm_t sub = NULL;
    rc = ccl_comm_split(comm, 0, 0, &sub);
    if (rc != CCL_ERR_INVALID_USAGE || sub)
        tst_fail(ctx, "split of a finalized comm returned %s, expected CCL_ERR_INVALID_USAGE",
                 ccl_get_error_string(rc));
    int n = -1, r = -1;
    TST_CCL(ctx, comm, ccl_comm_count(comm, &n));
    TST_CCL(ctx, comm, ccl_comm_user_rank(comm, &r));
    if (n != ctx->nranks || r != ctx->rank)
        tst_fail(ctx, "count %d / rank %d after finalize, expected %d / %d", n, r, ctx->nranks, ctx->rank);
    ccl_result_t async = CCL_ERR_INTERNAL;
    TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
    if (async != done)
        tst_fail(ctx, "async error after finalize is %s, expected %s", ccl_get_error_string(async),
                 ccl_get_error_string(done));
}

static void destroy_twice(tst_ctx_t *ctx, ccl_comm_t comm)
{
    tst_set_case(ctx, "destroy of a finalized comm");
    double t0 = tst_now();
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
    if (tst_now() - t0 > 1.0)
        tst_fail(ctx, "destroy after finalize took %.2f s; it should not wait for anyone", tst_now() - t0);
    if (ccl_comm_destroy(comm) != CCL_ERR_NULL_COMM)
        tst_fail(ctx, "a second destroy did not return CCL_ERR_NULL_COMM");
}

static int blocking_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    ccl_stream_t stream = NULL;
    TST_CCL(ctx, comm, ccl_stream_create(&stream));

    tst_set_case(ctx, "finalize inside a group that holds a call");
    float g[5] = {1, 1, 1, 1, 1};
    TST_CCL(ctx, comm, ccl_group_start());
    TST_CCL(ctx, comm, ccl_allreduce(g, g, 5, CCL_FLOAT32, CCL_SUM, comm, NULL));
    ccl_result_t rc = ccl_comm_finalize(comm);
    if (rc != CCL_ERR_GROUP)
        tst_fail(ctx, "finalize in an open group returned %s (%s), expected CCL_ERR_GROUP", ccl_get_error_string(rc),
                 ccl_get_last_error(comm));
    TST_CCL(ctx, comm, ccl_group_end());
    if (g[0] != (float)ctx->nranks || g[4] != (float)ctx->nranks)
        tst_fail(ctx, "the group's allreduce gave %g, expected %d: the refused finalize changed the comm",
                 (double)g[0], ctx->nranks);

    tst_set_case(ctx, "finalize with calls queued on a stream, rank 0 late");
    TST_CCL(ctx, comm, ccl_barrier(comm, NULL));
    if (ctx->rank == 0)
        usleep(LATE_MS * 1000);
    queue_allreduces(ctx, comm, stream);
    double t0 = tst_now();
    TST_CCL(ctx, comm, ccl_comm_finalize(comm));
    double dt = tst_now() - t0;
    /* Before any stream synchronize: finalize itself waited for them. (The
     * stream may still be marking its batch done: a stream is not the
     * comm's, and may hold calls on other comms.) */
    check_results(ctx);
    TST_CCL(ctx, comm, ccl_stream_synchronize(stream));
    if (ctx->rank != 0 && dt < (LATE_MS - 50) / 1000.0)
        tst_fail(ctx, "finalize returned after %.3f s, before rank 0 (%d ms late) had called it", dt, LATE_MS);
    check_finalized(ctx, comm, CCL_SUCCESS);
    TST_CCL(ctx, comm, ccl_stream_destroy(stream));
    destroy_twice(ctx, comm);
    return 0;
}

static ccl_comm_t init_nonblocking(tst_ctx_t *ctx)
{
    ccl_config_t config = CCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ccl_comm_t comm = NULL;
    tst_set_case(ctx, "nonblocking init");
    ccl_result_t rc = ccl_comm_init_rank_config(&comm, ctx->nranks, ctx->id, ctx->rank, &config);
    if (rc != CCL_IN_PROGRESS || !comm)
        tst_fatal(ctx, "nonblocking init returned %s: %s", ccl_get_error_string(rc), ccl_get_last_error(NULL));
    double t0 = tst_now();
    ccl_result_t async = CCL_IN_PROGRESS;
    while (async == CCL_IN_PROGRESS && tst_now() - t0 < POLL_BOUND_S) {
        TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
        usleep(1000);
    }
    if (async != CCL_SUCCESS)
        tst_fatal(ctx, "nonblocking init ended with %s: %s", ccl_get_error_string(async), ccl_get_last_error(comm));
    return comm;
}

static int nonblocking_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    /* Ranks 0-1 and 2 are two fake hosts. */
    setenv("CCL_HOSTID", ctx->rank < 2 ? "finalize-node0" : "finalize-node1", 1);
    ccl_comm_t comm = init_nonblocking(ctx);
    queue_allreduces(ctx, comm, NULL);
    check_results(ctx);
    if (ctx->rank == NRANKS - 1)
        usleep(LATE_MS * 1000);
    tst_set_case(ctx, "nonblocking finalize");
    ccl_result_t rc = ccl_comm_finalize(comm);
    if (rc != CCL_IN_PROGRESS)
        tst_fatal(ctx, "nonblocking finalize returned %s (%s), expected CCL_IN_PROGRESS", ccl_get_error_string(rc),
                  ccl_get_last_error(comm));
    ccl_result_t async = CCL_ERR_INTERNAL;
    TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
    if (ctx->rank != NRANKS - 1 && async != CCL_IN_PROGRESS)
        tst_fail(ctx, "async error of a finalize the late rank has not joined is %s, expected CCL_IN_PROGRESS",
                 ccl_get_error_string(async));
    float buf[2] = {7, 8};
    rc = ccl_allreduce(buf, buf, 2, CCL_FLOAT32, CCL_SUM, comm, NULL);
    if (rc != CCL_ERR_INVALID_USAGE || buf[0] != 7 || buf[1] != 8)
        tst_fail(ctx, "allreduce during the finalize returned %s and left %g %g, expected CCL_ERR_INVALID_USAGE "
                 "and 7 8", ccl_get_error_string(rc), (double)buf[0], (double)buf[1]);
    double t0 = tst_now();
    while (async == CCL_IN_PROGRESS && tst_now() - t0 < POLL_BOUND_S) {
        usleep(1000);
        TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
    }
    if (async != CCL_SUCCESS)
        tst_fatal(ctx, "nonblocking finalize ended with %s: %s", ccl_get_error_string(async), ccl_get_last_error(comm));
    check_finalized(ctx, comm, CCL_SUCCESS);
    destroy_twice(ctx, comm);
    return 0;
}

static int abort_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = init_nonblocking(ctx);
    if (ctx->rank == NRANKS - 1) {
        /* Never finalizes; stays until the others have aborted, so that
         * what they see is a missing rank, not a dead one. */
        tst_barrier(ctx);
        tst_barrier(ctx);
        tst_comm_destroy(ctx, comm);
        return 0;
    }
    tst_set_case(ctx, "nonblocking finalize that rank %d never joins", NRANKS - 1);
    ccl_result_t rc = ccl_comm_finalize(comm);
    if (rc != CCL_IN_PROGRESS)
        tst_fatal(ctx, "finalize returned %s, expected CCL_IN_PROGRESS", ccl_get_error_string(rc));
    usleep(LATE_MS * 1000);
    ccl_result_t async = CCL_ERR_INTERNAL;
    TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
    if (async != CCL_IN_PROGRESS)
        tst_fail(ctx, "async error with rank %d missing is %s, expected CCL_IN_PROGRESS", NRANKS - 1,
                 ccl_get_error_string(async));
    /* Both have looked before either aborts: an abort tells the peers,
     * whose finalize then fails instead of waiting. */
    tst_barrier(ctx);
    tst_set_case(ctx, "ccl_comm_abort of the finalize");
    double t0 = tst_now();
    TST_CCL(ctx, comm, ccl_comm_abort(comm));
    double dt = tst_now() - t0;
    if (dt > ABORT_BOUND_S)
        tst_fail(ctx, "abort of a running finalize took %.2f s (bound %.1f s)", dt, ABORT_BOUND_S);
    if (ccl_comm_get_async_error(comm, &async) != CCL_ERR_NULL_COMM)
        tst_fail(ctx, "the aborted comm still answers");
    tst_barrier(ctx);
    return 0;
}

static int gone_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    queue_allreduces(ctx, comm, NULL);
    check_results(ctx);
    if (ctx->rank == NRANKS - 1) {
        tst_comm_destroy(ctx, comm); /* leaves without finalizing */
        return 0;
    }
    tst_set_case(ctx, "finalize after rank %d left", NRANKS - 1);
    double t0 = tst_now();
    ccl_result_t rc = ccl_comm_finalize(comm);
    double dt = tst_now() - t0;
    char rank_name[32];
    snprintf(rank_name, sizeof rank_name, "rank %d", NRANKS - 1);
    if (rc == CCL_SUCCESS || !strstr(ccl_get_last_error(comm), rank_name))
        tst_fail(ctx, "finalize without rank %d returned %s (%s), expected an error naming it", NRANKS - 1,
                 ccl_get_error_string(rc), ccl_get_last_error(comm));
    if (dt > GONE_BOUND_S)
        tst_fail(ctx, "the failed finalize took %.2f s (bound %.1f s)", dt, GONE_BOUND_S);
    check_finalized(ctx, comm, rc);
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
    return 0;
}

int main(int argc, char **argv)
{
    setenv("CCL_TIMEOUT", "3", 1);
    int failed = 0;
    /* First: the ranks set CCL_HOSTID, which works only while the parent
     * they fork from has not read the CCL_* table. */
    if (tst_scenario_wanted(argc, argv, "nonblocking"))
        failed += tst_run_ranks("finalize: nonblocking, 2 fake hosts", NRANKS, 60, nonblocking_body, NULL) != 0;
    if (tst_scenario_wanted(argc, argv, "blocking"))
        failed += tst_run_ranks("finalize: blocking", NRANKS, 60, blocking_body, NULL) != 0;
    if (tst_scenario_wanted(argc, argv, "abort"))
        failed += tst_run_ranks_shm_clean("finalize: abort", NRANKS, 60, abort_body, NULL);
    if (tst_scenario_wanted(argc, argv, "gone"))
        failed += tst_run_ranks("finalize: gone", NRANKS, 60, gone_body, NULL) != 0;
    printf("test_finalize: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
