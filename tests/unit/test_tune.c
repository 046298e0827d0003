/*
 * test_tune.c - the tuner's cost model and CCL_ALGO's syntax (src/topo/tune.c).
 *
 * The model is pure: these tests build its inputs by hand (links, slot and
 * board sizes, layouts of ranks over nodes) and check
 *   - the layout's reduction (ring crossings, NIC sharing, tree depths,
 *     recursive doubling partners elsewhere) on known layouts;
 *   - which algorithms apply where (direct: 2 ranks; hier: several nodes;
 *     one-shot: one host, a board, small enough, not grouped);
 *   - the picks the tuner is there for: one-shot for small single-host
 *     calls, direct for a 2-rank allreduce up to 8 MiB, the bandwidth
 *     algorithms beyond; recursive doubling (or a tree) for small calls on
 *     many nodes; hierarchical allreduce for large calls on 2 nodes over a
 *     slow network, at least 1.4x cheaper than the ring there;
 *   - on nodes whose cores are shared (fake nodes on one machine), the
 *     picks measured on 4 nodes x 2 ranks on the 2-core VM: the
 *     hierarchical ring for 8-64 B (one slice in flight), recursive
 *     doubling from 512 B to 256 KiB, hierarchical from 2 MiB; and that
 *     the network's CPU cost only counts where cores are shared;
 *   - CCL_ALGO: lists, ^ exclusion, per-collective entries, unknown names
 *     and prefixes, and what the pick does when nothing allowed applies;
 *   - costs are finite, positive and grow with the size.
 * The formulas themselves are checked against a timed simulation of the
 * real schedules in tests/sim/test_sim_tune.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "topo/tune.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* This VM's defaults: 5 GB/s passes, 0.1 us hops, 128 KiB slots, a 32 KiB
 * board, 2 cores per node. */
static tune_links_t links_default(double net_bw, double net_lat)
{
    return (tune_links_t){.shm_bw = 5, .shm_lat = 0.1, .net_bw = net_bw, .net_lat = net_lat, .cores = 0,
                          .slot_bytes = 128 * KiB, .board_bytes = 32 * KiB};
}

/* A model of nranks over nnodes (blocks); the board only on one node. */
static void model(tune_model_t *m, int nranks, int nnodes, double net_bw, double net_lat)
{
    sched_layout_t lay;
    tune_links_t l = links_default(net_bw, net_lat);
    if (nnodes > 1)
        l.board_bytes = 0;
    assert_int_equal(tune_layout_blocked(nranks, nnodes, &lay), CCL_SUCCESS);
    assert_int_equal(tune_model_init(m, &l, nranks, &lay), CCL_SUCCESS);
    tune_layout_free(&lay);
}

static algo_t pick(const tune_model_t *m, sched_coll_t coll, size_t size)
{
    return tune_pick(m, coll, size, 0, TUNE_ALL, NULL, NULL);
}

static void test_layout_shape(void **state)
{
    (void)state;
    tune_model_t m;
    model(&m, 8, 4, 1, 20);
    assert_int_equal(m.nnodes, 4);
    assert_int_equal(m.max_local, 2);
    assert_int_equal(m.min_local, 2);
    assert_int_equal(m.ring_cross, 4); /* 1->2, 3->4, 5->6, 7->0 */
    assert_int_equal(m.ring_flows, 1);
    assert_int_equal(m.rd_logp, 3);
    assert_int_equal(m.rd_extra, 0);
    assert_int_equal(m.rd_flows[0], 0); /* r^1: the other rank of the node */
    assert_int_equal(m.rd_flows[1], 2); /* r^2, r^4: both ranks of a node go out */
    assert_int_equal(m.rd_flows[2], 2);
    assert_int_equal(m.tree_depth[0], 3);
    assert_int_equal(m.tree_depth[1], 3);
    assert_int_equal(m.a2a_flows, 2 * 6);

    /* Uneven blocks: 7 ranks on 3 nodes are 2, 2 and 3. */
    sched_layout_t lay;
    assert_int_equal(tune_layout_blocked(7, 3, &lay), CCL_SUCCESS);
    assert_int_equal(lay.node_first[1], 2);
    assert_int_equal(lay.node_first[2], 4);
    assert_int_equal(lay.node_first[3], 7);
    assert_int_equal(lay.node_of[6], 2);
    assert_int_equal(lay.local_rank[6], 2);
    tune_links_t l = links_default(1, 20);
    assert_int_equal(tune_model_init(&m, &l, 7, &lay), CCL_SUCCESS);
    assert_int_equal(m.min_local, 2);
    assert_int_equal(m.max_local, 3);
    assert_int_equal(m.rd_extra, 3);
    tune_layout_free(&lay);
    assert_int_not_equal(tune_layout_blocked(2, 3, &lay), CCL_SUCCESS);

    /* One node: nothing crosses, whatever the size. */
    l = links_default(1, 20);
    assert_int_equal(tune_model_init(&m, &l, 8, NULL), CCL_SUCCESS);
    assert_int_equal(m.nnodes, 1);
    assert_int_equal(m.ring_cross, 0);
    assert_int_equal(m.tree_net[0] + m.tree_net[1], 0);
    assert_int_equal(m.max_local, 8);
}

