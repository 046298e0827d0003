/*
 * cuda_rt.c - ccl's use of the CUDA runtime (cuda_rt.h): whether CUDA runs
 * here, what kind of memory a pointer is, pinned memory, events, copies.
 *
 * The runtime is linked statically (libcudart_static, as NCCL does), so
 * libccl needs no CUDA install, only the driver, and only once device
 * buffers are used. Nothing here initialises CUDA for a host-only user:
 * dev_cuda_loaded() asks the dynamic loader whether libcuda is mapped,
 * at most once per tick of the TSC or coarse clock (see there); without
 * the driver no pointer can be device memory, so host collectives never
 * reach cudaGetDeviceCount or cudaPointerGetAttributes.
 *
 * A build without CUDA compiles the second half of this file instead:
 * the same functions, answering "no CUDA" and refusing the rest.
 */
#include "device/cuda_rt.h"
#include "base/clock.h"
#include "base/err.h"

#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- is the driver loaded? (both builds) ------------------------------------- */

typedef struct {
    unsigned long long adds; /* loader's count of objects ever loaded */
    int found;
} dev_scan_t;

static int dev_scan_first(struct dl_phdr_info *info, size_t size, void *arg)
{
    ((dev_scan_t *)arg)->adds = info->dlpi_adds;
    return 1; /* only the counter: stop at the first object */
}

static int dev_scan_libcuda(struct dl_phdr_info *info, size_t size, void *arg)
{
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libcuda.so", 10) == 0) {
        ((dev_scan_t *)arg)->found = 1;
        return 1;
    }
    return 0;
}

int dev_cuda_loaded_flag;
uint64_t dev_cuda_seen_tick = UINT64_MAX;

/* dev_cuda_loaded's look, at most once per tick of clock_coarse_tick. */
int dev_cuda_loaded_scan(void)
{
    /* Once loaded, the driver stays (it is never unloaded in practice).
     * While it is absent, even the loader's counter costs a lock and a walk
     * of the loaded objects (~170 instructions, an eighth of a small
     * host collective), so it is read at most once per tick (under 1 ms;
     * the coarse clock's 1-4 ms where there is no TSC). That cannot miss
     * a device pointer: if a look in this tick found no driver, a pointer
     * held now would have to come from a driver loaded, initialised and
     * asked for memory within one tick, and that takes tens of
     * milliseconds or more. (The mock driver of tests/mock_cuda waits out
     * two ticks of the coarse clock, at least 2 ms, in its initialisation
     * to keep that true.) The whole list is scanned again only when the
     * loader has loaded something since the last scan. */
    static unsigned long long seen_adds = ~0ull;
    if (__atomic_load_n(&dev_cuda_loaded_flag, __ATOMIC_RELAXED))
        return 1;
    uint64_t tick = clock_coarse_tick();
    dev_scan_t scan = {0, 0};
    dl_iterate_phdr(dev_scan_first, &scan);
    if (scan.adds == __atomic_load_n(&seen_adds, __ATOMIC_RELAXED)) {
        __atomic_store_n(&dev_cuda_seen_tick, tick, __ATOMIC_RELAXED);
        return 0;
    }
    unsigned long long adds = scan.adds;
    dl_iterate_phdr(dev_scan_libcuda, &scan);
    if (scan.found)
        __atomic_store_n(&dev_cuda_loaded_flag, 1, __ATOMIC_RELAXED);
    else {
        __atomic_store_n(&seen_adds, adds, __ATOMIC_RELAXED);
        __atomic_store_n(&dev_cuda_seen_tick, tick, __ATOMIC_RELAXED);
    }
    return scan.found;
}

#ifdef CCL_HAVE_CUDA
#include "device/kernels_cuda.h"

#include <cuda.h> /* driver types only: the driver is reached through the runtime */
#include <cuda_runtime_api.h>

