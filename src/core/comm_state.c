/*
 * comm_state.c - the sets that say which communicator handles are usable
 * (live, or in a nonblocking phase), the count of calls in flight that a
 * destroy waits for, and a comm's last error. See comm_state.h for why
 * these stand apart from the life cycle in comm.c.
 */
#include "core/comm_state.h"
#include "core/handle.h"
#include "base/err.h"
#include "exec/lock.h"

#include <stdio.h>
#include <time.h>

static handle_set_t comm_live = HANDLE_SET_INIT;
/* Each thread's last lookup, kept until a comm is added or removed: the
 * per-call check is then two loads instead of a mutex round trip
 * (measured: the whole call overhead was ~0.2 us). */
static __thread handle_memo_t comm_memo;

int comm_is_live(const struct ccl_comm *comm)
{
    return comm && handle_contains_memo(&comm_live, &comm_memo, comm);
}

ccl_result_t comm_not_live(const struct ccl_comm *comm, const char *who)
{
    if (comm && comm_async_known(comm) && comm_async_phase(comm) == COMM_PHASE_FINALIZE)
        return err_set(CCL_ERR_INVALID_USAGE, "%s: the communicator was finalized (ccl_comm_finalize); only "
                       "ccl_comm_destroy or ccl_comm_abort may follow", who);
    if (comm && comm_async_known(comm) && comm_async_state(comm) == CCL_IN_PROGRESS)
        return err_set(CCL_ERR_INVALID_USAGE, "%s: the communicator is not ready: its nonblocking init is still "
                       "running (poll ccl_comm_get_async_error until CCL_SUCCESS)", who);
    if (comm && comm_async_known(comm))
        return err_set(CCL_ERR_INVALID_USAGE, "%s: the communicator's nonblocking init failed (%s); destroy it",
                       who, comm->last_error);
    return err_set(CCL_ERR_NULL_COMM, "%s: comm is NULL or destroyed", who);
}

void comm_record_error(struct ccl_comm *comm)
{
    snprintf(comm->last_error, sizeof comm->last_error, "%s", err_message());
}

/* How often a destroy waiting for calls looks again without a wake-up
 * (comm_pending_done). */
#define COMM_PENDING_POLL_MS 10

void comm_pending_add(struct ccl_comm *comm)
{
    atomic_fetch_add(&comm->pending, 1);
}

/* The decrement is our last touch of the comm: a destroy may free it as
 * soon as the count is 0. Once a destroy waits, the decrement happens
 * under its lock (it cannot free the comm before we let go) and wakes it;
 * one that starts waiting just after we looked gets no wake-up but looks
 * again within COMM_PENDING_POLL_MS. */
void comm_pending_done(struct ccl_comm *comm)
{
    if (atomic_load(&comm->draining)) {
        pthread_mutex_lock(&comm->pending_lock);
        atomic_fetch_sub(&comm->pending, 1);
        pthread_cond_broadcast(&comm->pending_cond);
        pthread_mutex_unlock(&comm->pending_lock);
        return;
    }
    atomic_fetch_sub(&comm->pending, 1);
}

ccl_result_t comm_publish(struct ccl_comm *comm)
{
    if (handle_add(&comm_live, comm, 0) != 0)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    return CCL_SUCCESS;
}

int comm_unpublish(struct ccl_comm *comm)
{
    return handle_remove(&comm_live, comm, NULL);
}

void comm_pending_wait(struct ccl_comm *comm)
{
    atomic_store(&comm->draining, 1);
    /* Blocking host calls are not counted (coll_submit): one still running
     * holds the lock, and counts itself before it lets go if it has more
     * to do with the comm (coll_run_one). So the lock first, then the
     * count. */
    exec_lock(&comm->exec_lock);
    exec_unlock(&comm->exec_lock);
    pthread_mutex_lock(&comm->pending_lock);
    while (atomic_load(&comm->pending) > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += COMM_PENDING_POLL_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&comm->pending_cond, &comm->pending_lock, &until);
    }
    pthread_mutex_unlock(&comm->pending_lock);
}

static handle_set_t comm_async_set = HANDLE_SET_INIT;

int comm_async_known(const struct ccl_comm *comm)
{
    return comm && handle_contains(&comm_async_set, comm);
}

ccl_result_t comm_async_list(struct ccl_comm *comm)
{
    if (!handle_contains(&comm_async_set, comm) && handle_add(&comm_async_set, comm, 0) != 0)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    return CCL_SUCCESS;
}

int comm_async_unlist(struct ccl_comm *comm)
{
    return handle_remove(&comm_async_set, comm, NULL);
}

ccl_result_t comm_async_state(const struct ccl_comm *comm)
{
    return (ccl_result_t)atomic_load(&comm->async->state);
}

comm_phase_t comm_async_phase(const struct ccl_comm *comm)
{
    return comm->async->phase;
}
