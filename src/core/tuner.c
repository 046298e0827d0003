/*
 * tuner.c - picks the algorithm for each call.
 *
 * Small inputs on a single host go one-shot through the shared board (one
 * synchronisation, no sequential hops); a two-rank allreduce up to 8 MiB
 * goes direct (each rank sends all and reduces all: one hop); everything
 * else takes the bandwidth-optimal ring.
 * CCL_ALGO=ring|direct|oneshot overrides where the algorithm applies.
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
    static const char *names[ALGO_COUNT] = {"ring", "direct", "oneshot"};
    return (unsigned)algo < ALGO_COUNT ? names[algo] : "?";
}

algo_t tuner_pick(const struct ccl_comm *comm, sched_coll_t coll, size_t bytes)
{
    /* bytes is the per-rank input; the board holds one input per rank. */
    int oneshot_ok = comm->board.hdr != NULL && bytes <= comm->board.slot_bytes;
    /* Execution by slice rounds lets direct stream any size through the
     * FIFO; it is only a question of speed. */
    int direct_ok = coll == SCHED_ALLREDUCE && comm->nranks == 2;
    const char *forced = param_str(PARAM_ALGO);
    if (forced[0]) {
        if (!strcasecmp(forced, "direct") && direct_ok)
            return ALGO_DIRECT;
        if (!strcasecmp(forced, "oneshot") && oneshot_ok)
            return ALGO_ONESHOT;
        if (!strcasecmp(forced, "ring"))
            return ALGO_RING;
    }
    if (oneshot_ok)
        return ALGO_ONESHOT;
    return (direct_ok && bytes <= TUNER_DIRECT_MAX_BYTES) ? ALGO_DIRECT : ALGO_RING;
}
