/*
 * tune.c - the alpha-beta cost model of every algorithm (see tune.h), the
 * pick, and CCL_ALGO's syntax.
 *
 * The model follows what the host executor does with a schedule
 * (algos/engine.h). Every step is cut into slices of one slot (s bytes);
 * round j runs slice j of every step of a rank, in step order, and a rank
 * starts round j+1 only when its round j is done. A step that receives
 * waits for the matching slice of its peer's step, which itself waited for
 * its own peer: the ranks move in lock-step and each round pays its whole
 * critical path. So for an algorithm whose steps move chunks of c bytes,
 * in k = ceil(c / s) rounds,
 *   T = call + max(k lat + c pb,  c nb + net_lat,  (k clat + c cb) L / cores)
 * where, per round,
 *   lat   the critical path's fixed part: the hops it crosses one after
 *         another (shm_lat within a node, net_lat between nodes) and the
 *         executor's overhead per slice;
 *   pb    its part per byte of slice: the passes of the ranks along it
 *         (1 / shm_bw each; a copy or reduce is one pass, receive-copy-send
 *         two, tune_action_passes) and the wire (1 / net_bw) on the hops
 *         between nodes, including the wait behind the other slices that
 *         leave the node at the same time;
 *   nb    what the busiest NIC carries: slices leaving its node, at
 *         1 / net_bw (the ranks of a node share it);
 *   clat, cb   one rank's own work; it only binds when a node has more
 *         ranks (L) than cores.
 * Where a node's cores are shared (fewer than its ranks and their net
 * proxies, 2 L), the CPU bound also counts the network: every slice that
 * leaves or enters the node costs a hand-off between sleeping threads
 * (executor, proxy, socket helper) at each end, and its bytes a kernel
 * copy; m is the slices carrying data that leave the busiest node per
 * round (as many enter it):
 *   cpu = ((k clat + c cb) L + 2 m (k net_end + c net_end_b)) / cores.
 * On such nodes that, not the hops' latency, sets the order at small
 * sizes: recursive doubling has every rank exchange across nodes at once,
 * while a ring or the hierarchical ring moving 8 bytes has one slice in
 * flight (the engine skips steps whose part is empty).
 * Per algorithm (n ranks, nn nodes, S ranks on the fullest node):
 *   ring      c = size/n. Allreduce: 2(n-1) receiving steps a round, so
 *             the path goes 2(n-1)/n times round the ring, over every hop,
 *             shm or net, that often; the NIC carries 2(n-1) slices per
 *             ring edge leaving the node. Allgather, reduce-scatter: n-1.
 *   direct    c = size: send, one hop, reduce.
 *   tree      c = size/2 per tree; tree 0 up and down, then tree 1: the
 *             depth of both, up and down; the NIC carries a slice per tree
 *             edge leaving the node, each way.
 *   rd        c = size: log2(p) exchanges of the whole buffer (and the fold
 *             and hand-back of the n-p extra ranks), a hop each; the NIC
 *             carries a slice per rank whose partner is elsewhere.
 *   hier      c = size/(S nn): a node-local reduce-scatter chain (S-1 shm
 *             hops per unit, nn units), a ring over the nodes among each
 *             shard's owners (2(nn-1) net hops), a node-local allgather
 *             chain; the NIC carries 2(nn-1) slices per shard, S shards.
 *             That is why it wins large: 2(nn-1)/nn of the buffer crosses
 *             each NIC, against the ring's 2(n-1)/n per ring edge leaving
 *             the node (2x2 ranks: 1 buffer against 1.5).
 *   chain     a pipeline, not a lock-step: the first slice crosses n-1
 *             hops, then one slice per time of the busiest stage.
 *   pairwise  independent steps: a round is the rank's own sends and
 *             receives plus one hop.
 *   oneshot   one synchronisation of all ranks on the board, then each
 *             reads what it needs, cache-resident.
 * The 64-byte alignment of parts (sched_partition) is followed too: small
 * buffers leave the last parts, trees or shards empty.
 *
 * tests/sim/test_sim_tune.c runs the real schedules through a timed
 * simulation with the same link costs and checks these formulas against
 * it; the constants below that come from the simulation say so. Where a
 * measurement on real runs disagreed with the model, the correction is a
 * named constant with its measurement.
 */
#include "topo/tune.h"
#include "base/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Executor overheads, from ccl-perf on the 2-core VM, 2 ranks, 8-byte
 * allreduce with each algorithm forced (-z 1, blocking): one-shot 0.2 us,
 * direct and rd 0.3 us (one hop), ring 0.5 us (two hops). */
#define TUNE_CALL_US 0.10  /* a call run by schedule: build it, set up the engine */
#define TUNE_STEP_US 0.03  /* one slice of one step: the engine's sweep, the slot checks */
#define TUNE_BOARD_US 0.05 /* a one-shot call */
/* One-shot data (at most CCL_ONESHOT_MAX per rank) stays in cache: memcpy
 * ran at 44 GB/s on 4 MiB against 14 GB/s on 64 MiB (memcpy-bench, same
 * run), so its passes count a third. */
#define TUNE_HOT 3.0
/* A two-rank allreduce on one host: direct took about half the ring's
 * time at 128-512 KiB and stayed ahead up to 8 MiB (7-8 against 5-6 GB/s
 * busbw; ccl-perf on the 2-core VM, buffers rotated as nccl-tests does),
 * while the model, which counts fewer passes for the ring, would give the
 * ring the win from a few KiB. Measured, not modelled: up to this size the
 * two-rank ring's shm cost is scaled by TUNE_RING2_SHM_FACTOR. */
