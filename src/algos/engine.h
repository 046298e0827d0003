/*
 * engine.h - the progress rules shared by every executor and the simulator.
 *
 * An executor runs one or more "jobs" (one per communicator a call or group
 * touches); a job runs one or more scheduled operations (the calls of a
 * group on that communicator). The engine decides which slice of which step
 * may run next; the executor supplies a function that tries to run it.
 *
 * The rules:
 *   - rounds: round k runs slice k of every step (slice k - lag of a step
 *     that lags, sched_step_t.lag), and comes before round k+1 (see
 *     sched_rounds: this bounds what any FIFO must hold). With a window of
 *     W rounds (eng_job_t.window), rounds k..k+W-1 may run while round k
 *     is not complete: a link that waits for the end of round k (a reply
 *     over a slow network) carries round k+1 meanwhile;
 *   - dependencies: a step depends only on the same slice of the steps
 *     before it in its operation (unless the schedule is
 *     steps_independent), so slice x of a step runs after slice x-1 of it
 *     and after slice x of every earlier step that has one;
 *   - on each connection, messages go in (round, operation, step) order on
 *     both sides: a step may not use a connection while an earlier step of
 *     the round, or of an earlier round of the window, that uses it is
 *     pending. Sender and receiver therefore agree on what each slot
 *     holds, however the other steps interleave (which needs a message's
 *     two steps to lag alike);
 *   - a step whose connection is not ready is skipped, so that one blocked
 *     peer does not stop work that does not depend on it (grouped send/recv
 *     patterns where every rank sends and receives at once).
 */
#ifndef CCL_ALGOS_ENGINE_H
#define CCL_ALGOS_ENGINE_H

#include "algos/schedule.h"

typedef struct {
    const sched_t *sched;
    size_t elem_size;
    size_t *next; /* per step: slices run so far (engine-owned) */
    int first;    /* steps before this one are done in the current round */
} eng_op_t;

typedef struct {
    eng_op_t *ops;
    int nops;
    int nranks;
    size_t slot_bytes;
    size_t round, rounds;
    /* Rounds that may run at once (eng_job_setup sets 1; see the rules). */
    size_t window;
    int lagged;             /* some step has a lag (sched_step_t.lag) */
    unsigned char *blocked; /* 2*nranks connection flags, per sweep */
} eng_job_t;

/* Runs slice `slice` of step `st` of operation `op`: returns 1 when it ran,
 * 0 when a connection is not ready (nothing was changed), -1 on error. */
typedef int (*eng_try_fn)(void *ctx, int op, const sched_step_t *st, size_t slice);

/* Memory reused across calls: the caller keeps *arena and *cap (start with
 * NULL/0) and frees *arena when done with it. */
ccl_result_t eng_job_setup(eng_job_t *job, eng_op_t *ops, int nops, int nranks, size_t slot_bytes,
                           void **arena, size_t *cap);
static inline int eng_job_done(const eng_job_t *job) { return job->round >= job->rounds; }

typedef struct {
    long ran;       /* slices run in this sweep */
    int wait_op;    /* first step found not ready, -1 if none */
    int wait_step;
    int nwaiting;   /* steps found not ready */
} eng_sweep_t;

/* Runs every slice that may run now, moving on to later rounds as each
 * completes. Returns -1 when `try` failed. */
int eng_sweep(eng_job_t *job, eng_try_fn try, void *ctx, eng_sweep_t *out);

/* The static order, for an executor that must fix the order of all its
 * slices in advance (the device executor queues a whole call on a CUDA
 * stream; it runs one-host schedules only, which have no lags: only
 * hier's across nodes have them): round k = 0, 1, ..., and within a round every step that has a
 * slice k, in step order. This is the order eng_sweep follows for one
 * operation whose slices are always ready; without the skipping, it is
 * free of deadlock only where the FIFOs are deep enough for the schedule
 * (2 slots for the ring and chain schedules: tests/sim/test_sim_static.c
 * checks it for every rank count). Start with *round = 0, *step = -1;
 * returns 1 with the next (round, step), 0 after the last. */
int eng_static_next(const sched_t *s, size_t elem_size, size_t slot_bytes, size_t rounds, size_t *round,
                    int *step);

#endif
