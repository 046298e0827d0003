/*
 * test_exec_lock.c - a comm's lock (src/exec/lock.h) and the
 * publisher/sleeper fences behind it (wait_fence_light/heavy in wait.h).
 *
 * Covers: with CCL_MEMBARRIER=0 no thread ever owns the lock (a plain
 * mutex); with membarrier the first thread that locks becomes the owner,
 * a second thread ends that ownership, and a long run of takes by one
 * thread makes it the owner again; mutual exclusion
 * while four threads take turns on one lock (a counter updated by
 * read, yield, write loses no update), including a thread that revokes
 * an owner inside the lock and the former owner taking turns after; a try
 * from another thread while the owner holds the lock fails, and so does a
 * second try while the owner is still inside (the first took the
 * ownership away), and the owner's unlock still works; and two processes that sleep at once on every
 * wait (ping-pong of 20000 turns through futexes, with the waker's light
 * fence and the sleeper's membarrier) lose no wake-up, which would show as
 * a sleep that ran to its 5 ms timeout. The races the fences close are a
 * few nanoseconds wide: these tests check that the protocol works, not
 * that each fence is needed (removing the sleeper's membarrier, or the
 * owner's second look at `owner`, still passes here).
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
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec/lock.h"
#include "base/wait.h"

/* First, in a child that has not read the parameters yet. */
static void test_membarrier_off_means_mutex(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("CCL_MEMBARRIER", "0", 1);
        wait_setup();
        exec_lock_t l;
        exec_lock_init(&l);
        int ok = !wait_asymmetric();
        for (int i = 0; i < 3; i++) {
            exec_lock(&l);
            ok &= atomic_load(&l.owner) == NULL && l.fast == NULL;
            exec_unlock(&l);
        }
        exec_lock_destroy(&l);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void *lock_once(void *arg)
{
    exec_lock_t *l = arg;
    exec_lock(l);
    exec_unlock(l);
    return NULL;
}

static void test_owner_then_revoked(void **state)
{
    (void)state;
    wait_setup();
    if (!wait_asymmetric())
        skip(); /* no membarrier in this kernel: the mutex path is all there is */
    exec_lock_t l;
    exec_lock_init(&l);
    exec_lock(&l); /* becomes the owner, via the mutex */
    assert_null(l.fast);
    exec_unlock(&l);
    exec_owner_t *owner = atomic_load(&l.owner);
    assert_non_null(owner);
    exec_lock(&l); /* the owner's own path */
    assert_ptr_equal(l.fast, owner);
    assert_int_equal(atomic_load(&owner->held), 1);
    exec_unlock(&l);
    assert_int_equal(atomic_load(&owner->held), 0);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, lock_once, &l), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_null(atomic_load(&l.owner)); /* taken away, and nobody's yet */
    exec_lock(&l); /* no longer the owner: the mutex */
    assert_null(l.fast);
    exec_unlock(&l);
    /* A run of takes by one thread makes it the owner again. */
    int fast_at = -1;
    for (int i = 0; i < 200 && fast_at < 0; i++) {
        exec_lock(&l);
        if (l.fast)
            fast_at = i;
        exec_unlock(&l);
    }
    assert_true(fast_at > 8 && fast_at < 200);
    exec_owner_t *again = atomic_load(&l.owner);
    /* A new ownership, not the old one: the old flag may still be written
     * by a thread that read `owner` just before losing it. */
    assert_non_null(again);
    assert_true(again != owner);
    assert_ptr_equal(again->token, owner->token);
    exec_lock_destroy(&l);
}

#define TURNS 20000
#define THREADS 4

typedef struct {
    exec_lock_t lock;
    long counter;   /* only under the lock, never atomically */
    _Atomic int inside;
    _Atomic int overlaps;
} shared_t;

static void *take_turns(void *arg)
{
    shared_t *s = arg;
    for (int i = 0; i < TURNS; i++) {
        exec_lock(&s->lock);
        if (atomic_fetch_add(&s->inside, 1) != 0)
            atomic_fetch_add(&s->overlaps, 1);
        long v = s->counter;
        if (i % 64 == 0)
            sched_yield(); /* let another thread try while we hold it */
        s->counter = v + 1;
        atomic_fetch_sub(&s->inside, 1);
        exec_unlock(&s->lock);
    }
    return NULL;
}

