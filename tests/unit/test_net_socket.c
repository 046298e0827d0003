/*
 * test_net_socket.c - the built-in TCP net plugin (src/transport/net_socket*.c)
 * through the ABI of include/ccl_net.h; the loader has test_net_plugin.c.
 *
 * Over the first device (this host's own address, so the traffic stays
 * local): device list order and properties; listen / connect / accept driven
 * from one thread (neither may block); messages of 0, 1, odd and 64 MiB
 * bytes with the data checked, for 1 to 4 sockets, one or two helper
 * threads and the threadless mode; a thousand messages of mixed sizes and
 * tags in order with up to 32 in flight, tested newest first (a later
 * request never completes before an earlier one); the request limit;
 * registration checks; the exact stripe layout on the wire and the socket
 * options (NODELAY, keepalive) seen from a raw listener; receives smaller
 * than the send, a wrong tag, a garbage header and an oversized one from a
 * forged sender, each an error that leaves the bytes past the posted buffer
 * alone; a peer that closes mid-message (either side) and a refused
 * connect, each naming the peer's rank and address; a stray connection with
 * a bad hello that the listener drops while still accepting real ones.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "base/wait.h"
#include "transport/net_plugin.h"
#include "transport/net_socket.h"
#include "transport/net_socket_conn.h"
#include "transport/net_socket_io.h"

#define SEC 1000000000ull
#define MIB (1024u * 1024u)

static net_plugin_t *P; /* the socket plugin, opened for the whole run */
static const ccl_net_v2_t *N;

typedef struct {
    void *l, *s, *r;
    char handle[CCL_NET_HANDLE_MAXSIZE];
    char addr[80]; /* the listener's address, as messages print it */
} conn_t;

static void fill(unsigned char *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 12345;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)(x >> 9);
    }
}

static int contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle)) {
        print_error("message \"%s\" lacks \"%s\"\n", hay, needle);
        return 0;
    }
    return 1;
}

/* Listen, then connect and accept from this one thread: both must return
 * NULL rather than wait for the other. */
static void conn_open(conn_t *c, int listen_rank, int connect_rank)
{
    memset(c, 0, sizeof *c);
    assert_int_equal(N->listen(0, listen_rank, c->handle, &c->l), CCL_SUCCESS);
    const net_sock_handle_t *h = (const net_sock_handle_t *)c->handle;
    sock_addr_str(&h->addr, c->addr, sizeof c->addr);
    uint64_t deadline = clock_now_ns() + 20 * SEC;
    while (!c->s || !c->r) {
        if (!c->s)
            assert_int_equal(N->connect(0, connect_rank, c->handle, &c->s), CCL_SUCCESS);
        if (!c->r)
            assert_int_equal(N->accept(c->l, &c->r), CCL_SUCCESS);
        assert_true(clock_now_ns() < deadline);
    }
}

static void conn_close(conn_t *c)
{
    if (c->s)
        assert_int_equal(N->close_send(c->s), CCL_SUCCESS);
    if (c->r)
        assert_int_equal(N->close_recv(c->r), CCL_SUCCESS);
    if (c->l)
        assert_int_equal(N->close_listen(c->l), CCL_SUCCESS);
    memset(c, 0, sizeof *c);
}

/* Posts, retrying while the comm says "not now". */
static void post_send(void *comm, const void *buf, size_t size, uint32_t tag, void **req)
{
    uint64_t deadline = clock_now_ns() + 20 * SEC;
    do {
        assert_int_equal(N->isend(comm, buf, size, tag, NULL, req), CCL_SUCCESS);
        assert_true(clock_now_ns() < deadline);
    } while (!*req);
}

static void post_recv(void *comm, void *buf, size_t size, uint32_t tag, void **req)
{
    uint64_t deadline = clock_now_ns() + 20 * SEC;
    do {
        assert_int_equal(N->irecv(comm, 1, &buf, &size, &tag, NULL, req), CCL_SUCCESS);
        assert_true(clock_now_ns() < deadline);
    } while (!*req);
}

/* Tests a request until done or failed; returns the result. */
static ccl_result_t wait_req(void *req, size_t *size)
{
    uint64_t deadline = clock_now_ns() + 30 * SEC;
    for (;;) {
        int done = 0;
        ccl_result_t rc = N->test(req, &done, size);
        if (rc != CCL_SUCCESS || done)
            return rc;
        if (clock_now_ns() > deadline) {
            print_error("request did not complete within 30 s\n");
            return CCL_ERR_TIMEOUT;
        }
    }
}

/* One message each way of the pair, both requests driven together (the
 * threadless mode moves data only inside these calls). */
static ccl_result_t xfer(conn_t *c, const void *sbuf, size_t ssize, uint32_t stag, void *rbuf, size_t rsize,
                         uint32_t rtag, size_t *got)
{
    void *sr = NULL, *rr = NULL;
    post_recv(c->r, rbuf, rsize, rtag, &rr);
    post_send(c->s, sbuf, ssize, stag, &sr);
    int sdone = 0, rdone = 0;
    size_t ssz = 0;
    uint64_t deadline = clock_now_ns() + 60 * SEC;
    while (!sdone || !rdone) {
        ccl_result_t rc;
        if (!rdone && (rc = N->test(rr, &rdone, got)) != CCL_SUCCESS)
            return rc;
        if (!sdone && (rc = N->test(sr, &sdone, &ssz)) != CCL_SUCCESS)
            return rc;
        if (clock_now_ns() > deadline)
            return CCL_ERR_TIMEOUT;
    }
    assert_int_equal(ssz, ssize);
    return CCL_SUCCESS;
}

/* ---- devices ------------------------------------------------------------------- */