static void test_applies(void **state)
{
    (void)state;
    tune_model_t m2, m3, m22;
    model(&m2, 2, 1, 1, 20);
    model(&m3, 3, 1, 1, 20);
    model(&m22, 4, 2, 1, 20);
    assert_true(tune_applies(&m2, SCHED_ALLREDUCE, ALGO_DIRECT, MiB, 0));
    assert_false(tune_applies(&m3, SCHED_ALLREDUCE, ALGO_DIRECT, MiB, 0));
    assert_false(tune_applies(&m2, SCHED_ALLGATHER, ALGO_DIRECT, MiB, 0));
    assert_false(tune_applies(&m3, SCHED_ALLREDUCE, ALGO_HIER, MiB, 0));
    assert_true(tune_applies(&m22, SCHED_ALLREDUCE, ALGO_HIER, MiB, 0));
    /* hier.c has these too; the model leaves them to CCL_ALGO (cost inf). */
    assert_true(tune_applies(&m22, SCHED_BROADCAST, ALGO_HIER, MiB, 0));
    assert_false(isfinite(tune_cost(&m22, SCHED_BROADCAST, ALGO_HIER, MiB, 0)));
    assert_true(tune_pick(&m22, SCHED_BROADCAST, MiB, 0, TUNE_ALL, NULL, NULL) != ALGO_HIER);
    /* The board: up to 32 KiB per rank, not grouped, one host only. */
    assert_true(tune_applies(&m3, SCHED_ALLREDUCE, ALGO_ONESHOT, 32 * KiB, 0));
    assert_false(tune_applies(&m3, SCHED_ALLREDUCE, ALGO_ONESHOT, 32 * KiB + 4, 0));
    assert_false(tune_applies(&m3, SCHED_ALLREDUCE, ALGO_ONESHOT, 8, 1));
    assert_false(tune_applies(&m22, SCHED_ALLREDUCE, ALGO_ONESHOT, 8, 0));
    /* Allgather posts one block of size/n per rank; alltoall all of it. */
    assert_true(tune_applies(&m3, SCHED_ALLGATHER, ALGO_ONESHOT, 96 * KiB, 0));
    assert_false(tune_applies(&m3, SCHED_ALLTOALL, ALGO_ONESHOT, 96 * KiB, 0));
    assert_false(tune_applies(&m3, SCHED_P2P_SEND, ALGO_ONESHOT, 8, 0));
    assert_true(isinf(tune_cost(&m3, SCHED_ALLREDUCE, ALGO_DIRECT, 8, 0)));
    assert_true(tune_applies(&m3, SCHED_BROADCAST, ALGO_CHAIN, 8, 0));
    assert_false(tune_applies(&m3, SCHED_BROADCAST, ALGO_RING, 8, 0));
    /* A comm can take an algorithm away. */
    m22.avail &= ~TUNE_BIT(ALGO_HIER);
    assert_false(tune_applies(&m22, SCHED_ALLREDUCE, ALGO_HIER, MiB, 0));
}

