/*
 * mock_ipc.c - CUDA IPC of device memory across processes, for the mock.
 *
 * Device memory is a memfd (mock_mem.c), so exporting it is naming the
 * descriptor: the 64-byte handle carries the exporter's pid, the
 * descriptor number and the memfd's inode (the allocation's identity,
 * which catches a descriptor number reused after a free). Opening maps
 * /proc/<pid>/fd/<n> MAP_SHARED: the same pages, so stores on either side
 * are seen by the other, as with real IPC on one GPU.
 *
 * As in CUDA: the handle names the whole allocation, whatever pointer
 * into it was passed, and opening returns the allocation's base (a peer
 * adds the offset itself, e.g. from cuMemGetAddressRange); a process
 * cannot open its own handle; opening one allocation twice returns the
 * same address, reference counted until the last cudaIpcCloseMemHandle.
 * The exporter must still be alive when the handle is opened.
 */
#include "mock_cuda.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MOCK_MEM_MAGIC 0x4d4b434du /* "MCKM": a memory handle of this mock */

int mock_ipc_open_fd(pid_t pid, int fd, ino_t ino)
{
    char path[64];
    struct stat sb;
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
    int f = open(path, O_RDWR | O_CLOEXEC);
    if (f < 0)
        return -1;
    if (fstat(f, &sb) != 0 || sb.st_ino != ino) {
        close(f);
        return -1;
    }
    return f;
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *p)
{
    MOCK_ENTER();
    mock_region_t r;
    if (!handle)
        return mock_err(cudaErrorInvalidValue);
    if (!mock_mem_find(p, &r) || r.kind != MOCK_MEM_DEVICE) {
        mock_say("cudaIpcGetMemHandle(%p): not device memory of this process (cudaMalloc)", p);
        return mock_err(cudaErrorInvalidValue);
    }
    mock_wire_t w = {MOCK_MEM_MAGIC, (int32_t)getpid(), r.fd, r.device, (uint64_t)r.ino, (uint64_t)r.size};
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &w, sizeof w);
    return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void **out, cudaIpcMemHandle_t handle, unsigned int flags)
{
    MOCK_ENTER();
    mock_wire_t w;
    mock_region_t r;
    memcpy(&w, handle.reserved, sizeof w);
    if (!out || (flags & ~(unsigned)cudaIpcMemLazyEnablePeerAccess) || w.magic != MOCK_MEM_MAGIC)
        return mock_err(cudaErrorInvalidValue);
    *out = NULL;
    if (w.pid == (int32_t)getpid()) {
        mock_say("cudaIpcOpenMemHandle: the handle is of this process's own memory (CUDA refuses that)");
        return mock_err(cudaErrorDeviceUninitialized);
    }
    if (mock_mem_ipc_ref(w.pid, (ino_t)w.ino, &r)) {
        *out = r.base;
        return cudaSuccess;
    }
    int fd = mock_ipc_open_fd(w.pid, w.fd, (ino_t)w.ino);
    if (fd < 0) {
        mock_say("cudaIpcOpenMemHandle: allocation %d:%d is gone (its process exited or freed it)", (int)w.pid,
                 (int)w.fd);
        return mock_err(cudaErrorInvalidValue);
    }
    void *p = mmap(NULL, (size_t)w.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return mock_err(cudaErrorMapBufferObjectFailed);
    r = (mock_region_t){.base = p, .size = (size_t)w.size, .kind = MOCK_MEM_IPC, .device = w.device, .fd = -1,
                        .ino = (ino_t)w.ino, .owner = w.pid, .refs = 1};
    if (mock_mem_add(&r) != cudaSuccess) {
        munmap(p, r.size);
        return mock_err(cudaErrorMemoryAllocation);
    }
    *out = p;
    return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *p)
{
    MOCK_ENTER();
    mock_region_t r;
    int last = mock_mem_ipc_unref(p, &r);
    if (last < 0) {
        mock_say("cudaIpcCloseMemHandle(%p): not an address cudaIpcOpenMemHandle returned", p);
        return mock_err(cudaErrorInvalidValue);
    }
    if (last)
        munmap(r.base, r.size);
    return cudaSuccess;
}