static void test_devices_and_properties(void **state)
{
    (void)state;
    int n = -1;
    assert_int_equal(N->devices(&n), CCL_SUCCESS);
    assert_true(n >= 1);
    assert_int_equal(n, P->ndev);
    for (int d = 0; d < n; d++) {
        ccl_net_props_t p;
        memset(&p, 0xEE, sizeof p);
        assert_int_equal(N->get_properties(d, &p), CCL_SUCCESS);
        assert_non_null(p.name);
        assert_true(p.name[0] != '\0');
        assert_int_equal(p.ptr_support, CCL_NET_PTR_HOST);
        assert_true(p.speed_mbps > 0);
        assert_int_equal(p.max_recvs, 1);
        assert_int_equal(p.max_requests, NET_SOCK_MAX_REQS);
        assert_int_equal(p.reg_granularity, 1);
        assert_true(p.max_size >= ((size_t)1 << 40));
        assert_true(p.max_comms > 0);
    }
    ccl_net_props_t p;
    assert_int_equal(N->get_properties(n, &p), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(N->get_properties(-1, &p), CCL_ERR_INVALID_ARGUMENT);
    assert_true(strstr(N->last_error(), "device") != NULL);
}

/* Without CCL_SOCKET_IFNAME: ordinary interfaces, then docker / veth /
 * virbr, then loopback; one entry per interface. */
static void test_interface_order(void **state)
{
    (void)state;
    sock_addr_t addrs[32];
    char names[32][SOCK_IFNAME_LEN];
    int n = sock_list_local_addrs(addrs, names, 32);
    assert_true(n >= 1);
    int seen_virtual = 0, seen_loop = 0;
    for (int i = 0; i < n; i++) {
        int loop = (addrs[i].sa.sa_family == AF_INET && (ntohl(addrs[i].sin.sin_addr.s_addr) >> 24) == 127);
        int virt = !strncmp(names[i], "docker", 6) || !strncmp(names[i], "veth", 4) || !strncmp(names[i], "virbr", 5);
        if (!loop && !virt)
            assert_false(seen_virtual || seen_loop);
        if (virt)
            assert_false(seen_loop);
        seen_virtual |= virt;
        seen_loop |= loop;
        assert_int_equal(addrs[i].sin.sin_port, 0);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(names[i], names[j]);
    }
    /* The bootstrap picks the same first interface. */
    sock_addr_t a;
    char ifname[SOCK_IFNAME_LEN];
    assert_int_equal(sock_pick_local_addr(&a, ifname, sizeof ifname), CCL_SUCCESS);
    assert_string_equal(ifname, names[0]);
}

/* ---- connections and data ----------------------------------------------------------- */

static void test_connect_accept(void **state)
{
    (void)state;
    static const int layouts[][2] = {{1, 1}, {2, 1}, {4, 0}, {2, 2}, {16, 1}};
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        net_socket_set_layout(layouts[i][0], layouts[i][1]);
        conn_t c;
        conn_open(&c, 0, 1);
        const net_sock_handle_t *h = (const net_sock_handle_t *)c.handle;
        assert_int_equal(h->magic, NET_SOCK_HANDLE_MAGIC);
        assert_int_equal(h->rank, 0);
        assert_int_equal(h->stage, 0); /* a finished connect leaves the handle reusable */
        assert_true(contains(net_socket_comm_peer(c.s), "rank 0 at "));
        assert_true(contains(net_socket_comm_peer(c.s), c.addr));
        assert_true(contains(net_socket_comm_peer(c.r), "rank 1 at "));
        conn_close(&c);
    }
    /* A handle that listen did not write. */
    char junk[CCL_NET_HANDLE_MAXSIZE];
    memset(junk, 0x5A, sizeof junk);
    void *s = NULL;
    assert_int_equal(N->connect(0, 0, junk, &s), CCL_ERR_INVALID_ARGUMENT);
    assert_null(s);
    net_socket_set_layout(-1, -1);
}

/* Duplex: both ends send and receive at once over one connection, each
 * direction with its own sequence (striped, small and empty messages), for
 * every kind of progress. */
static void test_duplex(void **state)
{
    (void)state;
    static const size_t sizes[] = {8, MIB + 3, 0, 4097, 3 * 65536 + 1};
    enum { NSZ = sizeof sizes / sizeof sizes[0] };
    static const int layouts[][2] = {{2, 0}, {1, 0}, {2, 1}, {3, 2}};
    unsigned char *a = malloc(MIB + 3), *b = malloc(MIB + 3), *at_a = malloc(MIB + 3), *at_b = malloc(MIB + 3);
    assert_true(a && b && at_a && at_b);
    fill(a, MIB + 3, 31);
    fill(b, MIB + 3, 32);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        net_socket_set_layout(layouts[l][0], layouts[l][1]);
        conn_t c;
        conn_open(&c, 0, 1);
        for (int k = 0; k < NSZ; k++) {
            size_t n = sizes[k];
            memset(at_a, 0, n + 1 > MIB + 3 ? MIB + 3 : n + 1);
            memset(at_b, 0, n + 1 > MIB + 3 ? MIB + 3 : n + 1);
            /* req[0]: connector sends, [1]: acceptor receives it, [2]:
             * acceptor sends, [3]: connector receives that. */
            void *req[4] = {NULL};
            post_recv(c.r, at_b, MIB + 3, 100 + k, &req[1]);
            post_recv(c.s, at_a, MIB + 3, 200 + k, &req[3]);
            post_send(c.s, a, n, 100 + k, &req[0]);
            post_send(c.r, b, n, 200 + k, &req[2]);
            int done[4] = {0};
            size_t got[4] = {0};
            uint64_t deadline = clock_now_ns() + 30 * SEC;
            while (!done[0] || !done[1] || !done[2] || !done[3]) {
                for (int q = 0; q < 4; q++)
                    if (!done[q])
                        assert_int_equal(N->test(req[q], &done[q], &got[q]), CCL_SUCCESS);
                assert_true(clock_now_ns() < deadline);
            }
            assert_int_equal(got[1], n);
            assert_int_equal(got[3], n);
            if (n) {
                assert_memory_equal(at_b, a, n);
                assert_memory_equal(at_a, b, n);
            }
        }
        conn_close(&c);
    }
    net_socket_set_layout(-1, -1);
    free(a);
    free(b);
    free(at_a);
    free(at_b);
}

