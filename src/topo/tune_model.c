/*
 * tune_model.c - the cost model's inputs (tune.h): the links and the node
 * layout reduced to the few numbers the algorithms' costs need (how often
 * the ring crosses nodes, the trees' depths, recursive doubling's partners
 * elsewhere, how many flows share one NIC), and blocked layouts for
 * ccl-info and the tests. Done once per communicator, so it may loop over
 * every rank; the costs (tune.c) then take a few dozen operations a call.
 */
#include "topo/tune.h"
#include "base/err.h"
#include "algos/tree.h"

#include <stdlib.h>
#include <string.h>

static int tune_node(const sched_layout_t *lay, int r) { return lay ? lay->node_of[r] : 0; }

static int tune_max(const int *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > m)
            m = v[i];
    return m;
}

ccl_result_t tune_model_init(tune_model_t *m, const tune_links_t *links, int nranks, const sched_layout_t *layout)
{
    ccl_result_t res = CCL_SUCCESS;
    const sched_layout_t *lay = layout && layout->nnodes > 1 ? layout : NULL;
    int nn = lay ? lay->nnodes : 1, n = nranks;
    int *cnt = calloc((size_t)nn, sizeof *cnt);
    if (!cnt)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for the tuner's view of %d nodes", nn);
    memset(m, 0, sizeof *m);
    m->link = *links;
    m->avail = TUNE_ALL;
    m->nranks = n;
    m->nnodes = nn;
    m->max_local = lay ? 0 : n;
    m->min_local = n;
    for (int k = 0; lay && k < nn; k++) {
        int sz = lay->node_first[k + 1] - lay->node_first[k];
        if (sz > m->max_local)
            m->max_local = sz;
        if (sz < m->min_local)
            m->min_local = sz;
        if ((long)sz * (n - sz) > m->a2a_flows)
            m->a2a_flows = sz * (n - sz);
    }
    /* Ring edges r -> r+1 that leave a node. */
    for (int r = 0; lay && r < n; r++) {
        int a = tune_node(lay, r), b = tune_node(lay, (r + 1) % n);
        if (a != b) {
            m->ring_cross++;
            cnt[a]++;
        }
    }
    m->ring_flows = tune_max(cnt, nn);
    /* Recursive doubling: partner r ^ 2^k among the first p ranks; the
     * n-p others fold into r-p and get the result back from it. */
    for (int p = 1; p * 2 <= n && m->rd_logp < TUNE_RD_MAX; p *= 2)
        m->rd_logp++;
    int p = 1 << m->rd_logp;
    m->rd_extra = n - p;
    for (int k = 0; lay && k < m->rd_logp; k++) {
        memset(cnt, 0, (size_t)nn * sizeof *cnt);
        for (int r = 0; r < p; r++)
            if (tune_node(lay, r) != tune_node(lay, r ^ (1 << k)))
                cnt[tune_node(lay, r)]++;
        m->rd_flows[k] = tune_max(cnt, nn);
    }
    memset(cnt, 0, (size_t)nn * sizeof *cnt);
    for (int r = p; lay && r < n; r++)
        if (tune_node(lay, r) != tune_node(lay, r - p)) {
            cnt[tune_node(lay, r)]++;     /* fold in */
            cnt[tune_node(lay, r - p)]++; /* hand back */
        }
    m->rd_fold_flows = tune_max(cnt, nn);
    /* Both trees: depth and inter-node hops of the worst leaf-to-root path,
     * and the inter-node edges each node's NIC carries (up from the child's
     * node, down from the parent's). */
    memset(cnt, 0, (size_t)nn * sizeof *cnt);
    for (int t = 0; t < 2 && n > 1; t++) {
        for (int r = 0; r < n; r++) {
            int parent, child[2], hops = 0, net = 0;
            tree_links(n, t, r, &parent, child);
            if (parent >= 0 && tune_node(lay, r) != tune_node(lay, parent)) {
                cnt[tune_node(lay, r)]++;
                cnt[tune_node(lay, parent)]++;
            }
            for (int at = r; parent >= 0 && hops <= n; at = parent, tree_links(n, t, at, &parent, child)) {
                hops++;
                net += tune_node(lay, at) != tune_node(lay, parent);
            }
            if (hops > m->tree_depth[t])
                m->tree_depth[t] = hops;
            if (net > m->tree_net[t])
                m->tree_net[t] = net;
        }
    }
    m->tree_flows = tune_max(cnt, nn);
out:
    free(cnt);
    return res;
}

/* ---- layouts for ccl-info and the tests ------------------------------------ */

ccl_result_t tune_layout_blocked(int nranks, int nnodes, sched_layout_t *out)
{
    ccl_result_t res = CCL_SUCCESS;
    memset(out, 0, sizeof *out);
    if (nranks < 1 || nnodes < 1 || nnodes > nranks)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "a layout needs 1 <= nodes (%d) <= ranks (%d)", nnodes, nranks);
    int *arr = calloc((size_t)(3 * nranks + nnodes + 1), sizeof *arr);
    if (!arr)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for a layout of %d ranks", nranks);
    int *node_of = arr, *local = arr + nranks, *ranks = arr + 2 * nranks, *first = arr + 3 * nranks;
    for (int k = 0; k <= nnodes; k++)
        first[k] = (int)((long)nranks * k / nnodes);
    for (int k = 0; k < nnodes; k++)
        for (int r = first[k]; r < first[k + 1]; r++) {
            node_of[r] = k;
            local[r] = r - first[k];
            ranks[r] = r;
        }
    *out = (sched_layout_t){nnodes, node_of, local, first, ranks};
out:
    return res;
}

void tune_layout_free(sched_layout_t *lay)
{
    free((void *)lay->node_of);
    memset(lay, 0, sizeof *lay);
}
