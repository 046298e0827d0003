/*
 * net_ib.c - the ib net plugin's control path: loading verbs, its devices,
 * the connection handshake over a TCP side channel, queue pairs, memory
 * registration, failures (async events, a side channel that closes). The
 * data path is net_ib_io.c; the design is in net_ib.h.
 */
#include "transport/net_ib.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/param.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#if CCL_HAVE_IBVERBS

/* How often a waiting comm looks at its side channel and async events. */
#define IB_CHECK_NS (20 * 1000 * 1000ull)
/* Async events remembered per device for the comms to look through. */
#define IB_ASYNC_RING 32

typedef struct {
    uint64_t seq;
    int type;      /* enum ibv_event_type */
    uint32_t qpn;  /* QP events */
    int port;      /* port events */
} ib_async_event_t;

typedef struct {
    pthread_mutex_t lock;
    uint64_t nevents;
    ib_async_event_t ring[IB_ASYNC_RING];
} ib_async_t;

static struct {
    const ib_verbs_t *v;
    int ndev;
    ib_dev_t dev[IB_MAX_DEVS];
    ib_async_t async[IB_MAX_DEVS]; /* by device index; ports of one context use their owner's */
    char why[256];
    char host[64];
    ib_qp_params_t qp;
    int nqps;
} ib_g;

const ib_verbs_t *ib_verbs(void) { return ib_g.v; }

/* A connect in progress (the handle's pending). */
typedef struct {
    int fd;
    int stage;           /* 1 TCP connecting, 2 info sent, awaiting the peer's */
    uint32_t psn;        /* ours */
    size_t got;
    ib_conn_info_t peer;
    ib_comm_t *comm;
    uint64_t deadline;
} ib_pending_t;

/* An accepted side channel whose connection is not complete yet. */
typedef struct {
    int fd; /* -1: free */
    size_t got;
    ib_conn_info_t peer;
    ib_comm_t *comm;     /* set once our queue pairs are ready: then awaiting "ready" */
    uint64_t deadline;
} ib_incoming_t;

#define IB_MAX_INCOMING 64

typedef struct {
    int fd;
    int dev;
    int rank; /* ours, told to each connector */
    uint64_t listen_id;
    ib_incoming_t in[IB_MAX_INCOMING];
} ib_listen_t;

static uint64_t ib_timeout_ns(void) { return (uint64_t)param_int(PARAM_TIMEOUT) * 1000000000ull; }

/* ---- failures ------------------------------------------------------------ */

const char *ib_comm_peer(const ib_comm_t *c, char *buf, size_t len)
{
    char gid[64];
    snprintf(buf, len, "rank %d (%s, %s GID %s)", c->peer_rank, c->peer_host[0] ? c->peer_host : "?",
             c->peer_dev[0] ? c->peer_dev : "?", ib_gid_str(c->peer_gid, gid, sizeof gid));
    return buf;
}

ccl_result_t ib_comm_fail(ib_comm_t *c, ccl_result_t code, const char *fmt, ...)
{
    if (c->fail_code == CCL_SUCCESS) {
        char what[384], peer[160], gid[64];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(c->err, sizeof c->err, "net/ib: %s %s on %s (GID %s): %s", c->is_send ? "sending to" : "receiving from",
                 ib_comm_peer(c, peer, sizeof peer), c->dev->name, ib_gid_str(c->dev->end.gid, gid, sizeof gid), what);
        c->fail_code = code;
    }
    return err_set(c->fail_code, "%s", c->err);
}

/* Reads the device's pending async events into its ring (one reader at a
 * time; the others skip). */
