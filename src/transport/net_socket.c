/*
 * net_socket.c - the built-in "socket" net plugin: TCP over the interfaces
 * that CCL_SOCKET_IFNAME selects (bootstrap/socket.c's choice, so the
 * bootstrap and the data path agree).
 *
 * This file is the control path: devices and their properties, the handle,
 * the handshake that turns CCL_NSOCKS_PERTHREAD x CCL_SOCKET_NTHREADS TCP
 * data sockets and one keepalive socket into one connection, and memory
 * registration. net_socket_io.c moves the data.
 *
 * Connections are duplex (CCL_NET_CAP_DUPLEX): both ends may send and
 * receive, each direction with its own message sequence, over the same data
 * sockets, so that each direction's TCP acknowledgements ride on the other's
 * data instead of costing a packet of their own. A comm is a pair of
 * net_socket_io.c comms, one per direction, on the same sockets (the send
 * side holds duplicates of the descriptors). Nothing here waits for the peer: connect() starts
 * non-blocking connects and returns NULL until every socket is connected and
 * has sent its hello; accept() collects sockets by connection id and returns
 * a connection once all of its sockets have arrived. A socket whose hello is
 * wrong (a port scanner, a stale peer) is dropped with a warning and does not
 * disturb the listener.
 */
#include "transport/net_socket.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/param.h"
#include "base/wait.h"
#include "transport/net_socket_conn.h"
#include "transport/net_socket_io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define NET_SOCK_MAX_DEVS 16
/* Sockets accepted but not yet identified, and connections not yet whole,
 * per listener: bounds what strangers can make a listener hold. */
#define NET_SOCK_MAX_INCOMING 64
#define NET_SOCK_MAX_GROUPS 16
/* Dead peers and cut links: TCP keepalive, timed from CCL_TIMEOUT (see
 * net_sock_silence_s). A socket that has heard nothing from its peer for a
 * while is probed every few seconds, and NET_SOCK_KEEPCNT unanswered probes
 * close it with ETIMEDOUT, which net_socket_io.c reports naming the peer.
 * Only the peer's kernel answers probes, so a slow, busy, stopped or late
 * peer process never trips this: only a dead host or a cut link does.
 * Probes stop while a socket has unacknowledged data, so data sockets
 * alone would not do (a duplex connection's sockets carry data both
 * ways): each connection has one more socket, its keepalive socket, that
 * carries nothing after its hello and so is always probed; its error
 * fails the connection (net_socket_io.c watches it). Every rank has a
 * connection with every remote rank, so this covers every rank cut off.
 * TCP_USER_TIMEOUT is deliberately not set: it would replace the probe
 * count (a silent socket would then wait out the whole user timeout), and
 * a zero window that outlasts it (a receiver that joins a collective late
 * while we already sent it data) would close a healthy connection. */
#define NET_SOCK_KEEPCNT 4
#define NET_SOCK_SILENCE_MAX_S 20
/* Reported when the interface does not say (loopback, some virtual NICs). */
#define NET_SOCK_DEFAULT_SPEED_MBPS 10000

/* A connect in progress; lives in net_sock_g.pending until it becomes a
 * comm, fails, or finalize releases it (an abandoned connect). */
typedef struct net_sock_pending {
    struct net_sock_pending *next;
    int nsocks;     /* data sockets and the keepalive socket (the last) */
    int nthreads;
    int checksum;   /* CCL_CHECKSUM: this connection's messages carry CRC-32C trailers */
    int fds[NET_SOCK_MAX_SOCKS];
    int connected[NET_SOCK_MAX_SOCKS];
    size_t hello_sent[NET_SOCK_MAX_SOCKS];
    net_sock_hello_t hello[NET_SOCK_MAX_SOCKS];
    sock_addr_t addr;
    uint64_t deadline;
    char peer[128];
} net_sock_pending_t;

/* An accepted socket whose hello has not fully arrived. */
typedef struct {
    int fd; /* -1: free */
    sock_addr_t addr;
    net_sock_hello_t hello;
    size_t got;
    uint64_t deadline;
} net_sock_incoming_t;

/* Sockets of one connection gathered so far. */
typedef struct {
    uint64_t conn_id; /* 0: free */
    int rank;
    int nsocks;
    uint32_t flags;
    int have;
    int fds[NET_SOCK_MAX_SOCKS];
    sock_addr_t addr;
    uint64_t deadline;
} net_sock_group_t;

