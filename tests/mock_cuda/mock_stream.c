/*
 * mock_stream.c - streams of the mock CUDA runtime: a worker thread per
 * stream runs its queued operations (copies, memsets, host functions,
 * waits, writes, event completions, the mock kernels) one after another,
 * so "returns at once, runs in stream order" is real, and so is a stream
 * held by a wait while its host thread goes on.
 *
 * Operations are numbered per stream as they are queued (enq); the
 * worker counts those it finished (done, a futex word). Synchronising
 * waits for done to reach the number queued at the call; one stream
 * waiting for another is a WAIT operation on the other's done.
 *
 * The legacy default stream (NULL, cudaStreamLegacy) is CUDA's: work
 * queued on it waits for the work already queued on every blocking stream
 * of its device (created without cudaStreamNonBlocking, the per-thread
 * streams included), and work queued on a blocking stream waits for the
 * legacy stream's. Non-blocking streams are ordered with neither.
 *
 * A stream's queue is bounded, as CUDA's is: queueing onto a stream with
 * MOCKCUDA_QUEUE_DEPTH operations unfinished (default 1024, about what
 * CUDA's launch queue holds; 0 for no bound) blocks the calling thread
 * until the stream moves on. Code that queues much work behind a held
 * stream, while the holder waits for that thread, deadlocks here as it
 * would on a GPU.
 *
 * A destroyed stream finishes its queue and its thread exits; the small
 * stream record is kept (never freed) so that late waits on it and device
 * synchronisation stay valid, and its handle is refused from then on.
 */
#include "mock_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mock_stream {
    struct mock_stream *next; /* every stream ever made (the registry) */
    int device;
    unsigned flags;
    int legacy;
    int destroyed;
    pthread_t worker;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    mock_op_t *head, *tail;
    uint32_t enq;           /* operations queued (under lock) */
    volatile uint32_t done; /* operations finished (the worker; futex word) */
};

static pthread_mutex_t mock_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static mock_stream_t *mock_streams;
static mock_stream_t *mock_legacy[MOCK_MAX_DEVICES];
static __thread mock_stream_t *mock_per_thread[MOCK_MAX_DEVICES];

mock_op_t *mock_op_new(mock_op_kind_t kind)
{
    mock_op_t *op = calloc(1, sizeof *op);
    if (op)
        op->kind = kind;
    return op;
}

static void mock_op_run(mock_op_t *op)
{
    switch (op->kind) {
    case MOCK_OP_COPY:
        if (op->n)
            memmove(op->dst, op->src, op->n);
        break;
    case MOCK_OP_SET:
        memset(op->dst, op->value, op->n);
        break;
    case MOCK_OP_HOST:
        op->fn(op->arg);
        break;
    case MOCK_OP_WAIT:
        mock_wait(op->word, op->u32, op->mode);
        if (op->event)
            mock_event_unref(op->event);
        break;
    case MOCK_OP_WRITE:
        __atomic_store_n(op->word, op->u32, __ATOMIC_RELEASE);
        mock_wake(op->word);
        break;
    case MOCK_OP_EVENT:
        mock_event_complete(op->event, op->u32);
        mock_event_unref(op->event);
        break;
    }
}

/* A non-negative number from the environment, read once into *cache
 * (-1 until then); dflt when unset. */
static long mock_env_once(long *cache, const char *name, long dflt)
{
    long v = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *s = getenv(name);
        v = s && *s ? strtol(s, NULL, 10) : dflt;
        __atomic_store_n(cache, v > 0 ? v : 0, __ATOMIC_RELAXED);
    }
    return v > 0 ? v : 0;
}

/* MOCKCUDA_JITTER_US=n: each operation starts after a random 0..n us, so
 * that work of different streams interleaves in ways a fast, idle machine
 * rarely shows (a race between streams then shows as wrong results). */
static long mock_jitter_us(void)
{
    static long jitter = -1;
    return mock_env_once(&jitter, "MOCKCUDA_JITTER_US", 0);
}

static void *mock_worker(void *arg)
{
    mock_stream_t *s = arg;
    unsigned seed = (unsigned)(uintptr_t)s ^ (unsigned)getpid();
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->destroyed)
            pthread_cond_wait(&s->cond, &s->lock);
        mock_op_t *op = s->head;
        if (op) {
            s->head = op->next;
            if (!s->head)
                s->tail = NULL;
        }
        pthread_mutex_unlock(&s->lock);
        if (!op)
            break; /* destroyed and drained */
        if (mock_jitter_us())
            usleep((useconds_t)(rand_r(&seed) % (mock_jitter_us() + 1)));
        mock_op_run(op);
        free(op->owned);
        free(op);
        /* Everything the operation wrote is visible to whoever sees the
         * new count (release; waiters load with acquire). */
        __atomic_add_fetch(&s->done, 1, __ATOMIC_RELEASE);
        mock_wake(&s->done);
    }
    return NULL;
}

