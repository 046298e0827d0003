/*
 * test_colls.c - every collective besides allreduce and allgather (which
 * have their own sweeps) across forked ranks against the serial reference:
 * reduce_scatter, broadcast, bcast, reduce, alltoall, gather, scatter and a
 * send/recv ring in a group; rank counts 1..8 (odd ones included),
 * counts 0, 1, small primes, 1021 and 65537 (the last for one op per
 * dtype, every op meeting it on some dtype), every dtype, every op
 * for the reducing ones (premulsum included, its scalar both copied at
 * creation and read by pointer), in place and out of place where ccl.h has
 * an in-place layout, roots 0, last and middle (for the ring: the distance
 * to the peer, 0 being a send to self). Ranks that ccl.h says do not use a
 * buffer pass NULL every other case and otherwise a buffer that must stay
 * untouched. Each rank checks its whole result, the guard bytes around its
 * buffers and that its input was left alone. (Counts above 1 MiB are in
 * test_large.) Then one premulsum operator reused while its scalar changes.
 *
 *   test_colls [nranks ...]          default: 1 2 3 4 5 7 8
 *   CCL_TEST_COLLS=reduce,gather     only these collectives
 *   CCL_TEST_SEED=n, CCL_TEST_CCL_MEM=1   as for test_allreduce
 */
#include <stdio.h>
#include <stdlib.h>

#include "test_coll.h"

/* One premulsum operator with its scalar read by pointer, used for several
 * calls while the scalar changes between them (ccl.h: "the value may change
 * between calls"), and one copied at creation whose source changes too. */
static int premul_reuse_body(tst_ctx_t *ctx, void *arg)
{
    uint64_t seed = *(const uint64_t *)arg;
    int n = ctx->nranks, r = ctx->rank;
    ccl_comm_t comm = tst_comm_init(ctx);
    enum { COUNT = 1021 };
    float in[COUNT], out[COUNT], by_ptr = 0.0f, copied = 1.0f + (float)r;
    ccl_redop_t op_ptr, op_copy;
    for (int i = 0; i < COUNT; i++)
        in[i] = (float)((int)(tst_mix64(seed ^ ((uint64_t)r << 32) ^ (uint64_t)i) % 201) - 100);
    TST_CCL(ctx, comm, ccl_redop_create_premulsum(&op_ptr, &by_ptr, CCL_FLOAT32,
                                                  CCL_SCALAR_DEVICE, comm));
    TST_CCL(ctx, comm, ccl_redop_create_premulsum(&op_copy, &copied, CCL_FLOAT32,
                                                  CCL_SCALAR_HOST_IMMEDIATE, comm));
    copied = 100.0f; /* must not matter any more */
    for (int call = 0; call < 4; call++) {
        int use_ptr = call < 3;
        /* Every rank's scalar this call: rank q uses (q + call) / 2 or q + 1. */
        by_ptr = (float)(r + call) / 2.0f;
        tst_set_case(ctx, "premulsum operator reused, call %d (%s)", call,
                     use_ptr ? "scalar by pointer" : "scalar copied");
        TST_CCL(ctx, comm, ccl_allreduce(in, out, COUNT, CCL_FLOAT32, use_ptr ? op_ptr : op_copy,
                                         comm, NULL));
        int bad = 0, first = -1;
        double want0 = 0.0, got0 = 0.0;
        for (int i = 0; i < COUNT; i++) {
            double want = 0.0;
            for (int q = 0; q < n; q++) {
                double x = (double)((int)(tst_mix64(seed ^ ((uint64_t)q << 32) ^ (uint64_t)i) % 201) - 100);
                want += x * (use_ptr ? (double)(q + call) / 2.0 : (double)(q + 1));
            }
            if ((double)out[i] != want && bad++ == 0) {
                first = i;
                want0 = want;
                got0 = out[i];
            }
        }
        if (bad)
            tst_fail(ctx, "premulsum reused, call %d (%s): %d wrong, first at %d: expected %g, got %g",
                     call, use_ptr ? "scalar by pointer" : "scalar copied", bad, first, want0, got0);
    }
    TST_CCL(ctx, comm, ccl_redop_destroy(op_ptr, comm));
    TST_CCL(ctx, comm, ccl_redop_destroy(op_copy, comm));
    tst_comm_destroy(ctx, comm);
    return 0;
}

int main(int argc, char **argv)
{
    static const tst_coll_t colls[] = {TST_REDUCE_SCATTER, TST_BROADCAST, TST_BCAST,
                                       TST_REDUCE,         TST_ALLTOALL,  TST_GATHER,
                                       TST_SCATTER,        TST_SENDRECV};
    /* 16 ranks (as the allreduce and allgather sweeps have) would double the time. */
    static const int ranks[] = {1, 2, 3, 4, 5, 7, 8};
    tst_sweep_t sw = {.colls = colls,
                      .ncolls = (int)(sizeof(colls) / sizeof(colls[0])),
                      .counts = tst_sweep_counts,
                      .ncounts = tst_sweep_ncounts,
                      .big_count = TST_SWEEP_BIG_COUNT,
                      .ranks = ranks,
                      .nranks = (int)(sizeof(ranks) / sizeof(ranks[0])),
                      .timeout_s = 120};
    int failed = tst_sweep_main("colls", argc, argv, &sw);
    if (argc == 1 && !getenv("CCL_TEST_COLLS")) {
        uint64_t seed = sw.cfg.seed;
        failed |= tst_run_ranks("premulsum-reuse", 3, 60, premul_reuse_body, &seed) != 0;
    }
    return failed;
}
