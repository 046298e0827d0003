/*
 * test_socket.c - the bootstrap's TCP helpers (src/bootstrap/socket.h).
 *
 * Covers sock_addr_parse on IPv4, bracketed IPv6 and host names, and its
 * refusal of malformed text and out-of-range ports (each with a message);
 * sock_addr_str and sock_addr_len, including a parse -> print -> parse round
 * trip and truncation; listen on 127.0.0.1 port 0, connect, accept; 1 MiB
 * one way with sock_send_all/sock_recv_all and 1 MiB both ways at once with
 * sock_sendrecv over deliberately small socket buffers (a send-then-receive
 * implementation would deadlock there); zero-length transfers; a peer that
 * closes (recv -> CCL_ERR_REMOTE, send -> CCL_ERR_REMOTE without SIGPIPE);
 * deadlines: accept with nobody connecting, recv from a silent peer, and
 * connect to a port nobody listens on all end with CCL_ERR_TIMEOUT close to
 * their deadline, never early; connect's retry until a late listener comes
 * up; sock_pick_local_addr returning a usable address.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/socket.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/wait.h"

#define MS (1000ull * 1000ull)
#define SEC (1000ull * MS)
#define BIG (1u << 20)

static double ms_since(uint64_t t0) { return (double)(clock_now_ns() - t0) / 1e6; }

static void fill_pattern(unsigned char *p, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (unsigned char)(x >> 7);
    }
}

/* ---- addresses --------------------------------------------------------------- */

static void test_parse_ipv4(void **state)
{
    (void)state;
    sock_addr_t a;
    memset(&a, 0xEE, sizeof a);
    assert_int_equal(sock_addr_parse("127.0.0.1:80", &a), CCL_SUCCESS);
    assert_int_equal(a.sa.sa_family, AF_INET);
    assert_int_equal(ntohs(a.sin.sin_port), 80);
    assert_int_equal(ntohl(a.sin.sin_addr.s_addr), 0x7f000001u);
    assert_int_equal(sock_addr_len(&a), sizeof(struct sockaddr_in));

    assert_int_equal(sock_addr_parse("10.20.30.40:65535", &a), CCL_SUCCESS);
    assert_int_equal(a.sa.sa_family, AF_INET);
    assert_int_equal(ntohs(a.sin.sin_port), 65535);
    assert_int_equal(ntohl(a.sin.sin_addr.s_addr), 0x0a141e28u);

    assert_int_equal(sock_addr_parse("1.2.3.4:1", &a), CCL_SUCCESS);
    assert_int_equal(ntohs(a.sin.sin_port), 1);
}

static void test_parse_ipv6(void **state)
{
    (void)state;
    sock_addr_t a;
    memset(&a, 0xEE, sizeof a);
    assert_int_equal(sock_addr_parse("[::1]:5", &a), CCL_SUCCESS);
    assert_int_equal(a.sa.sa_family, AF_INET6);
    assert_int_equal(ntohs(a.sin6.sin6_port), 5);
    struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;
    assert_memory_equal(&a.sin6.sin6_addr, &lo, sizeof lo);
    assert_int_equal(sock_addr_len(&a), sizeof(struct sockaddr_in6));

    assert_int_equal(sock_addr_parse("[2001:db8::7:1]:443", &a), CCL_SUCCESS);
    assert_int_equal(a.sa.sa_family, AF_INET6);
    assert_int_equal(ntohs(a.sin6.sin6_port), 443);
    struct in6_addr want;
    assert_int_equal(inet_pton(AF_INET6, "2001:db8::7:1", &want), 1);
    assert_memory_equal(&a.sin6.sin6_addr, &want, sizeof want);
}

static void test_parse_hostname(void **state)
{
    (void)state;
    sock_addr_t a;
    assert_int_equal(sock_addr_parse("localhost:99", &a), CCL_SUCCESS);
    if (a.sa.sa_family == AF_INET) {
        assert_int_equal(ntohs(a.sin.sin_port), 99);
        assert_int_equal(ntohl(a.sin.sin_addr.s_addr) >> 24, 127);
    } else {
        assert_int_equal(a.sa.sa_family, AF_INET6);
        assert_int_equal(ntohs(a.sin6.sin6_port), 99);
        assert_true(IN6_IS_ADDR_LOOPBACK(&a.sin6.sin6_addr));
    }
}

