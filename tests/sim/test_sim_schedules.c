/*
 * test_sim_schedules.c - the schedule simulator.
 *
 * Runs the schedules of every rank of a communicator in one process, driven
 * by the same engine as the host executor (algos/engine.c: rounds of
 * slices, per-operation and per-connection order, skip what is not ready),
 * over simulated FIFOs with a bounded number of slots. It checks that
 *   - every result equals a serial reference (int64 data, so exact),
 *   - every receive matches a send of the same size from the named peer,
 *   - no configuration deadlocks with bounded FIFOs (a full pass over all
 *     ranks without progress is reported as a deadlock),
 *   - every rank finishes with its FIFOs drained,
 * for every collective and algorithm, 1..1024 ranks, every root kind, in
 * place and out of place, with tiny slots so that pipelining and uneven last
 * parts are exercised; and groups: several collectives fused on one comm,
 * send/recv ring exchanges and random all-to-all-v patterns; and the
 * hierarchical schedules over many node layouts (sim_hier_cases).
 *
 * Usage: test_sim_schedules [--hier] [--max-ranks=N] [--window=N] (see main;
 * --window: rounds the engine may run at once, as CCL_ENGINE_WINDOW).
 */
#include "algos/engine.h"
#include "algos/schedule.h"
#include "algos/chain.h"
#include "algos/direct.h"
#include "algos/hier.h"
#include "algos/pairwise.h"
#include "algos/rd.h"
#include "algos/ring.h"
#include "algos/tree.h"
#include "device/reduce.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Self-test hooks: corrupt rank 0's schedule to prove the checks can fail. */
enum { MUTATE_NONE, MUTATE_DROP_LAST_STEP, MUTATE_RECV_FIRST, MUTATE_WRONG_PEER };
static int sim_mutation = MUTATE_NONE;

/* Rounds the engine may run at once (eng_job_t.window); --window=N. */
static size_t sim_window = 1;

typedef enum { ALG_RING, ALG_DIRECT, ALG_CHAIN, ALG_PAIRWISE, ALG_TREE, ALG_RD, ALG_HIER } sim_alg_t;

/* The node layout hierarchical schedules see (NULL: one node). */
static const sched_layout_t *sim_layout;

typedef struct {
    int nslots;
    size_t slot_bytes;
    int64_t *data; /* nslots * slot_bytes/8 ring buffer */
    size_t *len;   /* bytes in each slot */
    uint64_t head, tail;
} sim_fifo_t;

/* One call as every rank makes it (p2p: each rank's own list). */
typedef struct {
    sched_coll_t coll;
    size_t count;
    int root;     /* root, or peer for p2p */
    ccl_redop_t op;
    int in_place;
    sim_alg_t alg;
    int seed;     /* input stream */
} sim_call_t;

typedef struct {
    sim_call_t call;
    sched_t sched;
    int64_t *send, *recv;     /* send may point into recv (in place) */
    int64_t *send_mem, *recv_mem;
    size_t send_elems, recv_elems;
} sim_op_t;

typedef struct {
    sim_op_t *ops;
    int nops;
    eng_op_t *eops;
    eng_job_t job;
    void *arena;
    size_t arena_cap;
} sim_rank_t;

typedef struct {
    int n;
    size_t slot_bytes;
    int nslots;
    sim_rank_t *ranks;
    sim_fifo_t *fifos; /* n*n: [from*n + to], allocated lazily */
    size_t *used;      /* indices of the FIFOs allocated so far */
    size_t nused;
    char err[256];
} sim_t;

