/*
 * shm_board.c - the one-shot board (see shm_board.h).
 */
#include "transport/shm_board.h"
#include "core/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define BOARD_MAGIC 0x63636c6fu /* "cclo" */
#define BOARD_MAX_RANKS 64
/* Banks the calls rotate through: a rank that waits for nobody (a
 * broadcast's root) may run BOARD_BANKS - 1 calls ahead of the slowest
 * reader before it waits, as MPI's eager sends let a root run ahead. With
 * two banks, a loop of small broadcasts on oversubscribed cores paid a
 * sleep and a wake-up per call. */
#define BOARD_BANKS 8

struct shm_board_hdr {
    uint32_t magic, nranks;
    uint64_t slot_bytes;
    _Atomic uint32_t poisoned;
    char pad0[64 - 20];
    struct {
        _Atomic uint32_t arrived;  /* grows by nranks per call on this bank */
        _Atomic uint32_t waiters;
        _Atomic uint32_t released; /* grows by nranks per call: ranks done reading it */
        _Atomic uint32_t rwaiters;
        char pad[64 - 16];
    } bank[BOARD_BANKS];
    /* Calls each rank has published, for naming the missing ones. */
    _Atomic uint32_t published[BOARD_MAX_RANKS];
    /* Collectives each rank has entered (shm_board_enter), on any path. */
    _Atomic uint64_t entered[BOARD_MAX_RANKS];
};
_Static_assert(sizeof(struct shm_board_hdr) <= 4096, "the board header must fit its page");

static size_t board_len(int nranks, size_t slot_bytes)
{
    return 4096 + BOARD_BANKS * (size_t)nranks * slot_bytes;
}

static ccl_result_t board_map(shm_board_t *b, int fd, size_t len)
{
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return err_set(CCL_ERR_SYSTEM, "mmap of the one-shot board failed: %s", strerror(errno));
    b->hdr = map;
    b->map_len = len;
    b->slots = (char *)map + 4096;
    return CCL_SUCCESS;
}

ccl_result_t shm_board_create(shm_board_t *b, int nranks, size_t slot_bytes, const char *name)
{
    void *map = NULL;
    memset(b, 0, sizeof *b);
    if (nranks > BOARD_MAX_RANKS)
        return err_set(CCL_ERR_INTERNAL, "one-shot board: %d ranks, at most %d", nranks, BOARD_MAX_RANKS);
    size_t len = board_len(nranks, slot_bytes);
    ccl_result_t res = shm_segment_create(name, len, &map);
    if (res != CCL_SUCCESS) {
        err_prefix("one-shot board: ");
        return res;
    }
    b->hdr = map;
    b->map_len = len;
    b->slots = (char *)map + 4096;
    memset(b->hdr, 0, len); /* first touch now, not inside a collective */
    b->hdr->nranks = (uint32_t)nranks;
    b->hdr->slot_bytes = slot_bytes;
    b->hdr->magic = BOARD_MAGIC;
    b->nranks = nranks;
    b->rank = 0;
    b->slot_bytes = slot_bytes;
    return CCL_SUCCESS;
}

ccl_result_t shm_board_open(shm_board_t *b, const char *name, int nranks, int rank)
{
    ccl_result_t res = CCL_SUCCESS;
    struct stat st;
    memset(b, 0, sizeof *b);
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "shm_open(%s) of the one-shot board failed: %s", name, strerror(errno));
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < 4096)
        CCL_FAIL(CCL_ERR_REMOTE, "one-shot board %s is too small", name);
    CCL_TRY(board_map(b, fd, (size_t)st.st_size));
    /* slot_bytes is bounded by the file before board_len multiplies it: a
     * corrupt one must not wrap around to the right length. */
    if (nranks < 1 || b->hdr->magic != BOARD_MAGIC || b->hdr->nranks != (uint32_t)nranks ||
        b->hdr->slot_bytes > ((size_t)st.st_size - 4096) / (2 * (size_t)nranks) ||
        board_len(nranks, b->hdr->slot_bytes) != (size_t)st.st_size) {
        munmap(b->hdr, b->map_len);
        b->hdr = NULL;
        CCL_FAIL(CCL_ERR_REMOTE, "one-shot board %s has a corrupt header", name);
    }
    b->nranks = nranks;
    b->rank = rank;
    b->slot_bytes = b->hdr->slot_bytes;
out:
    if (fd >= 0)
        close(fd);
    return res;
}

void shm_board_poison(shm_board_t *b)
{
    if (!b->hdr)
        return;
    atomic_store(&b->hdr->poisoned, 1);
    for (int k = 0; k < BOARD_BANKS; k++) {
        wait_wake(&b->hdr->bank[k].arrived, &b->hdr->bank[k].waiters);
        wait_wake(&b->hdr->bank[k].released, &b->hdr->bank[k].rwaiters);
    }
}

void shm_board_close(shm_board_t *b)
{
    if (b->hdr)
        munmap(b->hdr, b->map_len);
    memset(b, 0, sizeof *b);
}

typedef struct {
    shm_board_t *b;
    const wait_policy_t *outer;
    uint32_t call;
} board_check_t;