static void ib_async_drain(const ib_dev_t *d, ib_async_t *a)
{
    if (pthread_mutex_trylock(&a->lock) != 0)
        return;
    struct ibv_async_event ev;
    while (ib_g.v->get_async_event(d->ctx, &ev) == 0) {
        ib_async_event_t *e = &a->ring[a->nevents % IB_ASYNC_RING];
        e->type = ev.event_type;
        e->qpn = 0;
        e->port = 0;
        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
            e->qpn = ev.element.qp->qp_num;
            break;
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_PORT_ACTIVE:
            e->port = ev.element.port_num;
            break;
        default:
            break;
        }
        e->seq = ++a->nevents;
        LOG_WARN(SUB_NET, "net/ib: %s: async event %s", d->devname, ib_g.v->event_type_str(ev.event_type));
        ib_g.v->ack_async_event(&ev);
    }
    pthread_mutex_unlock(&a->lock);
}

static ib_async_t *ib_async_of(const ib_dev_t *d)
{
    for (int i = 0; i < ib_g.ndev; i++)
        if (ib_g.dev[i].ctx == d->ctx && ib_g.dev[i].ctx_owner)
            return &ib_g.async[i];
    return &ib_g.async[0];
}

/* The async events since the comm last looked that concern it. */
static ccl_result_t ib_comm_check_async(ib_comm_t *c)
{
    ib_async_t *a = ib_async_of(c->dev);
    ib_async_drain(c->dev, a);
    pthread_mutex_lock(&a->lock);
    uint64_t n = a->nevents, from = c->async_seen + IB_ASYNC_RING < n ? n - IB_ASYNC_RING : c->async_seen;
    int hit = -1;
    for (uint64_t s = from; s < n && hit < 0; s++) {
        const ib_async_event_t *e = &a->ring[s % IB_ASYNC_RING];
        int mine = e->type == IBV_EVENT_DEVICE_FATAL || (e->type == IBV_EVENT_PORT_ERR && e->port == c->dev->port);
        for (int q = 0; q < c->nqps && !mine; q++)
            mine = e->qpn && c->qp[q] && e->qpn == c->qp[q]->qp_num;
        if (mine)
            hit = e->type;
    }
    c->async_seen = n;
    pthread_mutex_unlock(&a->lock);
    if (hit >= 0)
        return ib_comm_fail(c, CCL_ERR_REMOTE, "async event %s", ib_g.v->event_type_str((enum ibv_event_type)hit));
    return CCL_SUCCESS;
}

ccl_result_t ib_comm_check(ib_comm_t *c)
{
    if (c->fail_code != CCL_SUCCESS)
        return err_set(c->fail_code, "%s", c->err);
    uint64_t now = clock_now_ns();
    if (now < c->next_check_ns)
        return CCL_SUCCESS;
    c->next_check_ns = now + IB_CHECK_NS;
    char b;
    ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0)
        return ib_comm_fail(c, CCL_ERR_REMOTE, "its side channel closed: the process ended or was killed");
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return ib_comm_fail(c, CCL_ERR_REMOTE, "its side channel failed: %s (dead host or cut link)", strerror(errno));
    return ib_comm_check_async(c);
}

/* A queue pair's first packet sequence number: random, so that a stale
 * packet of an earlier connection is not taken for one of this. */
static uint32_t ib_random_psn(void)
{
    uint32_t psn = 0;
    if (getrandom(&psn, sizeof psn, 0) != sizeof psn)
        psn = (uint32_t)clock_now_ns();
    return psn & 0xffffff;
}

