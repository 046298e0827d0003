/*
 * mock_mem.c - memory of the mock CUDA runtime: device memory, pinned and
 * registered host memory, the table that tells them apart, and copies
 * and memsets, synchronous and on streams.
 *
 * Device memory is a memfd mapped MAP_SHARED, its descriptor kept open,
 * so that another process can map the same pages through an IPC handle
 * (mock_ipc.c). Every region the runtime knows is in one sorted table,
 * which answers cudaPointerGetAttributes and lets each call check what
 * CUDA checks: a copy that runs past the end of an allocation, a
 * direction that names pageable host memory as the device side, a free
 * of a pointer that is no allocation's start.
 *
 * Copies follow CUDA's host-synchronisation rules, which matter to code
 * that overlaps work with them: cudaMemcpyAsync from pageable host memory
 * to the device copies the source into a staging buffer and returns at
 * once (what the driver does with small copies; CUDA allows either), any
 * other copy to or from pageable host memory returns only when done,
 * cudaMemcpy between two device buffers and cudaMemset of device memory
 * return at once, and cudaFree / cudaFreeHost first wait for the device's
 * streams.
 */
#include "mock_cuda.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_rwlock_t mock_mem_lock = PTHREAD_RWLOCK_INITIALIZER;
static mock_region_t *mock_regions; /* sorted by base, never overlapping */
static size_t mock_nregions, mock_cap;

/* ---- the table ---------------------------------------------------------------------- */

/* Index of the last region whose base is <= p, or -1 (lock held). */
static long mock_mem_floor(const void *p)
{
    long lo = 0, hi = (long)mock_nregions - 1, at = -1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        if ((const char *)mock_regions[mid].base <= (const char *)p) {
            at = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return at;
}

static long mock_mem_index(const void *p)
{
    long i = mock_mem_floor(p);
    if (i >= 0 && (const char *)p < mock_regions[i].base + mock_regions[i].size)
        return i;
    return -1;
}

int mock_mem_find(const void *p, mock_region_t *out)
{
    pthread_rwlock_rdlock(&mock_mem_lock);
    long i = mock_mem_index(p);
    if (i >= 0 && out)
        *out = mock_regions[i];
    pthread_rwlock_unlock(&mock_mem_lock);
    return i >= 0;
}

/* 1 when [p, p + n) overlaps a region (lock held). */
static int mock_mem_overlaps(const char *p, size_t n)
{
    long i = mock_mem_floor(p + n - 1);
    return i >= 0 && mock_regions[i].base + mock_regions[i].size > p;
}

cudaError_t mock_mem_add(const mock_region_t *r)
{
    cudaError_t e = cudaSuccess;
    pthread_rwlock_wrlock(&mock_mem_lock);
    if (mock_nregions == mock_cap) {
        size_t cap = mock_cap ? 2 * mock_cap : 64;
        mock_region_t *t = realloc(mock_regions, cap * sizeof *t);
        if (!t) {
            e = cudaErrorMemoryAllocation;
            goto out;
        }
        mock_regions = t;
        mock_cap = cap;
    }
    if (mock_mem_overlaps(r->base, r->size)) {
        e = cudaErrorHostMemoryAlreadyRegistered;
        goto out;
    }
    size_t at = (size_t)(mock_mem_floor(r->base) + 1);
    memmove(&mock_regions[at + 1], &mock_regions[at], (mock_nregions - at) * sizeof *mock_regions);
    mock_regions[at] = *r;
    mock_nregions++;
out:
    pthread_rwlock_unlock(&mock_mem_lock);
    return e;
}

static void mock_mem_drop(size_t i)
{
    memmove(&mock_regions[i], &mock_regions[i + 1], (mock_nregions - i - 1) * sizeof *mock_regions);
    mock_nregions--;
}

int mock_mem_remove(const void *base, unsigned kinds_mask, mock_region_t *out)
{
    pthread_rwlock_wrlock(&mock_mem_lock);
    long i = mock_mem_index(base);
    int found = i >= 0 && mock_regions[i].base == base && (kinds_mask & (1u << mock_regions[i].kind));
    if (found) {
        *out = mock_regions[i];
        mock_mem_drop((size_t)i);
    }
    pthread_rwlock_unlock(&mock_mem_lock);
    return found;
}

int mock_mem_ipc_ref(pid_t owner, ino_t ino, mock_region_t *out)
{
    int found = 0;
    pthread_rwlock_wrlock(&mock_mem_lock);
    for (size_t i = 0; i < mock_nregions && !found; i++) {
        mock_region_t *r = &mock_regions[i];
        if (r->kind == MOCK_MEM_IPC && r->owner == owner && r->ino == ino) {
            r->refs++;
            *out = *r;
            found = 1;
        }
    }
    pthread_rwlock_unlock(&mock_mem_lock);
    return found;
}

int mock_mem_ipc_unref(const void *base, mock_region_t *out)
{
    int res = -1;
    pthread_rwlock_wrlock(&mock_mem_lock);
    long i = mock_mem_index(base);
    if (i >= 0 && mock_regions[i].base == base && mock_regions[i].kind == MOCK_MEM_IPC) {
        res = --mock_regions[i].refs == 0;
        *out = mock_regions[i];
        if (res)
            mock_mem_drop((size_t)i);
    }
    pthread_rwlock_unlock(&mock_mem_lock);
    return res;
}

cudaError_t mock_mem_classify(const void *p, size_t n, mock_at_t *at)
{
    mock_region_t r;
    *at = MOCK_AT_PAGEABLE;
    if (!mock_mem_find(p, &r))
        return cudaSuccess;
    if (n > (size_t)(r.base + r.size - (const char *)p)) {
        mock_say("%zu bytes at %p run %zu bytes past the end of a %zu-byte allocation", n, p,
                 n - (size_t)(r.base + r.size - (const char *)p), r.size);
        return cudaErrorInvalidValue;
    }
    *at = r.kind == MOCK_MEM_DEVICE || r.kind == MOCK_MEM_IPC ? MOCK_AT_DEVICE : MOCK_AT_PINNED;
    return cudaSuccess;
}

/* ---- allocation ---------------------------------------------------------------------- */

static size_t mock_page_round(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) / pg * pg;
}

