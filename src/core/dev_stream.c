/*
 * dev_stream.c - collectives on device buffers: the staged path.
 *
 * Correct, not fast. A call whose buffers are in GPU memory is run by the
 * host path on copies in pinned host memory: device -> pinned copy, the
 * host collective, pinned -> device copy. What makes it a CUDA citizen is
 * the ordering: on a cudaStream_t the call returns at once and the work
 * happens in stream order, as with NCCL:
 *
 *   user thread, at the call            the stream             worker thread
 *   --------------------------          ----------             -------------
 *   copy device inputs -> pinned        [D2H copies]
 *   record event in_ready               [in_ready]     ----->  waits for in_ready
 *   hold the stream on a flag           [hold: flag >= seq]    runs the host collective
 *   copy pinned results -> device       [H2D copies]   <-----  writes flag = seq
 *   record event out_done               [out_done]
 *   queue the job, return
 *
 * The worker is a ccl host stream (stream.c) per CUDA stream, so jobs run
 * in the order of their stream and, as on host streams, calls on different
 * streams are not ordered with each other. The hold is the driver's
 * stream wait on a flag in mapped pinned memory (cuStreamWaitValue32), or
 * a one-thread kernel polling it (wait_cuda.cu; CCL_CUDA_STREAM_WAIT); the
 * flag counts the stream's jobs, so it is written in order and one word
 * serves them all.
 * Each queued call has a pinned staging area of its own, taken from the
 * stream's areas whose out_done event has passed, or a new one when all
 * are in use: the call never waits for an earlier call of the stream to
 * finish (one thread queueing several calls for one rank before the other
 * ranks' calls would deadlock on that), so the stream holds as many areas
 * as it ever had calls in flight, and one call's copies overlap another's
 * host collective.
 *
 * With a NULL stream, device buffers are staged with blocking copies around
 * a blocking collective (pinned areas come from a shared pool). A ccl host
 * stream with device buffers is refused: its worker knows no CUDA stream
 * to order against.
 *
 * Buffers that overlap (in place) are staged as one range with the same
 * distance between them, so the host path sees NCCL's in-place layout;
 * only the bytes a call reads are copied out of the GPU and only those it
 * writes are copied back. Host buffers in such calls are used in place.
 *
 * Whether a pointer is device memory is asked only when the CUDA driver is
 * loaded in the process (dev_cuda_loaded, ~15 ns): host-only users never
 * initialise CUDA, on machines with or without a GPU.
 */
#include "core/comm_state.h"
#include "core/coll_run.h"
#include "core/dev_stream.h"
#include "core/stream.h"
#include "base/err.h"
#include "base/mem.h"
#include "base/param.h"
#include "device/cuda_rt.h"
#include "device/reduce.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DSTREAM_ALIGN 256             /* staged buffers start on this (element alignment and more) */
#define DSTREAM_GRAIN ((size_t)2 << 20) /* pinned areas grow in these steps */
/* cudaStreamPerThread: one handle, a different stream in every thread. */
#define DSTREAM_PER_THREAD ((void *)0x2)

/* One pinned staging area and the events that say when it is in use. */
typedef struct dstream_stage {
    struct dstream_stage *next;
    char *buf;
    size_t cap;
    void *in_ready; /* the inputs are in buf: the worker may start */
    void *out_done; /* the results left buf: it may be reused */
} dstream_stage_t;

/* What ccl keeps for one CUDA stream (on one device; per thread for
 * cudaStreamPerThread). Lives until the process exits: the handle may be
 * used again at any time and CUDA does not say when it is destroyed. */
typedef struct dstream {
    struct dstream *next;
    void *cuda_stream;
    int device;
    pthread_t thread;            /* only for cudaStreamPerThread */
    ccl_stream_t worker;         /* a host stream: its thread runs the jobs */
    volatile uint32_t *flag;     /* pinned, mapped: the last job the worker finished */
    uint32_t seq;                /* the last job queued */
    dstream_stage_t *stages;
    pthread_mutex_t lock;        /* several threads may queue on one stream */
} dstream_t;

/* A queued job, as the worker's hooks see it. */
typedef struct {
    dstream_t *ds;
    dstream_stage_t *stage;
    uint32_t seq;
    int failed; /* queueing the copies failed after the stream was told to hold */
} dstream_job_t;

/* Where one call's buffers lie in a staging area. */
typedef struct {
    size_t send_bytes, recv_bytes;
    size_t send_at, recv_at, premul_at;
} dstream_place_t;

static pthread_mutex_t dstream_lock = PTHREAD_MUTEX_INITIALIZER;
static dstream_t *dstreams;

