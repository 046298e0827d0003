/*
 * comm.h - making, publishing and ending a communicator (comm.c), its
 * nonblocking init and finalize (comm_config.c), split and shrink
 * (comm_split.c), finalize (comm_finalize.c).
 */
#ifndef CCL_CORE_COMM_H
#define CCL_CORE_COMM_H

#include "core/communicator.h"

/* comm.c: a communicator's life: made, published (live), torn down. */
int comm_is_live(const struct ccl_comm *comm);
/* The error of a call given a comm that is not live: CCL_ERR_NULL_COMM, or
 * CCL_ERR_INVALID_USAGE for a comm whose nonblocking init has not ended
 * well. `who` names the call. */
ccl_result_t comm_not_live(const struct ccl_comm *comm, const char *who);
/* Joins the communicator of id as `rank` of nranks (arguments checked). */
ccl_result_t comm_create(struct ccl_comm **out, int nranks, const ccl_unique_id_t *id, int rank);
/* comm_create in steps, for a nonblocking init: a comm that holds nothing
 * yet, then everything it connects (the slow, collective part; on failure
 * what it made stays for comm_free), then the handle made valid. */
ccl_result_t comm_alloc(struct ccl_comm **out, int nranks, int rank);
ccl_result_t comm_build(struct ccl_comm *comm, const ccl_unique_id_t *id);
ccl_result_t comm_publish(struct ccl_comm *comm);
/* Frees whatever the comm holds, built or not (no peer is told). */
void comm_free(struct ccl_comm *comm);
/* Destroy or abort of a live comm: waits for its calls, then frees. */
ccl_result_t comm_teardown(struct ccl_comm *comm, const char *who);

/* comm_config.c: comms in a phase where they are not live (calls refused
 * by comm_not_live): a nonblocking init until it has ended well, and a
 * comm from ccl_comm_finalize on. */
typedef enum { COMM_PHASE_INIT, COMM_PHASE_FINALIZE } comm_phase_t;
/* 1 when comm is one (ready or not; failed ones stay until destroyed). */
int comm_async_known(const struct ccl_comm *comm);
/* CCL_IN_PROGRESS while its phase's work runs, else that work's result
 * (after an init, CCL_SUCCESS once the comm is live). */
ccl_result_t comm_async_state(const struct ccl_comm *comm);
comm_phase_t comm_async_phase(const struct ccl_comm *comm);
/* Lists comm in the set, in `phase`, state CCL_IN_PROGRESS (joins the
 * ended thread of an earlier nonblocking init). */
ccl_result_t comm_async_enter(struct ccl_comm *comm, comm_phase_t phase);
/* Runs the phase's work in a thread of its own, which ends with
 * comm_async_end and must not touch the comm after it. */
ccl_result_t comm_async_start(struct ccl_comm *comm, void *(*run)(void *));
void comm_async_end(struct ccl_comm *comm, ccl_result_t res);
/* Destroy (abort = 0: waits for the phase's work to end) or abort (cancels
 * it) of such a comm; CCL_ERR_NULL_COMM if comm is not one. */
ccl_result_t comm_async_teardown(struct ccl_comm *comm, int abort, const char *who);
/* Joins the thread and frees its state (comm_free). */
void comm_async_free(struct ccl_comm *comm);
/* comm.c: takes a live comm out of the live set (its calls are refused
 * from then on); 0 if it was not there. */
int comm_unpublish(struct ccl_comm *comm);
/* Waits until every queued and running call of comm has ended. */
void comm_pending_wait(struct ccl_comm *comm);
void comm_pending_add(struct ccl_comm *comm);
void comm_pending_done(struct ccl_comm *comm);
/* Copies this thread's error message into the comm (for ccl_get_last_error). */
void comm_record_error(struct ccl_comm *comm);

#endif