static void test_mutual_exclusion(void **state)
{
    (void)state;
    wait_setup();
    shared_t s = {.counter = 0};
    exec_lock_init(&s.lock);
    /* This thread owns it first, and holds it while the others start, so
     * that the first of them revokes an owner that is inside. */
    exec_lock(&s.lock);
    exec_unlock(&s.lock);
    exec_lock(&s.lock);
    atomic_fetch_add(&s.inside, 1);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, take_turns, &s), 0);
    usleep(20 * 1000);
    s.counter += 1000;
    atomic_fetch_sub(&s.inside, 1);
    exec_unlock(&s.lock);
    take_turns(&s); /* the former owner takes turns too */
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(atomic_load(&s.overlaps), 0);
    assert_int_equal(s.counter, 1000 + (long)(THREADS + 1) * TURNS);
    exec_lock_destroy(&s.lock);
}

static void *try_from_other(void *arg)
{
    exec_lock_t *l = arg;
    int got = exec_trylock(l);
    if (got)
        exec_unlock(l);
    return (void *)(intptr_t)got;
}

static void test_trylock_while_owner_inside(void **state)
{
    (void)state;
    wait_setup();
    exec_lock_t l;
    exec_lock_init(&l);
    exec_lock(&l);
    exec_unlock(&l);
    exec_lock(&l); /* the owner's path where membarrier exists */
    pthread_t t;
    void *got = NULL;
    assert_int_equal(pthread_create(&t, NULL, try_from_other, &l), 0);
    assert_int_equal(pthread_join(t, &got), 0);
    assert_int_equal((intptr_t)got, 0);
    /* Again, while the owner is still inside: the first try took the
     * ownership away, and this one must still see the owner inside. */
    assert_int_equal(pthread_create(&t, NULL, try_from_other, &l), 0);
    assert_int_equal(pthread_join(t, &got), 0);
    assert_int_equal((intptr_t)got, 0);
    exec_unlock(&l);
    assert_int_equal(pthread_create(&t, NULL, try_from_other, &l), 0);
    assert_int_equal(pthread_join(t, &got), 0);
    assert_int_equal((intptr_t)got, 1);
    exec_lock(&l);
    assert_null(l.fast);
    exec_unlock(&l);
    exec_lock_destroy(&l);
}

/* Ping-pong: each side stores the next turn into its word and waits for
 * the other's; both sleep at once (no spin, no yield). */
typedef struct {
    _Atomic uint32_t word[2];
    char pad[64 - 8];
    _Atomic uint32_t waiters[2]; /* off the words' line, as wait.h asks */
    char pad2[64 - 8];
    _Atomic uint32_t timeouts[2];
} pingpong_t;

typedef struct {
    pingpong_t *p;
    int side;
} pp_check_t;

/* Runs when a wait has gone WAIT_SLEEP_NS without a wake-up. */
static ccl_result_t count_timeout(void *arg, uint64_t waited_ns)
{
    pp_check_t *c = arg;
    (void)waited_ns;
    atomic_fetch_add(&c->p->timeouts[c->side], 1);
    return CCL_SUCCESS;
}

static void pingpong_side(pingpong_t *p, int side)
{
    pp_check_t c = {p, side};
    wait_policy_t pol = {count_timeout, &c, 0, 0, NULL, NULL};
    for (uint32_t turn = 1; turn <= TURNS; turn++) {
        if (side == 1) {
            uint32_t seen;
            while ((seen = atomic_load(&p->word[0])) < turn)
                assert_int_equal(wait_change(&p->word[0], seen, &p->waiters[0], &pol), CCL_SUCCESS);
        }
        atomic_store_explicit(&p->word[side], turn, memory_order_release);
        wait_wake(&p->word[side], &p->waiters[side]);
        if (side == 0) {
            uint32_t seen;
            while ((seen = atomic_load(&p->word[1])) < turn)
                assert_int_equal(wait_change(&p->word[1], seen, &p->waiters[1], &pol), CCL_SUCCESS);
        }
    }
}

static void test_no_lost_wakeup(void **state)
{
    (void)state;
    pingpong_t *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        wait_setup(); /* the child registers itself */
        pingpong_side(p, 1);
        _exit(0);
    }
    wait_setup();
    pingpong_side(p, 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(atomic_load(&p->word[0]), TURNS);
    assert_int_equal(atomic_load(&p->word[1]), TURNS);
    /* A turn's answer comes within microseconds; a sleep that reaches its
     * timeout is a lost wake-up, or this VM taking a core away for 5 ms,
     * which is rare: allow a few. */
    unsigned lost = atomic_load(&p->timeouts[0]) + atomic_load(&p->timeouts[1]);
    print_message("sleeps that reached their timeout: %u of %d turns\n", lost, 2 * TURNS);
    assert_true(lost <= 10);
    munmap(p, sizeof *p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_membarrier_off_means_mutex),
        cmocka_unit_test(test_owner_then_revoked),
        cmocka_unit_test(test_mutual_exclusion),
        cmocka_unit_test(test_trylock_while_owner_inside),
        cmocka_unit_test(test_no_lost_wakeup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
