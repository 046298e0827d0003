/*
 * p2p_call.c - a collective on device buffers that may run on the device
 * executor (exec/device.c) over P2P instead of being staged through host
 * memory: whether it is a candidate (cheap, on every device call), the P2P
 * setup at a comm's first such call, and the bookkeeping around the
 * submission (the comm's lock and call number, a failure that breaks the
 * comm and lets the peers' streams go, the wait of a NULL-stream call).
 */
#include "core/coll_run.h"
#include "core/comm_state.h"
#include "core/connect.h"
#include "core/dev_stream.h"
#include "core/p2p_call.h"
#include "exec/exec.h"
#include "base/err.h"
#include "base/log.h"
#include "device/cuda_rt.h"
#include "device/reduce.h"

#include <stdio.h>

int p2p_call_candidate(const coll_args_t *a, ccl_stream_t stream)
{
    /* Host buffers (the flags are only set once the driver is loaded) cost
     * one test here. */
    if (!(a->dev_send || a->dev_recv) || !exec_device_runs(a->coll) ||
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

ccl_result_t p2p_call_run(const coll_args_t *in, ccl_stream_t stream, int *taken)
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
     * it: holding exec_lock here would deadlock. The watch (connect_p2p_watch.c)
     * needs exec_lock too, to let the waits go when a peer dies while we are
     * blocked here. */
    pthread_mutex_lock(&comm->p2p_queue_lock);
    queueing = 1;
    exec_unlock(&comm->exec_lock);
    locked = 0;
    CCL_TRY(exec_device_submit(comm, &a, s));
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
     * watch (connect_p2p_watch.c) breaks the comm and lets the GPU finish: the
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

ccl_result_t p2p_call_run(const coll_args_t *in, ccl_stream_t stream, int *taken)
{
    *taken = 0;
    return CCL_SUCCESS;
}

#endif
