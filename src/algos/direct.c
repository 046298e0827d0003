/*
 * direct.c - one-shot allreduce for two ranks and small messages.
 *
 * Each rank sends its whole buffer to the other and reduces what arrives with
 * its own: one hop of latency instead of the ring's two. Both ranks compute
 * own op other, which is bitwise the same result on both for every op ccl
 * has (IEEE sum, prod, min and max are commutative). Executed by slice
 * rounds (see sched_rounds), any size streams through the FIFO; it pays
 * twice the ring's traffic, so the tuner keeps it for small messages.
 */
#include "algos/direct.h"
#include "base/err.h"

ccl_result_t direct_schedule(const sched_op_t *op, sched_t *out)
{
    /* Both ranks overwrite their (in-place) input while the peer may still
     * be reading it. */
    sched_reset(out, 0, 0, 0);
    if (op->coll != SCHED_ALLREDUCE || op->nranks != 2)
        return err_set(CCL_ERR_INTERNAL, "direct: only allreduce on exactly 2 ranks (got %s on %d ranks)",
                       op->coll == SCHED_ALLREDUCE ? "allreduce" : "allgather", op->nranks);
    ccl_result_t res = sched_reserve(out, 2);
    if (res != CCL_SUCCESS)
        return res;
    int peer = 1 - op->rank;
    sched_step_t *st = sched_add(out);
    st->action = SCHED_SEND;
    st->src_buf = SCHED_BUF_SEND;
    st->send_peer = peer;
    st->count = op->count;
    st = sched_add(out);
    st->action = SCHED_RECV_REDUCE_COPY;
    st->flags = SCHED_POSTOP;
    st->recv_peer = peer;
    st->src_buf = SCHED_BUF_SEND;
    st->dst_buf = SCHED_BUF_RECV;
    st->count = op->count;
    return CCL_SUCCESS;
}
