/*
 * test_wire.c - the wire parsers (bootstrap/wire.h, net.h, net_socket.h,
 * shm.h) and the bootstrap's acceptor (bootstrap/accept.h).
 *
 * Parsers: each accepts a well-formed frame and refuses every kind of bad
 * one with its specific code and a message that names the source and the
 * field (unique id: magic, address, flags, length; hello: secret, version,
 * nranks and rank bounds, its peer entry; root table: header, length, each
 * entry; allgather header: seq and size; shrink's rejoin request and reply:
 * secret, kind, rank, status; CCL_COMM_ID syntax; shm names: no
 * paths; net hello: comm, rank range, self; socket plugin handle: address,
 * connect state from a peer). Acceptor: a silent connection, garbage and a
 * wrong secret arriving first do not delay the real peer (returned in well
 * under a second), bytes after a frame are left for the caller, with
 * peer_waits a frame with trailing bytes is dropped as oversized, and a
 * listener with only strays times out with CCL_ERR_TIMEOUT. Bootstrap: two
 * ranks (threads) that call bs_allgather with different block sizes both
 * fail at once with CCL_ERR_REMOTE naming the sizes, instead of exchanging
 * misaligned bytes.
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

#include "bootstrap/accept.h"
#include "bootstrap/bootstrap.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/wait.h"
#include "transport/net_hello.h"
#include "transport/net_socket.h"
#include "transport/net_socket_io.h"
#include "transport/shm.h"

#define MS (1000ull * 1000ull)
#define SEC (1000ull * MS)

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static sock_addr_t v4(const char *ip, int port)
{
    sock_addr_t a;
    memset(&a, 0, sizeof a);
    a.sin.sin_family = AF_INET;
    a.sin.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &a.sin.sin_addr);
    return a;
}

static const uint8_t *test_secret(void)
{
    static uint8_t s[BS_SECRET_BYTES];
    memset(s, 0x5a, sizeof s);
    return s;
}

static bs_peer_t peer(int rank)
{
    bs_peer_t p;
    memset(&p, 0, sizeof p);
    p.addr = v4("10.0.0.1", 40000 + rank);
    p.rank = rank;
    snprintf(p.hostname, sizeof p.hostname, "node%d", rank);
    return p;
}

static bs_hello_t hello(int rank, int nranks)
{
    bs_hello_t h;
    memset(&h, 0, sizeof h);
    h.magic = BS_MAGIC;
    h.version = BS_VERSION;
    memcpy(h.secret, test_secret(), BS_SECRET_BYTES);
    h.rank = rank;
    h.nranks = nranks;
    h.info = peer(rank);
    return h;
}

/* ---- parsers -------------------------------------------------------------------- */

static void test_id_parse(void **state)
{
    (void)state;
    unsigned char raw[CCL_UNIQUE_ID_BYTES] = {0};
    bs_id_t id = {.magic = BS_MAGIC, .version = BS_VERSION, .root = v4("127.0.0.1", 29500)}, out;
    memcpy(raw, &id, sizeof id);
    assert_int_equal(bs_id_parse(raw, sizeof raw, &out), CCL_SUCCESS);
    assert_int_equal(ntohs(out.root.sin.sin_port), 29500);

    assert_int_equal(bs_id_parse(raw, sizeof id - 1, &out), CCL_ERR_INVALID_ARGUMENT);
    assert_true(contains(err_message(), "bytes"));
    bs_id_t bad = id;
    bad.magic ^= 1;
    memcpy(raw, &bad, sizeof bad);
    assert_int_equal(bs_id_parse(raw, sizeof raw, &out), CCL_ERR_INVALID_ARGUMENT);
    assert_true(contains(err_message(), "not one ccl_get_unique_id made"));
    bad = id;
    bad.root.sin.sin_port = 0;
    memcpy(raw, &bad, sizeof bad);
    assert_int_equal(bs_id_parse(raw, sizeof raw, &out), CCL_ERR_INVALID_ARGUMENT);
    assert_true(contains(err_message(), "no usable root address"));
    bad = id;
    bad.root.sa.sa_family = AF_UNIX;
    memcpy(raw, &bad, sizeof bad);
    assert_int_equal(bs_id_parse(raw, sizeof raw, &out), CCL_ERR_INVALID_ARGUMENT);
    bad = id;
    bad.root_in_rank0 = 7;
    memcpy(raw, &bad, sizeof bad);
    assert_int_equal(bs_id_parse(raw, sizeof raw, &out), CCL_ERR_INVALID_ARGUMENT);
    assert_true(contains(err_message(), "root_in_rank0"));
}

