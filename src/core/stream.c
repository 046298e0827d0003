/*
 * stream.c - host streams: a worker thread per stream runs queued
 * collectives in order, so host collectives can overlap with computation.
 *
 * The semantics mirror a CUDA stream: enqueue returns at once, work runs in
 * submission order, synchronize waits and reports the first error. A stream
 * may carry calls of several communicators.
 */
#include "core/comm_state.h"
#include "core/coll_run.h"
#include "core/stream.h"
#include "base/err.h"
#include "core/handle.h"
#include "base/param.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One queued call, or a group's calls run together, with the hooks of
 * the staged device path (dev_stream.c) around them. */
struct stream_op {
    struct stream_op *next;
    stream_hooks_t hooks;
    int ncalls;
    int in_slab; /* one of the stream's preallocated ops: never freed alone */
    coll_args_t calls[];
};

/* Single-call ops a stream keeps for reuse. A loop that queues calls
 * faster than they run would otherwise grow the heap into fresh pages
 * call after call (a first touch costs ~10 us on these VMs); recycled ops
 * stay warm. The queue's depth is bounded (CCL_STREAM_DEPTH) for the same
 * reason, as CUDA bounds its launch queue: 100000 8-byte calls queued at
 * once took ~5000 page faults more than the same calls made blocking. A
 * full queue's enqueuer waits until the worker takes the queue, so it
 * queues many calls per wake-up. */
#define STREAM_SPARE_OPS 4096
/* Single-call ops made, and touched, when the stream is created: as many
 * as can be in flight (a queue the worker has taken and a full one behind
 * it), up to the spare cap. Grown on demand instead, the first loop of
 * 1000 queued 8-byte broadcasts faulted in ~40 fresh pages and ran at
 * 0.8-1.1 us a call, the same loop again at 0.26-0.34. */
#define STREAM_OP_BYTES (sizeof(stream_op_t) + sizeof(coll_args_t))

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work;  /* queue became non-empty or stop */
    pthread_cond_t idle;  /* queue drained */
    pthread_cond_t room;  /* the worker took the queue: there is room again */
    stream_op_t *head, *tail;
    int queued, depth, room_waiters;
    stream_op_t *spare;   /* single-call ops to reuse */
    int nspare;
    void *slab;           /* the preallocated ops */
    int busy, stop;
    int worker_waits;     /* the worker sleeps on `work` (under the lock) */
    ccl_result_t first_error;
    char error_msg[COMM_ERR_MAX];
} host_stream_t;

static handle_set_t stream_live = HANDLE_SET_INIT;

static __thread handle_memo_t stream_memo;

int stream_is_host(ccl_stream_t stream)
{
    return stream && handle_contains_memo(&stream_live, &stream_memo, stream);
}

/* Runs one queued op; a failure is recorded as the stream's first error. */
static void stream_run_op(host_stream_t *s, stream_op_t *op)
{
    ccl_result_t res = op->hooks.before ? op->hooks.before(op->hooks.arg) : CCL_SUCCESS;
    if (res == CCL_SUCCESS)
        res = coll_run_owned(op->calls, op->ncalls);
    else
        for (int i = 0; i < op->ncalls; i++)
            comm_record_error(op->calls[i].comm);
    if (op->hooks.after)
        op->hooks.after(op->hooks.arg, res);
    if (res != CCL_SUCCESS) {
        pthread_mutex_lock(&s->lock);
        if (s->first_error == CCL_SUCCESS) {
            s->first_error = res;
            snprintf(s->error_msg, sizeof s->error_msg, "%s", err_message());
        }
        pthread_mutex_unlock(&s->lock);
    }
    for (int i = 0; i < op->ncalls; i++) /* last touch: destroy may free the comm now */
        comm_pending_done(op->calls[i].comm);
}

/* The worker takes the whole queue at once and runs it without the lock:
 * taking the lock once per call made the enqueuing thread and the worker
 * fight over it (a quarter of the time of a loop of 8-byte calls). */
