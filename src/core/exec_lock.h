/*
 * exec_lock.h - the lock that runs one collective at a time on a comm.
 *
 * A mutex, except for the thread that uses the comm alone (as NCCL asks of
 * its callers): that thread, the comm's owner, takes and drops it with
 * plain stores. exec_lock.c says why and how ownership ends.
 */
#ifndef CCL_CORE_EXEC_LOCK_H
#define CCL_CORE_EXEC_LOCK_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    pthread_mutex_t mutex;
    const void *_Atomic owner; /* the owning thread's token; NULL: none yet; else shared (mutex only) */
    _Atomic int held;          /* the owner holds the lock without the mutex */
    int fast;                  /* the holder took it as the owner (read by the holder only) */
    const void *streak_thread; /* under the mutex: the thread that took it last, */
    int streak;                /* ... and how many times in a row */
} exec_lock_t;

void exec_lock_init(exec_lock_t *l);
void exec_lock_destroy(exec_lock_t *l);
void exec_lock(exec_lock_t *l);
/* 1 if taken. A thread other than the owner that tries ends the
 * ownership, even when the owner holds the lock and the try fails. */
int exec_trylock(exec_lock_t *l);
void exec_unlock(exec_lock_t *l);

#endif
