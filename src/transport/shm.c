/*
 * shm.c - the shared-memory FIFO transport (see shm.h for the protocol).
 */
#include "transport/shm.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "base/param.h"
#include "base/log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_MAGIC 0x63636c66u /* "cclf" */
#define SHM_LINE 64
#define SHM_SLOT_KIND_BIT 0x80000000u

/* The segment header. Each counter and its waiter count sit on their own
 * cache line: the sender writes only `tail`, the receiver only `head`. */
struct shm_fifo {
    _Atomic uint32_t magic;      /* written last by the creator */
    uint32_t nslots;
    uint64_t slot_size;
    uint64_t slots_offset;
    _Atomic uint32_t poisoned;   /* set by either side on abort/failure */
    _Atomic uint32_t why_state;  /* the poisoner's reason: 0 none, 1 being written, 2 there */
    _Atomic uint32_t closed;     /* set by either side that closed its end (destroy or abort) */
    uint32_t checksum;           /* 1: each data slot's CRC-32C is in the page after this one (CCL_CHECKSUM=2) */
    char pad0[SHM_LINE - 40];
    _Atomic uint32_t tail;
    char pad1[SHM_LINE - 4];
    _Atomic uint32_t head;
    char pad2[SHM_LINE - 4];
    /* Off the counters' lines (wait.h): each side reads the other's
     * sleeper count right after moving its counter. */
    _Atomic uint32_t tail_waiters;
    _Atomic uint32_t head_waiters;
    char pad3[SHM_LINE - 8];
    /* Per slot: the payload length, with SHM_SLOT_KIND_BIT set for a
     * reference; written by the sender before it publishes tail. Lives in
     * the header page, after the counters. */
    uint32_t kind[];
};

/* Why the FIFO was poisoned, in the header page after the slot kinds: the
 * first poisoner with a reason claims it (why_state 0 -> 1), writes the text
 * and publishes it (2), so that the peer's error names the cause (a dead
 * rank, a cut link) instead of only saying that the peer gave up. */
#define SHM_WHY_OFFSET 3072
#define SHM_WHY_MAX 1024

_Static_assert(sizeof(struct shm_fifo) == 4 * SHM_LINE, "shm_fifo header layout");
_Static_assert(4 * SHM_LINE + SHM_MAX_SLOTS * sizeof(uint32_t) <= SHM_WHY_OFFSET, "slot kinds fit the header page");
_Static_assert(SHM_WHY_OFFSET + SHM_WHY_MAX <= 4096, "the reason fits the header page");

/* With checksums, the page after the header holds one CRC-32C per slot. */
#define SHM_CRC_OFFSET 4096
_Static_assert(SHM_MAX_SLOTS * sizeof(uint32_t) <= 4096, "slot checksums fit a page");

static size_t shm_map_len(uint32_t nslots, size_t slot_size, int checksum, size_t *slots_offset)
{
    /* Slots start on a page so that large slot copies stay page-aligned. */
    *slots_offset = checksum ? 8192 : 4096;
    return *slots_offset + (size_t)nslots * slot_size;
}

/* A data slot's checksum: its place in the stream and its bytes, so that
 * a stale slot fails like changed bytes do. */
static uint32_t shm_slot_crc(uint32_t pos, const void *data, size_t len)
{
    return crc32c_update(crc32c_update(CRC32C_INIT, &pos, sizeof pos), data, len);
}

ccl_result_t shm_name_new(char name[SHM_NAME_MAX], const char *prefix)
{
    uint64_t rnd[2];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return err_set(CCL_ERR_SYSTEM, "getrandom failed: %s", strerror(errno));
    snprintf(name, SHM_NAME_MAX, "%s%016llx%016llx", prefix, (unsigned long long)rnd[0],
             (unsigned long long)rnd[1]);
    return CCL_SUCCESS;
}

ccl_result_t shm_segment_create(const char *name, size_t len, void **map_out)
{
    ccl_result_t res = CCL_SUCCESS;
    /* O_EXCL: a name someone pre-created (it went round the bootstrap
     * before this) is refused, never used. */
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "shm_open(%s) failed: %s", name, strerror(errno));
    if (ftruncate(fd, (off_t)len) != 0) {
        shm_unlink(name);
        CCL_FAIL(CCL_ERR_SYSTEM, "ftruncate of %zu-byte segment %s failed: %s (is /dev/shm full?)",
                 len, name, strerror(errno));
    }
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        shm_unlink(name);
        CCL_FAIL(CCL_ERR_SYSTEM, "mmap of segment %s failed: %s", name, strerror(errno));
    }
    *map_out = map;