static void *stream_main(void *p)
{
    host_stream_t *s = p;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stop) {
            s->worker_waits = 1;
            pthread_cond_wait(&s->work, &s->lock);
            s->worker_waits = 0;
        }
        if (!s->head)
            break;
        stream_op_t *batch = s->head;
        s->head = s->tail = NULL;
        s->queued = 0;
        if (s->room_waiters)
            pthread_cond_broadcast(&s->room);
        s->busy = 1;
        pthread_mutex_unlock(&s->lock);

        stream_op_t *spare = NULL, *spare_last = NULL;
        int nspare = 0;
        while (batch) {
            stream_op_t *op = batch;
            batch = op->next;
            stream_run_op(s, op);
            if (op->ncalls == 1) {
                op->next = spare;
                spare = op;
                spare_last = spare_last ? spare_last : op;
                nspare++;
            } else {
                free(op);
            }
        }

        pthread_mutex_lock(&s->lock);
        s->busy = 0;
        if (!s->head)
            pthread_cond_broadcast(&s->idle);
        if (spare && s->nspare + nspare <= STREAM_SPARE_OPS) {
            spare_last->next = s->spare;
            s->spare = spare;
            s->nspare += nspare;
            spare = NULL;
        }
        pthread_mutex_unlock(&s->lock);
        while (spare) { /* over the cap: rare, outside the lock */
            stream_op_t *op = spare;
            spare = op->next;
            stream_op_discard(s, op); /* frees it, unless it is the slab's (those fit under the cap) */
        }
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Under the lock: a single-call op to reuse, or NULL. */
static stream_op_t *stream_pop_spare(host_stream_t *s)
{
    stream_op_t *op = s->spare;
    if (op) {
        s->spare = op->next;
        s->nspare--;
    }
    return op;
}

static void stream_op_fill(stream_op_t *op, const coll_args_t *calls, int ncalls, const stream_hooks_t *hooks)
{
    memcpy(op->calls, calls, (size_t)ncalls * sizeof op->calls[0]);
    op->ncalls = ncalls;
    op->next = NULL;
    op->hooks = hooks ? *hooks : (stream_hooks_t){NULL, NULL, NULL};
}

stream_op_t *stream_op_new(ccl_stream_t stream, const coll_args_t *calls, int ncalls, const stream_hooks_t *hooks)
{
    host_stream_t *s = stream;
    stream_op_t *op = NULL;
    if (ncalls == 1) {
        pthread_mutex_lock(&s->lock);
        op = stream_pop_spare(s);
        pthread_mutex_unlock(&s->lock);
    }
    if (!op) {
        op = malloc(sizeof *op + (size_t)ncalls * sizeof op->calls[0]);
        if (op)
            op->in_slab = 0;
    }
    if (!op) {
        err_set(CCL_ERR_SYSTEM, "out of memory queueing %d calls", ncalls);
        return NULL;
    }
    stream_op_fill(op, calls, ncalls, hooks);
    return op;
}

void stream_op_discard(ccl_stream_t stream, stream_op_t *op)
{
    host_stream_t *s = stream;
    if (!op)
        return;
    if (!op->in_slab) {
        free(op);
        return;
    }
    pthread_mutex_lock(&s->lock);
    op->next = s->spare;
    s->spare = op;
    s->nspare++;
    pthread_mutex_unlock(&s->lock);
}

/* Under the lock: waits for room, then appends. */
static void stream_append(host_stream_t *s, stream_op_t *op)
{
    while (s->depth > 0 && s->queued >= s->depth) {
        s->room_waiters++;
        pthread_cond_wait(&s->room, &s->lock);
        s->room_waiters--;
    }
    s->queued++;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    /* Only a worker that waits needs the signal; while it runs a batch,
     * the signal's own atomics were a sixth of an 8-byte call's enqueue. */
    if (s->worker_waits)
        pthread_cond_signal(&s->work);
}

void stream_op_submit(ccl_stream_t stream, stream_op_t *op)
{
    host_stream_t *s = stream;
    pthread_mutex_lock(&s->lock);
    stream_append(s, op);
    pthread_mutex_unlock(&s->lock);
}

