/*
 * test_sim_tune.c - checks the tuner's closed-form costs (src/topo/tune.c)
 * against a timed simulation of the real schedules.
 *
 * The simulation runs every rank's schedule (src/algos) in the executor's
 * order (round k: slice k of every step, in step order; any ready step of
 * the round when the schedule's steps are independent), each slice
 * costing the same as in the model: the executor's per-slice overhead plus
 * tune_action_passes() passes of the slice at shm_bw; a slice sent to a
 * rank of the same node arrives shm_lat later; one sent to another node
 * waits for its node's NIC, holds it for its bytes at net_bw and arrives
 * net_lat after that. (Only the sending side is a resource: reserving both
 * ends greedily, in event order, left NICs idle that TCP would share, and
 * made alltoall three times slower than the links allow.) FIFOs have
 * nslots slots: a sender waits until the receiver has consumed the slice
 * nslots back. Events run in order of their start times.
 *
 * For every case (layouts of 2 to 16 ranks on 1 to 8 nodes, fast and
 * throttled networks, sizes 8 B to 64 MiB) it checks that
 *   - the model's time is within a factor of the simulated one, and
 *   - the model's pick, timed by the simulation, is within 10% (plus
 *     half a hop) of the fastest algorithm the simulation finds,
 * which is the tuner's target on real runs, here on the model's own terms.
 * Run with -v for the table.
 */
#include "algos/schedule.h"
#include "algos/chain.h"
#include "algos/direct.h"
#include "algos/hier.h"
#include "algos/pairwise.h"
#include "algos/rd.h"
#include "algos/ring.h"
#include "algos/tree.h"
#include "topo/tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_CALL_US 0.10 /* tune.c's TUNE_CALL_US */
#define SIM_STEP_US 0.03 /* tune.c's TUNE_STEP_US */

static int verbose;

typedef struct {
    double *arrive;   /* per message: when it is in the receiver's slot */
    double *consumed; /* per message: when the receiver released the slot */
    size_t nsent, nconsumed, cap;
} sim_conn_t;

typedef struct {
    int n, nslots;
    size_t slot;
    const sched_layout_t *lay; /* NULL: one node */
    double ai, an, bi, bn;
    sched_t *scheds;      /* per rank */
    size_t *round;        /* per rank: current round */
    int *step;            /* per rank: next step in the round */
    unsigned char **ran;  /* per rank, independent schedules: steps run this round */
    size_t *rounds;       /* per rank */
    double *clock;        /* per rank */
    sim_conn_t *conns;    /* n * n */
    double *nic_out; /* per node: when its NIC is free */
} sim_t;

static int sim_node(const sim_t *s, int r) { return s->lay ? s->lay->node_of[r] : 0; }

static sim_conn_t *sim_conn(sim_t *s, int from, int to) { return &s->conns[(size_t)from * s->n + to]; }

