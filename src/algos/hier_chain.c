/*
 * hier_chain.c - hierarchical reduce-scatter, broadcast and reduce: several
 * pipelined chains through every rank, node after node, each leaving every
 * node through a different rank (a rail), so that the inter-node traffic
 * is split over all of a node's ranks instead of crossing through one.
 *
 * Why chains through every rank, rather than the three phases of the
 * allreduce (intra-node, inter-node among rail ranks, intra-node): the
 * schedule has no scratch memory. A reduce-scatter's receive buffer holds
 * one block, and a reduce has none except at the root, so a node's partial
 * sum of remote blocks has nowhere to wait for the inter-node phase; and a
 * step combines its own input with one incoming stream only. A partial sum
 * therefore has to travel through the ranks one after another, picking up
 * each one's input, and the schedule's freedom is the order: all ranks of
 * a node in a row, so the partial crosses each node boundary once, and the
 * boundary crossed by a different pair of ranks for each rail. Broadcast is
 * the reduce's mirror (its scatter + inter-node + allgather variant would
 * move 2(L-1)/L of the buffer into each rank instead of 1, for the same
 * inter-node bytes), and takes the same chains.
 *
 * The sequences. Sequence c (one per rail, c = 0..S-1) visits the nodes in
 * order from a first node, and within node k its segment of L_k ranks in
 * local rank order starting at (c + shift) % L_k, so it leaves node k from
 * local rank (c + shift - 1) % L_k: rail by rail, every rank of the node.
 *   reduce-scatter: sequence c is a ring (shift 1: it leaves node k from
 *     local rank c % L_k) and carries the blocks of local rank c of every
 *     node; block b's partial goes round it starting just after b's owner,
 *     which is last in its node's segment, so it ends at the owner having
 *     entered every other node once;
 *   broadcast / reduce: shard c of the buffer (S shards) goes along
 *     sequence c. A broadcast's sequences start with the root's node, whose
 *     segment starts at the root and ends at a rank that depends on c (never
 *     the root), so the root's node sends each shard out on a different
 *     rail; a reduce's start with the node after the root's and end with
 *     the root's node, whose segment starts at a rank that depends on c and
 *     ends at the root.
 * Order (the rule in hier.h): a step at position i of its chain runs at
 * time i, plus c * n for the sequences that run one after another. A
 * broadcast or reduce rank has one step per sequence, and sequence after
 * sequence is how a chain pipelines anyway. A reduce-scatter's sequences
 * can run side by side when all nodes have the same size: rank (k, a) then
 * has a block at position i in exactly one sequence, c = a - 1 - i mod L.
 * With uneven nodes two sequences can send over one connection at the same
 * position, so they run one after another (slower, but never stuck).
 * Steps cover whole blocks or shards, so slice k of every step of a chain
 * covers the same elements (engine.h).
 *
 * Cost (count: reduce-scatter's block, the broadcast's or reduce's buffer;
 * nn nodes of L ranks, n = nn * L, S = L rails):
 *   reduce-scatter: inter-node bytes per rank (nn-1) * count sent and
 *     received per rail served ((n - L)/L * count on even nodes, the same as
 *     the hierarchical allgather); each rank still sends (n-1) * count in
 *     all, like the flat ring, whose inter-node (n-1) * count crosses each
 *     node boundary through one rank (every hop when ranks alternate
 *     between nodes); steps n-1 per rank, as the ring, of which only
 *     nn-1 go to another node (the ring's all wait for its inter-node hop);
 *   broadcast, reduce: inter-node bytes per rank about count / L (its
 *     rails' shards, once per node boundary), against the flat chain's
 *     count through one rank per boundary; every rank receives (broadcast)
 *     or sends (reduce) count, like the chain; pipeline depth n-1 hops of a
 *     slice plus the shards' slices, as the chain.
 * A rank of a small node serves several rails and moves that many times
 * the inter-node bytes. One rank per node gives the flat ring and chain
 * over the nodes; one node, the flat ring and chain in local rank order.
 */
#include "algos/hier.h"
#include "base/err.h"

#include <stdlib.h>

typedef struct {
    const sched_layout_t *lay;
    int n;
    int first; /* the first node */
    int rnode; /* the root's node, or -1 */
    int j0;    /* the root's local rank */
    int root_last; /* reduce: the root ends its segment (else it starts it) */
    int shift; /* other nodes: the segment starts at local rank (c + shift) % L_k */
} hier_seq_t;