#define TUNE_RING2_SHM_MAX (8u << 20)
#define TUNE_RING2_SHM_FACTOR 2.0
/* Allgather on one node, from the single-copy size up: pairwise has each
 * rank read every block straight from its owner's buffer, where the ring
 * reads it from a neighbour that must have copied it first, so a block
 * waits for n-2 other ranks to be scheduled. Measured, not modelled
 * (perf/RESULTS.md, "Allgather pairwise"): at 3, 4 and 8 ranks on the
 * 2-core VM pairwise is modelled at this share of the ring's cost there;
 * elsewhere it has no cost (only CCL_ALGO picks it). On 2 ranks the two
 * schedules are the same steps, but only pairwise's are independent,
 * which lets a rank's own block go to its buffer and its peer's in one
 * pass (the twin, shm_help.h): 1.4-2x the ring there out of place
 * (perf/RESULTS.md, "Broadcast and allgather twin"). */
#define TUNE_AG_PAIRWISE_FACTOR 0.7
/* One end (send or receive) of a slice crossing nodes, where cores are
 * shared: core time per slice and per byte. From the 4 nodes x 2 ranks
 * sweep on the 2-core VM (perf/RESULTS.md, "The tuner"): at 8-64 B each
 * algorithm took ~0.95 ms plus ~110 us per slice crossing nodes (ring 7
 * slices, hier 6, tree 10, rd 16: 1.5-1.9, 1.5-1.8, 2.1-2.3, 2.2-3.3 ms),
 * and at 16 MiB the ring (1.75 buffers through each node's NIC) 124-134 ms
 * against hier's (1.5) 96-108: ~0.7 ns per byte at each end. */
#define TUNE_NET_END_US 110.0
#define TUNE_NET_END_US_PER_B 0.7e-3

/* Which algorithms have a schedule for each collective, whatever the
 * layout (tune_applies adds the layout and size conditions). When hier.c
 * learns a collective, add ALGO_HIER to its row and give tune_hier a case
 * for it. */
static const unsigned tune_coll_algos[SCHED_NUM_COLLS] = {
    [SCHED_ALLREDUCE] = TUNE_BIT(ALGO_RING) | TUNE_BIT(ALGO_DIRECT) | TUNE_BIT(ALGO_ONESHOT) |
                        TUNE_BIT(ALGO_TREE) | TUNE_BIT(ALGO_RD) | TUNE_BIT(ALGO_HIER) | TUNE_BIT(ALGO_PAIR),
    [SCHED_ALLGATHER] = TUNE_BIT(ALGO_RING) | TUNE_BIT(ALGO_PAIRWISE) | TUNE_BIT(ALGO_ONESHOT) | TUNE_BIT(ALGO_HIER),
    [SCHED_REDUCE_SCATTER] = TUNE_BIT(ALGO_RING) | TUNE_BIT(ALGO_ONESHOT) | TUNE_BIT(ALGO_HIER),
    [SCHED_BROADCAST] = TUNE_BIT(ALGO_CHAIN) | TUNE_BIT(ALGO_PAIRWISE) | TUNE_BIT(ALGO_ONESHOT) | TUNE_BIT(ALGO_HIER),
    [SCHED_REDUCE] = TUNE_BIT(ALGO_CHAIN) | TUNE_BIT(ALGO_ONESHOT) | TUNE_BIT(ALGO_HIER),
    [SCHED_ALLTOALL] = TUNE_BIT(ALGO_PAIRWISE) | TUNE_BIT(ALGO_ONESHOT),
    [SCHED_GATHER] = TUNE_BIT(ALGO_PAIRWISE) | TUNE_BIT(ALGO_ONESHOT),
    [SCHED_SCATTER] = TUNE_BIT(ALGO_PAIRWISE) | TUNE_BIT(ALGO_ONESHOT),
    [SCHED_P2P_SEND] = TUNE_BIT(ALGO_PAIRWISE),
    [SCHED_P2P_RECV] = TUNE_BIT(ALGO_PAIRWISE),
};

#define TUNE_BANDWIDTH_ALGOS (TUNE_BIT(ALGO_RING) | TUNE_BIT(ALGO_CHAIN) | TUNE_BIT(ALGO_PAIRWISE))

static const char *const tune_names[ALGO_COUNT] = {"ring", "direct", "oneshot", "chain",
                                                   "pairwise", "tree", "rd", "hier", "pair"};

const char *tune_algo_name(algo_t algo)
{
    return (unsigned)algo < ALGO_COUNT ? tune_names[algo] : "?";
}

algo_t tune_bandwidth_algo(sched_coll_t coll)
{
    switch (coll) {
    case SCHED_BROADCAST:
    case SCHED_REDUCE:
        return ALGO_CHAIN;
    case SCHED_ALLTOALL:
    case SCHED_GATHER:
    case SCHED_SCATTER:
    case SCHED_P2P_SEND:
    case SCHED_P2P_RECV:
        return ALGO_PAIRWISE;
    default:
        return ALGO_RING;
    }
}