static void sim_push(sim_conn_t *c, double arrive)
{
    if (c->nsent == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->arrive = realloc(c->arrive, c->cap * sizeof *c->arrive);
        c->consumed = realloc(c->consumed, c->cap * sizeof *c->consumed);
        if (!c->arrive || !c->consumed) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    c->arrive[c->nsent++] = arrive;
}

/* Skips steps with fewer slices than the current round (and, in an
 * independent schedule, those already run); 0 when the rank is done. */
static int sim_next(sim_t *s, int r, const sched_step_t **st, size_t *k)
{
    const sched_t *sc = &s->scheds[r];
    while (s->round[r] < s->rounds[r]) {
        while (s->step[r] < sc->nsteps) {
            const sched_step_t *t = &sc->steps[s->step[r]];
            if (s->round[r] < sched_step_slices(t, 1, s->slot) && !(s->ran[r] && s->ran[r][s->step[r]])) {
                *st = t;
                *k = s->round[r];
                return 1;
            }
            s->step[r]++;
        }
        s->step[r] = 0;
        s->round[r]++;
        if (s->ran[r])
            memset(s->ran[r], 0, (size_t)sc->nsteps);
    }
    return 0;
}

/* When rank r's next slice can start, or -1 if it waits on something not
 * yet simulated. */
static double sim_ready(sim_t *s, int r, const sched_step_t *st)
{
    double t = s->clock[r];
    if (st->recv_peer >= 0) {
        sim_conn_t *c = sim_conn(s, st->recv_peer, r);
        if (c->nconsumed >= c->nsent)
            return -1;
        if (c->arrive[c->nconsumed] > t)
            t = c->arrive[c->nconsumed];
    }
    if (st->send_peer >= 0) {
        sim_conn_t *c = sim_conn(s, r, st->send_peer);
        if (c->nsent >= (size_t)s->nslots) {
            size_t back = c->nsent - (size_t)s->nslots;
            if (c->nconsumed <= back)
                return -1;
            if (c->consumed[back] > t)
                t = c->consumed[back];
        }
    }
    return t;
}

static double sim_run(sim_t *s)
{
    for (;;) {
        int best = -1;
        double best_t = 0;
        const sched_step_t *best_st = NULL;
        size_t best_k = 0;
        int left = 0;
        for (int r = 0; r < s->n; r++) {
            const sched_step_t *st;
            size_t k;
            if (!sim_next(s, r, &st, &k))
                continue;
            left++;
            double t = sim_ready(s, r, st);
            if (s->ran[r]) { /* independent: the earliest ready step of the round */
                const sched_t *sc = &s->scheds[r];
                for (int i = s->step[r] + 1; i < sc->nsteps; i++) {
                    const sched_step_t *o = &sc->steps[i];
                    if (s->ran[r][i] || k >= sched_step_slices(o, 1, s->slot))
                        continue;
                    double to = sim_ready(s, r, o);
                    if (to >= 0 && (t < 0 || to < t)) {
                        t = to;
                        st = o;
                    }
                }
            }
            if (t >= 0 && (best < 0 || t < best_t)) {
                best = r;
                best_t = t;
                best_st = st;
                best_k = k;
            }
        }
        if (!left)
            break;
        if (best < 0) {
            fprintf(stderr, "simulation deadlocked\n");
            exit(2);
        }
        const sched_step_t *st = best_st;
        size_t total = st->count, off = best_k * s->slot;
        double x = (double)(total - off < s->slot ? total - off : s->slot);
        double finish = best_t + SIM_STEP_US + tune_action_passes(st->action) * x * s->bi;
        if (st->recv_peer >= 0) {
            sim_conn_t *c = sim_conn(s, st->recv_peer, best);
            c->consumed[c->nconsumed++] = finish;
        }
        if (st->send_peer >= 0) {
            int q = st->send_peer, a = sim_node(s, best), b = sim_node(s, q);
            double arrive;
            if (a == b) {
                arrive = finish + s->ai;
            } else {
                double start = finish;
                if (s->nic_out[a] > start)
                    start = s->nic_out[a];
                double end = start + x * s->bn;
                s->nic_out[a] = end;
                arrive = end + s->an;
            }
            sim_push(sim_conn(s, best, q), arrive);
        }
        s->clock[best] = finish;
        if (s->ran[best])
            s->ran[best][best_st - s->scheds[best].steps] = 1;
        else
            s->step[best]++;
    }
    double t = 0;
    for (int r = 0; r < s->n; r++)
        if (s->clock[r] > t)
            t = s->clock[r];
    return SIM_CALL_US + t;
}

/* Simulated time of one collective with one algorithm; size in nccl-tests
 * terms, elements of one byte. */
static double sim_time(const tune_model_t *m, const sched_layout_t *lay, sched_coll_t coll, algo_t algo, size_t size)
{
    int n = m->nranks;
    sim_t s = {.n = n, .nslots = 8, .slot = m->link.slot_bytes, .lay = lay && lay->nnodes > 1 ? lay : NULL,
               .ai = m->link.shm_lat, .an = m->link.net_lat, .bi = 1e-3 / m->link.shm_bw,
               .bn = 1e-3 / m->link.net_bw};
    s.scheds = calloc((size_t)n, sizeof *s.scheds);
    s.round = calloc((size_t)n, sizeof *s.round);
    s.step = calloc((size_t)n, sizeof *s.step);
    s.rounds = calloc((size_t)n, sizeof *s.rounds);
    s.clock = calloc((size_t)n, sizeof *s.clock);
    s.conns = calloc((size_t)n * n, sizeof *s.conns);
    s.nic_out = calloc((size_t)n, sizeof *s.nic_out);
    if (!s.scheds || !s.round || !s.step || !s.rounds || !s.clock || !s.conns || !s.nic_out) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    size_t count = coll == SCHED_ALLREDUCE || coll == SCHED_BROADCAST || coll == SCHED_REDUCE ? size : size / n;
    for (int r = 0; r < n; r++) {
        sched_op_t op = {coll, count, 1, n, r, 0, s.lay};
        ccl_result_t res;
        switch (algo) {
        case ALGO_DIRECT: res = direct_schedule(&op, &s.scheds[r]); break;
        case ALGO_CHAIN: res = chain_schedule(&op, &s.scheds[r]); break;
        case ALGO_PAIRWISE: res = pairwise_schedule(&op, &s.scheds[r]); break;
        case ALGO_TREE: res = tree_schedule(&op, &s.scheds[r]); break;
        case ALGO_RD: res = rd_schedule(&op, &s.scheds[r]); break;
        case ALGO_HIER: res = hier_schedule(&op, &s.scheds[r]); break;
        default: res = ring_schedule(&op, &s.scheds[r]); break;
        }
        if (res != CCL_SUCCESS) {
            fprintf(stderr, "no %s schedule for %s\n", tune_algo_name(algo), sched_coll_name(coll));
            exit(2);
        }
        s.rounds[r] = sched_rounds(&s.scheds[r], 1, s.slot);
    }
    s.ran = calloc((size_t)n, sizeof *s.ran);
    for (int r = 0; s.ran && r < n; r++)
        if (s.scheds[r].steps_independent && !(s.ran[r] = calloc((size_t)s.scheds[r].nsteps + 1, 1)))
            s.ran = NULL;
    if (!s.ran) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    double t = sim_run(&s);
    for (int r = 0; r < n; r++) {
        sched_free(&s.scheds[r]);
        free(s.ran[r]);
    }
    free(s.ran);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        free(s.conns[i].arrive);
        free(s.conns[i].consumed);
    }
    free(s.scheds);
    free(s.round);
    free(s.step);
    free(s.rounds);
    free(s.clock);
    free(s.conns);
    free(s.nic_out);
    return t;
}