/* Reads what has arrived of len bytes into buf at *got; -1 on EOF or error. */
static int ib_recv_some(int fd, void *buf, size_t len, size_t *got)
{
    while (*got < len) {
        ssize_t r = recv(fd, (char *)buf + *got, len - *got, MSG_DONTWAIT);
        if (r > 0) {
            *got += (size_t)r;
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        return -1;
    }
    return 1;
}

/* ---- the plugin's entry points ----------------------------------------- */

static ccl_result_t ib_init(const ccl_net_callbacks_t *cb)
{
    (void)cb; /* completions are seen by polling: nothing to ring */
    ccl_result_t res = CCL_SUCCESS;
    memset(&ib_g, 0, sizeof ib_g);
    if (gethostname(ib_g.host, sizeof ib_g.host - 1) != 0)
        snprintf(ib_g.host, sizeof ib_g.host, "?");
    ib_g.qp = (ib_qp_params_t){(int)param_int(PARAM_IB_TC), (int)param_int(PARAM_IB_SL),
                               (int)param_int(PARAM_IB_TIMEOUT), (int)param_int(PARAM_IB_RETRY_CNT)};
    ib_g.nqps = (int)param_int(PARAM_IB_QPS_PER_CONNECTION);
    if (ib_g.nqps < 1 || ib_g.nqps > IB_MAX_QPS)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "CCL_IB_QPS_PER_CONNECTION=%d: 1..%d", ib_g.nqps, IB_MAX_QPS);
    if (ib_g.qp.timeout < 1 || ib_g.qp.timeout > 31 || ib_g.qp.retry_cnt < 0 || ib_g.qp.retry_cnt > 7 ||
        ib_g.qp.tc < 0 || ib_g.qp.tc > 255 || ib_g.qp.sl < 0 || ib_g.qp.sl > 15)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "CCL_IB_TIMEOUT=%d (1..31), CCL_IB_RETRY_CNT=%d (0..7), CCL_IB_TC=%d "
                       "(0..255), CCL_IB_SL=%d (0..15): out of range", ib_g.qp.timeout, ib_g.qp.retry_cnt, ib_g.qp.tc,
                       ib_g.qp.sl);
    if (ib_verbs_load(&ib_g.v) != CCL_SUCCESS) {
        snprintf(ib_g.why, sizeof ib_g.why, "%s", err_message());
        return CCL_SUCCESS; /* no devices, and why */
    }
    CCL_TRY(ib_dev_discover(ib_g.v, ib_g.dev, IB_MAX_DEVS, &ib_g.ndev, ib_g.why, sizeof ib_g.why));
    for (int i = 0; i < ib_g.ndev; i++) {
        pthread_mutex_init(&ib_g.async[i].lock, NULL);
        if (ib_g.dev[i].ctx_owner) {
            int fl = fcntl(ib_g.dev[i].ctx->async_fd, F_GETFL);
            if (fl < 0 || fcntl(ib_g.dev[i].ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
                CCL_FAIL(CCL_ERR_SYSTEM, "net/ib: %s: cannot make its event channel non-blocking: %s",
                         ib_g.dev[i].devname, strerror(errno));
        }
        char gid[64];
        LOG_INFO(SUB_NET, "net/ib: %s %s, %d Mbit/s, MTU %d, GID %d %s (%s)", ib_g.dev[i].name,
                 ib_g.dev[i].end.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand", ib_g.dev[i].speed_mbps,
                 128 << ib_g.dev[i].end.mtu, ib_g.dev[i].end.gid_index, ib_gid_str(ib_g.dev[i].end.gid, gid, sizeof gid),
                 ib_g.dev[i].gid_type == IB_GID_TYPE_ROCE_V2 ? "RoCE v2" :
                 ib_g.dev[i].gid_type == IB_GID_TYPE_ROCE_V1 ? "RoCE v1" : "IB");
    }
out:
    return res;
}

static ccl_result_t ib_devices(int *ndev)
{
    *ndev = ib_g.ndev;
    return CCL_SUCCESS;
}

static ccl_result_t ib_get_properties(int dev, ccl_net_props_t *p)
{
    if (dev < 0 || dev >= ib_g.ndev)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/ib: no device %d (%d)", dev, ib_g.ndev);
    const ib_dev_t *d = &ib_g.dev[dev];
    memset(p, 0, sizeof *p);
    p->name = d->name;
    p->pci_path = d->pci_path[0] ? d->pci_path : NULL;
    p->guid = d->guid;
    p->ptr_support = CCL_NET_PTR_HOST;
    p->speed_mbps = d->speed_mbps;
    p->latency_us = 2.0f;
    p->max_comms = 65536;
    p->max_recvs = 1;
    p->max_requests = IB_NREQ;
    p->reg_granularity = 1;
    p->max_size = IB_MAX_MSG;
    return CCL_SUCCESS;
}

static ccl_result_t ib_listen(int dev, int rank, void *handle, void **listen_comm)
{
    ccl_result_t res = CCL_SUCCESS;
    *listen_comm = NULL;
    if (dev < 0 || dev >= ib_g.ndev)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/ib: no device %d (%d)", dev, ib_g.ndev);
    ib_listen_t *l = calloc(1, sizeof *l);
    if (!l)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    l->fd = -1;
    for (int i = 0; i < IB_MAX_INCOMING; i++)
        l->in[i].fd = -1;
    l->dev = dev;
    l->rank = rank;
    ib_handle_t h;
    memset(&h, 0, sizeof h);
    sock_addr_t local;
    char ifname[SOCK_IFNAME_LEN];
    CCL_TRY(sock_pick_local_addr(&local, ifname, sizeof ifname));
    CCL_TRY(sock_listen(&local, &l->fd, &h.addr));
    if (getrandom(&l->listen_id, sizeof l->listen_id, 0) != sizeof l->listen_id)
        l->listen_id = clock_now_ns() ^ ((uint64_t)getpid() << 32);
    h.magic = IB_HANDLE_MAGIC;
    h.version = IB_WIRE_VERSION;
    h.rank = rank;
    h.listen_id = l->listen_id;
    memcpy(handle, &h, sizeof h);
    *listen_comm = l;
    l = NULL;
out:
    if (l) {
        if (l->fd >= 0)
            close(l->fd);
        free(l);
    }
    return res;
}

static ccl_result_t ib_connect(int dev, int rank, void *handle, void **send_comm)
{
    ccl_result_t res = CCL_SUCCESS;
    ib_handle_t *h = handle;
    *send_comm = NULL;
    if (h->magic != IB_HANDLE_MAGIC || h->version != IB_WIRE_VERSION)
        return err_set(CCL_ERR_INVALID_USAGE, "net/ib: the peer's handle is not an ib handle of this version (magic "
                       "%#x, version %u): do both ends use CCL_NET=ib?", h->magic, h->version);
    if (dev < 0 || dev >= ib_g.ndev)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/ib: no device %d (%d)", dev, ib_g.ndev);
    ib_pending_t *p = h->stage ? h->pending : NULL;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p)
            return err_set(CCL_ERR_SYSTEM, "out of memory");
        p->fd = -1;
        p->deadline = clock_now_ns() + ib_timeout_ns();
        res = sock_connect_start(&h->addr, &p->fd);
        if (res != CCL_SUCCESS) {
            free(p);
            return res;
        }
        p->stage = 1;
        h->stage = 1;
        h->pending = p;
    }
    char addr[64];
    sock_addr_str(&h->addr, addr, sizeof addr);
    if (p->stage == 1) {
        int ready = 0;
        if (sock_connect_check(p->fd, &ready) != 0)
            CCL_FAIL(CCL_ERR_REMOTE, "net/ib: cannot reach rank %d's side channel at %s: %s", h->rank, addr,
                     strerror(errno));
        if (!ready)
            goto pending;
        int fd = p->fd;
        CCL_TRY(ib_comm_create(&ib_g.dev[dev], 1, ib_g.nqps, fd, &p->comm));
        uint32_t psn = ib_random_psn();
        ib_conn_info_t info;
        ib_info_fill(p->comm, h->listen_id, rank, psn, ib_g.host, &info);
        p->psn = psn;
        CCL_TRY(sock_send_all(fd, &info, sizeof info, clock_now_ns() + ib_timeout_ns()));
        p->stage = 2;
        p->got = 0;
        p->comm->peer_rank = h->rank;
    }
    if (p->stage == 2) {
        int r = ib_recv_some(p->fd, &p->peer, sizeof p->peer, &p->got);
        if (r < 0)
            CCL_FAIL(CCL_ERR_REMOTE, "net/ib: rank %d at %s closed the side channel during the handshake "
                     "(%s)", h->rank, addr, p->got ? "truncated reply" : "no reply");
        if (r == 0)
            goto pending;
        const char *bad = ib_conn_info_check(&p->peer, 0);
        if (bad)
            CCL_FAIL(CCL_ERR_REMOTE, "net/ib: rank %d at %s answered with %s", h->rank, addr, bad);
        if ((int)p->peer.nqps != p->comm->nqps)
            CCL_FAIL(CCL_ERR_REMOTE, "net/ib: rank %d at %s has %u queue pairs for our %d", h->rank, addr,
                     p->peer.nqps, p->comm->nqps);
        CCL_TRY(ib_comm_connect_qps(p->comm, p->psn, &ib_g.qp, &p->peer));
        char ok = 'R';
        CCL_TRY(sock_send_all(p->fd, &ok, 1, clock_now_ns() + ib_timeout_ns()));
        sock_set_keepalive(p->fd, 5, 2, 4);
        *send_comm = p->comm;
        p->comm = NULL;
        p->fd = -1;
        free(p);
        h->pending = NULL;
        h->stage = 0;
        return CCL_SUCCESS;
    }
