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

static uint64_t base_seed;
static int use_ccl_mem;

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
                        .seed = tst_case_seed(base_seed, (uint64_t)ctx->nranks, (uint64_t)d,
                                              (uint64_t)o, (uint64_t)(c * 2 + (size_t)inplace)),
                    };
                    tst_run_case(ctx, comm, &tc, use_ccl_mem);
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
    static const int default_ranks[] = {1, 2, 3, 4, 5, 7, 8, 16};
    static const int mem_ranks[] = {2, 3, 4, 5};
    use_ccl_mem = tst_env_long("CCL_TEST_CCL_MEM", 0) != 0;
    const int *ranks = use_ccl_mem ? mem_ranks : default_ranks;
    int nlist = argc > 1 ? argc - 1
                         : use_ccl_mem ? (int)(sizeof(mem_ranks) / sizeof(mem_ranks[0]))
                                       : (int)(sizeof(default_ranks) / sizeof(default_ranks[0]));
    int failed = 0;
    base_seed = (uint64_t)tst_env_long("CCL_TEST_SEED", 12345);
    printf("test_allreduce: seed %llu\n", (unsigned long long)base_seed);
    for (int k = 0; k < nlist; k++) {
        int n = argc > 1 ? atoi(argv[k + 1]) : ranks[k];
        failed += tst_run_ranks("allreduce", n, 60, rank_body, NULL) != 0;
    }
    printf("test_allreduce: %s\n", failed ? "FAILED" : "passed");
    return failed ? 1 : 0;
}
