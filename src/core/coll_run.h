/*
 * coll_run.h - running checked calls now, on the calling thread (coll_run.c),
 * with the two cross-rank checks a run may include: CCL_CHECK_ARGS before
 * (coll_run_check.c) and CCL_VERIFY after (coll_run_verify.c).
 */
#ifndef CCL_CORE_COLL_RUN_H
#define CCL_CORE_COLL_RUN_H

#include "core/communicator.h"
#include "exec/exec.h"

/* coll_run.c: runs calls now (one call, or a group's calls; several comms
 * allowed). Takes every comm's exec_lock. */
ccl_result_t coll_run(const coll_args_t *calls, int ncalls);
/* The same, on calls the caller lets us change (a stream's queued op): a
 * single call runs without a copy. */
ccl_result_t coll_run_owned(coll_args_t *calls, int ncalls);
/* One call: the fast path of a blocking host call (no allocation). */
ccl_result_t coll_run_one(coll_args_t *a);
/* Fills a->send_bytes and a->recv_bytes: what the call reads and writes
 * of the user's buffers on this rank (a->comm must be live). */
void coll_args_size(coll_args_t *a);
/* Counts a call that is about to run (fault injection, progress beacon);
 * under exec_lock. */
void coll_enter(struct ccl_comm *comm, const coll_args_t *a, uint64_t seq);

/* coll_run_check.c, CCL_CHECK_ARGS=1, before anything is sent: all ranks
 * of each job exchange what they were called with. Runs the exchange
 * through the executor (so it works when one thread drives several ranks). */
ccl_result_t check_args_run(exec_job_t *jobs, int njobs, int *failed);

/* coll_run_verify.c, CCL_VERIFY: whether call a is one to check (counts
 * it; under exec_lock), and the check, run after it succeeded. */
int verify_due(struct ccl_comm *comm, const coll_args_t *a);
ccl_result_t verify_result(struct ccl_comm *comm, const coll_args_t *a, uint64_t seq);

#endif
