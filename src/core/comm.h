/*
 * comm.h - making, publishing and ending a communicator (comm.c), its
 * nonblocking init and finalize (comm_config.c), split and shrink
 * (comm_split.c), finalize (comm_finalize.c).
 */
#ifndef CCL_CORE_COMM_H
#define CCL_CORE_COMM_H

#include "core/comm_state.h"

/* Joins the communicator of id as `rank` of nranks (arguments checked). */
ccl_result_t comm_create(struct ccl_comm **out, int nranks, const ccl_unique_id_t *id, int rank);
/* comm_create in steps, for a nonblocking init: a comm that holds nothing
 * yet, then everything it connects (the slow, collective part; on failure
 * what it made stays for comm_free), then the handle made valid
 * (comm_publish, comm_state.h). */
ccl_result_t comm_alloc(struct ccl_comm **out, int nranks, int rank);
ccl_result_t comm_build(struct ccl_comm *comm, const ccl_unique_id_t *id);
/* Frees whatever the comm holds, built or not (no peer is told). */
void comm_free(struct ccl_comm *comm);
/* Destroy or abort of a live comm: waits for its calls, then frees. */
ccl_result_t comm_teardown(struct ccl_comm *comm, const char *who);

/* comm_config.c: the work of a nonblocking phase (comm_state.h's async
 * set). Lists comm in the set, in `phase`, state CCL_IN_PROGRESS (joins
 * the ended thread of an earlier nonblocking init). */
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

#endif