static ccl_result_t dev_cuda_fail(const char *call, cudaError_t e)
{
    return err_set(CCL_ERR_CUDA, "%s failed: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
}

int dev_cuda_built(void) { return 1; }

static pthread_once_t dev_probe_once = PTHREAD_ONCE_INIT;
static int dev_usable;
static char dev_why[256];

static void dev_probe(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0) {
        dev_usable = 1;
        return;
    }
    /* The runtime loads the driver itself; if it is still not mapped, it
     * was not found, whatever the error's name says ("insufficient driver"). */
    if (!dev_cuda_loaded())
        snprintf(dev_why, sizeof dev_why, "no CUDA driver (libcuda.so.1 cannot be loaded): "
                 "cudaGetDeviceCount says %s", e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    else if (e == cudaSuccess || e == cudaErrorNoDevice)
        snprintf(dev_why, sizeof dev_why, "no GPU: the CUDA driver is loaded but sees no device");
    else
        snprintf(dev_why, sizeof dev_why, "cudaGetDeviceCount failed: %s (%s)", cudaGetErrorString(e),
                 cudaGetErrorName(e));
}

int dev_cuda_usable(const char **why)
{
    pthread_once(&dev_probe_once, dev_probe);
    if (!dev_usable && why)
        *why = dev_why;
    return dev_usable;
}

int dev_ptr_is_device(const void *ptr)
{
    if (!ptr || !dev_cuda_loaded() || !dev_cuda_usable(NULL))
        return 0;
    struct cudaPointerAttributes at;
    cudaError_t e = cudaPointerGetAttributes(&at, ptr);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky: do not leave it for the user's next call */
        return 0;
    }
    return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
}

ccl_result_t dev_host_alloc(void **ptr, size_t bytes)
{
    cudaError_t e = cudaHostAlloc(ptr, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    if (e != cudaSuccess) {
        *ptr = NULL;
        return err_set(CCL_ERR_CUDA, "cudaHostAlloc of %zu bytes (pinned staging memory) failed: %s (%s)",
                       bytes, cudaGetErrorString(e), cudaGetErrorName(e));
    }
    return CCL_SUCCESS;
}

void dev_host_free(void *ptr)
{
    if (ptr && cudaFreeHost(ptr) != cudaSuccess)
        LOG_WARN(SUB_ALL, "cudaFreeHost(%p) failed; the pinned memory is lost", ptr);
}

ccl_result_t dev_event_create(void **event)
{
    cudaEvent_t ev = NULL;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    *event = ev;
    return e == cudaSuccess ? CCL_SUCCESS : dev_cuda_fail("cudaEventCreateWithFlags", e);
}

void dev_event_destroy(void *event)
{
    if (event)
        cudaEventDestroy((cudaEvent_t)event);
}

ccl_result_t dev_event_record(void *event, void *stream)
{
    cudaError_t e = cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream);
    return e == cudaSuccess ? CCL_SUCCESS : dev_cuda_fail("cudaEventRecord", e);
}

ccl_result_t dev_event_sync(void *event)
{
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)event);
    return e == cudaSuccess ? CCL_SUCCESS : dev_cuda_fail("cudaEventSynchronize", e);
}

int dev_event_done(void *event)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaSuccess)
        return 1;
    if (e == cudaErrorNotReady) {
        cudaGetLastError(); /* not an error: do not leave it for the user */
        return 0;
    }
    dev_cuda_fail("cudaEventQuery", e);
    return -1;
}

ccl_result_t dev_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
    return e == cudaSuccess ? CCL_SUCCESS : dev_cuda_fail("cudaMemcpyAsync", e);
}

ccl_result_t dev_copy_sync(void *dst, const void *src, size_t bytes)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    return e == cudaSuccess ? CCL_SUCCESS : dev_cuda_fail("cudaMemcpy", e);
}

/* cuStreamWaitValue32 and cuStreamWriteValue32 from the driver, through
 * the runtime (ccl links no libcuda): the v2 stream memory operations,
 * enabled on every driver since CUDA 11.7. NULL when the driver does not
 * offer them. Both have the same signature. */
typedef CUresult (*dev_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static pthread_once_t dev_wait_once = PTHREAD_ONCE_INIT;
static dev_value_fn dev_wait_value, dev_write_value;
static int dev_wait_refused;

static dev_value_fn dev_driver_fn(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess && fn)
        return (dev_value_fn)fn;
    cudaGetLastError();
    return NULL;
}