static sim_fifo_t *sim_fifo(sim_t *s, int from, int to)
{
    sim_fifo_t *f = &s->fifos[(size_t)from * (size_t)s->n + (size_t)to];
    if (!f->data) {
        s->used[s->nused++] = (size_t)from * (size_t)s->n + (size_t)to;
        f->nslots = s->nslots;
        f->slot_bytes = s->slot_bytes;
        f->data = calloc((size_t)s->nslots, s->slot_bytes);
        f->len = calloc((size_t)s->nslots, sizeof *f->len);
        if (!f->data || !f->len) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    return f;
}

static int64_t sim_input(int seed, int rank, size_t i)
{
    /* Small values keep prod from overflowing for few ranks and make min/max
     * interesting; the value mix differs per rank, index and call. */
    uint64_t h = (uint64_t)rank * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + (uint64_t)seed * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (int64_t)(h % 7) - 3;
}

static int64_t *sim_buf_ptr(sim_op_t *o, int which, size_t off)
{
    return which == SCHED_BUF_SEND ? o->send + off : which == SCHED_BUF_RECV ? o->recv + off : NULL;
}

typedef struct {
    sim_t *s;
    int me;
} sim_try_ctx_t;

/* Runs slice `k` of `st` for rank `me`: 1 if it ran, 0 if it must wait,
 * -1 on a protocol error (the engine's try function). */
static int sim_try_slice(void *p, int opi, const sched_step_t *st, size_t k)
{
    sim_try_ctx_t *c = p;
    sim_t *s = c->s;
    int me = c->me;
    sim_op_t *o = &s->ranks[me].ops[opi];
    ccl_redop_t op = o->call.op;
    size_t esz = 8;
    size_t total = st->count * esz, off = k * s->slot_bytes;
    size_t nbytes = total - off < s->slot_bytes ? total - off : s->slot_bytes;
    size_t n = nbytes / esz, eoff = off / esz;
    int64_t *src = sim_buf_ptr(o, st->src_buf, st->src_off);
    int64_t *dst = sim_buf_ptr(o, st->dst_buf, st->dst_off);
    if (src) src += eoff;
    if (dst) dst += eoff;
    if ((st->recv_peer >= s->n) || (st->send_peer >= s->n)) {
        snprintf(s->err, sizeof s->err, "rank %d: peer out of range", me);
        return -1;
    }
    sim_fifo_t *in = st->recv_peer >= 0 ? sim_fifo(s, st->recv_peer, me) : NULL;
    sim_fifo_t *out = st->send_peer >= 0 ? sim_fifo(s, me, st->send_peer) : NULL;
    if (in && in->tail == in->head)
        return 0;
    if (out && out->tail - out->head >= (uint64_t)out->nslots)
        return 0;
    int64_t *islot = in ? in->data + (in->head % (uint64_t)in->nslots) * (s->slot_bytes / 8) : NULL;
    int64_t *oslot = out ? out->data + (out->tail % (uint64_t)out->nslots) * (s->slot_bytes / 8) : NULL;
    if (in && in->len[in->head % (uint64_t)in->nslots] != nbytes) {
        snprintf(s->err, sizeof s->err, "rank %d %s step %s slice %zu: expected %zu bytes from rank %d, got %zu",
                 me, sched_coll_name(o->call.coll), sched_action_name(st->action), k, nbytes, st->recv_peer,
                 in->len[in->head % (uint64_t)in->nslots]);
        return -1;
    }
    int post = (st->flags & SCHED_POSTOP) != 0;
    int64_t tmp[4096];
    if (n > sizeof tmp / sizeof tmp[0])
        return -1;
    switch (st->action) {
    case SCHED_SEND: memcpy(oslot, src, nbytes); break;
    case SCHED_RECV: memcpy(dst, islot, nbytes); break;
    case SCHED_COPY:
        if (src != dst) memmove(dst, src, nbytes);
        if (post) dev_postop(CCL_INT64, op, dst, n, s->n);
        break;
    case SCHED_RECV_REDUCE_SEND: dev_reduce(CCL_INT64, op, oslot, NULL, islot, src, n); break;
    case SCHED_RECV_REDUCE_COPY:
        dev_reduce(CCL_INT64, op, tmp, NULL, islot, src, n);
        if (post) dev_postop(CCL_INT64, op, tmp, n, s->n);
        memcpy(dst, tmp, nbytes);
        break;
    case SCHED_RECV_COPY_SEND: memcpy(dst, islot, nbytes); memcpy(oslot, islot, nbytes); break;
    case SCHED_RECV_REDUCE_COPY_SEND:
        dev_reduce(CCL_INT64, op, tmp, NULL, islot, src, n);
        if (post) dev_postop(CCL_INT64, op, tmp, n, s->n);
        memcpy(dst, tmp, nbytes);
        memcpy(oslot, tmp, nbytes);
        break;
    case SCHED_LOCAL_REDUCE: dev_reduce(CCL_INT64, op, dst, NULL, src, dst, n); break;
    default:
        snprintf(s->err, sizeof s->err, "rank %d: unknown action %d", me, st->action);
        return -1;
    }
    if (in) in->head++;
    if (out) {
        out->len[out->tail % (uint64_t)out->nslots] = nbytes;
        out->tail++;
    }
    return 1;
}

static int64_t sim_ref_reduce(ccl_redop_t op, int64_t a, int64_t b)
{
    switch (op) {
    case CCL_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
    case CCL_MAX: return a > b ? a : b;
    case CCL_MIN: return a < b ? a : b;
    default: return (int64_t)((uint64_t)a + (uint64_t)b);
    }
}

/* Reduction over ranks of input element `i` of call `c`. */
static int64_t sim_ref_all(const sim_call_t *c, int n, size_t i)
{
    int64_t v = sim_input(c->seed, 0, i);
    for (int q = 1; q < n; q++)
        v = sim_ref_reduce(c->op, v, sim_input(c->seed, q, i));
    return c->op == CCL_AVG ? v / n : v;
}

/* The expected element `j` of rank r's receive buffer, or 0 when that
 * element is not written (left as the fill). p2p: see sim_check_p2p. */
static int64_t sim_expect(const sim_call_t *c, int n, int r, size_t j)
{
    size_t cnt = c->count;
    switch (c->coll) {
    case SCHED_ALLREDUCE: return sim_ref_all(c, n, j);
    case SCHED_ALLGATHER: return sim_input(c->seed, (int)(j / cnt), j % cnt);
    case SCHED_REDUCE_SCATTER: return sim_ref_all(c, n, (size_t)r * cnt + j);
    case SCHED_BROADCAST: return sim_input(c->seed, c->root, j);
    case SCHED_REDUCE: return sim_ref_all(c, n, j);
    case SCHED_ALLTOALL: return sim_input(c->seed, (int)(j / cnt), (size_t)r * cnt + j % cnt);
    case SCHED_GATHER: return sim_input(c->seed, (int)(j / cnt), j % cnt);
    case SCHED_SCATTER: return sim_input(c->seed, c->root, (size_t)r * cnt + j);
    case SCHED_P2P_RECV: return sim_input(c->seed, c->root, j); /* the sender's input */
    default: return 0;
    }
}

static const char *sim_alg_name(sim_alg_t a)
{
    static const char *names[] = {"ring", "direct", "chain", "pairwise", "tree", "recursive-doubling", "hierarchical"};
    return names[a];
}

/* Buffers and schedule of one call on rank r. */
static int sim_setup_op(sim_t *s, int r, sim_op_t *o, char *err, size_t errlen)
{
    const sim_call_t *c = &o->call;
    int n = s->n;
    sched_op_t sop = {c->coll, c->count, 8, n, r, c->root, sim_layout};
    sched_op_extent(&sop, &o->send_elems, &o->recv_elems);
    o->recv_mem = calloc(o->recv_elems + 1, 8);
    if (!o->recv_mem) { snprintf(err, errlen, "out of memory"); return -1; }
    o->recv = o->recv_mem;
    size_t blk = c->count, send_at = 0;
    int in_place = c->in_place && o->send_elems && o->recv_elems;
    switch (c->coll) {
    case SCHED_ALLGATHER: send_at = (size_t)r * blk; break;
    case SCHED_GATHER: send_at = (size_t)c->root * blk; break;
    default: break;
    }
    if (in_place && (c->coll == SCHED_REDUCE_SCATTER || c->coll == SCHED_SCATTER)) {
        /* The receive buffer lies inside the send buffer. */
        size_t at = (size_t)(c->coll == SCHED_SCATTER ? c->root : r) * blk;
        o->send_mem = calloc(o->send_elems + 1, 8);
        if (!o->send_mem) { snprintf(err, errlen, "out of memory"); return -1; }
        o->send = o->send_mem;
        free(o->recv_mem);
        o->recv_mem = NULL;
        o->recv = o->send + at;
    } else if (in_place && c->coll != SCHED_ALLTOALL) {
        o->send = o->recv + send_at;
    } else {
        o->send_mem = calloc(o->send_elems + 1, 8);
        if (!o->send_mem) { snprintf(err, errlen, "out of memory"); return -1; }
        o->send = o->send_mem;
    }
    for (size_t i = 0; i < o->send_elems; i++)
        o->send[i] = sim_input(c->seed, c->coll == SCHED_P2P_SEND ? r : r, i);
    ccl_result_t res;
    switch (c->alg) {
    case ALG_DIRECT: res = direct_schedule(&sop, &o->sched); break;
    case ALG_CHAIN: res = chain_schedule(&sop, &o->sched); break;
    case ALG_PAIRWISE: res = pairwise_schedule(&sop, &o->sched); break;
    case ALG_TREE: res = tree_schedule(&sop, &o->sched); break;
    case ALG_RD: res = rd_schedule(&sop, &o->sched); break;
    case ALG_HIER: res = hier_schedule(&sop, &o->sched); break;
    default: res = ring_schedule(&sop, &o->sched); break;
    }
    if (res != CCL_SUCCESS) { snprintf(err, errlen, "schedule failed for rank %d", r); return -1; }
    return 0;
}

static int sim_check(sim_t *s)
{
    for (int me = 0; me < s->n; me++) {
        sim_rank_t *R = &s->ranks[me];
        for (int k = 0; k < R->nops; k++) {
            sim_op_t *o = &R->ops[k];
            const sim_call_t *c = &o->call;
            if (c->coll == SCHED_P2P_SEND)
                continue;
            for (size_t j = 0; j < o->recv_elems; j++) {
                int64_t want = sim_expect(c, s->n, me, j);
                if (o->recv[j] != want) {
                    snprintf(s->err, sizeof s->err, "rank %d, call %d (%s): [%zu] = %lld, want %lld", me, k,
                             sched_coll_name(c->coll), j, (long long)o->recv[j], (long long)want);
                    return -1;
                }
            }
        }
    }
    for (size_t u = 0; u < s->nused; u++) {
        size_t f = s->used[u];
        if (s->fifos[f].head != s->fifos[f].tail) {
            snprintf(s->err, sizeof s->err, "FIFO %zu->%zu left %llu slots unconsumed", f / (size_t)s->n,
                     f % (size_t)s->n, (unsigned long long)(s->fifos[f].tail - s->fifos[f].head));
            return -1;
        }
    }
    return 0;
}

/* Runs rank r's list calls[r][0..ncalls[r]) on every rank together. */
static int sim_run_calls(int n, sim_call_t **calls, const int *ncalls, int nslots, size_t slot_bytes,
                         char *err, size_t errlen)
{
    sim_t s = {.n = n, .slot_bytes = slot_bytes, .nslots = nslots};
    int rc = -1;
    s.ranks = calloc((size_t)n, sizeof *s.ranks);
    s.fifos = calloc((size_t)n * (size_t)n, sizeof *s.fifos);
    s.used = malloc((size_t)n * (size_t)n * sizeof *s.used);
    if (!s.ranks || !s.fifos || !s.used) { snprintf(err, errlen, "out of memory"); goto out; }
    for (int r = 0; r < n; r++) {
        sim_rank_t *R = &s.ranks[r];
        R->nops = ncalls[r];
        R->ops = calloc((size_t)R->nops + 1, sizeof *R->ops);
        R->eops = calloc((size_t)R->nops + 1, sizeof *R->eops);
        if (!R->ops || !R->eops) { snprintf(err, errlen, "out of memory"); goto out; }
        for (int k = 0; k < R->nops; k++) {
            R->ops[k].call = calls[r][k];
            if (sim_setup_op(&s, r, &R->ops[k], err, errlen) != 0)
                goto out;
            R->eops[k] = (eng_op_t){.sched = &R->ops[k].sched, .elem_size = 8};
        }
        if (r == 0 && R->nops > 0) {
            sched_t *sc = &R->ops[0].sched;
            if (sim_mutation == MUTATE_DROP_LAST_STEP)
                sc->nsteps--;
            if (sim_mutation == MUTATE_RECV_FIRST) {
                sc->steps[0].action = SCHED_RECV; /* everyone waits: deadlock */
                sc->steps[0].recv_peer = n - 1;
                sc->steps[0].send_peer = -1;
                sc->steps[0].dst_buf = SCHED_BUF_RECV;
            }
            if (sim_mutation == MUTATE_WRONG_PEER && sc->nsteps > 1)
                sc->steps[1].recv_peer = (sc->steps[1].recv_peer + 1) % n;
        }
        for (int k = 0; k < R->nops; k++) {
            const sched_t *sc = &R->ops[k].sched;
            for (int i = 1; i < sc->nsteps; i++)
                if (sc->steps[i].lag < sc->steps[i - 1].lag) {
                    snprintf(err, errlen, "rank %d: step %d lags %d rounds, less than step %d before it", r, i,
                             sc->steps[i].lag, i - 1);
                    goto out;
                }
        }
        if (eng_job_setup(&R->job, R->eops, R->nops, n, slot_bytes, &R->arena, &R->arena_cap) != CCL_SUCCESS) {
            snprintf(err, errlen, "engine setup failed");
            goto out;
        }
        R->job.window = sim_window;
    }
    for (;;) {
        long progress = 0;
        int all_done = 1;
        for (int r = 0; r < n; r++) {
            sim_rank_t *R = &s.ranks[r];
            if (eng_job_done(&R->job))
                continue;
            sim_try_ctx_t ctx = {&s, r};
            eng_sweep_t sw;
            if (eng_sweep(&R->job, sim_try_slice, &ctx, &sw) < 0) { snprintf(err, errlen, "%s", s.err); goto out; }
            progress += sw.ran;
            all_done &= eng_job_done(&R->job);
        }
        if (all_done) break;
        if (progress == 0) {
            int stuck = 0;
            while (eng_job_done(&s.ranks[stuck].job)) stuck++;
            snprintf(err, errlen, "deadlock: rank %d stuck in round %zu", stuck, s.ranks[stuck].job.round);
            goto out;
        }
    }
    rc = sim_check(&s);
    if (rc != 0) snprintf(err, errlen, "%s", s.err);
out:
    for (int r = 0; s.ranks && r < n; r++) {
        for (int k = 0; s.ranks[r].ops && k < s.ranks[r].nops; k++) {
            free(s.ranks[r].ops[k].send_mem);
            free(s.ranks[r].ops[k].recv_mem);
            sched_free(&s.ranks[r].ops[k].sched);
        }
        free(s.ranks[r].ops);
        free(s.ranks[r].eops);
        free(s.ranks[r].arena);
    }
    for (size_t u = 0; s.used && u < s.nused; u++) {
        free(s.fifos[s.used[u]].data);
        free(s.fifos[s.used[u]].len);
    }
    free(s.ranks);
    free(s.fifos);
    free(s.used);
    return rc;
}

/* The same single call on every rank. */
static int sim_run(int n, const sim_call_t *c, int nslots, size_t slot_bytes, char *err, size_t errlen)
{
    sim_call_t **calls = calloc((size_t)n, sizeof *calls);
    int *ncalls = calloc((size_t)n, sizeof *ncalls);
    int rc = -1;
    if (!calls || !ncalls) { snprintf(err, errlen, "out of memory"); goto out; }
    for (int r = 0; r < n; r++) {
        calls[r] = (sim_call_t *)c;
        ncalls[r] = 1;
    }
    rc = sim_run_calls(n, calls, ncalls, nslots, slot_bytes, err, errlen);
out:
    free(calls);
    free(ncalls);
    return rc;
}

static sim_alg_t sim_alg_of(sched_coll_t coll)
{
    switch (coll) {
    case SCHED_BROADCAST: case SCHED_REDUCE: return ALG_CHAIN;
    case SCHED_ALLTOALL: case SCHED_GATHER: case SCHED_SCATTER: return ALG_PAIRWISE;
    default: return ALG_RING;
    }
}

static uint64_t sim_rng = 88172645463325252ull;
static uint64_t sim_rand(void)
{
    sim_rng ^= sim_rng << 13;
    sim_rng ^= sim_rng >> 7;
    sim_rng ^= sim_rng << 17;
    return sim_rng;
}

/* Point to point in a group: every rank sends to a random set of peers
 * with random counts (some 0, some to itself) and posts the matching
 * receives, calls shuffled per rank (only the order per peer pair must
 * match); or a ring exchange. */
static int sim_run_p2p(int n, int ring, size_t maxcount, int nslots, size_t slot_bytes, char *err, size_t errlen)
{
    sim_call_t **calls = calloc((size_t)n, sizeof *calls);
    int *ncalls = calloc((size_t)n, sizeof *ncalls);
    size_t *cnt = calloc((size_t)n * (size_t)n, sizeof *cnt);
    int rc = -1;
    if (!calls || !ncalls || !cnt) { snprintf(err, errlen, "out of memory"); goto out; }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            cnt[(size_t)a * (size_t)n + (size_t)b] = ring ? (b == (a + 1) % n ? maxcount : 0)
                                                          : (sim_rand() % 3 == 0 ? 0 : sim_rand() % (maxcount + 1));
    for (int r = 0; r < n; r++) {
        calls[r] = calloc(2 * (size_t)n, sizeof **calls);
        if (!calls[r]) { snprintf(err, errlen, "out of memory"); goto out; }
        for (int q = 0; q < n; q++) {
            size_t sc = cnt[(size_t)r * (size_t)n + (size_t)q], rcnt = cnt[(size_t)q * (size_t)n + (size_t)r];
            if (sc || !ring)
                calls[r][ncalls[r]++] = (sim_call_t){SCHED_P2P_SEND, sc, q, CCL_SUM, 0, ALG_PAIRWISE, r * 1000 + q};
            if (rcnt || !ring)
                calls[r][ncalls[r]++] = (sim_call_t){SCHED_P2P_RECV, rcnt, q, CCL_SUM, 0, ALG_PAIRWISE, q * 1000 + r};
        }
        /* Shuffle: the engine's order per connection is by call index, and
         * sends to one peer stay in one relative order either way. */
        for (int i = ncalls[r] - 1; i > 0; i--) {
            int j = (int)(sim_rand() % (uint64_t)(i + 1));
            sim_call_t t = calls[r][i];
            calls[r][i] = calls[r][j];
            calls[r][j] = t;
        }
    }
    /* The receiver's reference: the sender (root field) fills with
     * sim_input(seed, sender, i), the seed both sides share. */
    rc = sim_run_calls(n, calls, ncalls, nslots, slot_bytes, err, errlen);
out:
    for (int r = 0; calls && r < n; r++)
        free(calls[r]);
    free(calls);
    free(ncalls);
    free(cnt);
    return rc;
}

/* Several collectives in one group on one comm. */
static int sim_run_fused(int n, size_t count, int nslots, size_t slot_bytes, char *err, size_t errlen)
{
    sim_call_t list[] = {
        {SCHED_ALLREDUCE, count, 0, CCL_SUM, 0, ALG_RING, 1},
        {SCHED_BROADCAST, count + 3, n - 1, CCL_SUM, 1, ALG_CHAIN, 2},
        {SCHED_ALLTOALL, count / 2 + 1, 0, CCL_SUM, 0, ALG_PAIRWISE, 3},
        {SCHED_REDUCE_SCATTER, count, 0, CCL_MAX, 1, ALG_RING, 4},
        {SCHED_REDUCE, count, n / 2, CCL_PROD, 0, ALG_CHAIN, 5},
        {SCHED_GATHER, count, n / 2, CCL_SUM, 1, ALG_PAIRWISE, 6},
        {SCHED_BROADCAST, count + 1, n / 2, CCL_SUM, 0, ALG_PAIRWISE, 7},
    };
    int k = (int)(sizeof list / sizeof list[0]);
    sim_call_t **calls = calloc((size_t)n, sizeof *calls);
    int *ncalls = calloc((size_t)n, sizeof *ncalls);
    int rc = -1;
    if (!calls || !ncalls) { snprintf(err, errlen, "out of memory"); goto out; }
    for (int r = 0; r < n; r++) {
        calls[r] = list;
        ncalls[r] = k;
    }
    rc = sim_run_calls(n, calls, ncalls, nslots, slot_bytes, err, errlen);
out:
    free(calls);
    free(ncalls);
    return rc;
}

typedef struct {
    sched_layout_t lay;
    int *node_of, *local_rank, *node_first, *node_ranks;
} sim_lay_t;

/* n ranks on nn nodes: node k gets sizes[k] ranks; interleave: rank r goes
 * to the next node with room in round-robin order (ranks of a node are
 * then not contiguous), else ranks fill nodes in order. */
static int sim_lay_build(sim_lay_t *L, int n, int nn, const int *sizes, int interleave)
{
    L->node_of = calloc((size_t)n, sizeof(int));
    L->local_rank = calloc((size_t)n, sizeof(int));
    L->node_first = calloc((size_t)nn + 1, sizeof(int));
    L->node_ranks = calloc((size_t)n, sizeof(int));
    int *fill = calloc((size_t)nn, sizeof(int));
    if (!L->node_of || !L->local_rank || !L->node_first || !L->node_ranks || !fill)
        return -1;
    for (int k = 0; k < nn; k++)
        L->node_first[k + 1] = L->node_first[k] + sizes[k];
    int k = 0;
    for (int r = 0; r < n; r++) {
        if (interleave) {
            while (fill[k] == sizes[k]) k = (k + 1) % nn;
        } else {
            while (fill[k] == sizes[k]) k++;
        }
        L->node_of[r] = k;
        L->local_rank[r] = fill[k];
        L->node_ranks[L->node_first[k] + fill[k]++] = r;
        if (interleave) k = (k + 1) % nn;
    }
    free(fill);
    L->lay = (sched_layout_t){nn, L->node_of, L->local_rank, L->node_first, L->node_ranks};
    return 0;
}

static void sim_lay_free(sim_lay_t *L)
{
    free(L->node_of);
    free(L->local_rank);
    free(L->node_first);
    free(L->node_ranks);
}

/* Node layouts for the hierarchical schedules. Returns the node count, or
 * 0 when the kind does not apply to n ranks (or is too slow for it);
 * *interleave: ranks go round-robin over the nodes instead of in order. */
enum { LAY_EVEN, LAY_BIG_SMALL, LAY_SMALL_BIG, LAY_ONE_PER_NODE, LAY_RANDOM, LAY_RANDOM_INTERLEAVED,
       LAY_ALTERNATE, LAY_ONE_NODE, LAY_KINDS };
static int sim_lay_kind(int kind, int n, int *sizes, int *interleave)
{
    int nn = 0;
    *interleave = kind == LAY_RANDOM_INTERLEAVED || kind == LAY_ALTERNATE;
    /* Past 64 ranks (up to 1024), only the even layout, to bound the run time. */
    if (n > 64 && kind != LAY_EVEN)
        return 0;
    switch (kind) {
    case LAY_EVEN: /* two (or one) even-ish nodes */
    case LAY_ALTERNATE: /* the same, ranks alternating: node_of = 0,1,0,1,... */
        if (kind == LAY_ALTERNATE && n < 3) return 0;
        nn = n >= 2 ? 2 : 1;
        for (int k = 0; k < nn; k++) sizes[k] = n / nn + (k < n % nn);
        return nn;
    case LAY_BIG_SMALL: /* n-1 ranks on one node, 1 on the other (3+1) */
    case LAY_SMALL_BIG: /* and the other way round (1+3) */
        if (n < 3) return 0;
        sizes[0] = kind == LAY_BIG_SMALL ? n - 1 : 1;
        sizes[1] = kind == LAY_BIG_SMALL ? 1 : n - 1;
        return 2;
    case LAY_ONE_PER_NODE:
        for (int k = 0; k < n; k++) sizes[k] = 1;
        return n;
    case LAY_RANDOM: /* random node sizes of 1..4 (2+1+4 ...), in order or interleaved */
    case LAY_RANDOM_INTERLEAVED:
        if (n < 4) return 0;
        for (int left = n; left > 0; nn++) {
            int sz = 1 + (int)(sim_rand() % 4);
            sizes[nn] = sz < left ? sz : left;
            left -= sizes[nn];
        }
        return nn;
    case LAY_ONE_NODE: /* a layout of one node: must degrade to the flat schedules */
        if (n < 2 || n > 24) return 0;
        sizes[0] = n;
        return 1;
    default:
        return 0;
    }
}

static const char *sim_lay_name(int kind)
{
    static const char *names[LAY_KINDS] = {"even", "n-1+1", "1+n-1", "one-per-node", "random",
                                           "random-interleaved", "alternating", "one-node"};
    return names[kind];
}

/* One call on every rank; counts it and reports a failure. */
static void sim_case(int n, const sim_call_t *c, int nslots, size_t slot, const char *where, int *passed,
                     int *failed)
{
    char err[256];
    if (sim_run(n, c, nslots, slot, err, sizeof err) == 0) {
        (*passed)++;
        return;
    }
    (*failed)++;
    printf("FAIL %s %s n=%d %s count=%zu root=%d %s op=%s slots=%dx%zu: %s\n", sim_alg_name(c->alg),
           sched_coll_name(c->coll), n, where, c->count, c->root, c->in_place ? "in-place" : "out-of-place",
           dev_op_name(c->op), nslots, slot, err);
}

/* The hierarchical schedules (allreduce, allgather, reduce-scatter,
 * broadcast, reduce) over every layout kind, in and out of place, with
 * empty, one-element and odd counts and roots at either end and in the
 * middle; and once per rank count, on the most irregular layout, the
 * layout-agnostic schedules (ring, tree, recursive doubling), which must
 * not care. */
static void sim_hier_cases(int n, int *passed, int *failed)
{
    static const sched_coll_t colls[] = {SCHED_ALLREDUCE, SCHED_ALLGATHER, SCHED_REDUCE_SCATTER,
                                         SCHED_BROADCAST, SCHED_REDUCE};
    int sizes[1024];
    for (int kind = 0; kind < LAY_KINDS; kind++) {
        int interleave, nn = sim_lay_kind(kind, n, sizes, &interleave);
        if (!nn)
            continue;
        sim_lay_t L;
        if (sim_lay_build(&L, n, nn, sizes, interleave) != 0) {
            printf("FAIL out of memory\n");
            (*failed)++;
            return;
        }
        sim_layout = &L.lay;
        char where[64];
        snprintf(where, sizeof where, "layout=%s nodes=%d", sim_lay_name(kind), nn);
        for (size_t ci = 0; ci < sizeof colls / sizeof colls[0]; ci++) {
            sched_coll_t coll = colls[ci];
            int blocks = coll == SCHED_ALLGATHER || coll == SCHED_REDUCE_SCATTER;
            /* Blocks: n of them per rank, so smaller counts. */
            size_t counts[] = {0, 1, blocks ? 7 : (size_t)n * 3 + 5, blocks ? 67 : (size_t)n * 29 + 11};
            for (int k = 0; k < (n > 64 ? 3 : 4); k++) {
                for (int ip = 0; ip < 2; ip++) {
                    ccl_redop_t op = (ccl_redop_t)((n + k + ip + kind + (int)ci) % CCL_NUM_OPS);
                    int rk = (k + ip + kind) % 3, root = rk == 0 ? 0 : rk == 1 ? n - 1 : n / 2;
                    sim_call_t c = {coll, counts[k], root, op, ip, ALG_HIER, n + k + (int)ci};
                    sim_case(n, &c, k % 2 ? 2 : 4, k % 2 ? 64 : 256, where, passed, failed);
                }
            }
        }
        if (kind == (n >= 4 ? LAY_RANDOM_INTERLEAVED : LAY_EVEN) && n <= 64) {
            const struct { sched_coll_t coll; sim_alg_t alg; } flat[] = {
                {SCHED_ALLREDUCE, ALG_RING}, {SCHED_ALLREDUCE, ALG_TREE}, {SCHED_ALLREDUCE, ALG_RD},
                {SCHED_ALLGATHER, ALG_RING}, {SCHED_REDUCE_SCATTER, ALG_RING},
            };
            for (size_t f = 0; f < sizeof flat / sizeof flat[0]; f++) {
                sim_call_t c = {flat[f].coll, flat[f].coll == SCHED_ALLREDUCE ? (size_t)n * 3 + 5 : 7, 0,
                                (ccl_redop_t)((n + (int)f) % CCL_NUM_OPS), (int)f % 2, flat[f].alg, n};
                sim_case(n, &c, 2, 64, where, passed, failed);
            }
        }
        sim_layout = NULL;
        sim_lay_free(&L);
    }
}

int main(int argc, char **argv)
{
    /* --hier: only the hierarchical cases; --max-ranks=N: skip larger
     * communicators (both for quick runs while working on a schedule). */
    int only_hier = 0, max_ranks = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--hier")) {
            only_hier = 1;
        } else if (!strncmp(argv[i], "--max-ranks=", 12)) {
            max_ranks = atoi(argv[i] + 12);
        } else if (!strncmp(argv[i], "--window=", 9) && atoi(argv[i] + 9) > 0) {
            sim_window = (size_t)atoi(argv[i] + 9);
        } else {
            fprintf(stderr, "usage: %s [--hier] [--max-ranks=N] [--window=N]\n", argv[0]);
            return 2;
        }
    }
    int ranks[200], nr = 0;
    for (int n = 1; n <= 40; n++) ranks[nr++] = n;
    const int big[] = {61, 64, 97, 128, 257, 512, 1000, 1024};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) ranks[nr++] = big[i];
    int passed = 0, failed = 0;
    char err[256];
    /* The simulator must reject broken schedules, or its passes mean nothing. */
    const struct { int mutation; int n; const char *what; } selftests[] = {
        {MUTATE_DROP_LAST_STEP, 3, "a missing step"},
        {MUTATE_RECV_FIRST, 4, "a deadlock"},
        {MUTATE_WRONG_PEER, 5, "a receive from the wrong peer"},
    };
    for (size_t i = 0; i < sizeof selftests / sizeof selftests[0]; i++) {
        sim_call_t c = {SCHED_ALLREDUCE, 100, 0, CCL_SUM, 0, ALG_RING, 0};
        sim_mutation = selftests[i].mutation;
        int rc = sim_run(selftests[i].n, &c, 2, 64, err, sizeof err);
        sim_mutation = MUTATE_NONE;
        if (rc == 0) {
            failed++;
            printf("FAIL self-test: the simulator did not detect %s\n", selftests[i].what);
        } else {
            passed++;
            printf("ok: self-test detects %s (%s)\n", selftests[i].what, err);
        }
    }
    for (int ri = 0; ri < nr; ri++) {
        int n = ranks[ri];
        if (n > max_ranks)
            break;
        if (only_hier) {
            sim_hier_cases(n, &passed, &failed);
            continue;
        }
        /* Counts: empty, tiny, not a multiple of anything, several slots per
         * part; fewer and smaller for huge rank counts to bound run time
         * (the n-block collectives hold n*n*count elements per job). */
        size_t counts[] = {0, 1, 7, (size_t)n * 3 + 5, (size_t)n * 37 + 11};
        size_t blk_counts[] = {0, 1, 7, 13, 67};
        int ncounts = n > 256 ? 4 : 5, nblk = n > 64 ? 4 : 5;
        for (int coll = 0; coll <= SCHED_SCATTER; coll++) {
            int blocks = coll == SCHED_ALLGATHER || coll == SCHED_REDUCE_SCATTER || coll == SCHED_ALLTOALL ||
                         coll == SCHED_GATHER || coll == SCHED_SCATTER;
            int rooted = coll == SCHED_BROADCAST || coll == SCHED_REDUCE || coll == SCHED_GATHER || coll == SCHED_SCATTER;
            /* Huge alltoall is n^2 FIFOs of memory: up to 257 ranks. */
            if (coll == SCHED_ALLTOALL && n > 257)
                continue;
            for (int ci = 0; ci < (blocks ? nblk : ncounts); ci++) {
                size_t count = blocks ? blk_counts[ci] : counts[ci];
                for (int ip = 0; ip < 2; ip++) {
                    ccl_redop_t op = (ccl_redop_t)((ri + ci + ip) % CCL_NUM_OPS);
                    int nslots = (ci % 2) ? 2 : 4;
                    size_t slot = (ci % 2) ? 64 : 256;
                    int root = !rooted ? 0 : (ci % 3 == 0 ? 0 : ci % 3 == 1 ? n - 1 : n / 2);
                    /* Allreduce: ring, tree, recursive doubling, and direct on 2 ranks;
                     * broadcast: chain and star (pairwise). */
                    sim_alg_t algs[4] = {sim_alg_of((sched_coll_t)coll), ALG_TREE, ALG_RD, ALG_DIRECT};
                    int nalg = coll == SCHED_ALLREDUCE ? (n == 2 ? 4 : 3) : coll == SCHED_BROADCAST ? 2 : 1;
                    if (coll == SCHED_BROADCAST)
                        algs[1] = ALG_PAIRWISE;
                    for (int a = 0; a < nalg; a++) {
                        sim_call_t c = {(sched_coll_t)coll, count, root, op, ip, algs[a], ri * 7 + ci};
                        sim_case(n, &c, nslots, slot, "one node", &passed, &failed);
                    }
                }
            }
        }
        sim_hier_cases(n, &passed, &failed);
        /* Groups: fused collectives, p2p ring exchange, random all-to-all-v. */
        if (n <= 64) {
            struct { const char *what; int rc; } g[3];
            g[0].what = "fused collectives";
            g[0].rc = sim_run_fused(n, (size_t)n * 5 + 3, 2, 64, err, sizeof err);
            if (g[0].rc) printf("FAIL group of collectives n=%d: %s\n", n, err);
            g[1].what = "ring exchange";
            g[1].rc = sim_run_p2p(n, 1, 200, 2, 64, err, sizeof err);
            if (g[1].rc) printf("FAIL p2p ring exchange n=%d: %s\n", n, err);
            g[2].what = "all-to-all-v";
            g[2].rc = n <= 24 ? sim_run_p2p(n, 0, 97, 2, 64, err, sizeof err) : 0;
            if (g[2].rc) printf("FAIL p2p all-to-all-v n=%d: %s\n", n, err);
            for (int i = 0; i < 3; i++) {
                if (g[i].rc) failed++;
                else passed++;
            }
        }
    }
    printf("schedule simulator: %d cases passed, %d failed (ranks 1..40 and up to 1024)\n", passed, failed);
    return failed ? 1 : 0;
}
