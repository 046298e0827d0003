/*
 * registry.h - the algorithm registry: one descriptor per algorithm, the
 * one place that says what an algorithm is.
 *
 * A descriptor names the algorithm for CCL_ALGO, the collectives it serves,
 * how it runs (a schedule generator of this folder, or a direct executor
 * that the core maps to its call: the one-shot board, the fused pair),
 * where it applies (rank and node counts, grouped calls, the board and
 * single-copy sizes) and which of the cost model's formulas prices it.
 * The tuner (topo/tune*.c), CCL_ALGO's parser, ccl-info --explain and the
 * dispatch in core/coll_run.c all read it; adding a schedule algorithm is its
 * file and its header here plus one row in registry.c (and an algo_t
 * below, which the row's index is).
 *
 * Why a cost kind and not a cost function: the formulas share one frame
 * calibrated on the host executor and the net transport (per-slice
 * overheads, shared cores, NIC contention; topo/tune.c) and the layout
 * reductions tune_model_init makes (ring crossings, tree depths, recursive
 * doubling partners). Moving them here would put executor and transport
 * measurements below those layers; a kind keeps algos/ pure schedule code,
 * and a new algorithm can register with ALGO_COST_NONE (it runs when
 * CCL_ALGO asks for it) before it has a formula.
 */
#ifndef CCL_ALGOS_REGISTRY_H
#define CCL_ALGOS_REGISTRY_H

#include "algos/schedule.h"

/* Every algorithm; the registry's rows, in this order. The order is the
 * tuner's tie-break (the lower id wins an equal cost) and ccl-info's
 * column order, so a new one goes at the end. ring, chain and pairwise
 * are the bandwidth algorithms of their collectives (ring: allreduce,
 * allgather, reduce-scatter; chain: broadcast, reduce; pairwise: the
 * rest). */
typedef enum {
    ALGO_RING = 0,
    ALGO_DIRECT,   /* 2-rank allreduce: each rank sends all, reduces all */
    ALGO_ONESHOT,  /* single host, small: through the shared board */
    ALGO_CHAIN,    /* pipelined chain broadcast and reduce */
    ALGO_PAIRWISE, /* every rank to every peer: alltoall, gather, scatter, p2p, allgather */
    ALGO_TREE,     /* double binary tree allreduce */
    ALGO_RD,       /* recursive doubling allreduce */
    ALGO_HIER,     /* hierarchical allreduce (several nodes) */
    ALGO_PAIR,     /* 2-rank allreduce on one host, single copy: both reduce, each into both outputs */
    ALGO_COUNT
} algo_t;

#define ALGO_BIT(a) (1u << (a))
#define ALGO_ALL ((1u << ALGO_COUNT) - 1)
#define ALGO_COLL(c) (1u << (c)) /* a collective in a descriptor's masks */

/* How an algorithm runs. A direct one has no schedule: the core calls its
 * executor (core/coll_run.c), which may decline (the pair, when a buffer is
 * not a ccl_mem_alloc one); the call then runs what a group would. */
typedef enum {
    ALGO_RUN_SCHEDULE = 0, /* schedule() for the host or device executor */
    ALGO_RUN_BOARD,        /* direct: the one-shot board (one call at a time) */
    ALGO_RUN_PAIR,         /* direct: the fused 2-rank single-copy allreduce */
} algo_run_t;

/* Which formula of the cost model (topo/tune.c) prices the algorithm. */
typedef enum {
    ALGO_COST_NONE = 0, /* not modelled: runs only when CCL_ALGO asks for it */
    ALGO_COST_RING,
    ALGO_COST_DIRECT,
    ALGO_COST_BOARD,
    ALGO_COST_CHAIN,
    ALGO_COST_PAIRWISE,
    ALGO_COST_TREE,
    ALGO_COST_RD,
    ALGO_COST_HIER,
    ALGO_COST_PAIR,
    ALGO_COST_COUNT
} algo_cost_t;

/* Where an algorithm applies, besides its collectives and rank counts. */
#define ALGO_ONE_NODE 0x1    /* all ranks on one node */
#define ALGO_MANY_NODES 0x2  /* more than one node */
#define ALGO_UNGROUPED 0x4   /* never inside a group (its executor serves one call at a time) */
#define ALGO_BOARD_FITS 0x8  /* what a rank posts fits the one-shot board */
#define ALGO_SINGLE_COPY 0x10 /* from the single-copy size up */

typedef struct {
    algo_t id;             /* its index in the registry */
    const char *name;      /* for CCL_ALGO, logs and ccl-info */
    const char *alias;     /* another name CCL_ALGO takes, or NULL */
    unsigned colls;        /* collectives it serves (ALGO_COLL bits) */
    unsigned bandwidth;    /* collectives whose bandwidth algorithm it is: what "ring" in CCL_ALGO means there */
    algo_run_t run;
    ccl_result_t (*schedule)(const sched_op_t *op, sched_t *out); /* ALGO_RUN_SCHEDULE; NULL for direct ones */
    algo_cost_t cost;
    int min_ranks, max_ranks; /* 0: no bound */
    unsigned where;        /* ALGO_ONE_NODE ... */
} algo_desc_t;

/* The registry, indexed by algo_t. */
extern const algo_desc_t algo_registry[ALGO_COUNT];

/* The row of algo; NULL outside the registry. */
static inline const algo_desc_t *algo_desc(algo_t algo)
{
    return (unsigned)algo < ALGO_COUNT ? &algo_registry[algo] : NULL;
}
const char *algo_name(algo_t algo); /* "?" outside the registry */
/* The algorithm a name or alias (any case) names; -1 if none. */
int algo_lookup(const char *name);
/* The algorithms that serve coll (ALGO_BIT mask). */
unsigned algo_serving(sched_coll_t coll);
/* The bandwidth algorithm of a collective, and the mask of all of them. */
algo_t algo_bandwidth(sched_coll_t coll);
unsigned algo_bandwidth_mask(void);
/* op's schedule by algo. A direct algorithm has none: asked for one (the
 * peers it may use), it gets the ring's, as does an id outside the
 * registry; the ring is every algorithm's fallback. */
ccl_result_t algo_schedule(const sched_op_t *op, algo_t algo, sched_t *out);

#endif
