/*
 * mem.h - registry of ccl_mem_alloc buffers, for single-copy transfers.
 *
 * Buffers from ccl_mem_alloc live in a memfd, so a peer process on the same
 * host can map them and read our data in place. mem_find tells whether a
 * range lies inside such a buffer and how a peer names it.
 */
#ifndef CCL_BASE_MEM_H
#define CCL_BASE_MEM_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t id;        /* random, also in the memfd's name: proves identity */
    int32_t fd;         /* the memfd in the owning process */
    uint64_t alloc_len; /* bytes of the whole allocation */
    uint64_t offset;    /* where the range starts in it */
} mem_ref_t;

/* 1 and *ref filled if [ptr, ptr+len) is inside one ccl_mem_alloc buffer. */
int mem_find(const void *ptr, size_t len, mem_ref_t *ref);

/* ccl_mem_alloc buffers of at least half a huge page are whole huge pages,
 * and backed by huge pages where the kernel lets them (mem.c). */
#define MEM_HUGE_PAGE ((size_t)2 << 20)

/* mmap(MAP_SHARED) of len bytes of fd at an address aligned to
 * MEM_HUGE_PAGE when len is at least that, so that a memfd whose pages
 * are huge is mapped with one entry per huge page. A drop-in for mmap, so
 * it answers as mmap does (MAP_FAILED and errno), not with ccl_result_t:
 * its callers turn that into their own error. */
void *mem_map_shared(int fd, size_t len, int prot);

#endif
