/*
 * mock_driver.c - the driver entry points that ccl reaches through the
 * runtime (cudaGetDriverEntryPoint[ByVersion]), as the mock provides them:
 * cuStreamWaitValue32 and cuStreamWriteValue32 (stream memory operations
 * on a 32-bit word) and cuMemGetAddressRange (an allocation's base and
 * size, for IPC offsets).
 *
 * A stream wait holds the stream's worker until the word meets the
 * condition, polling it as the GPU polls host memory; a write stores the
 * word with release order and wakes the mock's own waiters at once. As
 * with the driver, the word must be memory the GPU reaches: device memory
 * (its own or opened through IPC) or pinned / registered host memory (the
 * device pointer of cudaHostGetDevicePointer, the same address here).
 * Pageable host memory is refused with CUDA_ERROR_INVALID_VALUE, which is
 * the mistake the check exists to catch.
 */
#include "mock_cuda.h"

#include <string.h>

static CUresult mock_cu_init(void)
{
    cudaError_t e = mock_init();
    if (e == cudaSuccess)
        return CUDA_SUCCESS;
    return e == cudaErrorNoDevice ? CUDA_ERROR_NO_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
}

/* Queues a stream memory operation (a wait or a write of a word) after
 * the driver's checks of its word and stream. */
static CUresult mock_memop(mock_op_kind_t kind, const char *what, CUstream stream, CUdeviceptr addr, cuuint32_t value,
                           unsigned mode)
{
    mock_at_t at;
    mock_stream_t *s = NULL;
    CUresult r = mock_cu_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (addr % sizeof(uint32_t) != 0) {
        mock_say("%s: address %p is not 4-byte aligned", what, (void *)(uintptr_t)addr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (mock_mem_classify((void *)(uintptr_t)addr, sizeof(uint32_t), &at) != cudaSuccess || at == MOCK_AT_PAGEABLE) {
        mock_say("%s: %p is not memory the GPU can reach (device memory, or host memory from cudaHostAlloc "
                 "or cudaHostRegister)", what, (void *)(uintptr_t)addr);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (mock_stream_get((cudaStream_t)stream, &s) != cudaSuccess)
        return CUDA_ERROR_INVALID_HANDLE;
    mock_op_t *op = mock_op_new(kind);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->word = (volatile uint32_t *)(uintptr_t)addr;
    op->u32 = value;
    op->mode = mode;
    mock_stream_push(s, op, NULL);
    return CUDA_SUCCESS;
}

CUresult mock_cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    unsigned mode = flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH;
    if (mode > CU_STREAM_WAIT_VALUE_NOR)
        return CUDA_ERROR_INVALID_VALUE;
    return mock_memop(MOCK_OP_WAIT, "cuStreamWaitValue32", stream, addr, value, mode);
}

CUresult mock_cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    if (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
        return CUDA_ERROR_INVALID_VALUE;
    return mock_memop(MOCK_OP_WRITE, "cuStreamWriteValue32", stream, addr, value, 0);
}

CUresult mock_cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    mock_region_t r;
    CUresult res = mock_cu_init();
    if (res != CUDA_SUCCESS)
        return res;
    if (!mock_mem_find((void *)(uintptr_t)dptr, &r) || (r.kind != MOCK_MEM_DEVICE && r.kind != MOCK_MEM_IPC))
        return CUDA_ERROR_NOT_FOUND;
    if (base)
        *base = (CUdeviceptr)(uintptr_t)r.base;
    if (size)
        *size = r.size;
    return CUDA_SUCCESS;
}

/* ---- the runtime's door to the driver ------------------------------------------------ */

static const struct {
    const char *name;
    void *fn;
} mock_entry_points[] = {
    {"cuStreamWaitValue32", (void *)mock_cuStreamWaitValue32},
    {"cuStreamWriteValue32", (void *)mock_cuStreamWriteValue32},
    {"cuMemGetAddressRange", (void *)mock_cuMemGetAddressRange},
};

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
    MOCK_ENTER();
    if (!symbol || !fn)
        return mock_err(cudaErrorInvalidValue);
    *fn = NULL;
    for (size_t i = 0; i < sizeof mock_entry_points / sizeof mock_entry_points[0]; i++)
        if (strcmp(symbol, mock_entry_points[i].name) == 0)
            *fn = mock_entry_points[i].fn;
    if (status)
        *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                    enum cudaDriverEntryPointQueryResult *status)
{
    return cudaGetDriverEntryPointByVersion(symbol, fn, CUDART_VERSION, flags, status);
}