static void test_hello_parse(void **state)
{
    (void)state;
    bs_hello_t h = hello(2, 4), out, bad;
    assert_int_equal(bs_hello_parse(&h, sizeof h, test_secret(), "src", &out), CCL_SUCCESS);
    assert_int_equal(out.rank, 2);
    assert_int_equal(out.nranks, 4);

    struct {
        const char *what;
        int field;
        int value;
    } cases[] = {
        {"out of range (1..", 0, 0},          {"out of range (1..", 0, BS_MAX_RANKS + 1},
        {"out of range (1..", 0, -3},         {"rank 4 of 4 is out of range", 1, 4},
        {"rank -1 of 4 is out of range", 1, -1}, {"says rank 3", 2, 3},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        bad = h;
        if (cases[k].field == 0)
            bad.nranks = cases[k].value;
        else if (cases[k].field == 1)
            bad.rank = cases[k].value;
        else
            bad.info.rank = cases[k].value;
        assert_int_equal(bs_hello_parse(&bad, sizeof bad, test_secret(), "src", &out), CCL_ERR_REMOTE);
        assert_true(contains(err_message(), "src: "));
        assert_true(contains(err_message(), cases[k].what));
    }
    bad = h;
    bad.secret[31] ^= 0x80;
    assert_int_equal(bs_hello_parse(&bad, sizeof bad, test_secret(), "src", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "wrong secret"));
    bad = h;
    bad.version = BS_VERSION + 1;
    assert_int_equal(bs_hello_parse(&bad, sizeof bad, test_secret(), "src", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "wire version"));
    bad = h;
    memset(bad.info.hostname, 'x', sizeof bad.info.hostname);
    assert_int_equal(bs_hello_parse(&bad, sizeof bad, test_secret(), "src", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "not terminated"));
    bad = h;
    bad.info.addr.sin.sin_port = 0;
    assert_int_equal(bs_hello_parse(&bad, sizeof bad, test_secret(), "src", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "no usable address"));
    /* Short and long: never read past what arrived. */
    assert_int_equal(bs_hello_parse(&h, 10, test_secret(), "src", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "truncated"));
    assert_int_equal(bs_hello_parse(&h, sizeof h - 1, test_secret(), "src", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "this frame"));
}

/* A hello with another secret is still read for the refusal, with every
 * other check in place; the refusal the rank gets back is checked too. */
