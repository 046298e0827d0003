/*
 * comm_config.c - ccl_comm_init_rank_config: the config struct, and the
 * nonblocking init (blocking = 0) that returns at once while a thread of
 * ours builds the communicator; and the set of comms in such a phase of
 * their own, which ccl_comm_finalize (comm_finalize.c) also uses.
 *
 * Why nonblocking: init is collective and can wait long (a rank that is
 * late, or never comes). A framework's watchdog must be able to give up on
 * it, and only a handle it already holds can be aborted. So the handle is
 * handed out before the comm is built, and kept in a set of its own
 * (comm_async_set) until the build ends: calls that need a ready comm find
 * it missing from the live set, like a destroyed one, and only on that
 * miss ask here why (comm_not_live), so a ready comm's per-call check is
 * unchanged. ccl_comm_abort raises the comm's abort flag, which the init
 * thread's socket and net-setup waits look at (wait_set_cancel): the init
 * fails with CCL_ERR_ABORTED within tens of ms, and its partial state is
 * freed like that of a failed blocking init. A failed init stays in the
 * set, its message the comm's last error, until the user destroys it.
 */
#include "core/comm.h"
#include "core/connect.h"
#include "base/err.h"
#include "core/handle.h"
#include "base/log.h"
#include "base/wait.h"
#include "device/cuda_rt.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

ccl_result_t comm_async_enter(struct ccl_comm *comm, comm_phase_t phase)
{
    if (!comm->async) {
        comm->async = calloc(1, sizeof *comm->async);
        if (!comm->async)
            return err_set(CCL_ERR_SYSTEM, "out of memory");
        comm->async->joined = 1; /* no thread yet */
    }
    /* A nonblocking init's thread has ended once the comm is live; it
     * stayed unjoined (see comm_async_thread). */
    if (!comm->async->joined) {
        pthread_join(comm->async->thread, NULL);
        comm->async->joined = 1;
    }
    comm->async->phase = phase;
    atomic_store(&comm->async->state, (int)CCL_IN_PROGRESS);
    return comm_async_list(comm);
}

ccl_result_t comm_async_start(struct ccl_comm *comm, void *(*run)(void *))
{
    int rc = pthread_create(&comm->async->thread, NULL, run, comm);
    if (rc != 0)
        return err_set(CCL_ERR_SYSTEM, "cannot start the communicator's thread: %s", strerror(rc));
    comm->async->joined = 0;
    return CCL_SUCCESS;
}

void comm_async_end(struct ccl_comm *comm, ccl_result_t res)
{
    atomic_store(&comm->async->state, (int)res);
}

static void *comm_async_thread(void *arg)
{
    struct ccl_comm *comm = arg;
    ccl_result_t res = CCL_SUCCESS;
    log_set_rank(comm->rank);
    wait_set_cancel(&comm->aborted);
    /* Topology affinity and the kernel load at the end of the build look
     * at the current device, which a new thread does not inherit. */
    if (comm->async->device >= 0)
        CCL_TRY(dev_set_current_device(comm->async->device));
    CCL_TRY(comm_build(comm, &comm->async->id));
    CCL_TRY(comm_publish(comm));
out:
    if (res != CCL_SUCCESS) {
        /* Before the state: whoever sees the failure reads the message. */
        err_prefix("nonblocking init of rank %d of %d: ", comm->rank, comm->nranks);
        comm_record_error(comm);
        if (res != CCL_ERR_ABORTED)
            LOG_WARN(SUB_INIT, "%s", comm->last_error);
    }
    comm_async_end(comm, res);
    /* Ready: calls now find it live. Nothing here touches the comm after
     * the state, so a destroy may free it as soon as it joins us. */
    return NULL;
}