/* Pinned areas of blocking calls, shared by every thread. */
typedef struct dstream_buf {
    struct dstream_buf *next;
    char *buf;
    size_t cap;
} dstream_buf_t;
static dstream_buf_t *dstream_pool;
/* Pinned areas replaced by larger ones (dstream_grow), kept until exit. */
static dstream_buf_t *dstream_retired;

/* ---- classification ---------------------------------------------------------- */

int dstream_is_cuda(ccl_stream_t stream)
{
    return stream && !stream_is_host(stream);
}

static int dstream_is_device(const void *p, size_t bytes)
{
    mem_ref_t ref;
    if (!p || bytes == 0)
        return 0;
    if (mem_find(p, bytes, &ref)) /* ccl_mem_alloc: host memory, no need to ask CUDA */
        return 0;
    return dev_ptr_is_device(p);
}

ccl_result_t dstream_classify(coll_args_t *a, ccl_stream_t stream, const char *name)
{
    ccl_result_t res = CCL_SUCCESS;
    const char *why = "";
    int cuda = dstream_is_cuda(stream);
    a->dev_send = a->dev_recv = a->dev_premul = 0;
    if (cuda && !dev_cuda_usable(&why))
        return err_set(CCL_ERR_UNSUPPORTED, "%s: device buffer passed but no CUDA driver/GPU: %s (stream %p "
                       "is not a ccl host stream, so it was taken for a cudaStream_t)", name, why, stream);
    if (!dev_cuda_loaded())
        return CCL_SUCCESS; /* no driver, no device memory: the host path, untouched */
    a->dev_send = (unsigned char)dstream_is_device(a->sendbuf, a->send_bytes);
    a->dev_recv = (unsigned char)dstream_is_device(a->recvbuf, a->recv_bytes);
    a->dev_premul = (unsigned char)(a->premul_ptr && dstream_is_device(a->premul_ptr, 1));
    if ((a->dev_send || a->dev_recv || a->dev_premul) && stream && !cuda)
        return err_set(CCL_ERR_INVALID_USAGE, "%s: device buffers on a ccl host stream: pass a cudaStream_t "
                       "(or NULL to block)", name);
    /* Where the comm was made before the process used CUDA: loaded at the
     * first device-buffer call, before it queues anything. */
    if (a->dev_send || a->dev_recv || a->dev_premul)
        CCL_TRY(dev_kernels_ready());
out:
    return res;
}

static int dstream_any_device(const coll_args_t *calls, int ncalls)
{
    for (int i = 0; i < ncalls; i++)
        if (calls[i].dev_send || calls[i].dev_recv || calls[i].dev_premul)
            return 1;
    return 0;
}

/* ---- staging layout ------------------------------------------------------------ */

static size_t dstream_round(size_t n) { return (n + DSTREAM_ALIGN - 1) / DSTREAM_ALIGN * DSTREAM_ALIGN; }

/* Places one call's staged buffers from offset `at`; returns the end. */
static size_t dstream_place(const coll_args_t *a, size_t at, dstream_place_t *p)
{
    p->send_bytes = a->send_bytes;
    p->recv_bytes = a->recv_bytes;
    const char *s = a->sendbuf, *r = a->recvbuf;
    p->send_at = p->recv_at = p->premul_at = 0;
    if (a->dev_send && a->dev_recv && s < r + p->recv_bytes && r < s + p->send_bytes) {
        const char *lo = s < r ? s : r;
        const char *hi = s + p->send_bytes > r + p->recv_bytes ? s + p->send_bytes : r + p->recv_bytes;
        p->send_at = at + (size_t)(s - lo);
        p->recv_at = at + (size_t)(r - lo);
        at += dstream_round((size_t)(hi - lo));
    } else {
        if (a->dev_send) {
            p->send_at = at;
            at += dstream_round(p->send_bytes);
        }
        if (a->dev_recv) {
            p->recv_at = at;
            at += dstream_round(p->recv_bytes);
        }
    }
    if (a->dev_premul) {
        p->premul_at = at;
        at += DSTREAM_ALIGN;
    }
    return at;
}

