/*
 * coll.h - running checked calls now: the schedule of each, the
 * executor, the bookkeeping around them (coll.c).
 */
#ifndef CCL_CORE_COLL_H
#define CCL_CORE_COLL_H

#include "core/communicator.h"

/* coll.c: runs calls now, on the calling thread (one call, or a group's
 * calls; several comms allowed). Takes every comm's exec_lock. */
ccl_result_t coll_run(const coll_args_t *calls, int ncalls);
ccl_result_t coll_run_owned(coll_args_t *calls, int ncalls);
/* Fills a->send_bytes and a->recv_bytes: what the call reads and writes
 * of the user's buffers on this rank (a->comm must be live). */
void coll_args_size(coll_args_t *a);
/* coll.c: counts a call that is about to run (fault injection, progress
 * beacon); under exec_lock. */
void coll_enter(struct ccl_comm *comm, const coll_args_t *a, uint64_t seq);

#endif
