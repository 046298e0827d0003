/*
 * cuda_rt.h - what the rest of ccl asks of the CUDA runtime: is CUDA usable
 * here, is a pointer device memory, pinned host memory, events, copies and
 * the kernel that holds a stream for the host.
 *
 * Plain C, no CUDA types (streams and events are void *), and the same
 * declarations in every build: a build without CUDA (CUDA=0, or no nvcc)
 * answers "not built with CUDA" and fails the rest with
 * CCL_ERR_UNSUPPORTED, so callers need no #ifdef.
 *
 * Cost for host-only users is the point of dev_cuda_loaded(): no pointer
 * can be device memory unless the CUDA driver is loaded in the process, and
 * asking the loader that costs ~15 ns and initialises nothing. Only when
 * the driver is there does ccl initialise its CUDA runtime and ask
 * cudaPointerGetAttributes.
 */
#ifndef CCL_DEVICE_CUDA_RT_H
#define CCL_DEVICE_CUDA_RT_H

#include "ccl.h"

#include <stddef.h>
#include <stdint.h>

/* 1 when this library was compiled with CUDA. */
int dev_cuda_built(void);
/* 1 when libcuda (the driver) is loaded in this process: cheap, and until
 * then no pointer is device memory. Initialises nothing. */
int dev_cuda_loaded(void);
/* 1 when CUDA runs here (driver and at least one GPU). The first call
 * initialises ccl's CUDA runtime; the answer is kept. When 0 and why is not
 * NULL, *why says what is missing ("no CUDA driver: ...", "no GPU: ...",
 * "this build has no CUDA support ..."). */
int dev_cuda_usable(const char **why);
/* 1 when ptr is device or managed memory. Host memory, pinned host memory
 * and anything CUDA does not know are 0, and so is everything while the
 * driver is not loaded or CUDA is not usable. */
int dev_ptr_is_device(const void *ptr);

/* Pinned host memory, mapped into every device's address space (the GPU
 * reads it in place, e.g. a flag) and usable from every device. */
ccl_result_t dev_host_alloc(void **ptr, size_t bytes);
void dev_host_free(void *ptr);

/* Events for ordering the host against a stream (timing disabled). */
ccl_result_t dev_event_create(void **event);
void dev_event_destroy(void *event);
ccl_result_t dev_event_record(void *event, void *stream);
/* Blocks the calling thread until the event's work is done (an event never
 * recorded is done). */
ccl_result_t dev_event_sync(void *event);
/* 1 when the event's work is done (or it was never recorded), 0 while it
 * is pending, -1 on error (message set). Does not block. */
int dev_event_done(void *event);

/* Copies between any two kinds of memory (unified addressing): on the
 * stream, returning at once; or now, returning when done. */
ccl_result_t dev_copy_async(void *dst, const void *src, size_t bytes, void *stream);
ccl_result_t dev_copy_sync(void *dst, const void *src, size_t bytes);
/* Holds the stream until *flag (dev_host_alloc memory) reaches target
 * (serial-number comparison). The driver's stream wait
 * (cuStreamWaitValue32) does it without occupying the GPU; with
 * use_kernel, or where the driver refuses it, the polling kernel of
 * wait_cuda.cu does. */
ccl_result_t dev_stream_hold(volatile uint32_t *flag, uint32_t target, void *stream, int use_kernel);
/* The calling thread's current device, -1 when CUDA is not usable. */
int dev_current_device(void);
/* The device a stream belongs to (cudaStreamGetDevice), -1 on failure
 * (message set). */
int dev_stream_device(void *stream);

#endif
