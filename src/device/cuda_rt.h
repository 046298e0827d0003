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
#include "base/clock.h"

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* 1 when this library was compiled with CUDA. */
int dev_cuda_built(void);
/* 1 when libcuda (the driver) is loaded in this process: cheap, and until
 * then no pointer is device memory. Initialises nothing. Every host call
 * asks, so the common answer is inline: "loaded", or "not loaded, and
 * already looked in this tick" (cuda_rt.c says why a tick is safe). */
int dev_cuda_loaded_scan(void);
extern int dev_cuda_loaded_flag;
extern uint64_t dev_cuda_seen_tick;
static inline int dev_cuda_loaded(void)
{
    if (__atomic_load_n(&dev_cuda_loaded_flag, __ATOMIC_RELAXED))
        return 1;
    if (clock_coarse_tick() == __atomic_load_n(&dev_cuda_seen_tick, __ATOMIC_RELAXED))
        return 0;
    return dev_cuda_loaded_scan();
}
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
/* The device address of mapped pinned (dev_host_alloc) or registered
 * (dev_host_register) host memory. */
ccl_result_t dev_host_device_ptr(volatile void *host, void **dptr);
/* Holds the stream until the word at device address dword reaches target
 * (serial numbers), as dev_stream_hold does. */
ccl_result_t dev_stream_wait_word(void *dword, uint32_t target, void *stream, int use_kernel);
/* Stream memory operations: 1 when the driver offers both the stream wait
 * and the stream write (cuStreamWriteValue32) the P2P path needs. */
int dev_stream_memops(void);
/* Enqueues a write of value to the word at device address dword, after the
 * stream's earlier work and its memory writes (the driver's fence). */
ccl_result_t dev_stream_write_word(void *dword, uint32_t value, void *stream);
/* Makes the stream's later work wait for the event's work. */
ccl_result_t dev_stream_wait_event(void *stream, void *event);

/* Host memory (page-aligned, e.g. a shared mapping) registered with CUDA
 * and mapped, so the GPU and stream memory operations reach it. */
ccl_result_t dev_host_register(void *ptr, size_t bytes);
void dev_host_unregister(void *ptr);

/* Device memory on the current device. */
ccl_result_t dev_malloc(void **ptr, size_t bytes);
void dev_free(void *ptr);

/* CUDA IPC: an allocation of dev_malloc exported as an opaque handle that
 * another process opens (dev_ipc_close undoes the open). */
#define DEV_IPC_HANDLE_BYTES 64
ccl_result_t dev_ipc_export(void *ptr, unsigned char handle[DEV_IPC_HANDLE_BYTES]);
ccl_result_t dev_ipc_open(const unsigned char handle[DEV_IPC_HANDLE_BYTES], void **ptr);
void dev_ipc_close(void *ptr);

/* Device identity across processes (their ordinals differ with
 * CUDA_VISIBLE_DEVICES): the 16-byte UUID of device dev. */
#define DEV_UUID_BYTES 16
ccl_result_t dev_uuid(int dev, unsigned char uuid[DEV_UUID_BYTES]);
/* The ordinal of the device with this UUID in this process, -1 if none. */
int dev_by_uuid(const unsigned char uuid[DEV_UUID_BYTES]);
/* 1 when kernels on dev can write memory of peer: the same device, or
 * peer access possible (dev_ipc_open enables it); 0 when not (message
 * set). */
int dev_peer_reachable(int dev, int peer);

/* The calling thread's current device, -1 when CUDA is not usable. */
int dev_current_device(void);
/* Makes dev the calling thread's current device (a nonblocking init's
 * thread takes its caller's). */
ccl_result_t dev_set_current_device(int dev);
/* ccl's kernels loaded on the current device, once per device and
 * process (dev_cuda_load_kernels of kernels_cuda.h says why): before ccl
 * queues anything of its own on a stream there. CCL_SUCCESS at once after
 * the first time; host-only builds and processes without a usable GPU
 * have nothing to load. */
ccl_result_t dev_kernels_ready(void);
/* The device a stream belongs to (cudaStreamGetDevice), -1 on failure
 * (message set). */
int dev_stream_device(void *stream);

#endif
