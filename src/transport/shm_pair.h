/*
 * shm_pair.h - two ranks share the slices of one job through a block in
 * shared memory (the fused 2-rank allreduce, core/exec_pair.c).
 *
 * Both ranks can do any slice: each maps the other's buffers, and whoever
 * takes a slice writes its result into both. Side 0 claims from the front,
 * side 1 from the back, through one atomic word, so no slice is done twice
 * and neither waits for the other to decide how to split: where both run,
 * each does about half; where one is preempted or far from the memory, the
 * other does more. Before either claims, each says whether it could map
 * the other's buffers (ready) or not (declined): only when both are ready
 * do they claim; otherwise both go another way, having written nothing.
 *
 * A side counts the slices it finished in `done` (stores visible first);
 * the job is over for a rank once every slice is claimed and both counts
 * reach their claims. A side whose call fails closes the block: it takes
 * every slice still unclaimed, so the other claims no more, and marks its
 * `done` closed, so the other fails instead of waiting for slices that
 * never come; then it waits for the other's slices in flight, so that
 * nothing writes into its buffers after it returns: for a few seconds at
 * most (exec/host_single_copy.c, exec_wait_copier), as a peer stopped inside a
 * slice longer than that cannot be told from a hung one. A side checks
 * the other's closed mark after each claim, so at most the slice it is in
 * when the other closes is written late.
 *
 * Layout: one cache line per word a side writes, so that the two sides do
 * not steal each other's lines between claims.
 */
#ifndef CCL_TRANSPORT_SHM_PAIR_H
#define CCL_TRANSPORT_SHM_PAIR_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

enum { SHM_PAIR_UNDECIDED = 0, SHM_PAIR_READY = 1, SHM_PAIR_DECLINED = 2 };

/* In a side's `done`: it closed the block (its call failed). */
#define SHM_PAIR_CLOSED (1u << 31)

typedef struct {
    alignas(64) _Atomic uint32_t state;  /* SHM_PAIR_*, written once */
    alignas(64) _Atomic uint32_t state_waiters;
    alignas(64) _Atomic uint32_t done;   /* slices finished, | SHM_PAIR_CLOSED */
    alignas(64) _Atomic uint32_t done_waiters;
} shm_pair_side_t;

typedef struct {
    /* (slices side 0 took) << 32 | (slices side 1 took): side 0 took
     * [0, front), side 1 [n - back, n). */
    alignas(64) _Atomic uint64_t claims;
    shm_pair_side_t side[2];
} shm_pair_t;

/* By the rank that owns the block's memory, before the other can see it. */
void shm_pair_init(shm_pair_t *p);
/* Once per side: whether it can do its share (it mapped the other's
 * buffers). Wakes the other if it waits for this. */
void shm_pair_decide(shm_pair_t *p, int side, int ready);
/* 1 with the side's next slice of n in *slice (side 0: from the front,
 * side 1: from the back), 0 when every slice is taken. */
int shm_pair_claim(shm_pair_t *p, int side, uint32_t n, uint32_t *slice);
/* After finishing a claimed slice, its stores visible first. */
void shm_pair_done(shm_pair_t *p, int side);
/* Slices the side took so far (final once shm_pair_claim returned 0 to
 * either side). */
uint32_t shm_pair_taken(const shm_pair_t *p, int side);
/* A side whose call failed: takes every unclaimed slice, marks its done
 * count closed (waking the other), and returns the slices the other side
 * took, whose `done` it then waits for. */
uint32_t shm_pair_close(shm_pair_t *p, int side, uint32_t n);

#endif
