/*
 * device.c - the device executor: runs a collective's schedule on the
 * user's CUDA stream over device buffers and P2P connections
 * (transport/p2p.h), so nothing of the data passes through host memory and
 * no host thread takes part once the call has returned.
 *
 * The schedule is the one the host executor would run (ring for allreduce,
 * allgather and reduce-scatter; chain for broadcast and reduce), cut into
 * slices of the P2P slot. Because the whole call is queued at once, the
 * slices go in a static order (eng_static_next: round by round, steps in
 * order), which cannot deadlock with two slots or more for these schedules
 * (tests/sim/test_sim_static.c). Each slice becomes, on the stream:
 *
 *   [wait: incoming slot posted]  [wait: outgoing slot free]
 *   one kernel: dev_cuda_reduce or dev_cuda_copy, reading the user buffer
 *     and/or the incoming slot, writing the user buffer and/or the peer's
 *     slot (the fused actions are one pass: up to two outputs)
 *   [publish: incoming slot consumed]  [publish: outgoing slot posted]
 *
 * and the call ends with an event, which the comm's next P2P call (on any
 * stream) waits for: the connections' positions are handed out in call
 * order, so the GPU must run the calls in that order too. With the NULL
 * stream the call waits for that event before it returns.
 *
 * The call returns as soon as it is queued, as NCCL's do. Whether a call
 * comes here, and the bookkeeping around it, is core/p2p_call.c's. What is
 * left to the staged path (core/dev_stream.c): groups, send/recv, alltoall, gather,
 * scatter, several hosts, a premulsum scalar in device memory (it must be
 * read in stream order), host memory on any side, and communicators where
 * the P2P setup said no (connect_p2p.c). CCL_CHECK_ARGS and CCL_VERIFY do
 * not apply to calls run here.
 */
#include "core/communicator.h"
#include "exec/exec.h"
#include "base/err.h"
#include "algos/chain.h"
#include "algos/ring.h"
#include "device/cuda_rt.h"
#include "device/reduce.h"

#ifdef CCL_HAVE_CUDA
#include "device/kernels_cuda.h"
#endif

_Atomic unsigned long exec_device_calls;

int exec_device_runs(sched_coll_t c)
{
    return c == SCHED_ALLREDUCE || c == SCHED_ALLGATHER || c == SCHED_REDUCE_SCATTER || c == SCHED_BROADCAST ||
           c == SCHED_REDUCE;
}

#ifdef CCL_HAVE_CUDA

static const char *exec_device_buf(const coll_args_t *a, int which, size_t off, size_t esz)
{
    const char *base = which == SCHED_BUF_SEND ? (const char *)a->sendbuf
                     : which == SCHED_BUF_RECV ? (const char *)a->recvbuf : NULL;
    return base ? base + off * esz : NULL;
}

/* One slice: src/dst in the user's buffers, in/out in the slots (NULL
 * where the action has none). */
static ccl_result_t exec_device_slice(const coll_args_t *a, int nranks, const sched_step_t *st, const void *in,
                                      void *out, const char *src, char *dst, size_t nbytes, void *stream)
{
    size_t esz = dev_dtype_size(a->dtype);
    /* A premulsum multiplies this rank's own input, wherever it is read. */
    int premul = a->premul && st->src_buf == SCHED_BUF_SEND;
    int post = (st->flags & SCHED_POSTOP) && a->kop == CCL_AVG;
    dev_cuda_reduce_t r = {.dtype = a->dtype, .op = a->kop, .count = nbytes / esz,
                           .avg_ranks = post ? nranks : 0, .premul = premul ? a->premul_scalar : NULL};
    switch (st->action) {
    case SCHED_COPY:
        if (!premul && !post)
            return src == dst ? CCL_SUCCESS : dev_cuda_copy(dst, NULL, src, nbytes, stream);
        r.nsrc = 1, r.src[0] = src, r.ndst = 1, r.dst[0] = dst;
        return dev_cuda_reduce(&r, stream);
    case SCHED_SEND:
        if (!premul)
            return dev_cuda_copy(out, NULL, src, nbytes, stream);
        r.nsrc = 1, r.src[0] = src, r.ndst = 1, r.dst[0] = out;
        return dev_cuda_reduce(&r, stream);
    case SCHED_RECV:
        return dev_cuda_copy(dst, NULL, in, nbytes, stream);
    case SCHED_RECV_COPY_SEND:
        return dev_cuda_copy(dst, out, in, nbytes, stream);
    case SCHED_RECV_REDUCE_SEND:
    case SCHED_RECV_REDUCE_COPY:
    case SCHED_RECV_REDUCE_COPY_SEND:
        /* The host path's order (incoming op own), except that the kernel
         * premultiplies its first source. */
        r.nsrc = 2;
        r.src[0] = premul ? (const void *)src : in;
        r.src[1] = premul ? in : (const void *)src;
        r.ndst = 0;
        if (st->action != SCHED_RECV_REDUCE_SEND)
            r.dst[r.ndst++] = dst;
        if (st->action != SCHED_RECV_REDUCE_COPY)
            r.dst[r.ndst++] = out;
        return dev_cuda_reduce(&r, stream);
    default:
        return err_set(CCL_ERR_INTERNAL, "device executor: no %s step", sched_action_name(st->action));
    }
}

