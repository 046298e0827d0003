/*
 * engine.c - which slice runs next (rules in engine.h).
 */
#include "algos/engine.h"
#include "base/err.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

ccl_result_t eng_job_setup(eng_job_t *job, eng_op_t *ops, int nops, int nranks, size_t slot_bytes,
                           void **arena, size_t *cap)
{
    size_t nsteps = 0;
    for (int o = 0; o < nops; o++)
        nsteps += (size_t)ops[o].sched->nsteps;
    size_t need = nsteps * sizeof(size_t) + 2 * (size_t)nranks;
    if (need > *cap) {
        void *p = realloc(*arena, need);
        if (!p)
            return err_set(CCL_ERR_SYSTEM, "out of memory for the progress state of %zu steps", nsteps);
        *arena = p;
        *cap = need;
    }
    size_t *next = *arena;
    memset(next, 0, nsteps * sizeof(size_t));
    job->ops = ops;
    job->nops = nops;
    job->nranks = nranks;
    job->slot_bytes = slot_bytes;
    job->round = 0;
    job->rounds = 0;
    job->window = 1;
    job->lagged = 0;
    job->blocked = (unsigned char *)(next + nsteps);
    for (int o = 0; o < nops; o++) {
        ops[o].next = next;
        ops[o].first = 0;
        next += ops[o].sched->nsteps;
        for (int i = 0; i < ops[o].sched->nsteps; i++)
            job->lagged |= ops[o].sched->steps[i].lag != 0;
        size_t r = sched_rounds(ops[o].sched, ops[o].elem_size, slot_bytes);
        if (r > job->rounds)
            job->rounds = r;
    }
    return CCL_SUCCESS;
}

/* Marks step st pending: later users of its connections, in this round and
 * the later ones of the window, wait behind it. */
static void eng_block_conns(eng_job_t *job, const sched_step_t *st)
{
    unsigned char *send_blocked = job->blocked;
    unsigned char *recv_blocked = send_blocked + job->nranks;
    if (st->recv_peer >= 0)
        recv_blocked[st->recv_peer] = 1;
    if (st->send_peer >= 0)
        send_blocked[st->send_peer] = 1;
}

static int eng_conn_blocked(const eng_job_t *job, const sched_step_t *st)
{
    const unsigned char *send_blocked = job->blocked;
    const unsigned char *recv_blocked = send_blocked + job->nranks;
    return (st->recv_peer >= 0 && recv_blocked[st->recv_peer]) ||
           (st->send_peer >= 0 && send_blocked[st->send_peer]);
}

static inline int window_alone(const eng_job_t *job, const eng_op_t *op, int track)
{
    return !track && job->nops == 1 && !op->sched->steps_independent;
}

/* Round k of operation o: tries every step that has a slice to run in it.
 * Returns the number of steps left pending, or -1 when `try` failed. */
static int eng_round(eng_job_t *job, int o, size_t k, int first_round, int track, eng_try_fn try, void *ctx,
                     eng_sweep_t *out)
{
    eng_op_t *op = &job->ops[o];
    const sched_t *s = op->sched;
    int pending = 0;
    /* op->first skips what is done in the current round only. */
    int all_done_so_far = first_round;
    /* The first slice that some earlier step of o has not run yet (and
     * has): a step may run slice x only below it, as it depends on slice x
     * of the steps before it. Steps before op->first have run this round's
     * slices, and their lags are no larger, so they cannot lower it. */
    size_t lim = SIZE_MAX;
    for (int i = first_round ? op->first : 0; i < s->nsteps; i++) {
        const sched_step_t *st = &s->steps[i];
        size_t n = sched_step_slices(st, op->elem_size, job->slot_bytes);
        size_t x = k - st->lag; /* the slice of round k, if k >= lag */
        if (k < st->lag || x >= n || op->next[i] > x) {
            if (all_done_so_far)
                op->first = i + 1;
        } else if (window_alone(job, op, track) && x >= lim) {
            /* Alone, one round at a time, in order and without lags:
             * nothing after a pending step can run, and no one needs to
             * know its connections. */
            return pending + 1;
        } else {
            /* Slices of one step run in order; slice x waits for slice x
             * of the steps before it. */
            int dep = op->next[i] < x || (!s->steps_independent && x >= lim) ||
                      (track && eng_conn_blocked(job, st));
            int rc = 0;
            if (!dep) {
                rc = try(ctx, o, st, x);
                if (rc < 0)
                    return -1;
                if (rc > 0) {
                    op->next[i] = x + 1;
                    out->ran++;
                    if (all_done_so_far)
                        op->first = i + 1;
                } else {
                    if (out->wait_op < 0) {
                        out->wait_op = o;
                        out->wait_step = i;
                    }
                    out->nwaiting++;
                }
            }
            if (rc == 0) {
                all_done_so_far = 0;
                pending++;
                if (track)
                    eng_block_conns(job, st);
            }
        }
        if (!s->steps_independent && op->next[i] < n && op->next[i] < lim)
            lim = op->next[i];
    }
    return pending;
}

int eng_sweep(eng_job_t *job, eng_try_fn try, void *ctx, eng_sweep_t *out)
{
    out->ran = 0;
    out->wait_op = out->wait_step = -1;
    out->nwaiting = 0;
    size_t window = job->window ? job->window : 1;
    /* One operation alone, one round at a time, never shares a connection
     * with another step in flight (each schedule uses a connection at most
     * once per step, and in step order unless its steps are independent of
     * each other, in which case each peer's connection appears once): only
     * groups, windows and lags need the per-connection bookkeeping. */
    int track = job->nops > 1 || window > 1 || job->lagged;
    while (job->round < job->rounds) {
        int pending_first = 0;
        if (track)
            memset(job->blocked, 0, 2 * (size_t)job->nranks);
        size_t last = job->rounds - job->round > window ? job->round + window : job->rounds;
        for (size_t k = job->round; k < last; k++) {
            for (int o = 0; o < job->nops; o++) {
                int p = eng_round(job, o, k, k == job->round, track, try, ctx, out);
                if (p < 0)
                    return -1;
                if (k == job->round)
                    pending_first += p;
            }
        }
        if (pending_first)
            return 0;
        job->round++;
        for (int o = 0; o < job->nops; o++)
            job->ops[o].first = 0;
    }
    return 0;
}

int eng_static_next(const sched_t *s, size_t elem_size, size_t slot_bytes, size_t rounds, size_t *round,
                    int *step)
{
    for (;;) {
        if (++*step >= s->nsteps) {
            *step = 0;
            ++*round;
        }
        if (*round >= rounds || s->nsteps == 0)
            return 0;
        if (*round < sched_step_slices(&s->steps[*step], elem_size, slot_bytes))
            return 1;
    }
}
