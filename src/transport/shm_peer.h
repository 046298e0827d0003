/*
 * shm_peer.h - reading a local peer's buffer in place (single copy).
 *
 * A sender may put a reference instead of data into a FIFO slot: the id, fd
 * and length of a ccl_mem_alloc buffer, an offset and the virtual address.
 * The receiver maps that buffer once (through /proc/<pid>/fd, checked against
 * the id in the memfd's name) and reads it directly; mappings are cached per
 * communicator. Where mapping is refused, process_vm_readv copies from the
 * virtual address instead. A rank that helps a reader copy maps the
 * reader's destination buffer writable the same way (shm_help.h).
 */
#ifndef CCL_TRANSPORT_SHM_PEER_H
#define CCL_TRANSPORT_SHM_PEER_H

#include "ccl.h"
#include "base/mem.h"
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SHM_REF_MAGIC 0x63636c72u /* "cclr" */

/* What a by-reference slot holds. `pid` owns the buffer: usually the
 * sender, but a broadcast forwards the root's references unchanged. */
typedef struct {
    uint32_t magic;
    int32_t pid;
    int32_t fd;
    uint64_t id;
    uint64_t alloc_len;
    uint64_t offset;
    uint64_t len;
    uint64_t vaddr;
} shm_ref_t;

typedef struct {
    pid_t pid;
    uint64_t id;
    const char *base;
    size_t len;
    uint64_t last_use;
    int writable;
} shm_peer_map_t;

typedef struct {
    shm_peer_map_t *maps;
    int n, cap;
    uint64_t clock;
} shm_peer_cache_t;

/* Returns a pointer to ref->len readable bytes of the peer's buffer, or
 * copies them to `bounce` (process_vm_readv) and returns bounce. */
ccl_result_t shm_peer_read(shm_peer_cache_t *cache, pid_t pid, const shm_ref_t *ref, void *bounce,
                           const void **data);
/* A writable pointer to ref->len bytes of the peer's buffer (a peer
 * that offered us its destination to fill, shm_help.h); an error where it
 * cannot be mapped: there is no fallback, the caller just does not help. */
ccl_result_t shm_peer_writable(shm_peer_cache_t *cache, pid_t pid, const shm_ref_t *ref, void **data);
/* A read-only pointer to the peer's bytes, mapped; an error where they
 * cannot be (no process_vm_readv fallback: the fused 2-rank allreduce,
 * core/exec_pair.c, then goes the FIFO way). */
ccl_result_t shm_peer_mapped(shm_peer_cache_t *cache, pid_t pid, const shm_ref_t *ref, const void **data);
/* A reference to `len` bytes at `data` in our registered buffer `buf`,
 * whose range (mem_find) starts at `base`. */
shm_ref_t shm_ref_make(pid_t pid, const mem_ref_t *buf, const void *base, const void *data, size_t len);
void shm_peer_cache_close(shm_peer_cache_t *cache);

#endif
