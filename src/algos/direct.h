/*
 * direct.h - the one-shot two-rank allreduce (direct.c).
 *
 * Its own header, as every algorithm has one, so that a caller includes
 * the algorithms it runs and nothing else (the registry, the simulator).
 */
#ifndef CCL_ALGOS_DIRECT_H
#define CCL_ALGOS_DIRECT_H

#include "algos/schedule.h"

/* One-shot for 2 ranks: each sends everything and reduces what it
 * receives. Only allreduce with exactly 2 ranks. Fills `out` (reset first)
 * for op->rank. */
ccl_result_t direct_schedule(const sched_op_t *op, sched_t *out);

#endif
