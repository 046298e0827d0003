/*
 * stream.h - ccl host streams: a worker thread per stream runs the
 * calls queued on it, in order.
 */
#ifndef CCL_CORE_STREAM_H
#define CCL_CORE_STREAM_H

#include "core/communicator.h"

/* stream.c: the stream takes a copy of the calls (one call or a group). */
int stream_is_host(ccl_stream_t stream);
ccl_result_t stream_enqueue(ccl_stream_t stream, const coll_args_t *calls, int ncalls);
/* The staged device path queues its jobs in two steps, so that it can hold
 * a job before it commits the CUDA stream to waiting for it. On the
 * worker, `before` runs first (an error skips the calls and is recorded on
 * their comms), then the calls, then `after` with the result, always. */
typedef struct {
    ccl_result_t (*before)(void *arg);
    void (*after)(void *arg, ccl_result_t res);
    void *arg;
} stream_hooks_t;
typedef struct stream_op stream_op_t;
/* NULL when out of memory (message set); the calls keep their pending counts. */
stream_op_t *stream_op_new(ccl_stream_t stream, const coll_args_t *calls, int ncalls, const stream_hooks_t *hooks);
void stream_op_submit(ccl_stream_t stream, stream_op_t *op);
/* An op made but never submitted goes back (or is freed). */
void stream_op_discard(ccl_stream_t stream, stream_op_t *op);

#endif
