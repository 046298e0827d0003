/*
 * tuner.c - picks the algorithm for each call.
 *
 * With the ring as the only bandwidth algorithm, the choice today is whether
 * a two-rank allreduce is small enough for the one-hop direct algorithm,
 * which must fit whole in the FIFO (both ranks send before receiving).
 * Latency wins below a few slots; the ring's halved traffic wins above.
 * CCL_ALGO=ring|direct overrides where the algorithm applies.
 */
#include "core/comm.h"
#include "core/param.h"

#include <string.h>
#include <strings.h>

/* Up to here a two-rank allreduce goes direct (measured on 2-core VMs with
 * ccl-perf: direct is faster up to ~64 KiB; see perf/RESULTS.md). */
#define TUNER_DIRECT_MAX_BYTES (64 * 1024)

const char *tuner_algo_name(algo_t algo)
{
    return algo == ALGO_DIRECT ? "direct" : "ring";
}

algo_t tuner_pick(const struct ccl_comm *comm, sched_coll_t coll, size_t bytes)
{
    int direct_ok = coll == SCHED_ALLREDUCE && comm->nranks == 2 &&
                    bytes <= (size_t)comm->nslots * comm->slot_size;
    const char *forced = param_str(PARAM_ALGO);
    if (forced[0]) {
        if (!strcasecmp(forced, "direct") && direct_ok)
            return ALGO_DIRECT;
        if (!strcasecmp(forced, "ring"))
            return ALGO_RING;
    }
    return (direct_ok && bytes <= TUNER_DIRECT_MAX_BYTES) ? ALGO_DIRECT : ALGO_RING;
}