static void test_claim_and_refusal_parse(void **state)
{
    (void)state;
    bs_hello_t h = hello(1, 2), out, bad;
    snprintf(h.job, sizeof h.job, "Slurm job 12 step 0");
    h.secret[0] ^= 1;
    assert_int_equal(bs_hello_parse(&h, sizeof h, test_secret(), "src", &out), CCL_ERR_REMOTE);
    assert_int_equal(bs_hello_claim_parse(&h, sizeof h, "src", &out), CCL_SUCCESS);
    assert_string_equal(out.job, "Slurm job 12 step 0");
    bad = h;
    memset(bad.job, 'j', sizeof bad.job);
    assert_int_equal(bs_hello_claim_parse(&bad, sizeof bad, "src", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "job name of rank 1 is not terminated"));
    bad = h;
    bad.rank = 2;
    assert_int_equal(bs_hello_claim_parse(&bad, sizeof bad, "src", &out), CCL_ERR_REMOTE);
    bad = h;
    bad.version = 1; /* an older ccl: not refused by name */
    assert_int_equal(bs_hello_claim_parse(&bad, sizeof bad, "src", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "not a hello of this ccl"));
    assert_int_equal(bs_hello_claim_parse(&h, sizeof h - 1, "src", &out), CCL_ERR_REMOTE);

    bs_refusal_t r, rout, rbad;
    memset(&r, 0, sizeof r);
    r.magic = BS_REFUSE_MAGIC;
    r.nranks = 2;
    r.pid = 42;
    snprintf(r.host, sizeof r.host, "node\001a");
    snprintf(r.job, sizeof r.job, "PMIx namespace 7");
    assert_int_equal(bs_refusal_parse(&r, sizeof r, "src", &rout), CCL_SUCCESS);
    assert_string_equal(rout.host, "node?a"); /* printable only: it goes into a message */
    r.nranks = -1;
    assert_int_equal(bs_refusal_parse(&r, sizeof r, "src", &rout), CCL_SUCCESS);
    int bad_nranks[] = {0, -2, BS_MAX_RANKS + 1};
    for (int k = 0; k < 3; k++) {
        rbad = r;
        rbad.nranks = bad_nranks[k];
        assert_int_equal(bs_refusal_parse(&rbad, sizeof rbad, "src", &rout), CCL_ERR_REMOTE);
        assert_true(contains(err_message(), "malformed refusal"));
    }
    rbad = r;
    rbad.same_job = 2;
    assert_int_equal(bs_refusal_parse(&rbad, sizeof rbad, "src", &rout), CCL_ERR_REMOTE);
    rbad = r;
    memset(rbad.job, 'x', sizeof rbad.job);
    assert_int_equal(bs_refusal_parse(&rbad, sizeof rbad, "src", &rout), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "not terminated"));
    rbad = r;
    rbad.magic = BS_MAGIC;
    assert_int_equal(bs_refusal_parse(&rbad, sizeof rbad, "src", &rout), CCL_ERR_REMOTE);
    assert_int_equal(bs_refusal_parse(&r, sizeof r - 1, "src", &rout), CCL_ERR_REMOTE);
}

static void test_table_parse(void **state)
{
    (void)state;
    bs_table_hdr_t hdr = {BS_MAGIC, 3}, hout;
    assert_int_equal(bs_table_hdr_parse(&hdr, sizeof hdr, 3, "root", &hout), CCL_SUCCESS);
    assert_int_equal(bs_table_hdr_parse(&hdr, sizeof hdr, 4, "root", &hout), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "table of 3 ranks, this rank expects 4"));
    bs_peer_t t[3] = {peer(0), peer(1), peer(2)}, out[3];
    assert_int_equal(bs_table_parse(t, sizeof t, 3, "root", out), CCL_SUCCESS);
    assert_int_equal(out[2].rank, 2);
    assert_int_equal(bs_table_parse(t, sizeof t - 1, 3, "root", out), CCL_ERR_REMOTE);
    t[1].addr.sa.sa_family = 0;
    assert_int_equal(bs_table_parse(t, sizeof t, 3, "root", out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "rank 1 has no usable address"));
}

static void test_ring_hdr_parse(void **state)
{
    (void)state;
    bs_ring_hdr_t h = {BS_RING_MAGIC, 3, 64}, out;
    assert_int_equal(bs_ring_hdr_parse(&h, sizeof h, 3, 64, "rank 1", &out), CCL_SUCCESS);
    assert_int_equal(bs_ring_hdr_parse(&h, sizeof h, 4, 64, "rank 1", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "rank 1: sent allgather #3 where #4 was due"));
    assert_int_equal(bs_ring_hdr_parse(&h, sizeof h, 3, 96, "rank 1", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "64 bytes per rank there, 96 here"));
    h.magic = 0;
    assert_int_equal(bs_ring_hdr_parse(&h, sizeof h, 3, 64, "rank 1", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "corrupt"));
}