cudaError_t cudaMalloc(void **out, size_t size)
{
    MOCK_ENTER();
    if (!out)
        return mock_err(cudaErrorInvalidValue);
    *out = NULL;
    if (size == 0)
        return cudaSuccess;
    mock_region_t r = {.kind = MOCK_MEM_DEVICE, .device = mock_current_device(), .size = mock_page_round(size)};
    struct stat sb;
    void *p = MAP_FAILED;
    r.fd = memfd_create("mockcuda-device", MFD_CLOEXEC);
    if (r.fd >= 0 && ftruncate(r.fd, (off_t)r.size) == 0 && fstat(r.fd, &sb) == 0)
        p = mmap(NULL, r.size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    if (p == MAP_FAILED) {
        if (r.fd >= 0)
            close(r.fd);
        return mock_err(cudaErrorMemoryAllocation);
    }
    r.base = p;
    r.ino = sb.st_ino;
    if (mock_mem_add(&r) != cudaSuccess) {
        munmap(p, r.size);
        close(r.fd);
        return mock_err(cudaErrorMemoryAllocation);
    }
    *out = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    MOCK_ENTER();
    mock_region_t r;
    if (!p)
        return cudaSuccess;
    if (!mock_mem_find(p, &r) || r.kind != MOCK_MEM_DEVICE || r.base != p) {
        mock_say("cudaFree(%p): not the start of a cudaMalloc allocation%s", p,
                 mock_mem_find(p, &r) && r.kind == MOCK_MEM_IPC ? " (IPC memory: cudaIpcCloseMemHandle)" : "");
        return mock_err(cudaErrorInvalidValue);
    }
    mock_device_sync(r.device); /* cudaFree waits for the device, as CUDA's does */
    if (!mock_mem_remove(p, 1u << MOCK_MEM_DEVICE, &r))
        return mock_err(cudaErrorInvalidValue); /* freed twice at once */
    munmap(r.base, r.size);
    close(r.fd);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **out, size_t size, unsigned int flags)
{
    MOCK_ENTER();
    const unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
    if (!out || (flags & ~known))
        return mock_err(cudaErrorInvalidValue);
    *out = NULL;
    if (size == 0)
        return cudaSuccess;
    mock_region_t r = {.kind = MOCK_MEM_HOST, .device = mock_current_device(), .size = mock_page_round(size),
                       .fd = -1, .flags = flags};
    void *p = mmap(NULL, r.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return mock_err(cudaErrorMemoryAllocation);
    r.base = p;
    if (mock_mem_add(&r) != cudaSuccess) {
        munmap(p, r.size);
        return mock_err(cudaErrorMemoryAllocation);
    }
    *out = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **out, size_t size) { return cudaHostAlloc(out, size, cudaHostAllocDefault); }

cudaError_t cudaFreeHost(void *p)
{
    MOCK_ENTER();
    mock_region_t r;
    if (!p)
        return cudaSuccess;
    mock_device_sync(-1); /* as CUDA's, it waits for the streams first */
    if (!mock_mem_remove(p, 1u << MOCK_MEM_HOST, &r)) {
        mock_say("cudaFreeHost(%p): not the start of a cudaHostAlloc / cudaMallocHost allocation", p);
        return mock_err(cudaErrorInvalidValue);
    }
    munmap(r.base, r.size);
    return cudaSuccess;
}

cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
    MOCK_ENTER();
    const unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                           cudaHostRegisterReadOnly;
    if (!p || size == 0 || (flags & ~known))
        return mock_err(cudaErrorInvalidValue);
    mock_region_t r = {.kind = MOCK_MEM_REGISTERED, .device = mock_current_device(), .base = p, .size = size,
                       .fd = -1, .flags = flags};
    return mock_err(mock_mem_add(&r));
}

cudaError_t cudaHostUnregister(void *p)
{
    MOCK_ENTER();
    mock_region_t r;
    if (!mock_mem_remove(p, 1u << MOCK_MEM_REGISTERED, &r))
        return mock_err(cudaErrorHostMemoryNotRegistered);
    return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags)
{
    MOCK_ENTER();
    mock_region_t r;
    if (!dev || flags != 0)
        return mock_err(cudaErrorInvalidValue);
    if (!mock_mem_find(host, &r) || (r.kind != MOCK_MEM_HOST && r.kind != MOCK_MEM_REGISTERED))
        return mock_err(cudaErrorInvalidValue);
    *dev = host; /* unified addressing: the same address on both sides */
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *at, const void *p)
{
    MOCK_ENTER();
    mock_region_t r;
    if (!at)
        return mock_err(cudaErrorInvalidValue);
    memset(at, 0, sizeof *at);
    at->type = cudaMemoryTypeUnregistered;
    if (!mock_mem_find(p, &r))
        return cudaSuccess;
    at->device = r.device;
    at->devicePointer = (void *)p;
    if (r.kind == MOCK_MEM_DEVICE || r.kind == MOCK_MEM_IPC) {
        at->type = cudaMemoryTypeDevice;
    } else {
        at->type = cudaMemoryTypeHost;
        at->hostPointer = (void *)p;
    }
    return cudaSuccess;
}

/* ---- copies and memsets ------------------------------------------------------------- */

/* What CUDA refuses in a copy: an overrun of a known allocation, and a
 * direction whose device side is pageable host memory. */
static cudaError_t mock_copy_check(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                   mock_at_t *dat, mock_at_t *sat)
{
    cudaError_t e;
    if ((e = mock_mem_classify(dst, n, dat)) != cudaSuccess || (e = mock_mem_classify(src, n, sat)) != cudaSuccess)
        return e;
    int dev_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int dev_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if ((unsigned)kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    if ((dev_dst && *dat == MOCK_AT_PAGEABLE) || (dev_src && *sat == MOCK_AT_PAGEABLE)) {
        mock_say("copy of %zu bytes from %p to %p: kind %d names pageable host memory as device memory", n, src, dst,
                 (int)kind);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

/* Queues a copy (MOCK_OP_COPY) or memset (MOCK_OP_SET) of n bytes on the
 * stream, once the caller's checks passed (e); `blocking`: returns when
 * it is done. */
static cudaError_t mock_queue(cudaError_t e, mock_op_kind_t kind, void *dst, const void *src, int value, size_t n,
                              cudaStream_t stream, int blocking)
{
    mock_stream_t *s = NULL;
    uint32_t ticket;
    if (e == cudaSuccess)
        e = mock_stream_get(stream, &s);
    if (e != cudaSuccess)
        return mock_err(e);
    if (n == 0)
        return cudaSuccess;
    mock_op_t *op = mock_op_new(kind);
    if (!op)
        return mock_err(cudaErrorMemoryAllocation);
    op->dst = dst;
    op->src = src;
    op->value = value;
    op->n = n;
    mock_stream_push(s, op, &ticket);
    if (blocking)
        mock_stream_wait_ticket(s, ticket);
    return cudaSuccess;
}

static cudaError_t mock_copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream,
                             int blocking)
{
    MOCK_ENTER();
    mock_at_t dat = MOCK_AT_PAGEABLE, sat = MOCK_AT_PAGEABLE;
    cudaError_t e = mock_copy_check(dst, src, n, kind, &dat, &sat);
    /* Async from pageable host memory to the device: staged now, and the
     * call does not wait for the stream (the caller may reuse src). */
    if (e == cudaSuccess && !blocking && n > 0 && sat == MOCK_AT_PAGEABLE && dat != MOCK_AT_PAGEABLE) {
        mock_stream_t *s = NULL;
        if ((e = mock_stream_get(stream, &s)) != cudaSuccess)
            return mock_err(e);
        mock_op_t *op = mock_op_new(MOCK_OP_COPY);
        void *staged = malloc(n);
        if (!op || !staged) {
            free(op);
            free(staged);
            return mock_err(cudaErrorMemoryAllocation);
        }
        memcpy(staged, src, n);
        op->dst = dst;
        op->src = op->owned = staged;
        op->n = n;
        mock_stream_push(s, op, NULL);
        return cudaSuccess;
    }
    /* Other pageable copies: the call returns when the stream got there
     * and the copy is done, async or not. */
    blocking = blocking || dat == MOCK_AT_PAGEABLE || sat == MOCK_AT_PAGEABLE;
    return mock_queue(e, MOCK_OP_COPY, dst, src, 0, n, stream, blocking);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return mock_copy(dst, src, n, kind, stream, 0);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    /* On the legacy stream; returns when done unless device to device. */
    mock_at_t dat = MOCK_AT_PAGEABLE, sat = MOCK_AT_PAGEABLE;
    mock_mem_classify(dst, 0, &dat);
    mock_mem_classify(src, 0, &sat);
    return mock_copy(dst, src, n, kind, NULL, !(dat == MOCK_AT_DEVICE && sat == MOCK_AT_DEVICE));
}

static cudaError_t mock_peer_check(int a, int b)
{
    return a >= 0 && a < mock_ndevices() && b >= 0 && b < mock_ndevices() ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_dev, const void *src, int src_dev, size_t n, cudaStream_t stream)
{
    MOCK_ENTER();
    if (mock_peer_check(dst_dev, src_dev) != cudaSuccess)
        return mock_err(cudaErrorInvalidDevice);
    return mock_copy(dst, src, n, cudaMemcpyDeviceToDevice, stream, 0);
}

cudaError_t cudaMemcpyPeer(void *dst, int dst_dev, const void *src, int src_dev, size_t n)
{
    MOCK_ENTER();
    if (mock_peer_check(dst_dev, src_dev) != cudaSuccess)
        return mock_err(cudaErrorInvalidDevice);
    return mock_copy(dst, src, n, cudaMemcpyDeviceToDevice, NULL, 0);
}

static cudaError_t mock_set(void *dst, int value, size_t n, cudaStream_t stream, int from_sync_api)
{
    MOCK_ENTER();
    mock_at_t at;
    cudaError_t e = mock_mem_classify(dst, n, &at);
    if (e == cudaSuccess && at == MOCK_AT_PAGEABLE && n) {
        mock_say("cudaMemset of %zu bytes at %p: pageable host memory", n, dst);
        e = cudaErrorInvalidValue;
    }
    /* cudaMemset returns at once for device memory, when done for host. */
    return mock_queue(e, MOCK_OP_SET, dst, NULL, value, n, stream, from_sync_api && at == MOCK_AT_PINNED);
}

cudaError_t cudaMemset(void *dst, int value, size_t n) { return mock_set(dst, value, n, NULL, 1); }

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t stream)
{
    return mock_set(dst, value, n, stream, 0);
}
