/*
 * mock_event.c - events of the mock CUDA runtime, interprocess ones
 * included.
 *
 * An event is two counters: `recorded`, raised by the host thread at each
 * cudaEventRecord, and `completed`, raised by the stream worker when it
 * reaches that record. The event's latest work is done when completed has
 * caught up with recorded, so query, synchronise and cudaStreamWaitEvent
 * all compare two numbers (serial numbers: wrap-around is harmless), and a
 * waiter sleeps on `completed` as a futex word. An interprocess event keeps
 * the counters in a page of a memfd, so a process that opened its handle
 * records, waits and queries the very same words (the futex wakes reach
 * across processes on shared memory).
 *
 * Queued operations hold a reference on the event, so destroying an event
 * with work pending is safe (CUDA allows it); the last reference frees it.
 */
#include "mock_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MOCK_EVENT_MAGIC 0x4d4b4345u /* "ECKM": an event handle of this mock */

typedef struct {
    uint32_t recorded;           /* records issued */
    volatile uint32_t completed; /* records the streams reached (futex word) */
    double time;                 /* when the latest completion ran (timing events) */
} mock_evstate_t;

typedef struct mock_event {
    struct mock_event *next; /* live events (handles the API accepts) */
    unsigned flags;
    int device;
    mock_evstate_t *st;
    int shared; /* st is a shared mapping (interprocess, created or opened) */
    int fd;     /* created interprocess: the memfd under st, for handles */
    ino_t ino;
    int opened; /* from cudaIpcOpenEventHandle */
    int refs;
} mock_event_t;

static pthread_mutex_t mock_events_lock = PTHREAD_MUTEX_INITIALIZER;
static mock_event_t *mock_events;

static void mock_event_free(mock_event_t *ev)
{
    if (ev->shared)
        munmap(ev->st, sizeof *ev->st);
    else
        free(ev->st);
    if (ev->fd >= 0)
        close(ev->fd);
    free(ev);
}

void mock_event_unref(mock_event_t *ev)
{
    if (__atomic_sub_fetch(&ev->refs, 1, __ATOMIC_ACQ_REL) == 0)
        mock_event_free(ev);
}

static void mock_event_register(mock_event_t *ev)
{
    pthread_mutex_lock(&mock_events_lock);
    ev->next = mock_events;
    mock_events = ev;
    pthread_mutex_unlock(&mock_events_lock);
}

/* The live event a handle names, with a reference taken; NULL if none. */
static mock_event_t *mock_event_get(cudaEvent_t handle)
{
    pthread_mutex_lock(&mock_events_lock);
    mock_event_t *ev = mock_events;
    while (ev && ev != (mock_event_t *)handle)
        ev = ev->next;
    if (ev)
        __atomic_add_fetch(&ev->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&mock_events_lock);
    return ev;
}