typedef struct {
    int fd;
    uint64_t listen_id;
    sock_addr_t addr;
    net_sock_incoming_t in[NET_SOCK_MAX_INCOMING];
    net_sock_group_t groups[NET_SOCK_MAX_GROUPS];
} net_sock_listen_t;

static struct {
    pthread_mutex_t lock;
    int inits;
    int ndev;
    sock_addr_t addr[NET_SOCK_MAX_DEVS];
    char name[NET_SOCK_MAX_DEVS][SOCK_IFNAME_LEN];
    char pci[NET_SOCK_MAX_DEVS][PATH_MAX];
    int speed[NET_SOCK_MAX_DEVS];
    net_sock_pending_t *pending;
    int nsocks_override;
    int nthreads_override;
} net_sock_g = {.lock = PTHREAD_MUTEX_INITIALIZER, .nsocks_override = -1, .nthreads_override = -1};

void net_socket_set_layout(int nsocks_per_thread, int nthreads)
{
    pthread_mutex_lock(&net_sock_g.lock);
    net_sock_g.nsocks_override = nsocks_per_thread;
    net_sock_g.nthreads_override = nthreads;
    pthread_mutex_unlock(&net_sock_g.lock);
}

/* Sockets per connection and helper threads per comm. */
static void net_sock_layout(int *nsocks, int *nthreads)
{
    pthread_mutex_lock(&net_sock_g.lock);
    int64_t per = net_sock_g.nsocks_override >= 0 ? net_sock_g.nsocks_override
                                                  : param_int(PARAM_NSOCKS_PERTHREAD);
    int64_t thr = net_sock_g.nthreads_override >= 0 ? net_sock_g.nthreads_override
                                                    : param_int(PARAM_SOCKET_NTHREADS);
    pthread_mutex_unlock(&net_sock_g.lock);
    if (per < 1)
        per = 1;
    if (thr < 0)
        thr = 0;
    if (thr > NET_SOCK_MAX_SOCKS)
        thr = NET_SOCK_MAX_SOCKS;
    int64_t total = per * (thr > 0 ? thr : 1);
    /* One socket is the keepalive socket. Without helpers, pollfds gives
     * every socket of both directions, CCL_NET_MAX_POLLFDS at most. */
    int64_t most = thr > 0 ? NET_SOCK_MAX_SOCKS - 1 : (CCL_NET_MAX_POLLFDS - 1) / 2;
    if (total > most) {
        LOG_INFO(SUB_ALL, "net/socket: CCL_NSOCKS_PERTHREAD x CCL_SOCKET_NTHREADS = %lld sockets, using %lld",
                 (long long)total, (long long)most);
        total = most;
    }
    *nsocks = (int)total;
    *nthreads = (int)thr;
}

/* "rank 3 at 10.0.0.2:41000", or the address alone without a rank. */
static void net_sock_describe(char *buf, size_t len, int rank, const sock_addr_t *addr)
{
    char a[80];
    sock_addr_str(addr, a, sizeof a);
    if (rank >= 0)
        snprintf(buf, len, "rank %d at %s", rank, a);
    else
        snprintf(buf, len, "peer at %s", a);
}

/* Half of CCL_TIMEOUT, at most NET_SOCK_SILENCE_MAX_S: a cut link is named
 * as such well before a wait on it gives up with a bare timeout, while a
 * link that recovers within seconds (a flapping port) survives. At least
 * one second per probe and one of idleness before the first. */
static int net_sock_silence_s(void)
{
    int64_t s = param_int(PARAM_TIMEOUT) / 2;
    if (s > NET_SOCK_SILENCE_MAX_S)
        s = NET_SOCK_SILENCE_MAX_S;
    if (s < NET_SOCK_KEEPCNT + 1)
        s = NET_SOCK_KEEPCNT + 1;
    return (int)s;
}

/* idle + KEEPCNT x interval = the silence: 5 s is 1 + 4 x 1, 20 s is
 * 12 + 4 x 2. */
static void net_sock_tune(int fd)
{
    int silence = net_sock_silence_s();
    int interval = silence / (2 * NET_SOCK_KEEPCNT);
    if (interval < 1)
        interval = 1;
    sock_set_keepalive(fd, silence - NET_SOCK_KEEPCNT * interval, interval, NET_SOCK_KEEPCNT);
}

