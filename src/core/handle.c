/*
 * handle.c - a mutex-protected set of pointers (see handle.h). Sets stay
 * small (a process holds a handful of comms and streams), so a linear scan
 * beats anything cleverer.
 */
#include "core/handle.h"

#include <stdlib.h>

int handle_add(handle_set_t *set, void *item, size_t value)
{
    int rc = 0;
    pthread_mutex_lock(&set->lock);
    if (set->n == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 16;
        void **items = realloc(set->items, cap * sizeof *items);
        size_t *sizes = items ? realloc(set->sizes, cap * sizeof *sizes) : NULL;
        if (items)
            set->items = items;
        if (sizes)
            set->sizes = sizes;
        if (!items || !sizes)
            rc = -1;
        else
            set->cap = cap;
    }
    if (rc == 0) {
        set->items[set->n] = item;
        set->sizes[set->n] = value;
        set->n++;
        atomic_fetch_add(&set->gen, 1);
    }
    pthread_mutex_unlock(&set->lock);
    return rc;
}

int handle_remove(handle_set_t *set, void *item, size_t *value)
{
    int found = 0;
    pthread_mutex_lock(&set->lock);
    for (size_t i = 0; i < set->n; i++) {
        if (set->items[i] == item) {
            if (value)
                *value = set->sizes[i];
            set->items[i] = set->items[set->n - 1];
            set->sizes[i] = set->sizes[set->n - 1];
            set->n--;
            atomic_fetch_add(&set->gen, 1);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&set->lock);
    return found;
}

int handle_contains(handle_set_t *set, const void *item)
{
    int found = 0;
    pthread_mutex_lock(&set->lock);
    for (size_t i = 0; i < set->n && !found; i++)
        found = (set->items[i] == item);
    pthread_mutex_unlock(&set->lock);
    return found;
}

int handle_contains_memo(handle_set_t *set, handle_memo_t *memo, const void *item)
{
    uint64_t gen = atomic_load_explicit(&set->gen, memory_order_acquire);
    if (memo->item == item && memo->gen == gen)
        return memo->found;
    int found = handle_contains(set, item);
    *memo = (handle_memo_t){item, gen, found};
    return found;
}