static void test_parse_rejects(void **state)
{
    (void)state;
    /* None of these reaches a name lookup, so the test needs no DNS. */
    static const char *const bad[] = {
        "noport", "1.2.3.4:0", "1.2.3.4:70000", "1.2.3.4:65536", ":5", "1.2.3.4:",
        "1.2.3.4:5x", "1.2.3.4:-1", "1.2.3.4:0x50", "", ":", "[::1]:", "[::1]:0",
        "localhost:99999999999999999999",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sock_addr_t a;
        err_clear();
        ccl_result_t rc = sock_addr_parse(bad[i], &a);
        if (rc != CCL_ERR_INVALID_ARGUMENT) {
            print_error("sock_addr_parse(\"%s\") = %d, want CCL_ERR_INVALID_ARGUMENT\n", bad[i], (int)rc);
            fail();
        }
        if (err_message()[0] == '\0') {
            print_error("sock_addr_parse(\"%s\") failed without a message\n", bad[i]);
            fail();
        }
    }
    /* A host part longer than any name. */
    char longhost[400];
    memset(longhost, 'a', 300);
    snprintf(longhost + 300, sizeof longhost - 300, ":80");
    sock_addr_t a;
    assert_int_equal(sock_addr_parse(longhost, &a), CCL_ERR_INVALID_ARGUMENT);
}

static void test_addr_str_round_trip(void **state)
{
    (void)state;
    static const char *const texts[] = {"127.0.0.1:80", "10.20.30.40:65535", "0.0.0.0:1",
                                        "[::1]:5", "[2001:db8::7:1]:443", "[fe80::1]:7"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        sock_addr_t a, b;
        char buf[80];
        assert_int_equal(sock_addr_parse(texts[i], &a), CCL_SUCCESS);
        const char *s = sock_addr_str(&a, buf, sizeof buf);
        assert_ptr_equal(s, buf);
        assert_string_equal(buf, texts[i]);
        assert_int_equal(sock_addr_parse(buf, &b), CCL_SUCCESS);
        assert_int_equal(sock_addr_len(&a), sock_addr_len(&b));
        assert_memory_equal(&a, &b, sock_addr_len(&a));
    }
    /* Truncated to the buffer, still terminated. */
    sock_addr_t a;
    char small[8];
    memset(small, 'x', sizeof small);
    assert_int_equal(sock_addr_parse("127.0.0.1:80", &a), CCL_SUCCESS);
    sock_addr_str(&a, small, sizeof small);
    assert_string_equal(small, "127.0.0");
    /* No address yet. */
    sock_addr_t none;
    memset(&none, 0, sizeof none);
    char buf[80];
    assert_string_equal(sock_addr_str(&none, buf, sizeof buf), "(no address)");
}

/* ---- a connected pair on loopback ---------------------------------------------- */

typedef struct {
    int lfd, cfd, sfd; /* listener, client end, server end */
    sock_addr_t bound;
} pair_t;

static void pair_open(pair_t *p)
{
    sock_addr_t any;
    p->lfd = p->cfd = p->sfd = -1;
    assert_int_equal(sock_addr_parse("127.0.0.1:1", &any), CCL_SUCCESS);
    any.sin.sin_port = 0; /* the parser refuses port 0; listen picks one */
    assert_int_equal(sock_listen(&any, &p->lfd, &p->bound), CCL_SUCCESS);
    assert_true(p->lfd >= 0);
    assert_int_equal(p->bound.sa.sa_family, AF_INET);
    assert_int_not_equal(ntohs(p->bound.sin.sin_port), 0);
    assert_int_equal(ntohl(p->bound.sin.sin_addr.s_addr), 0x7f000001u);
    uint64_t deadline = clock_now_ns() + 5 * SEC;
    assert_int_equal(sock_connect(&p->bound, deadline, &p->cfd), CCL_SUCCESS);
    assert_int_equal(sock_accept(p->lfd, deadline, &p->sfd), CCL_SUCCESS);
    assert_true(p->cfd >= 0 && p->sfd >= 0);
}

static void pair_close(pair_t *p)
{
    sock_close(&p->lfd);
    sock_close(&p->cfd);
    sock_close(&p->sfd);
}

