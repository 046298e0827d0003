/*
 * schedule.c - the schedule container and helpers shared by all algorithms.
 */
#include "algos/schedule.h"
#include "base/err.h"

#include <stdlib.h>

/* Parts start on 64-byte boundaries so SIMD reductions and copies run on
 * aligned, whole cache lines in every part but the last. */
#define SCHED_ALIGN_BYTES 64

ccl_result_t sched_reserve(sched_t *s, int nsteps)
{
    if (s->nsteps + nsteps <= s->cap)
        return CCL_SUCCESS;
    int cap = s->cap ? s->cap : 16;
    while (cap < s->nsteps + nsteps)
        cap *= 2;
    sched_step_t *steps = realloc(s->steps, (size_t)cap * sizeof *steps);
    if (!steps)
        return err_set(CCL_ERR_SYSTEM, "out of memory for a %d-step schedule", cap);
    s->steps = steps;
    s->cap = cap;
    return CCL_SUCCESS;
}

sched_step_t *sched_add(sched_t *s)
{
    sched_step_t *st = &s->steps[s->nsteps++];
    *st = (sched_step_t){.recv_peer = -1, .send_peer = -1};
    return st;
}

sched_step_t *sched_add_step(sched_t *s, int action, int recv_peer, int send_peer, int src_buf, int dst_buf,
                             size_t off, size_t count, unsigned flags)
{
    sched_step_t *st = sched_add(s);
    st->action = (unsigned char)action;
    st->flags = (unsigned char)flags;
    st->recv_peer = recv_peer;
    st->send_peer = send_peer;
    st->src_buf = (unsigned char)src_buf;
    st->dst_buf = (unsigned char)dst_buf;
    st->src_off = st->dst_off = off;
    st->count = count;
    return st;
}

void sched_reset(sched_t *s, int send_refs_safe_in_place, int steps_independent, int no_refs)
{
    s->nsteps = 0;
    s->send_refs_safe_in_place = send_refs_safe_in_place;
    s->steps_independent = steps_independent;
    s->no_refs = no_refs;
}

void sched_mark_sole_sends(sched_t *s)
{
    /* Quadratic, but executors only ask for schedules whose steps span
     * several slots, i.e. calls of megabytes. */
    for (int i = 0; i < s->nsteps; i++) {
        int p = s->steps[i].send_peer, n = 0;
        for (int j = 0; p >= 0 && j < s->nsteps && n < 2; j++)
            n += s->steps[j].send_peer == p;
        if (n == 1)
            s->steps[i].flags |= SCHED_SOLE_SEND;
    }
}

void sched_free(sched_t *s)
{
    free(s->steps);
    *s = (sched_t){0};
}

const char *sched_action_name(int action)
{
    static const char *names[SCHED_NUM_ACTIONS] = {
        "SEND", "RECV", "COPY", "RECV_REDUCE_SEND", "RECV_REDUCE_COPY",
        "RECV_COPY_SEND", "RECV_REDUCE_COPY_SEND", "LOCAL_REDUCE",
    };
    return (action >= 0 && action < SCHED_NUM_ACTIONS) ? names[action] : "?";
}

void sched_partition(size_t count, size_t elem_size, int nparts, int k, size_t *off, size_t *len)
{
    size_t align = SCHED_ALIGN_BYTES / elem_size;
    size_t per = (count + (size_t)nparts - 1) / (size_t)nparts;
    per = (per + align - 1) / align * align;
    size_t start = per * (size_t)k;
    if (start > count)
        start = count;
    size_t end = start + per;
    if (end > count)
        end = count;
    *off = start;
    *len = end - start;
}

size_t sched_rounds(const sched_t *s, size_t elem_size, size_t slot_bytes)
{
    size_t rounds = 0;
    for (int i = 0; i < s->nsteps; i++) {
        size_t n = sched_step_slices(&s->steps[i], elem_size, slot_bytes);
        if (n > 0 && n + s->steps[i].lag > rounds)
            rounds = n + s->steps[i].lag;
    }
    return rounds;
}

const char *sched_coll_name(sched_coll_t coll)
{
    static const char *names[SCHED_NUM_COLLS] = {
        "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce",
        "alltoall", "gather", "scatter", "send", "recv",
    };
    return (unsigned)coll < SCHED_NUM_COLLS ? names[coll] : "?";
}

void sched_op_extent(const sched_op_t *op, size_t *send_elems, size_t *recv_elems)
{
    size_t c = op->count, all = c * (size_t)op->nranks;
    int root = op->rank == op->root;
    size_t s = c, r = c;
    switch (op->coll) {
    case SCHED_ALLREDUCE: break;
    case SCHED_ALLGATHER: r = all; break;
    case SCHED_REDUCE_SCATTER: s = all; break;
    case SCHED_BROADCAST: s = root ? c : 0; break;
    case SCHED_REDUCE: r = root ? c : 0; break;
    case SCHED_ALLTOALL: s = r = all; break;
    case SCHED_GATHER: r = root ? all : 0; break;
    case SCHED_SCATTER: s = root ? all : 0; break;
    case SCHED_P2P_SEND: r = 0; break;
    case SCHED_P2P_RECV: s = 0; break;
    default: s = r = 0; break;
    }
    *send_elems = s;
    *recv_elems = r;
}