static uint64_t net_sock_deadline(void)
{
    return clock_now_ns() + (uint64_t)param_int(PARAM_TIMEOUT) * 1000000000ull;
}

static ccl_result_t net_sock_random(uint64_t *v)
{
    if (getrandom(v, sizeof *v, 0) != (ssize_t)sizeof *v)
        return err_set(CCL_ERR_SYSTEM, "net/socket: getrandom failed: %s", strerror(errno));
    *v |= 1; /* 0 marks a free slot */
    return CCL_SUCCESS;
}

/* ---- devices ----------------------------------------------------------------- */

static void net_sock_read_sysfs(int dev)
{
    char path[PATH_MAX + 64];
    net_sock_g.speed[dev] = NET_SOCK_DEFAULT_SPEED_MBPS;
    snprintf(path, sizeof path, "/sys/class/net/%s/speed", net_sock_g.name[dev]);
    FILE *f = fopen(path, "r");
    if (f) {
        int mbps = 0;
        if (fscanf(f, "%d", &mbps) == 1 && mbps > 0)
            net_sock_g.speed[dev] = mbps;
        fclose(f);
    }
    net_sock_g.pci[dev][0] = '\0';
    snprintf(path, sizeof path, "/sys/class/net/%s/device", net_sock_g.name[dev]);
    char real[PATH_MAX];
    if (realpath(path, real) && strstr(real, "/pci"))
        snprintf(net_sock_g.pci[dev], sizeof net_sock_g.pci[dev], "%s", real);
}

static ccl_result_t net_sock_init(const ccl_net_callbacks_t *cb)
{
    /* Logs go through base/log.c: ccl's own when built in, the plugin's
     * copy (same CCL_DEBUG) as libccl-net-socket.so. */
    net_sock_io_set_activity(cb ? cb->activity : NULL);
    pthread_mutex_lock(&net_sock_g.lock);
    if (net_sock_g.inits++ == 0) {
        net_sock_g.ndev = sock_list_local_addrs(net_sock_g.addr, net_sock_g.name, NET_SOCK_MAX_DEVS);
        for (int d = 0; d < net_sock_g.ndev; d++) {
            char a[80];
            net_sock_read_sysfs(d);
            LOG_INFO(SUB_INIT, "net/socket: device %d is %s (%s, %d Mbps)", d, net_sock_g.name[d],
                     sock_addr_str(&net_sock_g.addr[d], a, sizeof a), net_sock_g.speed[d]);
        }
        if (net_sock_g.ndev == 0)
            LOG_INFO(SUB_INIT, "net/socket: no interface matches CCL_SOCKET_IFNAME=\"%s\"",
                     param_str(PARAM_SOCKET_IFNAME));
    }
    pthread_mutex_unlock(&net_sock_g.lock);
    return CCL_SUCCESS;
}

static ccl_result_t net_sock_devices(int *ndev)
{
    *ndev = net_sock_g.ndev;
    return CCL_SUCCESS;
}

static ccl_result_t net_sock_check_dev(int dev)
{
    if (dev < 0 || dev >= net_sock_g.ndev)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: no device %d (%d devices)", dev,
                       net_sock_g.ndev);
    return CCL_SUCCESS;
}

static ccl_result_t net_sock_get_properties(int dev, ccl_net_props_t *props)
{
    ccl_result_t res = net_sock_check_dev(dev);
    if (res != CCL_SUCCESS)
        return res;
    *props = (ccl_net_props_t){
        .name = net_sock_g.name[dev],
        .pci_path = net_sock_g.pci[dev][0] ? net_sock_g.pci[dev] : NULL,
        .guid = (uint64_t)dev,
        .ptr_support = CCL_NET_PTR_HOST,
        .speed_mbps = net_sock_g.speed[dev],
        .latency_us = 0,
        .max_comms = 65536,
        .max_recvs = 1,
        .max_requests = NET_SOCK_MAX_REQS,
        .reg_granularity = 1,
        .max_size = NET_SOCK_MAX_MSG,
    };
    return CCL_SUCCESS;
}

/* ---- listen and connect ------------------------------------------------------ */

