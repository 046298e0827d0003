/*
 * tune.h - the tuner's cost model: for one collective of a given size on a
 * given node layout, what each algorithm costs and which is cheapest.
 *
 * Pure arithmetic over plain inputs: no communicator, no I/O. The core
 * layer fills the inputs once at comm init (topology, CCL_* parameters,
 * agreed by all ranks) and asks per call (core/tuner.c); ccl-info asks for
 * hypothetical layouts without running a job; the unit tests ask directly.
 * The formulas, and why they have the shape they have, are at the top of
 * tune.c.
 *
 * Sizes are nccl-tests' "size" of a call: the buffer of allreduce,
 * broadcast, reduce and send/recv; the whole output of allgather and
 * gather (nranks blocks); the whole input of reduce-scatter, alltoall and
 * scatter (nranks blocks). Costs are microseconds.
 */
#ifndef CCL_TOPO_TUNE_H
#define CCL_TOPO_TUNE_H

#include "algos/registry.h"
#include "algos/schedule.h"
#include "ccl.h"

#include <stddef.h>

/* The algorithms are the registry's (algos/registry.h); these names stay
 * for the tuner's callers. */
#define TUNE_BIT(a) ALGO_BIT(a)
#define TUNE_ALL ALGO_ALL

/* What links and the executor cost. Bandwidths in GB/s (10^9 bytes per
 * second), latencies in microseconds. */
typedef struct {
    double shm_bw;      /* one pass of one rank over data in memory: a copy or a reduce */
    double shm_lat;     /* one hop between ranks of a node: slot published to slot seen */
    double net_bw;      /* one node's NIC, each direction, shared by the node's ranks */
    double net_lat;     /* one hop between nodes through the net transport */
    double cores;       /* cores a node's ranks share (a share of a machine's); 0: one per rank */
    size_t slot_bytes;  /* pipelining unit: one FIFO slot */
    size_t board_bytes; /* per-rank capacity of the one-shot board; 0: no board */
    size_t single_copy_bytes; /* from this size a local peer's ccl_mem_alloc buffer is read in place; 0: never
                               * (automatic: reduce has a larger figure of its own, core/tuner.c) */
    int single_copy_auto;     /* ... as CCL_SINGLE_COPY_THRESHOLD=-1 worked it out */
} tune_links_t;

/* Cap on recursive doubling exchanges the model tracks (2^31 ranks). */
#define TUNE_RD_MAX 31

/* The inputs of the model: the links and the layout reduced to the numbers
 * the algorithms' costs need (tune_model_init derives them). */
typedef struct {
    tune_links_t link;
    unsigned avail;     /* algorithms the communicator can run (TUNE_BIT) */
    int nranks, nnodes;
    int max_local, min_local; /* ranks on the fullest and the emptiest node */
    /* ring 0 -> 1 -> ... -> n-1 -> 0 (also the chain's order) */
    int ring_cross;     /* edges between two nodes */
    int ring_flows;     /* most of them leaving one node (they share its NIC) */
    /* double binary tree */
    int tree_depth[2];  /* hops of the longest leaf-to-root path of each tree */
    int tree_net[2];    /* most inter-node hops on one such path */
    int tree_flows;     /* most inter-node edges leaving one node, both trees, up and down */
    /* recursive doubling over p = 2^rd_logp ranks, rd_extra folded in */
    int rd_logp, rd_extra;
    int rd_flows[TUNE_RD_MAX]; /* exchange k: most ranks of one node whose partner is elsewhere */
    int rd_fold_flows;  /* the same for the fold and the final hand-back */
    int a2a_flows;      /* most (sender, receiver) pairs leaving one node */
} tune_model_t;

/* Fills m from the links and the layout (NULL: all ranks on one node).
 * Every algorithm starts available. */
ccl_result_t tune_model_init(tune_model_t *m, const tune_links_t *links, int nranks,
                             const sched_layout_t *layout);

/* Whether algo can run coll of this size here (schedule exists, layout and
 * size fit, the comm has it); grouped calls never use the board. */
int tune_applies(const tune_model_t *m, sched_coll_t coll, algo_t algo, size_t size, int grouped);
/* Modelled time in us; INFINITY where the algorithm does not apply. */
double tune_cost(const tune_model_t *m, sched_coll_t coll, algo_t algo, size_t size, int grouped);

/* What tune_pick decided and why. */
typedef enum {
    TUNE_PICK_MODEL,     /* the cheapest of the allowed algorithms that apply */
    TUNE_PICK_BANDWIDTH, /* a bandwidth algorithm was allowed where another one is this collective's */
    TUNE_PICK_FALLBACK   /* nothing allowed applies: the cheapest of all that apply */
} tune_why_t;

/* The cheapest algorithm among `allowed` (TUNE_BIT mask) that applies;
 * cost (may be NULL) gets its modelled time. */
algo_t tune_pick(const tune_model_t *m, sched_coll_t coll, size_t size, int grouped, unsigned allowed,
                 double *cost, tune_why_t *why);

/* The bandwidth algorithm of a collective: ring, chain or pairwise. */
static inline algo_t tune_bandwidth_algo(sched_coll_t coll)
{
    return algo_bandwidth(coll);
}
static inline const char *tune_algo_name(algo_t algo)
{
    return algo_name(algo);
}

/* CCL_ALGO, with NCCL_ALGO's syntax: entries separated by ';', each an
 * optional collective prefix ("allreduce:") and a comma list of algorithm
 * names; a list starting with '^' names the algorithms to exclude. An
 * entry without a prefix applies to every collective and may only come
 * first. Examples: "tree,rd", "^oneshot", "ring;allreduce:tree,rd",
 * "allreduce:^ring;broadcast:chain". The names are the registry's, and
 * their aliases. Fills allowed[coll] (every algorithm where nothing was
 * said). Unknown names and prefixes are skipped; returns
 * how many there were, and describes the first in bad (may be NULL). */
int tune_parse_algo(const char *text, unsigned allowed[SCHED_NUM_COLLS], char *bad, size_t badlen);

/* Text output for ccl-info and the TUNING log: `line` is called once per
 * line (no newline). tune_describe: the inputs, in two lines. tune_table:
 * a header and one row per size from min to max (times factor) with each
 * algorithm's cost ("-" where it does not apply) and the pick among
 * `allowed`. */
typedef void (*tune_line_fn)(void *arg, const char *text);
void tune_describe(const tune_model_t *m, tune_line_fn line, void *arg);
void tune_table(const tune_model_t *m, sched_coll_t coll, size_t min, size_t max, size_t factor, unsigned allowed,
                tune_line_fn line, void *arg);

/* A layout of nranks ranks over nnodes nodes, in blocks of consecutive
 * ranks (as sizes as even as they can be), for ccl-info and the tests.
 * Free with tune_layout_free. */
ccl_result_t tune_layout_blocked(int nranks, int nnodes, sched_layout_t *out);
void tune_layout_free(sched_layout_t *lay);

/* Passes over a slice one step of this action makes on its rank (a copy
 * or a reduce reads and writes the slice once: one pass). Shared with the
 * timed schedule simulator that checks the model. */
double tune_action_passes(int action);

#endif