/* The root's node has its own segments: the root at one end, at the other
 * the rank at distance dx from it in local rank order, which depends on c
 * and is where the sequence leaves (broadcast) or enters (reduce) the node;
 * the others in local rank order from the root between. Sequence 0 is plain
 * local rank order from the root (broadcast) or its successor (reduce). */
static int hier_seq_rooted(const hier_seq_t *q, int k, int L, int c, int *lo, int *hi)
{
    if (k != q->rnode || L == 1)
        return 0;
    int dx = q->root_last ? 1 + c % (L - 1) : L - 1 - c % (L - 1);
    *lo = q->root_last ? dx : 0; /* distances from the root at index 0 and L-1 */
    *hi = q->root_last ? 0 : dx;
    return 1;
}

/* Local rank at index idx of node k's segment of sequence c. */
static int hier_seq_local(const hier_seq_t *q, int k, int c, int idx)
{
    int L = hier_node_size(q->lay, k), lo, hi;
    if (!hier_seq_rooted(q, k, L, c, &lo, &hi))
        return hier_mod(c + q->shift + idx, L);
    int dx = lo + hi; /* the end that is not the root */
    int d = idx == 0 ? lo : idx == L - 1 ? hi : idx < dx ? idx : idx + 1;
    return (q->j0 + d) % L;
}

/* Index of local rank a in node k's segment of sequence c. */
static int hier_seq_index(const hier_seq_t *q, int k, int c, int a)
{
    int L = hier_node_size(q->lay, k), lo, hi;
    if (!hier_seq_rooted(q, k, L, c, &lo, &hi))
        return hier_mod(a - c - q->shift, L);
    int dx = lo + hi, d = hier_mod(a - q->j0, L);
    return d == lo ? 0 : d == hi ? L - 1 : d < dx ? d : d - 1;
}

/* Where node k's segment starts in every sequence. */
static int hier_seq_node_at(const hier_seq_t *q, int k)
{
    return hier_mod(q->lay->node_first[k] - q->lay->node_first[q->first], q->n);
}

static int hier_seq_pos(const hier_seq_t *q, int c, int r)
{
    int k = q->lay->node_of[r];
    return hier_seq_node_at(q, k) + hier_seq_index(q, k, c, q->lay->local_rank[r]);
}

/* The rank after (dir = 1) or before (dir = -1) rank r in sequence c, the
 * sequence taken as a ring. */
static int hier_seq_step(const hier_seq_t *q, int c, int r, int dir)
{
    const sched_layout_t *lay = q->lay;
    int k = lay->node_of[r], L = hier_node_size(lay, k);
    int idx = hier_seq_index(q, k, c, lay->local_rank[r]) + dir;
    if (idx < 0 || idx >= L) {
        k = hier_mod(k + dir, lay->nnodes);
        idx = dir > 0 ? 0 : hier_node_size(lay, k) - 1;
    }
    return hier_rank(lay, k, hier_seq_local(q, k, c, idx));
}

/* One chain step of this rank: position i along sequence c, run at time
 * `key` (the file comment's Order). */
typedef struct {
    long long key;
    int i, c;
    int block; /* reduce-scatter: whose block */
} hier_link_t;

static int hier_link_cmp(const void *x, const void *y)
{
    const hier_link_t *a = x, *b = y;
    return (a->key > b->key) - (a->key < b->key);
}

/* The step at position i of an n-rank chain that receives from `from`
 * and sends to `to`: a reduction adds the own input (sendbuf at src_off)
 * and finishes into recvbuf at dst_off; a broadcast keeps and forwards. */
static void hier_chain_step(sched_t *s, int reduces, int i, int n, int from, int to, size_t src_off,
                            size_t dst_off, size_t len)
{
    int first = i == 0, last = i == n - 1, act;
    if (reduces)
        act = first ? SCHED_SEND : !last ? SCHED_RECV_REDUCE_SEND : SCHED_RECV_REDUCE_COPY;
    else
        act = first ? SCHED_SEND : !last ? SCHED_RECV_COPY_SEND : SCHED_RECV;
    int sbuf = reduces || first ? SCHED_BUF_SEND : SCHED_BUF_NONE;
    int dbuf = (reduces ? last : !first) ? SCHED_BUF_RECV : SCHED_BUF_NONE;
    sched_step_t *st = sched_add_step(s, act, first ? -1 : from, last ? -1 : to, sbuf, dbuf, src_off, len,
                                      reduces && last ? SCHED_POSTOP : 0);
    st->dst_off = dst_off;
}