static ccl_result_t comm_config_check(const ccl_config_t *config, int *blocking)
{
    *blocking = 1;
    if (!config)
        return CCL_SUCCESS;
    if (config->magic != CCL_CONFIG_MAGIC)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_rank_config: config->magic is 0x%x, not "
                       "CCL_CONFIG_MAGIC: declare it as ccl_config_t config = CCL_CONFIG_INITIALIZER", config->magic);
    /* Fields up to `blocking` exist in every release; a program built with
     * a smaller struct is from a release before them. */
    if (config->size < offsetof(ccl_config_t, blocking) + sizeof config->blocking)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_rank_config: config->size %zu is smaller than "
                       "any ccl_config_t (CCL_CONFIG_INITIALIZER sets it)", config->size);
    if (config->blocking != 0 && config->blocking != 1)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_rank_config: config->blocking is %d, must be 0 or 1",
                       config->blocking);
    *blocking = config->blocking;
    return CCL_SUCCESS;
}

CCL_API ccl_result_t ccl_comm_init_rank_config(ccl_comm_t *out, int nranks, ccl_unique_id_t id, int rank,
                                               const ccl_config_t *config)
{
    ccl_result_t res = CCL_SUCCESS;
    struct ccl_comm *comm = NULL;
    int blocking = 1, listed = 0;
    err_clear();
    if (!out)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_rank_config: comm is NULL");
    *out = NULL;
    CCL_TRY(comm_config_check(config, &blocking));
    if (blocking)
        return ccl_comm_init_rank(out, nranks, id, rank);
    if (nranks < 1)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_rank_config: nranks=%d, must be at least 1", nranks);
    if (rank < 0 || rank >= nranks)
        CCL_FAIL(CCL_ERR_INVALID_RANK, "ccl_comm_init_rank_config: rank %d is not in 0..%d", rank, nranks - 1);
    CCL_TRY(comm_alloc(&comm, nranks, rank));
    comm->nonblocking = 1;
    CCL_TRY(comm_async_enter(comm, COMM_PHASE_INIT));
    listed = 1;
    comm->async->id = id;
    /* Only a process that uses CUDA already has a device to pass on. */
    comm->async->device = dev_cuda_loaded() ? dev_current_device() : -1;
    CCL_TRY(comm_async_start(comm, comm_async_thread));
    *out = comm;
    return CCL_IN_PROGRESS;
out:
    if (listed)
        comm_async_unlist(comm);
    if (comm)
        comm_free(comm);
    return res;
}

void comm_async_free(struct ccl_comm *comm)
{
    if (!comm->async)
        return;
    /* A comm whose init ended well is still listed here (the thread leaves
     * it, so that it never touches the comm after publishing it). */
    comm_async_unlist(comm);
    if (!comm->async->joined)
        pthread_join(comm->async->thread, NULL);
    free(comm->async);
    comm->async = NULL;
}

ccl_result_t comm_async_teardown(struct ccl_comm *comm, int abort, const char *who)
{
    if (!comm || !comm_async_unlist(comm))
        return err_set(CCL_ERR_NULL_COMM, "%s: comm is NULL or already destroyed", who);
    if (abort && comm->async->phase == COMM_PHASE_FINALIZE && comm_async_state(comm) == CCL_IN_PROGRESS) {
        /* A finalize still waits on its peers: end those waits now, and
         * tell the peers, as an abort of a live comm does. */
        atomic_store(&comm->aborted, 1);
        connect_poison(comm, NULL);
    } else if (abort) {
        atomic_store(&comm->aborted, 1);
    }
    if (!comm->async->joined)
        pthread_join(comm->async->thread, NULL);
    comm->async->joined = 1;
    if (comm->async->phase == COMM_PHASE_INIT && comm_async_state(comm) == CCL_SUCCESS)
        /* The init ended well before it saw the abort, or this is a
         * destroy: the comm is live, and goes as a live one does (an abort
         * tells its peers). */
        return abort ? ccl_comm_abort(comm) : ccl_comm_destroy(comm);
    /* A failed init, or a finalized comm: its calls have all ended. */
    comm_free(comm);
    return CCL_SUCCESS;
}
