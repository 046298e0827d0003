/*
 * lock.c - a comm's lock, biased to the thread that uses the comm.
 *
 * Every call on a comm runs under its lock, so that two threads (an
 * application thread and a host stream's worker, or a P2P watch) never
 * drive its connections at once. A mutex costs two atomic
 * read-modify-writes a call, and on x86 each waits for this core's
 * earlier stores to reach the cache: a collective's last stores (a board
 * post, a release, a FIFO counter) go to lines that a peer on another core
 * has just read, so each wait is a cache-line round trip, ~0.1 us on
 * these VMs, about as long as a whole streamed 8-byte broadcast takes.
 *
 * So a thread can own the lock: it then takes it by storing its
 * ownership's `held` and reading `owner` again, with only a compiler
 * barrier between, and drops it by clearing `held`. Any other thread takes
 * the mutex, and if there is an owner, revokes it: owner = NULL, then
 * membarrier(), which makes the owner's thread execute a full fence; after
 * it, either the owner sees itself revoked and falls back to the mutex, or
 * its `held` is visible and we wait for it to clear (Dekker's, with the
 * fence moved to the rare side). A revoked ownership is remembered until a
 * mutex holder has seen its `held` clear, so that a try that gave up on an
 * owner inside does not let the next taker in beside it.
 *
 * The first thread that takes the lock becomes its owner, and so does one
 * that takes the mutex EXEC_STREAK times in a row (a host stream's worker
 * runs thousands of calls between the application thread's occasional
 * blocking ones; a revocation starts the count again), at most
 * EXEC_MAX_OWNERS times per lock: each ownership
 * has its own `held`, and none is reused, so a former owner that read
 * `owner` just before losing it never writes the new owner's flag.
 * Without membarrier (wait_asymmetric() is 0, or CCL_MEMBARRIER=0) no
 * thread becomes owner: a plain mutex.
 */
#include "exec/lock.h"
#include "base/wait.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A thread's token: the address of its own variable, unique among live
 * threads. */
static _Thread_local char exec_token;
#define EXEC_STREAK 64
/* Each revocation costs one: a comm whose P2P watch looks every 20 ms
 * runs out after ~20 s of calls and stays a mutex. */
#define EXEC_MAX_OWNERS 1024

void exec_lock_init(exec_lock_t *l)
{
    pthread_mutex_init(&l->mutex, NULL);
    atomic_init(&l->owner, NULL);
    l->revoked = l->all = l->fast = NULL;
    l->nowners = 0;
    l->streak_thread = NULL;
    l->streak = 0;
}

void exec_lock_destroy(exec_lock_t *l)
{
    while (l->all) {
        exec_owner_t *o = l->all;
        l->all = o->next;
        free(o);
    }
    pthread_mutex_destroy(&l->mutex);
}

int exec_lock_owned(exec_lock_t *l)
{
    exec_owner_t *o = atomic_load_explicit(&l->owner, memory_order_acquire);
    if (!o || o->token != &exec_token)
        return 0;
    atomic_store_explicit(&o->held, 1, memory_order_relaxed);
    /* The revoker's membarrier stands in for a full fence here. */
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) == o) {
        atomic_thread_fence(memory_order_acquire);
        l->fast = o;
        return 1;
    }
    atomic_store_explicit(&o->held, 0, memory_order_release); /* our own flag: never another's */
    return 0;
}

/* Makes every thread of this process execute a full fence. */
static void exec_fence_owner(void)
{
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
        return;
    /* Registered at wait_setup, so not expected. Without it, give the
     * owner's store time to leave its core (microseconds) before we look. */
    atomic_thread_fence(memory_order_seq_cst);
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* With the mutex held: takes the ownership away, and waits until its
 * thread, and that of an ownership taken away earlier, is outside.
 * Returns 0 if `wait` is 0 and one of them is inside (the ownership stays
 * taken away; the next taker waits for it). */
static int exec_revoke(exec_lock_t *l, int wait)
{
    exec_owner_t *o = atomic_load_explicit(&l->owner, memory_order_relaxed);
    if (o) {
        atomic_store(&l->owner, NULL);
        exec_fence_owner();
        l->revoked = o; /* NULL here: a new owner is only made once the last revoked one is out */
        l->streak_thread = NULL;
    }
    o = l->revoked;
    /* The owner may be inside a long collective (seconds, or until its
     * timeout): yield, then sleep in short steps. */
    for (int i = 0; o && atomic_load_explicit(&o->held, memory_order_acquire); i++) {
        if (!wait)
            return 0;
        if (i < 1000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    l->revoked = NULL;
    return 1;
}

/* With the mutex held, after exec_revoke: counts this thread's streak,
 * and makes it the owner on the lock's first take or after a streak. */
static void exec_count_streak(exec_lock_t *l)
{
    const void *me = &exec_token;
    if (l->streak_thread == me) {
        l->streak++;
    } else {
        l->streak_thread = me;
        l->streak = 1;
    }
    if (!wait_asymmetric() || l->nowners >= EXEC_MAX_OWNERS || (l->nowners > 0 && l->streak < EXEC_STREAK))
        return;
    exec_owner_t *o = calloc(1, sizeof *o);
    if (!o)
        return; /* stays a mutex */
    o->token = me;
    atomic_init(&o->held, 0);
    o->next = l->all;
    l->all = o;
    l->nowners++;
    atomic_store(&l->owner, o); /* our next call takes the fast path */
}

void exec_lock(exec_lock_t *l)
{
    if (exec_lock_owned(l))
        return;
    pthread_mutex_lock(&l->mutex);
    exec_revoke(l, 1);
    exec_count_streak(l);
    l->fast = NULL;
}

int exec_trylock(exec_lock_t *l)
{
    if (exec_lock_owned(l))
        return 1;
    if (pthread_mutex_trylock(&l->mutex) != 0)
        return 0;
    if (!exec_revoke(l, 0)) {
        pthread_mutex_unlock(&l->mutex);
        return 0;
    }
    l->fast = NULL;
    return 1;
}

void exec_unlock(exec_lock_t *l)
{
    exec_owner_t *o = l->fast;
    if (o) {
        l->fast = NULL;
        atomic_store_explicit(&o->held, 0, memory_order_release);
    } else {
        pthread_mutex_unlock(&l->mutex);
    }
}