typedef struct {
    int nranks, nnodes;
    double net_bw, net_lat;
} sim_case_t;

static int failures;

/* Model against simulation for every algorithm and size of one layout. */
static void sim_case(const sim_case_t *c, sched_coll_t coll, double lo, double hi)
{
    sched_layout_t lay;
    if (tune_layout_blocked(c->nranks, c->nnodes, &lay) != CCL_SUCCESS) {
        fprintf(stderr, "layout failed\n");
        exit(2);
    }
    /* Slots as comm init cuts them: CCL_BUFFSIZE on one node, CCL_NET_BUFFSIZE across. */
    tune_links_t links = {.shm_bw = 5, .shm_lat = 0.3, .net_bw = c->net_bw, .net_lat = c->net_lat,
                          .slot_bytes = c->nnodes > 1 ? 256 << 10 : 128 << 10};
    tune_model_t m;
    if (tune_model_init(&m, &links, c->nranks, &lay) != CCL_SUCCESS) {
        fprintf(stderr, "model failed\n");
        exit(2);
    }
    if (verbose)
        printf("\n%s, %d ranks on %d nodes, net %.3g GB/s %.3g us (model/sim, us)\n", sched_coll_name(coll),
               c->nranks, c->nnodes, c->net_bw, c->net_lat);
    for (size_t size = 16; size <= (64u << 20); size *= 4) {
        double sim[ALGO_COUNT], best_sim = INFINITY;
        if (verbose)
            printf("%9zu", size);
        for (int a = 0; a < ALGO_COUNT; a++) {
            sim[a] = INFINITY;
            /* The board and direct's measured factor are outside the schedules. */
            if (a == ALGO_ONESHOT || a == ALGO_DIRECT || !tune_applies(&m, coll, (algo_t)a, size, 1))
                continue;
            double model = tune_cost(&m, coll, (algo_t)a, size, 1);
            if (!isfinite(model))
                continue; /* no cost model (hier but for allreduce): runs only when forced */
            sim[a] = sim_time(&m, &lay, coll, (algo_t)a, size);
            if (sim[a] < best_sim)
                best_sim = sim[a];
            double ratio = model / sim[a];
            if (verbose)
                printf("  %s %.4g/%.4g", tune_algo_name((algo_t)a), model, sim[a]);
            if (ratio < lo || ratio > hi) {
                printf("FAIL %s %s %d ranks %d nodes %zu B: model %.4g us, simulated %.4g us (ratio %.2f)\n",
                       sched_coll_name(coll), tune_algo_name((algo_t)a), c->nranks, c->nnodes, size, model, sim[a],
                       ratio);
                failures++;
            }
        }
        unsigned allowed = TUNE_ALL & ~(TUNE_BIT(ALGO_ONESHOT) | TUNE_BIT(ALGO_DIRECT));
        algo_t pick = tune_pick(&m, coll, size, 1, allowed, NULL, NULL);
        if (verbose)
            printf("  -> %s\n", tune_algo_name(pick));
        if (sim[pick] > best_sim * 1.1 + links.shm_lat) {
            printf("FAIL %s %d ranks %d nodes net %.3g GB/s %zu B: the model picks %s (simulated %.4g us), "
                   "the simulation's best is %.4g us\n",
                   sched_coll_name(coll), c->nranks, c->nnodes, c->net_bw, size, tune_algo_name(pick), sim[pick],
                   best_sim);
            failures++;
        }
    }
    tune_layout_free(&lay);
}

