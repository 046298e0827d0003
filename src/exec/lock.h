/*
 * lock.h - the lock that runs one collective at a time on a comm.
 *
 * A mutex, except for the thread that uses the comm alone (as NCCL asks of
 * its callers): that thread, the comm's owner, takes and drops it with
 * plain stores. exec_lock.c says why and how ownership moves.
 */
#ifndef CCL_EXEC_LOCK_H
#define CCL_EXEC_LOCK_H

#include <pthread.h>
#include <stdatomic.h>

/* One ownership: a thread's token and its "inside" flag. Never reused nor
 * freed before the lock, so a thread that still holds a pointer to an
 * ownership it lost only ever writes its own flag. */
typedef struct exec_owner {
    const void *token;
    _Atomic int held;
    struct exec_owner *next; /* every ownership the lock made, to free them */
} exec_owner_t;

typedef struct {
    pthread_mutex_t mutex;
    exec_owner_t *_Atomic owner; /* the current ownership, or NULL: the mutex for all */
    /* The rest under the mutex, except `fast`. */
    exec_owner_t *revoked;       /* the last ownership taken away; its thread may still be inside */
    exec_owner_t *all;           /* every ownership made */
    int nowners;
    const void *streak_thread;   /* the thread that took the mutex last, */
    int streak;                  /* ... and how many times in a row */
    exec_owner_t *fast;          /* the holder's ownership if it came in without the mutex (read by the holder only) */
} exec_lock_t;

void exec_lock_init(exec_lock_t *l);
void exec_lock_destroy(exec_lock_t *l);
void exec_lock(exec_lock_t *l);
/* 1 if this thread owns the lock and took it without waiting; else 0 and
 * nothing taken (then exec_lock). */
int exec_lock_owned(exec_lock_t *l);
/* 1 if taken. A thread other than the owner that tries ends the
 * ownership, even when the owner is inside and the try fails. */
int exec_trylock(exec_lock_t *l);
void exec_unlock(exec_lock_t *l);

#endif
