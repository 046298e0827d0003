/*
 * test_streams.c - host streams across forked ranks: several collectives
 * (every kind in turn, a send/recv ring included) queued on one stream and
 * checked after ccl_stream_synchronize; a query
 * that must report CCL_IN_PROGRESS because the peers have provably not
 * joined yet, then CCL_SUCCESS once synchronized; ccl_stream_destroy with
 * work still queued (it must synchronize first); and a blocking call on the
 * same communicator after a stream was drained. Buffers come from
 * ccl_mem_alloc so that path is covered with real collectives too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"

#define NQUEUED 12

static uint64_t base_seed;

static tst_case_t queued_case(int nranks, int phase, int k)
{
    static const size_t counts[] = {1, 13, 1021, 65537};
    uint64_t h = tst_case_seed(base_seed, (uint64_t)nranks, (uint64_t)phase, (uint64_t)k, 11);
    tst_case_t c;
    memset(&c, 0, sizeof(c));
    /* Every collective in turn (phase 2 needs an allreduce at k == 0). */
    c.coll = (tst_coll_t)((size_t)k % TST_NUM_COLLS);
    c.dt = tst_dtypes[(size_t)k % (size_t)tst_num_dtypes];
    c.op = tst_coll_reduces(c.coll) ? tst_ops[(size_t)k % (size_t)tst_num_ops] : TST_OP_COPY;
    c.count = counts[(h >> 4) % 4];
    c.inplace = k & 1;
    c.root = (int)((h >> 8) % (uint64_t)nranks);
    c.seed = h;
    return c;
}

static void issue_or_die(tst_ctx_t *ctx, const tst_case_t *c, tst_bufs_t *b,
                         ccl_comm_t comm, ccl_stream_t stream)
{
    char what[160];
    tst_case_str(c, ctx->nranks, what, sizeof(what));
    tst_set_case(ctx, "%s on %s", what, stream ? "a stream" : "no stream");
    ccl_result_t rc = tst_case_issue(c, b, comm, stream);
    if (rc != CCL_SUCCESS)
        tst_fatal(ctx, "%s returned %s: %s", what, ccl_get_error_string(rc),
                  ccl_get_last_error(comm));
}

static void verify_all(tst_ctx_t *ctx, int phase, tst_bufs_t *bufs, int n)
{
    char msg[512];
    for (int k = 0; k < n; k++) {
        tst_case_t c = queued_case(ctx->nranks, phase, k);
        if (tst_case_verify(&c, ctx->rank, ctx->nranks, &bufs[k], msg, sizeof(msg)))
            tst_fail(ctx, "queued #%d: %s", k, msg);
        tst_case_release(&bufs[k]);
    }
}

static int rank_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    ccl_stream_t stream = NULL;
    tst_bufs_t bufs[NQUEUED];
    ccl_result_t rc;

    TST_CCL(ctx, NULL, ccl_stream_create(&stream));
    if (!stream)
        tst_fatal(ctx, "ccl_stream_create left the stream NULL");
    rc = ccl_stream_query(stream);
    if (rc != CCL_SUCCESS)
        tst_fail(ctx, "query of a new, idle stream returned %s", ccl_get_error_string(rc));

    /* 1: queue several, synchronize, check. */
    for (int k = 0; k < NQUEUED; k++) {
        tst_case_t c = queued_case(ctx->nranks, 1, k);
        tst_case_prepare(&c, ctx->rank, ctx->nranks, &bufs[k], 1);
        issue_or_die(ctx, &c, &bufs[k], comm, stream);
    }
    rc = ccl_stream_query(stream);
    if (rc != CCL_SUCCESS && rc != CCL_IN_PROGRESS)
        tst_fatal(ctx, "query with queued work returned %s", ccl_get_error_string(rc));
    tst_set_case(ctx, "ccl_stream_synchronize after %d queued collectives", NQUEUED);
    TST_CCL(ctx, comm, ccl_stream_synchronize(stream));
    rc = ccl_stream_query(stream);
    if (rc != CCL_SUCCESS)
        tst_fail(ctx, "query after synchronize returned %s", ccl_get_error_string(rc));
    verify_all(ctx, 1, bufs, NQUEUED);

    /* 2: rank 0 queues an allreduce that cannot complete until the others
     * issue theirs, which they only do after rank 0 has queried. */
    if (ctx->nranks > 1) {
        tst_case_t c = queued_case(ctx->nranks, 2, 0);
        tst_case_prepare(&c, ctx->rank, ctx->nranks, &bufs[0], 1);
        tst_barrier(ctx);
        if (ctx->rank == 0) {
            issue_or_die(ctx, &c, &bufs[0], comm, stream);
            rc = ccl_stream_query(stream);
            if (rc != CCL_IN_PROGRESS)
                tst_fail(ctx, "query while peers have not joined returned %s, expected "
                         "CCL_IN_PROGRESS", ccl_get_error_string(rc));
            tst_barrier(ctx);
            tst_set_case(ctx, "ccl_stream_synchronize of the delayed collective");
            TST_CCL(ctx, comm, ccl_stream_synchronize(stream));
            rc = ccl_stream_query(stream);
            if (rc != CCL_SUCCESS)
                tst_fail(ctx, "query after synchronize returned %s", ccl_get_error_string(rc));
        } else {
            tst_barrier(ctx);
            issue_or_die(ctx, &c, &bufs[0], comm, NULL);
        }
        verify_all(ctx, 2, bufs, 1);
    }

    /* 3: destroy with work queued: the queued work must still complete. */
    for (int k = 0; k < NQUEUED / 2; k++) {
        tst_case_t c = queued_case(ctx->nranks, 3, k);
        tst_case_prepare(&c, ctx->rank, ctx->nranks, &bufs[k], 1);
        issue_or_die(ctx, &c, &bufs[k], comm, stream);
    }
    tst_set_case(ctx, "ccl_stream_destroy with %d collectives queued", NQUEUED / 2);
    TST_CCL(ctx, comm, ccl_stream_destroy(stream));
    verify_all(ctx, 3, bufs, NQUEUED / 2);

    /* 4: the communicator still works for blocking calls, and a second
     * stream on it works as well. */
    {
        tst_case_t c = queued_case(ctx->nranks, 4, 1);
        tst_run_case(ctx, comm, &c, 0);
        TST_CCL(ctx, NULL, ccl_stream_create(&stream));
        for (int k = 0; k < 3; k++) {
            tst_case_t q = queued_case(ctx->nranks, 5, k);
            tst_case_prepare(&q, ctx->rank, ctx->nranks, &bufs[k], 0);
            issue_or_die(ctx, &q, &bufs[k], comm, stream);
        }
        tst_set_case(ctx, "ccl_stream_synchronize on a second stream");
        TST_CCL(ctx, comm, ccl_stream_synchronize(stream));
        verify_all(ctx, 5, bufs, 3);
        TST_CCL(ctx, comm, ccl_stream_destroy(stream));
    }

    tst_set_case(ctx, "ccl_comm_destroy");
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
    return 0;
}

int main(void)
{
    static const int nranks[] = {1, 3, 4};
    int failed = 0;
    base_seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    printf("test_streams: seed %llu\n", (unsigned long long)base_seed);
    for (size_t k = 0; k < sizeof(nranks) / sizeof(nranks[0]); k++)
        failed += tst_run_ranks("streams", nranks[k], 60, rank_body, NULL) != 0;
    printf("test_streams: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
