/*
 * test_allgather.c - ccl_allgather across forked ranks against the inputs
 * every rank can regenerate: rank counts 1..8 and 16, per-rank counts from 0
 * to a prime above 64 Ki, every dtype (allgather only moves bytes, but
 * element size changes how a library slices the buffer), in place (sendbuf ==
 * recvbuf + rank*count) and out of place, aligned and element-aligned. Guard
 * bytes catch writes outside recvbuf, and the send buffer must be untouched.
 *
 *   test_allgather [nranks ...]      default: 1 2 3 4 5 7 8 16
 */
#include "test_coll.h"

int main(int argc, char **argv)
{
    return tst_sweep_one("allgather", TST_ALLGATHER, argc, argv);
}
