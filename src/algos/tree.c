/*
 * tree.c - double binary tree allreduce.
 *
 * A ring needs 2(n-1) sequential hops before the first byte is final; a
 * binary tree needs 2 log2(n). But in a single tree the leaves (half the
 * ranks) only send once and the interior ranks receive twice, so it wastes
 * half the bandwidth. Two trees fix that: each reduces and broadcasts half
 * of the buffer, and the second tree is the first shifted by one position,
 * which turns the first tree's leaves (odd positions) into its interior
 * nodes and the reverse. Every rank then sends and receives about as much
 * as in the ring, in logarithmic depth.
 *
 * Tree shape: ranks at positions 1..n (1-based) form the in-order binary
 * tree in which position i with lowest set bit b has children i - b/2 and
 * i + b/2, and parent i - b or i + b (the one with bit 2b clear is the
 * left child's parent). Positions beyond n are skipped by climbing to the
 * next existing ancestor, so any n works.
 *
 * Per tree and rank, in step order (the engine pipelines them by slices):
 *   up:   leaf: SEND own half to parent;
 *         interior: RECV_REDUCE from each child (the last one either
 *         forwards the partial sum to the parent, or at the root finishes it);
 *   down: RECV the final half from the parent and forward it to the children.
 */
#include "algos/tree.h"
#include "base/err.h"

/* Parent position of position i (1-based) in a tree over 1..n; 0 at the root. */
static int tree_parent(int i, int n)
{
    for (;;) {
        int b = i & -i;
        if (b > n)
            return 0;
        int p = (i & (b << 1)) ? i - b : i + b;
        if (p <= n)
            return p;
        i = p;
    }
}

/* Children of position i: every position whose parent it is (at most two). */
static int tree_children(int i, int n, int child[2])
{
    int k = 0, b = i & -i;
    /* Candidates are i - b/2 and, climbing down the right side past missing
     * positions, i + b/2, i + b/4, ... */
    if (b > 1 && tree_parent(i - b / 2, n) == i)
        child[k++] = i - b / 2;
    for (int d = b / 2; d >= 1 && k < 2; d /= 2)
        if (i + d <= n && tree_parent(i + d, n) == i) {
            child[k++] = i + d;
            break;
        }
    return k;
}

int tree_links(int nranks, int shift, int rank, int *parent, int child[2])
{
    int n = nranks;
    int pos = (rank + shift) % n + 1;
    int ppos = tree_parent(pos, n), cpos[2];
    int nc = tree_children(pos, n, cpos);
#define TREE_RANK(p) (((p) - 1 - shift + n) % n)
    *parent = ppos ? TREE_RANK(ppos) : -1;
    child[0] = nc > 0 ? TREE_RANK(cpos[0]) : -1;
    child[1] = nc > 1 ? TREE_RANK(cpos[1]) : -1;
#undef TREE_RANK
    return nc;
}

/* One tree over half [off, off+len). */
static void tree_one(sched_t *s, const sched_op_t *op, int shift, size_t off, size_t len)
{
    int parent, child[2];
    int nc = tree_links(op->nranks, shift, op->rank, &parent, child);
    if (len == 0)
        return;
    /* Up. */
    if (nc == 0) {
        sched_add_step(s, SCHED_SEND, -1, parent, SCHED_BUF_SEND, SCHED_BUF_NONE, off, len, 0);
    } else {
        for (int c = 0; c < nc; c++) {
            int last = c == nc - 1;
            int src = c == 0 ? SCHED_BUF_SEND : SCHED_BUF_RECV; /* then the partial sum */
            if (last && parent >= 0)
                sched_add_step(s, SCHED_RECV_REDUCE_SEND, child[c], parent, src, SCHED_BUF_NONE, off, len, 0);
            else
                sched_add_step(s, SCHED_RECV_REDUCE_COPY, child[c], -1, src, SCHED_BUF_RECV, off, len,
                               (last && parent < 0) ? SCHED_POSTOP : 0);
        }
    }
    /* Down. */
    if (parent >= 0 && nc > 0)
        sched_add_step(s, SCHED_RECV_COPY_SEND, parent, child[0], SCHED_BUF_NONE, SCHED_BUF_RECV, off, len, 0);
    else if (parent >= 0)
        sched_add_step(s, SCHED_RECV, parent, -1, SCHED_BUF_NONE, SCHED_BUF_RECV, off, len, 0);
    for (int c = parent >= 0 ? 1 : 0; c < nc; c++)
        sched_add_step(s, SCHED_SEND, -1, child[c], SCHED_BUF_RECV, SCHED_BUF_NONE, off, len, 0);
}

ccl_result_t tree_schedule(const sched_op_t *op, sched_t *out)
{
    /* Leaves send their input by reference and receive the result into it
     * only after the parent consumed it: the result depends on that read. */
    sched_reset(out, 1, 0, 0);
    if (op->coll != SCHED_ALLREDUCE)
        return err_set(CCL_ERR_INTERNAL, "tree: no schedule for %s", sched_coll_name(op->coll));
    ccl_result_t res = sched_reserve(out, 12);
    if (res != CCL_SUCCESS)
        return res;
    if (op->nranks == 1) {
        sched_add_step(out, SCHED_COPY, -1, -1, SCHED_BUF_SEND, SCHED_BUF_RECV, 0, op->count, SCHED_POSTOP);
        return CCL_SUCCESS;
    }
    size_t off, len;
    sched_partition(op->count, op->elem_size, 2, 0, &off, &len);
    tree_one(out, op, 0, off, len);
    sched_partition(op->count, op->elem_size, 2, 1, &off, &len);
    tree_one(out, op, 1, off, len);
    return CCL_SUCCESS;
}
