/*
 * test_exit_order.c - ranks that destroy their communicator and exit one
 * after another are never taken for failed ranks by those still running.
 *
 * A rank that leaves in order (ccl_comm_destroy, then exit) is no error for
 * the others until a call needs it; one that dies is, at once. Telling the
 * two apart races with the leaving rank: it closes its connections, then
 * its pid goes. A survivor that looked at the connections before the close
 * and at the pid after the exit would report an orderly exit as a crash
 * (it did, in 5 of 12 rounds of this test before the fix, and once in a
 * CI run of test_shrink). So in each round the last rank leaves at once
 * and the others call ccl_comm_get_async_error in a tight loop for the
 * same while, then leave together, each polling while others leave: 4
 * ranks on a 2-core machine, where a rank is often preempted between the
 * two looks. Any error fails the round.
 *
 *   CCL_TEST_ROUNDS=n    rounds (default 12)
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_common.h"
#include "test_launch.h"

#define NRANKS 4
#define POLL_S 0.15 /* how long the ranks that stay poll */

static int exit_order_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    float x[7];
    for (int i = 0; i < 7; i++)
        x[i] = (float)(ctx->rank + i);
    tst_set_case(ctx, "allreduce before the exits");
    TST_CCL(ctx, comm, ccl_allreduce(x, x, 7, CCL_FLOAT32, CCL_SUM, comm, NULL));
    for (int i = 0; i < 7; i++)
        if (x[i] != (float)(NRANKS * (NRANKS - 1) / 2 + NRANKS * i))
            tst_fail(ctx, "allreduce element %d is %g", i, (double)x[i]);
    tst_barrier(ctx);
    /* Ranks that end their polls at about the same moment leave while the
     * others still poll: that is where the race showed most. */
    double until = tst_now() + (ctx->rank == NRANKS - 1 ? 0 : POLL_S);
    tst_set_case(ctx, "ccl_comm_get_async_error while other ranks destroy their comm and exit");
    long polls = 0;
    while (tst_now() < until) {
        ccl_result_t async = CCL_ERR_INTERNAL;
        TST_CCL(ctx, comm, ccl_comm_get_async_error(comm, &async));
        polls++;
        if (async != CCL_SUCCESS) {
            tst_fail(ctx, "after %ld polls, an orderly exit read as an error: %s (%s)", polls,
                     ccl_get_error_string(async), ccl_get_last_error(comm));
            break;
        }
    }
    tst_comm_destroy(ctx, comm);
    return 0;
}

int main(void)
{
    int rounds = (int)tst_env_long("CCL_TEST_ROUNDS", 12), failed = 0;
    for (int r = 0; r < rounds; r++)
        failed += tst_run_ranks("exit_order", NRANKS, 60, exit_order_body, NULL) != 0;
    printf("test_exit_order: %d of %d rounds failed: %s\n", failed, rounds, failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
