/*
 * rd.h - the recursive doubling allreduce (rd.c).
 *
 * Its own header, as every algorithm has one, so that a caller includes
 * the algorithms it runs and nothing else (the registry, the simulator).
 */
#ifndef CCL_ALGOS_RD_H
#define CCL_ALGOS_RD_H

#include "algos/schedule.h"

/* Recursive doubling allreduce for small messages: log2(n) exchanges of the
 * whole buffer (non-powers of two fold the extra ranks in first). Fills
 * `out` (reset first) for op->rank. */
ccl_result_t rd_schedule(const sched_op_t *op, sched_t *out);

#endif