/* The call the host path runs: device pointers replaced by staged ones. */
static void dstream_staged_args(const coll_args_t *a, const dstream_place_t *p, char *buf, coll_args_t *out)
{
    *out = *a;
    if (a->dev_send)
        out->sendbuf = buf + p->send_at;
    if (a->dev_recv)
        out->recvbuf = buf + p->recv_at;
    /* In place with one side empty here (a broadcast's non-root, a
     * reduce's non-root): keep the two pointers equal. */
    if (a->sendbuf == a->recvbuf && a->dev_recv && !a->dev_send)
        out->sendbuf = out->recvbuf;
    if (a->sendbuf == a->recvbuf && a->dev_send && !a->dev_recv)
        out->recvbuf = (void *)out->sendbuf;
    if (a->dev_premul)
        out->premul_ptr = buf + p->premul_at;
    out->dev_send = out->dev_recv = out->dev_premul = 0;
}

/* Bytes of staging all calls need, and each one's place. */
static size_t dstream_layout(const coll_args_t *calls, int ncalls, dstream_place_t *places)
{
    size_t at = 0;
    for (int i = 0; i < ncalls; i++)
        at = dstream_place(&calls[i], at, &places[i]);
    return at;
}

/* Makes a pinned area hold at least `bytes` (its contents are lost). The
 * area it replaces is kept, not freed: cudaFreeHost waits for the whole
 * device, and a stream of this process may be held for a call that the
 * caller has yet to queue (one thread queueing several ranks' calls, or a
 * small call then a large one of one rank before the others'), so a free
 * here can wait forever. Areas at least double when they grow, so what is
 * kept stays below what is in use. */
static ccl_result_t dstream_grow(char **buf, size_t *cap, size_t bytes)
{
    ccl_result_t res = CCL_SUCCESS;
    dstream_buf_t *old = NULL;
    char *fresh = NULL;
    if (*cap >= bytes)
        return CCL_SUCCESS;
    size_t want = (bytes + DSTREAM_GRAIN - 1) / DSTREAM_GRAIN * DSTREAM_GRAIN;
    if (want < 2 * *cap)
        want = 2 * *cap;
    if (*buf && !(old = calloc(1, sizeof *old)))
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    CCL_TRY(dev_host_alloc((void **)&fresh, want));
    if (old) {
        *old = (dstream_buf_t){NULL, *buf, *cap};
        pthread_mutex_lock(&dstream_lock);
        old->next = dstream_retired;
        dstream_retired = old;
        pthread_mutex_unlock(&dstream_lock);
        old = NULL;
    }
    *buf = fresh;
    *cap = want;
out:
    free(old);
    return res;
}

/* ---- NULL stream: blocking -------------------------------------------------------- */

static ccl_result_t dstream_pool_get(size_t bytes, dstream_buf_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    pthread_mutex_lock(&dstream_lock);
    dstream_buf_t **best = NULL;
    for (dstream_buf_t **b = &dstream_pool; *b; b = &(*b)->next)
        if (!best || ((*b)->cap >= bytes && ((*best)->cap < bytes || (*b)->cap < (*best)->cap)))
            best = b;
    dstream_buf_t *got = NULL;
    if (best) {
        got = *best;
        *best = got->next;
    }
    pthread_mutex_unlock(&dstream_lock);
    if (!got && !(got = calloc(1, sizeof *got)))
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    CCL_TRY(dstream_grow(&got->buf, &got->cap, bytes));
    *out = got;
    got = NULL;
out:
    free(got);
    return res;
}

static void dstream_pool_put(dstream_buf_t *b)
{
    pthread_mutex_lock(&dstream_lock);
    b->next = dstream_pool;
    dstream_pool = b;
    pthread_mutex_unlock(&dstream_lock);
}

ccl_result_t dstream_run(const coll_args_t *calls, int ncalls)
{
    ccl_result_t res = CCL_SUCCESS;
    if (!dstream_any_device(calls, ncalls))
        return coll_run(calls, ncalls);
    dstream_buf_t *stage = NULL;
    dstream_place_t one_place, *places = &one_place;
    coll_args_t one_call, *staged = &one_call;
    if (ncalls > 1) {
        places = calloc((size_t)ncalls, sizeof *places);
        staged = calloc((size_t)ncalls, sizeof *staged);
        if (!places || !staged)
            CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for a group of %d calls", ncalls);
    }
    size_t bytes = dstream_layout(calls, ncalls, places);
    CCL_TRY(dstream_pool_get(bytes ? bytes : DSTREAM_ALIGN, &stage));
    for (int i = 0; i < ncalls; i++) {
        const coll_args_t *a = &calls[i];
        const dstream_place_t *p = &places[i];
        if (a->dev_send)
            CCL_TRY(dev_copy_sync(stage->buf + p->send_at, a->sendbuf, p->send_bytes));
        if (a->dev_premul)
            CCL_TRY(dev_copy_sync(stage->buf + p->premul_at, a->premul_ptr, dev_dtype_size(a->dtype)));
        dstream_staged_args(a, p, stage->buf, &staged[i]);
    }
    CCL_TRY(coll_run(staged, ncalls));
    for (int i = 0; i < ncalls; i++)
        if (calls[i].dev_recv)
            CCL_TRY(dev_copy_sync(calls[i].recvbuf, stage->buf + places[i].recv_at, places[i].recv_bytes));
out:
    if (stage)
        dstream_pool_put(stage);
    if (places != &one_place)
        free(places);
    if (staged != &one_call)
        free(staged);
    return res;
}