static cudaError_t mock_stream_new(int device, unsigned flags, int legacy, mock_stream_t **out)
{
    mock_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return cudaErrorMemoryAllocation;
    s->device = device;
    s->flags = flags;
    s->legacy = legacy;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, mock_worker, s);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(s);
        return cudaErrorMemoryAllocation;
    }
    s->worker = t;
    /* Called with mock_streams_lock held. */
    s->next = mock_streams;
    mock_streams = s;
    *out = s;
    return cudaSuccess;
}

cudaError_t mock_stream_get(cudaStream_t handle, mock_stream_t **out)
{
    cudaError_t e = cudaSuccess;
    int dev = mock_current_device();
    if (handle == cudaStreamPerThread && mock_per_thread[dev]) {
        *out = mock_per_thread[dev];
        return cudaSuccess;
    }
    pthread_mutex_lock(&mock_streams_lock);
    if (!handle || handle == cudaStreamLegacy) {
        if (!mock_legacy[dev])
            e = mock_stream_new(dev, 0, 1, &mock_legacy[dev]);
        *out = mock_legacy[dev];
    } else if (handle == cudaStreamPerThread) {
        e = mock_stream_new(dev, 0, 0, &mock_per_thread[dev]);
        *out = mock_per_thread[dev];
    } else {
        mock_stream_t *s = mock_streams;
        while (s && (s != (mock_stream_t *)handle || s->destroyed))
            s = s->next;
        *out = s;
        if (!s)
            e = cudaErrorInvalidResourceHandle;
    }
    pthread_mutex_unlock(&mock_streams_lock);
    return e;
}

int mock_stream_device(const mock_stream_t *s) { return s->device; }

/* The number of s's last queued operation, and whether it is unfinished. */
static int mock_stream_pending(mock_stream_t *s, uint32_t *ticket)
{
    pthread_mutex_lock(&s->lock);
    *ticket = s->enq;
    pthread_mutex_unlock(&s->lock);
    return !mock_cond_met(__atomic_load_n(&s->done, __ATOMIC_ACQUIRE), *ticket, CU_STREAM_WAIT_VALUE_GEQ);
}

/* Adds to *list a wait for s's queued work when some is unfinished. */
static void mock_depend(mock_stream_t *s, mock_op_t **list)
{
    uint32_t t;
    if (!mock_stream_pending(s, &t))
        return;
    mock_op_t *w = mock_op_new(MOCK_OP_WAIT);
    if (!w) {
        mock_say("out of memory for a stream dependency");
        abort();
    }
    w->word = &s->done;
    w->u32 = t;
    w->mode = CU_STREAM_WAIT_VALUE_GEQ;
    w->next = *list;
    *list = w;
}

static int mock_blocking(const mock_stream_t *s) { return !s->legacy && !(s->flags & cudaStreamNonBlocking); }

static uint32_t mock_queue_depth(void)
{
    static long depth = -1;
    return (uint32_t)mock_env_once(&depth, "MOCKCUDA_QUEUE_DEPTH", 1024);
}

/* A full stream blocks whoever queues onto it, except its own worker (the
 * mock's internal operations). */
static void mock_stream_room(mock_stream_t *s)
{
    uint32_t depth = mock_queue_depth();
    if (depth == 0 || pthread_equal(pthread_self(), s->worker))
        return;
    pthread_mutex_lock(&s->lock);
    uint32_t enq = s->enq;
    pthread_mutex_unlock(&s->lock);
    if (enq - __atomic_load_n(&s->done, __ATOMIC_ACQUIRE) >= depth)
        mock_stream_wait_ticket(s, enq - depth + 1);
}

