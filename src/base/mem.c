/*
 * mem.c - ccl_mem_alloc: host buffers suited to collectives.
 *
 * On these VMs the first touch of a 4 KiB page costs ~10 us, so a buffer
 * touched for the first time inside a collective runs at ~0.4 GB/s. Buffers
 * from here are touched once up front. They are backed by a memfd (named
 * with a random id) rather than anonymous memory so that local peers can map
 * them and copy straight out of them (single copy).
 *
 * Buffers of 1 MiB and more get huge pages even where shared memory may not
 * use transparent huge pages by default (shmem_enabled "never", as on these
 * VMs): MADV_COLLAPSE (Linux 6.1) turns a memfd's pages into huge ones
 * whatever that setting, short of "deny", and every process that maps the
 * memfd at a huge-page-aligned address (mem_map_shared) then maps each
 * 2 MiB with a single entry. On these VMs the page tables are shadowed by
 * the hypervisor: a 64 MiB buffer was ready in 4 ms instead of 51, and two
 * threads copying 4 MiB between such buffers as a 2-rank allgather does ran
 * 120-133 us instead of 164-204 with 4 KiB pages. Where the kernel refuses,
 * the buffer keeps 4 KiB pages and works the same.
 */
#include "base/mem.h"
#include "base/err.h"
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#define MEM_ALIGN MEM_HUGE_PAGE

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older C libraries lack the name */
#endif

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

void *mem_map_shared(int fd, size_t len, int prot)
{
    if (len < MEM_HUGE_PAGE)
        return mmap(NULL, len, prot, MAP_SHARED, fd, 0);
    /* Reserve a huge page more than needed, put the mapping at the first
     * aligned address in it, give back the rest (from the page after the
     * mapping's last: munmap wants a page-aligned start). */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t mapped = (len + page - 1) / page * page;
    size_t span = mapped + MEM_HUGE_PAGE;
    char *raw = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return MAP_FAILED;
    char *at = (char *)(((uintptr_t)raw + MEM_HUGE_PAGE - 1) & ~(uintptr_t)(MEM_HUGE_PAGE - 1));
    void *p = mmap(at, len, prot, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        int err = errno;
        munmap(raw, span);
        errno = err;
        return MAP_FAILED;
    }
    if (at > raw)
        munmap(raw, (size_t)(at - raw));
    if (raw + span > at + mapped)
        munmap(at + mapped, (size_t)(raw + span - (at + mapped)));
    return p;
}

/* Asks for huge pages behind [base, base+len) (huge-page aligned). A
 * collapse needs a page present in each huge page, so one byte of each is
 * touched first; the rest is filled in by the collapse, without the
 * per-page faults. A refusal (an older kernel, shmem_enabled "deny", no
 * free huge page) only leaves 4 KiB pages: not an error. */
static void mem_collapse(char *base, size_t len)
{
    for (size_t off = 0; off < len; off += MEM_HUGE_PAGE)
        base[off] = 0;
    if (madvise(base, len, MADV_COLLAPSE) != 0)
        LOG_INFO(SUB_INIT, "ccl_mem_alloc: %zu bytes stay on small pages (MADV_COLLAPSE: %s)", len, strerror(errno));
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
    void *base = mem_map_shared(r.fd, r.len, PROT_READ | PROT_WRITE);
    if (base == MAP_FAILED)
        CCL_FAIL(CCL_ERR_SYSTEM, "ccl_mem_alloc: mmap of %zu bytes failed: %s", r.len, strerror(errno));
    r.base = base;
    if (align == MEM_ALIGN) {
        madvise(r.base, r.len, MADV_HUGEPAGE); /* advice only: where shmem THP is "advise" */
        mem_collapse(r.base, r.len);
    }
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
