/*
 * shm_help.c - claiming the slices of a whole-step reference between its
 * reader and its poster (see shm_help.h).
 *
 * Both claim through one word, so a claim either sees the other side's
 * last claim or fails its compare-and-swap and looks again: the reader
 * takes slice k only while k lies before the poster's first slice, the
 * poster takes slice n-1-back only while it lies at or after the reader's
 * next one. Once the reader has tried its last slice no claim can succeed
 * any more, so the poster's count is final when the reader waits for it.
 */
#include "transport/shm_help.h"
#include "base/wait.h"

#include <string.h>

void shm_help_init(shm_help_t *h)
{
    atomic_store_explicit(&h->claims, 0, memory_order_relaxed);
    atomic_store_explicit(&h->state, SHM_HELP_UNDECIDED, memory_order_relaxed);
    atomic_store_explicit(&h->state_waiters, 0, memory_order_relaxed);
    atomic_store_explicit(&h->done, 0, memory_order_relaxed);
    atomic_store_explicit(&h->done_waiters, 0, memory_order_relaxed);
    atomic_store_explicit(&h->reader_done, 0, memory_order_relaxed);
    h->stream = 0;
    memset(&h->dst, 0, sizeof h->dst);
    memset(&h->twin, 0, sizeof h->twin);
}

int shm_help_decide(shm_help_t *h, const shm_ref_t *dst, int stream)
{
    int closed = 0;
    if (dst) {
        h->dst = *dst;
        h->stream = (uint32_t)stream;
        /* The first slice is ours: the poster, which claims only after
         * this decision, starts from the other end. Only a poster that
         * closed the block (its call failed) has claimed anything yet. */
        uint64_t none = 0;
        closed = !atomic_compare_exchange_strong_explicit(&h->claims, &none, (uint64_t)1 << 32,
                                                          memory_order_acq_rel, memory_order_acquire);
    }
    atomic_store_explicit(&h->state, dst && !closed ? SHM_HELP_OFFERED : SHM_HELP_DECLINED, memory_order_release);
    wait_wake(&h->state, &h->state_waiters);
    return !closed;
}

int shm_help_reader_claim(shm_help_t *h, uint32_t k, uint32_t n)
{
    uint64_t w = atomic_load_explicit(&h->claims, memory_order_acquire);
    for (;;) {
        uint32_t back = (uint32_t)w;
        if (k >= n - back)
            return 0;
        uint64_t next = ((uint64_t)(k + 1) << 32) | back;
        if (atomic_compare_exchange_weak_explicit(&h->claims, &w, next, memory_order_acq_rel, memory_order_acquire))
            return 1;
    }
}

int shm_help_poster_claim(shm_help_t *h, uint32_t n, uint32_t *slice)
{
    uint64_t w = atomic_load_explicit(&h->claims, memory_order_acquire);
    for (;;) {
        uint32_t front = (uint32_t)(w >> 32), back = (uint32_t)w;
        if (back >= n || n - 1 - back < front)
            return 0;
        if (atomic_compare_exchange_weak_explicit(&h->claims, &w, w + 1, memory_order_acq_rel, memory_order_acquire)) {
            *slice = n - 1 - back;
            return 1;
        }
    }
}

uint32_t shm_help_close(shm_help_t *h, uint32_t n)
{
    uint64_t w = atomic_load_explicit(&h->claims, memory_order_acquire);
    while (!atomic_compare_exchange_weak_explicit(&h->claims, &w, ((uint64_t)n << 32) | (uint32_t)w,
                                                  memory_order_acq_rel, memory_order_acquire))
        ;
    return (uint32_t)w;
}

uint32_t shm_help_poster_close(shm_help_t *h, uint32_t n)
{
    uint64_t w = atomic_load_explicit(&h->claims, memory_order_acquire);
    for (;;) {
        uint32_t front = (uint32_t)(w >> 32), back = (uint32_t)w;
        uint32_t all = front + back >= n ? back : n - front;
        /* A block nobody claimed from yet gets a count of n, which no
         * reader's offer can overwrite (shm_help_decide). */
        if (atomic_compare_exchange_weak_explicit(&h->claims, &w, ((uint64_t)front << 32) | all,
                                                  memory_order_acq_rel, memory_order_acquire)) {
            atomic_fetch_or_explicit(&h->done, SHM_HELP_CLOSED, memory_order_release);
            wait_wake(&h->done, &h->done_waiters);
            return front;
        }
    }
}

void shm_help_reader_done(shm_help_t *h)
{
    atomic_fetch_add_explicit(&h->reader_done, 1, memory_order_release);
}

void shm_help_poster_done(shm_help_t *h)
{
    atomic_fetch_add_explicit(&h->done, 1, memory_order_release);
    wait_wake(&h->done, &h->done_waiters);
}

uint32_t shm_help_poster_taken(const shm_help_t *h)
{
    return (uint32_t)atomic_load_explicit(&((shm_help_t *)h)->claims, memory_order_acquire);
}
