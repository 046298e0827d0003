/*
 * test_shm_help.c - splitting a whole-step reference's copy between its
 * reader and its poster (src/transport/shm_help.h).
 *
 * A reader thread and a poster thread claim the slices of one help block
 * as the executor does (the reader slice after slice in order, the poster
 * from the back once the reader offered), each marking the slices it
 * copies; every slice must be marked exactly once, whatever the timing,
 * for 1 to 512 slices. The poster's count the reader waits for must be
 * the number it really took. A reader that closes the block (its call
 * failed) must see the poster take nothing after the close, and the
 * poster can never take the first slice, which the offer reserves.
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

#include "transport/shm_help.h"

#define MAX_SLICES 512

typedef struct {
    shm_help_t *help;
    uint32_t n;
    _Atomic int marks[MAX_SLICES]; /* 0 untouched, 1 reader, 2 poster */
    _Atomic int doubles;
    uint32_t poster_took;
    uint32_t close_at;     /* reader closes before this slice (n: never) */
    unsigned seed;
} trial_t;

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

static void mark(trial_t *t, uint32_t slice, int who)
{
    int was = atomic_exchange(&t->marks[slice], who);
    if (was != 0)
        atomic_fetch_add(&t->doubles, 1);
}

static void *poster_main(void *arg)
{
    trial_t *t = arg;
    unsigned seed = t->seed * 7 + 1;
    while (atomic_load(&t->help->state) == SHM_HELP_UNDECIDED)
        sched_yield();
    uint32_t k;
    while (shm_help_poster_claim(t->help, t->n, &k)) {
        jitter(&seed);
        mark(t, k, 2);
        t->poster_took++;
        shm_help_poster_done(t->help);
    }
    return NULL;
}

static void run_trial(uint32_t n, uint32_t close_at, unsigned seed, uint32_t *reader_took)
{
    shm_help_t *help = aligned_alloc(64, (sizeof(shm_help_t) + 63) / 64 * 64);
    assert_non_null(help);
    shm_help_init(help);
    trial_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->help = help;
    t->n = n;
    t->close_at = close_at;
    t->seed = seed;
    pthread_t poster;
    assert_int_equal(pthread_create(&poster, NULL, poster_main, t), 0);
    unsigned rseed = seed * 13 + 5;
    shm_ref_t dst = {.magic = SHM_REF_MAGIC, .len = n};
    shm_help_decide(help, &dst, 0);
    uint32_t mine = 0, want;
    for (uint32_t k = 0; k < n && k < close_at; k++) {
        if (shm_help_reader_claim(help, k, n)) {
            jitter(&rseed);
            mark(t, k, 1);
            mine++;
        }
    }
    if (close_at < n)
        want = shm_help_close(help, n);
    else
        want = shm_help_poster_taken(help);
    while (atomic_load_explicit(&help->done, memory_order_acquire) < want)
        sched_yield();
    /* Everything the poster will ever copy is in now: it claims no more. */
    int snapshot[MAX_SLICES];
    for (uint32_t k = 0; k < n; k++)
        snapshot[k] = atomic_load(&t->marks[k]);
    pthread_join(poster, NULL);
    assert_int_equal(atomic_load(&t->doubles), 0);
    assert_int_equal(t->poster_took, want);
    for (uint32_t k = 0; k < n; k++)
        assert_int_equal(atomic_load(&t->marks[k]), snapshot[k]);
    if (close_at >= n) {
        for (uint32_t k = 0; k < n; k++)
            assert_int_not_equal(snapshot[k], 0); /* every slice copied once */
        assert_int_equal(mine + t->poster_took, n);
    }
    assert_int_equal(snapshot[0], close_at == 0 ? 0 : 1); /* the offer reserves slice 0 for the reader */
    *reader_took = mine;
    free(t);
    free(help);
}

static void test_every_slice_once(void **state)
{
    (void)state;
    static const uint32_t sizes[] = {1, 2, 3, 17, 64, 512};
    uint32_t poster_total = 0, trials = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (unsigned s = 0; s < 60; s++) {
            uint32_t mine;
            run_trial(sizes[i], sizes[i], s + 1000 * (unsigned)i, &mine);
            poster_total += sizes[i] - mine;
            trials++;
        }
    }
    /* The poster did take part somewhere, or the test checked nothing. */
    assert_true(poster_total > 0);
}

static void test_close_stops_poster(void **state)
{
    (void)state;
    for (unsigned s = 0; s < 200; s++) {
        uint32_t n = 64 + s % 200, mine;
        run_trial(n, s % 40, s, &mine);
    }
}

static void test_poster_alone_leaves_first_slice(void **state)
{
    (void)state;
    shm_help_t *help = aligned_alloc(64, (sizeof(shm_help_t) + 63) / 64 * 64);
    assert_non_null(help);
    shm_help_init(help);
    shm_ref_t dst = {.magic = SHM_REF_MAGIC, .len = 4};
    shm_help_decide(help, &dst, 1);
    assert_int_equal(atomic_load(&help->state), SHM_HELP_OFFERED);
    assert_int_equal(help->stream, 1);
    uint32_t k, took = 0, expect = 3;
    while (shm_help_poster_claim(help, 4, &k)) {
        assert_int_equal(k, expect--); /* from the back: 3, 2, 1 */
        took++;
    }
    assert_int_equal(took, 3);
    assert_int_equal(shm_help_poster_taken(help), 3);
    assert_true(shm_help_reader_claim(help, 0, 4));  /* slice 0 is the reader's */
    assert_false(shm_help_reader_claim(help, 1, 4)); /* the rest the poster's */
    /* Declined: the poster is told so and the claims stay untouched. */
    shm_help_init(help);
    shm_help_decide(help, NULL, 0);
    assert_int_equal(atomic_load(&help->state), SHM_HELP_DECLINED);
    assert_int_equal(atomic_load(&help->claims), 0);
    free(help);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_slice_once),
        cmocka_unit_test(test_close_stops_poster),
        cmocka_unit_test(test_poster_alone_leaves_first_slice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
