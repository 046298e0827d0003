/*
 * dev_stream.h - calls on device buffers staged through pinned host memory,
 * and queued on CUDA streams.
 */
#ifndef CCL_CORE_DEV_STREAM_H
#define CCL_CORE_DEV_STREAM_H

#include "core/communicator.h"

/* dev_stream.c: device buffers (staged through pinned host memory). Sets
 * the dev_* flags of a checked call; CCL_SUCCESS or the refusal (device
 * buffers on a ccl host stream, a CUDA stream where CUDA cannot run). Host
 * pointers in a process without the CUDA driver cost ~15 ns here. */
ccl_result_t dstream_classify(coll_args_t *args, ccl_stream_t stream, const char *name);
/* Whether a stream passed to a collective is a CUDA stream (not NULL and
 * not a ccl host stream). */
int dstream_is_cuda(ccl_stream_t stream);
/* Runs calls now, like coll_run, staging the device buffers among them
 * (NULL stream: blocks until the results are in device memory). */
ccl_result_t dstream_run(const coll_args_t *calls, int ncalls);
/* Queues calls on a CUDA stream and returns at once; takes over their
 * pending counts, as stream_enqueue does. */
ccl_result_t dstream_enqueue(ccl_stream_t stream, const coll_args_t *calls, int ncalls);

#endif
