/*
 * hier.c - hierarchical allreduce for ranks spread over several nodes, and
 * hier_schedule, which picks the hierarchical builder of each collective
 * (allgather: hier_allgather.c; reduce-scatter, broadcast, reduce:
 * hier_chain.c; what they share: hier.h).
 *
 * Inter-node links are an order of magnitude slower than shared memory, so
 * the bytes that cross them must be as few as possible and spread over
 * every node's ranks (and NICs). Three phases:
 *   1. intra-node reduce-scatter: the buffer is cut into S shards (S = the
 *      largest node's rank count); on a node of L ranks, local rank s % L
 *      owns shard s and receives the node's partial sum of it, through a
 *      chain along the node's ranks (a ring reduce-scatter when S == L);
 *   2. inter-node allreduce of each shard among its owners, one per node:
 *      a ring over the nodes ("rails": shard s travels between the owners
 *      of s only, so every rank of a node moves its own slice in parallel);
 *   3. intra-node allgather: each owner broadcasts its shard along its
 *      node's chain.
 * Uneven nodes (3 ranks here, 1 there) work because shards are assigned by
 * s % L on each node: a rank of a small node owns several shards.
 *
 * Steps are ordered by phase, then by chain position or ring step, then by
 * shard, the same on every rank, so each connection carries its messages in
 * one order on both ends (see engine.h).
 */
#include "algos/hier.h"
#include "base/err.h"

int hier_rails(const sched_layout_t *lay)
{
    int S = 0;
    for (int k = 0; k < lay->nnodes; k++)
        if (hier_node_size(lay, k) > S)
            S = hier_node_size(lay, k);
    return S;
}

/* Ring allreduce of [off, off+len) (the node partial, in recvbuf) among the
 * owners of one shard: ring[k] is node k's owner, me is our index. */
/* Unit p of shard sh: the shard cut into nn parts, one per ring step of
 * phase 2. Every phase works on whole units, so that slice k of a unit
 * covers the same elements in each phase: the engine's rounds run slice k
 * of every step in order, and a step may only depend on the same slice of
 * earlier steps. */
static void hier_unit(const sched_op_t *op, int S, int sh, int nn, int p, size_t *off, size_t *len)
{
    size_t so, sl;
    sched_partition(op->count, op->elem_size, S, sh, &so, &sl);
    sched_partition(sl, op->elem_size, nn, p, off, len);
    *off += so;
}

static void hier_ring(sched_t *s, const sched_op_t *op, const int *ring, int nn, int me, int S, int sh)
{
    size_t po, pl;
    if (nn == 1) { /* one node: the partial is the result */
        hier_unit(op, S, sh, 1, 0, &po, &pl);
        sched_add_step(s, SCHED_COPY, -1, -1, SCHED_BUF_RECV, SCHED_BUF_RECV, po, pl, SCHED_POSTOP);
        return;
    }
    int prev = ring[hier_mod(me - 1, nn)], next = ring[hier_mod(me + 1, nn)];
#define PART(p) hier_unit(op, S, sh, nn, hier_mod(p, nn), &po, &pl)
    PART(me);
    sched_add_step(s, SCHED_SEND, -1, next, SCHED_BUF_RECV, SCHED_BUF_NONE, po, pl, 0);
    for (int t = 1; t < nn - 1; t++) {
        PART(me - t);
        sched_add_step(s, SCHED_RECV_REDUCE_SEND, prev, next, SCHED_BUF_RECV, SCHED_BUF_NONE, po, pl, 0);
    }
    PART(me + 1);
    sched_add_step(s, SCHED_RECV_REDUCE_COPY_SEND, prev, next, SCHED_BUF_RECV, SCHED_BUF_RECV, po, pl, SCHED_POSTOP);
    for (int t = 0; t < nn - 2; t++) {
        PART(me - t);
        sched_add_step(s, SCHED_RECV_COPY_SEND, prev, next, SCHED_BUF_NONE, SCHED_BUF_RECV, po, pl, 0);
    }
    PART(me + 2);
    sched_add_step(s, SCHED_RECV, prev, -1, SCHED_BUF_NONE, SCHED_BUF_RECV, po, pl, 0);
#undef PART
}

