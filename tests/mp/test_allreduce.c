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
 *                                    case costs first-touch time on every rank);
 *                                    2: on even ranks only (registered buffers
 *                                    whose peers' are not)
 */
#include "test_coll.h"

int main(int argc, char **argv)
{
    return tst_sweep_one("allreduce", TST_ALLREDUCE, argc, argv);
}
