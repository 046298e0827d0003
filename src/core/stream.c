/*
 * stream.c - host streams: a worker thread per stream runs queued
 * collectives in order, so host collectives can overlap with computation.
 *
 * The semantics mirror a CUDA stream: enqueue returns at once, work runs in
 * submission order, synchronize waits and reports the first error. A stream
 * may carry calls of several communicators.
 */
#include "core/comm.h"
#include "core/err.h"
#include "core/handle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One queued call, or a group's calls run together, with the hooks of
 * the staged device path (dev_stream.c) around them. */
struct stream_op {
    struct stream_op *next;
    stream_hooks_t hooks;
    int ncalls;
    coll_args_t calls[];
};

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work;  /* queue became non-empty or stop */
    pthread_cond_t idle;  /* queue drained */
    stream_op_t *head, *tail;
    int busy, stop;
    ccl_result_t first_error;
    char error_msg[COMM_ERR_MAX];
} host_stream_t;

static handle_set_t stream_live = HANDLE_SET_INIT;

int stream_is_host(ccl_stream_t stream)
{
    return stream && handle_contains(&stream_live, stream);
}

static void *stream_main(void *p)
{
    host_stream_t *s = p;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->work, &s->lock);
        if (!s->head)
            break;
        stream_op_t *op = s->head;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        s->busy = 1;
        pthread_mutex_unlock(&s->lock);

        ccl_result_t res = op->hooks.before ? op->hooks.before(op->hooks.arg) : CCL_SUCCESS;
        if (res == CCL_SUCCESS)
            res = coll_run(op->calls, op->ncalls);
        else
            for (int i = 0; i < op->ncalls; i++)
                comm_record_error(op->calls[i].comm);
        if (op->hooks.after)
            op->hooks.after(op->hooks.arg, res);

        pthread_mutex_lock(&s->lock);
        if (res != CCL_SUCCESS && s->first_error == CCL_SUCCESS) {
            s->first_error = res;
            snprintf(s->error_msg, sizeof s->error_msg, "%s", err_message());
        }
        s->busy = 0;
        if (!s->head)
            pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->lock);
        for (int i = 0; i < op->ncalls; i++) /* last touch: destroy may free the comm now */
            comm_pending_done(op->calls[i].comm);
        free(op);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

stream_op_t *stream_op_new(const coll_args_t *calls, int ncalls, const stream_hooks_t *hooks)
{
    stream_op_t *op = malloc(sizeof *op + (size_t)ncalls * sizeof op->calls[0]);
    if (!op) {
        err_set(CCL_ERR_SYSTEM, "out of memory queueing %d calls", ncalls);
        return NULL;
    }
    memcpy(op->calls, calls, (size_t)ncalls * sizeof op->calls[0]);
    op->ncalls = ncalls;
    op->next = NULL;
    op->hooks = hooks ? *hooks : (stream_hooks_t){NULL, NULL, NULL};
    return op;
}

void stream_op_submit(ccl_stream_t stream, stream_op_t *op)
{
    host_stream_t *s = stream;
    pthread_mutex_lock(&s->lock);
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
}

ccl_result_t stream_enqueue(ccl_stream_t stream, const coll_args_t *calls, int ncalls)
{
    stream_op_t *op = stream_op_new(calls, ncalls, NULL);
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
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->idle);
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
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->idle);
    free(s);
    return res;
}
