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
 * poster can never take the first slice, which the offer reserves. A
 * poster that closes the block (its call failed, and the reader writes
 * into its twin) must see the reader write nothing once the reader_done
 * count it waits for is reached, whenever the close comes, even before
 * the reader's offer.
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

typedef struct {
    shm_help_t *help;
    uint32_t n;
    _Atomic int marks[MAX_SLICES];
    _Atomic int doubles;
    int snapshot[MAX_SLICES]; /* the marks when the poster would return */
    uint32_t poster_took, front;
    _Atomic int closed;
    unsigned seed;
} close_trial_t;

static void close_mark(close_trial_t *t, uint32_t slice, int who)
{
    if (atomic_exchange(&t->marks[slice], who) != 0)
        atomic_fetch_add(&t->doubles, 1);
}

/* The poster: maybe takes a few slices, then fails and closes. */
static void *closing_poster_main(void *arg)
{
    close_trial_t *t = arg;
    unsigned seed = t->seed * 11 + 3;
    jitter(&seed);
    int helps = rand_r(&seed) % 3;
    uint32_t k;
    for (int i = 0; i < helps && atomic_load(&t->help->state) == SHM_HELP_OFFERED &&
                    shm_help_poster_claim(t->help, t->n, &k);
         i++) {
        close_mark(t, k, 2);
        t->poster_took++;
        shm_help_poster_done(t->help);
    }
    t->front = shm_help_poster_close(t->help, t->n);
    atomic_store(&t->closed, 1);
    while (atomic_load_explicit(&t->help->reader_done, memory_order_acquire) < t->front)
        sched_yield();
    for (uint32_t i = 0; i < t->n; i++)
        t->snapshot[i] = atomic_load(&t->marks[i]);
    return NULL;
}

static void test_poster_close_stops_reader(void **state)
{
    (void)state;
    uint32_t declined = 0, offered = 0;
    for (unsigned s = 0; s < 300; s++) {
        shm_help_t *help = aligned_alloc(64, (sizeof(shm_help_t) + 63) / 64 * 64);
        close_trial_t *t = calloc(1, sizeof *t);
        assert_non_null(help);
        assert_non_null(t);
        shm_help_init(help);
        t->help = help;
        t->n = 2 + s % 100;
        t->seed = s;
        pthread_t poster;
        assert_int_equal(pthread_create(&poster, NULL, closing_poster_main, t), 0);
        unsigned rseed = s * 5 + 1;
        jitter(&rseed);
        while (s % 4 == 0 && !atomic_load(&t->closed)) /* every fourth: the close comes first */
            sched_yield();
        shm_ref_t dst = {.magic = SHM_REF_MAGIC, .len = t->n};
        uint32_t mine = 0;
        if (shm_help_decide(help, &dst, 0)) {
            offered++;
            for (uint32_t k = 0; k < t->n && shm_help_reader_claim(help, k, t->n); k++) {
                jitter(&rseed);
                close_mark(t, k, 1);
                mine++;
                shm_help_reader_done(help);
            }
        } else {
            declined++;
            assert_int_equal(atomic_load(&help->state), SHM_HELP_DECLINED);
        }
        pthread_join(poster, NULL);
        assert_int_equal(atomic_load(&t->doubles), 0);
        assert_int_equal(mine, t->front); /* the reader copied exactly what the poster waited for */
        for (uint32_t k = 0; k < t->n; k++)
            assert_int_equal(atomic_load(&t->marks[k]), t->snapshot[k]); /* nothing after that */
        free(t);
        free(help);
    }
    /* Both orders happened, or the test checked less than it says. */
    assert_true(declined > 0);
    assert_true(offered > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_slice_once),
        cmocka_unit_test(test_close_stops_poster),
        cmocka_unit_test(test_poster_alone_leaves_first_slice),
        cmocka_unit_test(test_poster_close_stops_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