static ccl_result_t board_check(void *arg, uint64_t waited_ns)
{
    board_check_t *c = arg;
    ccl_result_t res = c->outer->check ? c->outer->check(c->outer->arg, waited_ns) : CCL_SUCCESS;
    if (res == CCL_SUCCESS && atomic_load(&c->b->hdr->poisoned))
        return err_set(CCL_ERR_REMOTE, "a local rank aborted or failed during a one-shot collective");
    if (res == CCL_ERR_TIMEOUT) {
        char missing[256] = "";
        size_t o = 0;
        for (int q = 0; q < c->b->nranks && o + 16 < sizeof missing; q++)
            if ((int32_t)(atomic_load(&c->b->hdr->published[q]) - c->call) < 0)
                o += (size_t)snprintf(missing + o, sizeof missing - o, " %d", q);
        err_prefix("one-shot collective: ranks that never arrived:%s: ", missing);
    }
    return res;
}

/* Waits until word passes target (counters only grow, and wrap). */
static ccl_result_t board_wait_count(_Atomic uint32_t *word, _Atomic uint32_t *waiters, uint32_t target,
                                     const wait_policy_t *policy)
{
    uint32_t now = atomic_load_explicit(word, memory_order_acquire);
    while ((int32_t)(now - target) < 0) {
        ccl_result_t res = wait_change(word, now, waiters, policy);
        if (res != CCL_SUCCESS)
            return res;
        now = atomic_load_explicit(word, memory_order_acquire);
    }
    return CCL_SUCCESS;
}

ccl_result_t shm_board_exchange(shm_board_t *b, const void *data, size_t bytes, board_wait_t wait_for, int root,
                                const wait_policy_t *policy, const char **bank_out)
{
    ccl_result_t res = CCL_SUCCESS;
    /* A rank that posts and leaves (a broadcast's root) never sleeps on
     * the board, so it looks for a peer's abort here. One that waits finds
     * it in its waits, and only if what it waits for is missing: a peer
     * that failed after this call's data was all posted (a root that posted,
     * then died) does not undo the call. */
    if (wait_for == BOARD_WAIT_NONE && atomic_load(&b->hdr->poisoned))
        return err_set(CCL_ERR_REMOTE, "a local rank aborted or failed: the one-shot board is unusable");
    uint32_t call = ++b->calls;
    int k = (int)(call % BOARD_BANKS);
    char *bank = b->slots + (size_t)k * (size_t)b->nranks * b->slot_bytes;
    board_check_t ctx = {b, policy, call};
    wait_policy_t inner = {board_check, &ctx, policy->spin, policy->yield};
    /* The bank's previous call (call - BOARD_BANKS) may still be read by a
     * rank that did not wait for us (broadcast, reduce): our slot is free
     * once every rank released it. After a call where all waited for all,
     * it is. */
    uint32_t uses = (call + BOARD_BANKS - 1) / BOARD_BANKS; /* this call included */
    CCL_TRY(board_wait_count(&b->hdr->bank[k].released, &b->hdr->bank[k].rwaiters, (uses - 1) * (uint32_t)b->nranks,
                             &inner));
    memcpy(bank + (size_t)b->rank * b->slot_bytes, data, bytes);
    atomic_store_explicit(&b->hdr->published[b->rank], call, memory_order_release);
    atomic_fetch_add_explicit(&b->hdr->bank[k].arrived, 1, memory_order_acq_rel);
    wait_wake(&b->hdr->bank[k].arrived, &b->hdr->bank[k].waiters);
    if (wait_for == BOARD_WAIT_ALL) {
        CCL_TRY(board_wait_count(&b->hdr->bank[k].arrived, &b->hdr->bank[k].waiters, uses * (uint32_t)b->nranks,
                                 &inner));
    } else if (wait_for == BOARD_WAIT_ROOT) {
        /* Every arrival changes the counter; wait until one was the root's. */
        for (;;) {
            uint32_t now = atomic_load_explicit(&b->hdr->bank[k].arrived, memory_order_acquire);
            if ((int32_t)(atomic_load_explicit(&b->hdr->published[root], memory_order_acquire) - call) >= 0)
                break;
            CCL_TRY(wait_change(&b->hdr->bank[k].arrived, now, &b->hdr->bank[k].waiters, &inner));
        }
    }
    *bank_out = bank;
out:
    return res;
}

void shm_board_release(shm_board_t *b)
{
    int k = (int)(b->calls % BOARD_BANKS);
    atomic_fetch_add_explicit(&b->hdr->bank[k].released, 1, memory_order_acq_rel);
    wait_wake(&b->hdr->bank[k].released, &b->hdr->bank[k].rwaiters);
}

void shm_board_enter(shm_board_t *b, uint64_t ncoll)
{
    atomic_store_explicit(&b->hdr->entered[b->rank], ncoll, memory_order_relaxed);
}

int shm_board_behind(const shm_board_t *b, uint64_t ncoll, int *ranks, uint64_t *at, int max)
{
    int n = 0;
    for (int q = 0; q < b->nranks && n < max; q++) {
        uint64_t e = atomic_load_explicit(&b->hdr->entered[q], memory_order_relaxed);
        if (e < ncoll) {
            ranks[n] = q;
            at[n++] = e;
        }
    }
    return n;
}
