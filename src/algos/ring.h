/*
 * ring.h - the ring schedules (ring.c): allreduce, allgather and
 * reduce-scatter.
 *
 * Its own header so that what calls the ring says so: besides the
 * registry's row, the device executor (exec/device.c) and the argument
 * check's allgather (core/coll_run_check.c) run the ring without the tuner,
 * and schedule.h stays the schedule's data alone, which every algorithm
 * shares.
 */
#ifndef CCL_ALGOS_RING_H
#define CCL_ALGOS_RING_H

#include "algos/schedule.h"

/* Fills `out` (reset first) for op->rank: allreduce, allgather,
 * reduce-scatter. */
ccl_result_t ring_schedule(const sched_op_t *op, sched_t *out);

#endif
