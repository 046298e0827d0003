/*
 * test_allgather.c - ccl_allgather across forked ranks against the inputs
 * every rank can regenerate: rank counts 1..8 and 16, per-rank counts from 0
 * to a prime above 64 Ki, 1-, 4- and 8-byte types (allgather only moves bytes, but
 * element size changes how a library slices the buffer), in place (sendbuf ==
 * recvbuf + rank*count) and out of place, aligned and element-aligned. Guard
 * bytes catch writes outside recvbuf, and the send buffer must be untouched.
 *
 *   test_allgather [nranks ...]      default: 1 2 3 4 5 7 8 16
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
        for (size_t c = 0; c < NCOUNTS; c++) {
            for (int inplace = 0; inplace < 2; inplace++, k++) {
                size_t esz = tst_dtype_size(tst_dtypes[d]);
                tst_case_t tc = {
                    .coll = TST_ALLGATHER,
                    .dt = tst_dtypes[d],
                    .op = TST_OP_COPY,
                    .count = counts[c],
                    .inplace = inplace,
                    /* in-place cases misalign the whole recvbuf too */
                    .misalign = (k & 2) ? esz : 0,
                    .seed = tst_case_seed(cfg.seed, (uint64_t)ctx->nranks, (uint64_t)d, 99,
                                          (uint64_t)(c * 2 + (size_t)inplace)),
                };
                tst_run_case(ctx, comm, &tc, cfg.use_ccl_mem);
            }
        }
    }
    tst_set_case(ctx, "ccl_comm_destroy");
    TST_CCL(ctx, comm, ccl_comm_destroy(comm));
    return 0;
}

int main(int argc, char **argv)
{
    return tst_sweep_main("allgather", argc, argv, rank_body, &cfg);
}
