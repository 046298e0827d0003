/*
 * cuda_rt.c - ccl's use of the CUDA runtime (cuda_rt.h): whether CUDA runs
 * here, what kind of memory a pointer is, pinned memory, events, copies.
 *
 * The runtime is linked statically (libcudart_static, as NCCL does), so
 * libccl needs no CUDA install, only the driver, and only once device
 * buffers are used. Nothing here initialises CUDA for a host-only user:
 * dev_cuda_loaded() asks the dynamic loader whether libcuda is mapped
 * (one dl_iterate_phdr step, ~15 ns, when no library was loaded since the
 * last look); without the driver no pointer can be device memory, so host
 * collectives never reach cudaGetDeviceCount or cudaPointerGetAttributes.
 *
 * A build without CUDA compiles the second half of this file instead:
 * the same functions, answering "no CUDA" and refusing the rest.
 */
#include "device/cuda_rt.h"
#include "core/err.h"

#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

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

int dev_cuda_loaded(void)
{
    /* Once loaded, the driver stays (it is never unloaded in practice);
     * while absent, the whole list is scanned again only when the loader
     * has loaded something since the last scan. */
    static int loaded;
    static unsigned long long seen_adds = ~0ull;
    if (__atomic_load_n(&loaded, __ATOMIC_RELAXED))
        return 1;
    dev_scan_t scan = {0, 0};
    dl_iterate_phdr(dev_scan_first, &scan);
    if (scan.adds == __atomic_load_n(&seen_adds, __ATOMIC_RELAXED))
        return 0;
    unsigned long long adds = scan.adds;
    dl_iterate_phdr(dev_scan_libcuda, &scan);
    if (scan.found)
        __atomic_store_n(&loaded, 1, __ATOMIC_RELAXED);
    else
        __atomic_store_n(&seen_adds, adds, __ATOMIC_RELAXED);
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

/* cuStreamWaitValue32 from the driver, through the runtime (ccl links no
 * libcuda): the v2 stream memory operations, enabled on every driver
 * since CUDA 11.7. NULL when the driver does not offer it. */
typedef CUresult (*dev_wait_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static pthread_once_t dev_wait_once = PTHREAD_ONCE_INIT;
static dev_wait_value_fn dev_wait_value;
static int dev_wait_refused;

static void dev_wait_probe(void)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess && fn)
        dev_wait_value = (dev_wait_value_fn)fn;
    else
        cudaGetLastError();
}

ccl_result_t dev_stream_hold(volatile uint32_t *flag, uint32_t target, void *stream, int use_kernel)
{
    if (!use_kernel && !__atomic_load_n(&dev_wait_refused, __ATOMIC_RELAXED)) {
        pthread_once(&dev_wait_once, dev_wait_probe);
        void *dptr = NULL;
        if (dev_wait_value && cudaHostGetDevicePointer(&dptr, (void *)flag, 0) == cudaSuccess) {
            CUresult r = dev_wait_value((CUstream)stream, (CUdeviceptr)(uintptr_t)dptr, target,
                                        CU_STREAM_WAIT_VALUE_GEQ);
            if (r == CUDA_SUCCESS)
                return CCL_SUCCESS;
            LOG_INFO(SUB_ALL, "cuStreamWaitValue32 failed (CUresult %d): CUDA streams wait with a kernel from now on",
                     (int)r);
        }
        cudaGetLastError();
        __atomic_store_n(&dev_wait_refused, 1, __ATOMIC_RELAXED);
    }
    return dev_cuda_wait_flag(flag, target, stream);
}

int dev_current_device(void)
{
    int dev = -1;
    if (!dev_cuda_usable(NULL) || cudaGetDevice(&dev) != cudaSuccess)
        return -1;
    return dev;
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

int dev_current_device(void) { return -1; }

int dev_stream_device(void *stream)
{
    dev_unsupported("CUDA streams");
    return -1;
}

#endif
