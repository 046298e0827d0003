/*
 * shm_board.c - the one-shot board (see shm_board.h).
 */
#include "transport/shm_board.h"
#include "base/err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define BOARD_MAGIC 0x63636c6fu /* "cclo" */
#define BOARD_MAX_RANKS 64
/* How much of the next area's slot a rank asks for ahead (shm_board_exchange). */
#define BOARD_PREFETCH_BYTES 1024
/* Calls rotate through BOARD_POSTS lines per rank (the announcement, and
 * small inputs inline) and, when their inputs do not fit a line, through
 * BOARD_AREAS slot areas. A rank that waits for nobody (a broadcast's
 * root) runs ahead of the slowest reader until it needs a line or an area
 * that reader has not released, as MPI's eager sends let a root run
 * ahead. With two banks, a loop of small broadcasts on oversubscribed
 * cores paid a sleep and a wake-up per call; lines are cheap, so small
 * calls get many; areas hold nranks slots each, so large ones get few. */

/* Every line of the board has one writer (apart from the sleeper counts,
 * on lines of their own, touched only by a rank about to sleep), so no line is
 * read-modify-written by every rank on every call, as a shared arrival
 * counter was (it bounced between all cores on each call).
 *
 * A rank's post for a call is one line: the call number and, for inputs
 * of up to BOARD_INLINE_BYTES, the data itself, so a reader that sees the
 * number has the data in the same cache-line transfer. */
struct board_post {
    _Atomic uint32_t published; /* last call posted on this line */
    uint32_t pad;
    char data[BOARD_INLINE_BYTES];
};
_Static_assert(sizeof(struct board_post) == 64, "a post is one cache line");

typedef struct {
    _Atomic uint32_t released; /* last call this rank is done reading */
    _Atomic uint32_t failed;   /* this rank failed or aborted (shm_board_poison) */
    _Atomic uint64_t entered;  /* collectives entered (shm_board_enter), on any path */
    char pad[64 - 16];
} board_rank_t;

/* Who sleeps on a rank's words: read by that rank after each post and
 * release, so kept off those lines (wait.h), and written only by a
 * sleeper. A sleeper on any of the rank's post lines counts in one
 * number; a wake on a line nobody sleeps on is a spare syscall. */
typedef struct {
    _Atomic uint32_t post_waiters;    /* ranks asleep on one of this rank's posts */
    _Atomic uint32_t release_waiters; /* ranks asleep on this rank's `released` */
    char pad[64 - 8];
} board_sleep_t;

struct shm_board_hdr {
    uint32_t magic, nranks;
    uint64_t slot_bytes;
    _Atomic uint32_t poisoned;
    char pad0[64 - 20];
    board_rank_t rank[BOARD_MAX_RANKS];
    board_sleep_t sleep[BOARD_MAX_RANKS];
};
#define BOARD_HDR_BYTES 12288
_Static_assert(sizeof(struct shm_board_hdr) <= BOARD_HDR_BYTES, "the board header must fit its pages");

/* The segment: header, then posts[BOARD_POSTS][nranks] (page-rounded),
 * then areas[BOARD_AREAS][nranks][slot_bytes]. */
static size_t board_posts_len(int nranks)
{
    return ((size_t)BOARD_POSTS * (size_t)nranks * sizeof(struct board_post) + 4095) & ~(size_t)4095;
}

static size_t board_len(int nranks, size_t slot_bytes)
{
    return BOARD_HDR_BYTES + board_posts_len(nranks) + BOARD_AREAS * (size_t)nranks * slot_bytes;
}

static ccl_result_t board_map(shm_board_t *b, int fd, size_t len)
{
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return err_set(CCL_ERR_SYSTEM, "mmap of the one-shot board failed: %s", strerror(errno));
    b->hdr = map;
    b->map_len = len;
    return CCL_SUCCESS;
}

static void board_locate(shm_board_t *b, int nranks)
{
    b->posts = (struct board_post *)((char *)b->hdr + BOARD_HDR_BYTES);
    b->slots = (char *)b->posts + board_posts_len(nranks);
}

