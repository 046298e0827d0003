/*
 * test_large.c - large collectives across forked ranks: about 1 Mi + 3
 * elements (an odd count, so no power-of-two chunking lines up) of
 * allreduce and allgather, and blocks just above 1 MiB of every other
 * collective, for a spread of dtypes, ops, roots and placements with 2, 3
 * and 4 ranks, and a 64 MiB float32 allreduce over 8 ranks on 2 cores that
 * must finish in seconds (the library must not burn cores spinning while it
 * waits). Buffers come from
 * ccl_mem_alloc, the allocator meant for large collective buffers; every
 * result is checked in full against the serial reference.
 *
 *   CCL_TEST_BIG_LIMIT_S=s   time limit for one 64 MiB allreduce (default 10)
 */
#include <stdio.h>
#include <stdlib.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"

#define BIG_ODD ((size_t)(1u << 20) + 3)

static uint64_t base_seed;

typedef struct {
    tst_coll_t coll;
    ccl_datatype_t dt;
    ccl_redop_t op;
    int inplace;
} large_case_t;

static const large_case_t cases[] = {
    {TST_ALLREDUCE, CCL_FLOAT32, CCL_SUM, 0},  {TST_ALLREDUCE, CCL_FLOAT64, CCL_AVG, 1},
    {TST_ALLREDUCE, CCL_UINT8, CCL_PROD, 0},   {TST_ALLREDUCE, CCL_INT64, CCL_MAX, 1},
    {TST_ALLREDUCE, CCL_INT32, CCL_SUM, 1},    {TST_ALLREDUCE, CCL_UINT64, CCL_MIN, 0},
    {TST_ALLREDUCE, CCL_INT8, CCL_SUM, 0},     {TST_ALLREDUCE, CCL_FLOAT32, CCL_PROD, 1},
    {TST_ALLREDUCE, CCL_FLOAT16, CCL_SUM, 0},  {TST_ALLREDUCE, CCL_BFLOAT16, TST_OP_PREMULSUM, 1},
    {TST_ALLREDUCE, CCL_FLOAT8_E4M3, CCL_AVG, 0},
    {TST_ALLGATHER, CCL_FLOAT32, TST_OP_COPY, 0}, {TST_ALLGATHER, CCL_INT8, TST_OP_COPY, 1},
    {TST_ALLGATHER, CCL_UINT64, TST_OP_COPY, 1},
    /* The others with blocks just above 1 MiB (their buffers hold up to
     * nranks blocks). */
    {TST_REDUCE_SCATTER, CCL_FLOAT32, CCL_SUM, 0}, {TST_REDUCE_SCATTER, CCL_FLOAT16, CCL_MAX, 1},
    {TST_REDUCE, CCL_FLOAT64, TST_OP_PREMULSUM, 0}, {TST_REDUCE, CCL_INT32, CCL_SUM, 1},
    {TST_BROADCAST, CCL_INT32, TST_OP_COPY, 0},   {TST_BCAST, CCL_FLOAT8_E5M2, TST_OP_COPY, 1},
    {TST_ALLTOALL, CCL_UINT8, TST_OP_COPY, 0},    {TST_GATHER, CCL_BFLOAT16, TST_OP_COPY, 1},
    {TST_SCATTER, CCL_INT64, TST_OP_COPY, 1},     {TST_SENDRECV, CCL_UINT32, TST_OP_COPY, 0},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int odd_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    for (size_t k = 0; k < NCASES; k++) {
        tst_case_t tc = {
            .coll = cases[k].coll,
            .dt = cases[k].dt,
            .op = cases[k].op,
            .count = cases[k].coll == TST_ALLREDUCE || cases[k].coll == TST_ALLGATHER
                         ? BIG_ODD
                         : ((size_t)1 << 20) / tst_dtype_size(cases[k].dt) + 3,
            .inplace = cases[k].inplace,
            .misalign = 0,
            .seed = tst_case_seed(base_seed, (uint64_t)ctx->nranks, k, 7, 7),
            .root = (int)k % ctx->nranks,
        };
        tst_run_case(ctx, comm, &tc, 1);
    }
    tst_comm_destroy(ctx, comm);
    return 0;
}

static int big_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    const size_t count = ((size_t)64 << 20) / sizeof(float);
    double limit = (double)tst_timeout((int)tst_env_long("CCL_TEST_BIG_LIMIT_S", 10));
    ccl_comm_t comm = tst_comm_init(ctx);
    /* Out of place, then in place: two timed calls, each checked in full. */
    for (int inplace = 0; inplace < 2; inplace++) {
        char what[160], msg[512];
        tst_bufs_t b;
        tst_case_t tc = {.coll = TST_ALLREDUCE, .dt = CCL_FLOAT32, .op = CCL_SUM, .count = count,
                         .inplace = inplace, .misalign = 0,
                         .seed = tst_case_seed(base_seed, 64, (uint64_t)inplace, 1, 1)};
        tst_case_str(&tc, ctx->nranks, what, sizeof(what));
        tst_set_case(ctx, "%s", what);
        tst_case_prepare(&tc, ctx->rank, ctx->nranks, &b, 1);
        /* Start together so the time measures the collective, not the
         * slowest rank's data generation. */
        tst_barrier(ctx);
        double t0 = tst_now();
        ccl_result_t rc = tst_case_issue(&tc, &b, comm, NULL);
        double dt = tst_now() - t0;
        if (rc != CCL_SUCCESS)
            tst_fatal(ctx, "%s returned %s: %s", what, ccl_get_error_string(rc),
                      ccl_get_last_error(comm));
        if (ctx->rank == 0)
            printf("  64 MiB float32 allreduce, 8 ranks, %s: %.2f s (%.0f MB/s algbw)\n",
                   inplace ? "in-place" : "out-of-place", dt, 64.0 * 1.048576 / dt);
        if (dt > limit)
            tst_fail(ctx, "%s took %.2f s, limit %.0f s", what, dt, limit);
        if (tst_case_verify(&tc, ctx->rank, ctx->nranks, &b, msg, sizeof(msg)))
            tst_fail(ctx, "%s", msg);
        tst_case_release(&b);
    }
    tst_comm_destroy(ctx, comm);
    return 0;
}

int main(void)
{
    int failed = 0;
    base_seed = tst_seed("test_large");
    failed += tst_run_ranks("large-odd", 2, 120, odd_body, NULL) != 0;
    failed += tst_run_ranks("large-odd", 3, 120, odd_body, NULL) != 0;
    failed += tst_run_ranks("large-odd", 4, 120, odd_body, NULL) != 0;
    failed += tst_run_ranks("large-64MiB", 8, 120, big_body, NULL) != 0;
    printf("test_large: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
