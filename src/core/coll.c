/*
 * coll.c - the collective entry points: check, then run now (NULL stream) or
 * queue on a host stream; and coll_run, which turns a call into a schedule
 * and hands it to the host executor.
 */
#include "core/argcheck.h"
#include "core/comm.h"
#include "core/err.h"
#include "device/reduce.h"

const char *coll_name(sched_coll_t coll)
{
    return coll == SCHED_ALLGATHER ? "allgather" : "allreduce";
}

static ccl_result_t coll_build(struct ccl_comm *comm, const coll_args_t *a, algo_t *algo)
{
    size_t esz = dev_dtype_size(a->dtype);
    sched_op_t op = {a->coll, a->count, esz, comm->nranks, comm->rank};
    *algo = tuner_pick(comm, a->coll, a->count * esz);
    if (*algo == ALGO_ONESHOT)
        return CCL_SUCCESS; /* no schedule: exec_host_oneshot */
    return *algo == ALGO_DIRECT ? direct_schedule(&op, &comm->sched) : ring_schedule(&op, &comm->sched);
}

ccl_result_t coll_run(const coll_args_t *a)
{
    ccl_result_t res = CCL_SUCCESS;
    struct ccl_comm *comm = a->comm;
    algo_t algo = ALGO_RING;
    pthread_mutex_lock(&comm->exec_lock);
    uint64_t seq = ++comm->seq;
    if (atomic_load(&comm->aborted))
        CCL_FAIL(CCL_ERR_ABORTED, "the communicator was aborted");
    if (comm->broken)
        CCL_FAIL(CCL_ERR_INVALID_USAGE, "an earlier collective on this communicator failed; "
                 "its connections are in an unknown state: destroy it and create a new one");
    CCL_TRY(coll_build(comm, a, &algo));
    LOG_TRACE(SUB_COLL, "%s #%llu: %zu x %s, %s, algo %s, %d steps", coll_name(a->coll),
              (unsigned long long)seq, a->count, dev_dtype_name(a->dtype), dev_op_name(a->op),
              tuner_algo_name(algo), comm->sched.nsteps);
    res = algo == ALGO_ONESHOT ? exec_host_oneshot(comm, a) : exec_host_run(comm, &comm->sched, a);
    if (res != CCL_SUCCESS) {
        /* Peers may be blocked on us mid-schedule: poison the connections
         * so they fail now rather than at their timeout. */
        comm->broken = 1;
        connect_poison(comm);
    }
out:
    pthread_mutex_unlock(&comm->exec_lock);
    if (res != CCL_SUCCESS) {
        err_prefix("rank %d: %s #%llu (%zu x %s, %s): ", comm->rank, coll_name(a->coll),
                   (unsigned long long)seq, a->count, dev_dtype_name(a->dtype),
                   a->coll == SCHED_ALLREDUCE ? dev_op_name(a->op) : "-");
        comm_record_error(comm);
    }
    return res;
}

static ccl_result_t coll_submit(const coll_args_t *a, ccl_stream_t stream, const char *name)
{
    err_clear();
    ccl_result_t res = argcheck_coll(a, name);
    if (res != CCL_SUCCESS) {
        if (comm_is_live(a->comm))
            comm_record_error(a->comm);
        return res;
    }
    if (stream && !stream_is_host(stream)) {
        res = err_set(CCL_ERR_UNSUPPORTED, "%s: stream %p is not a ccl host stream, and this build has "
                      "no CUDA support for device streams", name, stream);
        comm_record_error(a->comm);
        return res;
    }
    comm_pending_add(a->comm);
    if (stream)
        return stream_enqueue(stream, a); /* the stream's worker calls pending_done */
    res = coll_run(a);
    comm_pending_done(a->comm);
    return res;
}

CCL_API ccl_result_t ccl_allreduce(const void *sendbuf, void *recvbuf, size_t count, ccl_datatype_t dtype,
                                   ccl_redop_t op, ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = {SCHED_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, comm};
    return coll_submit(&a, stream, "ccl_allreduce");
}

CCL_API ccl_result_t ccl_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                   ccl_datatype_t dtype, ccl_comm_t comm, ccl_stream_t stream)
{
    coll_args_t a = {SCHED_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, CCL_SUM, comm};
    return coll_submit(&a, stream, "ccl_allgather");
}