static ccl_result_t net_sock_listen(int dev, int rank, void *handle, void **listen_comm)
{
    ccl_result_t res = CCL_SUCCESS;
    net_sock_listen_t *l = NULL;
    *listen_comm = NULL;
    CCL_TRY(net_sock_check_dev(dev));
    l = calloc(1, sizeof *l);
    if (!l)
        CCL_FAIL(CCL_ERR_SYSTEM, "net/socket: out of memory");
    l->fd = -1;
    for (int i = 0; i < NET_SOCK_MAX_INCOMING; i++)
        l->in[i].fd = -1;
    CCL_TRY(net_sock_random(&l->listen_id));
    CCL_TRY(sock_listen(&net_sock_g.addr[dev], &l->fd, &l->addr));
    net_sock_handle_t h = {
        .magic = NET_SOCK_HANDLE_MAGIC,
        .version = NET_SOCK_WIRE_VERSION,
        .rank = rank,
        .listen_id = l->listen_id,
        .addr = l->addr,
    };
    memset(handle, 0, CCL_NET_HANDLE_MAXSIZE);
    memcpy(handle, &h, sizeof h);
    *listen_comm = l;
    l = NULL;
out:
    if (l) {
        sock_close(&l->fd);
        free(l);
    }
    return res;
}

static void net_sock_pending_free(net_sock_pending_t *p, int close_fds)
{
    pthread_mutex_lock(&net_sock_g.lock);
    for (net_sock_pending_t **pp = &net_sock_g.pending; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    pthread_mutex_unlock(&net_sock_g.lock);
    if (close_fds)
        for (int i = 0; i < p->nsocks; i++)
            sock_close(&p->fds[i]);
    free(p);
}

/* Whether p is a connect this process started and has not finished. */
static int net_sock_pending_known(const net_sock_pending_t *p)
{
    int found = 0;
    pthread_mutex_lock(&net_sock_g.lock);
    for (const net_sock_pending_t *q = net_sock_g.pending; q && !found; q = q->next)
        found = q == p;
    pthread_mutex_unlock(&net_sock_g.lock);
    return found;
}

ccl_result_t net_sock_handle_parse(const void *buf, size_t len, net_sock_handle_t *out)
{
    net_sock_handle_t h;
    char a[80];
    if (len < sizeof h)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: a handle of %zu bytes, %zu needed", len, sizeof h);
    memcpy(&h, buf, sizeof h);
    if (h.magic != NET_SOCK_HANDLE_MAGIC || h.version != NET_SOCK_WIRE_VERSION)
        return err_set(CCL_ERR_INVALID_ARGUMENT,
                       "net/socket: connect was given a handle that this plugin's listen did not write "
                       "(magic 0x%08x, version %u)", h.magic, h.version);
    if (!sock_addr_valid(&h.addr))
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: the handle names no usable address (%s)",
                       sock_addr_str(&h.addr, a, sizeof a));
    if (h.stage != 0 || h.pending || h.rank < -1)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: the handle is corrupt (stage %u, rank %d)", h.stage,
                       h.rank);
    *out = h;
    return CCL_SUCCESS;
}

static ccl_result_t net_sock_pending_start(const net_sock_handle_t *h, int rank, net_sock_pending_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    net_sock_pending_t *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(CCL_ERR_SYSTEM, "net/socket: out of memory");
    net_sock_layout(&p->nsocks, &p->nthreads);
    p->nsocks++; /* the keepalive socket */
    p->checksum = param_int(PARAM_CHECKSUM) != 0;
    p->addr = h->addr;
    p->deadline = net_sock_deadline();
    net_sock_describe(p->peer, sizeof p->peer, h->rank, &h->addr);
    for (int i = 0; i < NET_SOCK_MAX_SOCKS; i++)
        p->fds[i] = -1;
    uint64_t conn_id = 0;
    CCL_TRY(net_sock_random(&conn_id));
    for (int i = 0; i < p->nsocks; i++) {
        p->hello[i] = (net_sock_hello_t){
            .magic = NET_SOCK_HELLO_MAGIC,
            .version = NET_SOCK_WIRE_VERSION,
            .listen_id = h->listen_id,
            .conn_id = conn_id,
            .rank = rank,
            .nsocks = (uint16_t)p->nsocks,
            .index = (uint16_t)i,
            .flags = p->checksum ? NET_SOCK_HELLO_CHECKSUM : 0,
        };
        res = sock_connect_start(&p->addr, &p->fds[i]);
        if (res != CCL_SUCCESS) {
            err_prefix("net/socket: %s: ", p->peer);
            goto out;
        }
    }
    pthread_mutex_lock(&net_sock_g.lock);
    p->next = net_sock_g.pending;
    net_sock_g.pending = p;
    pthread_mutex_unlock(&net_sock_g.lock);
    *out = p;
    p = NULL;
out:
    if (p) {
        for (int i = 0; i < p->nsocks; i++)
            sock_close(&p->fds[i]);
        free(p);
    }
    return res;
}