/* The single-host choices that were measured stay. */
static void test_single_host_picks(void **state)
{
    (void)state;
    tune_model_t m2, m4;
    model(&m2, 2, 1, 1, 20);
    model(&m4, 4, 1, 1, 20);
    for (size_t size = 8; size <= 32 * KiB; size *= 4) {
        assert_int_equal(pick(&m2, SCHED_ALLREDUCE, size), ALGO_ONESHOT);
        assert_int_equal(pick(&m4, SCHED_ALLREDUCE, size), ALGO_ONESHOT);
        assert_int_equal(pick(&m4, SCHED_BROADCAST, size), ALGO_ONESHOT);
        /* Rooted: one hop on the board, as pairwise, and less work. */
        assert_int_equal(pick(&m4, SCHED_SCATTER, size), ALGO_ONESHOT);
        assert_int_equal(pick(&m4, SCHED_GATHER, size), ALGO_ONESHOT);
    }
    /* The same with 4 ranks on 2 cores, as comm init models them (a hop
     * costs 10 us): a rooted one-shot waits one hop, not log2(4). */
    tune_model_t m4s;
    sched_layout_t lay;
    tune_links_t l = links_default(1, 20);
    l.shm_lat = 10;
    l.cores = 2;
    assert_int_equal(tune_layout_blocked(4, 1, &lay), CCL_SUCCESS);
    assert_int_equal(tune_model_init(&m4s, &l, 4, &lay), CCL_SUCCESS);
    tune_layout_free(&lay);
    for (size_t size = 16; size <= 16 * KiB; size *= 4) {
        assert_int_equal(pick(&m4s, SCHED_SCATTER, size), ALGO_ONESHOT);
        assert_int_equal(pick(&m4s, SCHED_GATHER, size), ALGO_ONESHOT);
        assert_int_equal(pick(&m4s, SCHED_BROADCAST, size), ALGO_ONESHOT);
    }
    assert_int_equal(pick(&m2, SCHED_ALLREDUCE, 64 * KiB), ALGO_DIRECT);
    assert_int_equal(pick(&m2, SCHED_ALLREDUCE, 8 * MiB), ALGO_DIRECT);
    assert_int_equal(pick(&m2, SCHED_ALLREDUCE, 64 * MiB), ALGO_RING);
    /* Grouped calls never use the board: direct from the first byte. */
    assert_int_equal(tune_pick(&m2, SCHED_ALLREDUCE, 8, 1, TUNE_ALL, NULL, NULL), ALGO_DIRECT);
    assert_int_equal(pick(&m4, SCHED_ALLREDUCE, 64 * MiB), ALGO_RING);
    assert_int_equal(pick(&m4, SCHED_ALLGATHER, 64 * MiB), ALGO_RING);
    assert_int_equal(pick(&m4, SCHED_REDUCE_SCATTER, 64 * MiB), ALGO_RING);
    assert_int_equal(pick(&m4, SCHED_BROADCAST, 64 * MiB), ALGO_CHAIN);
    assert_int_equal(pick(&m4, SCHED_REDUCE, 64 * MiB), ALGO_CHAIN);
    assert_int_equal(pick(&m4, SCHED_ALLTOALL, 64 * MiB), ALGO_PAIRWISE);
    assert_int_equal(pick(&m4, SCHED_GATHER, 64 * MiB), ALGO_PAIRWISE);
    assert_int_equal(pick(&m4, SCHED_P2P_SEND, 8), ALGO_PAIRWISE);
    /* Allgather reads blocks from their owners (pairwise) on one host from
     * its single-copy size up, 2 ranks included (the twin); the ring
     * elsewhere, and pairwise only where CCL_ALGO asks for it. */
    for (int n = 2; n <= 8; n++) {
        for (int nodes = 1; nodes <= 2; nodes++) {
            tune_model_t mg;
            sched_layout_t glay;
            tune_links_t gl = links_default(1, 20);
            gl.single_copy_bytes = 16 * MiB;
            if (nodes > 1)
                gl.board_bytes = 0;
            assert_int_equal(tune_layout_blocked(n, nodes, &glay), CCL_SUCCESS);
            assert_int_equal(tune_model_init(&mg, &gl, n, &glay), CCL_SUCCESS);
            tune_layout_free(&glay);
            int reads = nodes == 1;
            assert_int_equal(pick(&mg, SCHED_ALLGATHER, 64 * MiB), reads ? ALGO_PAIRWISE : ALGO_RING);
            assert_int_equal(pick(&mg, SCHED_ALLGATHER, 16 * MiB), reads ? ALGO_PAIRWISE : ALGO_RING);
            assert_int_equal(pick(&mg, SCHED_ALLGATHER, 8 * MiB), ALGO_RING);
            assert_true(tune_applies(&mg, SCHED_ALLGATHER, ALGO_PAIRWISE, 8, 0));
            assert_int_equal(tune_pick(&mg, SCHED_ALLGATHER, 8, 0, TUNE_BIT(ALGO_PAIRWISE), NULL, NULL),
                             ALGO_PAIRWISE);
        }
    }
    /* One rank: nothing to exchange, the ring copies. */
    tune_model_t m1;
    model(&m1, 1, 1, 1, 20);
    assert_true(isfinite(tune_cost(&m1, SCHED_ALLREDUCE, ALGO_RING, MiB, 1)));
}

/* The fused 2-rank allreduce: one host, from the single-copy size, not
 * grouped, allreduce only; where it applies it is the cheapest. */
