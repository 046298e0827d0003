/*
 * net_example.c - a minimal third-party net plugin, built as the tests'
 * libccl-net-example.so: what an outside author writes against
 * include/ccl_net.h alone, without linking libccl.
 *
 * It moves messages inside one process (the handle carries a pointer to the
 * listener), which is enough to run a message through ccl's loader and the
 * ABI's contract (ordering, tags, sizes, NULL until ready). By default it is
 * a version 1 plugin (ccl_net_plugin_v1), which ccl must keep loading. The
 * Makefile also builds it with -DNET_EXAMPLE_V2 (libccl-net-example2.so: a
 * version 2 plugin with every optional capability: it rings ccl's activity
 * callback when it queues a message, and, since its data moves only inside
 * isend and test, reports inline progress and gives one eventfd per
 * receive comm that is readable while a message waits), and with
 * -DNET_EXAMPLE_VERSION=3 (a struct that claims another version under the
 * v1 symbol) and -DNET_EXAMPLE_ONLY_V3 (exports only ccl_net_plugin_v3),
 * which ccl must refuse.
 */
#include "ccl_net.h"

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#ifndef NET_EXAMPLE_VERSION
#ifdef NET_EXAMPLE_V2
#define NET_EXAMPLE_VERSION CCL_NET_ABI_VERSION
#else
#define NET_EXAMPLE_VERSION CCL_NET_ABI_VERSION_V1
#endif
#endif

typedef struct ex_msg {
    struct ex_msg *next;
    size_t size;
    uint32_t tag;
    char data[];
} ex_msg_t;

/* One connection: a queue of copied messages. */
typedef struct {
    pthread_mutex_t lock;
    ex_msg_t *head, *tail;
    int refs;
    int efd; /* semaphore eventfd: one count per queued message */
} ex_chan_t;

#define EX_BACKLOG 8
typedef struct {
    pthread_mutex_t lock;
    ex_chan_t *backlog[EX_BACKLOG];
    int n;
} ex_listen_t;

typedef struct {
    int is_send;
    ex_chan_t *chan;
} ex_comm_t;

typedef struct {
    ex_comm_t *comm;
    void *data;
    size_t cap;
    uint32_t tag;
    size_t size;
} ex_req_t;

static ccl_net_log_fn_t ex_log;
static void (*ex_activity)(void);
static __thread char ex_err[256];

static ccl_result_t ex_fail(ccl_result_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ex_err, sizeof ex_err, fmt, ap);
    va_end(ap);
    return code;
}

#ifdef NET_EXAMPLE_V2
static ccl_result_t ex_init(const ccl_net_callbacks_t *cb)
{
    if (cb->size < sizeof *cb)
        return ex_fail(CCL_ERR_INVALID_USAGE, "ccl's callbacks are %u bytes, expected %zu", cb->size, sizeof *cb);
    ex_log = cb->log;
    ex_activity = cb->activity;
    ex_log(CCL_NET_LOG_INFO, __FILE__, __LINE__, "example plugin: init (v2)");
    return CCL_SUCCESS;
}
#else
static ccl_result_t ex_init(ccl_net_log_fn_t log)
{
    ex_log = log;
    ex_log(CCL_NET_LOG_INFO, __FILE__, __LINE__, "example plugin: init");
    return CCL_SUCCESS;
}
#endif

static ccl_result_t ex_devices(int *n)
{
    *n = 1;
    return CCL_SUCCESS;
}

static ccl_result_t ex_props(int dev, ccl_net_props_t *p)
{
    if (dev != 0)
        return ex_fail(CCL_ERR_INVALID_ARGUMENT, "no device %d", dev);
    *p = (ccl_net_props_t){.name = "example0", .ptr_support = CCL_NET_PTR_HOST, .speed_mbps = 1000,
                           .max_comms = 64, .max_recvs = 1, .max_requests = 8, .reg_granularity = 1,
                           .max_size = (size_t)1 << 30};
    return CCL_SUCCESS;
}

static ccl_result_t ex_listen(int dev, int rank, void *handle, void **lcomm)
{
    ex_listen_t *l = calloc(1, sizeof *l);
    if (!l)
        return ex_fail(CCL_ERR_SYSTEM, "out of memory");
    pthread_mutex_init(&l->lock, NULL);
    memset(handle, 0, CCL_NET_HANDLE_MAXSIZE);
    memcpy(handle, &l, sizeof l);
    *lcomm = l;
    return CCL_SUCCESS;
}

