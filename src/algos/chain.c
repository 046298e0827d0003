/*
 * chain.c - pipelined chain schedules for the rooted collectives that move
 * one whole buffer: broadcast and reduce.
 *
 * Ranks form a chain by distance from the root. Broadcast flows
 * root -> root+1 -> ... -> root-1: every rank but the last receives each
 * slice, keeps it and forwards it. Reduce flows the other way round the ring
 * root+1 -> root+2 -> ... -> root-1 -> root: each rank adds its own input to
 * the running partial and forwards it; the root finishes. Because the
 * executor runs every step in slot-sized slices, the chain is a pipeline:
 * each rank sends the buffer once and the time is that of one transfer plus
 * (n-1) slices, the bandwidth optimum for one source or one sink. Small
 * messages (where the n-1 hops would dominate) take the one-shot board.
 */
#include "algos/chain.h"
#include "base/err.h"

static int chain_mod(int a, int n) { return ((a % n) + n) % n; }

static ccl_result_t chain_broadcast(const sched_op_t *op, sched_t *s)
{
    int n = op->nranks, r = op->rank, pos = chain_mod(r - op->root, n);
    ccl_result_t res = sched_reserve(s, 2);
    if (res != CCL_SUCCESS)
        return res;
    sched_step_t *st;
    if (pos == 0) {
        if (n > 1) {
            st = sched_add(s);
            st->action = SCHED_SEND;
            st->src_buf = SCHED_BUF_SEND;
            st->send_peer = chain_mod(r + 1, n);
            st->count = op->count;
        }
        st = sched_add(s); /* skipped by the executor when in place */
        st->action = SCHED_COPY;
        st->src_buf = SCHED_BUF_SEND;
        st->dst_buf = SCHED_BUF_RECV;
        st->count = op->count;
        return CCL_SUCCESS;
    }
    st = sched_add(s);
    st->action = pos < n - 1 ? SCHED_RECV_COPY_SEND : SCHED_RECV;
    st->recv_peer = chain_mod(r - 1, n);
    st->send_peer = pos < n - 1 ? chain_mod(r + 1, n) : -1;
    st->dst_buf = SCHED_BUF_RECV;
    st->count = op->count;
    return CCL_SUCCESS;
}

static ccl_result_t chain_reduce(const sched_op_t *op, sched_t *s)
{
    int n = op->nranks, r = op->rank, pos = chain_mod(r - op->root, n);
    ccl_result_t res = sched_reserve(s, 1);
    if (res != CCL_SUCCESS)
        return res;
    sched_step_t *st = sched_add(s);
    st->src_buf = SCHED_BUF_SEND;
    st->count = op->count;
    if (n == 1) {
        st->action = SCHED_COPY;
        st->dst_buf = SCHED_BUF_RECV;
        st->flags = SCHED_POSTOP;
    } else if (pos == 0) {
        st->action = SCHED_RECV_REDUCE_COPY;
        st->recv_peer = chain_mod(r - 1, n);
        st->dst_buf = SCHED_BUF_RECV;
        st->flags = SCHED_POSTOP;
    } else if (pos == 1) {
        st->action = SCHED_SEND;
        st->send_peer = chain_mod(r + 1, n);
    } else {
        st->action = SCHED_RECV_REDUCE_SEND;
        st->recv_peer = chain_mod(r - 1, n);
        st->send_peer = chain_mod(r + 1, n);
    }
    return CCL_SUCCESS;
}

ccl_result_t chain_schedule(const sched_op_t *op, sched_t *out)
{
    /* No rank overwrites its send buffer: the root of a broadcast only
     * reads it, reduce partials travel in slots. */
    sched_reset(out, 1, 0, 0);
    switch (op->coll) {
    case SCHED_BROADCAST: return chain_broadcast(op, out);
    case SCHED_REDUCE: return chain_reduce(op, out);
    default: return err_set(CCL_ERR_INTERNAL, "chain: no schedule for %s", sched_coll_name(op->coll));
    }
}