ccl_result_t hier_allreduce(const sched_op_t *op, sched_t *s)
{
    const sched_layout_t *lay = op->layout;
    int r = op->rank, nn = lay->nnodes;
    int node = lay->node_of[r], j = lay->local_rank[r];
    const int *mine = lay->node_ranks + lay->node_first[node];
    int L = hier_node_size(lay, node), S = hier_rails(lay);
    int myshards = (S - j + L - 1) / L; /* s = j, j+L, ... < S */
    ccl_result_t res = sched_reserve(s, 2 * S * nn + myshards * (2 * nn + 1) + 4);
    if (res != CCL_SUCCESS)
        return res;
    int prev = mine[hier_mod(j - 1, L)], next = mine[hier_mod(j + 1, L)];
    size_t off, len;
    /* 1: chain reduce of shard s ending at its owner s % L. Shards go in
     * waves of L (one per owner) and units one at a time, so that in each
     * pass every rank handles one unit per chain position: send, then
     * receive-and-send, ..., like a ring reduce-scatter, which never needs
     * more than a slot per connection to progress. */
    for (int w = 0; w * L < S; w++) {
        for (int p = 0; p < nn; p++) {
            for (int t = 0; t < L; t++) {
                int sh = w * L + hier_mod(j - t - 1, L); /* the shard at position t */
                if (sh >= S)
                    continue;
                hier_unit(op, S, sh, nn, p, &off, &len);
                if (L == 1)
                    sched_add_step(s, SCHED_COPY, -1, -1, SCHED_BUF_SEND, SCHED_BUF_RECV, off, len, 0);
                else if (t == 0)
                    sched_add_step(s, SCHED_SEND, -1, next, SCHED_BUF_SEND, SCHED_BUF_NONE, off, len, 0);
                else if (t < L - 1)
                    sched_add_step(s, SCHED_RECV_REDUCE_SEND, prev, next, SCHED_BUF_SEND, SCHED_BUF_NONE, off, len, 0);
                else
                    sched_add_step(s, SCHED_RECV_REDUCE_COPY, prev, -1, SCHED_BUF_SEND, SCHED_BUF_RECV, off, len, 0);
            }
        }
    }
    /* 2: each owned shard across nodes, among the owners of that shard. */
    int ring[nn];
    for (int sh = j; sh < S; sh += L) {
        for (int k = 0; k < nn; k++)
            ring[k] = hier_rail_rank(lay, k, sh);
        hier_ring(s, op, ring, nn, node, S, sh);
    }
    /* 3: chain broadcast of shard s from its owner, in the same waves,
     * one round behind: slice k of a unit waits for the inter-node reply
     * of round k, and phase 1 of round k+1 uses the same intra-node
     * connections; lagging, phase 3 of slice k comes after phase 1 of
     * slice k+1 on them, so a rank waiting for that reply can already
     * reduce and send the next slice (with CCL_ENGINE_WINDOW > 1). */
    int lag_from = s->nsteps;
    for (int w = 0; L > 1 && w * L < S; w++) {
        for (int p = 0; p < nn; p++) {
            for (int t = 0; t < L; t++) {
                int sh = w * L + hier_mod(j - t, L);
                if (sh >= S)
                    continue;
                hier_unit(op, S, sh, nn, p, &off, &len);
                if (t == 0)
                    sched_add_step(s, SCHED_SEND, -1, next, SCHED_BUF_RECV, SCHED_BUF_NONE, off, len, 0);
                else if (t < L - 1)
                    sched_add_step(s, SCHED_RECV_COPY_SEND, prev, next, SCHED_BUF_NONE, SCHED_BUF_RECV, off, len, 0);
                else
                    sched_add_step(s, SCHED_RECV, prev, -1, SCHED_BUF_NONE, SCHED_BUF_RECV, off, len, 0);
            }
        }
    }
    if (nn > 1)
        for (int i = lag_from; i < s->nsteps; i++)
            s->steps[i].lag = 1;
    return CCL_SUCCESS;
}

ccl_result_t hier_schedule(const sched_op_t *op, sched_t *out)
{
    /* Allreduce: partial sums live in recvbuf between phases and are sent
     * from there before they are final: no references (the executor would
     * otherwise send recvbuf data by reference, assuming it final). The
     * others only send input or final results, and overwrite in-place
     * input only where no peer reads it (see their files). */
    sched_reset(out, 1, 0, op->coll == SCHED_ALLREDUCE);
    if (!op->layout || op->layout->nnodes < 1)
        return err_set(CCL_ERR_INTERNAL, "hierarchical: no node layout");
    switch (op->coll) {
    case SCHED_ALLREDUCE: return hier_allreduce(op, out);
    case SCHED_ALLGATHER: return hier_allgather(op, out);
    case SCHED_REDUCE_SCATTER:
    case SCHED_BROADCAST:
    case SCHED_REDUCE: return hier_chain(op, out);
    default: return err_set(CCL_ERR_INTERNAL, "hierarchical: no schedule for %s", sched_coll_name(op->coll));
    }
}