static ccl_result_t ex_connect(int dev, int rank, void *handle, void **scomm)
{
    ex_listen_t *l;
    memcpy(&l, handle, sizeof l);
    ex_comm_t *c = calloc(1, sizeof *c);
    ex_chan_t *ch = calloc(1, sizeof *ch);
    if (!c || !ch) {
        free(c);
        free(ch);
        return ex_fail(CCL_ERR_SYSTEM, "out of memory");
    }
    ch->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
    if (ch->efd < 0) {
        free(c);
        free(ch);
        return ex_fail(CCL_ERR_SYSTEM, "no eventfd");
    }
    pthread_mutex_init(&ch->lock, NULL);
    ch->refs = 2;
    pthread_mutex_lock(&l->lock);
    int full = l->n == EX_BACKLOG;
    if (!full)
        l->backlog[l->n++] = ch;
    pthread_mutex_unlock(&l->lock);
    if (full) {
        close(ch->efd);
        free(c);
        free(ch);
        *scomm = NULL; /* listener busy: the ABI lets us say "not yet" */
        return CCL_SUCCESS;
    }
    c->is_send = 1;
    c->chan = ch;
    *scomm = c;
    return CCL_SUCCESS;
}

static ccl_result_t ex_accept(void *lcomm, void **rcomm)
{
    ex_listen_t *l = lcomm;
    *rcomm = NULL;
    pthread_mutex_lock(&l->lock);
    ex_chan_t *ch = NULL;
    if (l->n > 0) {
        ch = l->backlog[0];
        memmove(l->backlog, l->backlog + 1, (size_t)(--l->n) * sizeof l->backlog[0]);
    }
    pthread_mutex_unlock(&l->lock);
    if (!ch)
        return CCL_SUCCESS;
    ex_comm_t *c = calloc(1, sizeof *c);
    if (!c)
        return ex_fail(CCL_ERR_SYSTEM, "out of memory");
    c->chan = ch;
    *rcomm = c;
    return CCL_SUCCESS;
}

static ccl_result_t ex_reg(void *comm, void *data, size_t size, int type, void **mh)
{
    if (type != CCL_NET_PTR_HOST)
        return ex_fail(CCL_ERR_UNSUPPORTED, "host memory only");
    *mh = NULL;
    return CCL_SUCCESS;
}

static ccl_result_t ex_dereg(void *comm, void *mh) { return CCL_SUCCESS; }

/* Sends copy the message at once and are done at the first test. */
static ccl_result_t ex_isend(void *scomm, const void *data, size_t size, uint32_t tag, void *mh, void **request)
{
    ex_comm_t *c = scomm;
    ex_msg_t *m = malloc(sizeof *m + size);
    ex_req_t *r = calloc(1, sizeof *r);
    if (!m || !r) {
        free(m);
        free(r);
        return ex_fail(CCL_ERR_SYSTEM, "out of memory");
    }
    m->next = NULL;
    m->size = size;
    m->tag = tag;
    if (size)
        memcpy(m->data, data, size);
    pthread_mutex_lock(&c->chan->lock);
    if (c->chan->tail)
        c->chan->tail->next = m;
    else
        c->chan->head = m;
    c->chan->tail = m;
    uint64_t one = 1;
    ssize_t w = write(c->chan->efd, &one, sizeof one); /* cannot fail below 2^64-1 messages */
    (void)w;
    pthread_mutex_unlock(&c->chan->lock);
    if (ex_activity)
        ex_activity(); /* the receiver's request can complete now */
    r->comm = c;
    r->size = size;
    *request = r;
    return CCL_SUCCESS;
}

static ccl_result_t ex_irecv(void *rcomm, int n, void **data, const size_t *sizes, const uint32_t *tags,
                             void **mh, void **request)
{
    if (n != 1)
        return ex_fail(CCL_ERR_INVALID_ARGUMENT, "one buffer per receive");
    ex_req_t *r = calloc(1, sizeof *r);
    if (!r)
        return ex_fail(CCL_ERR_SYSTEM, "out of memory");
    *r = (ex_req_t){rcomm, data[0], sizes[0], tags[0], 0};
    *request = r;
    return CCL_SUCCESS;
}

