/*
 * test_sim_schedules.c - the schedule simulator.
 *
 * Runs the schedules of every rank of a communicator in one process, the
 * way the host executor does (rounds of slices, step order within a round),
 * over simulated FIFOs with a bounded number of slots. It checks that
 *   - every result equals a serial reference (int64 data, so exact),
 *   - every receive matches a send of the same size from the named peer,
 *   - no configuration deadlocks with bounded FIFOs (a full pass over all
 *     ranks without progress is reported as a deadlock),
 *   - every rank finishes with its FIFOs drained,
 * for 1..1024 ranks, in place and out of place, with tiny slots so that the
 * pipelining and the uneven last parts are exercised.
 */
#include "algos/schedule.h"
#include "device/reduce.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Self-test hooks: corrupt rank 0's schedule to prove the checks can fail. */
enum { MUTATE_NONE, MUTATE_DROP_LAST_STEP, MUTATE_RECV_FIRST, MUTATE_WRONG_PEER };
static int sim_mutation = MUTATE_NONE;

typedef struct {
    int nslots;
    size_t slot_bytes;
    int64_t *data; /* nslots * slot_bytes/8 ring buffer */
    size_t *len;   /* bytes in each slot */
    uint64_t head, tail;
} sim_fifo_t;

typedef struct {
    sched_t sched;
    size_t round, step, rounds;
    int done;
    int64_t *send, *recv;
} sim_rank_t;

typedef struct {
    int n;
    size_t count, esz, slot_bytes;
    int nslots;
    sched_coll_t coll;
    int in_place;
    int use_direct;
    ccl_redop_t op;
    sim_rank_t *ranks;
    sim_fifo_t *fifos; /* n*n: [from*n + to], allocated lazily */
    char err[256];
} sim_t;

