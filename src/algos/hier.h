/*
 * hier.h - the hierarchical schedules: hier_schedule, which the registry
 * and the simulator call, and what its builders share (hier.c: allreduce
 * and the dispatch; hier_allgather.c; hier_chain.c: reduce-scatter,
 * broadcast, reduce): node sizes, the rail count of a layout, the rank
 * behind a (node, local rank) pair, and each collective's builder. One
 * header for both, as the module's files are one module: the builders
 * are defined in its files, and a header of another name could not
 * declare them (tests/check_layers.sh, honest headers).
 *
 * A rail is one local rank position across nodes: rail s of node k is its
 * local rank s % L_k (L_k: the node's rank count). There are as many rails
 * as the largest node has ranks; on a smaller node a rank serves several
 * rails, so uneven layouts still send each byte between nodes only once.
 *
 * Order. With FIFOs of two slots, schedules cannot deadlock if every step
 * can be given a time such that (1) a message sent at time t is received
 * at time t+1, (2) each rank's steps are in time order, and (3) no
 * connection carries two messages sent at the same time. Proof: take the
 * earliest pending step of all ranks (time T). What it receives was sent
 * at T-1, before it, and is at the head of its FIFO; what it sends goes to
 * a FIFO that holds at most the one message sent there at T-1. The engine's
 * rounds repeat this per slice. Each builder says how it meets (3).
 */
#ifndef CCL_ALGOS_HIER_H
#define CCL_ALGOS_HIER_H

#include "algos/schedule.h"

/* Fills `out` (reset first) for op->rank with the hierarchical schedule
 * over op->layout (never NULL here), for allreduce, allgather,
 * reduce-scatter, broadcast and reduce (hier*.c):
 *   allreduce: intra-node reduce-scatter, inter-node allreduce of each
 *     shard among its owners (one per node: a rail), intra-node allgather;
 *   allgather: ring over the nodes on each rail, then a ring in each node;
 *   reduce-scatter, broadcast, reduce: pipelined chains through every
 *     rank, node by node, each rail leaving a node through its own rank.
 * Costs for the tuner, per rank, with nn nodes of L ranks (n = nn * L)
 * and B the bytes of op->count (allgather, reduce-scatter: of one block):
 * bytes sent to other nodes, steps among them (each pays the inter-node
 * latency) and steps in all (a step is one message; the executor runs a
 * rank's steps one after another):
 *                   inter bytes       inter steps  steps      flat: inter bytes, steps
 *   allreduce       2(nn-1)/nn * B/L  2(nn-1)      ~2n        2(n-1)/n * B, 2(n-1)
 *   allgather       (nn-1) * B        nn-1         ~n         (n-1) * B, n-1
 *   reduce-scatter  (nn-1) * B        nn-1         n          (n-1) * B, n-1
 *   broadcast       B / L             1            L of B/L   B, 1 of B
 *   reduce          B / L             1            L of B/L   B, 1 of B
 * Flat ring or chain: its inter bytes cross each node boundary through one
 * rank (through every rank when ranks alternate between nodes), and as
 * every ring step waits for the previous one of the rank before, all of
 * them pay the inter-node latency. Hierarchical: every rank of a node
 * sends its share at once (rails: one NIC each pays), and every rank sends
 * as many bytes in all as in the flat schedule. Broadcast and reduce are
 * pipelined chains either way: n-1 hops of a slice, then the bytes at the
 * slowest link's speed (intra-node B, inter-node B/L instead of B).
 * Uneven nodes: a rank of a node of L_k ranks serves about max(L)/L_k
 * rails and sends that many times the inter bytes; the reduce-scatter's
 * and allgather's rails then run partly one after another (more latency,
 * the same bytes). One node, or one rank per node, is the flat schedule. */
ccl_result_t hier_schedule(const sched_op_t *op, sched_t *out);

/* The rest is for hier*.c alone. */

static inline int hier_mod(int a, int n) { return ((a % n) + n) % n; }

static inline int hier_node_size(const sched_layout_t *lay, int k)
{
    return lay->node_first[k + 1] - lay->node_first[k];
}

/* The rank with local rank `local` on node k. */
static inline int hier_rank(const sched_layout_t *lay, int k, int local)
{
    return lay->node_ranks[lay->node_first[k] + local];
}

/* Rail s's rank on node k. */
static inline int hier_rail_rank(const sched_layout_t *lay, int k, int s)
{
    return hier_rank(lay, k, s % hier_node_size(lay, k));
}

/* The number of rails: the largest node's rank count. */
int hier_rails(const sched_layout_t *lay);

/* Builders behind hier_schedule; each expects a reset schedule and a
 * layout with at least one node. */
ccl_result_t hier_allreduce(const sched_op_t *op, sched_t *s);
ccl_result_t hier_allgather(const sched_op_t *op, sched_t *s);
/* Reduce-scatter, broadcast and reduce: chains through every rank. */
ccl_result_t hier_chain(const sched_op_t *op, sched_t *s);

#endif