static void test_rejoin_parse(void **state)
{
    (void)state;
    bs_rejoin_req_t q = {.magic = BS_MAGIC, .version = BS_VERSION, .kind = BS_KIND_REJOIN, .rank = 3, .tag = 9}, qout,
                    bad;
    memcpy(q.secret, test_secret(), BS_SECRET_BYTES);
    assert_int_equal(bs_rejoin_req_parse(&q, sizeof q, test_secret(), "src", &qout), CCL_SUCCESS);
    assert_int_equal(qout.rank, 3);
    bad = q;
    bad.secret[0] ^= 1;
    assert_int_equal(bs_rejoin_req_parse(&bad, sizeof bad, test_secret(), "src", &qout), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "wrong secret"));
    bad = q;
    bad.kind = 0;
    assert_int_equal(bs_rejoin_req_parse(&bad, sizeof bad, test_secret(), "src", &qout), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "not a rejoin request"));
    bad = q;
    bad.rank = -2;
    assert_int_equal(bs_rejoin_req_parse(&bad, sizeof bad, test_secret(), "src", &qout), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "rank -2 is out of range"));
    /* A hello is not a rejoin request, although it proves the secret too. */
    bs_hello_t h = hello(1, 4);
    assert_int_equal(bs_rejoin_req_parse(&h, sizeof h, test_secret(), "src", &qout), CCL_ERR_REMOTE);

    bs_rejoin_reply_t r = {.magic = BS_MAGIC, .status = 1}, rout;
    assert_int_equal(bs_rejoin_reply_parse(&r, sizeof r, "rank 0", &rout), CCL_SUCCESS);
    r.status = REJOIN_FAILED + 1;
    assert_int_equal(bs_rejoin_reply_parse(&r, sizeof r, "rank 0", &rout), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "rank 0: answered the rejoin request with a malformed frame"));
    assert_int_equal(bs_rejoin_reply_parse(&r, 8, "rank 0", &rout), CCL_ERR_REMOTE);
}

static void test_addr_split(void **state)
{
    (void)state;
    char host[64];
    int port = 0;
    assert_int_equal(sock_addr_split("[::1]:80", host, sizeof host, &port), CCL_SUCCESS);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 80);
    assert_int_equal(sock_addr_split("node7:65535", host, sizeof host, &port), CCL_SUCCESS);
    assert_string_equal(host, "node7");
    const char *bad[] = {"node7", ":80", "node7:", "node7:0", "node7:65536", "node7:+80", "node7: 80",
                         "node7:-1", "node7:8x", "[]:80", "node7:99999999999999999999"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(sock_addr_split(bad[k], host, sizeof host, &port), CCL_ERR_INVALID_ARGUMENT);
        assert_true(contains(err_message(), bad[k]));
    }
    char longhost[200];
    memset(longhost, 'h', sizeof longhost);
    snprintf(longhost + 150, 50, ":80");
    assert_int_equal(sock_addr_split(longhost, host, sizeof host, &port), CCL_ERR_INVALID_ARGUMENT);
    assert_true(contains(err_message(), "too long"));
}

static void test_shm_name_check(void **state)
{
    (void)state;
    char name[SHM_NAME_MAX];
    memset(name, 0, sizeof name);
    snprintf(name, sizeof name, "/ccl-0123456789abcdef0123456789abcdef");
    assert_int_equal(shm_name_check(name, sizeof name, "rank 1"), CCL_SUCCESS);
    snprintf(name, sizeof name, "/ccl-b0123456789abcdef0123456789abcdef");
    assert_int_equal(shm_name_check(name, sizeof name, "rank 1"), CCL_SUCCESS);
    const char *bad[] = {"/ccl-../../../etc/passwd", "/ccl-0123456789ABCDEF0123456789abcdef",
                         "/ccl-0123456789abcdef0123456789abcde", "/dev/shm/ccl-0123456789abcdef0123456789abcdef",
                         "", "/ccl-"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        memset(name, 0, sizeof name);
        snprintf(name, sizeof name, "%s", bad[k]);
        assert_int_equal(shm_name_check(name, sizeof name, "rank 1"), CCL_ERR_REMOTE);
        assert_true(contains(err_message(), "rank 1: "));
    }
    /* No terminator within what arrived. */
    memset(name, 'a', sizeof name);
    assert_int_equal(shm_name_check(name, sizeof name, "rank 1"), CCL_ERR_REMOTE);
}