void mock_event_complete(mock_event_t *ev, uint32_t number)
{
    mock_evstate_t *st = ev->st;
    st->time = mock_now();
    /* Only forward: a later record that completed first stays done. */
    uint32_t cur = __atomic_load_n(&st->completed, __ATOMIC_RELAXED);
    while ((int32_t)(number - cur) > 0 &&
           !__atomic_compare_exchange_n(&st->completed, &cur, number, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
    mock_wake(&st->completed);
}

static int mock_event_is_done(const mock_event_t *ev)
{
    uint32_t r = __atomic_load_n(&ev->st->recorded, __ATOMIC_ACQUIRE);
    return mock_cond_met(__atomic_load_n(&ev->st->completed, __ATOMIC_ACQUIRE), r, CU_STREAM_WAIT_VALUE_GEQ);
}

/* ---- the API ---------------------------------------------------------------------- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
    MOCK_ENTER();
    const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!out || (flags & ~known))
        return mock_err(cudaErrorInvalidValue);
    /* As CUDA: an interprocess event must have timing disabled. */
    if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming))
        return mock_err(cudaErrorInvalidValue);
    mock_event_t *ev = calloc(1, sizeof *ev);
    if (!ev)
        return mock_err(cudaErrorMemoryAllocation);
    ev->flags = flags;
    ev->device = mock_current_device();
    ev->fd = -1;
    ev->refs = 1;
    if (flags & cudaEventInterprocess) {
        struct stat sb;
        ev->fd = memfd_create("mockcuda-event", MFD_CLOEXEC);
        void *p = MAP_FAILED;
        if (ev->fd >= 0 && ftruncate(ev->fd, sizeof *ev->st) == 0 && fstat(ev->fd, &sb) == 0)
            p = mmap(NULL, sizeof *ev->st, PROT_READ | PROT_WRITE, MAP_SHARED, ev->fd, 0);
        if (p == MAP_FAILED) {
            if (ev->fd >= 0)
                close(ev->fd);
            free(ev);
            return mock_err(cudaErrorMemoryAllocation);
        }
        ev->st = p;
        ev->shared = 1;
        ev->ino = sb.st_ino;
    } else if (!(ev->st = calloc(1, sizeof *ev->st))) {
        free(ev);
        return mock_err(cudaErrorMemoryAllocation);
    }
    mock_event_register(ev);
    *out = (cudaEvent_t)ev;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *out) { return cudaEventCreateWithFlags(out, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t handle)
{
    MOCK_ENTER();
    mock_event_t *ev = NULL;
    pthread_mutex_lock(&mock_events_lock);
    for (mock_event_t **p = &mock_events; *p; p = &(*p)->next)
        if (*p == (mock_event_t *)handle) {
            ev = *p;
            *p = ev->next;
            break;
        }
    pthread_mutex_unlock(&mock_events_lock);
    if (!ev)
        return mock_err(cudaErrorInvalidResourceHandle);
    mock_event_unref(ev); /* queued records and waits keep it until they ran */
    return cudaSuccess;
}

/* The event (a reference taken) and the stream of a record or a wait,
 * and a new operation of this kind for them. */
static cudaError_t mock_event_op(cudaEvent_t handle, cudaStream_t stream, mock_op_kind_t kind, mock_event_t **ev,
                                 mock_stream_t **s, mock_op_t **op)
{
    cudaError_t e = cudaSuccess;
    if (!(*ev = mock_event_get(handle)))
        return cudaErrorInvalidResourceHandle;
    if ((e = mock_stream_get(stream, s)) == cudaSuccess && !(*op = mock_op_new(kind)))
        e = cudaErrorMemoryAllocation;
    if (e != cudaSuccess) {
        mock_event_unref(*ev);
        *ev = NULL;
    }
    return e;
}

cudaError_t cudaEventRecord(cudaEvent_t handle, cudaStream_t stream)
{
    MOCK_ENTER();
    mock_stream_t *s = NULL;
    mock_op_t *op = NULL;
    mock_event_t *ev = NULL;
    cudaError_t e = mock_event_op(handle, stream, MOCK_OP_EVENT, &ev, &s, &op);
    if (e != cudaSuccess)
        return mock_err(e);
    /* CUDA: the event and the stream must belong to the same device (an
     * opened interprocess event belongs to every device of the opener). */
    if (!ev->opened && mock_stream_device(s) != ev->device) {
        free(op);
        mock_event_unref(ev);
        return mock_err(cudaErrorInvalidResourceHandle);
    }
    op->event = ev; /* the reference taken goes with the operation */
    op->u32 = __atomic_add_fetch(&ev->st->recorded, 1, __ATOMIC_ACQ_REL);
    mock_stream_push(s, op, NULL);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t handle)
{
    MOCK_ENTER();
    mock_event_t *ev = mock_event_get(handle);
    if (!ev)
        return mock_err(cudaErrorInvalidResourceHandle);
    cudaError_t e = mock_event_is_done(ev) ? cudaSuccess : cudaErrorNotReady;
    mock_event_unref(ev);
    return e;
}

cudaError_t cudaEventSynchronize(cudaEvent_t handle)
{
    MOCK_ENTER();
    mock_event_t *ev = mock_event_get(handle);
    if (!ev)
        return mock_err(cudaErrorInvalidResourceHandle);
    mock_wait(&ev->st->completed, __atomic_load_n(&ev->st->recorded, __ATOMIC_ACQUIRE), CU_STREAM_WAIT_VALUE_GEQ);
    mock_event_unref(ev);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t handle, unsigned int flags)
{
    MOCK_ENTER();
    mock_stream_t *s = NULL;
    mock_op_t *op = NULL;
    mock_event_t *ev = NULL;
    if (flags & ~(unsigned)cudaEventWaitExternal)
        return mock_err(cudaErrorInvalidValue);
    cudaError_t e = mock_event_op(handle, stream, MOCK_OP_WAIT, &ev, &s, &op);
    if (e != cudaSuccess)
        return mock_err(e);
    uint32_t target = __atomic_load_n(&ev->st->recorded, __ATOMIC_ACQUIRE);
    if (mock_cond_met(__atomic_load_n(&ev->st->completed, __ATOMIC_ACQUIRE), target, CU_STREAM_WAIT_VALUE_GEQ)) {
        free(op); /* nothing to wait for */
        mock_event_unref(ev);
        return cudaSuccess;
    }
    op->word = &ev->st->completed;
    op->u32 = target;
    op->mode = CU_STREAM_WAIT_VALUE_GEQ;
    op->event = ev; /* released by the worker after the wait */
    mock_stream_push(s, op, NULL);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    MOCK_ENTER();
    cudaError_t e = cudaSuccess;
    mock_event_t *a = mock_event_get(start), *b = mock_event_get(end);
    if (!ms)
        e = cudaErrorInvalidValue;
    else if (!a || !b || (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming) ||
             a->st->recorded == 0 || b->st->recorded == 0)
        e = cudaErrorInvalidResourceHandle;
    else if (!mock_event_is_done(a) || !mock_event_is_done(b))
        e = cudaErrorNotReady;
    else
        *ms = (float)((b->st->time - a->st->time) * 1e3);
    if (a)
        mock_event_unref(a);
    if (b)
        mock_event_unref(b);
    return mock_err(e);
}

/* ---- interprocess events ------------------------------------------------------------ */

cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *handle, cudaEvent_t event)
{
    MOCK_ENTER();
    if (!handle)
        return mock_err(cudaErrorInvalidValue);
    mock_event_t *ev = mock_event_get(event);
    if (!ev)
        return mock_err(cudaErrorInvalidResourceHandle);
    cudaError_t e = cudaSuccess;
    if (!(ev->flags & cudaEventInterprocess) || ev->opened) {
        e = cudaErrorInvalidResourceHandle;
    } else {
        mock_wire_t w = {MOCK_EVENT_MAGIC, (int32_t)getpid(), ev->fd, ev->device, (uint64_t)ev->ino, sizeof *ev->st};
        memset(handle, 0, sizeof *handle);
        memcpy(handle->reserved, &w, sizeof w);
    }
    mock_event_unref(ev);
    return mock_err(e);
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *out, cudaIpcEventHandle_t handle)
{
    MOCK_ENTER();
    mock_wire_t w;
    memcpy(&w, handle.reserved, sizeof w);
    if (!out || w.magic != MOCK_EVENT_MAGIC)
        return mock_err(cudaErrorInvalidValue);
    if (w.pid == (int32_t)getpid())
        return mock_err(cudaErrorDeviceUninitialized); /* CUDA refuses a handle of the same process */
    int fd = mock_ipc_open_fd(w.pid, w.fd, (ino_t)w.ino);
    if (fd < 0)
        return mock_err(cudaErrorInvalidValue);
    void *p = mmap(NULL, sizeof(mock_evstate_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    mock_event_t *ev = p == MAP_FAILED ? NULL : calloc(1, sizeof *ev);
    if (!ev) {
        if (p != MAP_FAILED)
            munmap(p, sizeof(mock_evstate_t));
        return mock_err(cudaErrorMemoryAllocation);
    }
    ev->flags = cudaEventInterprocess | cudaEventDisableTiming;
    ev->device = w.device;
    ev->st = p;
    ev->shared = 1;
    ev->fd = -1;
    ev->opened = 1;
    ev->refs = 1;
    mock_event_register(ev);
    *out = (cudaEvent_t)ev;
    return cudaSuccess;
}