static struct board_post *board_post(const shm_board_t *b, uint32_t call, int q)
{
    return &b->posts[(size_t)(call % BOARD_POSTS) * (size_t)b->nranks + (size_t)q];
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
    b->nranks = nranks;
    board_locate(b, nranks);
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
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < BOARD_HDR_BYTES)
        CCL_FAIL(CCL_ERR_REMOTE, "one-shot board %s is too small", name);
    CCL_TRY(board_map(b, fd, (size_t)st.st_size));
    /* slot_bytes is bounded by the file before board_len multiplies it: a
     * corrupt one must not wrap around to the right length. */
    if (nranks < 1 || b->hdr->magic != BOARD_MAGIC || b->hdr->nranks != (uint32_t)nranks ||
        b->hdr->slot_bytes > (size_t)st.st_size / (BOARD_AREAS * (size_t)nranks) ||
        board_len(nranks, b->hdr->slot_bytes) != (size_t)st.st_size) {
        munmap(b->hdr, b->map_len);
        b->hdr = NULL;
        CCL_FAIL(CCL_ERR_REMOTE, "one-shot board %s has a corrupt header", name);
    }
    b->nranks = nranks;
    b->rank = rank;
    b->slot_bytes = b->hdr->slot_bytes;
    board_locate(b, nranks);
out:
    if (fd >= 0)
        close(fd);
    return res;
}

void shm_board_poison(shm_board_t *b)
{
    if (!b->hdr)
        return;
    atomic_store(&b->hdr->rank[b->rank].failed, 1);
    atomic_store(&b->hdr->poisoned, 1);
    for (int q = 0; q < b->nranks; q++) {
        for (uint32_t k = 0; k < BOARD_POSTS; k++)
            wait_wake(&board_post(b, k, q)->published, &b->hdr->sleep[q].post_waiters);
        wait_wake(&b->hdr->rank[q].released, &b->hdr->sleep[q].release_waiters);
    }
}

int shm_board_rank_failed(const shm_board_t *b, int q)
{
    return b->hdr && q >= 0 && q < b->nranks && atomic_load(&b->hdr->rank[q].failed);
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
            if ((int32_t)(atomic_load(&board_post(c->b, c->call, q)->published) - c->call) < 0)
                o += (size_t)snprintf(missing + o, sizeof missing - o, " %d", q);
        err_prefix("one-shot collective: ranks that never arrived:%s: ", missing);
    }
    return res;
}

/* Waits until word reaches target (counters only grow, and wrap). */
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

/* Waits until every rank released call `target` (its bank may be reused).
 * The oldest release seen is remembered, so a rank running ahead looks at
 * the others' lines once per several calls, not on every call. */
static ccl_result_t board_wait_released(shm_board_t *b, uint32_t target, const wait_policy_t *policy)
{
    ccl_result_t res = CCL_SUCCESS;
    if ((int32_t)(b->released_all - target) >= 0)
        return CCL_SUCCESS;
    uint32_t oldest = b->calls - 1; /* this rank released every call before this one */
    for (int q = 0; q < b->nranks; q++) {
        if (q == b->rank)
            continue;
        board_rank_t *line = &b->hdr->rank[q];
        CCL_TRY(board_wait_count(&line->released, &b->hdr->sleep[q].release_waiters, target, policy));
        uint32_t r = atomic_load_explicit(&line->released, memory_order_acquire);
        if ((int32_t)(r - oldest) < 0)
            oldest = r;
    }
    b->released_all = oldest;
out:
    return res;
}