static void test_net_hello_parse(void **state)
{
    (void)state;
    net_hello_t h = {NET_HELLO_MAGIC, 0x77, 2, 4}, out;
    assert_int_equal(net_hello_parse(&h, sizeof h, 0x77, 4, 0, "r0", &out), CCL_SUCCESS);
    assert_int_equal(out.rank, 2);
    assert_int_equal(net_hello_parse(&h, sizeof h, 0x78, 4, 0, "r0", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "another communicator"));
    assert_int_equal(net_hello_parse(&h, sizeof h, 0x77, 4, 2, "r0", &out), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "not a peer of rank 2"));
    assert_int_equal(net_hello_parse(&h, sizeof h, 0x77, 3, 0, "r0", &out), CCL_ERR_REMOTE);
    assert_int_equal(net_hello_parse(&h, sizeof h - 1, 0x77, 4, 0, "r0", &out), CCL_ERR_REMOTE);
    h.rank = 9;
    assert_int_equal(net_hello_parse(&h, sizeof h, 0x77, 4, 0, "r0", &out), CCL_ERR_REMOTE);
}

static void test_net_sock_parsers(void **state)
{
    (void)state;
    unsigned char raw[CCL_NET_HANDLE_MAXSIZE] = {0};
    net_sock_handle_t h = {.magic = NET_SOCK_HANDLE_MAGIC, .version = NET_SOCK_WIRE_VERSION, .rank = 1,
                           .listen_id = 5, .addr = v4("10.0.0.2", 41000)}, out;
    memcpy(raw, &h, sizeof h);
    assert_int_equal(net_sock_handle_parse(raw, sizeof raw, &out), CCL_SUCCESS);
    /* A peer's handle must not carry connect() state: it would become a
     * pointer this process follows. */
    net_sock_handle_t bad = h;
    bad.stage = 1;
    bad.pending = (void *)0x1234;
    memcpy(raw, &bad, sizeof bad);
    assert_int_equal(net_sock_handle_parse(raw, sizeof raw, &out), CCL_ERR_INVALID_ARGUMENT);
    assert_true(contains(err_message(), "corrupt"));
    bad = h;
    bad.addr.sa.sa_family = 0;
    memcpy(raw, &bad, sizeof bad);
    assert_int_equal(net_sock_handle_parse(raw, sizeof raw, &out), CCL_ERR_INVALID_ARGUMENT);
    assert_true(contains(err_message(), "no usable address"));

    net_sock_hello_t m = {NET_SOCK_HELLO_MAGIC, NET_SOCK_WIRE_VERSION, 5, 9, 2, 4, 3, 0, 0}, mout;
    assert_null(net_sock_hello_parse(&m, sizeof m, 5, &mout));
    m.flags = NET_SOCK_HELLO_CHECKSUM;
    assert_null(net_sock_hello_parse(&m, sizeof m, 5, &mout));
    m.flags = 0x4;
    assert_string_equal(net_sock_hello_parse(&m, sizeof m, 5, &mout), "unknown flags");
    m.flags = 0;
    assert_non_null(net_sock_hello_parse(&m, sizeof m, 6, &mout));
    assert_non_null(net_sock_hello_parse(&m, sizeof m - 1, 5, &mout));
    m.index = 4;
    assert_non_null(net_sock_hello_parse(&m, sizeof m, 5, &mout));

    net_sock_msg_hdr_t mh = {NET_SOCK_MSG_MAGIC, 7, 3, 4096}, hout;
    char why[400];
    assert_int_equal(net_sock_msg_hdr_parse(&mh, sizeof mh, 3, 4096, 7, "rank 5 at x", &hout, why, sizeof why), 0);
    assert_int_equal(net_sock_msg_hdr_parse(&mh, sizeof mh, 3, 4095, 7, "rank 5 at x", &hout, why, sizeof why), -1);
    assert_true(contains(why, "rank 5 at x sent 4096 bytes as message 3"));
    assert_true(contains(why, "holds 4095 bytes"));
}

