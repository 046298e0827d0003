/*
 * handle.h - sets of live handles (communicators, host streams, allocations).
 *
 * The API takes raw pointers from users; looking them up in a set of live
 * handles is how a destroyed or foreign pointer becomes a clean error
 * (CCL_ERR_NULL_COMM) instead of a use-after-free, and how a host stream is
 * told apart from a CUDA stream.
 */
#ifndef CCL_CORE_HANDLE_H
#define CCL_CORE_HANDLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    pthread_mutex_t lock;
    void **items;
    size_t *sizes; /* optional per-item value (allocation sizes) */
    size_t n, cap;
    _Atomic uint64_t gen; /* bumped by every add and remove */
} handle_set_t;

#define HANDLE_SET_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0, 0}

/* One thread's last answer for one set: every call of a collective looks
 * up its comm and stream, and the same handles come back call after call,
 * so the answer is kept until the set changes (no lock, no scan). */
typedef struct {
    const void *item;
    uint64_t gen;
    int found;
} handle_memo_t;

/* 0 on success, -1 when out of memory. */
int handle_add(handle_set_t *set, void *item, size_t value);
/* Removes item; returns 1 and its value if it was present. */
int handle_remove(handle_set_t *set, void *item, size_t *value);
int handle_contains(handle_set_t *set, const void *item);
/* handle_contains, answered from *memo (a thread's own) while the set has
 * not changed since. */
int handle_contains_memo(handle_set_t *set, handle_memo_t *memo, const void *item);

#endif