static void shrink_buffers(int fd)
{
    int sz = 16 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
}

typedef struct {
    int fd;
    const unsigned char *sbuf;
    unsigned char *rbuf;
    size_t len;
    ccl_result_t rc;
    int mode; /* 0 send_all, 1 sendrecv on fd both ways */
} xfer_t;

static void *xfer_thread(void *arg)
{
    xfer_t *x = arg;
    uint64_t deadline = clock_now_ns() + 10 * SEC;
    if (x->mode == 0)
        x->rc = sock_send_all(x->fd, x->sbuf, x->len, deadline);
    else
        x->rc = sock_sendrecv(x->fd, x->sbuf, x->len, x->fd, x->rbuf, x->len, deadline);
    return NULL;
}

static void test_send_recv_one_way(void **state)
{
    (void)state;
    pair_t p;
    pair_open(&p);
    unsigned char *src = malloc(BIG), *dst = malloc(BIG);
    assert_non_null(src);
    assert_non_null(dst);
    fill_pattern(src, BIG, 1);
    memset(dst, 0, BIG);
    xfer_t x = {.fd = p.cfd, .sbuf = src, .len = BIG, .mode = 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, xfer_thread, &x), 0);
    assert_int_equal(sock_recv_all(p.sfd, dst, BIG, clock_now_ns() + 10 * SEC), CCL_SUCCESS);
    pthread_join(t, NULL);
    assert_int_equal(x.rc, CCL_SUCCESS);
    assert_memory_equal(src, dst, BIG);
    /* Zero-length transfers return at once. */
    assert_int_equal(sock_send_all(p.cfd, src, 0, clock_now_ns() + SEC), CCL_SUCCESS);
    assert_int_equal(sock_recv_all(p.sfd, dst, 0, clock_now_ns() + SEC), CCL_SUCCESS);
    /* And a few short messages, in order. */
    for (int i = 0; i < 50; i++) {
        uint32_t v = 0x1000u + (uint32_t)i, got = 0;
        assert_int_equal(sock_send_all(p.sfd, &v, sizeof v, clock_now_ns() + SEC), CCL_SUCCESS);
        assert_int_equal(sock_recv_all(p.cfd, &got, sizeof got, clock_now_ns() + SEC), CCL_SUCCESS);
        assert_int_equal(got, v);
    }
    free(src);
    free(dst);
    pair_close(&p);
}

static void test_sendrecv_both_ways(void **state)
{
    (void)state;
    pair_t p;
    pair_open(&p);
    shrink_buffers(p.cfd);
    shrink_buffers(p.sfd);
    unsigned char *s1 = malloc(BIG), *s2 = malloc(BIG), *r1 = malloc(BIG), *r2 = malloc(BIG);
    assert_true(s1 && s2 && r1 && r2);
    fill_pattern(s1, BIG, 11);
    fill_pattern(s2, BIG, 22);
    memset(r1, 0, BIG);
    memset(r2, 0, BIG);
    xfer_t a = {.fd = p.cfd, .sbuf = s1, .rbuf = r1, .len = BIG, .mode = 1};
    xfer_t b = {.fd = p.sfd, .sbuf = s2, .rbuf = r2, .len = BIG, .mode = 1};
    uint64_t t0 = clock_now_ns();
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, xfer_thread, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, xfer_thread, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(a.rc, CCL_SUCCESS);
    assert_int_equal(b.rc, CCL_SUCCESS);
    assert_memory_equal(r1, s2, BIG);
    assert_memory_equal(r2, s1, BIG);
    /* Far below the 10 s deadline: no stall waiting on a full buffer. */
    assert_true(ms_since(t0) < 5000.0);
    free(s1);
    free(s2);
    free(r1);
    free(r2);
    pair_close(&p);
}

