/*
 * test_allreduce.c - ccl_allreduce across forked ranks against the serial
 * reference: rank counts 1..8 (odd ones included) and 16, counts from 0 to
 * a prime above 64 Ki, every integer and float dtype, every op, in place
 * and out of place (out-of-place cases alternate between vector-aligned and
 * merely element-aligned buffers). Each rank checks its whole result, the guard
 * bytes around its buffers and that its send buffer was left alone.
 *
 *   test_allreduce [nranks ...]      default: 1 2 3 4 5 7 8 16
 *   CCL_TEST_SEED=n                  vary the data (printed at start)
 *   CCL_TEST_CCL_MEM=1               buffers from ccl_mem_alloc (with low
 *                                    CCL_SINGLE_COPY_THRESHOLD: the single-copy path);
 *                                    default ranks then 2 3 4 5 (an allocation per
 *                                    case costs first-touch time on every rank)
 */
#include <stdio.h>
#include <stdlib.h>

#include "test_coll.h"
#include "test_common.h"
#include "test_launch.h"

static const size_t counts[] = {0, 1, 2, 3, 7, 13, 1021, 65537};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static tst_sweep_cfg_t cfg;

static int rank_body(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    ccl_comm_t comm = tst_comm_init(ctx);
    int k = 0;
    for (int d = 0; d < tst_num_dtypes; d++) {
        for (int o = 0; o < tst_num_ops; o++) {
            for (size_t c = 0; c < NCOUNTS; c++) {
                for (int inplace = 0; inplace < 2; inplace++, k++) {
                    tst_case_t tc = {
                        .coll = TST_ALLREDUCE,
                        .dt = tst_dtypes[d],
                        .op = tst_ops[o],
                        .count = counts[c],
                        .inplace = inplace,
                        .misalign = (!inplace && (k & 2)) ? tst_dtype_size(tst_dtypes[d]) : 0,
                        .seed = tst_case_seed(cfg.seed, (uint64_t)ctx->nranks, (uint64_t)d,
                                              (uint64_t)o, (uint64_t)(c * 2 + (size_t)inplace)),
                    };
                    tst_run_case(ctx, comm, &tc, cfg.use_ccl_mem);
                }
            }
        }
    }
    tst_set_case(ctx, "ccl_comm_destroy");
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
    return 0;
}

int main(int argc, char **argv)
{
    return tst_sweep_main("allreduce", argc, argv, rank_body, &cfg);
}