static void test_pair_picks(void **state)
{
    (void)state;
    tune_model_t m2, m3, m22, m2off;
    sched_layout_t lay;
    tune_links_t l = links_default(1, 20);
    l.single_copy_bytes = MiB;
    assert_int_equal(tune_layout_blocked(2, 1, &lay), CCL_SUCCESS);
    assert_int_equal(tune_model_init(&m2, &l, 2, &lay), CCL_SUCCESS);
    tune_layout_free(&lay);
    assert_int_equal(tune_layout_blocked(3, 1, &lay), CCL_SUCCESS);
    assert_int_equal(tune_model_init(&m3, &l, 3, &lay), CCL_SUCCESS);
    tune_layout_free(&lay);
    tune_links_t ln = l;
    ln.board_bytes = 0;
    assert_int_equal(tune_layout_blocked(2, 2, &lay), CCL_SUCCESS);
    assert_int_equal(tune_model_init(&m22, &ln, 2, &lay), CCL_SUCCESS);
    tune_layout_free(&lay);
    tune_links_t l0 = l;
    l0.single_copy_bytes = 0; /* CCL_SINGLE_COPY_THRESHOLD=0 */
    assert_int_equal(tune_layout_blocked(2, 1, &lay), CCL_SUCCESS);
    assert_int_equal(tune_model_init(&m2off, &l0, 2, &lay), CCL_SUCCESS);
    tune_layout_free(&lay);

    assert_false(tune_applies(&m2, SCHED_ALLREDUCE, ALGO_PAIR, MiB - 4, 0));
    assert_true(tune_applies(&m2, SCHED_ALLREDUCE, ALGO_PAIR, MiB, 0));
    assert_false(tune_applies(&m2, SCHED_ALLREDUCE, ALGO_PAIR, MiB, 1)); /* grouped */
    assert_false(tune_applies(&m3, SCHED_ALLREDUCE, ALGO_PAIR, MiB, 0));
    assert_false(tune_applies(&m22, SCHED_ALLREDUCE, ALGO_PAIR, MiB, 0)); /* 2 nodes */
    assert_false(tune_applies(&m2off, SCHED_ALLREDUCE, ALGO_PAIR, 64 * MiB, 0));
    for (int c = 0; c < SCHED_NUM_COLLS; c++)
        if (c != SCHED_ALLREDUCE)
            assert_false(tune_applies(&m2, (sched_coll_t)c, ALGO_PAIR, 64 * MiB, 0));

    assert_int_equal(pick(&m2, SCHED_ALLREDUCE, 512 * KiB), ALGO_DIRECT);
    for (size_t size = MiB; size <= 1024 * MiB; size *= 4)
        assert_int_equal(pick(&m2, SCHED_ALLREDUCE, size), ALGO_PAIR);
    /* Grouped, or after both ranks declined (coll_run.c picks as a group). */
    assert_int_equal(tune_pick(&m2, SCHED_ALLREDUCE, 8 * MiB, 1, TUNE_ALL, NULL, NULL), ALGO_DIRECT);
    assert_int_equal(tune_pick(&m2, SCHED_ALLREDUCE, 64 * MiB, 1, TUNE_ALL, NULL, NULL), ALGO_RING);
    assert_int_equal(pick(&m2off, SCHED_ALLREDUCE, 64 * MiB), ALGO_RING);
    /* CCL_ALGO can take it away, or ask for it. */
    assert_int_equal(tune_pick(&m2, SCHED_ALLREDUCE, 64 * MiB, 0, TUNE_ALL & ~TUNE_BIT(ALGO_PAIR), NULL, NULL),
                     ALGO_RING);
    unsigned al[SCHED_NUM_COLLS];
    char bad[64];
    assert_int_equal(tune_parse_algo("allreduce:^pair", al, bad, sizeof bad), 0);
    assert_false(al[SCHED_ALLREDUCE] & TUNE_BIT(ALGO_PAIR));
    assert_int_equal(tune_parse_algo("pair", al, bad, sizeof bad), 0);
    assert_int_equal(tune_pick(&m2, SCHED_ALLREDUCE, 4 * MiB, 0, al[SCHED_ALLREDUCE], NULL, NULL), ALGO_PAIR);
}