static sim_fifo_t *sim_fifo(sim_t *s, int from, int to)
{
    sim_fifo_t *f = &s->fifos[(size_t)from * (size_t)s->n + (size_t)to];
    if (!f->data) {
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

static int64_t sim_input(int rank, size_t i)
{
    /* Small values keep prod from overflowing for few ranks and make min/max
     * interesting; the value mix differs per rank and index. */
    uint64_t h = (uint64_t)rank * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return (int64_t)(h % 7) - 3;
}

static int64_t *sim_buf_ptr(sim_rank_t *r, int which, size_t off)
{
    return which == SCHED_BUF_SEND ? r->send + off : which == SCHED_BUF_RECV ? r->recv + off : NULL;
}

/* Tries to run slice `k` of `st` for rank `me`; returns 1 if it ran, 0 if it
 * must wait, -1 on a protocol error. */
static int sim_try_slice(sim_t *s, int me, const sched_step_t *st, size_t k)
{
    sim_rank_t *r = &s->ranks[me];
    size_t total = st->count * s->esz, off = k * s->slot_bytes;
    size_t nbytes = total - off < s->slot_bytes ? total - off : s->slot_bytes;
    size_t n = nbytes / s->esz, eoff = off / s->esz;
    int64_t *src = sim_buf_ptr(r, st->src_buf, st->src_off);
    int64_t *dst = sim_buf_ptr(r, st->dst_buf, st->dst_off);
    if (src) src += eoff;
    if (dst) dst += eoff;
    sim_fifo_t *in = st->recv_peer >= 0 ? sim_fifo(s, st->recv_peer, me) : NULL;
    sim_fifo_t *out = st->send_peer >= 0 ? sim_fifo(s, me, st->send_peer) : NULL;
    if (in && in->tail == in->head)
        return 0;
    if (out && out->tail - out->head >= (uint64_t)out->nslots)
        return 0;
    int64_t *islot = in ? in->data + (in->head % (uint64_t)in->nslots) * (s->slot_bytes / 8) : NULL;
    int64_t *oslot = out ? out->data + (out->tail % (uint64_t)out->nslots) * (s->slot_bytes / 8) : NULL;
    if (in && in->len[in->head % (uint64_t)in->nslots] != nbytes) {
        snprintf(s->err, sizeof s->err, "rank %d step %s slice %zu: expected %zu bytes from rank %d, got %zu",
                 me, sched_action_name(st->action), k, nbytes, st->recv_peer, in->len[in->head % (uint64_t)in->nslots]);
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
        if (post) dev_postop(CCL_INT64, s->op, dst, n, s->n);
        break;
    case SCHED_RECV_REDUCE_SEND: dev_reduce(CCL_INT64, s->op, oslot, NULL, islot, src, n); break;
    case SCHED_RECV_REDUCE_COPY:
        dev_reduce(CCL_INT64, s->op, tmp, NULL, islot, src, n);
        if (post) dev_postop(CCL_INT64, s->op, tmp, n, s->n);
        memcpy(dst, tmp, nbytes);
        break;
    case SCHED_RECV_COPY_SEND: memcpy(dst, islot, nbytes); memcpy(oslot, islot, nbytes); break;
    case SCHED_RECV_REDUCE_COPY_SEND:
        dev_reduce(CCL_INT64, s->op, tmp, NULL, islot, src, n);
        if (post) dev_postop(CCL_INT64, s->op, tmp, n, s->n);
        memcpy(dst, tmp, nbytes);
        memcpy(oslot, tmp, nbytes);
        break;
    case SCHED_LOCAL_REDUCE: dev_reduce(CCL_INT64, s->op, dst, NULL, src, dst, n); break;
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

/* Advances rank `me` as far as it can; returns slices run, or -1. */
static long sim_advance(sim_t *s, int me)
{
    sim_rank_t *r = &s->ranks[me];
    long ran = 0;
    while (!r->done) {
        if (r->round >= r->rounds) { r->done = 1; break; }
        const sched_step_t *st = &r->sched.steps[r->step];
        if (r->round < sched_step_slices(st, s->esz, s->slot_bytes)) {
            int rc = sim_try_slice(s, me, st, r->round);
            if (rc < 0) return -1;
            if (rc == 0) break;
            ran++;
        }
        if (++r->step == (size_t)r->sched.nsteps) { r->step = 0; r->round++; }
    }
    return ran;
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

static int sim_check(sim_t *s)
{
    for (int me = 0; me < s->n; me++) {
        const int64_t *got = s->ranks[me].recv;
        if (s->coll == SCHED_ALLGATHER) {
            for (int q = 0; q < s->n; q++)
                for (size_t i = 0; i < s->count; i++)
                    if (got[(size_t)q * s->count + i] != sim_input(q, i)) {
                        snprintf(s->err, sizeof s->err, "rank %d: block %d [%zu] = %lld, want %lld", me, q, i,
                                 (long long)got[(size_t)q * s->count + i], (long long)sim_input(q, i));
                        return -1;
                    }
        } else {
            for (size_t i = 0; i < s->count; i++) {
                int64_t want = sim_input(0, i);
                for (int q = 1; q < s->n; q++)
                    want = sim_ref_reduce(s->op, want, sim_input(q, i));
                if (s->op == CCL_AVG)
                    want /= s->n;
                if (got[i] != want) {
                    snprintf(s->err, sizeof s->err, "rank %d: [%zu] = %lld, want %lld", me, i,
                             (long long)got[i], (long long)want);
                    return -1;
                }
            }
        }
    }
    for (size_t f = 0; f < (size_t)s->n * (size_t)s->n; f++)
        if (s->fifos[f].head != s->fifos[f].tail) {
            snprintf(s->err, sizeof s->err, "FIFO %zu->%zu left %llu slots unconsumed", f / (size_t)s->n,
                     f % (size_t)s->n, (unsigned long long)(s->fifos[f].tail - s->fifos[f].head));
            return -1;
        }
    return 0;
}

static int sim_run(int n, sched_coll_t coll, size_t count, int in_place, ccl_redop_t op, int nslots,
                   size_t slot_bytes, int use_direct, char *err, size_t errlen)
{
    sim_t s = {.n = n, .count = count, .esz = 8, .slot_bytes = slot_bytes, .nslots = nslots,
               .coll = coll, .in_place = in_place, .use_direct = use_direct, .op = op};
    int rc = -1;
    s.ranks = calloc((size_t)n, sizeof *s.ranks);
    /* Only ring neighbours talk, but index by (from, to) for simplicity;
     * lazily allocated so 1024 ranks stay cheap. */
    s.fifos = calloc((size_t)n * (size_t)n, sizeof *s.fifos);
    if (!s.ranks || !s.fifos) { snprintf(err, errlen, "out of memory"); goto out; }
    size_t rcount = coll == SCHED_ALLGATHER ? count * (size_t)n : count;
    for (int r = 0; r < n; r++) {
        sim_rank_t *R = &s.ranks[r];
        R->recv = calloc(rcount + 1, 8);
        if (!R->recv) { snprintf(err, errlen, "out of memory"); goto out; }
        if (in_place)
            R->send = coll == SCHED_ALLGATHER ? R->recv + (size_t)r * count : R->recv;
        else if (!(R->send = calloc(count + 1, 8))) { snprintf(err, errlen, "out of memory"); goto out; }
        for (size_t i = 0; i < count; i++)
            R->send[i] = sim_input(r, i);
        sched_op_t sop = {coll, count, 8, n, r};
        if ((use_direct ? direct_schedule(&sop, &R->sched) : ring_schedule(&sop, &R->sched)) != CCL_SUCCESS) {
            snprintf(err, errlen, "schedule failed for rank %d", r);
            goto out;
        }
        if (r == 0 && sim_mutation == MUTATE_DROP_LAST_STEP)
            R->sched.nsteps--;
        if (r == 0 && sim_mutation == MUTATE_RECV_FIRST) {
            R->sched.steps[0].action = SCHED_RECV; /* everyone waits: deadlock */
            R->sched.steps[0].recv_peer = n - 1;
            R->sched.steps[0].send_peer = -1;
            R->sched.steps[0].dst_buf = SCHED_BUF_RECV;
        }
        if (r == 0 && sim_mutation == MUTATE_WRONG_PEER && R->sched.nsteps > 1)
            R->sched.steps[1].recv_peer = (R->sched.steps[1].recv_peer + 1) % n;
        R->rounds = sched_rounds(&R->sched, 8, slot_bytes);
        if (R->sched.nsteps == 0) R->done = 1;
    }
    for (;;) {
        long progress = 0;
        int all_done = 1;
        for (int r = 0; r < n; r++) {
            long ran = sim_advance(&s, r);
            if (ran < 0) { snprintf(err, errlen, "%s", s.err); goto out; }
            progress += ran;
            all_done &= s.ranks[r].done;
        }
        if (all_done) break;
        if (progress == 0) {
            int stuck = 0;
            while (s.ranks[stuck].done) stuck++;
            snprintf(err, errlen, "deadlock: rank %d stuck in round %zu at step %zu (%s)", stuck,
                     s.ranks[stuck].round, s.ranks[stuck].step,
                     sched_action_name(s.ranks[stuck].sched.steps[s.ranks[stuck].step].action));
            goto out;
        }
    }
    rc = sim_check(&s);
    if (rc != 0) snprintf(err, errlen, "%s", s.err);
out:
    for (int r = 0; s.ranks && r < n; r++) {
        if (!in_place) free(s.ranks[r].send);
        free(s.ranks[r].recv);
        sched_free(&s.ranks[r].sched);
    }
    for (size_t f = 0; s.fifos && f < (size_t)n * (size_t)n; f++) {
        free(s.fifos[f].data);
        free(s.fifos[f].len);
    }
    free(s.ranks);
    free(s.fifos);
    return rc;
}

int main(void)
{
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
        sim_mutation = selftests[i].mutation;
        int rc = sim_run(selftests[i].n, SCHED_ALLREDUCE, 100, 0, CCL_SUM, 2, 64, 0, err, sizeof err);
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
        /* Counts: empty, tiny, not a multiple of anything, several slots per
         * part; fewer for huge rank counts to bound run time. */
        size_t counts[] = {0, 1, 7, (size_t)n * 3 + 5, (size_t)n * 37 + 11};
        int ncounts = n > 256 ? 4 : 5;
        /* Allgather memory is n*n*count per simulated job: keep counts small
         * for big n (the parts still span several slots and ranks). */
        size_t ag_counts[] = {0, 1, 7, 13, 67};
        int ag_ncounts = n > 64 ? 4 : 5;
        for (int ci = 0; ci < 5; ci++) {
            for (int coll = 0; coll < SCHED_NUM_COLLS; coll++) {
                size_t count = coll == SCHED_ALLGATHER ? ag_counts[ci] : counts[ci];
                if (ci >= (coll == SCHED_ALLGATHER ? ag_ncounts : ncounts))
                    continue;
                for (int ip = 0; ip < 2; ip++) {
                    ccl_redop_t op = (ccl_redop_t)((ri + ci + ip) % CCL_NUM_OPS);
                    int nslots = (ci % 2) ? 2 : 4;
                    size_t slot = (ci % 2) ? 64 : 256;
                    int nalg = (coll == SCHED_ALLREDUCE && n == 2) ? 2 : 1;
                    for (int direct = 0; direct < nalg; direct++) {
                        if (sim_run(n, (sched_coll_t)coll, count, ip, op, nslots, slot, direct, err, sizeof err) == 0) {
                            passed++;
                        } else {
                            failed++;
                            printf("FAIL %s %s n=%d count=%zu %s op=%s slots=%dx%zu: %s\n",
                                   direct ? "direct" : "ring", coll == SCHED_ALLGATHER ? "allgather" : "allreduce",
                                   n, count, ip ? "in-place" : "out-of-place", dev_op_name(op), nslots, slot, err);
                        }
                    }
                }
            }
        }
    }
    printf("schedule simulator: %d cases passed, %d failed (ranks 1..40 and up to 1024)\n", passed, failed);
    return failed ? 1 : 0;
}