double tune_action_passes(int action)
{
    switch (action) {
    case SCHED_RECV_COPY_SEND:
        return 2;   /* two copies out of the slot: to the next slot and to dst */
    case SCHED_RECV_REDUCE_COPY_SEND:
        return 1.5; /* one reduce writing two outputs */
    default:
        return 1;   /* send, receive, copy, reduce: one pass */
    }
}

/* ---- the layout, reduced ------------------------------------------------ */

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

/* ---- costs ---------------------------------------------------------------- */

/* One evaluation: the call and the link costs in per-byte form. */
typedef struct {
    const tune_model_t *m;
    sched_coll_t coll;
    double size;   /* bytes */
    double s;      /* slot bytes */
    int n, nn;
    double ai, an; /* hop latency, us: shm, net */
    double bi, bn; /* us per byte: a rank's pass, a NIC */
    int grouped;   /* in a group: no whole-step references (exec_host.c) */
} tune_ev_t;

/* One round of an algorithm whose steps move chunks of c bytes, split into
 * what it costs whatever the slice size and what it costs per byte of
 * slice, so that a short last slice costs what it moves. */
typedef struct {
    double c;        /* chunk per step, bytes */
    double lat;      /* critical path of a round: hop latencies, executor overhead (us) */
    double pb;       /* critical path per byte of slice: passes, wire (us/B) */
    double nb;       /* the busiest NIC per byte of slice (us/B) */
    double clat, cb; /* one rank's own work per round: fixed (us), per byte (us/B) */
    double m;        /* slices carrying data that leave the busiest node per round */
} tune_round_t;

/* k = ceil(c / s) rounds: T = call + max(path, nic, cpu) with
 *   path = k lat + c pb
 *   nic  = c nb + one hop (the NIC streams every slice; latency shows once)
 *   cpu  = (k clat + c cb) L / cores, only when a node has more ranks than
 *          cores, plus the network's ends, 2 m (k net_end + c net_end_b) / cores,
 *          when they are fewer than its ranks and proxies. */
static double tune_total(const tune_ev_t *e, const tune_round_t *r)
{
    if (r->c <= 0)
        return TUNE_CALL_US;
    double k = ceil(r->c / e->s), x = r->c < e->s ? r->c : e->s;
    double t = k * r->lat + r->c * r->pb;
    if (r->nb > 0) {
        double nic = r->c * r->nb + e->an + 2 * x * e->bi;
        if (nic > t)
            t = nic;
    }
    double L = e->m->max_local, cores = e->m->link.cores, cpu = 0;
    if (cores > 0 && L > cores)
        cpu = (k * r->clat + r->c * r->cb) * L / cores;
    if (cores > 0 && e->nn > 1 && 2 * L > cores)
        cpu += 2 * r->m * (k * TUNE_NET_END_US + r->c * TUNE_NET_END_US_PER_B) / cores;
    if (cpu > t)
        t = cpu;
    return TUNE_CALL_US + t;
}

/* The chunk of one part when size bytes are cut into nparts parts the way
 * sched_partition does (64-byte aligned, so small sizes leave the last
 * parts empty). */
static double tune_part(double size, double nparts)
{
    double per = ceil(ceil(size / nparts) / 64) * 64;
    return per < size ? per : size;
}

/* One rank copying bytes (a collective on one rank). */
static double tune_copy(const tune_ev_t *e, double bytes)
{
    tune_round_t r = {.c = bytes, .lat = TUNE_STEP_US, .pb = e->bi, .clat = TUNE_STEP_US, .cb = e->bi};
    return tune_total(e, &r);
}

static double tune_ring(const tune_ev_t *e)
{
    const tune_model_t *m = e->m;
    int n = e->n, X = m->ring_cross, f = m->ring_flows;
    if (n == 1)
        return tune_copy(e, e->size);
    double moves, passes, steps;
    switch (e->coll) {
    case SCHED_ALLREDUCE:
        /* SEND, n-2 RRS, RRCS, n-2 RCS, RECV: every step but the first
         * receives, every step but the last sends */
        moves = 2.0 * (n - 1);
        steps = 2.0 * n - 1;
        passes = 1 + (n - 2) * tune_action_passes(SCHED_RECV_REDUCE_SEND) +
                 tune_action_passes(SCHED_RECV_REDUCE_COPY_SEND) +
                 (n - 2) * tune_action_passes(SCHED_RECV_COPY_SEND) + 1;
        break;
    case SCHED_ALLGATHER:
        /* COPY own, SEND, n-2 RCS, RECV */
        moves = n - 1.0;
        steps = n + 1.0;
        passes = 3 + (n - 2) * tune_action_passes(SCHED_RECV_COPY_SEND);
        break;
    default:
        /* reduce-scatter: SEND, n-2 RRS, RRC */
        moves = n - 1.0;
        steps = passes = n;
        break;
    }
    /* The path goes moves/n times round the ring; a slice crossing a node
     * shares the NIC with the f - 1 others leaving that node. */
    tune_round_t r = {.c = e->coll == SCHED_ALLREDUCE ? tune_part(e->size, n) : e->size / n};
    r.lat = moves / n * ((n - X) * e->ai + X * e->an) + steps * TUNE_STEP_US;
    r.pb = moves / n * X * f * e->bn + passes * e->bi;
    r.nb = X ? moves * f * e->bn : 0; /* a rank sends as many slices as it receives */
    /* Of the n parts only the first `full` hold data when the buffer is
     * small (64-byte parts): the others' steps are skipped, so only those
     * slices go round the ring. */
    double full = r.c > 0 ? fmin(n, ceil(e->size / r.c)) : 0;
    r.m = moves * f * full / n;
    r.clat = steps * TUNE_STEP_US;
    r.cb = passes * e->bi;
    double t = tune_total(e, &r);
    if (n == 2 && e->coll == SCHED_ALLREDUCE && e->nn == 1 && e->size <= TUNE_RING2_SHM_MAX)
        t *= TUNE_RING2_SHM_FACTOR;
    return t;
}