pending:
    if (clock_now_ns() > p->deadline)
        CCL_FAIL(CCL_ERR_TIMEOUT, "net/ib: no connection to rank %d at %s within CCL_TIMEOUT", h->rank, addr);
    return CCL_SUCCESS;
out:
    if (p->comm)
        ib_comm_destroy(p->comm); /* closes fd */
    else if (p->fd >= 0)
        close(p->fd);
    free(p);
    h->pending = NULL;
    h->stage = 0;
    return res;
}

/* Drops an incoming side channel (with a warning when it said why). */
static void ib_incoming_drop(ib_incoming_t *in, const char *why)
{
    if (why)
        LOG_WARN(SUB_NET, "net/ib: dropped an incoming connection: %s", why);
    if (in->comm)
        ib_comm_destroy(in->comm); /* closes fd */
    else if (in->fd >= 0)
        close(in->fd);
    memset(in, 0, sizeof *in);
    in->fd = -1;
}

/* One incoming side channel moved on: 1 when its comm is ready. */
static ccl_result_t ib_incoming_step(ib_listen_t *l, ib_incoming_t *in, int *ready)
{
    ccl_result_t res = CCL_SUCCESS;
    *ready = 0;
    if (!in->comm) {
        int r = ib_recv_some(in->fd, &in->peer, sizeof in->peer, &in->got);
        if (r < 0) {
            ib_incoming_drop(in, "it closed before its connection info");
            return CCL_SUCCESS;
        }
        if (r == 0)
            return CCL_SUCCESS;
        const char *bad = ib_conn_info_check(&in->peer, l->listen_id);
        if (bad) {
            ib_incoming_drop(in, bad);
            return CCL_SUCCESS;
        }
        /* The connector's queue pair count decides. */
        CCL_TRY(ib_comm_create(&ib_g.dev[l->dev], 0, (int)in->peer.nqps, in->fd, &in->comm));
        uint32_t psn = ib_random_psn();
        CCL_TRY(ib_comm_connect_qps(in->comm, psn, &ib_g.qp, &in->peer));
        ib_conn_info_t info;
        ib_info_fill(in->comm, l->listen_id, l->rank, psn, ib_g.host, &info);
        CCL_TRY(sock_send_all(in->fd, &info, sizeof info, clock_now_ns() + ib_timeout_ns()));
        in->got = 0;
    }
    char ok;
    size_t got = 0;
    int r = ib_recv_some(in->fd, &ok, 1, &got);
    if (r < 0 || (r > 0 && ok != 'R')) {
        ib_incoming_drop(in, "its side channel closed before the connection was ready");
        return CCL_SUCCESS;
    }
    *ready = r > 0;
out:
    return res;
}