/* Moves every socket of a pending connect as far as it goes without
 * waiting; *ready once all are connected and have sent their hello. */
static ccl_result_t net_sock_pending_step(net_sock_pending_t *p, int *ready)
{
    int all = 1;
    for (int i = 0; i < p->nsocks; i++) {
        if (!p->connected[i]) {
            int ok = 0, e = sock_connect_check(p->fds[i], &ok);
            if (e != 0)
                return err_set(CCL_ERR_REMOTE, "net/socket: connect to %s failed: %s", p->peer, strerror(e));
            if (!ok) {
                all = 0;
                continue;
            }
            p->connected[i] = 1;
            net_sock_tune(p->fds[i]);
        }
        if (p->hello_sent[i] < sizeof p->hello[i]) {
            ssize_t w = send(p->fds[i], (char *)&p->hello[i] + p->hello_sent[i],
                             sizeof p->hello[i] - p->hello_sent[i], MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                return err_set(CCL_ERR_REMOTE, "net/socket: connection to %s failed while sending its hello: %s",
                               p->peer, strerror(errno));
            if (w > 0)
                p->hello_sent[i] += (size_t)w;
            if (p->hello_sent[i] < sizeof p->hello[i])
                all = 0;
        }
    }
    if (!all && clock_now_ns() > p->deadline)
        return err_set(CCL_ERR_TIMEOUT, "net/socket: connect to %s did not complete within CCL_TIMEOUT (%lld s)",
                       p->peer, (long long)param_int(PARAM_TIMEOUT));
    *ready = all;
    return CCL_SUCCESS;
}

static ccl_result_t net_sock_connect(int dev, int rank, void *handle, void **send_comm)
{
    ccl_result_t res = CCL_SUCCESS;
    net_sock_handle_t *h = handle;
    *send_comm = NULL;
    CCL_TRY(net_sock_check_dev(dev));
    if (h->stage == 0) {
        net_sock_handle_t peer;
        CCL_TRY(net_sock_handle_parse(handle, CCL_NET_HANDLE_MAXSIZE, &peer));
        net_sock_pending_t *p = NULL;
        CCL_TRY(net_sock_pending_start(&peer, rank, &p));
        h->pending = p;
        h->stage = 1;
    } else if (h->stage != 1 || !net_sock_pending_known(h->pending)) {
        /* Only our own connect() writes a stage: a peer's bytes must never
         * become a pointer we follow. */
        h->stage = 0;
        h->pending = NULL;
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "net/socket: connect was given a handle with a connect in progress "
                 "that this process did not start");
    }
    net_sock_pending_t *p = h->pending;
    int ready = 0;
    CCL_TRY(net_sock_pending_step(p, &ready));
    if (ready) {
        net_sock_conn_t *k = NULL;
        h->stage = 0;
        h->pending = NULL;
        /* The comm takes the sockets, also when it fails. */
        res = net_sock_conn_create(p->fds, p->nsocks, p->nthreads, net_sock_silence_s(), p->checksum, p->peer, &k);
        net_sock_pending_free(p, 0);
        if (res != CCL_SUCCESS)
            goto out;
        *send_comm = k;
    }
out:
    if (res != CCL_SUCCESS && h->stage == 1) {
        /* A failed connect leaves the handle ready for a new attempt. */
        net_sock_pending_free(h->pending, 1);
        h->stage = 0;
        h->pending = NULL;
    }
    return res;
}

/* ---- accept ------------------------------------------------------------------ */