ccl_result_t stream_enqueue(ccl_stream_t stream, const coll_args_t *calls, int ncalls)
{
    host_stream_t *s = stream;
    /* A single call with a spare op: one trip through the lock, not two. */
    if (ncalls == 1) {
        pthread_mutex_lock(&s->lock);
        stream_op_t *op = stream_pop_spare(s);
        if (op) {
            stream_op_fill(op, calls, 1, NULL);
            stream_append(s, op);
            pthread_mutex_unlock(&s->lock);
            return CCL_SUCCESS;
        }
        pthread_mutex_unlock(&s->lock);
    }
    stream_op_t *op = stream_op_new(stream, calls, ncalls, NULL);
    if (!op) {
        for (int i = 0; i < ncalls; i++)
            comm_pending_done(calls[i].comm);
        return CCL_ERR_SYSTEM;
    }
    stream_op_submit(stream, op);
    return CCL_SUCCESS;
}

CCL_API ccl_result_t ccl_stream_create(ccl_stream_t *stream)
{
    ccl_result_t res = CCL_SUCCESS;
    err_clear();
    if (!stream)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_stream_create: stream is NULL");
    host_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(CCL_ERR_SYSTEM, "out of memory for a stream");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->idle, NULL);
    pthread_cond_init(&s->room, NULL);
    int64_t depth = param_int(PARAM_STREAM_DEPTH);
    s->depth = depth > 0 && depth < INT_MAX ? (int)depth : 0;
    int nslab = s->depth > 0 && s->depth < STREAM_SPARE_OPS / 2 ? 2 * s->depth : STREAM_SPARE_OPS;
    s->slab = malloc((size_t)nslab * STREAM_OP_BYTES);
    if (!s->slab)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for a stream's %d queued calls", nslab);
    memset(s->slab, 0, (size_t)nslab * STREAM_OP_BYTES); /* touched now, not while queueing */
    for (int i = nslab - 1; i >= 0; i--) {
        stream_op_t *op = (stream_op_t *)((char *)s->slab + (size_t)i * STREAM_OP_BYTES);
        op->in_slab = 1;
        op->next = s->spare;
        s->spare = op;
    }
    s->nspare = nslab;
    int rc = pthread_create(&s->thread, NULL, stream_main, s);
    if (rc != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "cannot start the stream thread: %s", strerror(rc));
    if (handle_add(&stream_live, s, 0) != 0) {
        pthread_mutex_lock(&s->lock);
        s->stop = 1;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->thread, NULL);
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    }
    *stream = s;
    s = NULL;
out:
    if (s) {
        free(s->slab);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->idle);
        pthread_cond_destroy(&s->room);
        free(s);
    }
    return res;
}

CCL_API ccl_result_t ccl_stream_synchronize(ccl_stream_t stream)
{
    err_clear();
    if (!stream_is_host(stream))
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_stream_synchronize: not a live ccl host stream");
    host_stream_t *s = stream;
    pthread_mutex_lock(&s->lock);
    while (s->head || s->busy)
        pthread_cond_wait(&s->idle, &s->lock);
    ccl_result_t res = s->first_error;
    if (res != CCL_SUCCESS) {
        err_set(res, "%s", s->error_msg);
        s->first_error = CCL_SUCCESS; /* reported once, like a CUDA stream's sticky error is not */
    }
    pthread_mutex_unlock(&s->lock);
    return res;
}

CCL_API ccl_result_t ccl_stream_query(ccl_stream_t stream)
{
    err_clear();
    if (!stream_is_host(stream))
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_stream_query: not a live ccl host stream");
    host_stream_t *s = stream;
    pthread_mutex_lock(&s->lock);
    ccl_result_t res = (s->head || s->busy) ? CCL_IN_PROGRESS : s->first_error;
    pthread_mutex_unlock(&s->lock);
    return res;
}

CCL_API ccl_result_t ccl_stream_destroy(ccl_stream_t stream)
{
    err_clear();
    if (!stream || !handle_remove(&stream_live, stream, NULL))
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_stream_destroy: not a live ccl host stream");
    host_stream_t *s = stream;
    pthread_mutex_lock(&s->lock);
    s->stop = 1; /* the worker drains the queue first, then exits */
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    ccl_result_t res = s->first_error;
    if (res != CCL_SUCCESS)
        err_set(res, "%s", s->error_msg);
    while (s->spare) {
        stream_op_t *op = s->spare;
        s->spare = op->next;
        if (!op->in_slab)
            free(op);
    }
    free(s->slab);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->room);
    free(s);
    return res;
}