static void dev_wait_probe(void)
{
    dev_wait_value = dev_driver_fn("cuStreamWaitValue32");
    dev_write_value = dev_driver_fn("cuStreamWriteValue32");
}

ccl_result_t dev_host_device_ptr(volatile void *host, void **dptr)
{
    cudaError_t e = cudaHostGetDevicePointer(dptr, (void *)host, 0);
    return e == cudaSuccess ? CCL_SUCCESS : dev_cuda_fail("cudaHostGetDevicePointer", e);
}

ccl_result_t dev_stream_wait_word(void *dword, uint32_t target, void *stream, int use_kernel)
{
    if (!use_kernel && !__atomic_load_n(&dev_wait_refused, __ATOMIC_RELAXED)) {
        pthread_once(&dev_wait_once, dev_wait_probe);
        if (dev_wait_value) {
            CUresult r = dev_wait_value((CUstream)stream, (CUdeviceptr)(uintptr_t)dword, target,
                                        CU_STREAM_WAIT_VALUE_GEQ);
            if (r == CUDA_SUCCESS)
                return CCL_SUCCESS;
            LOG_INFO(SUB_ALL, "cuStreamWaitValue32 failed (CUresult %d): CUDA streams wait with a kernel from now on",
                     (int)r);
        }
        cudaGetLastError();
        __atomic_store_n(&dev_wait_refused, 1, __ATOMIC_RELAXED);
    }
    return dev_cuda_wait_flag((volatile uint32_t *)dword, target, stream);
}

ccl_result_t dev_stream_hold(volatile uint32_t *flag, uint32_t target, void *stream, int use_kernel)
{
    void *dptr = NULL;
    ccl_result_t res = dev_host_device_ptr(flag, &dptr);
    if (res != CCL_SUCCESS)
        return res;
    return dev_stream_wait_word(dptr, target, stream, use_kernel);
}

int dev_stream_memops(void)
{
    pthread_once(&dev_wait_once, dev_wait_probe);
    return dev_wait_value && dev_write_value && !__atomic_load_n(&dev_wait_refused, __ATOMIC_RELAXED);
}

ccl_result_t dev_stream_write_word(void *dword, uint32_t value, void *stream)
{
    pthread_once(&dev_wait_once, dev_wait_probe);
    if (!dev_write_value)
        return err_set(CCL_ERR_UNSUPPORTED, "the CUDA driver offers no cuStreamWriteValue32");
    /* Flags 0: the write is preceded by a memory fence, so the slot data
     * the stream's kernel wrote is visible before the counter moves. */
    CUresult r = dev_write_value((CUstream)stream, (CUdeviceptr)(uintptr_t)dword, value, 0);
    if (r != CUDA_SUCCESS)
        return err_set(CCL_ERR_CUDA, "cuStreamWriteValue32 failed (CUresult %d)", (int)r);
    return CCL_SUCCESS;
}

ccl_result_t dev_stream_wait_event(void *stream, void *event)
{
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0);
    return e == cudaSuccess ? CCL_SUCCESS : dev_cuda_fail("cudaStreamWaitEvent", e);
}

ccl_result_t dev_host_register(void *ptr, size_t bytes)
{
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
    return e == cudaSuccess ? CCL_SUCCESS : dev_cuda_fail("cudaHostRegister", e);
}

void dev_host_unregister(void *ptr)
{
    if (ptr && cudaHostUnregister(ptr) != cudaSuccess) {
        cudaGetLastError();
        LOG_WARN(SUB_ALL, "cudaHostUnregister(%p) failed", ptr);
    }
}

ccl_result_t dev_malloc(void **ptr, size_t bytes)
{
    cudaError_t e = cudaMalloc(ptr, bytes);
    if (e != cudaSuccess) {
        *ptr = NULL;
        return err_set(CCL_ERR_CUDA, "cudaMalloc of %zu bytes failed: %s (%s)", bytes, cudaGetErrorString(e),
                       cudaGetErrorName(e));
    }
    return CCL_SUCCESS;
}

void dev_free(void *ptr)
{
    if (ptr && cudaFree(ptr) != cudaSuccess) {
        cudaGetLastError();
        LOG_WARN(SUB_ALL, "cudaFree(%p) failed; the device memory is lost", ptr);
    }
}

