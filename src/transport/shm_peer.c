/*
 * shm_peer.c - mapping local peers' registered buffers (see shm_peer.h).
 */
#include "transport/shm_peer.h"
#include "base/err.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Enough for a few live buffers per peer; the least recently used mapping
 * is dropped beyond this, so freed peer buffers do not pile up. */
#define PEER_CACHE_MAX 64

static void peer_evict_lru(shm_peer_cache_t *c)
{
    int lru = 0;
    for (int i = 1; i < c->n; i++)
        if (c->maps[i].last_use < c->maps[lru].last_use)
            lru = i;
    munmap((void *)c->maps[lru].base, c->maps[lru].len);
    c->maps[lru] = c->maps[--c->n];
}

/* Maps the peer's memfd after checking, by its name, that the fd still is
 * the buffer the reference names (fd numbers get reused). A writable
 * mapping is only ever wanted to help a reader (shm_help.h), whose buffer
 * may be gone by then without anything being wrong: its failures are
 * returned without a message. */
static ccl_result_t peer_map(shm_peer_cache_t *c, pid_t pid, const shm_ref_t *ref, int writable,
                             const shm_peer_map_t **out)
{
#define PEER_FAIL(code, ...) return writable ? (code) : err_set(code, __VA_ARGS__)
    char path[64], link[256], want[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, (int)ref->fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n < 0)
        PEER_FAIL(CCL_ERR_SYSTEM, "cannot read %s: %s", path, strerror(errno));
    link[n] = '\0';
    snprintf(want, sizeof want, "ccl-mem-%016llx", (unsigned long long)ref->id);
    if (!strstr(link, want))
        PEER_FAIL(CCL_ERR_REMOTE, "peer pid %d fd %d is not buffer %s (it is %s)", (int)pid, (int)ref->fd, want, link);
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        PEER_FAIL(CCL_ERR_SYSTEM, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    void *base = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size >= ref->alloc_len)
        /* Not MAP_POPULATE: on these VMs (a PVM guest: the hypervisor
         * shadows page tables) populating a peer's whole buffer at once
         * made the owner's own later accesses to those pages cost ~8 us a
         * page, invisible to the guest's fault counters: 4 MiB FIFO-path
         * allreduces after a 64 MiB single-copy one ran at 1.1 instead of
         * 8 GB/s, for a whole row. Faulting in on first use (16 pages per
         * fault with the kernel's fault-around) costs about as much once
         * and leaves the owner alone. Aligned as the owner's mapping is,
         * so that its huge pages (base/mem.c) are huge here too. */
        base = mem_map_shared(fd, ref->alloc_len, writable ? PROT_READ | PROT_WRITE : PROT_READ);
    int err = errno;
    close(fd);
    if (base == MAP_FAILED)
        PEER_FAIL(CCL_ERR_SYSTEM, "cannot map peer buffer %s: %s", want, strerror(err));
    if (c->n == PEER_CACHE_MAX)
        peer_evict_lru(c);
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 8;
        shm_peer_map_t *m = realloc(c->maps, (size_t)cap * sizeof *m);
        if (!m) {
            munmap(base, ref->alloc_len);
            return err_set(CCL_ERR_SYSTEM, "out of memory");
        }
        c->maps = m;
        c->cap = cap;
    }
    c->maps[c->n] = (shm_peer_map_t){pid, ref->id, base, ref->alloc_len, 0, writable};
    *out = &c->maps[c->n++];
    return CCL_SUCCESS;
#undef PEER_FAIL
}

/* ccl_mem_alloc sizes are whole pages: any other length is not one of its
 * buffers (and could not be mapped and unmapped exactly). */
static int peer_ref_ok(const shm_ref_t *ref)
{
    return ref->magic == SHM_REF_MAGIC && ref->alloc_len % 4096 == 0 && ref->offset <= ref->alloc_len &&
           ref->len <= ref->alloc_len - ref->offset;
}

/* A cached mapping of the buffer (a writable one when asked), or NULL.
 * Its length must be the reference's, which peer_map checked against the
 * memfd: a reference that claims a longer buffer under a known id gets no
 * cached mapping to overrun (it is mapped afresh, and checked). */
static const shm_peer_map_t *peer_find(shm_peer_cache_t *c, pid_t pid, const shm_ref_t *ref, int writable)
{
    for (int i = 0; i < c->n; i++)
        if (c->maps[i].pid == pid && c->maps[i].id == ref->id && c->maps[i].len == ref->alloc_len &&
            (c->maps[i].writable || !writable))
            return &c->maps[i];
    return NULL;
}

ccl_result_t shm_peer_read(shm_peer_cache_t *c, pid_t pid, const shm_ref_t *ref, void *bounce, const void **data)
{
    if (!peer_ref_ok(ref))
        return err_set(CCL_ERR_REMOTE, "malformed single-copy reference from pid %d", (int)pid);
    const shm_peer_map_t *m = peer_find(c, pid, ref, 0);
    if (!m && peer_map(c, pid, ref, 0, &m) != CCL_SUCCESS) {
        /* Mapping refused (e.g. a hardened /proc): copy through the kernel. */
        struct iovec local = {bounce, ref->len}, remote = {(void *)(uintptr_t)ref->vaddr, ref->len};
        ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (got != (ssize_t)ref->len)
            return err_set(CCL_ERR_SYSTEM, "cannot read %llu bytes from pid %d (mapping and process_vm_readv both failed: %s)",
                           (unsigned long long)ref->len, (int)pid, strerror(errno));
        *data = bounce;
        return CCL_SUCCESS;
    }
    ((shm_peer_map_t *)m)->last_use = ++c->clock;
    *data = m->base + ref->offset;
    return CCL_SUCCESS;
}

/* A mapping of the buffer, read-only or writable, without a fallback. */
static ccl_result_t peer_direct(shm_peer_cache_t *c, pid_t pid, const shm_ref_t *ref, int writable, void **data)
{
    if (!peer_ref_ok(ref))
        return err_set(CCL_ERR_REMOTE, "malformed single-copy reference from pid %d", (int)pid);
    const shm_peer_map_t *m = peer_find(c, pid, ref, writable);
    if (!m) {
        ccl_result_t res = peer_map(c, pid, ref, writable, &m);
        if (res != CCL_SUCCESS)
            return res;
    }
    ((shm_peer_map_t *)m)->last_use = ++c->clock;
    *data = (char *)m->base + ref->offset;
    return CCL_SUCCESS;
}

ccl_result_t shm_peer_writable(shm_peer_cache_t *c, pid_t pid, const shm_ref_t *ref, void **data)
{
    return peer_direct(c, pid, ref, 1, data);
}

ccl_result_t shm_peer_mapped(shm_peer_cache_t *c, pid_t pid, const shm_ref_t *ref, const void **data)
{
    void *p = NULL;
    ccl_result_t res = peer_direct(c, pid, ref, 0, &p);
    *data = p;
    return res;
}

shm_ref_t shm_ref_make(pid_t pid, const mem_ref_t *buf, const void *base, const void *data, size_t len)
{
    shm_ref_t ref = {SHM_REF_MAGIC, (int32_t)pid, buf->fd, buf->id, buf->alloc_len,
                     buf->offset + (uint64_t)((const char *)data - (const char *)base), len,
                     (uint64_t)(uintptr_t)data};
    return ref;
}

void shm_peer_cache_close(shm_peer_cache_t *c)
{
    for (int i = 0; i < c->n; i++)
        munmap((void *)c->maps[i].base, c->maps[i].len);
    free(c->maps);
    memset(c, 0, sizeof *c);
}