/* ---- the acceptor ---------------------------------------------------------------- */

static int listen_local(sock_addr_t *bound)
{
    int lfd = -1;
    sock_addr_t any = v4("127.0.0.1", 0);
    assert_int_equal(sock_listen(&any, &lfd, bound), CCL_SUCCESS);
    return lfd;
}

static int dial(const sock_addr_t *to, const void *buf, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, &to->sa, sock_addr_len(to)), 0);
    if (len)
        assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
    return fd;
}

static ccl_result_t want_rank(const void *frame, size_t len, const char *from, void *arg)
{
    bs_hello_t h;
    ccl_result_t res = bs_hello_parse(frame, len, test_secret(), from, &h);
    if (res == CCL_SUCCESS && h.rank != *(const int *)arg)
        res = err_set(CCL_ERR_REMOTE, "%s: rank %d, not %d", from, h.rank, *(const int *)arg);
    return res;
}

static void test_acceptor_strays_do_not_stall(void **state)
{
    (void)state;
    sock_addr_t at;
    int lfd = listen_local(&at);
    bs_hello_t good = hello(1, 4), wrong = hello(1, 4), other = hello(2, 4);
    wrong.secret[0] ^= 1;
    int silent = dial(&at, NULL, 0);
    int stall = dial(&at, &good, 50);
    int garbage = dial(&at, "garbage garbage garbage", 23);
    int bad = dial(&at, &wrong, sizeof wrong);
    int notme = dial(&at, &other, sizeof other);
    /* The real one, with the start of its next message right behind. */
    unsigned char more[sizeof good + 8];
    memcpy(more, &good, sizeof good);
    memcpy(more + sizeof good, "NEXTMSG!", 8);
    int real = dial(&at, more, sizeof more);
    int want = 1, fd = -1;
    bs_hello_t got;
    uint64_t t0 = clock_now_ns();
    assert_int_equal(bs_accept_one(lfd, test_secret(), sizeof got, 0, "test", want_rank, &want, t0 + 30 * SEC, &fd,
                                   &got),
                     CCL_SUCCESS);
    assert_true(clock_now_ns() - t0 < SEC);
    assert_int_equal(got.rank, 1);
    /* The bytes after the frame are the caller's. */
    char next[8];
    assert_int_equal(sock_recv_all(fd, next, sizeof next, clock_now_ns() + 5 * SEC), CCL_SUCCESS);
    assert_memory_equal(next, "NEXTMSG!", 8);
    sock_close(&fd);
    int fds[] = {silent, stall, garbage, bad, notme, real};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(fds[i]);
    sock_close(&lfd);
}

static void test_acceptor_peer_waits(void **state)
{
    (void)state;
    sock_addr_t at;
    int lfd = listen_local(&at);
    bs_acceptor_t *a = NULL;
    assert_int_equal(bs_acceptor_open(lfd, test_secret(), sizeof(bs_hello_t), 1, "root", &a), CCL_SUCCESS);
    bs_hello_t h = hello(1, 4), got;
    unsigned char big[sizeof h + 1];
    memcpy(big, &h, sizeof h);
    big[sizeof h] = 0;
    int over = dial(&at, big, sizeof big);
    int want = 1, fd = -1;
    /* Only the oversized one: nothing to take before the deadline. */
    uint64_t t0 = clock_now_ns();
    assert_int_equal(bs_acceptor_next(a, want_rank, &want, t0 + 300 * MS, &fd, &got, NULL), CCL_ERR_TIMEOUT);
    assert_true(contains(err_message(), "root: no valid connection"));
    assert_int_equal(fd, -1);
    int ok = dial(&at, &h, sizeof h);
    sock_addr_t from;
    assert_int_equal(bs_acceptor_next(a, want_rank, &want, clock_now_ns() + 10 * SEC, &fd, &got, &from), CCL_SUCCESS);
    assert_int_equal(got.rank, 1);
    assert_int_equal(from.sa.sa_family, AF_INET);
    sock_close(&fd);
    bs_acceptor_close(a);
    close(over);
    close(ok);
    sock_close(&lfd);
    /* Frames it cannot take are refused up front. */
    assert_int_equal(bs_acceptor_open(lfd, test_secret(), 4, 1, "root", &a), CCL_ERR_INTERNAL);
    assert_int_equal(bs_acceptor_open(lfd, test_secret(), BS_FRAME_MAX + 1, 1, "root", &a), CCL_ERR_INTERNAL);
}