static double tune_direct(const tune_ev_t *e)
{
    int net = e->nn > 1;
    const tune_round_t r = {
        .c = e->size,
        .lat = (net ? e->an : e->ai) + 2 * TUNE_STEP_US,
        .pb = 2 * e->bi + (net ? e->bn : 0),
        .nb = net ? e->bn : 0,
        .clat = 2 * TUNE_STEP_US,
        .cb = 2 * e->bi,
        .m = net,
    };
    return tune_total(e, &r);
}

/* The fused 2-rank allreduce (core/exec_pair.c): each rank reduces half
 * the slices, reading both inputs and writing both outputs, after two
 * hops (the offers, then whether both could map the other's buffers). */
static double tune_pair(const tune_ev_t *e)
{
    const tune_round_t r = {
        .c = e->size / 2,
        .lat = TUNE_STEP_US,
        .pb = 2 * e->bi,
        .clat = TUNE_STEP_US,
        .cb = 2 * e->bi,
    };
    return 2 * e->ai + tune_total(e, &r);
}

static double tune_tree(const tune_ev_t *e)
{
    const tune_model_t *m = e->m;
    if (e->n == 1)
        return tune_copy(e, e->size);
    /* A rank runs tree 0 up and down, then tree 1: per level up, two
     * reductions (one per child), down a copy-and-forward (2 passes) and a
     * send. The timed simulation gives about 4 (d0 + d1) - 2 passes on the
     * path and 7 per rank (interior in one tree, leaf in the other). Parts
     * are 64-byte aligned: up to 64 bytes, tree 1 has nothing to do. */
    double per = tune_part(e->size, 2);
    int trees = e->size > per ? 2 : 1;
    tune_round_t r = {.c = per};
    double passes = 4.0 * (m->tree_depth[0] + m->tree_depth[1]) - 2;
    for (int t = 0; t < trees; t++) {
        int d = m->tree_depth[t], dn = m->tree_net[t];
        r.lat += 2 * (dn * e->an + (d - dn) * e->ai) + 4 * d * TUNE_STEP_US;
    }
    /* Between nodes a level's two children share the parent's NIC going
     * up and coming down. */
    r.pb = 3.0 * (m->tree_net[0] + m->tree_net[1]) * e->bn + (passes > 2 ? passes : 2) * e->bi;
    r.nb = m->tree_flows * e->bn;
    /* tree_flows: edges of both trees touching the node, a slice out and
     * one in each (up, down); trees 1 when tree 1 is empty. */
    r.m = m->tree_flows * trees / 2.0;
    r.clat = 6 * TUNE_STEP_US;
    r.cb = 7 * e->bi;
    return tune_total(e, &r);
}

static double tune_rd(const tune_ev_t *e)
{
    const tune_model_t *m = e->m;
    if (e->n == 1)
        return tune_copy(e, e->size);
    /* Each exchange: SEND, one hop, RECV_REDUCE_COPY. The f ranks of a
     * node whose partners are elsewhere send at once, so the last of them
     * is f-1 slices behind on the NIC; it stays behind for the later
     * exchanges rather than falling behind again. */
    tune_round_t r = {.c = e->size};
    int nx = 0, fmax = 0;
    for (int k = 0; k < m->rd_logp; k++) {
        int f = m->rd_flows[k];
        r.lat += (f ? e->an : e->ai) + 2 * TUNE_STEP_US;
        r.pb += 2 * e->bi;
        r.nb += f * e->bn;
        r.m += f;
        nx += f > 0;
        fmax = f > fmax ? f : fmax;
    }
    r.clat = 2 * m->rd_logp * TUNE_STEP_US;
    r.cb = 2 * m->rd_logp * e->bi;
    if (m->rd_extra) {
        /* Fold in and hand back: two more hops, but only the first p-n
         * ranks wait for the fold; their partners' data is there when they
         * arrive, which hides about half a hop (timed simulation). */
        int f = m->rd_fold_flows;
        r.lat += 1.5 * (f ? e->an : e->ai) + 4 * TUNE_STEP_US;
        r.pb += 4 * e->bi;
        r.nb += f * e->bn;
        r.m += f;
        r.clat += 2 * TUNE_STEP_US;
        r.cb += 2 * e->bi;
        nx += f ? 2 : 0;
        fmax = f > fmax ? f : fmax;
    }
    if (nx)
        r.pb += (nx + fmax - 1) * e->bn;
    return tune_total(e, &r);
}

/* Passes of one rank in a ring allreduce over nn members. */
static double tune_ring_passes(int nn)
{
    return nn == 1 ? 1 : 3.5 + 3.0 * (nn - 2);
}

