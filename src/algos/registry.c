/*
 * registry.c - the one table of algorithms (registry.h says what a row
 * holds) and the lookups everyone else uses instead of switching over
 * algo_t: names, the collectives each serves, the bandwidth algorithm of
 * a collective, and the schedule of an operation.
 */
#include "algos/registry.h"
#include "algos/chain.h"
#include "algos/direct.h"
#include "algos/hier.h"
#include "algos/pairwise.h"
#include "algos/rd.h"
#include "algos/ring.h"
#include "algos/tree.h"

#include <strings.h>

#define COLLS_P2P (ALGO_COLL(SCHED_P2P_SEND) | ALGO_COLL(SCHED_P2P_RECV))
/* Every collective but send/recv: the board serves them all. */
#define COLLS_NOT_P2P (((1u << SCHED_NUM_COLLS) - 1) & ~COLLS_P2P)
/* Where hier.c has a schedule. When it learns a collective, add it here
 * and give topo/tune.c's tune_hier a case for it. */
#define COLLS_HIER                                                                                      \
    (ALGO_COLL(SCHED_ALLREDUCE) | ALGO_COLL(SCHED_ALLGATHER) | ALGO_COLL(SCHED_REDUCE_SCATTER) |       \
     ALGO_COLL(SCHED_BROADCAST) | ALGO_COLL(SCHED_REDUCE))

const algo_desc_t algo_registry[ALGO_COUNT] = {
    [ALGO_RING] = {
        .id = ALGO_RING, .name = "ring",
        .colls = ALGO_COLL(SCHED_ALLREDUCE) | ALGO_COLL(SCHED_ALLGATHER) | ALGO_COLL(SCHED_REDUCE_SCATTER),
        .bandwidth = ALGO_COLL(SCHED_ALLREDUCE) | ALGO_COLL(SCHED_ALLGATHER) | ALGO_COLL(SCHED_REDUCE_SCATTER),
        .schedule = ring_schedule, .cost = ALGO_COST_RING,
    },
    [ALGO_DIRECT] = {
        .id = ALGO_DIRECT, .name = "direct",
        .colls = ALGO_COLL(SCHED_ALLREDUCE),
        .schedule = direct_schedule, .cost = ALGO_COST_DIRECT,
        .min_ranks = 2, .max_ranks = 2,
    },
    [ALGO_ONESHOT] = {
        .id = ALGO_ONESHOT, .name = "oneshot", .alias = "one-shot",
        .colls = COLLS_NOT_P2P,
        .run = ALGO_RUN_BOARD, .cost = ALGO_COST_BOARD,
        /* The board serves one call at a time, so grouped calls never use it. */
        .where = ALGO_ONE_NODE | ALGO_UNGROUPED | ALGO_BOARD_FITS,
    },
    [ALGO_CHAIN] = {
        .id = ALGO_CHAIN, .name = "chain",
        .colls = ALGO_COLL(SCHED_BROADCAST) | ALGO_COLL(SCHED_REDUCE),
        .bandwidth = ALGO_COLL(SCHED_BROADCAST) | ALGO_COLL(SCHED_REDUCE),
        .schedule = chain_schedule, .cost = ALGO_COST_CHAIN,
    },
    [ALGO_PAIRWISE] = {
        .id = ALGO_PAIRWISE, .name = "pairwise",
        .colls = ALGO_COLL(SCHED_ALLGATHER) | ALGO_COLL(SCHED_BROADCAST) | ALGO_COLL(SCHED_ALLTOALL) |
                 ALGO_COLL(SCHED_GATHER) | ALGO_COLL(SCHED_SCATTER) | COLLS_P2P,
        .bandwidth = ALGO_COLL(SCHED_ALLTOALL) | ALGO_COLL(SCHED_GATHER) | ALGO_COLL(SCHED_SCATTER) | COLLS_P2P,
        .schedule = pairwise_schedule, .cost = ALGO_COST_PAIRWISE,
    },
    [ALGO_TREE] = {
        .id = ALGO_TREE, .name = "tree",
        .colls = ALGO_COLL(SCHED_ALLREDUCE),
        .schedule = tree_schedule, .cost = ALGO_COST_TREE,
    },
    [ALGO_RD] = {
        .id = ALGO_RD, .name = "rd", .alias = "recursive_doubling",
        .colls = ALGO_COLL(SCHED_ALLREDUCE),
        .schedule = rd_schedule, .cost = ALGO_COST_RD,
    },
    [ALGO_HIER] = {
        .id = ALGO_HIER, .name = "hier", .alias = "hierarchical",
        .colls = COLLS_HIER,
        .schedule = hier_schedule, .cost = ALGO_COST_HIER,
        .where = ALGO_MANY_NODES,
    },
    [ALGO_PAIR] = {
        .id = ALGO_PAIR, .name = "pair",
        .colls = ALGO_COLL(SCHED_ALLREDUCE),
        .run = ALGO_RUN_PAIR, .cost = ALGO_COST_PAIR,
        /* Single copy of whole buffers: never grouped (a group's steps go
         * by slices), from the single-copy size. Whether both ranks'
         * buffers are ccl_mem_alloc ones only the call finds out (the
         * executor declines). */
        .min_ranks = 2, .max_ranks = 2,
        .where = ALGO_ONE_NODE | ALGO_UNGROUPED | ALGO_SINGLE_COPY,
    },
};

const char *algo_name(algo_t algo)
{
    const algo_desc_t *d = algo_desc(algo);
    return d ? d->name : "?";
}

int algo_lookup(const char *name)
{
    for (int a = 0; a < ALGO_COUNT; a++)
        if (!strcasecmp(name, algo_registry[a].name))
            return a;
    for (int a = 0; a < ALGO_COUNT; a++)
        if (algo_registry[a].alias && !strcasecmp(name, algo_registry[a].alias))
            return a;
    return -1;
}

unsigned algo_serving(sched_coll_t coll)
{
    unsigned mask = 0;
    for (int a = 0; a < ALGO_COUNT; a++)
        if (algo_registry[a].colls & ALGO_COLL(coll))
            mask |= ALGO_BIT(a);
    return mask;
}

algo_t algo_bandwidth(sched_coll_t coll)
{
    for (int a = 0; a < ALGO_COUNT; a++)
        if (algo_registry[a].bandwidth & ALGO_COLL(coll))
            return (algo_t)a;
    return ALGO_RING;
}

unsigned algo_bandwidth_mask(void)
{
    unsigned mask = 0;
    for (int a = 0; a < ALGO_COUNT; a++)
        if (algo_registry[a].bandwidth)
            mask |= ALGO_BIT(a);
    return mask;
}

ccl_result_t algo_schedule(const sched_op_t *op, algo_t algo, sched_t *out)
{
    const algo_desc_t *d = algo_desc(algo);
    return (d && d->schedule ? d->schedule : ring_schedule)(op, out);
}
