/*
 * chain.h - the pipelined chain schedules (chain.c): broadcast and reduce.
 *
 * Its own header, as every algorithm has one, so that a caller includes
 * the algorithms it runs and nothing else; the device executor runs the
 * chain for its rooted collectives without the registry.
 */
#ifndef CCL_ALGOS_CHAIN_H
#define CCL_ALGOS_CHAIN_H

#include "algos/schedule.h"

/* Pipelined chain from/to the root: broadcast, reduce. Fills `out` (reset
 * first) for op->rank. */
ccl_result_t chain_schedule(const sched_op_t *op, sched_t *out);

#endif
