/*
 * coll.c - the collective and point-to-point entry points: each checks
 * its call and sends it where it runs.
 *
 * A call is checked (argcheck.c), then run now (NULL stream), queued on a
 * host stream or a CUDA stream (dev_stream.c, which also stages device
 * buffers of blocking calls), or, inside ccl_group_start/end, queued in the
 * thread's group (group.c). A blocking call on host buffers runs at once
 * (coll_run.c).
 */
#include "core/argcheck.h"
#include "core/coll_run.h"
#include "core/comm_state.h"
#include "core/dev_stream.h"
#include "core/group.h"
#include "core/p2p_call.h"
#include "core/redop.h"
#include "core/stream.h"
#include "base/err.h"

#include <stdlib.h>
#include <string.h>

static ccl_result_t coll_submit(coll_args_t *a, ccl_stream_t stream, const char *name)
{
    err_clear();
    ccl_result_t res = argcheck_coll(a, name);
    if (res == CCL_SUCCESS && sched_coll_reduces(a->coll))
        res = redop_resolve(a->comm, a, name);
    if (res == CCL_SUCCESS)
        res = dstream_classify(a, stream, name);
    if (group_active())
        return group_add(a, res, stream, name);
    if (res != CCL_SUCCESS) {
        if (comm_is_live(a->comm))
            comm_record_error(a->comm);
        return res;
    }
    /* A blocking call on host buffers runs here. It counts itself only
     * where it needs to (coll_run_one): counting is an atomic add and
     * subtract per call, each as costly as a mutex's would be (exec_lock.c). */
    if (!stream && !a->dev_send && !a->dev_recv && !a->dev_premul)
        return coll_run_one(a);
    comm_pending_add(a->comm);
    /* Device buffers of every rank on one host: over P2P, on the stream. */
    if (p2p_call_candidate(a, stream)) {
        int taken = 0;
        res = p2p_call_run(a, stream, &taken);
        if (taken || res != CCL_SUCCESS) {
            comm_pending_done(a->comm);
            return res;
        }
    }
    /* Queued ones: the stream's worker calls pending_done. */
    if (dstream_is_cuda(stream))
        return dstream_enqueue(stream, a, 1);
    if (stream)
        return stream_enqueue(stream, a, 1);
    res = dstream_run(a, 1);
    comm_pending_done(a->comm);
    return res;
}

#define COLL_ARGS(c_, s_, r_, n_, t_, o_, root_, comm_)                                   \
    {.coll = (c_), .sendbuf = (s_), .recvbuf = (r_), .count = (n_), .dtype = (t_), .op = (o_), \
     .root = (root_), .comm = (comm_), .kop = (o_)}

CCL_API ccl_result_t ccl_allreduce(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                                   ccl_redop_t op, ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0, comm);
    return coll_submit(&a, stream, "ccl_allreduce");
}

CCL_API ccl_result_t ccl_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   ccl_datatype_t dtype, ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, CCL_SUM, 0, comm);
    return coll_submit(&a, stream, "ccl_allgather");
}

CCL_API ccl_result_t ccl_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                        ccl_datatype_t dtype, ccl_redop_t op, ccl_comm_t comm,
                                        ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, 0, comm);
    return coll_submit(&a, stream, "ccl_reduce_scatter");
}

CCL_API ccl_result_t ccl_broadcast(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                                   int root, ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_BROADCAST, sendbuf, recvbuf, count, dtype, CCL_SUM, root, comm);
    return coll_submit(&a, stream, "ccl_broadcast");
}

CCL_API ccl_result_t ccl_bcast(void *buf, size_t count, ccl_datatype_t dtype, int root, ccl_comm_t comm,
                               ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_BROADCAST, buf, buf, count, dtype, CCL_SUM, root, comm);
    return coll_submit(&a, stream, "ccl_bcast");
}

CCL_API ccl_result_t ccl_reduce(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                                ccl_redop_t op, int root, ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_REDUCE, sendbuf, recvbuf, count, dtype, op, root, comm);
    return coll_submit(&a, stream, "ccl_reduce");
}

CCL_API ccl_result_t ccl_alltoall(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                                  ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_ALLTOALL, sendbuf, recvbuf, count, dtype, CCL_SUM, 0, comm);
    return coll_submit(&a, stream, "ccl_alltoall");
}

CCL_API ccl_result_t ccl_gather(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                                int root, ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_GATHER, sendbuf, recvbuf, count, dtype, CCL_SUM, root, comm);
    return coll_submit(&a, stream, "ccl_gather");
}

CCL_API ccl_result_t ccl_scatter(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                                 int root, ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_SCATTER, sendbuf, recvbuf, count, dtype, CCL_SUM, root, comm);
    return coll_submit(&a, stream, "ccl_scatter");
}

CCL_API ccl_result_t ccl_send(const void *sendbuf, size_t count, ccl_datatype_t dtype, int peer,
                              ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_P2P_SEND, sendbuf, NULL, count, dtype, CCL_SUM, peer, comm);
    return coll_submit(&a, stream, "ccl_send");
}

CCL_API ccl_result_t ccl_recv(void *recvbuf, size_t count, ccl_datatype_t dtype, int peer,
                              ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = COLL_ARGS(SCHED_P2P_RECV, NULL, recvbuf, count, dtype, CCL_SUM, peer, comm);
    return coll_submit(&a, stream, "ccl_recv");
}

/* A one-byte allreduce: on one host it goes through the board, one
 * synchronisation of all ranks. */
CCL_API ccl_result_t ccl_barrier(ccl_comm_t comm, ccl_stream_t stream)
{
    static const uint8_t zero = 0;
    static _Thread_local uint8_t sink;
    coll_args_t a = COLL_ARGS(SCHED_ALLREDUCE, &zero, &sink, 1, CCL_UINT8, CCL_MAX, 0, comm);
    return coll_submit(&a, stream, "ccl_barrier");
}