static void test_sizes(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 7, 4097, 65535, 65537, 3 * 65536 + 1, MIB + 3, 64 * MIB};
    static const int layouts[][2] = {{2, 1}, {1, 1}, {2, 2}, {3, 0}};
    unsigned char *src = malloc(64 * MIB), *dst = malloc(64 * MIB + 64);
    assert_non_null(src);
    assert_non_null(dst);
    fill(src, 64 * MIB, 1);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        net_socket_set_layout(layouts[l][0], layouts[l][1]);
        conn_t c;
        conn_open(&c, 0, 1);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            if (n == 64 * MIB && l > 1)
                continue; /* the big one once per threading mode is enough */
            memset(dst, 0xA5, n + 64);
            size_t got = 12345;
            /* Posted with room to spare: the size comes from the sender. */
            assert_int_equal(xfer(&c, src + (i & 1), n, (uint32_t)i, dst, n + 64, (uint32_t)i, &got), CCL_SUCCESS);
            assert_int_equal(got, n);
            if (n)
                assert_memory_equal(dst, src + (i & 1), n);
            for (size_t k = n; k < n + 64; k++)
                assert_int_equal(dst[k], 0xA5);
        }
        conn_close(&c);
    }
    net_socket_set_layout(-1, -1);
    free(src);
    free(dst);
}

/* A thousand messages, up to 32 in flight, sizes 0..~200K, tags checked,
 * and requests tested newest first: completion is in order. */
static void test_many_in_order(void **state)
{
    (void)state;
    enum { NMSG = 1000, WINDOW = NET_SOCK_MAX_REQS, MAXSZ = 200 * 1024 };
    static const int layouts[][2] = {{1, 1}, {2, 1}, {2, 2}, {4, 0}};
    unsigned char *src = malloc(MAXSZ + NMSG), *dst = malloc((size_t)WINDOW * MAXSZ);
    assert_non_null(src);
    assert_non_null(dst);
    fill(src, MAXSZ + NMSG, 7);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        net_socket_set_layout(layouts[l][0], layouts[l][1]);
        conn_t c;
        conn_open(&c, 0, 1);
        void *sreq[NMSG], *rreq[NMSG];
        size_t size[NMSG];
        uint32_t x = 99;
        for (int m = 0; m < NMSG; m++) {
            x = x * 1103515245u + 12345u;
            size[m] = (x >> 8) % 7 == 0 ? 0 : (x >> 4) % MAXSZ;
        }
        int sent = 0, done = 0;
        uint64_t deadline = clock_now_ns() + 60 * SEC;
        while (done < NMSG) {
            /* Fill the window. */
            while (sent < NMSG && sent - done < WINDOW) {
                post_recv(c.r, dst + (size_t)(sent % WINDOW) * MAXSZ, MAXSZ, 1000u + (uint32_t)sent, &rreq[sent]);
                post_send(c.s, src + sent, size[sent], 1000u + (uint32_t)sent, &sreq[sent]);
                sent++;
            }
            /* The newest receive first: it must not report done before
             * the older ones. */
            int d = 0;
            size_t got = 0;
            assert_int_equal(N->test(rreq[sent - 1], &d, &got), CCL_SUCCESS);
            if (d) {
                for (int m = done; m < sent - 1; m++) {
                    int dm = 0;
                    size_t gm = 0;
                    assert_int_equal(N->test(rreq[m], &dm, &gm), CCL_SUCCESS);
                    assert_true(dm);
                    assert_int_equal(gm, size[m]);
                    if (gm)
                        assert_memory_equal(dst + (size_t)(m % WINDOW) * MAXSZ, src + m, gm);
                    assert_int_equal(wait_req(sreq[m], NULL), CCL_SUCCESS);
                }
                assert_int_equal(got, size[sent - 1]);
                assert_int_equal(wait_req(sreq[sent - 1], NULL), CCL_SUCCESS);
                done = sent;
            } else {
                int dm = 0;
                size_t gm = 0;
                assert_int_equal(N->test(rreq[done], &dm, &gm), CCL_SUCCESS);
                if (dm) {
                    assert_int_equal(gm, size[done]);
                    if (gm)
                        assert_memory_equal(dst + (size_t)(done % WINDOW) * MAXSZ, src + done, gm);
                    assert_int_equal(wait_req(sreq[done], NULL), CCL_SUCCESS);
                    done++;
                }
            }
            assert_true(clock_now_ns() < deadline);
        }
        conn_close(&c);
    }
    net_socket_set_layout(-1, -1);
    free(src);
    free(dst);
}

/* More than max_requests in flight: the comm says "not now" (NULL), and
 * takes the request once the oldest completed. A test of a finished
 * request is refused. */