out:
    if (fd >= 0)
        close(fd);
    return res;
}

ccl_result_t shm_segment_open(const char *name, size_t len, void **map_out)
{
    ccl_result_t res = CCL_SUCCESS;
    struct stat st;
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "shm_open(%s) of a peer's segment failed: %s", name, strerror(errno));
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != len)
        CCL_FAIL(CCL_ERR_REMOTE, "peer segment %s has %lld bytes, not %zu", name, (long long)st.st_size, len);
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        CCL_FAIL(CCL_ERR_SYSTEM, "mmap of peer segment %s failed: %s", name, strerror(errno));
    *map_out = map;
out:
    if (fd >= 0)
        close(fd);
    return res;
}

ccl_result_t shm_conn_create(shm_conn_t *conn, uint32_t nslots, size_t slot_size, const char *name,
                             int pretouch)
{
    void *map = NULL;
    size_t slots_offset = 0;
    /* The receiver decides, for both ends (the sender reads the header). */
    int checksum = param_int(PARAM_CHECKSUM) >= 2;
    size_t len = shm_map_len(nslots, slot_size, checksum, &slots_offset);
    memset(conn, 0, sizeof *conn);
    if (nslots < 1 || nslots > SHM_MAX_SLOTS || slot_size < sizeof(shm_ref_t) || slot_size >= SHM_SLOT_MAX_BYTES)
        return err_set(CCL_ERR_INTERNAL, "shm: %u slots of %zu bytes is not a valid FIFO", nslots, slot_size);
    ccl_result_t res = shm_segment_create(name, len, &map);
    if (res != CCL_SUCCESS)
        return res;
    /* Touch every page now, at init: first touch is slow on these VMs and
     * must not land inside a timed collective. Connections that only some
     * collectives use skip it (ftruncate already gives zeroed pages) so that
     * init stays cheap with a connection to every peer. */
    memset(map, 0, pretouch ? len : slots_offset);
    shm_fifo_t *f = map;
    f->nslots = nslots;
    f->slot_size = slot_size;
    f->slots_offset = slots_offset;
    f->checksum = (uint32_t)checksum;
    atomic_store(&f->magic, SHM_MAGIC);
    conn->fifo = f;
    conn->crcs = checksum ? (uint32_t *)((char *)map + SHM_CRC_OFFSET) : NULL;
    conn->map_len = len;
    conn->slots = (char *)map + slots_offset;
    conn->nslots = nslots;
    conn->slot_size = slot_size;
    return CCL_SUCCESS;
}

/* MADV_POPULATE_WRITE (Linux 5.14) faults a range in for writing in one
 * call, without touching its contents. Where the kernel lacks it, one
 * atomic add of zero per page does the same: a write fault that cannot
 * lose a peer's concurrent store (a rank that finished init may already
 * be sending into a FIFO its receiver is still pre-faulting). */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

void shm_conn_prefault(shm_conn_t *conn)
{
    /* The proxy's end of a net FIFO (map_len 0) shares the executor's
     * pages: faulting the executor's end covers both. */
    if (!conn->fifo || !conn->map_len)
        return;
    char *base = (char *)conn->fifo;
    if (madvise(base, conn->map_len, MADV_POPULATE_WRITE) == 0)
        return;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    for (size_t off = 0; off < conn->map_len; off += (size_t)page)
        __atomic_fetch_add((uint32_t *)(base + off), 0, __ATOMIC_RELAXED);
}

ccl_result_t shm_conn_open(shm_conn_t *conn, const char *name)
{
    ccl_result_t res = CCL_SUCCESS;
    struct stat st;
    void *map = MAP_FAILED;
    memset(conn, 0, sizeof *conn);
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "shm_open(%s) of a peer's segment failed: %s", name, strerror(errno));
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(shm_fifo_t))
        CCL_FAIL(CCL_ERR_REMOTE, "peer segment %s is too small (%lld bytes)", name,
                 (long long)st.st_size);
    map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        CCL_FAIL(CCL_ERR_SYSTEM, "mmap of peer segment %s failed: %s", name, strerror(errno));
    shm_fifo_t *f = map;
    size_t slots_offset = 0;
    /* Never trust the header's sizes beyond what is really mapped. */
    /* Bound slot_size by the file first, so nslots * slot_size cannot wrap. */
    if (f->magic != SHM_MAGIC || f->nslots == 0 || f->nslots > SHM_MAX_SLOTS || f->slot_size < sizeof(shm_ref_t) ||
        f->slot_size >= SHM_SLOT_MAX_BYTES ||
        (size_t)st.st_size < 4096 || f->slot_size > ((size_t)st.st_size - 4096) / f->nslots || f->checksum > 1 ||
        shm_map_len(f->nslots, f->slot_size, (int)f->checksum, &slots_offset) != (size_t)st.st_size) {
        munmap(map, (size_t)st.st_size);
        CCL_FAIL(CCL_ERR_REMOTE, "peer segment %s has a corrupt header", name);
    }
    conn->fifo = f;
    conn->crcs = f->checksum ? (uint32_t *)((char *)map + SHM_CRC_OFFSET) : NULL;
    conn->map_len = (size_t)st.st_size;
    conn->slots = (char *)map + slots_offset;
    conn->nslots = f->nslots;
    conn->slot_size = f->slot_size;
    conn->is_sender = 1;
