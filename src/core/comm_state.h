/*
 * comm_state.h - is a communicator handle usable, and if not why; its
 * count of calls in flight; its last error.
 *
 * Every call of the API asks these questions before anything else, and the
 * modules that run calls (coll_run, streams, groups, P2P) need them too,
 * while the life cycle (comm.h) needs those modules to build and end a
 * comm. Keeping the answers in a module of their own, below all of them,
 * is what keeps core free of include loops.
 */
#ifndef CCL_CORE_COMM_STATE_H
#define CCL_CORE_COMM_STATE_H

#include "core/communicator.h"

#include <pthread.h>

/* ---- the live set: comms whose init has ended well, until destroy ---- */
int comm_is_live(const struct ccl_comm *comm);
/* Makes comm live (its calls are accepted from then on). */
ccl_result_t comm_publish(struct ccl_comm *comm);
/* Takes a live comm out of the live set (its calls are refused from then
 * on); 0 if it was not there. */
int comm_unpublish(struct ccl_comm *comm);
/* The error of a call given a comm that is not live: CCL_ERR_NULL_COMM, or
 * CCL_ERR_INVALID_USAGE for a comm whose nonblocking init has not ended
 * well or that was finalized. `who` names the call. */
ccl_result_t comm_not_live(const struct ccl_comm *comm, const char *who);

/* ---- the async set: comms in a phase where they are not live ----
 * A nonblocking init until it has ended well, and a comm from
 * ccl_comm_finalize on (comm_config.c, comm_finalize.c run the phases). */
typedef enum { COMM_PHASE_INIT, COMM_PHASE_FINALIZE } comm_phase_t;
struct comm_async {
    pthread_t thread;
    int joined;
    comm_phase_t phase;
    ccl_unique_id_t id;
    int device;        /* the caller's current GPU, -1: none (the thread takes it) */
    _Atomic int state; /* ccl_result_t: CCL_IN_PROGRESS, then init's result */
};
/* 1 when comm is one (ready or not; failed ones stay until destroyed). */
int comm_async_known(const struct ccl_comm *comm);
/* Lists comm in the set (no change if it is there already). */
ccl_result_t comm_async_list(struct ccl_comm *comm);
/* Takes comm out of the set; 0 if it was not there. */
int comm_async_unlist(struct ccl_comm *comm);
/* CCL_IN_PROGRESS while its phase's work runs, else that work's result
 * (after an init, CCL_SUCCESS once the comm is live). */
ccl_result_t comm_async_state(const struct ccl_comm *comm);
comm_phase_t comm_async_phase(const struct ccl_comm *comm);

/* ---- calls in flight, which a destroy waits for ---- */
void comm_pending_add(struct ccl_comm *comm);
void comm_pending_done(struct ccl_comm *comm);
/* Waits until every queued and running call of comm has ended. */
void comm_pending_wait(struct ccl_comm *comm);

/* Copies this thread's error message into the comm (for ccl_get_last_error). */
void comm_record_error(struct ccl_comm *comm);

#endif
