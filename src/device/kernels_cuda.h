/*
 * kernels_cuda.h - the C entry points of the CUDA kernels (reduce_cuda.cu,
 * copy_cuda.cu, wait_cuda.cu), for the executors and the GPU tests.
 *
 * Plain C with no CUDA types, so core code includes it without the CUDA
 * headers: a stream is a cudaStream_t passed as void *. Each call enqueues
 * one kernel on that stream and returns at once; a launch failure is
 * CCL_ERR_CUDA with the CUDA error in the message. Only a CUDA build
 * (CCL_HAVE_CUDA) defines these; the rest of the library reaches the GPU
 * through cuda_rt.h, which works in both builds.
 *
 * The reduction is elementwise over up to DEV_CUDA_MAX_SRCS inputs into one
 * or two outputs, which covers the schedule's fused primitives in one pass:
 *   RECV_REDUCE_SEND         srcs {in, own}     -> dsts {slot}
 *   RECV_REDUCE_COPY         srcs {in, own}     -> dsts {user}
 *   RECV_REDUCE_COPY_SEND    srcs {in, own}     -> dsts {user, slot}
 *   LOCAL_REDUCE, one-shot   srcs {r0 .. rN-1}  -> dsts {user}
 * and a copy into one or two outputs covers COPY and RECV_COPY_SEND. The
 * operators are reduce_ops.h's (the host path's own definitions), applied
 * in source order with the storage type's rounding after each one, so a
 * kernel gives the host path's bits exactly.
 */
#ifndef CCL_DEVICE_KERNELS_CUDA_H
#define CCL_DEVICE_KERNELS_CUDA_H

#include "ccl.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DEV_CUDA_MAX_SRCS 8

typedef struct {
    ccl_datatype_t dtype;
    ccl_redop_t op;    /* CCL_SUM, PROD, MAX, MIN or AVG (sum, then the division) */
    int nsrc;          /* 1..DEV_CUDA_MAX_SRCS */
    const void *src[DEV_CUDA_MAX_SRCS];
    int ndst;          /* 1 or 2; a destination may be a source (in place) */
    void *dst[2];
    size_t count;      /* elements */
    /* CCL_AVG: divide the result by this many ranks (no division when
     * below 2); the last step of an average only. */
    int avg_ranks;
    /* Premulsum: src[0], this rank's own input, is first multiplied by
     * *premul (one element of dtype, host memory, read at the call); NULL
     * for none. */
    const void *premul;
} dev_cuda_reduce_t;

/* Enqueues dst[k][i] = op(src[0][i], .., src[nsrc-1][i]) for k < ndst. */
ccl_result_t dev_cuda_reduce(const dev_cuda_reduce_t *r, void *stream);
/* CCL_ERR_INTERNAL (message set) when r breaks the contract above: dtype
 * or op out of range, sources or destinations out of bounds
 * (kernels_cuda_check.c, every build; each dev_cuda_reduce calls it). */
ccl_result_t dev_cuda_reduce_check(const dev_cuda_reduce_t *r);
/* Enqueues a copy of bytes from src into dst and, when dst2 is not NULL,
 * into dst2 as well (one read, two writes). */
ccl_result_t dev_cuda_copy(void *dst, void *dst2, const void *src, size_t bytes, void *stream);
/* Enqueues a kernel that holds the stream until *flag, which the host
 * writes (pinned, mapped host memory), has reached target: seen as
 * serial numbers, (int32_t)(*flag - target) >= 0. */
ccl_result_t dev_cuda_wait_flag(volatile uint32_t *flag, uint32_t target, void *stream);
/* Loads every kernel above on the current device now. CUDA loads kernels
 * lazily by default (CUDA_MODULE_LOADING=LAZY, since 12.2), at their first
 * launch, and loading may synchronise the whole context: a first launch
 * queued while a stream of the process is held (a staged call's hold
 * waiting for its worker, a user's host function) then waits for that
 * stream, which may wait for the caller, forever. Seen on an H200: a
 * P2P call's first kernel behind a held stream never returned. Callers go
 * through dev_kernels_ready (cuda_rt.h), once per device. */
ccl_result_t dev_cuda_load_kernels(void);

#ifdef __cplusplus
}
#endif
#endif