/* ---- allgather headers ------------------------------------------------------------ */

typedef struct {
    ccl_unique_id_t id;
    int rank;
    size_t size;
    ccl_result_t init_rc, rc;
    char msg[1024];
} ag_arg_t;

static void *ag_rank(void *p)
{
    ag_arg_t *a = p;
    bs_t bs;
    bs_peer_t me;
    memset(&me, 0, sizeof me);
    me.pid = (int32_t)getpid();
    snprintf(me.hostname, sizeof me.hostname, "thread%d", a->rank);
    a->init_rc = bs_init(&bs, &a->id, a->rank, 2, &me);
    if (a->init_rc != CCL_SUCCESS)
        return NULL;
    char buf[2 * 32] = {0};
    assert_true(a->size <= 32);
    a->rc = bs_allgather(&bs, buf, a->size);
    snprintf(a->msg, sizeof a->msg, "%s", err_message());
    bs_close(&bs);
    return NULL;
}

static void test_allgather_size_mismatch(void **state)
{
    (void)state;
    bs_id_t id = {.magic = BS_MAGIC, .version = BS_VERSION};
    memcpy(id.secret, test_secret(), BS_SECRET_BYTES);
    sock_addr_t any = v4("127.0.0.1", 0);
    assert_int_equal(bs_root_start(&any, id.secret, &id.root), CCL_SUCCESS);
    ag_arg_t args[2] = {{.rank = 0, .size = 8}, {.rank = 1, .size = 16}};
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        memset(&args[r].id, 0, sizeof args[r].id);
        memcpy(args[r].id.internal, &id, sizeof id);
        assert_int_equal(pthread_create(&th[r], NULL, ag_rank, &args[r]), 0);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(args[r].init_rc, CCL_SUCCESS);
        assert_int_equal(args[r].rc, CCL_ERR_REMOTE);
        assert_true(contains(args[r].msg, r == 0 ? "16 bytes per rank there, 8 here" : "8 bytes per rank there, 16 here"));
        assert_true(contains(args[r].msg, r == 0 ? "rank 1: " : "rank 0: "));
    }
}

int main(void)
{
    /* Expected failures below log at WARN; keep the log quiet unless the
     * caller chose a level. Environment set before any ccl call. */
    setenv("CCL_DEBUG", "NONE", 0);
    setenv("CCL_TIMEOUT", "20", 0);
    unsetenv("CCL_SOCKET_IFNAME");
    alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_parse),
        cmocka_unit_test(test_hello_parse),
        cmocka_unit_test(test_claim_and_refusal_parse),
        cmocka_unit_test(test_table_parse),
        cmocka_unit_test(test_ring_hdr_parse),
        cmocka_unit_test(test_rejoin_parse),
        cmocka_unit_test(test_addr_split),
        cmocka_unit_test(test_shm_name_check),
        cmocka_unit_test(test_net_hello_parse),
        cmocka_unit_test(test_net_sock_parsers),
        cmocka_unit_test(test_acceptor_strays_do_not_stall),
        cmocka_unit_test(test_acceptor_peer_waits),
        cmocka_unit_test(test_allgather_size_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
