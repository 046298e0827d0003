/*
 * test_repeat.c - many collectives on one communicator, to catch FIFO slot,
 * counter and sequence bugs that a single call never exercises: counters
 * that wrap, slots reused before the reader is done, state left over from
 * the previous operation. Phase 1 runs a thousand small mixed collectives
 * (every collective of ccl.h and a send/recv ring)
 * (sizes and types change every call, a few exceed a typical slot) checking
 * each one. Phase 2 issues a burst back to back on distinct buffers and
 * checks them only afterwards, so fast ranks run far ahead of slow ones.
 *
 *   CCL_TEST_REPEAT=n    phase 1 length (default 1000); phase 2 is half
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"

static uint64_t base_seed;

/* Case k of the sequence: identical on every rank, different for every k;
 * any collective (a quarter of them allgather, as before the others came). */
static tst_case_t make_case(int nranks, int phase, int k)
{
    uint64_t h = tst_case_seed(base_seed, (uint64_t)nranks, (uint64_t)phase, (uint64_t)k, 3);
    tst_case_t c;
    memset(&c, 0, sizeof(c));
    c.coll = (h & 3) == 0 ? TST_ALLGATHER
             : (h & 3) == 1 ? TST_ALLREDUCE
                            : (tst_coll_t)((h >> 44) % TST_NUM_COLLS);
    c.dt = tst_dtypes[(h >> 2) % (uint64_t)tst_num_dtypes];
    c.op = tst_coll_reduces(c.coll) ? tst_ops[(h >> 8) % (uint64_t)tst_num_ops] : TST_OP_COPY;
    /* Mostly 1..64 elements; 1 in 16 is larger than a typical FIFO slot. */
    c.count = ((h >> 16) & 15) == 0 ? 20000 + (h >> 24) % 50000 : 1 + (h >> 24) % 64;
    c.inplace = (int)((h >> 40) % 3); /* out of place, in place, in place on even ranks */
    c.root = (int)((h >> 50) % (uint64_t)nranks);
    c.null_unused = (int)((h >> 58) & 1);
    c.seed = h;
    return c;
}

static int rank_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    int n1 = (int)tst_env_long("CCL_TEST_REPEAT", 1000);
    if (n1 < 2)
        n1 = 2;
    int n2 = n1 / 2;
    char what[160], msg[512];
    ccl_comm_t comm = tst_comm_init(ctx);

    for (int k = 0; k < n1; k++) {
        tst_case_t c = make_case(ctx->nranks, 1, k);
        tst_run_case(ctx, comm, &c, 0);
    }

    tst_bufs_t *bufs = calloc((size_t)n2, sizeof(*bufs));
    if (!bufs)
        tst_fatal(ctx, "out of memory");
    for (int k = 0; k < n2; k++) {
        tst_case_t c = make_case(ctx->nranks, 2, k);
        tst_case_str(&c, ctx->nranks, what, sizeof(what));
        tst_set_case(ctx, "burst #%d: %s", k, what);
        tst_case_prepare(&c, ctx->rank, ctx->nranks, &bufs[k], 0);
        ccl_result_t rc = tst_case_issue(&c, &bufs[k], comm, NULL);
        if (rc != CCL_SUCCESS)
            tst_fatal(ctx, "burst #%d: %s returned %s: %s", k, what, ccl_get_error_string(rc),
                      ccl_get_last_error(comm));
    }
    for (int k = 0; k < n2; k++) {
        tst_case_t c = make_case(ctx->nranks, 2, k);
        if (tst_case_verify(&c, ctx->rank, ctx->nranks, &bufs[k], msg, sizeof(msg)))
            tst_fail(ctx, "burst #%d: %s", k, msg);
        tst_case_release(&bufs[k]);
    }
    free(bufs);
    tst_set_case(ctx, "ccl_comm_destroy");
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
    return 0;
}

int main(void)
{
    static const int nranks[] = {2, 3, 5, 8};
    int failed = 0;
    base_seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    printf("test_repeat: seed %llu\n", (unsigned long long)base_seed);
    for (size_t k = 0; k < sizeof(nranks) / sizeof(nranks[0]); k++)
        failed += tst_run_ranks("repeat", nranks[k], 60, rank_body, NULL) != 0;
    printf("test_repeat: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
