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
 * The call returns as soon as it is queued, as NCCL's do. What is left to
 * the staged path (dev_stream.c): groups, send/recv, alltoall, gather,
 * scatter, several hosts, a premulsum scalar in device memory (it must be
 * read in stream order), host memory on any side, and communicators where
 * the P2P setup said no (connect_p2p.c). CCL_CHECK_ARGS and CCL_VERIFY do
 * not apply to calls run here.
 */
#include "core/comm.h"
#include "exec/exec.h"
#include "base/err.h"
#include "device/cuda_rt.h"
#include "device/reduce.h"

#ifdef CCL_HAVE_CUDA
#include "device/kernels_cuda.h"
#endif

_Atomic unsigned long exec_device_calls;

static int exec_device_coll(sched_coll_t c)
{
    return c == SCHED_ALLREDUCE || c == SCHED_ALLGATHER || c == SCHED_REDUCE_SCATTER || c == SCHED_BROADCAST ||
           c == SCHED_REDUCE;
}

int exec_device_candidate(const coll_args_t *a, ccl_stream_t stream)
{
    /* Host buffers (the flags are only set once the driver is loaded) cost
     * one test here. */
    if (!(a->dev_send || a->dev_recv) || !exec_device_coll(a->coll) ||
        __atomic_load_n(&a->comm->p2p.state, __ATOMIC_ACQUIRE) == COMM_P2P_OFF ||
        a->premul_ptr)
        return 0;
    if (stream && !dstream_is_cuda(stream))
        return 0;
    size_t send_bytes = a->send_bytes, recv_bytes = a->recv_bytes;
    /* Every buffer the call touches is device memory (a broadcast's
     * non-root touches no send buffer, a reduce's non-root no receive
     * buffer). */
    return (send_bytes || recv_bytes) && (!send_bytes || a->dev_send) && (!recv_bytes || a->dev_recv);
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

ccl_result_t exec_device_run(const coll_args_t *in, ccl_stream_t stream, int *taken)
{
    ccl_result_t res = CCL_SUCCESS;
    coll_args_t a = *in;
    struct ccl_comm *comm = a.comm;
    comm_p2p_t *p = &comm->p2p;
    void *s = (void *)stream; /* NULL: the legacy default stream, then wait */
    uint64_t seq = 0;
    void *done = NULL;
    int locked = 0, queueing = 0; /* exec_lock, p2p_queue_lock held */
    *taken = 0;
    int device = s ? dev_stream_device(s) : dev_current_device();
    /* A stream of another device than the current one: the staged path
     * refuses it with the reason. */
    if (device < 0 || device != dev_current_device())
        return CCL_SUCCESS;
    /* Outside exec_lock (connect_p2p says why). A failed exchange fails
     * the call and breaks the comm: the ranks no longer agree. */
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == COMM_P2P_UNTRIED &&
        (res = connect_p2p(comm, device)) != CCL_SUCCESS) {
        exec_lock(&comm->exec_lock);
        locked = 1;
        *taken = 1;
        goto out;
    }
    exec_lock(&comm->exec_lock);
    locked = 1;
    if (atomic_load(&comm->aborted))
        CCL_FAIL(CCL_ERR_ABORTED, "the communicator was aborted");
    if (comm->broken)
        CCL_FAIL(CCL_ERR_INVALID_USAGE, "an earlier collective on this communicator failed; "
                 "its connections are in an unknown state: destroy it and create a new one");
    if (p->state != COMM_P2P_UP || device != p->device) {
        if (p->state == COMM_P2P_UP)
            LOG_INFO(SUB_P2P, "P2P: a call on device %d, but this rank's P2P slots are on device %d: staged",
                     device, p->device);
        goto out;
    }
    *taken = 1;
    seq = ++comm->seq;
    coll_enter(comm, &a, seq);
    /* The queueing under p2p_queue_lock alone, taken before exec_lock is
     * let go so that calls queue in the order of their numbers. A launch
     * blocks while the stream's queue is full (about a thousand entries,
     * by the figure usually quoted; a 1 GiB call queues several per MiB),
     * and the stream may be held by a staged call of this comm whose worker needs exec_lock to run
     * it: holding exec_lock here would deadlock. The watch (watch_p2p.c)
     * needs exec_lock too, to let the waits go when a peer dies while we are
     * blocked here. */
    pthread_mutex_lock(&comm->p2p_queue_lock);
    queueing = 1;
    exec_unlock(&comm->exec_lock);
    locked = 0;
    CCL_TRY(exec_device_schedule(comm, &a, &comm->p2p_sched));
    /* After the comm's previous P2P call, whichever stream it went on. */
    if (p->done) {
        CCL_TRY(dev_stream_wait_event(s, p->done));
    } else {
        void *ev = NULL;
        CCL_TRY(dev_event_create(&ev));
        __atomic_store_n(&p->done, ev, __ATOMIC_RELEASE); /* the watch reads it under exec_lock */
    }
    CCL_TRY(exec_device_queue(comm, &a, &comm->p2p_sched, s));
    CCL_TRY(dev_event_record(p->done, s));
    atomic_fetch_add(&exec_device_calls, 1);
    LOG_TRACE(SUB_P2P, "%s #%llu: %zu x %s on stream %p, P2P (%s)", sched_coll_name(a.coll), (unsigned long long)seq,
              a.count, dev_dtype_name(a.dtype), s,
              a.coll == SCHED_BROADCAST || a.coll == SCHED_REDUCE ? "chain" : "ring");
    if (!s)
        done = p->done;
out:
    if (queueing)
        pthread_mutex_unlock(&comm->p2p_queue_lock);
    if (res != CCL_SUCCESS && *taken) {
        /* Part of the call may be queued, and peers wait on it: the comm
         * is broken, and the streams are let go. */
        if (!locked)
            exec_lock(&comm->exec_lock); /* after the queue lock: exec_lock comes first */
        locked = 1;
        comm->broken = 1;
        atomic_store(&comm->broken_code, res);
        connect_poison(comm, err_message());
    }
    if (locked)
        exec_unlock(&comm->exec_lock);
    /* NULL stream: blocks, after exec_lock (the legacy stream may wait for
     * staged work whose worker needs it). If a peer fails meanwhile, the
     * watch (watch_p2p.c) breaks the comm and lets the GPU finish: the
     * call then returns the comm's error, not what the GPU left behind. */
    if (done) {
        res = dev_event_sync(done);
        ccl_result_t broken = (ccl_result_t)atomic_load(&comm->broken_code);
        if (res == CCL_SUCCESS && broken != CCL_SUCCESS) {
            /* Under the lock, which the watch holds when it writes it. */
            char why[COMM_ERR_MAX];
            exec_lock(&comm->exec_lock);
            snprintf(why, sizeof why, "%s", comm->last_error);
            exec_unlock(&comm->exec_lock);
            res = err_set(broken, "%s", why);
        }
        /* A peer that failed released its waits, and what its GPU then
         * sent on may have completed our call with garbage before our
         * watch looked: its reason is in our connections by then. (Only
         * reasons: a peer that died without one released nothing.) */
        else if (res == CCL_SUCCESS)
            res = exec_local_failure(comm, 0, -1, 1, "finish the call on the GPU");
    }
    if (res != CCL_SUCCESS) {
        err_prefix("rank %d: %s #%llu (%zu x %s, P2P): ", comm->rank, sched_coll_name(a.coll),
                   (unsigned long long)(seq ? seq : comm->seq + 1), a.count, dev_dtype_name(a.dtype));
        comm_record_error(comm);
    }
    return res;
}

#else /* no CUDA: never a candidate */

ccl_result_t exec_device_run(const coll_args_t *in, ccl_stream_t stream, int *taken)
{
    *taken = 0;
    return CCL_SUCCESS;
}

#endif