const char *net_sock_hello_parse(const void *buf, size_t len, uint64_t listen_id, net_sock_hello_t *out)
{
    net_sock_hello_t m;
    if (len != sizeof m)
        return "a hello of the wrong size";
    memcpy(&m, buf, sizeof m);
    if (m.magic != NET_SOCK_HELLO_MAGIC)
        return "not a ccl net/socket hello";
    if (m.version != NET_SOCK_WIRE_VERSION)
        return "a different wire version";
    if (m.listen_id != listen_id)
        return "meant for another listener (stale handle?)";
    if (m.nsocks < 2 || m.nsocks > NET_SOCK_MAX_SOCKS || m.index >= m.nsocks)
        return "socket count or index out of range";
    if (m.conn_id == 0)
        return "no connection id";
    if (m.rank < -1)
        return "a negative rank";
    if (m.flags & ~NET_SOCK_HELLO_CHECKSUM)
        return "unknown flags";
    *out = m;
    return NULL;
}

/* Files an identified socket under its connection. Returns a reason to
 * drop it, or NULL (the group now owns the fd). */
static const char *net_sock_group_add(net_sock_listen_t *l, net_sock_incoming_t *in)
{
    const net_sock_hello_t *m = &in->hello;
    net_sock_group_t *g = NULL, *free_g = NULL;
    for (int i = 0; i < NET_SOCK_MAX_GROUPS && !g; i++) {
        if (l->groups[i].conn_id == m->conn_id)
            g = &l->groups[i];
        else if (!l->groups[i].conn_id && !free_g)
            free_g = &l->groups[i];
    }
    if (!g) {
        if (!free_g)
            return "too many connections being set up at once";
        g = free_g;
        *g = (net_sock_group_t){.conn_id = m->conn_id, .rank = m->rank, .nsocks = m->nsocks,
                                .flags = m->flags, .addr = in->addr, .deadline = in->deadline};
        for (int i = 0; i < NET_SOCK_MAX_SOCKS; i++)
            g->fds[i] = -1;
    }
    if (g->nsocks != m->nsocks || g->rank != m->rank || g->flags != m->flags || g->fds[m->index] >= 0)
        return "inconsistent with the other sockets of its connection";
    g->fds[m->index] = in->fd;
    g->have++;
    in->fd = -1;
    return NULL;
}

static void net_sock_group_drop(net_sock_group_t *g)
{
    for (int i = 0; i < NET_SOCK_MAX_SOCKS; i++)
        sock_close(&g->fds[i]);
    g->conn_id = 0;
}

/* Reads the hellos that have arrived; files or drops their sockets. */
static void net_sock_read_hellos(net_sock_listen_t *l, uint64_t now)
{
    for (int i = 0; i < NET_SOCK_MAX_INCOMING; i++) {
        net_sock_incoming_t *in = &l->in[i];
        if (in->fd < 0)
            continue;
        char a[80];
        const char *why = NULL;
        ssize_t got = recv(in->fd, (char *)&in->hello + in->got, sizeof in->hello - in->got, MSG_DONTWAIT);
        if (got > 0)
            in->got += (size_t)got;
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            why = "closed before its hello";
        else if (in->got == sizeof in->hello &&
                 !(why = net_sock_hello_parse(&in->hello, in->got, l->listen_id, &in->hello)))
            why = net_sock_group_add(l, in);
        else if (in->got < sizeof in->hello && now > in->deadline)
            why = "sent no hello within CCL_TIMEOUT";
        if (why) {
            char b[80];
            LOG_WARN(SUB_ALL, "net/socket: dropping a connection from %s to %s: %s",
                     sock_addr_str(&in->addr, a, sizeof a), sock_addr_str(&l->addr, b, sizeof b), why);
        }
        if (why || in->fd < 0)
            sock_close(&in->fd);
    }
}