static double tune_hier(const tune_ev_t *e)
{
    const tune_model_t *m = e->m;
    int nn = e->nn, S = m->max_local;
    if (e->coll != SCHED_ALLREDUCE)
        return INFINITY; /* not modelled yet: runs only when CCL_ALGO asks for it */
    /* Shards that hold data (64-byte parts leave the last ones of a small
     * buffer empty); a rank of the emptiest node owns the most of them. */
    double shard = tune_part(e->size, S);
    int Sd = shard > 0 ? (int)ceil(e->size / shard) : 0;
    int q = (Sd + m->min_local - 1) / m->min_local;
    /* 1: reduce-scatter chains, nn units of S shards: S-1 shm hops per
     * unit, one pass per shard and unit. 2: q rings over the nodes, one
     * after the other; the node's S owners send at once, so the last of
     * them is S-1 slices behind on the NIC. 3: allgather chains: S-1 hops
     * per unit, a send, S-2 copy-and-forwards and a receive. */
    double steps = 2.0 * nn * Sd + q * (2.0 * nn - 1);
    tune_round_t r = {.c = tune_part(shard, nn)};
    r.lat = 2.0 * nn * (S - 1) * e->ai + q * 2.0 * (nn - 1) * e->an + steps * TUNE_STEP_US;
    r.cb = (nn * Sd + q * tune_ring_passes(nn) + 2.0 * nn * (Sd - 1)) * e->bi;
    r.pb = (q * 2.0 * (nn - 1) + Sd - 1) * e->bn + r.cb;
    r.nb = 2.0 * (nn - 1) * Sd * e->bn;
    /* Each shard's ring over the nodes moves only its parts that hold
     * data (64-byte parts: one of nn for 8 bytes). */
    double full = r.c > 0 ? fmin(nn, ceil(shard / r.c)) : 0;
    r.m = 2.0 * (nn - 1) * Sd * full / nn;
    r.clat = steps * TUNE_STEP_US;
    return tune_total(e, &r);
}

/* A pipeline, not a lock-step: the first slice crosses all n-1 hops, then
 * one slice per time of the busiest stage. */
static double tune_chain(const tune_ev_t *e)
{
    const tune_model_t *m = e->m;
    int n = e->n, X = m->ring_cross;
    if (n == 1)
        return tune_copy(e, e->size);
    if (e->size <= 0)
        return TUNE_CALL_US;
    double x = e->size < e->s ? e->size : e->s;
    /* Broadcast: a middle rank receives, keeps and forwards (RCS, 2
     * passes); reduce: it reduces into the next slot (1 pass). */
    double passes = e->coll == SCHED_BROADCAST ? tune_action_passes(SCHED_RECV_COPY_SEND) : 1;
    double stage = passes * x * e->bi + TUNE_STEP_US;
    double wire = X ? x * e->bn * m->ring_flows : 0;
    double fill = (n - 1 - X) * e->ai + X * (e->an + x * e->bn) + (n - 1) * stage;
    double t = fill + (e->size - x) / x * (wire > stage ? wire : stage);
    double L = m->max_local, cores = m->link.cores;
    if (cores > 0 && L > cores && e->size / x * stage * L / cores > t)
        t = e->size / x * stage * L / cores;
    return TUNE_CALL_US + t;
}

/* Broadcast as a star: every reader copies the root's buffer, lent once by
 * reference (single copy), and the root, with nothing to receive, copies
 * slices of it for them (shm_help.h): n buffers written, none forwarded.
 * Only where ranks outnumber the cores their node shares, where the
 * chain's forwarding ranks wait on each other's time slices: 4 ranks on
 * the 2-core VM, far apart, took 2.6-2.7 ms against the chain's 3.5-4.4
 * at 16 MiB and 6.6-7.2 against 9.0-10.0 at 64 MiB; over all placements
 * the chain took 0.95-1.43x the star's time (perf/RESULTS.md). Not in a
 * group, where nothing is lent whole and the root would feed n-1 FIFOs.
 * The model cannot see registration, which every rank would have to
 * agree on: a root whose buffer is not a ccl_mem_alloc one sends it n-1
 * times through FIFOs (not measured against the chain). With a core per
 * rank the chain's pipeline is not measured against it either. */
static double tune_star_broadcast(const tune_ev_t *e)
{
    const tune_model_t *m = e->m;
    double cores = m->link.cores;
    size_t sc = m->link.single_copy_bytes;
    if (e->nn > 1 || e->n < 3 || e->grouped || sc == 0 || e->size < (double)sc || cores <= 0 ||
        m->max_local <= cores)
        return INFINITY;
    return TUNE_CALL_US + e->ai + e->n * e->size * e->bi / cores;
}