void mock_stream_push(mock_stream_t *s, mock_op_t *op, uint32_t *ticket)
{
    mock_op_t *deps = NULL;
    mock_stream_room(s);
    pthread_mutex_lock(&mock_streams_lock);
    if (s->legacy) {
        for (mock_stream_t *y = mock_streams; y; y = y->next)
            if (y->device == s->device && mock_blocking(y))
                mock_depend(y, &deps);
    } else if (mock_blocking(s) && mock_legacy[s->device]) {
        mock_depend(mock_legacy[s->device], &deps);
    }
    pthread_mutex_unlock(&mock_streams_lock);
    op->next = NULL;
    pthread_mutex_lock(&s->lock);
    while (deps) {
        mock_op_t *d = deps;
        deps = d->next;
        d->next = op;
        op = d;
    }
    for (mock_op_t *o = op; o; o = o->next) {
        s->enq++;
        if (s->tail)
            s->tail->next = o;
        else
            s->head = o;
        s->tail = o;
        if (!o->next)
            break;
    }
    if (ticket)
        *ticket = s->enq;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void mock_stream_wait_ticket(mock_stream_t *s, uint32_t ticket)
{
    mock_wait(&s->done, ticket, CU_STREAM_WAIT_VALUE_GEQ);
}

/* Waits for all of s's queued work; on the legacy stream that includes
 * the blocking streams' work queued before, as the stream would wait. */
static cudaError_t mock_stream_drain(mock_stream_t *s)
{
    uint32_t t;
    if (s->legacy) {
        mock_op_t *nop = mock_op_new(MOCK_OP_COPY);
        if (!nop)
            return cudaErrorMemoryAllocation;
        mock_stream_push(s, nop, &t);
    } else {
        mock_stream_pending(s, &t);
    }
    mock_stream_wait_ticket(s, t);
    return cudaSuccess;
}

void mock_device_sync(int dev)
{
    for (;;) {
        mock_stream_t *busy = NULL;
        uint32_t t = 0;
        pthread_mutex_lock(&mock_streams_lock);
        for (mock_stream_t *s = mock_streams; s && !busy; s = s->next)
            if ((dev < 0 || s->device == dev) && mock_stream_pending(s, &t))
                busy = s;
        pthread_mutex_unlock(&mock_streams_lock);
        if (!busy)
            return;
        mock_stream_wait_ticket(busy, t);
    }
}

/* ---- the API ---------------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
    MOCK_ENTER();
    if (!out || (flags & ~(unsigned)cudaStreamNonBlocking))
        return mock_err(cudaErrorInvalidValue);
    mock_stream_t *s = NULL;
    pthread_mutex_lock(&mock_streams_lock);
    cudaError_t e = mock_stream_new(mock_current_device(), flags, 0, &s);
    pthread_mutex_unlock(&mock_streams_lock);
    *out = (cudaStream_t)s;
    return mock_err(e);
}

cudaError_t cudaStreamCreate(cudaStream_t *out) { return cudaStreamCreateWithFlags(out, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *out, unsigned int flags, int priority)
{
    return cudaStreamCreateWithFlags(out, flags); /* priorities are not modelled */
}

cudaError_t cudaStreamDestroy(cudaStream_t handle)
{
    MOCK_ENTER();
    mock_stream_t *s = NULL;
    if (!handle || handle == cudaStreamLegacy || handle == cudaStreamPerThread)
        return mock_err(cudaErrorInvalidResourceHandle);
    cudaError_t e = mock_stream_get(handle, &s);
    if (e != cudaSuccess)
        return mock_err(e);
    /* Returns at once; the worker drains the queue, then exits. */
    pthread_mutex_lock(&s->lock);
    s->destroyed = 1;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle)
{
    MOCK_ENTER();
    mock_stream_t *s = NULL;
    cudaError_t e = mock_stream_get(handle, &s);
    if (e == cudaSuccess)
        e = mock_stream_drain(s);
    return mock_err(e);
}

cudaError_t cudaStreamQuery(cudaStream_t handle)
{
    MOCK_ENTER();
    mock_stream_t *s = NULL;
    uint32_t t;
    cudaError_t e = mock_stream_get(handle, &s);
    if (e != cudaSuccess)
        return mock_err(e);
    return mock_stream_pending(s, &t) ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t handle, int *device)
{
    MOCK_ENTER();
    mock_stream_t *s = NULL;
    if (!device)
        return mock_err(cudaErrorInvalidValue);
    cudaError_t e = mock_stream_get(handle, &s);
    if (e != cudaSuccess)
        return mock_err(e);
    *device = s->device;
    return cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t handle, unsigned int *flags)
{
    MOCK_ENTER();
    mock_stream_t *s = NULL;
    if (!flags)
        return mock_err(cudaErrorInvalidValue);
    cudaError_t e = mock_stream_get(handle, &s);
    if (e != cudaSuccess)
        return mock_err(e);
    *flags = s->flags;
    return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t handle, cudaHostFn_t fn, void *arg)
{
    MOCK_ENTER();
    mock_stream_t *s = NULL;
    if (!fn)
        return mock_err(cudaErrorInvalidValue);
    cudaError_t e = mock_stream_get(handle, &s);
    if (e != cudaSuccess)
        return mock_err(e);
    mock_op_t *op = mock_op_new(MOCK_OP_HOST);
    if (!op)
        return mock_err(cudaErrorMemoryAllocation);
    op->fn = fn;
    op->arg = arg;
    mock_stream_push(s, op, NULL);
    return cudaSuccess;
}