static void test_request_limit(void **state)
{
    (void)state;
    conn_t c;
    conn_open(&c, 0, 1);
    char byte = 'x', in[NET_SOCK_MAX_REQS + 1];
    void *s[NET_SOCK_MAX_REQS], *extra = NULL, *r = NULL;
    for (int i = 0; i < NET_SOCK_MAX_REQS; i++) {
        assert_int_equal(N->isend(c.s, &byte, 1, 0, NULL, &s[i]), CCL_SUCCESS);
        assert_non_null(s[i]);
    }
    assert_int_equal(N->isend(c.s, &byte, 1, 0, NULL, &extra), CCL_SUCCESS);
    assert_null(extra);
    for (int i = 0; i < NET_SOCK_MAX_REQS; i++) {
        post_recv(c.r, &in[i], 1, 0, &r);
        assert_int_equal(wait_req(r, NULL), CCL_SUCCESS);
        assert_int_equal(wait_req(s[i], NULL), CCL_SUCCESS);
    }
    int done = 0;
    assert_int_equal(N->test(s[0], &done, NULL), CCL_ERR_INVALID_USAGE);
    post_send(c.s, &byte, 1, 0, &extra);
    post_recv(c.r, &in[NET_SOCK_MAX_REQS], 1, 0, &r);
    assert_int_equal(wait_req(r, NULL), CCL_SUCCESS);
    assert_int_equal(wait_req(extra, NULL), CCL_SUCCESS);
    conn_close(&c);
}

static void test_registration(void **state)
{
    (void)state;
    conn_t c;
    conn_open(&c, 0, 1);
    static char buf[4096], in[4096];
    void *mh = NULL, *mh_r = NULL, *req = NULL, *bad = NULL;
    assert_int_equal(N->reg_mr(c.s, buf, sizeof buf, CCL_NET_PTR_DEVICE, &mh), CCL_ERR_UNSUPPORTED);
    assert_int_equal(N->reg_mr(c.s, buf, sizeof buf, CCL_NET_PTR_HOST, &mh), CCL_SUCCESS);
    assert_int_equal(N->reg_mr(c.r, in, sizeof in, CCL_NET_PTR_HOST, &mh_r), CCL_SUCCESS);
    /* Outside the region, or a handle of another comm. */
    assert_int_equal(N->isend(c.s, buf + 100, sizeof buf, 0, mh, &req), CCL_ERR_INVALID_ARGUMENT);
    assert_null(req);
    assert_int_equal(N->isend(c.s, buf, 10, 0, mh_r, &req), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(N->dereg_mr(c.s, mh_r), CCL_ERR_INVALID_ARGUMENT);
    /* Inside it. */
    fill((unsigned char *)buf, sizeof buf, 3);
    assert_int_equal(N->isend(c.s, buf + 96, 4000, 5, mh, &req), CCL_SUCCESS);
    assert_non_null(req);
    void *rr = NULL, *dptr = in;
    size_t sz = sizeof in;
    uint32_t tag = 5;
    assert_int_equal(N->irecv(c.r, 1, &dptr, &sz, &tag, &mh_r, &rr), CCL_SUCCESS);
    assert_int_equal(wait_req(rr, NULL), CCL_SUCCESS);
    assert_int_equal(wait_req(req, NULL), CCL_SUCCESS);
    assert_memory_equal(in, buf + 96, 4000);
    /* Grouped receives are not offered (max_recvs 1). */
    void *two[2] = {in, in + 8};
    size_t sizes2[2] = {8, 8};
    uint32_t tags2[2] = {0, 0};
    assert_int_equal(N->irecv(c.r, 2, two, sizes2, tags2, NULL, &bad), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(N->dereg_mr(c.s, mh), CCL_SUCCESS);
    assert_int_equal(N->dereg_mr(c.r, mh_r), CCL_SUCCESS);
    conn_close(&c);
}

/* ---- the wire, seen from a raw listener ------------------------------------------- */

static ssize_t read_full(int fd, void *buf, size_t len, int timeout_ms)
{
    size_t got = 0;
    while (got < len) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0)
            return (ssize_t)got;
        ssize_t n = recv(fd, (char *)buf + got, len - got, 0);
        if (n <= 0)
            return (ssize_t)got;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static int same_addr(const sock_addr_t *a, const sock_addr_t *b)
{
    return a->sa.sa_family == AF_INET && b->sa.sa_family == AF_INET && a->sin.sin_port == b->sin.sin_port &&
           a->sin.sin_addr.s_addr == b->sin.sin_addr.s_addr;
}

/* The plugin's connecting sockets live in this process: look them up by
 * their peer address and check the options it set. */
static int check_plugin_socket_options(const sock_addr_t *peer)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int found = 0;
    for (struct dirent *e; (e = readdir(d));) {
        int fd = atoi(e->d_name);
        if (fd <= 2)
            continue;
        sock_addr_t a;
        socklen_t len = sizeof a;
        memset(&a, 0, sizeof a);
        if (getpeername(fd, &a.sa, &len) != 0 || !same_addr(&a, peer))
            continue;
        int v = 0;
        socklen_t vl = sizeof v;
        /* The raw side's accepted sockets have the listener as local end,
         * not as peer, so only the plugin's sockets match. */
        assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl), 0);
        assert_int_equal(v, 1);
        assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &vl), 0);
        assert_int_equal(v, 1);
        assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, &vl), 0);
        assert_true(v > 0 && v <= 60);
        found++;
    }
    closedir(d);
    return found;
}

/* The trailer the plugin sends after a piece (CCL_CHECKSUM=1, the
 * default): CRC-32C over the message's header, the piece's index and its
 * data, taken here from the layout net_socket_io.h describes. */
static uint32_t piece_crc(uint32_t tag, uint64_t seq, uint64_t size, uint32_t piece, const void *data, size_t len)
{
    struct {
        net_sock_msg_hdr_t hdr;
        uint32_t piece, reserved;
    } seed = {{NET_SOCK_MSG_MAGIC, tag, seq, size}, piece, 0};
    return crc32c_update_sw(crc32c_update_sw(CRC32C_INIT, &seed, sizeof seed), data, len);
}

static void read_trailer(int fd, uint32_t want)
{
    uint32_t t = 0;
    assert_int_equal(read_full(fd, &t, sizeof t, 5000), (ssize_t)sizeof t);
    assert_int_equal(t, want);
}