static ccl_result_t net_sock_accept(void *listen_comm, void **recv_comm)
{
    ccl_result_t res = CCL_SUCCESS;
    net_sock_listen_t *l = listen_comm;
    uint64_t now = clock_now_ns();
    *recv_comm = NULL;
    for (;;) {
        int fd = -1;
        CCL_TRY(sock_try_accept(l->fd, &fd));
        if (fd < 0)
            break;
        net_sock_incoming_t *in = NULL;
        for (int i = 0; i < NET_SOCK_MAX_INCOMING && !in; i++)
            if (l->in[i].fd < 0)
                in = &l->in[i];
        socklen_t alen = sizeof(sock_addr_t);
        sock_addr_t peer;
        memset(&peer, 0, sizeof peer);
        getpeername(fd, &peer.sa, &alen);
        if (!in) {
            char a[80];
            LOG_WARN(SUB_ALL, "net/socket: dropping a connection from %s: %d sockets already wait for their hello",
                     sock_addr_str(&peer, a, sizeof a), NET_SOCK_MAX_INCOMING);
            close(fd);
            continue;
        }
        net_sock_tune(fd);
        *in = (net_sock_incoming_t){.fd = fd, .addr = peer, .deadline = net_sock_deadline()};
    }
    net_sock_read_hellos(l, now);
    for (int i = 0; i < NET_SOCK_MAX_GROUPS; i++) {
        net_sock_group_t *g = &l->groups[i];
        if (!g->conn_id)
            continue;
        char peer[128];
        net_sock_describe(peer, sizeof peer, g->rank, &g->addr);
        if (g->have == g->nsocks) {
            int nsocks = 0, nthreads = 0;
            net_sock_layout(&nsocks, &nthreads);
            net_sock_conn_t *k = NULL;
            g->conn_id = 0; /* the comm takes the sockets, also when it fails */
            /* The connector's CCL_CHECKSUM holds for the connection. */
            CCL_TRY(net_sock_conn_create(g->fds, g->nsocks, nthreads, net_sock_silence_s(),
                                         (g->flags & NET_SOCK_HELLO_CHECKSUM) != 0, peer, &k));
            *recv_comm = k;
            break;
        }
        if (now > g->deadline) {
            LOG_WARN(SUB_ALL, "net/socket: dropping the connection from %s: %d of its %d sockets arrived within CCL_TIMEOUT",
                     peer, g->have, g->nsocks);
            net_sock_group_drop(g);
        }
    }
out:
    return res;
}

/* ---- registration, data, close ------------------------------------------------ */

static ccl_result_t net_sock_close_listen(void *listen_comm)
{
    net_sock_listen_t *l = listen_comm;
    if (!l)
        return CCL_SUCCESS;
    for (int i = 0; i < NET_SOCK_MAX_INCOMING; i++)
        sock_close(&l->in[i].fd);
    for (int i = 0; i < NET_SOCK_MAX_GROUPS; i++)
        if (l->groups[i].conn_id)
            net_sock_group_drop(&l->groups[i]);
    sock_close(&l->fd);
    free(l);
    return CCL_SUCCESS;
}

static ccl_result_t net_sock_finalize(void)
{
    pthread_mutex_lock(&net_sock_g.lock);
    if (net_sock_g.inits > 0 && --net_sock_g.inits == 0) {
        /* Connects given up midway (the caller aborted). */
        while (net_sock_g.pending) {
            net_sock_pending_t *p = net_sock_g.pending;
            net_sock_g.pending = p->next;
            for (int i = 0; i < p->nsocks; i++)
                sock_close(&p->fds[i]);
            free(p);
        }
        net_sock_g.ndev = 0;
    }
    pthread_mutex_unlock(&net_sock_g.lock);
    return CCL_SUCCESS;
}

static const char *net_sock_last_error(void) { return err_message(); }

const ccl_net_v2_t net_socket_plugin = {
    .version = CCL_NET_ABI_VERSION,
    .name = "socket",
    .caps = CCL_NET_CAP_ACTIVITY | CCL_NET_CAP_DUPLEX, /* net_socket_io.c rings activity */
    .init = net_sock_init,
    .devices = net_sock_devices,
    .get_properties = net_sock_get_properties,
    .listen = net_sock_listen,
    .connect = net_sock_connect,
    .accept = net_sock_accept,
    .reg_mr = net_sock_conn_reg_mr,
    .dereg_mr = net_sock_conn_dereg_mr,
    .isend = net_sock_conn_isend,
    .irecv = net_sock_conn_irecv,
    .test = net_sock_conn_test,
    .close_send = net_sock_conn_close,
    .close_recv = net_sock_conn_close,
    .close_listen = net_sock_close_listen,
    .finalize = net_sock_finalize,
    .last_error = net_sock_last_error,
    .progress = net_sock_conn_progress,
    .pollfds = net_sock_conn_pollfds,
};

#ifdef NET_SOCKET_PLUGIN_SO
/* Built as libccl-net-socket.so (Makefile): the same table under the ABI's
 * symbol, the one name the library exports. */
extern const ccl_net_v2_t ccl_net_plugin_v2 __attribute__((alias("net_socket_plugin"), visibility("default")));
#endif
