/*
 * tuner.c - picks the algorithm for each call.
 *
 * Small inputs on a single host go one-shot through the shared board (one
 * synchronisation, no sequential hops); a two-rank allreduce up to 8 MiB
 * goes direct (each rank sends all and reduces all: one hop); everything
 * else takes the bandwidth algorithm of its collective: the ring
 * (allreduce, allgather, reduce-scatter), the pipelined chain (broadcast,
 * reduce) or pairwise exchange (alltoall, gather, scatter, send/recv).
 * CCL_ALGO=ring|direct|oneshot|tree|rd|hier overrides where the algorithm
 * applies ("ring", "chain" and "pairwise" all mean: the bandwidth
 * algorithm; tree and rd (recursive doubling) exist for allreduce and
 * wait for the multi-node cost model to be chosen on their own).
 */
#include "core/comm.h"
#include "core/param.h"

#include <string.h>
#include <strings.h>

/* Up to here a two-rank allreduce goes direct. Measured with ccl-perf on a
 * 2-core VM, buffers rotated as nccl-tests does (so mostly cold): direct
 * takes about half the ring's time at 128-512 KiB (two dependent phases
 * per slice instead of three) and stays ahead of the by-value ring up to
 * 8 MiB (7-8 vs 5-6 GB/s busbw); above, the ring (by value, and from
 * CCL_SINGLE_COPY_THRESHOLD = 32 MiB by reference) is as fast or faster. */
#define TUNER_DIRECT_MAX_BYTES (8 * 1024 * 1024)

const char *tuner_algo_name(algo_t algo)
{
    static const char *names[ALGO_COUNT] = {"ring", "direct", "oneshot", "chain", "pairwise", "tree", "rd", "hier"};
    return (unsigned)algo < ALGO_COUNT ? names[algo] : "?";
}

/* The bandwidth algorithm each collective has. */
static algo_t tuner_default(sched_coll_t coll)
{
    switch (coll) {
    case SCHED_BROADCAST:
    case SCHED_REDUCE:
        return ALGO_CHAIN;
    case SCHED_ALLTOALL:
    case SCHED_GATHER:
    case SCHED_SCATTER:
    case SCHED_P2P_SEND:
    case SCHED_P2P_RECV:
        return ALGO_PAIRWISE;
    default:
        return ALGO_RING;
    }
}

algo_t tuner_pick(const struct ccl_comm *comm, sched_coll_t coll, size_t bytes, int grouped)
{
    /* bytes: what the largest rank puts on the board (exec_board_bytes).
     * The board serves one call at a time, so grouped calls never use it. */
    int p2p = coll == SCHED_P2P_SEND || coll == SCHED_P2P_RECV;
    int oneshot_ok = !grouped && !p2p && comm->board.hdr != NULL && bytes <= comm->board.slot_bytes;
    /* Execution by slice rounds lets direct stream any size through the
     * FIFO; it is only a question of speed. */
    int direct_ok = coll == SCHED_ALLREDUCE && comm->nranks == 2;
    algo_t fallback = tuner_default(coll);
    const char *forced = param_str(PARAM_ALGO);
    if (forced[0]) {
        if (!strcasecmp(forced, "direct") && direct_ok)
            return ALGO_DIRECT;
        if (!strcasecmp(forced, "oneshot") && oneshot_ok)
            return ALGO_ONESHOT;
        if (!strcasecmp(forced, "tree") && coll == SCHED_ALLREDUCE)
            return ALGO_TREE;
        if (!strcasecmp(forced, "rd") && coll == SCHED_ALLREDUCE)
            return ALGO_RD;
        /* Hierarchical: allreduce across nodes (schedules get a layout only then). */
        if (!strcasecmp(forced, "hier") && coll == SCHED_ALLREDUCE && comm->layout.nnodes > 1)
            return ALGO_HIER;
        if (!strcasecmp(forced, "ring") || !strcasecmp(forced, "chain") || !strcasecmp(forced, "pairwise"))
            return fallback; /* each collective has one of these */
    }
    if (oneshot_ok)
        return ALGO_ONESHOT;
    return (direct_ok && bytes <= TUNER_DIRECT_MAX_BYTES) ? ALGO_DIRECT : fallback;
}