static double tune_pairwise(const tune_ev_t *e)
{
    const tune_model_t *m = e->m;
    int n = e->n, net = e->nn > 1;
    if (e->coll == SCHED_ALLGATHER) {
        size_t sc = m->link.single_copy_bytes;
        if (net || n < 2 || sc == 0 || e->size < (double)sc)
            return INFINITY; /* not modelled: runs only when CCL_ALGO asks for it */
        return TUNE_AG_PAIRWISE_FACTOR * tune_ring(e);
    }
    if (e->coll == SCHED_BROADCAST)
        return tune_star_broadcast(e);
    tune_round_t r = {0};
    double moves, flows;
    switch (e->coll) {
    case SCHED_ALLTOALL: /* n-1 sends, n-1 receives, own block */
        r.c = e->size / n;
        moves = 2.0 * (n - 1) + 1;
        flows = m->a2a_flows;
        break;
    case SCHED_GATHER:
    case SCHED_SCATTER:
        /* The root moves every block; its node's NIC carries those of
         * every rank elsewhere. */
        r.c = e->size / n;
        moves = n;
        flows = net ? n - m->min_local : 0;
        break;
    default: /* send or receive: one peer, on this node or not */
        r.c = e->size;
        moves = 1;
        flows = net;
        break;
    }
    /* Steps are independent: a round is the rank's own work plus a hop. */
    r.clat = moves * TUNE_STEP_US;
    r.cb = moves * e->bi;
    /* On one host an alltoall's rank waits for every peer, as a full
     * one-shot synchronisation does (tune_oneshot: log2(n) hops); a root
     * of gather or scatter, and a send or receive, for one peer's hop.
     * Counted as one hop for alltoall too, 4 ranks on the 2-core VM went
     * pairwise at 16 B-32 KiB where one-shot took 0.78-0.98x its time
     * (perf/RESULTS.md). Across nodes the network hop dominates, one as
     * the schedule simulator has it (tests/sim/test_sim_tune.c). */
    double hops = !net && e->coll == SCHED_ALLTOALL && n > 2 ? log2(n) : 1;
    r.lat = r.clat + (net ? e->an : e->ai * hops);
    r.pb = r.cb + (net ? e->bn : 0);
    r.nb = flows * e->bn;
    r.m = flows;
    return tune_total(e, &r);
}

/* What each rank posts on the board (the board's per-rank size check),
 * and reads back from it, in bytes. */
static void tune_board(const tune_ev_t *e, double *post, double *read)
{
    double sz = e->size, n = e->n;
    switch (e->coll) {
    case SCHED_ALLREDUCE: *post = sz; *read = n * sz; break;
    case SCHED_REDUCE: *post = sz; *read = n * sz; break;
    case SCHED_BROADCAST: *post = sz; *read = sz; break;
    case SCHED_ALLGATHER: *post = sz / n; *read = sz; break;
    case SCHED_GATHER: *post = sz / n; *read = sz; break;
    case SCHED_REDUCE_SCATTER: *post = sz; *read = sz; break; /* n slices of size/n */
    case SCHED_ALLTOALL: *post = sz; *read = sz; break;
    case SCHED_SCATTER: *post = sz; *read = sz / n; break;
    default: *post = sz; *read = sz; break;
    }
}

/* One synchronisation of all ranks on the board, then cache-resident
 * copies and reductions. A rooted collective synchronises less: its
 * readers wait for the root alone (broadcast, scatter), or the root alone
 * waits for the others (reduce, gather), one hop as in pairwise; counted
 * as log2(n) hops like the others' full synchronisation, scatter and
 * gather on 4 ranks of the 2-core VM went pairwise at 2.0-2.5 and 2.0-3.9
 * us per 16-byte call (blocking and on a stream) where one-shot took
 * 0.35-0.98 and 0.31-0.77 (ccl-perf -n 2000, each forced with CCL_ALGO). */
static double tune_oneshot(const tune_ev_t *e)
{
    double post, read;
    tune_board(e, &post, &read);
    int rooted = e->coll == SCHED_BROADCAST || e->coll == SCHED_SCATTER || e->coll == SCHED_REDUCE ||
                 e->coll == SCHED_GATHER;
    double sync = e->ai * (e->n > 2 && !rooted ? log2(e->n) : 1);
    return TUNE_BOARD_US + sync + (post + read) * e->bi / TUNE_HOT;
}

int tune_applies(const tune_model_t *m, sched_coll_t coll, algo_t algo, size_t size, int grouped)
{
    if ((unsigned)coll >= SCHED_NUM_COLLS || (unsigned)algo >= ALGO_COUNT)
        return 0;
    if (!(tune_coll_algos[coll] & m->avail & TUNE_BIT(algo)))
        return 0;
    switch (algo) {
    case ALGO_DIRECT:
        return m->nranks == 2;
    case ALGO_HIER:
        return m->nnodes > 1;
    case ALGO_PAIR: {
        /* Single copy of whole buffers: never grouped (a group's steps go
         * by slices), from the single-copy size. Whether both ranks' buffers
         * are ccl_mem_alloc ones only the call finds out (it falls back). */
        size_t sc = m->link.single_copy_bytes;
        return m->nranks == 2 && m->nnodes == 1 && !grouped && sc > 0 && size >= sc;
    }
    case ALGO_ONESHOT: {
        /* The board serves one call at a time, so grouped calls never use it. */
        tune_ev_t e = {.m = m, .coll = coll, .size = (double)size, .n = m->nranks};
        double post, read;
        tune_board(&e, &post, &read);
        return !grouped && m->nnodes == 1 && m->link.board_bytes > 0 && post <= (double)m->link.board_bytes;
    }
    default:
        return 1;
    }
}