static void test_multi_node_picks(void **state)
{
    (void)state;
    tune_model_t m;
    /* 8 nodes, one rank each, small allreduce: log-depth algorithms. */
    model(&m, 8, 8, 1.25, 20);
    algo_t a = pick(&m, SCHED_ALLREDUCE, 8);
    assert_true(a == ALGO_RD || a == ALGO_TREE);
    assert_true(tune_cost(&m, SCHED_ALLREDUCE, a, 8, 0) * 3 < tune_cost(&m, SCHED_ALLREDUCE, ALGO_RING, 8, 0));
    /* ... and the ring for large ones (one rank per node: hier is a ring). */
    a = pick(&m, SCHED_ALLREDUCE, 256 * MiB);
    assert_true(a == ALGO_RING || a == ALGO_HIER);

    /* 2 nodes x 2 ranks, 64 MiB over 2 Gbit/s links: hierarchical, which
     * puts 1 buffer through each NIC against the ring's 1.5. */
    model(&m, 4, 2, 0.25, 20);
    assert_int_equal(pick(&m, SCHED_ALLREDUCE, 64 * MiB), ALGO_HIER);
    double hier = tune_cost(&m, SCHED_ALLREDUCE, ALGO_HIER, 64 * MiB, 0);
    double ring = tune_cost(&m, SCHED_ALLREDUCE, ALGO_RING, 64 * MiB, 0);
    assert_true(ring >= 1.4 * hier);
    assert_true(hier >= 64.0 * MiB / 0.25e3); /* at least the buffer through one NIC */

    /* 4 nodes x 2: recursive doubling small, a bandwidth algorithm large. */
    model(&m, 8, 4, 0.25, 50);
    assert_int_equal(pick(&m, SCHED_ALLREDUCE, 8), ALGO_RD);
    a = pick(&m, SCHED_ALLREDUCE, 64 * MiB);
    assert_true(a == ALGO_HIER || a == ALGO_RING);
    /* No one-shot between nodes, even tiny. */
    assert_int_not_equal(pick(&m, SCHED_BROADCAST, 8), ALGO_ONESHOT);
}

/* 4 fake nodes x 2 ranks on the 2-core VM, as comm init sees them: half a
 * core per node, shm hops 10 us, net hops 150 us, 10 Gbit/s, 1 MiB slots. */
static void model_shared(tune_model_t *m, double cores)
{
    sched_layout_t lay;
    tune_links_t l = {.shm_bw = 5, .shm_lat = 10, .net_bw = 1.125, .net_lat = 150, .cores = cores,
                      .slot_bytes = MiB, .board_bytes = 0};
    assert_int_equal(tune_layout_blocked(8, 4, &lay), CCL_SUCCESS);
    assert_int_equal(tune_model_init(m, &l, 8, &lay), CCL_SUCCESS);
    tune_layout_free(&lay);
}

static void test_shared_cores_picks(void **state)
{
    (void)state;
    tune_model_t m;
    model_shared(&m, 0.5);
    /* perf/RESULTS.md, "The tuner": the fastest forced algorithm at each
     * size of the sweep (hier and ring within a few % at 8-64 B). */
    static const struct { size_t size; algo_t algo; } want[] = {
        {8, ALGO_HIER},          {64, ALGO_HIER},       {512, ALGO_RD},       {4 * KiB, ALGO_RD},
        {32 * KiB, ALGO_RD},     {256 * KiB, ALGO_RD},  {2 * MiB, ALGO_HIER}, {16 * MiB, ALGO_HIER},
        {64 * MiB, ALGO_HIER},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        algo_t a = pick(&m, SCHED_ALLREDUCE, want[i].size);
        if (a != want[i].algo) {
            printf("%zu B: picked %s, measured best %s\n", want[i].size, tune_algo_name(a),
                   tune_algo_name(want[i].algo));
            fail();
        }
    }
    /* 8 bytes: one slice goes round the ring (7 network hops, one after
     * another), while recursive doubling has all 8 ranks send across
     * nodes at once; on shared cores the ring is the cheaper. */
    double ring = tune_cost(&m, SCHED_ALLREDUCE, ALGO_RING, 8, 0);
    double rd = tune_cost(&m, SCHED_ALLREDUCE, ALGO_RD, 8, 0);
    assert_true(ring < rd);
    /* ... but with all 8 parts full (512 B) the ring has 14 slices per
     * node where rd has 2 exchanges: rd by far. */
    assert_true(tune_cost(&m, SCHED_ALLREDUCE, ALGO_RD, 512, 0) * 2 <
                tune_cost(&m, SCHED_ALLREDUCE, ALGO_RING, 512, 0));
    /* With a core per thread the network's CPU cost does not count: the
     * hops' latency sets the order again, and rd, with two of them, wins. */
    model_shared(&m, 0);
    assert_int_equal(pick(&m, SCHED_ALLREDUCE, 8), ALGO_RD);
    assert_true(tune_cost(&m, SCHED_ALLREDUCE, ALGO_RD, 8, 0) < 400);
}

/* Broadcast as a star (pairwise) only by single copy, on one node, where
 * ranks outnumber cores: 4 ranks on the 2-core VM (perf/RESULTS.md). */