static ccl_result_t ib_accept(void *listen_comm, void **recv_comm)
{
    ccl_result_t res = CCL_SUCCESS;
    ib_listen_t *l = listen_comm;
    *recv_comm = NULL;
    for (;;) {
        int fd = -1;
        CCL_TRY(sock_try_accept(l->fd, &fd));
        if (fd < 0)
            break;
        ib_incoming_t *in = NULL;
        for (int i = 0; i < IB_MAX_INCOMING && !in; i++)
            if (l->in[i].fd < 0)
                in = &l->in[i];
        if (!in) {
            LOG_WARN(SUB_NET, "net/ib: %d connections half-open: dropped one more", IB_MAX_INCOMING);
            close(fd);
            continue;
        }
        memset(in, 0, sizeof *in);
        in->fd = fd;
        in->deadline = clock_now_ns() + ib_timeout_ns();
    }
    for (int i = 0; i < IB_MAX_INCOMING; i++) {
        ib_incoming_t *in = &l->in[i];
        if (in->fd < 0)
            continue;
        int ready = 0;
        CCL_TRY(ib_incoming_step(l, in, &ready));
        if (ready) {
            sock_set_keepalive(in->fd, 5, 2, 4);
            *recv_comm = in->comm;
            memset(in, 0, sizeof *in);
            in->fd = -1;
            return CCL_SUCCESS;
        }
        if (in->fd >= 0 && clock_now_ns() > in->deadline)
            ib_incoming_drop(in, "its handshake did not finish within CCL_TIMEOUT");
    }
out:
    return res;
}