/* Queues every slice of the schedule on the stream. */
static ccl_result_t exec_device_queue(struct ccl_comm *comm, const coll_args_t *a, const sched_t *sched,
                                      void *stream)
{
    ccl_result_t res = CCL_SUCCESS;
    comm_p2p_t *p = &comm->p2p;
    size_t esz = dev_dtype_size(a->dtype), slot = p->slot_size;
    int n = comm->nranks, prev = (comm->rank + n - 1) % n, next = (comm->rank + 1) % n;
    size_t rounds = sched_rounds(sched, esz, slot), k = 0;
    int i = -1;
    while (eng_static_next(sched, esz, slot, rounds, &k, &i)) {
        const sched_step_t *st = &sched->steps[i];
        size_t off = k * slot, total = st->count * esz;
        size_t nbytes = total - off < slot ? total - off : slot;
        const char *src = exec_device_buf(a, st->src_buf, st->src_off, esz);
        char *dst = (char *)exec_device_buf(a, st->dst_buf, st->dst_off, esz);
        const void *in = NULL;
        void *out = NULL;
        if ((st->recv_peer >= 0 && st->recv_peer != prev) || (st->send_peer >= 0 && st->send_peer != next))
            CCL_FAIL(CCL_ERR_INTERNAL, "device executor: a %s step with ranks %d/%d, not the ring neighbours",
                     sched_action_name(st->action), st->recv_peer, st->send_peer);
        if (st->recv_peer >= 0)
            CCL_TRY(p2p_recv_wait(&p->recv, stream, p->use_kernel_wait, &in));
        if (st->send_peer >= 0)
            CCL_TRY(p2p_send_wait(&p->send, stream, p->use_kernel_wait, &out));
        CCL_TRY(exec_device_slice(a, n, st, in, out, src ? src + off : NULL, dst ? dst + off : NULL, nbytes,
                                  stream));
        if (in)
            CCL_TRY(p2p_recv_done(&p->recv, stream));
        if (out)
            CCL_TRY(p2p_send_post(&p->send, stream));
    }
out:
    return res;
}

static ccl_result_t exec_device_schedule(struct ccl_comm *comm, const coll_args_t *a, sched_t *out)
{
    sched_op_t op = {a->coll, a->count, dev_dtype_size(a->dtype), comm->nranks, comm->rank, a->root, NULL};
    return a->coll == SCHED_BROADCAST || a->coll == SCHED_REDUCE ? chain_schedule(&op, out)
                                                                 : ring_schedule(&op, out);
}

ccl_result_t exec_device_submit(struct ccl_comm *comm, const coll_args_t *a, void *stream)
{
    ccl_result_t res = CCL_SUCCESS;
    comm_p2p_t *p = &comm->p2p;
    CCL_TRY(exec_device_schedule(comm, a, &comm->p2p_sched));
    /* After the comm's previous P2P call, whichever stream it went on. */
    if (p->done) {
        CCL_TRY(dev_stream_wait_event(stream, p->done));
    } else {
        void *ev = NULL;
        CCL_TRY(dev_event_create(&ev));
        __atomic_store_n(&p->done, ev, __ATOMIC_RELEASE); /* the watch reads it under exec_lock */
    }
    CCL_TRY(exec_device_queue(comm, a, &comm->p2p_sched, stream));
    CCL_TRY(dev_event_record(p->done, stream));
    atomic_fetch_add(&exec_device_calls, 1);
out:
    return res;
}

#else /* no CUDA: nothing is ever submitted */

ccl_result_t exec_device_submit(struct ccl_comm *comm, const coll_args_t *a, void *stream)
{
    return err_set(CCL_ERR_INTERNAL, "device executor: this build has no CUDA support");
}

#endif