out:
    if (fd >= 0)
        close(fd);
    return res;
}

ccl_result_t shm_conn_create_local(shm_conn_t *exec_end, shm_conn_t *proxy_end, int exec_sends,
                                   uint32_t nslots, size_t slot_size,
                                   void (*doorbell)(void))
{
    size_t slots_offset = 0;
    size_t len = shm_map_len(nslots, slot_size, 0, &slots_offset); /* one process: no checksums */
    memset(exec_end, 0, sizeof *exec_end);
    memset(proxy_end, 0, sizeof *proxy_end);
    if (nslots < 1 || nslots > SHM_MAX_SLOTS || slot_size < sizeof(shm_ref_t) || slot_size >= SHM_SLOT_MAX_BYTES)
        return err_set(CCL_ERR_INTERNAL, "shm: %u slots of %zu bytes is not a valid FIFO", nslots, slot_size);
    /* Anonymous memory: only this process's threads use it, and pages fault
     * in as slots are first used. Huge pages where THP allows them: a
     * connection first used inside a timed loop (recursive doubling's
     * partners are not the ring's) then pays a fault per 2 MiB instead of
     * one per 4 KiB page (~11 us each on these VMs, ~20 ms per 8 MiB FIFO).
     * Advice only: without THP the pages stay small. */
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return err_set(CCL_ERR_SYSTEM, "mmap of a %zu-byte net FIFO failed: %s", len, strerror(errno));
    if (len >= (2u << 20) && madvise(map, len, MADV_HUGEPAGE) != 0)
        LOG_INFO(SUB_NET, "net FIFO: no transparent huge pages (%s); 4 KiB pages", strerror(errno));
    shm_fifo_t *f = map;
    f->nslots = nslots;
    f->slot_size = slot_size;
    f->slots_offset = slots_offset;
    atomic_store(&f->magic, SHM_MAGIC);
    shm_conn_t view = {.fifo = f, .map_len = len, .slots = (char *)map + slots_offset, .nslots = nslots,
                       .slot_size = slot_size, .via_net = 1};
    *exec_end = view;
    *proxy_end = view;
    exec_end->is_sender = exec_sends;
    exec_end->doorbell = doorbell;
    proxy_end->is_sender = !exec_sends;
    proxy_end->map_len = 0; /* the executor's end owns the mapping */
    return CCL_SUCCESS;
}

/* The executor's end of a net FIFO tells the proxy it has work. */
static void shm_ring_doorbell(shm_conn_t *conn)
{
    if (conn->doorbell)
        conn->doorbell();
}