/* Whether every node has as many ranks as the largest. */
static int hier_even(const sched_layout_t *lay, int S)
{
    for (int k = 0; k < lay->nnodes; k++)
        if (hier_node_size(lay, k) != S)
            return 0;
    return 1;
}

/* Reduce-scatter: sequence c carries the blocks of local rank c. */
static int hier_rs_links(const sched_op_t *op, const hier_seq_t *q, int S, hier_link_t *links)
{
    const sched_layout_t *lay = op->layout;
    int n = op->nranks, nl = 0, even = hier_even(lay, S);
    for (int c = 0; c < S; c++) {
        int p = hier_seq_pos(q, c, op->rank);
        for (int m = 0; m < lay->nnodes; m++) {
            int L = hier_node_size(lay, m);
            if (c >= L)
                continue;
            int owner_at = hier_seq_node_at(q, m) + L - 1; /* last of node m's segment */
            int i = hier_mod(p - owner_at - 1, n);
            long long key = even ? (long long)i * S + c : (long long)c * n + i;
            links[nl++] = (hier_link_t){key, i, c, hier_rank(lay, m, c)};
        }
    }
    return nl;
}

ccl_result_t hier_chain(const sched_op_t *op, sched_t *s)
{
    const sched_layout_t *lay = op->layout;
    int n = op->nranks, r = op->rank, nn = lay->nnodes;
    int rs = op->coll == SCHED_REDUCE_SCATTER, reduces = sched_coll_reduces(op->coll);
    /* A reduce-scatter needs a sequence per local rank (each ends the
     * chains of its blocks); broadcast and reduce only split the buffer
     * over rails between nodes, so one node takes one chain. */
    int S = rs || nn > 1 ? hier_rails(lay) : 1;
    size_t cnt = op->count;
    if (n == 1) {
        ccl_result_t res = sched_reserve(s, 1);
        if (res == CCL_SUCCESS)
            sched_add_step(s, SCHED_COPY, -1, -1, SCHED_BUF_SEND, SCHED_BUF_RECV, 0, cnt,
                           reduces ? SCHED_POSTOP : 0);
        return res;
    }
    int nlinks = rs ? n : S;
    ccl_result_t res = sched_reserve(s, nlinks + 1);
    if (res != CCL_SUCCESS)
        return res;
    hier_link_t *links = malloc((size_t)nlinks * sizeof *links);
    if (!links)
        return err_set(CCL_ERR_SYSTEM, "out of memory for a %d-step hierarchical schedule", nlinks);
    hier_seq_t q = {lay, n, 0, -1, 0, 0, 1};
    if (rs) {
        nlinks = hier_rs_links(op, &q, S, links);
    } else {
        /* Broadcast: from the root's node on; reduce: from the next node on,
         * into the root's node last. */
        int rn = lay->node_of[op->root];
        q = (hier_seq_t){lay, n, reduces ? (rn + 1) % nn : rn, rn, lay->local_rank[op->root], reduces, 0};
        for (int c = 0; c < S; c++) {
            int p = hier_seq_pos(&q, c, r);
            links[c] = (hier_link_t){(long long)c * n + p, p, c, -1};
        }
    }
    qsort(links, (size_t)nlinks, sizeof *links, hier_link_cmp);
    for (int l = 0; l < nlinks; l++) {
        const hier_link_t *lk = &links[l];
        int from = hier_seq_step(&q, lk->c, r, -1), to = hier_seq_step(&q, lk->c, r, 1);
        if (rs) {
            hier_chain_step(s, 1, lk->i, n, from, to, (size_t)lk->block * cnt, 0, cnt);
        } else {
            size_t off, len;
            sched_partition(cnt, op->elem_size, S, lk->c, &off, &len);
            if (len)
                hier_chain_step(s, reduces, lk->i, n, from, to, off, off, len);
        }
    }
    free(links);
    /* The broadcast root's own copy (skipped by the executor in place). */
    if (op->coll == SCHED_BROADCAST && r == op->root)
        sched_add_step(s, SCHED_COPY, -1, -1, SCHED_BUF_SEND, SCHED_BUF_RECV, 0, cnt, 0);
    return CCL_SUCCESS;
}
