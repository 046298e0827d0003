/*
 * exec.h - the executors, as the core layer calls them: the host executor
 * (schedules on CPU threads over shm and net connections), the one-shot
 * board and the fused 2-rank pair (direct executors, no schedule), the
 * device executor (schedules over P2P, queued on a CUDA stream), and what
 * every one of them waits through when a peer fails.
 */
#ifndef CCL_EXEC_EXEC_H
#define CCL_EXEC_EXEC_H

#include "core/communicator.h"

#include <stdint.h>
#include <sys/types.h>

/* host.c. One job per communicator: the calls on it, in the order
 * every rank agrees on, each with its schedule. */
typedef struct {
    struct ccl_comm *comm;
    const coll_args_t *calls; /* ncalls, in engine order */
    const sched_t *scheds;    /* ncalls */
    int ncalls;
} exec_job_t;
/* Groups of up to this many calls keep their bookkeeping (core/coll_run.c) and
 * executor state (host.c) on the stack: with a malloc and a free per
 * array, an 8-byte send/recv pair spent a fifth of its time in the
 * allocator. */
#define COMM_GROUP_INLINE 8
/* Runs all jobs to completion, progressing them together (one thread may
 * drive every rank of a ccl_comm_init_all group). On failure *failed is the
 * index of the job that failed. */
ccl_result_t exec_host_run(exec_job_t *jobs, int njobs, int *failed);
/* The one-shot path: every rank reads what it needs from the board. */
ccl_result_t exec_host_oneshot(struct ccl_comm *comm, const coll_args_t *args);
/* Bytes one call puts on the board per rank at most (same on every rank). */
size_t exec_board_bytes(const coll_args_t *args, int nranks);

/* The fused 2-rank allreduce on one host (pair.c, ALGO_PAIR): each
 * rank reduces slices of both inputs into both outputs. *ran is 0 when it
 * did nothing because a rank's buffers are not ccl_mem_alloc ones (or
 * cannot be mapped): both ranks then run another algorithm. */
ccl_result_t exec_host_pair(struct ccl_comm *comm, const coll_args_t *args, int *ran);

/* device.c: queues a collective's schedule on a CUDA stream over the
 * comm's P2P connections (up), after the comm's previous P2P call; the
 * caller holds p2p_queue_lock. exec_device_runs: the collectives it has
 * schedules for. */
int exec_device_runs(sched_coll_t coll);
ccl_result_t exec_device_submit(struct ccl_comm *comm, const coll_args_t *a, void *stream);
/* Calls this process queued through the device executor (for tests). */
extern _Atomic unsigned long exec_device_calls;

/* failure.c: what an executor's wait checks while it sleeps
 * (exec_wait_check, a wait_check_fn): the failures exec_local_failure
 * finds, and CCL_TIMEOUT without progress, naming the rank behind. */
typedef struct {
    struct ccl_comm *comm;
    int peer;            /* -1: every rank (the board) */
    const char *what;    /* "receive from" / "send to" */
    uint64_t idle_since; /* last progress of the whole executor; 0: this wait's start */
    int others;          /* other steps wait too: come back to re-check them */
} exec_wait_ctx_t;
ccl_result_t exec_wait_check(void *arg, uint64_t waited_ns);
/* host_single_copy.c: after a call failed, waits until a peer that copies into
 * our buffer has finished the `want` slices it took (*count), or marked
 * *count closed (bit 31), or died, or a few seconds passed. */
void exec_wait_copier(struct ccl_comm *comm, int peer, const _Atomic uint32_t *count, uint32_t want);

/* failure.c: whether a process of this host has exited (a zombie counts). */
int exec_pid_dead(pid_t pid);
/* failure.c: what ends every wait of this comm, whatever it waits for:
 * abort, a failed network, a local rank that failed (its reason) or exited
 * (only ranks first..last are looked at for that, none when last < first;
 * with closed_ok, not a rank that closed the comm in order first). CCL_SUCCESS, or the error
 * with a message ending "while we waited to <what>". */
ccl_result_t exec_local_failure(struct ccl_comm *comm, int first, int last, int closed_ok, const char *what);

#endif