double tune_cost(const tune_model_t *m, sched_coll_t coll, algo_t algo, size_t size, int grouped)
{
    if (!tune_applies(m, coll, algo, size, grouped))
        return INFINITY;
    const tune_links_t *l = &m->link;
    tune_ev_t e = {m, coll, (double)size, (double)(l->slot_bytes ? l->slot_bytes : 1), m->nranks, m->nnodes,
                   l->shm_lat, l->net_lat, 1e-3 / (l->shm_bw > 0 ? l->shm_bw : 1),
                   1e-3 / (l->net_bw > 0 ? l->net_bw : 1), grouped};
    switch (algo) {
    case ALGO_RING: return tune_ring(&e);
    case ALGO_DIRECT: return tune_direct(&e);
    case ALGO_ONESHOT: return tune_oneshot(&e);
    case ALGO_CHAIN: return tune_chain(&e);
    case ALGO_PAIRWISE: return tune_pairwise(&e);
    case ALGO_TREE: return tune_tree(&e);
    case ALGO_RD: return tune_rd(&e);
    case ALGO_HIER: return tune_hier(&e);
    case ALGO_PAIR: return tune_pair(&e);
    default: return INFINITY;
    }
}

algo_t tune_pick(const tune_model_t *m, sched_coll_t coll, size_t size, int grouped, unsigned allowed,
                 double *cost, tune_why_t *why)
{
    unsigned apply = 0;
    for (int a = 0; a < ALGO_COUNT; a++)
        if (tune_applies(m, coll, (algo_t)a, size, grouped))
            apply |= TUNE_BIT(a);
    unsigned cand = apply & allowed;
    tune_why_t w = TUNE_PICK_MODEL;
    if (!cand && (allowed & TUNE_BANDWIDTH_ALGOS)) {
        /* "ring" where the collective's bandwidth algorithm is chain or
         * pairwise means that one (CCL_ALGO=ring keeps working everywhere). */
        cand = apply & TUNE_BIT(tune_bandwidth_algo(coll));
        w = TUNE_PICK_BANDWIDTH;
    }
    if (!cand) {
        cand = apply;
        w = TUNE_PICK_FALLBACK;
    }
    int best = -1;
    double best_cost = INFINITY;
    for (int a = 0; a < ALGO_COUNT; a++) {
        if (!(cand & TUNE_BIT(a)))
            continue;
        double c = tune_cost(m, coll, (algo_t)a, size, grouped);
        if (best < 0 || c < best_cost) { /* the first candidate even if it has no cost model */
            best_cost = c;
            best = a;
        }
    }
    if (best < 0)
        best = tune_bandwidth_algo(coll); /* nothing applies: cannot happen, every collective has one */
    if (cost)
        *cost = best_cost;
    if (why)
        *why = w;
    return (algo_t)best;
}

/* ---- CCL_ALGO ------------------------------------------------------------- */

static int tune_algo_lookup(const char *name)
{
    static const struct { const char *name; algo_t algo; } aliases[] = {
        {"one-shot", ALGO_ONESHOT}, {"recursive_doubling", ALGO_RD}, {"hierarchical", ALGO_HIER},
    };
    for (int a = 0; a < ALGO_COUNT; a++)
        if (!strcasecmp(name, tune_names[a]))
            return a;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(name, aliases[i].name))
            return (int)aliases[i].algo;
    return -1;
}

/* Collectives a prefix names (bit per sched_coll_t); 0 if unknown. NCCL's
 * names (allreduce, reducescatter, sendrecv...) and ccl's own. */
static unsigned tune_prefix_lookup(const char *name)
{
    static const struct { const char *name; unsigned colls; } names[] = {
        {"allreduce", 1u << SCHED_ALLREDUCE},
        {"allgather", 1u << SCHED_ALLGATHER},
        {"reducescatter", 1u << SCHED_REDUCE_SCATTER},
        {"reduce_scatter", 1u << SCHED_REDUCE_SCATTER},
        {"broadcast", 1u << SCHED_BROADCAST},
        {"bcast", 1u << SCHED_BROADCAST},
        {"reduce", 1u << SCHED_REDUCE},
        {"alltoall", 1u << SCHED_ALLTOALL},
        {"gather", 1u << SCHED_GATHER},
        {"scatter", 1u << SCHED_SCATTER},
        {"sendrecv", (1u << SCHED_P2P_SEND) | (1u << SCHED_P2P_RECV)},
        {"p2p", (1u << SCHED_P2P_SEND) | (1u << SCHED_P2P_RECV)},
        {"send", 1u << SCHED_P2P_SEND},
        {"recv", 1u << SCHED_P2P_RECV},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(name, names[i].name))
            return names[i].colls;
    return 0;
}

/* Trims spaces at both ends, in place. */
static char *tune_trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t len = strlen(s);
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        s[--len] = '\0';
    return s;
}

static void tune_bad(int *nbad, char *bad, size_t badlen, const char *fmt, const char *what)
{
    if ((*nbad)++ == 0 && bad && badlen)
        snprintf(bad, badlen, fmt, what);
}