ccl_result_t shm_name_check(const char *name, size_t len, const char *from)
{
    const char *end = memchr(name, '\0', len);
    size_t at = 5, n = end ? (size_t)(end - name) : 0;
    int ok = end && n > at && strncmp(name, "/ccl-", at) == 0;
    if (ok && n == at + 33 && name[at] == 'b') /* the one-shot board's "/ccl-b" */
        at++;
    ok = ok && n == at + 32;
    for (size_t i = at; ok && i < n; i++)
        ok = (name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f');
    if (!ok)
        return err_set(CCL_ERR_REMOTE, "%s: \"%.*s\" is not a ccl shared-memory segment name", from,
                       (int)(end ? n : (len < 64 ? len : 64)), name);
    return CCL_SUCCESS;
}

void shm_name_unlink(const char *name)
{
    if (name[0])
        shm_unlink(name);
}

void shm_conn_poison(shm_conn_t *conn, const char *why)
{
    if (!conn->fifo)
        return;
    shm_fifo_t *f = conn->fifo;
    uint32_t unclaimed = 0;
    if (why && why[0] && atomic_compare_exchange_strong(&f->why_state, &unclaimed, 1)) {
        snprintf((char *)f + SHM_WHY_OFFSET, SHM_WHY_MAX, "%s", why);
        atomic_store_explicit(&f->why_state, 2, memory_order_release);
    }
    atomic_store(&f->poisoned, 1);
    /* Wake whoever sleeps on either counter; they re-check and see poison. */
    wait_wake(&conn->fifo->tail, &conn->fifo->tail_waiters);
    wait_wake(&conn->fifo->head, &conn->fifo->head_waiters);
}

void shm_conn_close(shm_conn_t *conn)
{
    if (conn->fifo)
        atomic_store(&conn->fifo->closed, 1);
    if (conn->fifo && conn->map_len)
        munmap(conn->fifo, conn->map_len);
    memset(conn, 0, sizeof *conn);
}

/* The copy is made of printable characters only: the peer wrote it. A
 * reason still being written is waited for briefly; its writer may have
 * died meanwhile. */
const char *shm_conn_poison_why(const shm_conn_t *conn, char *buf, size_t len)
{
    const shm_fifo_t *f = conn->fifo;
    if (!f || !atomic_load(&f->poisoned))
        return NULL;
    uint32_t state = atomic_load_explicit(&f->why_state, memory_order_acquire);
    for (int i = 0; state == 1 && i < 1000; i++) {
        sched_yield();
        state = atomic_load_explicit(&f->why_state, memory_order_acquire);
    }
    if (state != 2 || len == 0)
        return NULL;
    const char *src = (const char *)f + SHM_WHY_OFFSET;
    size_t n = 0;
    for (; n + 1 < len && n < SHM_WHY_MAX && src[n]; n++)
        buf[n] = isprint((unsigned char)src[n]) ? src[n] : '?';
    buf[n] = '\0';
    return buf;
}

/* Poison is this layer's own failure signal; the caller's check (abort,
 * liveness, deadline) runs after it. */
typedef struct {
    shm_conn_t *conn;
    const wait_policy_t *outer;
} shm_check_t;

static ccl_result_t shm_check(void *arg, uint64_t waited_ns)
{
    shm_check_t *c = arg;
    /* The caller's check first: when our own comm was aborted (which also
     * poisons the connection), that is the error to report. */
    ccl_result_t res = c->outer->check ? c->outer->check(c->outer->arg, waited_ns) : CCL_SUCCESS;
    if (res == CCL_SUCCESS && atomic_load(&c->conn->fifo->poisoned)) {
        char why[SHM_WHY_MAX];
        if (shm_conn_poison_why(c->conn, why, sizeof why))
            res = err_set(err_remote_code(why), "%s", why);
        else
            res = err_set(CCL_ERR_REMOTE, "the peer aborted or failed on this connection");
    }
    return res;
}

static ccl_result_t shm_wait_counter(shm_conn_t *conn, _Atomic uint32_t *word, uint32_t old,
                                     _Atomic uint32_t *waiters, const wait_policy_t *policy)
{
    if (atomic_load_explicit(word, memory_order_acquire) != old)
        return CCL_SUCCESS;
    shm_check_t ctx = {conn, policy};
    wait_policy_t inner = {shm_check, &ctx, policy->spin, policy->yield, policy->drive, policy->drive_arg};
    return wait_change(word, old, waiters, &inner);
}

ccl_result_t shm_recv_wait(shm_conn_t *conn, const wait_policy_t *policy, const void **slot)
{
    shm_fifo_t *f = conn->fifo;
    /* Data ready when tail != head; the receiver is the only writer of head,
     * so conn->pos is its exact value. */
    ccl_result_t res = shm_wait_counter(conn, &f->tail, conn->pos, &f->tail_waiters, policy);
    if (res != CCL_SUCCESS)
        return res;
    *slot = conn->slots + (size_t)(conn->pos % conn->nslots) * conn->slot_size;
    return CCL_SUCCESS;
}

void shm_recv_done(shm_conn_t *conn)
{
    shm_fifo_t *f = conn->fifo;
    conn->pos++;
    atomic_store_explicit(&f->head, conn->pos, memory_order_release);
    wait_wake(&f->head, &f->head_waiters);
    shm_ring_doorbell(conn);
}

ccl_result_t shm_send_wait(shm_conn_t *conn, const wait_policy_t *policy, void **slot)
{
    shm_fifo_t *f = conn->fifo;
    /* A slot is free when tail - head < nslots, i.e. head != tail - nslots. */
    uint32_t full_head = conn->pos - conn->nslots;
    if ((uint32_t)(conn->pos - atomic_load_explicit(&f->head, memory_order_acquire)) >= conn->nslots) {
        ccl_result_t res = shm_wait_counter(conn, &f->head, full_head, &f->head_waiters, policy);
        if (res != CCL_SUCCESS)
            return res;
    }
    *slot = conn->slots + (size_t)(conn->pos % conn->nslots) * conn->slot_size;
    return CCL_SUCCESS;
}

int shm_recv_ready(const shm_conn_t *conn)
{
    return atomic_load_explicit(&conn->fifo->tail, memory_order_acquire) != conn->pos;
}

int shm_send_ready(const shm_conn_t *conn)
{
    return (uint32_t)(conn->pos - atomic_load_explicit(&conn->fifo->head, memory_order_acquire)) < conn->nslots;
}

int shm_recv_is_ref(const shm_conn_t *conn)
{
    return shm_slot_is_ref_at(conn, conn->pos);
}

int shm_slot_is_ref_at(const shm_conn_t *conn, uint32_t i)
{
    return (conn->fifo->kind[i % conn->nslots] & SHM_SLOT_KIND_BIT) != 0;
}

size_t shm_recv_len(const shm_conn_t *conn)
{
    return shm_slot_len_at(conn, conn->pos);
}

/* CCL_FAULT corrupt_wire on a single-host communicator: the next data
 * slot this process posts to a checksummed FIFO gets a byte changed after
 * its checksum was taken. */
static _Atomic int shm_flip_pending;

void shm_fault_corrupt(void)
{
    atomic_store(&shm_flip_pending, 1);
}

void shm_send_post(shm_conn_t *conn, int kind, size_t len)
{
    shm_fifo_t *f = conn->fifo;
    if (conn->crcs && kind == SHM_SLOT_DATA) {
        char *slot = shm_slot_at(conn, conn->pos);
        conn->crcs[conn->pos % conn->nslots] = shm_slot_crc(conn->pos, slot, len);
        if (len && atomic_load_explicit(&shm_flip_pending, memory_order_relaxed) &&
            atomic_exchange(&shm_flip_pending, 0)) {
            slot[len / 2] ^= 0x10;
            LOG_WARN(SUB_SHM, "CCL_FAULT: corrupt_wire: shared-memory message %u changed after its checksum",
                     conn->pos);
        }
    }
    f->kind[conn->pos % conn->nslots] = (uint32_t)len | (kind == SHM_SLOT_REF ? SHM_SLOT_KIND_BIT : 0);
    conn->pos++;
    atomic_store_explicit(&f->tail, conn->pos, memory_order_release);
    wait_wake(&f->tail, &f->tail_waiters);
    shm_ring_doorbell(conn);
}

ccl_result_t shm_recv_verify(const shm_conn_t *conn)
{
    if (!conn->crcs || shm_recv_is_ref(conn))
        return CCL_SUCCESS;
    size_t len = shm_recv_len(conn);
    if (len > conn->slot_size)
        return err_set(CCL_ERR_REMOTE, "shared-memory slot %u says %zu bytes, it holds %zu", conn->pos, len,
                       conn->slot_size);
    uint32_t want = conn->crcs[conn->pos % conn->nslots];
    uint32_t got = shm_slot_crc(conn->pos, shm_slot_at(conn, conn->pos), len);
    if (got == want)
        return CCL_SUCCESS;
    return err_set(CCL_ERR_CORRUPT,
                   "message %u in shared memory " ERR_CORRUPT_MARK ": CRC-32C 0x%08x over its %zu bytes, 0x%08x "
                   "written by the sender", conn->pos, got, len, want);
}

uint32_t shm_peer_count(const shm_conn_t *conn)
{
    return atomic_load_explicit(conn->is_sender ? &conn->fifo->head : &conn->fifo->tail, memory_order_acquire);
}

void *shm_slot_at(const shm_conn_t *conn, uint32_t i)
{
    return conn->slots + (size_t)(i % conn->nslots) * conn->slot_size;
}

size_t shm_slot_len_at(const shm_conn_t *conn, uint32_t i)
{
    return conn->fifo->kind[i % conn->nslots] & ~SHM_SLOT_KIND_BIT;
}

int shm_conn_poisoned(const shm_conn_t *conn)
{
    return conn->fifo && atomic_load(&conn->fifo->poisoned);
}

int shm_conn_closed(const shm_conn_t *conn)
{
    return conn->fifo && atomic_load(&conn->fifo->closed);
}

ccl_result_t shm_send_drain(shm_conn_t *conn, const wait_policy_t *policy)
{
    shm_fifo_t *f = conn->fifo;
    for (;;) {
        uint32_t head = atomic_load_explicit(&f->head, memory_order_acquire);
        if (head == conn->pos)
            return CCL_SUCCESS;
        ccl_result_t res = shm_wait_counter(conn, &f->head, head, &f->head_waiters, policy);
        if (res != CCL_SUCCESS)
            return res;
    }
}
