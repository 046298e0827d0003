/*
 * test_shm_pair.c - the slice claims of the fused 2-rank allreduce
 * (src/transport/shm_pair.h).
 *
 * Two threads claim the slices of one block as the executor does (side 0
 * from the front, side 1 from the back), each marking what it took; every
 * slice must be marked exactly once, side 0's a prefix and side 1's the
 * rest, whatever the timing, for 1 to 512 slices, and shm_pair_taken must
 * then give each side's count. A side that closes the block (its call
 * failed) takes every slice still unclaimed: after the close the other
 * side claims nothing more, the count the closer gets back is what the
 * other side claimed, and the closer's done count carries the closed mark.
 * The decisions are written once and read by the other side.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "transport/shm_pair.h"

#define MAX_SLICES 512

typedef struct {
    shm_pair_t *pair;
    uint32_t n;
    _Atomic int marks[MAX_SLICES]; /* 0 untouched, 1 side 0, 2 side 1 */
    _Atomic int doubles;
    uint32_t took[2];
    uint32_t close_after[2]; /* a side closes after this many claims (n + 1: never) */
    uint32_t close_got[2];   /* what its close returned */
    _Atomic int claims_after_close[2]; /* claims that succeeded once the other side had closed */
    _Atomic int closed[2];
    unsigned seed[2];
    pthread_barrier_t start; /* both sides begin together, so that they race */
} trial_t;

typedef struct {
    trial_t *t;
    int side;
} side_arg_t;

/* A few hundred ns of work at random, so that the two sides interleave
 * differently from trial to trial. */
static void jitter(unsigned *seed)
{
    int spins = rand_r(seed) % 200;
    for (volatile int i = 0; i < spins; i++)
        ;
    if (rand_r(seed) % 16 == 0)
        sched_yield();
}

static void *side_main(void *p)
{
    side_arg_t *a = p;
    trial_t *t = a->t;
    int me = a->side, other = 1 - me;
    uint32_t k, got = 0;
    pthread_barrier_wait(&t->start);
    for (;;) {
        if (got == t->close_after[me]) {
            t->close_got[me] = shm_pair_close(t->pair, me, t->n);
            atomic_store(&t->closed[me], 1);
            break;
        }
        int other_closed = atomic_load(&t->closed[other]);
        if (!shm_pair_claim(t->pair, me, t->n, &k))
            break;
        if (other_closed)
            atomic_fetch_add(&t->claims_after_close[me], 1);
        if (atomic_exchange(&t->marks[k], me + 1) != 0)
            atomic_fetch_add(&t->doubles, 1);
        got++;
        jitter(&t->seed[me]);
        shm_pair_done(t->pair, me);
    }
    t->took[me] = got;
    return NULL;
}

static void run_trial(trial_t *t)
{
    pthread_t th[2];
    side_arg_t args[2] = {{t, 0}, {t, 1}};
    pthread_barrier_init(&t->start, NULL, 2);
    for (int s = 0; s < 2; s++)
        assert_int_equal(pthread_create(&th[s], NULL, side_main, &args[s]), 0);
    for (int s = 0; s < 2; s++)
        pthread_join(th[s], NULL);
    pthread_barrier_destroy(&t->start);
}

static void trial_init(trial_t *t, shm_pair_t *p, uint32_t n, unsigned seed)
{
    memset(t, 0, sizeof *t);
    shm_pair_init(p);
    t->pair = p;
    t->n = n;
    t->close_after[0] = t->close_after[1] = n + 1;
    t->seed[0] = seed;
    t->seed[1] = seed * 7 + 1;
}

/* Every slice once: side 0 a prefix, side 1 the suffix after it. */
static void test_claims_split(void **state)
{
    (void)state;
    static shm_pair_t p;
    static trial_t t;
    for (uint32_t n = 1; n <= MAX_SLICES; n = n < 16 ? n + 1 : n * 2 + 1) {
        for (unsigned rep = 0; rep < 20; rep++) {
            trial_init(&t, &p, n > MAX_SLICES ? MAX_SLICES : n, rep * 131 + n);
            run_trial(&t);
            assert_int_equal(atomic_load(&t.doubles), 0);
            assert_int_equal(t.took[0] + t.took[1], t.n);
            for (uint32_t k = 0; k < t.n; k++)
                assert_int_equal(atomic_load(&t.marks[k]), k < t.took[0] ? 1 : 2);
            assert_int_equal(shm_pair_taken(&p, 0), t.took[0]);
            assert_int_equal(shm_pair_taken(&p, 1), t.took[1]);
            for (int s = 0; s < 2; s++)
                assert_int_equal(atomic_load(&p.side[s].done), t.took[s]);
        }
    }
}