int tune_parse_algo(const char *text, unsigned allowed[SCHED_NUM_COLLS], char *bad, size_t badlen)
{
    int nbad = 0;
    for (int c = 0; c < SCHED_NUM_COLLS; c++)
        allowed[c] = TUNE_ALL;
    if (bad && badlen)
        bad[0] = '\0';
    if (!text || !text[0])
        return 0;
    char *copy = strdup(text);
    if (!copy)
        return 0; /* out of memory: as if unset */
    char *save = NULL;
    int first = 1;
    for (char *entry = strtok_r(copy, ";", &save); entry; entry = strtok_r(NULL, ";", &save), first = 0) {
        unsigned colls = (1u << SCHED_NUM_COLLS) - 1;
        char *list = entry, *colon = strchr(entry, ':');
        if (colon) {
            *colon = '\0';
            list = colon + 1;
            colls = tune_prefix_lookup(tune_trim(entry));
            if (!colls) {
                tune_bad(&nbad, bad, badlen, "unknown collective \"%s\"", tune_trim(entry));
                continue;
            }
        } else if (!first) {
            /* As in NCCL: it would undo every entry before it. */
            tune_bad(&nbad, bad, badlen, "\"%s\" has no collective prefix but is not the first entry",
                     tune_trim(entry));
            continue;
        }
        list = tune_trim(list);
        int exclude = list[0] == '^';
        unsigned named = 0;
        char *save2 = NULL;
        for (char *name = strtok_r(list + exclude, ",", &save2); name; name = strtok_r(NULL, ",", &save2)) {
            name = tune_trim(name);
            int a = tune_algo_lookup(name);
            if (a < 0)
                tune_bad(&nbad, bad, badlen, "unknown algorithm \"%s\"", name);
            else
                named |= TUNE_BIT(a);
        }
        if (!named)
            continue; /* nothing known in it: the entry changes nothing */
        for (int c = 0; c < SCHED_NUM_COLLS; c++)
            if (colls & (1u << c))
                allowed[c] = exclude ? TUNE_ALL & ~named : named;
    }
    free(copy);
    return nbad;
}

/* ---- text ----------------------------------------------------------------- */

/* "4K", "64M", "1G", or plain bytes. */
static void tune_size_str(size_t v, char *buf, size_t len)
{
    static const char units[] = "KMGT";
    int u = -1;
    while (v >= 1024 && v % 1024 == 0 && u < 3) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, len, "%zu", v);
    else
        snprintf(buf, len, "%zu%c", v, units[u]);
}

/* Microseconds in 8 characters at most. */
static void tune_us_str(double us, char *buf, size_t len)
{
    if (!isfinite(us))
        snprintf(buf, len, "-");
    else if (us < 10)
        snprintf(buf, len, "%.2f", us);
    else if (us < 1000)
        snprintf(buf, len, "%.1f", us);
    else if (us < 1e7)
        snprintf(buf, len, "%.0f", us);
    else
        snprintf(buf, len, "%.2e", us);
}

void tune_describe(const tune_model_t *m, tune_line_fn line, void *arg)
{
    char text[512], slot[32], board[32], cores[16], copy[32];
    const tune_links_t *l = &m->link;
    tune_size_str(l->slot_bytes, slot, sizeof slot);
    tune_size_str(l->board_bytes, board, sizeof board);
    tune_size_str(l->single_copy_bytes, copy, sizeof copy);
    snprintf(cores, sizeof cores, "%.3g", l->cores);
    snprintf(text, sizeof text,
             "tuner inputs: %d ranks on %d node%s (%d to %d per node), %s cores per node, slot %s, board %s, "
             "single copy from %s%s; shm %.3g GB/s per pass, %.3g us per hop; net %.3g GB/s per NIC, "
             "%.3g us per hop",
             m->nranks, m->nnodes, m->nnodes == 1 ? "" : "s", m->min_local, m->max_local, l->cores > 0 ? cores : "enough", slot,
             l->board_bytes ? board : "none", l->single_copy_bytes ? copy : "never",
             l->single_copy_auto ? " (automatic)" : "", l->shm_bw, l->shm_lat,
             l->net_bw, l->net_lat);
    line(arg, text);
    snprintf(text, sizeof text,
             "tuner layout: ring crosses nodes %d times (%d per NIC); trees depth %d/%d with %d/%d inter-node "
             "hops (%d edges per NIC); recursive doubling %d exchanges + %d folded",
             m->ring_cross, m->ring_flows, m->tree_depth[0], m->tree_depth[1], m->tree_net[0], m->tree_net[1],
             m->tree_flows, m->rd_logp, m->rd_extra);
    line(arg, text);
}

void tune_table(const tune_model_t *m, sched_coll_t coll, size_t min, size_t max, size_t factor, unsigned allowed,
                tune_line_fn line, void *arg)
{
    char text[512], cell[32];
    unsigned cols = tune_coll_algos[coll] & m->avail;
    int o = snprintf(text, sizeof text, "%-14s %8s", sched_coll_name(coll), "bytes");
    for (int a = 0; a < ALGO_COUNT; a++)
        if (cols & TUNE_BIT(a))
            o += snprintf(text + o, sizeof text - (size_t)o, " %9s", tune_names[a]);
    snprintf(text + o, sizeof text - (size_t)o, "   pick (us)");
    line(arg, text);
    if (factor < 2)
        factor = 2;
    for (size_t size = min ? min : 1; size <= max && size > 0; size *= factor) {
        tune_size_str(size, cell, sizeof cell);
        o = snprintf(text, sizeof text, "%-14s %8s", "", cell);
        for (int a = 0; a < ALGO_COUNT; a++) {
            if (!(cols & TUNE_BIT(a)))
                continue;
            tune_us_str(tune_cost(m, coll, (algo_t)a, size, 0), cell, sizeof cell);
            o += snprintf(text + o, sizeof text - (size_t)o, " %9s", cell);
        }
        algo_t pick = tune_pick(m, coll, size, 0, allowed, NULL, NULL);
        snprintf(text + o, sizeof text - (size_t)o, "   %s", tune_names[pick]);
        line(arg, text);
        if (size > max / factor)
            break;
    }
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
