/*
 * exec_lock.c - a comm's lock, biased to the thread that uses the comm.
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
 * So the first thread that takes the lock becomes its owner, and takes it
 * from then on by storing `held` and reading `owner` again, with only a
 * compiler barrier between. Any other thread that wants the lock takes the
 * mutex, marks the comm shared (owner = EXEC_SHARED), and runs
 * membarrier(), which makes the owner's threads execute a full fence
 * (wait_fence_heavy's private form): after it, either the owner sees
 * itself revoked and falls back to the mutex, or its `held` is visible and
 * we wait for it to clear. The owner's path is Dekker's with the fence
 * moved to the side that is rare. A shared comm goes back to having an
 * owner when one thread takes the mutex EXEC_REBIAS_STREAK times in a row:
 * a host stream's worker runs thousands of calls between the application
 * thread's occasional blocking ones. Ownership only changes under the
 * mutex, and is only taken from a thread by the revocation above. Without
 * membarrier (wait_asymmetric() is 0, or CCL_MEMBARRIER=0) no thread
 * becomes owner: a plain mutex.
 */
#include "core/exec_lock.h"
#include "core/wait.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A thread's token: the address of its own variable, unique among live
 * threads. */
static _Thread_local char exec_token;
static const char exec_shared_mark;
#define EXEC_SHARED ((const void *)&exec_shared_mark)
#define EXEC_REBIAS_STREAK 64

void exec_lock_init(exec_lock_t *l)
{
    pthread_mutex_init(&l->mutex, NULL);
    atomic_init(&l->owner, NULL);
    atomic_init(&l->held, 0);
    l->fast = 0;
    l->streak_thread = NULL;
    l->streak = 0;
}

void exec_lock_destroy(exec_lock_t *l)
{
    pthread_mutex_destroy(&l->mutex);
}

static int exec_try_owned(exec_lock_t *l)
{
    const void *me = &exec_token;
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) != me)
        return 0;
    atomic_store_explicit(&l->held, 1, memory_order_relaxed);
    /* The revoker's membarrier stands in for a full fence here. */
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) == me) {
        atomic_thread_fence(memory_order_acquire);
        l->fast = 1;
        return 1;
    }
    atomic_store_explicit(&l->held, 0, memory_order_release);
    return 0;
}

/* With the mutex held: ends another thread's ownership and waits until it
 * has left. Returns 0 if `wait` is 0 and the owner is inside. */
static int exec_revoke(exec_lock_t *l, int wait)
{
    const void *owner = atomic_load_explicit(&l->owner, memory_order_relaxed);
    if (owner == NULL || owner == EXEC_SHARED || owner == &exec_token)
        return 1;
    atomic_store(&l->owner, EXEC_SHARED);
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        atomic_thread_fence(memory_order_seq_cst); /* registered at setup: not expected */
    /* The owner may be inside a long collective (seconds, or until its
     * timeout): yield, then sleep in short steps. */
    for (int i = 0; atomic_load_explicit(&l->held, memory_order_acquire); i++) {
        if (!wait)
            return 0;
        if (i < 1000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return 1;
}

/* With the mutex held: counts this thread's streak, and makes it the
 * owner on its first take or after a streak on a shared lock. */
static void exec_count_streak(exec_lock_t *l)
{
    const void *me = &exec_token;
    if (l->streak_thread == me) {
        l->streak++;
    } else {
        l->streak_thread = me;
        l->streak = 1;
    }
    const void *owner = atomic_load_explicit(&l->owner, memory_order_relaxed);
    if (wait_asymmetric() && (owner == NULL || (owner == EXEC_SHARED && l->streak >= EXEC_REBIAS_STREAK)))
        atomic_store(&l->owner, me); /* our next call takes the fast path */
}

void exec_lock(exec_lock_t *l)
{
    if (exec_try_owned(l))
        return;
    pthread_mutex_lock(&l->mutex);
    exec_revoke(l, 1);
    exec_count_streak(l);
    l->fast = 0;
}

int exec_trylock(exec_lock_t *l)
{
    if (exec_try_owned(l))
        return 1;
    if (pthread_mutex_trylock(&l->mutex) != 0)
        return 0;
    if (!exec_revoke(l, 0)) {
        pthread_mutex_unlock(&l->mutex);
        return 0;
    }
    l->fast = 0;
    return 1;
}

void exec_unlock(exec_lock_t *l)
{
    if (l->fast) {
        l->fast = 0;
        atomic_store_explicit(&l->held, 0, memory_order_release);
    } else {
        pthread_mutex_unlock(&l->mutex);
    }
}
