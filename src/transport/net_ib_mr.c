/*
 * net_ib_mr.c - the ib plugin's registration cache for users' buffers.
 *
 * A zero-copy send goes straight from the user's buffer, which the caller
 * did not register. Registering it for each message pins its pages every
 * time; keeping registrations of arbitrary addresses is unsafe, because a
 * buffer that is freed and another mapped at the same address would be
 * sent from the old, still pinned pages. So only buffers whose life ccl
 * knows are cached: those of ccl_mem_alloc (base/mem.h), each under its
 * random id, registered whole once per device. An id that is gone (the
 * buffer was freed) is never looked up again, and its entry is dropped at
 * the next miss; entries in use by a request are never dropped. Anything
 * else is registered for the one request (net_ib_io.c).
 */
#include "transport/net_ib.h"
#include "base/err.h"
#include "base/mem.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#if CCL_HAVE_IBVERBS

#define IB_MR_CACHE 64

typedef struct {
    uint64_t id;   /* the ccl_mem_alloc buffer's id; 0: free entry */
    const ib_dev_t *dev;
    char *base;
    size_t len;
    struct ibv_mr *mr;
    int refs;      /* requests using it */
} ib_mr_entry_t;

static pthread_mutex_t ib_mr_lock = PTHREAD_MUTEX_INITIALIZER;
static ib_mr_entry_t ib_mr_cache[IB_MR_CACHE];

/* Whether the entry's buffer still exists (freed buffers' ids do not come back). */
static int ib_mr_alive(const ib_mr_entry_t *e)
{
    mem_ref_t ref;
    return mem_find(e->base, 1, &ref) && ref.id == e->id && ref.offset == 0;
}

/* A free entry, dropping the registrations of freed buffers to make one. */
static ib_mr_entry_t *ib_mr_slot(void)
{
    ib_mr_entry_t *slot = NULL;
    for (int i = 0; i < IB_MR_CACHE; i++) {
        ib_mr_entry_t *e = &ib_mr_cache[i];
        if (e->id && e->refs == 0 && !ib_mr_alive(e)) {
            ib_verbs()->dereg_mr(e->mr);
            memset(e, 0, sizeof *e);
        }
        if (!e->id && !slot)
            slot = e;
    }
    return slot;
}

int ib_mr_cache_get(const ib_dev_t *dev, const void *data, size_t size, struct ibv_mr **mr, void **token)
{
    mem_ref_t ref;
    *mr = NULL;
    *token = NULL;
    if (!mem_find(data, size ? size : 1, &ref))
        return 0;
    pthread_mutex_lock(&ib_mr_lock);
    ib_mr_entry_t *hit = NULL;
    for (int i = 0; i < IB_MR_CACHE && !hit; i++)
        if (ib_mr_cache[i].id == ref.id && ib_mr_cache[i].dev == dev)
            hit = &ib_mr_cache[i];
    if (!hit && (hit = ib_mr_slot()) != NULL) {
        char *base = (char *)data - ref.offset;
        struct ibv_mr *m = ib_verbs()->reg_mr(dev->pd, base, ref.alloc_len,
                                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (m)
            *hit = (ib_mr_entry_t){ref.id, dev, base, ref.alloc_len, m, 0};
        else
            hit = NULL; /* the caller registers the range alone and says why if that fails too */
    }
    if (hit) {
        hit->refs++;
        *mr = hit->mr;
        *token = hit;
    }
    pthread_mutex_unlock(&ib_mr_lock);
    return hit != NULL;
}

void ib_mr_cache_put(void *token)
{
    ib_mr_entry_t *e = token;
    if (!e)
        return;
    pthread_mutex_lock(&ib_mr_lock);
    e->refs--;
    pthread_mutex_unlock(&ib_mr_lock);
}

void ib_mr_cache_clear(void)
{
    pthread_mutex_lock(&ib_mr_lock);
    for (int i = 0; i < IB_MR_CACHE; i++)
        if (ib_mr_cache[i].id) {
            ib_verbs()->dereg_mr(ib_mr_cache[i].mr);
            memset(&ib_mr_cache[i], 0, sizeof ib_mr_cache[i]);
        }
    pthread_mutex_unlock(&ib_mr_lock);
}
#endif