_Static_assert(sizeof(cudaIpcMemHandle_t) <= DEV_IPC_HANDLE_BYTES, "IPC handle size");

ccl_result_t dev_ipc_export(void *ptr, unsigned char handle[DEV_IPC_HANDLE_BYTES])
{
    cudaIpcMemHandle_t h;
    memset(handle, 0, DEV_IPC_HANDLE_BYTES);
    cudaError_t e = cudaIpcGetMemHandle(&h, ptr);
    if (e != cudaSuccess)
        return dev_cuda_fail("cudaIpcGetMemHandle", e);
    memcpy(handle, &h, sizeof h);
    return CCL_SUCCESS;
}

ccl_result_t dev_ipc_open(const unsigned char handle[DEV_IPC_HANDLE_BYTES], void **ptr)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    /* Lazy peer access: a handle of another GPU is reachable once opened. */
    cudaError_t e = cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
        *ptr = NULL;
        return dev_cuda_fail("cudaIpcOpenMemHandle", e);
    }
    return CCL_SUCCESS;
}

void dev_ipc_close(void *ptr)
{
    if (ptr && cudaIpcCloseMemHandle(ptr) != cudaSuccess) {
        cudaGetLastError();
        LOG_WARN(SUB_ALL, "cudaIpcCloseMemHandle(%p) failed", ptr);
    }
}

ccl_result_t dev_uuid(int dev, unsigned char uuid[DEV_UUID_BYTES])
{
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, dev);
    if (e != cudaSuccess)
        return dev_cuda_fail("cudaGetDeviceProperties", e);
    memcpy(uuid, prop.uuid.bytes, DEV_UUID_BYTES);
    return CCL_SUCCESS;
}

int dev_by_uuid(const unsigned char uuid[DEV_UUID_BYTES])
{
    int n = 0;
    unsigned char u[DEV_UUID_BYTES];
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    for (int d = 0; d < n; d++)
        if (dev_uuid(d, u) == CCL_SUCCESS && memcmp(u, uuid, DEV_UUID_BYTES) == 0)
            return d;
    return -1;
}

int dev_peer_reachable(int dev, int peer)
{
    int can = 0;
    if (dev == peer)
        return 1;
    cudaError_t e = cudaDeviceCanAccessPeer(&can, dev, peer);
    if (e != cudaSuccess) {
        dev_cuda_fail("cudaDeviceCanAccessPeer", e);
        return 0;
    }
    if (!can)
        err_set(CCL_ERR_UNSUPPORTED, "device %d cannot access device %d (no peer access)", dev, peer);
    return can;
}

int dev_current_device(void)
{
    int dev = -1;
    if (!dev_cuda_usable(NULL) || cudaGetDevice(&dev) != cudaSuccess)
        return -1;
    return dev;
}

ccl_result_t dev_set_current_device(int dev)
{
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess)
        return dev_cuda_fail("cudaSetDevice", e);
    return CCL_SUCCESS;
}

/* Devices whose kernels are loaded, a bit each (dev_kernels_ready); the
 * lock only keeps two threads from loading the same device twice. */
#define DEV_LOADED_MAX 64
static uint64_t dev_loaded;
static pthread_mutex_t dev_load_lock = PTHREAD_MUTEX_INITIALIZER;

ccl_result_t dev_kernels_ready(void)
{
    ccl_result_t res = CCL_SUCCESS;
    int dev = dev_current_device();
    if (dev < 0 || dev >= DEV_LOADED_MAX)
        return CCL_SUCCESS; /* no GPU: nothing to load; past 64 devices: loaded lazily, as CUDA does */
    uint64_t bit = (uint64_t)1 << dev;
    if (__atomic_load_n(&dev_loaded, __ATOMIC_ACQUIRE) & bit)
        return CCL_SUCCESS;
    pthread_mutex_lock(&dev_load_lock);
    if (!(dev_loaded & bit)) {
        res = dev_cuda_load_kernels();
        if (res == CCL_SUCCESS) {
            __atomic_or_fetch(&dev_loaded, bit, __ATOMIC_RELEASE);
            LOG_INFO(SUB_ALL, "GPU %d: ccl's kernels loaded", dev);
        }
    }
    pthread_mutex_unlock(&dev_load_lock);
    return res;
}

