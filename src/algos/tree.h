/*
 * tree.h - the double binary tree allreduce (tree.c) and the trees' shape.
 *
 * The shape is public beside the schedule because the tuner's cost model
 * (topo/tune_model.c) and ccl-info price and show tree depths from it: one
 * definition of the trees, so that the model cannot drift from what the
 * schedule builds.
 */
#ifndef CCL_ALGOS_TREE_H
#define CCL_ALGOS_TREE_H

#include "algos/schedule.h"

/* Double binary tree allreduce (two trees, each reduces and broadcasts
 * half the data; a rank is interior in at most one of them). Fills `out`
 * (reset first) for op->rank. */
ccl_result_t tree_schedule(const sched_op_t *op, sched_t *out);
/* Tree `shift` (0 or 1) of the double binary tree over nranks: rank's
 * parent (-1 at the root) and children (-1 where none); returns the number
 * of children. Rank r sits at position ((r + shift) mod n) + 1. The tuner
 * reads the trees' shape through this. */
int tree_links(int nranks, int shift, int rank, int *parent, int child[2]);

#endif
