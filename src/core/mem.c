/*
 * mem.c - ccl_mem_alloc: host buffers suited to collectives.
 *
 * On these VMs the first touch of a 4 KiB page costs ~10 us, so a buffer
 * touched for the first time inside a collective runs at ~0.4 GB/s. Buffers
 * from here are touched once up front. They are backed by a memfd (named
 * with a random id) rather than anonymous memory so that local peers can map
 * them and copy straight out of them (single copy); where shared memory may
 * use transparent huge pages the advice is given, and on machines where it
 * may not, 4 KiB pages cost ~5% of copy bandwidth (measured with memcpy).
 */
#include "core/mem.h"
#include "core/err.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#define MEM_ALIGN (2u << 20)

typedef struct {
    char *base;
    size_t len;
    int fd;
    uint64_t id;
} mem_region_t;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_region_t *mem_regions;
static size_t mem_count, mem_cap;

int mem_find(const void *ptr, size_t len, mem_ref_t *ref)
{
    const char *p = ptr;
    int found = 0;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < mem_count && !found; i++) {
        const mem_region_t *r = &mem_regions[i];
        if (p >= r->base && len <= r->len && (size_t)(p - r->base) <= r->len - len) {
            *ref = (mem_ref_t){r->id, r->fd, r->len, (uint64_t)(p - r->base)};
            found = 1;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

static int mem_register(const mem_region_t *r)
{
    int rc = 0;
    pthread_mutex_lock(&mem_lock);
    if (mem_count == mem_cap) {
        size_t cap = mem_cap ? 2 * mem_cap : 16;
        mem_region_t *n = realloc(mem_regions, cap * sizeof *n);
        if (n) {
            mem_regions = n;
            mem_cap = cap;
        } else {
            rc = -1;
        }
    }
    if (rc == 0)
        mem_regions[mem_count++] = *r;
    pthread_mutex_unlock(&mem_lock);
    return rc;
}

static int mem_unregister(void *base, mem_region_t *out)
{
    int found = 0;
    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < mem_count; i++) {
        if (mem_regions[i].base == base) {
            *out = mem_regions[i];
            mem_regions[i] = mem_regions[--mem_count];
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

CCL_API ccl_result_t ccl_mem_alloc(void **ptr, size_t size)
{
    ccl_result_t res = CCL_SUCCESS;
    mem_region_t r = {NULL, 0, -1, 0};
    err_clear();
    if (!ptr)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_mem_alloc: ptr is NULL");
    *ptr = NULL;
    if (size == 0)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_mem_alloc: size is 0");
    if (size > SIZE_MAX / 2)
        return err_set(CCL_ERR_COUNT_OVERFLOW, "ccl_mem_alloc: size %zu is too large", size);
    /* Huge-page multiples only where a huge page can help; small buffers
     * round to pages, so that touching them up front stays cheap. From
     * 1 MiB, the smallest automatic single-copy size (core/tuner.c): a
     * 1.5 MiB buffer that peers read in place gets one huge page, not 384
     * small ones each faulting in every peer's mapping. */
    size_t align = size >= MEM_ALIGN / 2 ? MEM_ALIGN : 4096;
    r.len = (size + align - 1) / align * align;
    if (getrandom(&r.id, sizeof r.id, 0) != (ssize_t)sizeof r.id)
        CCL_FAIL(CCL_ERR_SYSTEM, "getrandom failed: %s", strerror(errno));
    char name[64];
    snprintf(name, sizeof name, "ccl-mem-%016llx", (unsigned long long)r.id);
    r.fd = memfd_create(name, MFD_CLOEXEC);
    if (r.fd < 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "ccl_mem_alloc: memfd_create failed: %s", strerror(errno));
    if (ftruncate(r.fd, (off_t)r.len) != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "ccl_mem_alloc: cannot size %zu bytes: %s", r.len, strerror(errno));
    void *base = mmap(NULL, r.len, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    if (base == MAP_FAILED)
        CCL_FAIL(CCL_ERR_SYSTEM, "ccl_mem_alloc: mmap of %zu bytes failed: %s", r.len, strerror(errno));
    r.base = base;
    madvise(r.base, r.len, MADV_HUGEPAGE); /* advice only; ignored where shmem THP is off */
    memset(r.base, 0, r.len);
    if (mem_register(&r) != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "ccl_mem_alloc: out of memory");
    *ptr = r.base;
    return CCL_SUCCESS;
out:
    if (r.base)
        munmap(r.base, r.len);
    if (r.fd >= 0)
        close(r.fd);
    return res;
}

CCL_API ccl_result_t ccl_mem_free(void *ptr)
{
    err_clear();
    mem_region_t r;
    if (!ptr)
        return CCL_SUCCESS;
    if (!mem_unregister(ptr, &r))
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_mem_free: %p was not returned by ccl_mem_alloc", ptr);
    munmap(r.base, r.len);
    close(r.fd);
    return CCL_SUCCESS;
}