static void test_star_broadcast_picks(void **state)
{
    (void)state;
    tune_model_t m;
    model(&m, 4, 1, 1, 20);
    m.link.single_copy_bytes = MiB;
    m.link.cores = 2;
    assert_int_equal(pick(&m, SCHED_BROADCAST, MiB), ALGO_PAIRWISE);
    assert_int_equal(pick(&m, SCHED_BROADCAST, 64 * MiB), ALGO_PAIRWISE);
    assert_int_not_equal(pick(&m, SCHED_BROADCAST, MiB - 4), ALGO_PAIRWISE);
    /* In a group nothing is lent whole: the root would feed n-1 FIFOs. */
    assert_int_not_equal(tune_pick(&m, SCHED_BROADCAST, 64 * MiB, 1, TUNE_ALL, NULL, NULL), ALGO_PAIRWISE);
    m.link.cores = 4; /* a core per rank: the chain */
    assert_int_equal(pick(&m, SCHED_BROADCAST, 64 * MiB), ALGO_CHAIN);
    m.link.cores = 2;
    m.link.single_copy_bytes = 0; /* no single copy: the root would write n-1 FIFOs */
    assert_int_equal(pick(&m, SCHED_BROADCAST, 64 * MiB), ALGO_CHAIN);
    model(&m, 2, 1, 1, 20); /* 2 ranks: star and chain are the same schedule */
    m.link.single_copy_bytes = MiB;
    m.link.cores = 1;
    assert_int_equal(pick(&m, SCHED_BROADCAST, 64 * MiB), ALGO_CHAIN);
    model(&m, 8, 2, 1, 20); /* across nodes: hier or chain */
    m.link.single_copy_bytes = MiB;
    m.link.cores = 1;
    assert_int_not_equal(pick(&m, SCHED_BROADCAST, 64 * MiB), ALGO_PAIRWISE);
}

/* A one-host alltoall waits for every peer either way: one-shot's single
 * synchronisation beats pairwise's n-1 steps where the board holds it
 * (4 ranks on the 2-core VM: 0.78-0.98x the time at 16 B-32 KiB). */
static void test_alltoall_oneshot_picks(void **state)
{
    (void)state;
    tune_model_t m;
    model(&m, 4, 1, 1, 20);
    m.link.cores = 2;
    assert_int_equal(pick(&m, SCHED_ALLTOALL, 16), ALGO_ONESHOT);
    assert_int_equal(pick(&m, SCHED_ALLTOALL, 16 * KiB), ALGO_ONESHOT);
    assert_int_equal(pick(&m, SCHED_ALLTOALL, MiB), ALGO_PAIRWISE);
    /* Across nodes: no board. */
    model(&m, 8, 2, 1, 20);
    assert_int_equal(pick(&m, SCHED_ALLTOALL, 16), ALGO_PAIRWISE);
}

static void test_costs_sane(void **state)
{
    (void)state;
    static const int layouts[][2] = {{2, 1}, {3, 1}, {8, 1}, {4, 2}, {8, 4}, {7, 3}, {16, 16}, {64, 8}};
    /* Cores 0: one per rank; 0.5: shared, the network's CPU cost counts. */
    for (size_t l = 0; l < 2 * sizeof layouts / sizeof layouts[0]; l++) {
        tune_model_t m;
        model(&m, layouts[l / 2][0], layouts[l / 2][1], 1, 20);
        m.link.cores = l % 2 ? 0.5 : 0;
        for (int c = 0; c < SCHED_NUM_COLLS; c++)
            for (int a = 0; a < ALGO_COUNT; a++) {
                double prev = 0;
                for (size_t size = 8; size <= (size_t)1 << 30; size *= 4) {
                    if (!tune_applies(&m, (sched_coll_t)c, (algo_t)a, size, 0))
                        continue;
                    if ((a == ALGO_HIER && c != SCHED_ALLREDUCE) ||
                        (a == ALGO_PAIRWISE && (c == SCHED_ALLGATHER || c == SCHED_BROADCAST)))
                        continue; /* runs only when forced: not modelled (no single copy here) */
                    double t = tune_cost(&m, (sched_coll_t)c, (algo_t)a, size, 0);
                    if (!isfinite(t) || t <= 0 || t < prev * 0.999) {
                        printf("%d ranks %d nodes %g cores %s %s %zu B: cost %g after %g\n",
                               layouts[l / 2][0], layouts[l / 2][1], m.link.cores,
                               sched_coll_name((sched_coll_t)c), tune_algo_name((algo_t)a), size, t, prev);
                        fail();
                    }
                    prev = t;
                }
            }
    }
}

