/*
 * shm_pair.c - claiming the slices of a shared job from both ends (see
 * shm_pair.h).
 *
 * One word holds both sides' counts, so a claim either sees the other
 * side's last claim or fails its compare-and-swap and looks again: side 0
 * takes slice `front` only while front + back < n, side 1 takes slice
 * n-1-back under the same condition. Once a claim has failed, front + back
 * is n and stays so: the counts are final.
 */
#include "transport/shm_pair.h"
#include "base/wait.h"

void shm_pair_init(shm_pair_t *p)
{
    atomic_store_explicit(&p->claims, 0, memory_order_relaxed);
    for (int s = 0; s < 2; s++) {
        atomic_store_explicit(&p->side[s].state, SHM_PAIR_UNDECIDED, memory_order_relaxed);
        atomic_store_explicit(&p->side[s].state_waiters, 0, memory_order_relaxed);
        atomic_store_explicit(&p->side[s].done, 0, memory_order_relaxed);
        atomic_store_explicit(&p->side[s].done_waiters, 0, memory_order_relaxed);
    }
}

void shm_pair_decide(shm_pair_t *p, int side, int ready)
{
    shm_pair_side_t *me = &p->side[side];
    atomic_store_explicit(&me->state, ready ? SHM_PAIR_READY : SHM_PAIR_DECLINED, memory_order_release);
    wait_wake(&me->state, &me->state_waiters);
}

int shm_pair_claim(shm_pair_t *p, int side, uint32_t n, uint32_t *slice)
{
    uint64_t w = atomic_load_explicit(&p->claims, memory_order_acquire);
    for (;;) {
        uint32_t front = (uint32_t)(w >> 32), back = (uint32_t)w;
        if (front + back >= n)
            return 0;
        uint64_t next = side == 0 ? w + ((uint64_t)1 << 32) : w + 1;
        if (atomic_compare_exchange_weak_explicit(&p->claims, &w, next, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *slice = side == 0 ? front : n - 1 - back;
            return 1;
        }
    }
}

void shm_pair_done(shm_pair_t *p, int side)
{
    shm_pair_side_t *me = &p->side[side];
    atomic_fetch_add_explicit(&me->done, 1, memory_order_release);
    wait_wake(&me->done, &me->done_waiters);
}

uint32_t shm_pair_taken(const shm_pair_t *p, int side)
{
    uint64_t w = atomic_load_explicit(&((shm_pair_t *)p)->claims, memory_order_acquire);
    return side == 0 ? (uint32_t)(w >> 32) : (uint32_t)w;
}

uint32_t shm_pair_close(shm_pair_t *p, int side, uint32_t n)
{
    uint64_t w = atomic_load_explicit(&p->claims, memory_order_acquire);
    for (;;) {
        uint32_t front = (uint32_t)(w >> 32), back = (uint32_t)w;
        uint32_t left = front + back < n ? n - front - back : 0;
        uint64_t next = side == 0 ? w + ((uint64_t)left << 32) : w + left;
        if (atomic_compare_exchange_weak_explicit(&p->claims, &w, next, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            shm_pair_side_t *me = &p->side[side];
            atomic_fetch_or_explicit(&me->done, SHM_PAIR_CLOSED, memory_order_release);
            wait_wake(&me->done, &me->done_waiters);
            return side == 0 ? back : front;
        }
    }
}
