/*
 * rd.c - recursive doubling allreduce, for small messages.
 *
 * In exchange k (k = 0 .. log2(p)-1) each rank swaps its whole current
 * value with the rank whose number differs in bit k and reduces: after
 * log2(p) exchanges everyone holds the full reduction. That is log2(n)
 * hops of latency (a ring needs 2(n-1)), at log2(n) times the ring's
 * traffic, which only pays for small messages. When n is not a power of
 * two, the top n-p ranks first hand their input to rank r-p ("fold"), sit
 * out the exchanges and receive the result at the end. Both partners of an
 * exchange compute own op other, which is bitwise the same on both for
 * every ccl operator (each is commutative).
 */
#include "algos/rd.h"
#include "base/err.h"

ccl_result_t rd_schedule(const sched_op_t *op, sched_t *out)
{
    int n = op->nranks, r = op->rank;
    size_t c = op->count;
    /* A rank overwrites its in-place input while its partner may still be
     * reading it. */
    sched_reset(out, 0, 0, 1);
    if (op->coll != SCHED_ALLREDUCE)
        return err_set(CCL_ERR_INTERNAL, "recursive doubling: no schedule for %s", sched_coll_name(op->coll));
    int p = 1, logp = 0;
    while (p * 2 <= n) {
        p *= 2;
        logp++;
    }
    ccl_result_t res = sched_reserve(out, 2 * logp + 4);
    if (res != CCL_SUCCESS)
        return res;
    if (n == 1) {
        sched_add_step(out, SCHED_COPY, -1, -1, SCHED_BUF_SEND, SCHED_BUF_RECV, 0, c, SCHED_POSTOP);
        return CCL_SUCCESS;
    }
    if (r >= p) { /* folded: hand over, then wait for the result */
        sched_add_step(out, SCHED_SEND, -1, r - p, SCHED_BUF_SEND, SCHED_BUF_NONE, 0, c, 0);
        sched_add_step(out, SCHED_RECV, r - p, -1, SCHED_BUF_NONE, SCHED_BUF_RECV, 0, c, 0);
        return CCL_SUCCESS;
    }
    int have = SCHED_BUF_SEND; /* where this rank's current value lives */
    if (r + p < n) {
        sched_add_step(out, SCHED_RECV_REDUCE_COPY, r + p, -1, SCHED_BUF_SEND, SCHED_BUF_RECV, 0, c, 0);
        have = SCHED_BUF_RECV;
    }
    for (int k = 0; k < logp; k++) {
        int partner = r ^ (1 << k);
        sched_add_step(out, SCHED_SEND, -1, partner, have, SCHED_BUF_NONE, 0, c, 0);
        sched_add_step(out, SCHED_RECV_REDUCE_COPY, partner, -1, have, SCHED_BUF_RECV, 0, c,
                       k == logp - 1 ? SCHED_POSTOP : 0);
        have = SCHED_BUF_RECV;
    }
    if (r + p < n)
        sched_add_step(out, SCHED_SEND, -1, r + p, SCHED_BUF_RECV, SCHED_BUF_NONE, 0, c, 0);
    return CCL_SUCCESS;
}