static void test_parse_algo(void **state)
{
    (void)state;
    unsigned al[SCHED_NUM_COLLS];
    char bad[128];
    assert_int_equal(tune_parse_algo("", al, bad, sizeof bad), 0);
    for (int c = 0; c < SCHED_NUM_COLLS; c++)
        assert_int_equal(al[c], TUNE_ALL);

    assert_int_equal(tune_parse_algo("ring", al, bad, sizeof bad), 0);
    for (int c = 0; c < SCHED_NUM_COLLS; c++)
        assert_int_equal(al[c], TUNE_BIT(ALGO_RING));

    assert_int_equal(tune_parse_algo("Tree, rd", al, bad, sizeof bad), 0);
    assert_int_equal(al[SCHED_ALLREDUCE], TUNE_BIT(ALGO_TREE) | TUNE_BIT(ALGO_RD));

    assert_int_equal(tune_parse_algo("^oneshot,direct", al, bad, sizeof bad), 0);
    assert_int_equal(al[SCHED_BROADCAST], TUNE_ALL & ~(TUNE_BIT(ALGO_ONESHOT) | TUNE_BIT(ALGO_DIRECT)));

    assert_int_equal(tune_parse_algo("allreduce:tree,rd;broadcast:chain", al, bad, sizeof bad), 0);
    assert_int_equal(al[SCHED_ALLREDUCE], TUNE_BIT(ALGO_TREE) | TUNE_BIT(ALGO_RD));
    assert_int_equal(al[SCHED_BROADCAST], TUNE_BIT(ALGO_CHAIN));
    assert_int_equal(al[SCHED_ALLGATHER], TUNE_ALL);

    /* A list for all first, then per collective (NCCL's example shape). */
    assert_int_equal(tune_parse_algo("ring,oneshot;allreduce:^ring;reducescatter:oneshot", al, bad, sizeof bad),
                     0);
    assert_int_equal(al[SCHED_ALLGATHER], TUNE_BIT(ALGO_RING) | TUNE_BIT(ALGO_ONESHOT));
    assert_int_equal(al[SCHED_ALLREDUCE], TUNE_ALL & ~TUNE_BIT(ALGO_RING));
    assert_int_equal(al[SCHED_REDUCE_SCATTER], TUNE_BIT(ALGO_ONESHOT));
    assert_int_equal(tune_parse_algo("sendrecv:pairwise;bcast:hier", al, bad, sizeof bad), 0);
    assert_int_equal(al[SCHED_P2P_SEND], TUNE_BIT(ALGO_PAIRWISE));
    assert_int_equal(al[SCHED_P2P_RECV], TUNE_BIT(ALGO_PAIRWISE));
    assert_int_equal(al[SCHED_BROADCAST], TUNE_BIT(ALGO_HIER));

    /* Unknown names are skipped and counted; an entry left empty changes
     * nothing. */
    assert_int_equal(tune_parse_algo("foo", al, bad, sizeof bad), 1);
    assert_non_null(strstr(bad, "foo"));
    assert_int_equal(al[SCHED_ALLREDUCE], TUNE_ALL);
    assert_int_equal(tune_parse_algo("allreduce:foo,tree", al, bad, sizeof bad), 1);
    assert_int_equal(al[SCHED_ALLREDUCE], TUNE_BIT(ALGO_TREE));
    assert_int_equal(tune_parse_algo("allredux:tree;broadcast:chain", al, bad, sizeof bad), 1);
    assert_non_null(strstr(bad, "allredux"));
    assert_int_equal(al[SCHED_ALLREDUCE], TUNE_ALL);
    assert_int_equal(al[SCHED_BROADCAST], TUNE_BIT(ALGO_CHAIN));
    /* Only the first entry may lack a prefix. */
    assert_int_equal(tune_parse_algo("allreduce:tree;ring", al, bad, sizeof bad), 1);
    assert_int_equal(al[SCHED_ALLREDUCE], TUNE_BIT(ALGO_TREE));
    assert_int_equal(al[SCHED_ALLGATHER], TUNE_ALL);
    assert_int_equal(tune_parse_algo("ring;;", al, NULL, 0), 0);
    assert_int_equal(al[SCHED_ALLGATHER], TUNE_BIT(ALGO_RING));
    assert_int_equal(tune_parse_algo("one-shot,recursive_doubling,hierarchical", al, NULL, 0), 0);
    assert_int_equal(al[SCHED_ALLREDUCE], TUNE_BIT(ALGO_ONESHOT) | TUNE_BIT(ALGO_RD) | TUNE_BIT(ALGO_HIER));
}

