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
 * test_large.)
 *
 *   test_colls [nranks ...]          default: 1 2 3 4 5 7 8
 *   CCL_TEST_COLLS=reduce,gather     only these collectives
 *   CCL_TEST_SEED=n, CCL_TEST_CCL_MEM=1   as for test_allreduce
 */
#include "test_coll.h"

int main(int argc, char **argv)
{
    static const tst_coll_t colls[] = {TST_REDUCE_SCATTER, TST_BROADCAST, TST_BCAST,
                                       TST_REDUCE,         TST_ALLTOALL,  TST_GATHER,
                                       TST_SCATTER,        TST_SENDRECV};
    static const size_t counts[] = {0, 1, 2, 3, 7, 13, 1021};
    /* 16 ranks (as the allreduce and allgather sweeps have) would double the time. */
    static const int ranks[] = {1, 2, 3, 4, 5, 7, 8};
    tst_sweep_t sw = {.colls = colls,
                      .ncolls = (int)(sizeof(colls) / sizeof(colls[0])),
                      .counts = counts,
                      .ncounts = (int)(sizeof(counts) / sizeof(counts[0])),
                      .big_count = 65537,
                      .ranks = ranks,
                      .nranks = (int)(sizeof(ranks) / sizeof(ranks[0])),
                      .timeout_s = 120};
    return tst_sweep_main("colls", argc, argv, &sw);
}
