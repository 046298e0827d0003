/*
 * nccl_mem.c - ncclMemAlloc/Free, buffer registration and windows.
 *
 * ccl_mem_alloc gives host memory that ccl's local peers can map (single
 * copy); there is no device allocation yet, so ncclMemAlloc returns host
 * memory. ccl has no registration call: any buffer works with every
 * collective and ccl_mem_alloc buffers are the fast ones, so
 * ncclCommRegister only checks its arguments and hands back a handle that
 * ncclCommDeregister accepts once. The handles are kept in a list so that a
 * bad or repeated deregistration is an error, not a double free. Symmetric
 * windows (ncclCommWindowRegister) have no ccl counterpart.
 */
#include "nccl/nccl_types.h"

#include <pthread.h>
#include <stdlib.h>

NCCL_FORWARD(ncclMemAlloc, (void **ptr, size_t size), ccl_mem_alloc(ptr, size), NULL);
NCCL_FORWARD(ncclMemFree, (void *ptr), ccl_mem_free(ptr), NULL);

typedef struct registration {
    struct registration *next;
    ccl_comm_t comm;
    void *buff;
    size_t size;
} registration_t;

static pthread_mutex_t regs_lock = PTHREAD_MUTEX_INITIALIZER;
static registration_t *regs;

NCCL_API nccl_result_t ncclCommRegister(const ccl_comm_t comm, void *buff, size_t size, void **handle)
{
    int count;
    ccl_result_t live = ccl_comm_count(comm, &count);
    if (live != CCL_SUCCESS)
        return nccl_check(live, comm);
    if (!buff || size == 0 || !handle)
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT, "ncclCommRegister: buff %p, size %zu, handle %p: none may be 0",
                         buff, size, (void *)handle);
    registration_t *reg = malloc(sizeof *reg);
    if (!reg)
        return nccl_fail(NCCL_ABI_SYSTEM_ERROR, "ncclCommRegister: out of memory");
    *reg = (registration_t){NULL, comm, buff, size};
    pthread_mutex_lock(&regs_lock);
    reg->next = regs;
    regs = reg;
    pthread_mutex_unlock(&regs_lock);
    *handle = reg;
    return NCCL_ABI_SUCCESS;
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommRegister, (const ccl_comm_t comm, void *buff, size_t size, void **handle));

/* Unlinks handle if it is a live registration of comm; NULL otherwise. */
static registration_t *registration_take(ccl_comm_t comm, void *handle)
{
    registration_t *found = NULL;
    pthread_mutex_lock(&regs_lock);
    for (registration_t **p = &regs; *p; p = &(*p)->next) {
        if (*p == handle && (*p)->comm == comm) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&regs_lock);
    return found;
}

NCCL_API nccl_result_t ncclCommDeregister(const ccl_comm_t comm, void *handle)
{
    registration_t *reg = registration_take(comm, handle);
    if (!reg)
        return nccl_fail(NCCL_ABI_INVALID_ARGUMENT,
                         "ncclCommDeregister: handle %p is not a live registration of this communicator", handle);
    free(reg);
    return NCCL_ABI_SUCCESS;
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommDeregister, (const ccl_comm_t comm, void *handle));

NCCL_API nccl_result_t ncclCommWindowRegister(ccl_comm_t comm, void *buff, size_t size, void **win, int win_flags)
{
    return nccl_fail(NCCL_ABI_INVALID_USAGE,
                     "ncclCommWindowRegister: symmetric memory windows are not supported by ccl");
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommWindowRegister,
                   (ccl_comm_t comm, void *buff, size_t size, void **win, int win_flags));

NCCL_API nccl_result_t ncclCommWindowDeregister(ccl_comm_t comm, void *win)
{
    return nccl_fail(NCCL_ABI_INVALID_USAGE,
                     "ncclCommWindowDeregister: symmetric memory windows are not supported by ccl");
}
NCCL_PROFILE_ALIAS(nccl_result_t, ncclCommWindowDeregister, (ccl_comm_t comm, void *win));