static void test_recv_from_closed_peer(void **state)
{
    (void)state;
    pair_t p;
    pair_open(&p);
    /* The peer sends 10 of the 100 bytes expected, then closes. */
    unsigned char msg[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, buf[100];
    assert_int_equal(sock_send_all(p.sfd, msg, sizeof msg, clock_now_ns() + SEC), CCL_SUCCESS);
    sock_close(&p.sfd);
    assert_int_equal(p.sfd, -1);
    uint64_t t0 = clock_now_ns();
    err_clear();
    assert_int_equal(sock_recv_all(p.cfd, buf, sizeof buf, clock_now_ns() + 5 * SEC), CCL_ERR_REMOTE);
    assert_true(ms_since(t0) < 1000.0);
    assert_true(err_message()[0] != '\0');
    assert_memory_equal(buf, msg, sizeof msg);
    /* Again, with nothing at all left to read. */
    assert_int_equal(sock_recv_all(p.cfd, buf, 1, clock_now_ns() + 5 * SEC), CCL_ERR_REMOTE);
    pair_close(&p);
}

static void test_send_to_closed_peer(void **state)
{
    (void)state;
    pair_t p;
    pair_open(&p);
    sock_close(&p.sfd);
    /* The first bytes may still fit in the socket buffer; the reset comes
     * back on a later send. Without MSG_NOSIGNAL this would kill the test
     * with SIGPIPE. */
    size_t len = 16u << 20;
    unsigned char *src = calloc(1, len);
    assert_non_null(src);
    uint64_t t0 = clock_now_ns();
    assert_int_equal(sock_send_all(p.cfd, src, len, clock_now_ns() + 5 * SEC), CCL_ERR_REMOTE);
    assert_true(ms_since(t0) < 2000.0);
    free(src);
    pair_close(&p);
}

/* ---- deadlines ------------------------------------------------------------------- */

static void test_accept_times_out(void **state)
{
    (void)state;
    sock_addr_t any, bound;
    int lfd = -1, fd = -1;
    assert_int_equal(sock_addr_parse("127.0.0.1:1", &any), CCL_SUCCESS);
    any.sin.sin_port = 0;
    assert_int_equal(sock_listen(&any, &lfd, &bound), CCL_SUCCESS);
    uint64_t t0 = clock_now_ns();
    err_clear();
    assert_int_equal(sock_accept(lfd, t0 + 100 * MS, &fd), CCL_ERR_TIMEOUT);
    double ms = ms_since(t0);
    assert_true(err_message()[0] != '\0');
    if (ms < 95.0 || ms > 500.0) {
        print_error("accept with a 100 ms deadline returned after %.1f ms\n", ms);
        fail();
    }
    assert_int_equal(fd, -1);
    /* A deadline already past still returns (at once). */
    t0 = clock_now_ns();
    assert_int_equal(sock_accept(lfd, t0 - 1, &fd), CCL_ERR_TIMEOUT);
    assert_true(ms_since(t0) < 100.0);
    sock_close(&lfd);
    sock_close(&lfd); /* idempotent */
    assert_int_equal(lfd, -1);
}

static void test_recv_times_out(void **state)
{
    (void)state;
    pair_t p;
    pair_open(&p);
    unsigned char buf[16];
    uint64_t t0 = clock_now_ns();
    assert_int_equal(sock_recv_all(p.cfd, buf, sizeof buf, t0 + 150 * MS), CCL_ERR_TIMEOUT);
    double ms = ms_since(t0);
    if (ms < 145.0 || ms > 1000.0) {
        print_error("recv with a 150 ms deadline returned after %.1f ms\n", ms);
        fail();
    }
    /* A send that cannot complete (peer never reads, small buffers) also
     * ends at its deadline. */
    shrink_buffers(p.cfd);
    shrink_buffers(p.sfd);
    size_t len = 64u << 20;
    unsigned char *big = calloc(1, len);
    assert_non_null(big);
    t0 = clock_now_ns();
    assert_int_equal(sock_send_all(p.cfd, big, len, t0 + 200 * MS), CCL_ERR_TIMEOUT);
    ms = ms_since(t0);
    if (ms < 195.0 || ms > 1200.0) {
        print_error("send with a 200 ms deadline returned after %.1f ms\n", ms);
        fail();
    }
    free(big);
    pair_close(&p);
}

/* A loopback port with no listener: bind one, note the port, close it. */
static sock_addr_t unused_port(void)
{
    sock_addr_t any, bound;
    int lfd = -1;
    assert_int_equal(sock_addr_parse("127.0.0.1:1", &any), CCL_SUCCESS);
    any.sin.sin_port = 0;
    assert_int_equal(sock_listen(&any, &lfd, &bound), CCL_SUCCESS);
    sock_close(&lfd);
    return bound;
}

static void test_connect_nobody_listening(void **state)
{
    (void)state;
    sock_addr_t addr = unused_port();
    int fd = -1;
    uint64_t t0 = clock_now_ns();
    err_clear();
    ccl_result_t rc = sock_connect(&addr, t0 + 200 * MS, &fd);
    double ms = ms_since(t0);
    assert_int_equal(rc, CCL_ERR_TIMEOUT);
    assert_int_equal(fd, -1);
    assert_true(err_message()[0] != '\0');
    /* Refused connects are retried until the deadline, not given up at once. */
    if (ms < 190.0 || ms > 1000.0) {
        print_error("connect with a 200 ms deadline returned after %.1f ms\n", ms);
        fail();
    }
}

typedef struct {
    sock_addr_t addr;
    int lfd;
    ccl_result_t rc;
} late_listener_t;

static void *late_listener(void *arg)
{
    late_listener_t *l = arg;
    usleep(150 * 1000);
    sock_addr_t bound;
    l->rc = sock_listen(&l->addr, &l->lfd, &bound);
    return NULL;
}

static void test_connect_waits_for_late_listener(void **state)
{
    (void)state;
    late_listener_t l = {.addr = unused_port(), .lfd = -1, .rc = CCL_ERR_INTERNAL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, late_listener, &l), 0);
    int fd = -1;
    uint64_t t0 = clock_now_ns();
    ccl_result_t rc = sock_connect(&l.addr, t0 + 5 * SEC, &fd);
    pthread_join(t, NULL);
    assert_int_equal(l.rc, CCL_SUCCESS);
    assert_int_equal(rc, CCL_SUCCESS);
    assert_true(ms_since(t0) >= 140.0);
    int sfd = -1;
    assert_int_equal(sock_accept(l.lfd, clock_now_ns() + 2 * SEC, &sfd), CCL_SUCCESS);
    uint64_t v = 0x0123456789abcdefULL, got = 0;
    assert_int_equal(sock_send_all(fd, &v, sizeof v, clock_now_ns() + SEC), CCL_SUCCESS);
    assert_int_equal(sock_recv_all(sfd, &got, sizeof got, clock_now_ns() + SEC), CCL_SUCCESS);
    assert_true(got == v);
    sock_close(&fd);
    sock_close(&sfd);
    sock_close(&l.lfd);
}