int main(int argc, char **argv)
{
    verbose = argc > 1 && !strcmp(argv[1], "-v");
    /* Not 2 ranks on one node: there the model follows a measurement
     * instead of its own formulas (TUNE_RING2_SHM_FACTOR in tune.c). */
    static const sim_case_t cases[] = {
        {3, 1, 1, 20},    {4, 1, 1, 20},     {8, 1, 1, 20},     {5, 1, 1, 20},
        {4, 2, 0.25, 20}, {4, 2, 2, 20},     {8, 4, 0.25, 50},  {8, 4, 2, 20},
        {8, 2, 1, 20},    {16, 8, 0.25, 20}, {6, 3, 1, 20},     {7, 3, 1, 20},
        {16, 4, 1, 20},   {8, 8, 1, 20},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        sim_case(&cases[i], SCHED_ALLREDUCE, 0.5, 2.0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i += 3) {
        sim_case(&cases[i], SCHED_ALLGATHER, 0.5, 2.0);
        sim_case(&cases[i], SCHED_REDUCE_SCATTER, 0.5, 2.0);
        sim_case(&cases[i], SCHED_BROADCAST, 0.5, 2.0);
        sim_case(&cases[i], SCHED_REDUCE, 0.5, 2.0);
        sim_case(&cases[i], SCHED_ALLTOALL, 0.5, 2.0);
    }
    printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
