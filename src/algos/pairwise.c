/*
 * pairwise.c - schedules in which each rank talks straight to each peer:
 * alltoall, allgather, gather, scatter, and the two halves of a
 * point-to-point transfer.
 *
 * Every step moves one block between this rank and one peer, and no step
 * reads what another wrote, so the schedule is marked steps_independent:
 * the engine runs whichever step its connection allows, which is what keeps
 * grouped send/recv patterns (ring exchanges, all-to-all-v) from
 * deadlocking. Alltoall pairs "send to r+i" with "receive from r-i" so that
 * at every position each rank feeds the peer that is about to read.
 */
#include "algos/pairwise.h"
#include "base/err.h"

static int pw_mod(int a, int n) { return ((a % n) + n) % n; }

static sched_step_t *pw_step(sched_t *s, int action, int peer, int buf, size_t off, size_t count)
{
    sched_step_t *st = sched_add(s);
    st->action = (unsigned char)action;
    st->count = count;
    if (action == SCHED_SEND) {
        st->send_peer = peer;
        st->src_buf = (unsigned char)buf;
        st->src_off = off;
    } else {
        st->recv_peer = peer;
        st->dst_buf = (unsigned char)buf;
        st->dst_off = off;
    }
    return st;
}

/* Own block from send offset `soff` to receive offset `roff`; the executor
 * skips it when the two are the same memory (in place). */
static void pw_copy(sched_t *s, size_t soff, size_t roff, size_t count)
{
    sched_step_t *st = sched_add(s);
    st->action = SCHED_COPY;
    st->src_buf = SCHED_BUF_SEND;
    st->dst_buf = SCHED_BUF_RECV;
    st->src_off = soff;
    st->dst_off = roff;
    st->count = count;
}

ccl_result_t pairwise_schedule(const sched_op_t *op, sched_t *out)
{
    int n = op->nranks, r = op->rank, root = op->root;
    size_t c = op->count;
    sched_reset(out, 1, 1, 0);
    ccl_result_t res = sched_reserve(out, 2 * n);
    if (res != CCL_SUCCESS)
        return res;
    switch (op->coll) {
    case SCHED_ALLTOALL:
        pw_copy(out, (size_t)r * c, (size_t)r * c, c);
        for (int i = 1; i < n; i++) {
            int to = pw_mod(r + i, n), from = pw_mod(r - i, n);
            pw_step(out, SCHED_SEND, to, SCHED_BUF_SEND, (size_t)to * c, c);
            pw_step(out, SCHED_RECV, from, SCHED_BUF_RECV, (size_t)from * c, c);
        }
        return CCL_SUCCESS;
    case SCHED_ALLGATHER:
        /* In place the send block is recv block r, which no step writes. */
        pw_copy(out, 0, (size_t)r * c, c);
        for (int i = 1; i < n; i++) {
            int to = pw_mod(r + i, n), from = pw_mod(r - i, n);
            pw_step(out, SCHED_SEND, to, SCHED_BUF_SEND, 0, c);
            pw_step(out, SCHED_RECV, from, SCHED_BUF_RECV, (size_t)from * c, c);
        }
        return CCL_SUCCESS;
    case SCHED_GATHER:
        if (r != root) {
            pw_step(out, SCHED_SEND, root, SCHED_BUF_SEND, 0, c);
            return CCL_SUCCESS;
        }
        pw_copy(out, 0, (size_t)root * c, c);
        for (int i = 1; i < n; i++) {
            int from = pw_mod(root + i, n);
            pw_step(out, SCHED_RECV, from, SCHED_BUF_RECV, (size_t)from * c, c);
        }
        return CCL_SUCCESS;
    case SCHED_BROADCAST:
        /* A star: every reader takes the root's whole buffer. Only with
         * single copy (the root lends its buffer once to all readers)
         * is this cheaper than the chain; the tuner knows (tune.c). */
        if (r != root) {
            pw_step(out, SCHED_RECV, root, SCHED_BUF_RECV, 0, c);
            return CCL_SUCCESS;
        }
        for (int i = 1; i < n; i++)
            pw_step(out, SCHED_SEND, pw_mod(root + i, n), SCHED_BUF_SEND, 0, c);
        pw_copy(out, 0, 0, c);
        return CCL_SUCCESS;
    case SCHED_SCATTER:
        if (r != root) {
            pw_step(out, SCHED_RECV, root, SCHED_BUF_RECV, 0, c);
            return CCL_SUCCESS;
        }
        for (int i = 1; i < n; i++) {
            int to = pw_mod(root + i, n);
            pw_step(out, SCHED_SEND, to, SCHED_BUF_SEND, (size_t)to * c, c);
        }
        pw_copy(out, (size_t)root * c, 0, c);
        return CCL_SUCCESS;
    case SCHED_P2P_SEND:
        pw_step(out, SCHED_SEND, root, SCHED_BUF_SEND, 0, c);
        return CCL_SUCCESS;
    case SCHED_P2P_RECV:
        pw_step(out, SCHED_RECV, root, SCHED_BUF_RECV, 0, c);
        return CCL_SUCCESS;
    default:
        return err_set(CCL_ERR_INTERNAL, "pairwise: no schedule for %s", sched_coll_name(op->coll));
    }
}