static void test_pick_local_addr(void **state)
{
    (void)state;
    sock_addr_t a;
    char ifname[64] = "";
    memset(&a, 0xEE, sizeof a);
    assert_int_equal(sock_pick_local_addr(&a, ifname, sizeof ifname), CCL_SUCCESS);
    assert_true(a.sa.sa_family == AF_INET || a.sa.sa_family == AF_INET6);
    assert_true(ifname[0] != '\0');
    /* Port 0, ready to listen on. */
    if (a.sa.sa_family == AF_INET)
        assert_int_equal(a.sin.sin_port, 0);
    else
        assert_int_equal(a.sin6.sin6_port, 0);
    int lfd = -1;
    sock_addr_t bound;
    assert_int_equal(sock_listen(&a, &lfd, &bound), CCL_SUCCESS);
    sock_close(&lfd);
}

int main(void)
{
    /* Expected failures below log at WARN; keep the log quiet unless the
     * caller chose a level. Environment set before any ccl call. */
    setenv("CCL_DEBUG", "NONE", 0);
    unsetenv("CCL_SOCKET_IFNAME"); /* test_pick_local_addr checks the default choice */
    alarm(120); /* a hang is a failure, not a stuck test run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ipv4),
        cmocka_unit_test(test_parse_ipv6),
        cmocka_unit_test(test_parse_hostname),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_addr_str_round_trip),
        cmocka_unit_test(test_send_recv_one_way),
        cmocka_unit_test(test_sendrecv_both_ways),
        cmocka_unit_test(test_recv_from_closed_peer),
        cmocka_unit_test(test_send_to_closed_peer),
        cmocka_unit_test(test_accept_times_out),
        cmocka_unit_test(test_recv_times_out),
        cmocka_unit_test(test_connect_nobody_listening),
        cmocka_unit_test(test_connect_waits_for_late_listener),
        cmocka_unit_test(test_pick_local_addr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