static void test_wire_striping(void **state)
{
    (void)state;
    enum { NS = 4 };
    /* A raw listener on loopback posing as a plugin listener. */
    sock_addr_t any, bound;
    assert_int_equal(sock_addr_parse("127.0.0.1:1", &any), CCL_SUCCESS);
    any.sin.sin_port = 0;
    int lfd = -1;
    assert_int_equal(sock_listen(&any, &lfd, &bound), CCL_SUCCESS);
    char handle[CCL_NET_HANDLE_MAXSIZE] = {0};
    net_sock_handle_t h = {.magic = NET_SOCK_HANDLE_MAGIC, .version = NET_SOCK_WIRE_VERSION, .rank = 3,
                           .listen_id = 0x1234567, .addr = bound};
    memcpy(handle, &h, sizeof h);

    net_socket_set_layout(NS, 1);
    void *s = NULL;
    int fds[NS + 1] = {-1, -1, -1, -1, -1}; /* the data sockets, then the keepalive socket */
    uint64_t conn_id = 0, deadline = clock_now_ns() + 20 * SEC;
    int accepted = 0;
    while (!s || accepted < NS + 1) {
        if (!s)
            assert_int_equal(N->connect(0, 8, handle, &s), CCL_SUCCESS);
        int fd = -1;
        if (accepted < NS + 1)
            assert_int_equal(sock_try_accept(lfd, &fd), CCL_SUCCESS);
        if (fd >= 0) {
            net_sock_hello_t m;
            assert_int_equal(read_full(fd, &m, sizeof m, 5000), (ssize_t)sizeof m);
            assert_int_equal(m.magic, NET_SOCK_HELLO_MAGIC);
            assert_int_equal(m.version, NET_SOCK_WIRE_VERSION);
            assert_int_equal(m.listen_id, 0x1234567);
            assert_int_equal(m.rank, 8);
            assert_int_equal(m.nsocks, NS + 1);
            assert_int_equal(m.flags, NET_SOCK_HELLO_CHECKSUM);
            assert_true(m.index < NS + 1);
            assert_int_equal(fds[m.index], -1);
            if (accepted == 0)
                conn_id = m.conn_id;
            assert_int_equal(m.conn_id, conn_id);
            fds[m.index] = fd;
            accepted++;
        }
        assert_true(clock_now_ns() < deadline);
    }
    /* Each data socket twice (the send direction holds a duplicate of its
     * descriptor), and the keepalive socket. */
    assert_int_equal(check_plugin_socket_options(&bound), 2 * NS + 1);

    /* Each piece ends with its checksum trailer (read_trailer).
     * Message 0 (lead socket 0): 1 MiB + 3 bytes in 4 stripes of 260 KiB
     * (ceil(size / 4) rounded up to 4 KiB), the last one shorter. Message 1
     * (lead socket 1): 100 bytes, header and data on socket 1 alone.
     * Message 2 (lead socket 2): empty, a header on socket 2 alone. */
    size_t big = MIB + 3, stripe = 266240;
    unsigned char *src = malloc(big), *got = malloc(big);
    assert_non_null(src);
    assert_non_null(got);
    fill(src, big, 11);
    void *r0 = NULL, *r1 = NULL, *r2 = NULL;
    post_send(s, src, big, 77, &r0);
    post_send(s, src, 100, 78, &r1);
    post_send(s, src, 0, 79, &r2);
    for (int i = 0; i < NS; i++) {
        if (i == 0) {
            net_sock_msg_hdr_t m;
            assert_int_equal(read_full(fds[0], &m, sizeof m, 5000), (ssize_t)sizeof m);
            assert_int_equal(m.magic, NET_SOCK_MSG_MAGIC);
            assert_int_equal(m.seq, 0);
            assert_int_equal(m.size, big);
            assert_int_equal(m.tag, 77);
        }
        size_t off = (size_t)i * stripe, len = i == NS - 1 ? big - off : stripe;
        assert_int_equal(read_full(fds[i], got + off, len, 5000), (ssize_t)len);
        read_trailer(fds[i], piece_crc(77, 0, big, (uint32_t)i, src + off, len));
    }
    assert_memory_equal(got, src, big);
    net_sock_msg_hdr_t m1, m2;
    assert_int_equal(read_full(fds[1], &m1, sizeof m1, 5000), (ssize_t)sizeof m1);
    assert_int_equal(m1.seq, 1);
    assert_int_equal(m1.size, 100);
    assert_int_equal(m1.tag, 78);
    assert_int_equal(read_full(fds[1], got, 100, 5000), 100);
    assert_memory_equal(got, src, 100);
    read_trailer(fds[1], piece_crc(78, 1, 100, 0, src, 100));
    assert_int_equal(read_full(fds[2], &m2, sizeof m2, 5000), (ssize_t)sizeof m2);
    assert_int_equal(m2.seq, 2);
    assert_int_equal(m2.size, 0);
    read_trailer(fds[2], piece_crc(79, 2, 0, 0, NULL, 0));
    assert_int_equal(wait_req(r0, NULL), CCL_SUCCESS);
    assert_int_equal(wait_req(r1, NULL), CCL_SUCCESS);
    assert_int_equal(wait_req(r2, NULL), CCL_SUCCESS);
    /* Nothing more on any socket, the keepalive socket included. */
    for (int i = 0; i < NS + 1; i++) {
        char x;
        assert_int_equal(recv(fds[i], &x, 1, MSG_DONTWAIT), -1);
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
        close(fds[i]);
    }
    assert_int_equal(N->close_send(s), CCL_SUCCESS);
    close(lfd);
    net_socket_set_layout(-1, -1);
    free(src);
    free(got);
}

/* ---- failures ------------------------------------------------------------------ */

/* A forged sender: nsocks raw data sockets and the keepalive socket
 * (fds[nsocks]) that say hello to c's listener, without checksums unless
 * forge_flags asks for them. */