/* ---- CUDA streams: queued ------------------------------------------------------------ */

/* CCL_CUDA_STREAM_WAIT=kernel: hold streams with the polling kernel even
 * where the driver's stream wait works (to test that path, or where the
 * wait misbehaves). */
static int dstream_hold_kernel(void)
{
    static int mode = -1;
    int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (m < 0) {
        const char *v = param_str(PARAM_CUDA_STREAM_WAIT);
        m = strcmp(v, "kernel") == 0;
        if (!m && strcmp(v, "auto") != 0 && strcmp(v, "") != 0)
            LOG_WARN(SUB_ALL, "CCL_CUDA_STREAM_WAIT=%s is neither auto nor kernel: using auto", v);
        __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
    }
    return m;
}

static ccl_result_t dstream_before(void *arg)
{
    dstream_job_t *j = arg;
    if (j->failed)
        return err_set(CCL_ERR_CUDA, "a staged device call was not run: queueing its copies on the CUDA "
                       "stream failed (the call returned the error)");
    return dev_event_sync(j->stage->in_ready);
}

static void dstream_after(void *arg, ccl_result_t res)
{
    dstream_job_t *j = arg;
    /* Results (written by the collective, streamed stores fenced) before
     * the flag: the stream's copies back into device memory follow it. */
    __atomic_store_n(j->ds->flag, j->seq, __ATOMIC_RELEASE);
    free(j);
}

static void dstream_destroy(dstream_t *ds)
{
    while (ds->stages) {
        dstream_stage_t *st = ds->stages;
        ds->stages = st->next;
        dev_event_destroy(st->in_ready);
        dev_event_destroy(st->out_done);
        dev_host_free(st->buf);
        free(st);
    }
    dev_host_free((void *)ds->flag);
    if (ds->worker)
        ccl_stream_destroy(ds->worker);
    pthread_mutex_destroy(&ds->lock);
    free(ds);
}

static ccl_result_t dstream_create(void *cuda_stream, int device, dstream_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    dstream_t *ds = calloc(1, sizeof *ds);
    if (!ds)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    pthread_mutex_init(&ds->lock, NULL);
    ds->cuda_stream = cuda_stream;
    ds->device = device;
    ds->thread = pthread_self();
    CCL_TRY(dev_host_alloc((void **)&ds->flag, sizeof *ds->flag));
    *ds->flag = 0;
    CCL_TRY(ccl_stream_create(&ds->worker));
    *out = ds;
    ds = NULL;
out:
    if (ds)
        dstream_destroy(ds);
    return res;
}

/* The state of a CUDA stream, made on its first use. */
static ccl_result_t dstream_get(void *cuda_stream, dstream_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    int device = dev_stream_device(cuda_stream);
    if (device < 0)
        return CCL_ERR_CUDA; /* message set */
    int current = dev_current_device();
    if (device != current)
        return err_set(CCL_ERR_INVALID_USAGE, "CUDA stream %p belongs to device %d but the current device "
                       "is %d: call cudaSetDevice(%d) first, as with NCCL", cuda_stream, device, current, device);
    int per_thread = cuda_stream == DSTREAM_PER_THREAD;
    pthread_mutex_lock(&dstream_lock);
    dstream_t *ds = dstreams;
    while (ds && !(ds->cuda_stream == cuda_stream && ds->device == device &&
                   (!per_thread || pthread_equal(ds->thread, pthread_self()))))
        ds = ds->next;
    if (!ds) {
        res = dstream_create(cuda_stream, device, &ds);
        if (res == CCL_SUCCESS) {
            ds->next = dstreams;
            dstreams = ds;
        }
    }
    pthread_mutex_unlock(&dstream_lock);
    *out = ds;
    return res;
}

/* A staging area for `bytes` that no queued call uses: the smallest free
 * one that is large enough, else a free one grown, else a new one. Called
 * under ds->lock. */
