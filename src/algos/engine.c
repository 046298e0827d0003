/*
 * engine.c - which slice runs next (rules in engine.h).
 */
#include "algos/engine.h"
#include "core/err.h"

#include <stdlib.h>
#include <string.h>

ccl_result_t eng_job_setup(eng_job_t *job, eng_op_t *ops, int nops, int nranks, size_t slot_bytes,
                           void **arena, size_t *cap)
{
    size_t nsteps = 0;
    for (int o = 0; o < nops; o++)
        nsteps += (size_t)ops[o].sched->nsteps;
    size_t need = nsteps * sizeof(size_t) + (size_t)nops + 2 * (size_t)nranks;
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
    job->blocked = (unsigned char *)(next + nsteps);
    for (int o = 0; o < nops; o++) {
        ops[o].next = next;
        ops[o].first = 0;
        next += ops[o].sched->nsteps;
        size_t r = sched_rounds(ops[o].sched, ops[o].elem_size, slot_bytes);
        if (r > job->rounds)
            job->rounds = r;
    }
    return CCL_SUCCESS;
}

int eng_sweep(eng_job_t *job, eng_try_fn try, void *ctx, eng_sweep_t *out)
{
    out->ran = 0;
    out->wait_op = out->wait_step = -1;
    out->nwaiting = 0;
    unsigned char *op_blocked = job->blocked;
    unsigned char *send_blocked = op_blocked + job->nops;
    unsigned char *recv_blocked = send_blocked + job->nranks;
    /* One operation alone never shares a connection within a round with
     * another (each schedule uses a connection at most once per step, and
     * in step order unless its steps are independent of each other, in
     * which case each peer's connection appears once): only groups need
     * the per-connection bookkeeping. */
    int track = job->nops > 1;
    while (job->round < job->rounds) {
        size_t k = job->round;
        int pending = 0;
        memset(job->blocked, 0, (size_t)job->nops + (track ? 2 * (size_t)job->nranks : 0));
        for (int o = 0; o < job->nops; o++) {
            eng_op_t *op = &job->ops[o];
            const sched_t *s = op->sched;
            int all_done_so_far = 1;
            for (int i = op->first; i < s->nsteps; i++) {
                const sched_step_t *st = &s->steps[i];
                if (op->next[i] > k || k >= sched_step_slices(st, op->elem_size, job->slot_bytes)) {
                    if (all_done_so_far)
                        op->first = i + 1;
                    continue;
                }
                /* Alone and in order: nothing after a pending step can run,
                 * and no other operation needs to know its connections. */
                if (job->nops == 1 && !s->steps_independent && op_blocked[o]) {
                    pending++;
                    break;
                }
                int rp = st->recv_peer, sp = st->send_peer;
                int dep = (!s->steps_independent && op_blocked[o]) ||
                          (track && ((rp >= 0 && recv_blocked[rp]) || (sp >= 0 && send_blocked[sp])));
                if (!dep) {
                    int rc = try(ctx, o, st, k);
                    if (rc < 0)
                        return -1;
                    if (rc > 0) {
                        op->next[i] = k + 1;
                        out->ran++;
                        if (all_done_so_far)
                            op->first = i + 1;
                        continue;
                    }
                    if (out->wait_op < 0) {
                        out->wait_op = o;
                        out->wait_step = i;
                    }
                    out->nwaiting++;
                }
                /* Pending: later steps of this operation and later users
                 * of its connections wait behind it. */
                all_done_so_far = 0;
                pending++;
                op_blocked[o] = 1;
                if (track && rp >= 0)
                    recv_blocked[rp] = 1;
                if (track && sp >= 0)
                    send_blocked[sp] = 1;
            }
        }
        if (pending)
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