/* A side that closes after c claims: nothing claimed twice, every slice
 * claimed by someone (the closer takes the rest without doing them), the
 * other side claims nothing once the close is visible, and the closer
 * learns exactly what the other took. */
static void test_close(void **state)
{
    (void)state;
    static shm_pair_t p;
    static trial_t t;
    const uint32_t n = 257;
    int closes_missed = 0, trials = 0;
    for (int closer = 0; closer < 2; closer++) {
        for (uint32_t c = 0; c <= 40; c += 4) {
            for (unsigned rep = 0; rep < 20; rep++) {
                trial_init(&t, &p, n, rep * 977 + c + (unsigned)closer);
                t.close_after[closer] = c;
                trials++;
                run_trial(&t);
                int other = 1 - closer;
                assert_int_equal(atomic_load(&t.doubles), 0);
                if (!atomic_load(&t.closed[closer])) {
                    /* The other side took the rest before the closer got
                     * to c claims: no close happened, a plain split. */
                    assert_int_equal(t.took[0] + t.took[1], n);
                    closes_missed++;
                    continue;
                }
                assert_int_equal(atomic_load(&t.claims_after_close[other]), 0);
                assert_int_equal(t.close_got[closer], t.took[other]);
                assert_int_equal(shm_pair_taken(&p, 0) + shm_pair_taken(&p, 1), n);
                assert_int_equal(shm_pair_taken(&p, other), t.took[other]);
                uint32_t done = atomic_load(&p.side[closer].done);
                assert_true(done & SHM_PAIR_CLOSED);
                assert_int_equal(done & ~SHM_PAIR_CLOSED, t.took[closer]);
                uint32_t k;
                assert_int_equal(shm_pair_claim(&p, other, n, &k), 0);
            }
        }
    }
    assert_true(closes_missed < trials / 2); /* the close path itself was tested */
}

/* Closing an untouched block takes every slice; both closing leaves
 * both marks, and each learns the other's (zero) count. */
static void test_close_untouched(void **state)
{
    (void)state;
    shm_pair_t p;
    uint32_t k;
    shm_pair_init(&p);
    assert_int_equal(shm_pair_close(&p, 1, 8), 0);
    assert_int_equal(shm_pair_taken(&p, 1), 8);
    assert_int_equal(shm_pair_claim(&p, 0, 8, &k), 0);
    assert_int_equal(shm_pair_close(&p, 0, 8), 8);
    assert_true(atomic_load(&p.side[0].done) & SHM_PAIR_CLOSED);
    assert_true(atomic_load(&p.side[1].done) & SHM_PAIR_CLOSED);
}

/* Single-threaded order: side 0 gets 0, 1, ...; side 1 gets n-1, n-2, ...;
 * the decisions are what each side wrote. */
static void test_order_and_decisions(void **state)
{
    (void)state;
    shm_pair_t p;
    uint32_t k;
    shm_pair_init(&p);
    assert_int_equal(atomic_load(&p.side[0].state), SHM_PAIR_UNDECIDED);
    shm_pair_decide(&p, 0, 1);
    shm_pair_decide(&p, 1, 0);
    assert_int_equal(atomic_load(&p.side[0].state), SHM_PAIR_READY);
    assert_int_equal(atomic_load(&p.side[1].state), SHM_PAIR_DECLINED);
    assert_int_equal(shm_pair_claim(&p, 0, 5, &k), 1);
    assert_int_equal(k, 0);
    assert_int_equal(shm_pair_claim(&p, 1, 5, &k), 1);
    assert_int_equal(k, 4);
    assert_int_equal(shm_pair_claim(&p, 1, 5, &k), 1);
    assert_int_equal(k, 3);
    assert_int_equal(shm_pair_claim(&p, 0, 5, &k), 1);
    assert_int_equal(k, 1);
    assert_int_equal(shm_pair_claim(&p, 0, 5, &k), 1);
    assert_int_equal(k, 2);
    assert_int_equal(shm_pair_claim(&p, 1, 5, &k), 0);
    assert_int_equal(shm_pair_claim(&p, 0, 5, &k), 0);
    assert_int_equal(shm_pair_taken(&p, 0), 3);
    assert_int_equal(shm_pair_taken(&p, 1), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_decisions),
        cmocka_unit_test(test_claims_split),
        cmocka_unit_test(test_close),
        cmocka_unit_test(test_close_untouched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
