/*
 * mock_runtime.c - the mock CUDA runtime's life cycle and devices:
 * initialisation, the last-error state, device selection and the
 * properties, attributes and peer queries of the mock devices.
 *
 * Why a stand-in driver: ccl decides whether device memory can exist by
 * asking the dynamic loader whether libcuda.so is mapped
 * (dev_cuda_loaded() in src/device/cuda_rt.c), the way it stays free for
 * host-only users. The real runtime dlopens libcuda.so.1 when it
 * initialises; this one dlopens a tiny object built as libcuda.so.1 in the
 * mock build (libcuda_standin.c) at the same moment, so ccl sees exactly
 * what it sees with a real driver and its library code carries no test
 * hook. The path is compiled in (MOCKCUDA_DRIVER_PATH); MOCKCUDA_DRIVER
 * overrides it, and a path that cannot be loaded behaves as a machine
 * without a driver.
 *
 * MOCKCUDA_DEVICES (default 1, 0 to MOCK_MAX_DEVICES) is how many devices
 * every process sees; 0 is a driver with no GPU.
 */
#include "mock_cuda.h"
#include "base/clock.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MOCKCUDA_DRIVER_PATH
#define MOCKCUDA_DRIVER_PATH "libcuda.so.1"
#endif

static pthread_once_t mock_once = PTHREAD_ONCE_INIT;
static cudaError_t mock_init_result;
static pid_t mock_pid;
static int mock_devices;
static __thread int mock_device;
static __thread cudaError_t mock_last;
/* Peer access enabled from device [a] to device [b] (this process). */
static unsigned char mock_peer[MOCK_MAX_DEVICES][MOCK_MAX_DEVICES];
static pthread_mutex_t mock_peer_lock = PTHREAD_MUTEX_INITIALIZER;

void mock_say(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "mockcuda: %s\n", line);
}

static void mock_init_once(void)
{
    mock_pid = getpid();
    const char *n = getenv("MOCKCUDA_DEVICES");
    char *end = NULL;
    long v = n && *n ? strtol(n, &end, 10) : 1;
    if (n && *n && (*end || v < 0 || v > MOCK_MAX_DEVICES)) {
        mock_say("MOCKCUDA_DEVICES=%s is not a number from 0 to %d: using 1", n, MOCK_MAX_DEVICES);
        v = 1;
    }
    mock_devices = (int)v;
    const char *path = getenv("MOCKCUDA_DRIVER");
    if (!path || !*path)
        path = MOCKCUDA_DRIVER_PATH;
    /* Kept loaded for the life of the process, as the real driver is. */
    void *driver = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    /* A real driver takes tens of milliseconds or more to initialise, and
     * ccl relies on it: it looks for the driver at most once per tick
     * (clock_coarse_tick: 2^20 TSC cycles, under 1 ms, on x86; the coarse
     * clock's 1-4 ms elsewhere). Two coarse-clock ticks here (at least
     * 2 ms) keep the mock slower than either, however fast a test asks
     * for memory next. */
    struct timespec tick;
    if (driver && clock_getres(CLOCK_MONOTONIC_COARSE, &tick) == 0) {
        tick.tv_sec *= 2;
        tick.tv_nsec *= 2;
        if (tick.tv_nsec >= 1000000000L) {
            tick.tv_sec += 1;
            tick.tv_nsec -= 1000000000L;
        }
        while (nanosleep(&tick, &tick) != 0 && errno == EINTR)
            ;
    }
    if (!driver)
        mock_init_result = cudaErrorInsufficientDriver;
    else if (mock_devices == 0)
        mock_init_result = cudaErrorNoDevice;
    else
        mock_init_result = cudaSuccess;
}

cudaError_t mock_init(void)
{
    pthread_once(&mock_once, mock_init_once);
    /* CUDA state does not survive fork: a child of a process that had
     * initialised CUDA gets errors, and so does it here. */
    if (getpid() != mock_pid)
        return cudaErrorInitializationError;
    return mock_init_result;
}

cudaError_t mock_err(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        mock_last = e;
    return e;
}

int mock_ndevices(void) { return mock_devices; }
int mock_current_device(void) { return mock_device; }

/* ---- errors ------------------------------------------------------------------- */

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = mock_last;
    mock_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return mock_last; }

#define MOCK_ERRORS(X)                                                                             \
    X(cudaSuccess, "no error")                                                                     \
    X(cudaErrorInvalidValue, "invalid argument")                                                   \
    X(cudaErrorMemoryAllocation, "out of memory")                                                  \
    X(cudaErrorInitializationError, "initialization error")                                        \
    X(cudaErrorInvalidDevicePointer, "invalid device pointer")                                     \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                        \
    X(cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version") \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                     \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                            \
    X(cudaErrorDeviceUninitialized, "invalid device context")                                           \
    X(cudaErrorMapBufferObjectFailed, "mapping of buffer object failed")                           \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                   \
    X(cudaErrorSymbolNotFound, "named symbol not found")                                           \
    X(cudaErrorNotReady, "device not ready")                                                       \
    X(cudaErrorIllegalAddress, "an illegal memory access was encountered")                         \
    X(cudaErrorPeerAccessAlreadyEnabled, "peer access is already enabled")                         \
    X(cudaErrorPeerAccessNotEnabled, "peer access has not been enabled")                           \
    X(cudaErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped") \
    X(cudaErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region") \
    X(cudaErrorMisalignedAddress, "misaligned address")                                            \
    X(cudaErrorNotSupported, "operation not supported")                                            \
    X(cudaErrorUnknown, "unknown error")

const char *cudaGetErrorName(cudaError_t e)
{
#define MOCK_NAME(code, text) if (e == code) return #code;
    MOCK_ERRORS(MOCK_NAME)
#undef MOCK_NAME
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
#define MOCK_TEXT(code, text) if (e == code) return text;
    MOCK_ERRORS(MOCK_TEXT)
#undef MOCK_TEXT
    return "unrecognized error code";
}

/* ---- versions and devices -------------------------------------------------------- */

cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v)
        return mock_err(cudaErrorInvalidValue);
    /* Like the real call, 0 without a driver rather than an error. */
    *v = mock_init() == cudaErrorInsufficientDriver ? 0 : CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (!v)
        return mock_err(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return mock_err(cudaErrorInvalidValue);
    *count = 0;
    MOCK_ENTER();
    *count = mock_devices;
    return cudaSuccess;
}

