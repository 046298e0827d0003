/*
 * hier_allgather.c - hierarchical allgather for ranks spread over nodes.
 *
 * Two phases, over the rails of hier.h (rail s of node k: local rank
 * s % L_k; S rails, S = the largest node's L):
 *   1. inter-node: on each rail s, a ring allgather over the nodes among
 *      the rail's ranks, one per node. Node m contributes the block of its
 *      local rank s (if it has one), which is exactly the block the rail's
 *      rank there already holds: no intra-node gather is needed first.
 *      Afterwards the rail's rank on every node holds the rail's blocks of
 *      all nodes;
 *   2. intra-node: a ring allgather along the node's local ranks in which
 *      local rank a contributes the blocks of the rails it serves
 *      (s = a, a + L, ...), from every node.
 * Every block enters each other node once, on its own rail, so each node's
 * inbound traffic is spread over all its ranks (and NICs).
 *
 * Cost (count = elements per rank, nn nodes of L ranks, n = nn * L):
 *   inter-node bytes per rank: (nn-1) * count sent and received per rail
 *   served, i.e. (n - L)/L * count on even nodes; the flat ring sends
 *   (n-1) * count across each node boundary through a single rank (and
 *   across every hop, n-1 per rank, when ranks alternate between nodes);
 *   intra-node bytes per rank: (L-1)/L * (n * count) sent;
 *   steps (messages, run one after another) per rank: nn-1 inter-node,
 *   then (L-1) * nn intra-node, against the ring's n-1, every one of
 *   which waits for the ring's slowest (inter-node) hop.
 * A rank of a node smaller than the largest serves several rails and moves
 * that many times the inter-node bytes; one rank per node is the flat ring
 * over the nodes, one node is the flat ring in local rank order.
 *
 * Every step moves one whole block, in every phase, so slice k of a step
 * covers the same elements as slice k of the earlier step that produced
 * them (the engine's rounds; engine.h). Order (the rule in hier.h): phase
 * 1 runs the rails in waves of the smallest node's size, ring step by ring
 * step, so each rank serves at most one rail per wave and sends one
 * message per step; phase 2 runs its ring once per unit of one block from
 * each local rank. Even nodes make one wave: all rails side by side.
 * Blocks are final once received and the own block is only ever read, so
 * in place (sendbuf = recvbuf + rank * count) is safe and any data may go
 * by reference.
 */
#include "algos/hier.h"

/* Phase 1 for rank r (node k, local j): the rings of the rails it serves.
 * Rails go in waves of Lmin (the smallest node's size): Lmin consecutive
 * rails have distinct ranks on every node, so in a wave each rank serves
 * at most one rail and each ring step sends one message per rank. */
static void hier_ag_rails(sched_t *s, const sched_op_t *op, int S, int Lmin)
{
    const sched_layout_t *lay = op->layout;
    int r = op->rank, nn = lay->nnodes, k = lay->node_of[r], j = lay->local_rank[r];
    int L = hier_node_size(lay, k);
    size_t cnt = op->count;
    for (int w0 = 0; w0 < S; w0 += Lmin) {
        int sh = w0 + hier_mod(j - w0, L); /* our rail in this wave, if any */
        if (sh >= w0 + Lmin || sh >= S)
            continue;
        int from = hier_rail_rank(lay, hier_mod(k - 1, nn), sh);
        for (int t = 0; t < nn; t++) {
            int to = t < nn - 1 ? hier_rail_rank(lay, hier_mod(k + 1, nn), sh) : -1;
            if (t == 0) {
                if (sh == j) /* our own block is the rail's contribution */
                    sched_add_step(s, SCHED_SEND, -1, to, SCHED_BUF_SEND, SCHED_BUF_NONE, 0, cnt, 0);
                continue;
            }
            int m = hier_mod(k - t, nn); /* whose block arrives at ring step t */
            if (sh >= hier_node_size(lay, m))
                continue; /* node m has no rank on this rail: nothing travels */
            size_t off = (size_t)hier_rank(lay, m, sh) * cnt;
            sched_add_step(s, to >= 0 ? SCHED_RECV_COPY_SEND : SCHED_RECV, from, to, SCHED_BUF_NONE,
                           SCHED_BUF_RECV, off, cnt, 0);
        }
    }
}

/* Phase 2: ring allgather along the node, one unit after another: unit
 * (w, m) holds, from each local rank a, the block of node m's local rank
 * w*L + a (which a received on that rail), so that each ring step sends
 * one message per rank. */
static void hier_ag_node(sched_t *s, const sched_op_t *op, int S)
{
    const sched_layout_t *lay = op->layout;
    int r = op->rank, nn = lay->nnodes, k = lay->node_of[r], j = lay->local_rank[r];
    int L = hier_node_size(lay, k);
    int prev = hier_rank(lay, k, hier_mod(j - 1, L)), next = hier_rank(lay, k, hier_mod(j + 1, L));
    size_t cnt = op->count;
    for (int w0 = 0; w0 < S; w0 += L) {
        for (int m = 0; m < nn; m++) {
            for (int t = 0; t < L; t++) {
                int sh = w0 + hier_mod(j - t, L); /* the block at ring step t */
                if (sh >= hier_node_size(lay, m))
                    continue;
                int act = t == 0 ? SCHED_SEND : t < L - 1 ? SCHED_RECV_COPY_SEND : SCHED_RECV;
                size_t off = (size_t)hier_rank(lay, m, sh) * cnt;
                sched_add_step(s, act, t > 0 ? prev : -1, t < L - 1 ? next : -1,
                               t == 0 ? SCHED_BUF_RECV : SCHED_BUF_NONE, t == 0 ? SCHED_BUF_NONE : SCHED_BUF_RECV,
                               off, cnt, 0);
            }
        }
    }
}

ccl_result_t hier_allgather(const sched_op_t *op, sched_t *s)
{
    const sched_layout_t *lay = op->layout;
    int r = op->rank, nn = lay->nnodes, j = lay->local_rank[r];
    int L = hier_node_size(lay, lay->node_of[r]), S = hier_rails(lay), Lmin = S;
    for (int k = 0; k < nn; k++)
        if (hier_node_size(lay, k) < Lmin)
            Lmin = hier_node_size(lay, k);
    int myrails = (S - j + L - 1) / L;
    /* The own-block copy, at most nn steps per rail served, and every
     * block once in phase 2. */
    ccl_result_t res = sched_reserve(s, 1 + myrails * nn + op->nranks);
    if (res != CCL_SUCCESS)
        return res;
    /* Own block into place first (skipped by the executor in place): phase
     * 2 sends it from recvbuf with everything else of our rails. */
    sched_step_t *st = sched_add_step(s, SCHED_COPY, -1, -1, SCHED_BUF_SEND, SCHED_BUF_RECV, 0, op->count, 0);
    st->dst_off = (size_t)r * op->count;
    if (nn > 1)
        hier_ag_rails(s, op, S, Lmin);
    if (L > 1)
        hier_ag_node(s, op, S);
    return CCL_SUCCESS;
}
