/*
 * test_allreduce.c - ccl_allreduce across forked ranks against the serial
 * reference: rank counts 1..8 (odd ones included) and 16, counts from 0 to
 * 1021 for every dtype and op (premulsum included) and 65537 for one op per
 * dtype (so every op meets it on some dtype), in place
 * and out of place (cases alternate between vector-aligned and merely
 * element-aligned buffers). Each rank checks its whole result, the guard
 * bytes around its buffers and that its send buffer was left alone.
 *
 *   test_allreduce [nranks ...]      default: 1 2 3 4 5 7 8 16
 *   CCL_TEST_SEED=n                  vary the data (printed at start)
 *   CCL_TEST_CCL_MEM=1               buffers from ccl_mem_alloc (with low
 *                                    CCL_SINGLE_COPY_THRESHOLD: the single-copy path);
 *                                    default ranks then 2 3 4 5 (an allocation per
 *                                    case costs first-touch time on every rank)
 */
#include "test_coll.h"

int main(int argc, char **argv)
{
    static const tst_coll_t colls[] = {TST_ALLREDUCE};
    static const size_t counts[] = {0, 1, 2, 3, 7, 13, 1021};
    tst_sweep_t sw = {.colls = colls,
                      .ncolls = 1,
                      .counts = counts,
                      .ncounts = (int)(sizeof(counts) / sizeof(counts[0])),
                      .big_count = 65537};
    return tst_sweep_main("allreduce", argc, argv, &sw);
}