static cudaError_t mock_check_device(int dev)
{
    return dev >= 0 && dev < mock_devices ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaSetDevice(int dev)
{
    MOCK_ENTER();
    if (mock_check_device(dev) != cudaSuccess)
        return mock_err(cudaErrorInvalidDevice);
    mock_device = dev;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *dev)
{
    MOCK_ENTER();
    if (!dev)
        return mock_err(cudaErrorInvalidValue);
    *dev = mock_device;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    MOCK_ENTER();
    mock_device_sync(mock_device);
    return cudaSuccess;
}

/* PCI location of a mock device: bus 0x10 + ordinal, on domain 0. */
static int mock_bus(int dev) { return 0x10 + dev; }

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev)
{
    MOCK_ENTER();
    if (!p)
        return mock_err(cudaErrorInvalidValue);
    if (mock_check_device(dev) != cudaSuccess)
        return mock_err(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "mockcuda GPU %d (host memory, no GPU)", dev);
    memcpy(p->uuid.bytes, "mockcudaGPU", 11);
    p->uuid.bytes[15] = (char)dev;
    p->totalGlobalMem = (size_t)16 << 30;
    p->sharedMemPerBlock = 48 << 10;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 4;
    p->canMapHostMemory = 1;
    p->concurrentKernels = 1;
    p->pciBusID = mock_bus(dev);
    p->asyncEngineCount = 2;
    p->unifiedAddressing = 1;
    p->managedMemory = 0;
    p->canUseHostPointerForRegisteredMem = 1;
    p->hostRegisterSupported = 1;
    p->ipcEventSupported = 1;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int dev)
{
    MOCK_ENTER();
    if (!value)
        return mock_err(cudaErrorInvalidValue);
    if (mock_check_device(dev) != cudaSuccess)
        return mock_err(cudaErrorInvalidDevice);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMultiProcessorCount: *value = 4; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrPciBusId: *value = mock_bus(dev); break;
    case cudaDevAttrPciDeviceId: *value = 0; break;
    case cudaDevAttrPciDomainId: *value = 0; break;
    case cudaDevAttrIntegrated: *value = 0; break;
    case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrCanUseHostPointerForRegisteredMem:
    case cudaDevAttrHostRegisterSupported: *value = 1; break;
    case cudaDevAttrPageableMemoryAccess:
    case cudaDevAttrConcurrentManagedAccess:
    case cudaDevAttrMemoryPoolsSupported:
    case cudaDevAttrGPUDirectRDMASupported: *value = 0; break;
    default:
        /* Not modelled: say so rather than invent a value. */
        mock_say("cudaDeviceGetAttribute: attribute %d is not modelled by the mock", (int)attr);
        return mock_err(cudaErrorNotSupported);
    }
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int dev)
{
    MOCK_ENTER();
    if (!id || len < 13)
        return mock_err(cudaErrorInvalidValue);
    if (mock_check_device(dev) != cudaSuccess)
        return mock_err(cudaErrorInvalidDevice);
    snprintf(id, (size_t)len, "00000000:%02X:00.0", mock_bus(dev));
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can, int dev, int peer)
{
    MOCK_ENTER();
    if (!can)
        return mock_err(cudaErrorInvalidValue);
    if (mock_check_device(dev) != cudaSuccess || mock_check_device(peer) != cudaSuccess)
        return mock_err(cudaErrorInvalidDevice);
    *can = dev != peer;
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    MOCK_ENTER();
    cudaError_t e = cudaSuccess;
    if (flags != 0)
        return mock_err(cudaErrorInvalidValue);
    if (mock_check_device(peer) != cudaSuccess || peer == mock_device)
        return mock_err(cudaErrorInvalidDevice);
    pthread_mutex_lock(&mock_peer_lock);
    if (mock_peer[mock_device][peer])
        e = cudaErrorPeerAccessAlreadyEnabled;
    mock_peer[mock_device][peer] = 1;
    pthread_mutex_unlock(&mock_peer_lock);
    return mock_err(e);
}

cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
    MOCK_ENTER();
    cudaError_t e = cudaSuccess;
    if (mock_check_device(peer) != cudaSuccess)
        return mock_err(cudaErrorInvalidDevice);
    pthread_mutex_lock(&mock_peer_lock);
    if (!mock_peer[mock_device][peer])
        e = cudaErrorPeerAccessNotEnabled;
    mock_peer[mock_device][peer] = 0;
    pthread_mutex_unlock(&mock_peer_lock);
    return mock_err(e);
}