static ccl_result_t ib_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
    ib_comm_t *c = comm;
    *mhandle = NULL;
    if (type != CCL_NET_PTR_HOST)
        return err_set(CCL_ERR_UNSUPPORTED, "net/ib: device memory is not supported yet (staged through host memory)");
    struct ibv_mr *mr = ib_g.v->reg_mr(c->dev->pd, data, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr)
        return err_set(CCL_ERR_SYSTEM, "net/ib: %s: cannot register %zu bytes at %p: %s", c->dev->name, size, data,
                       strerror(errno));
    *mhandle = mr;
    return CCL_SUCCESS;
}

static ccl_result_t ib_dereg_mr(void *comm, void *mhandle)
{
    (void)comm;
    if (mhandle && ib_g.v->dereg_mr(mhandle) != 0)
        return err_set(CCL_ERR_SYSTEM, "net/ib: cannot deregister memory: %s", strerror(errno));
    return CCL_SUCCESS;
}

static ccl_result_t ib_close(void *comm)
{
    ib_comm_destroy(comm);
    return CCL_SUCCESS;
}

static ccl_result_t ib_close_listen(void *listen_comm)
{
    ib_listen_t *l = listen_comm;
    if (!l)
        return CCL_SUCCESS;
    for (int i = 0; i < IB_MAX_INCOMING; i++)
        if (l->in[i].fd >= 0)
            ib_incoming_drop(&l->in[i], NULL);
    if (l->fd >= 0)
        close(l->fd);
    free(l);
    return CCL_SUCCESS;
}

static ccl_result_t ib_finalize(void)
{
    if (ib_g.v) {
        ib_mr_cache_clear();
        ib_dev_close_all(ib_g.v, ib_g.dev, ib_g.ndev);
    }
    for (int i = 0; i < ib_g.ndev; i++)
        pthread_mutex_destroy(&ib_g.async[i].lock);
    ib_g.ndev = 0;
    return CCL_SUCCESS;
}

static const char *ib_last_error(void) { return err_message(); }

/* Completions are seen only by polling the CQ, inside our calls: the
 * caller drives, as with inline TCP. */
static ccl_result_t ib_progress(void *comm, int *inline_io)
{
    (void)comm;
    *inline_io = 1;
    return CCL_SUCCESS;
}