/* What CCL_ALGO does to the pick. */
static void test_pick_allowed(void **state)
{
    (void)state;
    tune_model_t m3, m22;
    tune_why_t why;
    double cost;
    model(&m3, 3, 1, 1, 20);
    model(&m22, 4, 2, 1, 20);
    /* Forced where it applies: taken, whatever it costs. */
    assert_int_equal(tune_pick(&m3, SCHED_ALLREDUCE, 64 * MiB, 0, TUNE_BIT(ALGO_TREE), &cost, &why), ALGO_TREE);
    assert_int_equal(why, TUNE_PICK_MODEL);
    assert_true(cost == tune_cost(&m3, SCHED_ALLREDUCE, ALGO_TREE, 64 * MiB, 0));
    /* The cheapest of an allowed set. */
    unsigned tr = TUNE_BIT(ALGO_TREE) | TUNE_BIT(ALGO_RD);
    algo_t a = tune_pick(&m22, SCHED_ALLREDUCE, 8, 0, tr, NULL, NULL);
    assert_int_equal(a, ALGO_RD);
    /* ring where the collective's bandwidth algorithm is another one. */
    assert_int_equal(tune_pick(&m3, SCHED_BROADCAST, MiB, 0, TUNE_BIT(ALGO_RING), NULL, &why), ALGO_CHAIN);
    assert_int_equal(why, TUNE_PICK_BANDWIDTH);
    assert_int_equal(tune_pick(&m3, SCHED_ALLTOALL, MiB, 0, TUNE_BIT(ALGO_CHAIN), NULL, &why), ALGO_PAIRWISE);
    assert_int_equal(why, TUNE_PICK_BANDWIDTH);
    /* ring for a small single-host call: the ring, not the board. */
    assert_int_equal(tune_pick(&m3, SCHED_ALLREDUCE, 8, 0, TUNE_BIT(ALGO_RING), NULL, &why), ALGO_RING);
    /* Not applicable (direct on 3 ranks, hier on one node, one-shot too
     * big or grouped): the tuner's own choice, flagged. */
    assert_int_equal(tune_pick(&m3, SCHED_ALLREDUCE, 8, 0, TUNE_BIT(ALGO_DIRECT), NULL, &why),
                     pick(&m3, SCHED_ALLREDUCE, 8));
    assert_int_equal(why, TUNE_PICK_FALLBACK);
    assert_int_equal(tune_pick(&m3, SCHED_ALLREDUCE, 64 * MiB, 0, TUNE_BIT(ALGO_HIER), NULL, &why), ALGO_RING);
    assert_int_equal(why, TUNE_PICK_FALLBACK);
    assert_int_equal(tune_pick(&m3, SCHED_ALLREDUCE, 64 * MiB, 0, TUNE_BIT(ALGO_ONESHOT), NULL, &why), ALGO_RING);
    assert_int_equal(why, TUNE_PICK_FALLBACK);
    /* Excluding what applies leaves the rest. */
    assert_int_equal(tune_pick(&m3, SCHED_ALLREDUCE, 8, 0, TUNE_ALL & ~TUNE_BIT(ALGO_ONESHOT), NULL, &why),
                     tune_pick(&m3, SCHED_ALLREDUCE, 8, 1, TUNE_ALL, NULL, NULL));
    assert_int_equal(why, TUNE_PICK_MODEL);
    assert_int_equal(tune_pick(&m22, SCHED_ALLREDUCE, 64 * MiB, 0, TUNE_BIT(ALGO_HIER), NULL, &why), ALGO_HIER);
    assert_int_equal(why, TUNE_PICK_MODEL);
}

typedef struct {
    int lines;
    char last[512];
} lines_t;

static void count_line(void *arg, const char *text)
{
    lines_t *l = arg;
    l->lines++;
    snprintf(l->last, sizeof l->last, "%s", text);
}

static void test_text(void **state)
{
    (void)state;
    tune_model_t m;
    model(&m, 4, 2, 0.25, 20);
    lines_t l = {0};
    tune_describe(&m, count_line, &l);
    assert_int_equal(l.lines, 2);
    l.lines = 0;
    /* 8 B, 64 B, ..., 1 GiB: 10 rows and a header. */
    tune_table(&m, SCHED_ALLREDUCE, 8, (size_t)1 << 30, 8, TUNE_ALL, count_line, &l);
    assert_int_equal(l.lines, 11);
    assert_non_null(strstr(l.last, "1G"));
    assert_non_null(strstr(l.last, "hier"));
    assert_string_equal(tune_algo_name(ALGO_RD), "rd");
    assert_string_equal(tune_algo_name((algo_t)99), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_shape),      cmocka_unit_test(test_applies),
        cmocka_unit_test(test_single_host_picks),
        cmocka_unit_test(test_pair_picks), cmocka_unit_test(test_multi_node_picks),
        cmocka_unit_test(test_shared_cores_picks),
        cmocka_unit_test(test_star_broadcast_picks),
        cmocka_unit_test(test_alltoall_oneshot_picks),
        cmocka_unit_test(test_costs_sane),        cmocka_unit_test(test_parse_algo),
        cmocka_unit_test(test_pick_allowed),      cmocka_unit_test(test_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
