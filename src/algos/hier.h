/*
 * hier.h - what the hierarchical schedules share (hier.c: allreduce and the
 * dispatch; hier_allgather.c; hier_chain.c: reduce-scatter, broadcast,
 * reduce): node sizes, the rail count of a layout, the rank behind a
 * (node, local rank) pair, and each collective's builder.
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