static ccl_result_t dstream_stage(dstream_t *ds, size_t bytes, dstream_stage_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    dstream_stage_t *best = NULL, *st = NULL;
    for (dstream_stage_t *s = ds->stages; s; s = s->next) {
        int done = dev_event_done(s->out_done);
        if (done < 0)
            return CCL_ERR_CUDA; /* message set */
        if (done && (!best || (s->cap >= bytes && (best->cap < bytes || s->cap < best->cap))))
            best = s;
    }
    if (!best) {
        if (!(st = calloc(1, sizeof *st)))
            CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
        CCL_TRY(dev_event_create(&st->in_ready));
        CCL_TRY(dev_event_create(&st->out_done));
        st->next = ds->stages;
        ds->stages = st;
        best = st;
        st = NULL;
    }
    CCL_TRY(dstream_grow(&best->buf, &best->cap, bytes));
    *out = best;
out:
    if (st) {
        dev_event_destroy(st->in_ready);
        dev_event_destroy(st->out_done);
        free(st);
    }
    return res;
}

ccl_result_t dstream_enqueue(ccl_stream_t stream, const coll_args_t *calls, int ncalls)
{
    ccl_result_t res = CCL_SUCCESS;
    dstream_t *ds = NULL;
    dstream_job_t *job = NULL;
    stream_op_t *op = NULL;
    dstream_place_t one_place, *places = &one_place;
    coll_args_t one_call, *staged = &one_call;
    int locked = 0, held = 0;
    if (ncalls > 1) {
        places = calloc((size_t)ncalls, sizeof *places);
        staged = calloc((size_t)ncalls, sizeof *staged);
        if (!places || !staged)
            CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for a group of %d calls", ncalls);
    }
    for (int i = 0; i < ncalls; i++)
        if (__atomic_load_n(&calls[i].comm->broken, __ATOMIC_RELAXED))
            CCL_FAIL(CCL_ERR_INVALID_USAGE, "an earlier collective on this communicator failed; its connections "
                     "are in an unknown state: destroy it and create a new one");
    CCL_TRY(dstream_get(stream, &ds));
    pthread_mutex_lock(&ds->lock);
    locked = 1;
    size_t bytes = dstream_layout(calls, ncalls, places);
    dstream_stage_t *st = NULL;
    CCL_TRY(dstream_stage(ds, bytes ? bytes : DSTREAM_ALIGN, &st));
    if (!(job = calloc(1, sizeof *job)))
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    *job = (dstream_job_t){ds, st, ds->seq + 1, 0};
    for (int i = 0; i < ncalls; i++)
        dstream_staged_args(&calls[i], &places[i], st->buf, &staged[i]);
    /* The job exists before the stream is told to wait for it: from the
     * hold on, the worker must release the flag whatever happens. */
    stream_hooks_t hooks = {dstream_before, dstream_after, job};
    op = stream_op_new(ds->worker, staged, ncalls, &hooks);
    if (!op) {
        res = CCL_ERR_SYSTEM; /* message set */
        goto out;
    }
    for (int i = 0; i < ncalls; i++) {
        const coll_args_t *a = &calls[i];
        const dstream_place_t *p = &places[i];
        if (a->dev_send)
            CCL_TRY(dev_copy_async(st->buf + p->send_at, a->sendbuf, p->send_bytes, stream));
        if (a->dev_premul)
            CCL_TRY(dev_copy_async(st->buf + p->premul_at, a->premul_ptr, dev_dtype_size(a->dtype), stream));
    }
    CCL_TRY(dev_event_record(st->in_ready, stream));
    CCL_TRY(dev_stream_hold(ds->flag, job->seq, stream, dstream_hold_kernel()));
    held = 1;
    ds->seq = job->seq;
    for (int i = 0; i < ncalls; i++)
        if (calls[i].dev_recv)
            CCL_TRY(dev_copy_async(calls[i].recvbuf, st->buf + places[i].recv_at, places[i].recv_bytes, stream));
    CCL_TRY(dev_event_record(st->out_done, stream));
out:
    if (res != CCL_SUCCESS && held) {
        /* The stream already waits for this job: queue it all the same,
         * marked failed, so the worker releases the flag in order. */
        job->failed = 1;
    }
    if (op && (res == CCL_SUCCESS || held)) {
        stream_op_submit(ds->worker, op); /* the worker calls pending_done */
    } else {
        stream_op_discard(ds->worker, op);
        free(job);
        for (int i = 0; i < ncalls; i++)
            comm_pending_done(calls[i].comm);
    }
    if (locked)
        pthread_mutex_unlock(&ds->lock);
    if (places != &one_place)
        free(places);
    if (staged != &one_call)
        free(staged);
    return res;
}
