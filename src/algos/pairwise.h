/*
 * pairwise.h - the schedules in which each rank talks straight to each
 * peer (pairwise.c).
 *
 * Its own header, as every algorithm has one, so that a caller includes
 * the algorithms it runs and nothing else (the registry, the simulator).
 */
#ifndef CCL_ALGOS_PAIRWISE_H
#define CCL_ALGOS_PAIRWISE_H

#include "algos/schedule.h"

/* Every rank straight to every peer: alltoall, allgather, gather, scatter,
 * send, recv. Fills `out` (reset first) for op->rank. */
ccl_result_t pairwise_schedule(const sched_op_t *op, sched_t *out);

#endif