const char *net_ib_why(void) { return ib_g.why; }

const ccl_net_v2_t net_ib_plugin = {
    .version = CCL_NET_ABI_VERSION,
    .name = "ib",
    .caps = 0,
    .init = ib_init,
    .devices = ib_devices,
    .get_properties = ib_get_properties,
    .listen = ib_listen,
    .connect = ib_connect,
    .accept = ib_accept,
    .reg_mr = ib_reg_mr,
    .dereg_mr = ib_dereg_mr,
    .isend = ib_isend,
    .irecv = ib_irecv,
    .test = ib_test,
    .close_send = ib_close,
    .close_recv = ib_close,
    .close_listen = ib_close_listen,
    .finalize = ib_finalize,
    .last_error = ib_last_error,
    .progress = ib_progress,
    .pollfds = NULL,
};

#else /* no verbs headers at build time */

static ccl_result_t ib_init_missing(const ccl_net_callbacks_t *cb)
{
    (void)cb;
    return CCL_SUCCESS;
}
static ccl_result_t ib_devices_none(int *ndev)
{
    *ndev = 0;
    return CCL_SUCCESS;
}
static ccl_result_t ib_unsupported(void)
{
    return err_set(CCL_ERR_UNSUPPORTED, "net/ib: %s", IB_VERBS_MISSING);
}
static ccl_result_t ib_props_none(int dev, ccl_net_props_t *p) { (void)dev; (void)p; return ib_unsupported(); }
static ccl_result_t ib_listen_none(int d, int r, void *h, void **l) { (void)d; (void)r; (void)h; *l = NULL; return ib_unsupported(); }
static ccl_result_t ib_connect_none(int d, int r, void *h, void **s) { (void)d; (void)r; (void)h; *s = NULL; return ib_unsupported(); }
static ccl_result_t ib_accept_none(void *l, void **r) { (void)l; *r = NULL; return ib_unsupported(); }
static ccl_result_t ib_reg_none(void *c, void *d, size_t s, int t, void **m) { (void)c; (void)d; (void)s; (void)t; *m = NULL; return ib_unsupported(); }
static ccl_result_t ib_dereg_none(void *c, void *m) { (void)c; (void)m; return CCL_SUCCESS; }
static ccl_result_t ib_isend_none(void *c, const void *d, size_t s, uint32_t t, void *m, void **r) { (void)c; (void)d; (void)s; (void)t; (void)m; *r = NULL; return ib_unsupported(); }
static ccl_result_t ib_irecv_none(void *c, int n, void **d, const size_t *s, const uint32_t *t, void **m, void **r) { (void)c; (void)n; (void)d; (void)s; (void)t; (void)m; *r = NULL; return ib_unsupported(); }
static ccl_result_t ib_test_none(void *r, int *d, size_t *s) { (void)r; (void)s; *d = 0; return ib_unsupported(); }
static ccl_result_t ib_close_none(void *c) { (void)c; return CCL_SUCCESS; }
static ccl_result_t ib_finalize_none(void) { return CCL_SUCCESS; }
static const char *ib_last_error_none(void) { return err_message(); }

const char *net_ib_why(void) { return IB_VERBS_MISSING; }

const ccl_net_v2_t net_ib_plugin = {
    .version = CCL_NET_ABI_VERSION, .name = "ib", .caps = 0, .init = ib_init_missing, .devices = ib_devices_none,
    .get_properties = ib_props_none, .listen = ib_listen_none, .connect = ib_connect_none, .accept = ib_accept_none,
    .reg_mr = ib_reg_none, .dereg_mr = ib_dereg_none, .isend = ib_isend_none, .irecv = ib_irecv_none,
    .test = ib_test_none, .close_send = ib_close_none, .close_recv = ib_close_none, .close_listen = ib_close_none,
    .finalize = ib_finalize_none, .last_error = ib_last_error_none};
#endif