int dev_stream_device(void *stream)
{
    int dev = -1;
    cudaError_t e = cudaStreamGetDevice((cudaStream_t)stream, &dev);
    if (e != cudaSuccess) {
        dev_cuda_fail("cudaStreamGetDevice", e);
        return -1;
    }
    return dev;
}

#else /* no CUDA in this build */

static const char dev_no_cuda[] =
    "this build has no CUDA support (built with CUDA=0, or where nvcc was not found)";

static ccl_result_t dev_unsupported(const char *what)
{
    return err_set(CCL_ERR_UNSUPPORTED, "%s: %s", what, dev_no_cuda);
}

int dev_cuda_built(void) { return 0; }

int dev_cuda_usable(const char **why)
{
    if (why)
        *why = dev_no_cuda;
    return 0;
}

int dev_ptr_is_device(const void *ptr) { return 0; }

ccl_result_t dev_host_alloc(void **ptr, size_t bytes)
{
    *ptr = NULL;
    return dev_unsupported("pinned memory");
}

void dev_host_free(void *ptr) {}

ccl_result_t dev_event_create(void **event)
{
    *event = NULL;
    return dev_unsupported("CUDA events");
}

void dev_event_destroy(void *event) {}

ccl_result_t dev_event_record(void *event, void *stream) { return dev_unsupported("CUDA events"); }

ccl_result_t dev_event_sync(void *event) { return dev_unsupported("CUDA events"); }

int dev_event_done(void *event)
{
    dev_unsupported("CUDA events");
    return -1;
}

ccl_result_t dev_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    return dev_unsupported("device copies");
}

ccl_result_t dev_copy_sync(void *dst, const void *src, size_t bytes)
{
    return dev_unsupported("device copies");
}

ccl_result_t dev_stream_hold(volatile uint32_t *flag, uint32_t target, void *stream, int use_kernel)
{
    return dev_unsupported("CUDA streams");
}

ccl_result_t dev_host_device_ptr(volatile void *host, void **dptr)
{
    *dptr = NULL;
    return dev_unsupported("mapped host memory");
}

ccl_result_t dev_stream_wait_word(void *dword, uint32_t target, void *stream, int use_kernel)
{
    return dev_unsupported("CUDA streams");
}

int dev_stream_memops(void) { return 0; }

ccl_result_t dev_stream_write_word(void *dword, uint32_t value, void *stream)
{
    return dev_unsupported("CUDA streams");
}

ccl_result_t dev_stream_wait_event(void *stream, void *event) { return dev_unsupported("CUDA streams"); }

ccl_result_t dev_host_register(void *ptr, size_t bytes) { return dev_unsupported("host memory registration"); }

void dev_host_unregister(void *ptr) {}

ccl_result_t dev_malloc(void **ptr, size_t bytes)
{
    *ptr = NULL;
    return dev_unsupported("device memory");
}

void dev_free(void *ptr) {}

ccl_result_t dev_ipc_export(void *ptr, unsigned char handle[DEV_IPC_HANDLE_BYTES])
{
    return dev_unsupported("CUDA IPC");
}

ccl_result_t dev_ipc_open(const unsigned char handle[DEV_IPC_HANDLE_BYTES], void **ptr)
{
    *ptr = NULL;
    return dev_unsupported("CUDA IPC");
}

void dev_ipc_close(void *ptr) {}

ccl_result_t dev_uuid(int dev, unsigned char uuid[DEV_UUID_BYTES]) { return dev_unsupported("CUDA devices"); }

int dev_by_uuid(const unsigned char uuid[DEV_UUID_BYTES]) { return -1; }

int dev_peer_reachable(int dev, int peer)
{
    dev_unsupported("CUDA devices");
    return 0;
}

int dev_current_device(void) { return -1; }
ccl_result_t dev_set_current_device(int dev)
{
    (void)dev;
    return CCL_SUCCESS;
}

ccl_result_t dev_kernels_ready(void) { return CCL_SUCCESS; }

int dev_stream_device(void *stream)
{
    dev_unsupported("CUDA streams");
    return -1;
}

#endif