static ccl_result_t ex_test(void *request, int *done, size_t *sizes)
{
    ex_req_t *r = request;
    *done = 0;
    if (r->comm->is_send) {
        *done = 1;
    } else {
        ex_chan_t *ch = r->comm->chan;
        pthread_mutex_lock(&ch->lock);
        ex_msg_t *m = ch->head;
        if (m && m->size <= r->cap && m->tag == r->tag) {
            ch->head = m->next;
            if (!ch->head)
                ch->tail = NULL;
            uint64_t one;
            ssize_t got = read(ch->efd, &one, sizeof one); /* one count per message */
            (void)got;
        }
        pthread_mutex_unlock(&ch->lock);
        if (!m)
            return CCL_SUCCESS;
        if (m->size > r->cap || m->tag != r->tag) {
            /* The ABI: a failed request is finished. */
            ccl_result_t rc = ex_fail(CCL_ERR_REMOTE,
                                      "example peer sent %zu bytes with tag %u for a receive of %zu with tag %u",
                                      m->size, m->tag, r->cap, r->tag);
            free(r);
            return rc;
        }
        if (m->size)
            memcpy(r->data, m->data, m->size);
        r->size = m->size;
        free(m);
        *done = 1;
    }
    if (sizes)
        sizes[0] = r->size;
    free(r);
    return CCL_SUCCESS;
}

static ccl_result_t ex_close(void *comm)
{
    ex_comm_t *c = comm;
    pthread_mutex_lock(&c->chan->lock);
    int last = --c->chan->refs == 0;
    pthread_mutex_unlock(&c->chan->lock);
    if (last) {
        while (c->chan->head) {
            ex_msg_t *m = c->chan->head;
            c->chan->head = m->next;
            free(m);
        }
        pthread_mutex_destroy(&c->chan->lock);
        close(c->chan->efd);
        free(c->chan);
    }
    free(c);
    return CCL_SUCCESS;
}

static ccl_result_t ex_close_listen(void *lcomm)
{
    ex_listen_t *l = lcomm;
    for (int i = 0; i < l->n; i++) {
        /* Connected but never accepted: the sender still holds a reference. */
        pthread_mutex_lock(&l->backlog[i]->lock);
        int last = --l->backlog[i]->refs == 0;
        pthread_mutex_unlock(&l->backlog[i]->lock);
        if (last) {
            close(l->backlog[i]->efd);
            free(l->backlog[i]);
        }
    }
    pthread_mutex_destroy(&l->lock);
    free(l);
    return CCL_SUCCESS;
}

static ccl_result_t ex_finalize(void) { return CCL_SUCCESS; }

static const char *ex_last_error(void) { return ex_err; }

#ifdef NET_EXAMPLE_V2
/* Every message moves inside isend (the copy) and test (the copy out). */
static ccl_result_t ex_progress(void *comm, int *inline_io)
{
    *inline_io = 1;
    return CCL_SUCCESS;
}

/* A receive comm can move when a message waits: its eventfd is readable. */
static int ex_pollfds(void *comm, struct pollfd *pfds, int max)
{
    ex_comm_t *c = comm;
    if (c->is_send || max < 1)
        return 0;
    pfds[0] = (struct pollfd){c->chan->efd, POLLIN, 0};
    return 1;
}

__attribute__((visibility("default"))) const ccl_net_v2_t ccl_net_plugin_v2 = {
    .version = NET_EXAMPLE_VERSION,
    .name = "example2",
    .caps = CCL_NET_CAP_ACTIVITY,
    .progress = ex_progress,
    .pollfds = ex_pollfds,
#else
#ifdef NET_EXAMPLE_ONLY_V3
#define NET_EXAMPLE_SYMBOL ccl_net_plugin_v3
#else
#define NET_EXAMPLE_SYMBOL ccl_net_plugin_v1
#endif

__attribute__((visibility("default"))) const ccl_net_v1_t NET_EXAMPLE_SYMBOL = {
    .version = NET_EXAMPLE_VERSION,
    .name = "example",
#endif
    .init = ex_init,
    .devices = ex_devices,
    .get_properties = ex_props,
    .listen = ex_listen,
    .connect = ex_connect,
    .accept = ex_accept,
    .reg_mr = ex_reg,
    .dereg_mr = ex_dereg,
    .isend = ex_isend,
    .irecv = ex_irecv,
    .test = ex_test,
    .close_send = ex_close,
    .close_recv = ex_close,
    .close_listen = ex_close_listen,
    .finalize = ex_finalize,
    .last_error = ex_last_error,
};
