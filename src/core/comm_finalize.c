/*
 * comm_finalize.c - ccl_comm_finalize (like ncclCommFinalize): every rank
 * ends its work on a communicator before any rank frees it.
 *
 * Why: ccl_comm_destroy is local. It waits for this rank's own calls, but
 * a peer may still be inside a call that reads what this rank posted, or
 * be about to find this rank gone. Finalize waits for this rank's queued
 * and running calls, then meets every other rank in a barrier; when it
 * returns CCL_SUCCESS on a rank, every rank has finished every call it made
 * on the comm before its finalize. Buffers handed to those calls are then
 * free for any use on every rank, and the destroy that follows frees local
 * state only, without waiting.
 *
 * The comm leaves the live set first, so new calls are refused
 * (CCL_ERR_INVALID_USAGE, "finalized") by the per-call check that exists
 * anyway, and joins the set of comms in a phase of their own
 * (comm_config.c): there ccl_comm_get_async_error reports the finalize's
 * state, and destroy and abort find it. On a comm made with
 * ccl_config_t.blocking = 0, finalize returns CCL_IN_PROGRESS at once and a
 * thread of ours does the waiting, as NCCL's nonblocking communicators do;
 * an abort ends that thread's waits (its cancel flag is the comm's abort
 * flag) and tells the peers.
 */
#include "core/comm.h"
#include "core/coll_run.h"
#include "core/group.h"
#include "base/err.h"
#include "base/log.h"
#include "base/wait.h"

#include <stdatomic.h>
#include <stdint.h>

/* The barrier: a one-byte allreduce needs every rank's input, so no rank
 * leaves it before all have entered, each after its own calls ended. */
static ccl_result_t comm_finalize_run(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS;
    static const uint8_t zero = 0;
    uint8_t sink = 0;
    comm_pending_wait(comm);
    coll_args_t a = {.coll = SCHED_ALLREDUCE, .sendbuf = &zero, .recvbuf = &sink, .count = 1,
                     .dtype = CCL_UINT8, .op = CCL_MAX, .kop = CCL_MAX, .comm = comm, .internal = 1};
    coll_args_size(&a);
    CCL_TRY(coll_run(&a, 1));
out:
    if (res != CCL_SUCCESS) {
        err_prefix("ccl_comm_finalize on rank %d of %d: ", comm->rank, comm->nranks);
        comm_record_error(comm);
    }
    return res;
}

static void *comm_finalize_thread(void *arg)
{
    struct ccl_comm *comm = arg;
    log_set_rank(comm->rank);
    wait_set_cancel(&comm->aborted);
    ccl_result_t res = comm_finalize_run(comm);
    if (res != CCL_SUCCESS && res != CCL_ERR_ABORTED)
        LOG_WARN(SUB_INIT, "%s", comm->last_error);
    comm_async_end(comm, res);
    return NULL;
}

CCL_API ccl_result_t ccl_comm_finalize(ccl_comm_t comm)
{
    ccl_result_t res = CCL_SUCCESS;
    err_clear();
    if (!comm_is_live(comm))
        return comm_not_live(comm, "ccl_comm_finalize");
    /* The barrier would wait for calls this thread runs only at its
     * ccl_group_end. */
    if (group_holds(comm))
        CCL_FAIL(CCL_ERR_GROUP, "ccl_comm_finalize: this thread's open group has calls queued on the "
                 "communicator; call ccl_group_end first");
    /* Listed in its new phase before it leaves the live set, so that it is
     * always in one of the two. */
    CCL_TRY(comm_async_enter(comm, COMM_PHASE_FINALIZE));
    if (!comm_unpublish(comm))
        return err_set(CCL_ERR_NULL_COMM, "ccl_comm_finalize: the communicator was destroyed meanwhile");
    if (comm->nonblocking) {
        res = comm_async_start(comm, comm_finalize_thread);
        if (res != CCL_SUCCESS) {
            comm_record_error(comm);
            comm_async_end(comm, res);
            return res;
        }
        return CCL_IN_PROGRESS;
    }
    res = comm_finalize_run(comm);
    comm_async_end(comm, res);
    return res;
out:
    comm_record_error(comm);
    return res;
}
