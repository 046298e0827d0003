/*
 * tune.c - the alpha-beta cost model of every algorithm (see tune.h): where
 * an algorithm applies, what it costs, and the pick. Which algorithms
 * exist, what they serve and where they apply is the registry's
 * (algos/registry.h); each row names the formula below that prices it
 * (its cost kind). The model's inputs are tune_model.c's, CCL_ALGO
 * tune_algo.c's, the text for ccl-info and the log tune_text.c's.
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

#include <math.h>

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
    int grouped;   /* in a group: no whole-step references (exec/host.c) */
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
    const algo_desc_t *d = &algo_registry[algo];
    if (!(d->colls & ALGO_COLL(coll)) || !(m->avail & TUNE_BIT(algo)))
        return 0;
    if ((d->min_ranks && m->nranks < d->min_ranks) || (d->max_ranks && m->nranks > d->max_ranks))
        return 0;
    unsigned w = d->where;
    if (!w)
        return 1;
    if (((w & ALGO_ONE_NODE) && m->nnodes != 1) || ((w & ALGO_MANY_NODES) && m->nnodes <= 1) ||
        ((w & ALGO_UNGROUPED) && grouped))
        return 0;
    if (w & ALGO_SINGLE_COPY) {
        size_t sc = m->link.single_copy_bytes;
        if (sc == 0 || size < sc)
            return 0;
    }
    if (w & ALGO_BOARD_FITS) {
        tune_ev_t e = {.m = m, .coll = coll, .size = (double)size, .n = m->nranks};
        double post, read;
        tune_board(&e, &post, &read);
        if (m->link.board_bytes == 0 || post > (double)m->link.board_bytes)
            return 0;
    }
    return 1;
}

double tune_cost(const tune_model_t *m, sched_coll_t coll, algo_t algo, size_t size, int grouped)
{
    if (!tune_applies(m, coll, algo, size, grouped))
        return INFINITY;
    const tune_links_t *l = &m->link;
    tune_ev_t e = {m, coll, (double)size, (double)(l->slot_bytes ? l->slot_bytes : 1), m->nranks, m->nnodes,
                   l->shm_lat, l->net_lat, 1e-3 / (l->shm_bw > 0 ? l->shm_bw : 1),
                   1e-3 / (l->net_bw > 0 ? l->net_bw : 1), grouped};
    switch (algo_registry[algo].cost) {
    case ALGO_COST_RING: return tune_ring(&e);
    case ALGO_COST_DIRECT: return tune_direct(&e);
    case ALGO_COST_BOARD: return tune_oneshot(&e);
    case ALGO_COST_CHAIN: return tune_chain(&e);
    case ALGO_COST_PAIRWISE: return tune_pairwise(&e);
    case ALGO_COST_TREE: return tune_tree(&e);
    case ALGO_COST_RD: return tune_rd(&e);
    case ALGO_COST_HIER: return tune_hier(&e);
    case ALGO_COST_PAIR: return tune_pair(&e);
    default: return INFINITY; /* ALGO_COST_NONE: not modelled */
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
    if (!cand && (allowed & algo_bandwidth_mask())) {
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