ccl_result_t shm_board_exchange(shm_board_t *b, const void *data, size_t bytes, size_t max_bytes,
                                board_wait_t wait_for, int root, const wait_policy_t *policy, board_bank_t *out)
{
    ccl_result_t res = CCL_SUCCESS;
    /* A rank that posts and leaves (a broadcast's root) never sleeps on
     * the board, so it looks for a peer's abort here. One that waits finds
     * it in its waits, and only if what it waits for is missing: a peer
     * that failed after this call's data was all posted (a root that posted,
     * then died) does not undo the call. */
    if (wait_for == BOARD_WAIT_NONE && atomic_load(&b->hdr->poisoned))
        return err_set(CCL_ERR_REMOTE, "a local rank aborted or failed: the one-shot board is unusable");
    if (bytes > max_bytes || max_bytes > b->slot_bytes)
        return err_set(CCL_ERR_INTERNAL, "one-shot board: %zu bytes posted, %zu agreed, %zu per slot", bytes, max_bytes,
                       b->slot_bytes);
    uint32_t call = ++b->calls;
    /* The line's previous call (call - BOARD_POSTS) and the area's may
     * still be read by a rank that did not wait for us (broadcast, reduce):
     * they are free once every rank released those calls. For the first
     * calls the targets are "negative" and already met. Every rank makes
     * the same calls with the same max_bytes, so all agree on the areas. */
    uint32_t reuse = call - BOARD_POSTS;
    if (max_bytes <= BOARD_INLINE_BYTES) {
        out->base = board_post(b, call, 0)->data;
        out->stride = sizeof(struct board_post);
    } else {
        int k = (int)(b->area_calls++ % BOARD_AREAS);
        if ((int32_t)(b->area_last[k] - reuse) > 0)
            reuse = b->area_last[k];
        b->area_last[k] = call;
        out->base = b->slots + (size_t)k * (size_t)b->nranks * b->slot_bytes;
        out->stride = b->slot_bytes;
    }
    board_check_t ctx = {b, policy, call};
    wait_policy_t inner = {board_check, &ctx, policy->spin, policy->yield, NULL, NULL};
    CCL_TRY(board_wait_released(b, reuse, &inner));
    if (bytes)
        memcpy((char *)shm_board_slot(out, b->rank), data, bytes);
    struct board_post *mine = board_post(b, call, b->rank);
    atomic_store_explicit(&mine->published, call, memory_order_release);
    wait_wake(&mine->published, &b->hdr->sleep[b->rank].post_waiters);
    /* The next call's line was read by the peers BOARD_POSTS calls ago,
     * and the next area's slot BOARD_AREAS calls ago: ask for them now
     * (wait_prefetch_store), the slot's first lines only, as many as a
     * call of this size writes. */
    wait_prefetch_store(board_post(b, call + 1, b->rank));
    if (max_bytes > BOARD_INLINE_BYTES) {
        size_t n = bytes < BOARD_PREFETCH_BYTES ? bytes : BOARD_PREFETCH_BYTES;
        const char *next = b->slots + ((size_t)(b->area_calls % BOARD_AREAS) * (size_t)b->nranks + (size_t)b->rank) *
                                          b->slot_bytes;
        for (size_t o = 0; o < n; o += 64)
            wait_prefetch_store(next + o);
    }
    for (int q = 0; q < b->nranks; q++) {
        if (q == b->rank || wait_for == BOARD_WAIT_NONE || (wait_for == BOARD_WAIT_ROOT && q != root))
            continue;
        struct board_post *theirs = board_post(b, call, q);
        CCL_TRY(board_wait_count(&theirs->published, &b->hdr->sleep[q].post_waiters, call, &inner));
        /* A root that posts and leaves runs calls ahead of us: fetch its
         * next lines while we work on this one. Far apart (a line's round
         * trip ~500 ns) a 2-rank 8-byte broadcast took 0.20-0.25 us a call
         * without, 0.11-0.16 with (perf/RESULTS.md). */
        if (wait_for == BOARD_WAIT_ROOT) {
            __builtin_prefetch(board_post(b, call + 1, q), 0, 3);
            __builtin_prefetch(board_post(b, call + 2, q), 0, 3);
        }
    }
out:
    return res;
}

void shm_board_release(shm_board_t *b)
{
    board_rank_t *mine = &b->hdr->rank[b->rank];
    atomic_store_explicit(&mine->released, b->calls, memory_order_release);
    wait_wake(&mine->released, &b->hdr->sleep[b->rank].release_waiters);
}

void shm_board_enter(shm_board_t *b, uint64_t ncoll)
{
    atomic_store_explicit(&b->hdr->rank[b->rank].entered, ncoll, memory_order_relaxed);
}

int shm_board_behind(const shm_board_t *b, uint64_t ncoll, int *ranks, uint64_t *at, int max)
{
    int n = 0;
    for (int q = 0; q < b->nranks && n < max; q++) {
        uint64_t e = atomic_load_explicit(&b->hdr->rank[q].entered, memory_order_relaxed);
        if (e < ncoll) {
            ranks[n] = q;
            at[n++] = e;
        }
    }
    return n;
}