static uint32_t forge_flags;
static void forge_connect(conn_t *c, int nsocks, int rank, int *fds, char *from, size_t from_len)
{
    const net_sock_handle_t *h = (const net_sock_handle_t *)c->handle;
    for (int i = 0; i < nsocks + 1; i++) {
        fds[i] = socket(h->addr.sa.sa_family, SOCK_STREAM, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(connect(fds[i], &h->addr.sa, sock_addr_len(&h->addr)), 0);
        net_sock_hello_t m = {NET_SOCK_HELLO_MAGIC, NET_SOCK_WIRE_VERSION, h->listen_id, 0xfeed01, rank,
                              (uint16_t)(nsocks + 1), (uint16_t)i, forge_flags, 0};
        assert_int_equal(send(fds[i], &m, sizeof m, 0), (ssize_t)sizeof m);
    }
    sock_addr_t local;
    socklen_t len = sizeof local;
    getsockname(fds[0], &local.sa, &len);
    sock_addr_str(&local, from, from_len);
    uint64_t deadline = clock_now_ns() + 10 * SEC;
    while (!c->r) {
        assert_int_equal(N->accept(c->l, &c->r), CCL_SUCCESS);
        assert_true(clock_now_ns() < deadline);
    }
}

static void forge_listen(conn_t *c)
{
    memset(c, 0, sizeof *c);
    assert_int_equal(N->listen(0, 2, c->handle, &c->l), CCL_SUCCESS);
    sock_addr_str(&((const net_sock_handle_t *)c->handle)->addr, c->addr, sizeof c->addr);
}

/* A receive posted smaller than the message is an error, and the bytes
 * after the posted buffer stay untouched; so is a wrong tag. */
static void test_recv_smaller_than_send(void **state)
{
    (void)state;
    static unsigned char src[300000], dst[300000 + 64];
    fill(src, sizeof src, 5);
    static const int layouts[][2] = {{2, 1}, {2, 0}};
    for (size_t l = 0; l < 2; l++) {
        net_socket_set_layout(layouts[l][0], layouts[l][1]);
        conn_t c;
        conn_open(&c, 4, 6);
        memset(dst, 0xA5, sizeof dst);
        size_t got = 0;
        assert_int_equal(xfer(&c, src, 300000, 1, dst, 299999, 1, &got), CCL_ERR_REMOTE);
        const char *msg = N->last_error();
        assert_true(contains(msg, "300000 bytes"));
        assert_true(contains(msg, "299999"));
        assert_true(contains(msg, "rank 6 at "));
        for (size_t k = 0; k < sizeof dst; k++)
            assert_int_equal(dst[k], 0xA5);
        /* The comm stays failed. */
        void *req = NULL;
        char b;
        size_t one = 1;
        uint32_t t = 0;
        void *bp = &b;
        assert_int_equal(N->irecv(c.r, 1, &bp, &one, &t, NULL, &req), CCL_ERR_REMOTE);
        conn_close(&c);

        conn_open(&c, 4, 6);
        assert_int_equal(xfer(&c, src, 10, 3, dst, 10, 4, &got), CCL_ERR_REMOTE);
        assert_true(contains(N->last_error(), "tag 3"));
        assert_true(contains(N->last_error(), "tag 4"));
        conn_close(&c);
    }
    net_socket_set_layout(-1, -1);
}

/* A connection with checksums: the right trailer passes, one byte changed
 * in the data (or a trailer of another piece) is CCL_ERR_CORRUPT naming
 * the message, the stripe and the peer; the comm stays failed. */
static void test_checksum_mismatch(void **state)
{
    (void)state;
    static unsigned char src[5000], dst[5000];
    fill(src, sizeof src, 3);
    for (int k = 0; k < 3; k++) {
        net_socket_set_layout(1, k & 1);
        conn_t c;
        int fds[2];
        char from[80];
        forge_listen(&c);
        forge_flags = NET_SOCK_HELLO_CHECKSUM;
        forge_connect(&c, 1, 7, fds, from, sizeof from);
        forge_flags = 0;
        net_sock_msg_hdr_t h = {NET_SOCK_MSG_MAGIC, 9, 0, sizeof src};
        uint32_t crc = piece_crc(9, 0, sizeof src, 0, src, sizeof src);
        unsigned char wire[sizeof src];
        memcpy(wire, src, sizeof src);
        if (k == 1)
            wire[4321] ^= 0x01; /* changed in flight */
        if (k == 2)
            crc = piece_crc(9, 0, sizeof src, 1, src, sizeof src); /* another stripe's */
        assert_int_equal(send(fds[0], &h, sizeof h, 0), (ssize_t)sizeof h);
        assert_int_equal(send(fds[0], wire, sizeof wire, 0), (ssize_t)sizeof wire);
        assert_int_equal(send(fds[0], &crc, sizeof crc, 0), (ssize_t)sizeof crc);
        void *rr = NULL;
        post_recv(c.r, dst, sizeof dst, 9, &rr);
        size_t got = 0;
        if (k == 0) {
            assert_int_equal(wait_req(rr, &got), CCL_SUCCESS);
            assert_int_equal(got, sizeof src);
            assert_memory_equal(dst, src, sizeof src);
        } else {
            assert_int_equal(wait_req(rr, NULL), CCL_ERR_CORRUPT);
            const char *msg = N->last_error();
            assert_true(contains(msg, "message 0 from rank 7 at "));
            assert_true(contains(msg, from));
            assert_true(contains(msg, ERR_CORRUPT_MARK));
            assert_true(contains(msg, "5000 bytes of stripe 0"));
            void *req = NULL;
            void *bp = dst;
            size_t one = 1;
            uint32_t t = 1;
            assert_int_equal(N->irecv(c.r, 1, &bp, &one, &t, NULL, &req), CCL_ERR_CORRUPT);
        }
        close(fds[0]);
        close(fds[1]);
        conn_close(&c);
    }
    net_socket_set_layout(-1, -1);
}

static void test_garbage_and_oversized_headers(void **state)
{
    (void)state;
    static unsigned char dst[4096 + 64];
    enum { GARBAGE, OVERSIZED, WRONG_SEQ, HUGE_SIZE, NCASES };
    for (int k = 0; k < NCASES; k++) {
        net_socket_set_layout(1, k & 1); /* receive side helpers or not */
        conn_t c;
        int fds[2];
        char from[80];
        forge_listen(&c);
        forge_connect(&c, 1, 7, fds, from, sizeof from);
        int fd = fds[0];
        net_sock_msg_hdr_t h = {NET_SOCK_MSG_MAGIC, 9, 0, 4096};
        if (k == GARBAGE)
            memset(&h, 0x41, sizeof h);
        else if (k == OVERSIZED)
            h.size = 4097;
        else if (k == WRONG_SEQ)
            h.seq = 5;
        else
            h.size = ~0ull;
        assert_int_equal(send(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
        /* Data that would overflow the buffer if the header were trusted. */
        static unsigned char junk[8192];
        memset(junk, 0x42, sizeof junk);
        assert_int_equal(send(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
        memset(dst, 0xA5, sizeof dst);
        void *rr = NULL;
        post_recv(c.r, dst, 4096, 9, &rr);
        assert_int_equal(wait_req(rr, NULL), CCL_ERR_REMOTE);
        const char *msg = N->last_error();
        assert_true(contains(msg, "rank 7 at "));
        assert_true(contains(msg, from));
        if (k == GARBAGE)
            assert_true(contains(msg, "invalid message header"));
        else if (k == WRONG_SEQ)
            assert_true(contains(msg, "message 5"));
        else
            assert_true(contains(msg, "holds 4096 bytes"));
        for (size_t i = 0; i < sizeof dst; i++)
            assert_int_equal(dst[i], 0xA5);
        close(fd);
        close(fds[1]);
        conn_close(&c);
    }
    net_socket_set_layout(-1, -1);
}

/* The keepalive socket (the connection's last, which carries nothing): a
 * reset there, as TCP keepalive's ETIMEDOUT would, fails a waiting
 * receive naming the peer; data there is a protocol error; its clean close
 * is no failure (the data sockets carry on). With and without helpers. */
static void test_keepalive_socket(void **state)
{
    (void)state;
    enum { RESET, DATA, CLOSE, NCASES };
    for (int k = 0; k < 2 * NCASES; k++) {
        int helpers = k / NCASES, what = k % NCASES;
        net_socket_set_layout(1, helpers);
        conn_t c;
        int fds[2];
        char from[80];
        forge_listen(&c);
        forge_connect(&c, 1, 7, fds, from, sizeof from);
        static unsigned char dst[64];
        void *rr = NULL;
        post_recv(c.r, dst, sizeof dst, 3, &rr);
        if (what == RESET) {
            struct linger lg = {1, 0};
            assert_int_equal(setsockopt(fds[1], SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
            close(fds[1]);
        } else if (what == DATA) {
            assert_int_equal(send(fds[1], "x", 1, 0), 1);
        } else {
            close(fds[1]);
            usleep(300000); /* past the inline look's interval: it sees the close */
            net_sock_msg_hdr_t h = {NET_SOCK_MSG_MAGIC, 3, 0, 5};
            assert_int_equal(send(fds[0], &h, sizeof h, 0), (ssize_t)sizeof h);
            assert_int_equal(send(fds[0], "hello", 5, 0), 5);
        }
        size_t got = 0;
        ccl_result_t rc = wait_req(rr, &got);
        if (what == CLOSE) {
            assert_int_equal(rc, CCL_SUCCESS);
            assert_int_equal(got, 5);
            assert_memory_equal(dst, "hello", 5);
        } else {
            assert_int_equal(rc, CCL_ERR_REMOTE);
            assert_true(contains(N->last_error(), "rank 7 at "));
            assert_true(contains(N->last_error(), from));
            assert_true(contains(N->last_error(), what == RESET ? "lost" : "keepalive socket"));
        }
        close(fds[0]);
        if (what == DATA)
            close(fds[1]);
        conn_close(&c);
    }
    net_socket_set_layout(-1, -1);
}

/* The sender dies after part of a message: the receiver's test fails and
 * names who and where. */
static void test_sender_closes_mid_message(void **state)
{
    (void)state;
    for (int helpers = 0; helpers < 2; helpers++) {
        net_socket_set_layout(2, helpers);
        conn_t c;
        int fds[3];
        char from[80];
        forge_listen(&c);
        forge_connect(&c, 2, 12, fds, from, sizeof from);
        static unsigned char dst[MIB];
        net_sock_msg_hdr_t h = {NET_SOCK_MSG_MAGIC, 0, 0, MIB};
        assert_int_equal(send(fds[0], &h, sizeof h, 0), (ssize_t)sizeof h);
        assert_int_equal(send(fds[0], dst, 1000, 0), 1000);
        void *rr = NULL;
        post_recv(c.r, dst, MIB, 0, &rr);
        close(fds[0]);
        close(fds[1]);
        close(fds[2]);
        assert_int_equal(wait_req(rr, NULL), CCL_ERR_REMOTE);
        assert_true(contains(N->last_error(), "closed by rank 12 at "));
        assert_true(contains(N->last_error(), from));
        conn_close(&c);
    }
    net_socket_set_layout(-1, -1);
}

/* The receiver goes away with a 64 MiB send in flight: the sender's test
 * fails naming the receiver's rank and listen address. */
static void test_receiver_closes_mid_message(void **state)
{
    (void)state;
    unsigned char *src = malloc(64 * MIB);
    assert_non_null(src);
    memset(src, 1, 64 * MIB);
    for (int helpers = 0; helpers < 2; helpers++) {
        net_socket_set_layout(2, helpers);
        conn_t c;
        conn_open(&c, 5, 9);
        void *sr = NULL;
        post_send(c.s, src, 64 * MIB, 0, &sr);
        int done = 0;
        for (int i = 0; i < 100; i++) {
            assert_int_equal(N->test(sr, &done, NULL), CCL_SUCCESS);
            assert_false(done); /* nobody receives: it cannot all fit in buffers */
            usleep(1000);
        }
        /* Unread data in the receive buffers: closing resets the connection. */
        assert_int_equal(N->close_recv(c.r), CCL_SUCCESS);
        c.r = NULL;
        assert_int_equal(wait_req(sr, NULL), CCL_ERR_REMOTE);
        assert_true(contains(N->last_error(), "rank 5 at "));
        assert_true(contains(N->last_error(), c.addr));
        conn_close(&c);
    }
    net_socket_set_layout(-1, -1);
    free(src);
}

static void test_connect_refused(void **state)
{
    (void)state;
    char handle[CCL_NET_HANDLE_MAXSIZE], addr[80];
    void *l = NULL, *s = NULL;
    assert_int_equal(N->listen(0, 21, handle, &l), CCL_SUCCESS);
    sock_addr_str(&((net_sock_handle_t *)handle)->addr, addr, sizeof addr);
    assert_int_equal(N->close_listen(l), CCL_SUCCESS);
    ccl_result_t rc = CCL_SUCCESS;
    uint64_t deadline = clock_now_ns() + 10 * SEC;
    while (rc == CCL_SUCCESS && !s && clock_now_ns() < deadline)
        rc = N->connect(0, 0, handle, &s);
    assert_null(s);
    assert_int_equal(rc, CCL_ERR_REMOTE);
    assert_true(contains(N->last_error(), "rank 21 at "));
    assert_true(contains(N->last_error(), addr));
    /* The failed connect reset the handle's state. */
    assert_int_equal(((net_sock_handle_t *)handle)->stage, 0);
}

/* A stranger's connection with a bad hello is dropped; the listener still
 * accepts the real connection that follows. */
static void test_bad_hello_is_dropped(void **state)
{
    (void)state;
    conn_t c;
    forge_listen(&c);
    const net_sock_handle_t *h = (const net_sock_handle_t *)c.handle;
    int fd = socket(h->addr.sa.sa_family, SOCK_STREAM, 0);
    assert_int_equal(connect(fd, &h->addr.sa, sock_addr_len(&h->addr)), 0);
    net_sock_hello_t m = {NET_SOCK_HELLO_MAGIC, NET_SOCK_WIRE_VERSION, h->listen_id + 2, 5, 0, 1, 0, 0, 0};
    assert_int_equal(send(fd, &m, sizeof m, 0), (ssize_t)sizeof m);
    int fd2 = socket(h->addr.sa.sa_family, SOCK_STREAM, 0);
    assert_int_equal(connect(fd2, &h->addr.sa, sock_addr_len(&h->addr)), 0);
    char http[sizeof(net_sock_hello_t)];
    memset(http, '.', sizeof http);
    memcpy(http, "GET / HTTP/1.0\r\n\r\n", 18);
    assert_int_equal(send(fd2, http, sizeof http, 0), (ssize_t)sizeof http);
    void *r = NULL;
    for (int i = 0; i < 50 && !r; i++) {
        assert_int_equal(N->accept(c.l, &r), CCL_SUCCESS);
        usleep(2000);
    }
    assert_null(r);
    /* Dropped: the stranger sees the connection close. */
    char x;
    struct pollfd p = {fd, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 2000), 1);
    assert_true(recv(fd, &x, 1, 0) <= 0);
    close(fd);
    close(fd2);
    uint64_t deadline = clock_now_ns() + 10 * SEC;
    while (!c.s || !c.r) {
        if (!c.s)
            assert_int_equal(N->connect(0, 1, c.handle, &c.s), CCL_SUCCESS);
        if (!c.r)
            assert_int_equal(N->accept(c.l, &c.r), CCL_SUCCESS);
        assert_true(clock_now_ns() < deadline);
    }
    char a = 'a', b = 0;
    size_t got = 0;
    assert_int_equal(xfer(&c, &a, 1, 0, &b, 1, 0, &got), CCL_SUCCESS);
    assert_int_equal(b, 'a');
    conn_close(&c);
}

static int setup(void **state)
{
    (void)state;
    if (net_plugin_open("socket", &P) != CCL_SUCCESS)
        return -1;
    N = P->net;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    net_plugin_close(P);
    return 0;
}

int main(void)
{
    /* Before the first ccl call: the param table is read once. */
    setenv("CCL_DEBUG", "NONE", 0);
    setenv("CCL_CHECKSUM", "1", 1); /* the wire layout test_wire_striping reads */
    unsetenv("CCL_SOCKET_IFNAME");
    unsetenv("CCL_NSOCKS_PERTHREAD");
    unsetenv("CCL_SOCKET_NTHREADS");
    alarm(600); /* a hang is a failure */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devices_and_properties),
        cmocka_unit_test(test_interface_order),
        cmocka_unit_test(test_connect_accept),
        cmocka_unit_test(test_duplex),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_many_in_order),
        cmocka_unit_test(test_request_limit),
        cmocka_unit_test(test_registration),
        cmocka_unit_test(test_wire_striping),
        cmocka_unit_test(test_recv_smaller_than_send),
        cmocka_unit_test(test_garbage_and_oversized_headers),
        cmocka_unit_test(test_checksum_mismatch),
        cmocka_unit_test(test_keepalive_socket),
        cmocka_unit_test(test_sender_closes_mid_message),
        cmocka_unit_test(test_receiver_closes_mid_message),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_bad_hello_is_dropped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
