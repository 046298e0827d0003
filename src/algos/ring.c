/*
 * ring.c - ring allreduce, allgather and reduce-scatter schedules.
 *
 * Ranks form the ring 0 -> 1 -> ... -> n-1 -> 0; rank r receives from r-1 and
 * sends to r+1. Allreduce is a reduce-scatter followed by an allgather over
 * n parts of the buffer:
 *   reduce-scatter, step s = 0..n-1:
 *     s = 0          SEND part r
 *     0 < s < n-1    RECV_REDUCE_SEND part r-s
 *     s = n-1        RECV_REDUCE_COPY_SEND part r+1 (now final: kept and sent on)
 *   allgather, step s = 0..n-2:
 *     s < n-2        RECV_COPY_SEND part r-s
 *     s = n-2        RECV part r+2 (the last part, not sent on)
 * Each rank sends 2(n-1)/n of the data, the bandwidth optimum. Reduce-scatter
 * is the first half alone, over the API's blocks (block p ends on rank p):
 *     s = 0          SEND block r-1
 *     0 < s < n-1    RECV_REDUCE_SEND block r-1-s
 *     s = n-1        RECV_REDUCE_COPY block r (into recvbuf)
 * The executor
 * pipelines every step in slot-sized slices, so step s+1 on the next rank
 * starts as soon as the first slice of step s arrives.
 */
#include "algos/ring.h"
#include "base/err.h"

static int ring_mod(int a, int n) { return ((a % n) + n) % n; }

static void ring_part_step(sched_t *s, const sched_op_t *op, int action, int part,
                           int from_send_buf, unsigned flags)
{
    size_t off, len;
    sched_partition(op->count, op->elem_size, op->nranks, part, &off, &len);
    sched_step_t *st = sched_add(s);
    st->action = (unsigned char)action;
    st->flags = (unsigned char)flags;
    st->count = len;
    st->src_off = off;
    st->dst_off = off;
    st->src_buf = from_send_buf ? SCHED_BUF_SEND : SCHED_BUF_NONE;
    st->dst_buf = SCHED_BUF_RECV;
    int n = op->nranks, r = op->rank;
    if (action != SCHED_SEND && action != SCHED_COPY)
        st->recv_peer = ring_mod(r - 1, n);
    if (action != SCHED_RECV && action != SCHED_RECV_REDUCE_COPY && action != SCHED_COPY)
        st->send_peer = ring_mod(r + 1, n);
    if (action == SCHED_SEND)
        st->dst_buf = SCHED_BUF_NONE;
}

static ccl_result_t ring_allreduce(const sched_op_t *op, sched_t *s)
{
    int n = op->nranks, r = op->rank;
    ccl_result_t res = sched_reserve(s, 2 * n);
    if (res != CCL_SUCCESS)
        return res;
    if (n == 1) {
        sched_step_t *st = sched_add(s);
        st->action = SCHED_COPY;
        st->flags = SCHED_POSTOP;
        st->src_buf = SCHED_BUF_SEND;
        st->dst_buf = SCHED_BUF_RECV;
        st->count = op->count;
        return CCL_SUCCESS;
    }
    ring_part_step(s, op, SCHED_SEND, r, 1, 0);
    for (int step = 1; step < n - 1; step++)
        ring_part_step(s, op, SCHED_RECV_REDUCE_SEND, ring_mod(r - step, n), 1, 0);
    ring_part_step(s, op, SCHED_RECV_REDUCE_COPY_SEND, ring_mod(r + 1, n), 1, SCHED_POSTOP);
    for (int step = 0; step < n - 2; step++)
        ring_part_step(s, op, SCHED_RECV_COPY_SEND, ring_mod(r - step, n), 0, 0);
    ring_part_step(s, op, SCHED_RECV, ring_mod(r + 2, n), 0, 0);
    return CCL_SUCCESS;
}

/* Allgather: part k is rank k's contribution, at recv offset k*count. */
static ccl_result_t ring_allgather(const sched_op_t *op, sched_t *s)
{
    int n = op->nranks, r = op->rank;
    size_t cnt = op->count;
    ccl_result_t res = sched_reserve(s, n + 1);
    if (res != CCL_SUCCESS)
        return res;
    /* Own contribution into place (the executor skips it when in place). */
    sched_step_t *st = sched_add(s);
    st->action = SCHED_COPY;
    st->src_buf = SCHED_BUF_SEND;
    st->dst_buf = SCHED_BUF_RECV;
    st->dst_off = (size_t)r * cnt;
    st->count = cnt;
    if (n == 1)
        return CCL_SUCCESS;
    st = sched_add(s);
    st->action = SCHED_SEND;
    st->src_buf = SCHED_BUF_SEND;
    st->send_peer = ring_mod(r + 1, n);
    st->count = cnt;
    for (int step = 1; step < n; step++) {
        int part = ring_mod(r - step, n);
        st = sched_add(s);
        st->action = (step < n - 1) ? SCHED_RECV_COPY_SEND : SCHED_RECV;
        st->recv_peer = ring_mod(r - 1, n);
        st->send_peer = (step < n - 1) ? ring_mod(r + 1, n) : -1;
        st->dst_buf = SCHED_BUF_RECV;
        st->dst_off = (size_t)part * cnt;
        st->count = cnt;
    }
    return CCL_SUCCESS;
}

/* Reduce-scatter: block p is sendbuf[p*count ..), the result recvbuf[0 ..). */
static ccl_result_t ring_reduce_scatter(const sched_op_t *op, sched_t *s)
{
    int n = op->nranks, r = op->rank;
    size_t cnt = op->count;
    ccl_result_t res = sched_reserve(s, n);
    if (res != CCL_SUCCESS)
        return res;
    for (int step = 0; step < n; step++) {
        int block = ring_mod(r - 1 - step, n);
        sched_step_t *st = sched_add(s);
        st->action = n == 1 ? SCHED_COPY
                   : step == 0 ? SCHED_SEND
                   : step < n - 1 ? SCHED_RECV_REDUCE_SEND : SCHED_RECV_REDUCE_COPY;
        st->src_buf = SCHED_BUF_SEND;
        st->src_off = (size_t)block * cnt;
        st->count = cnt;
        if (step > 0)
            st->recv_peer = ring_mod(r - 1, n);
        if (step < n - 1)
            st->send_peer = ring_mod(r + 1, n);
        if (step == n - 1) {
            st->dst_buf = SCHED_BUF_RECV;
            st->flags = SCHED_POSTOP;
        }
    }
    return CCL_SUCCESS;
}

ccl_result_t ring_schedule(const sched_op_t *op, sched_t *out)
{
    sched_reset(out, 1, 0, 0);
    switch (op->coll) {
    case SCHED_ALLREDUCE: return ring_allreduce(op, out);
    case SCHED_ALLGATHER: return ring_allgather(op, out);
    case SCHED_REDUCE_SCATTER: return ring_reduce_scatter(op, out);
    default: return err_set(CCL_ERR_INTERNAL, "ring: no schedule for collective %d", (int)op->coll);
    }
}
