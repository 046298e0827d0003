/*
 * make_seeds.c - writes the seed corpus of every fuzz target into
 * tests/fuzz/corpus/<target>/: a few well-formed frames and near misses per
 * parser, so that fuzzing starts from inputs that reach past the first
 * checks. Not part of the build; rerun it when a frame changes:
 *
 *   cc -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc tests/fuzz/make_seeds.c -o /tmp/make_seeds
 *   /tmp/make_seeds tests/fuzz/corpus
 */
#include "bootstrap/wire.h"
#include "transport/net_hello.h"
#include "transport/net_socket.h"
#include "transport/net_socket_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *root;

/* Writes the concatenation of the given parts as <root>/<target>/<name>. */
static void seed(const char *target, const char *name, const void *a, size_t alen, const void *b, size_t blen)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen) || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static sock_addr_t v4(const char *ip, int port)
{
    sock_addr_t a;
    memset(&a, 0, sizeof a);
    a.sin.sin_family = AF_INET;
    a.sin.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &a.sin.sin_addr);
    return a;
}

static bs_peer_t peer(int rank)
{
    bs_peer_t p;
    memset(&p, 0, sizeof p);
    p.addr = v4("10.0.0.1", 40000 + rank);
    p.hostid = 0x1234;
    p.kernelid = 0x5678;
    p.pid = 100 + rank;
    p.rank = rank;
    snprintf(p.hostname, sizeof p.hostname, "node%d", rank);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    root = argv[1];
    mkdir(root, 0755);

    /* unique id, and CCL_COMM_ID text */
    unsigned char idbuf[CCL_UNIQUE_ID_BYTES] = {0};
    bs_id_t id = {.magic = BS_MAGIC, .version = BS_VERSION, .root = v4("127.0.0.1", 29500)};
    memset(id.secret, 0x11, sizeof id.secret);
    memcpy(idbuf, &id, sizeof id);
    seed("fuzz_unique_id", "id-v4", idbuf, sizeof idbuf, NULL, 0);
    memset(&id.root, 0, sizeof id.root);
    id.root.sin6.sin6_family = AF_INET6;
    id.root.sin6.sin6_port = htons(29500);
    id.root.sin6.sin6_addr.s6_addr[15] = 1;
    id.root_in_rank0 = 1;
    memcpy(idbuf, &id, sizeof id);
    seed("fuzz_unique_id", "id-v6-comm-id", idbuf, sizeof idbuf, NULL, 0);
    seed("fuzz_unique_id", "text-v4", "127.0.0.1:29500", 15, NULL, 0);
    seed("fuzz_unique_id", "text-v6", "[fe80::1]:80", 12, NULL, 0);
    seed("fuzz_unique_id", "text-name", "node-17.cluster:65535", 21, NULL, 0);

    /* bootstrap hello: the target's fixed secret is 0x5a bytes */
    bs_hello_t h = {.magic = BS_MAGIC, .version = BS_VERSION, .rank = 2, .nranks = 4, .info = peer(2)};
    memset(h.secret, 0x5a, sizeof h.secret);
    seed("fuzz_bs_hello", "hello", &h, sizeof h, NULL, 0);
    seed("fuzz_bs_hello", "truncated", &h, sizeof h / 2, NULL, 0);
    h.secret[7] ^= 1;
    seed("fuzz_bs_hello", "wrong-secret", &h, sizeof h, NULL, 0);
    h.secret[7] ^= 1;
    h.nranks = BS_MAX_RANKS + 1;
    seed("fuzz_bs_hello", "huge-nranks", &h, sizeof h, NULL, 0);

    /* shrink: a survivor's rejoin request, the leader's reply */
    bs_rejoin_req_t rq = {.magic = BS_MAGIC, .version = BS_VERSION, .kind = BS_KIND_REJOIN, .rank = 3, .tag = 0x99};
    memset(rq.secret, 0x5a, sizeof rq.secret);
    seed("fuzz_bs_rejoin", "request", &rq, sizeof rq, NULL, 0);
    bs_rejoin_reply_t rp = {.magic = BS_MAGIC, .status = 0};
    memcpy(rp.id.internal, idbuf, sizeof rp.id.internal);
    seed("fuzz_bs_rejoin", "reply", &rp, sizeof rp, NULL, 0);

    /* root's table: expected-count byte (n - 1), header, entries */
    for (int n = 1; n <= 3; n++) {
        unsigned char buf[1 + sizeof(bs_table_hdr_t) + 3 * sizeof(bs_peer_t)];
        bs_table_hdr_t t = {BS_MAGIC, n};
        buf[0] = (unsigned char)(n - 1);
        memcpy(buf + 1, &t, sizeof t);
        for (int r = 0; r < n; r++) {
            bs_peer_t p = peer(r);
            memcpy(buf + 1 + sizeof t + (size_t)r * sizeof p, &p, sizeof p);
        }
        char name[32];
        snprintf(name, sizeof name, "table-%d", n);
        seed("fuzz_bs_table", name, buf, 1 + sizeof t + (size_t)n * sizeof(bs_peer_t), NULL, 0);
    }

    /* allgather header: expected seq and size, then the header */
    struct __attribute__((packed)) {
        uint32_t seq;
        uint64_t size;
    } want = {3, 128};
    bs_ring_hdr_t rh = {BS_RING_MAGIC, 3, 128};
    seed("fuzz_bs_ring_hdr", "match", &want, sizeof want, &rh, sizeof rh);
    rh.size = 96;
    seed("fuzz_bs_ring_hdr", "size-differs", &want, sizeof want, &rh, sizeof rh);

    /* net hello: nranks - 1, self, comm id, hello */
    struct __attribute__((packed)) {
        uint8_t nranks_m1, self;
        uint64_t comm_id;
    } nh_want = {3, 0, 0x0123456789abcdefull};
    net_hello_t nh = {NET_HELLO_MAGIC, 0x0123456789abcdefull, 1, 4};
    seed("fuzz_net_hello", "hello", &nh_want, sizeof nh_want, &nh, sizeof nh);
    nh.rank = 0;
    seed("fuzz_net_hello", "self", &nh_want, sizeof nh_want, &nh, sizeof nh);

    /* socket plugin: hello, message header, handle */
    uint64_t listen_id = 0xfeedfacecafebeefull;
    net_sock_hello_t sh = {NET_SOCK_HELLO_MAGIC, NET_SOCK_WIRE_VERSION, listen_id, 0x77, 3, 4, 1};
    seed("fuzz_net_sock_hello", "hello", &listen_id, sizeof listen_id, &sh, sizeof sh);
    sh.index = 4;
    seed("fuzz_net_sock_hello", "index-out-of-range", &listen_id, sizeof listen_id, &sh, sizeof sh);
    struct __attribute__((packed)) {
        uint64_t seq, cap;
        uint32_t tag;
    } mw = {5, 65536, 5};
    net_sock_msg_hdr_t mh = {NET_SOCK_MSG_MAGIC, 5, 5, 65536};
    seed("fuzz_net_sock_msg", "fits", &mw, sizeof mw, &mh, sizeof mh);
    mh.size = 65537;
    seed("fuzz_net_sock_msg", "oversized", &mw, sizeof mw, &mh, sizeof mh);
    unsigned char handle[CCL_NET_HANDLE_MAXSIZE] = {0};
    net_sock_handle_t nsh = {.magic = NET_SOCK_HANDLE_MAGIC, .version = NET_SOCK_WIRE_VERSION, .rank = 1,
                             .listen_id = listen_id, .addr = v4("10.0.0.2", 41000)};
    memcpy(handle, &nsh, sizeof nsh);
    seed("fuzz_net_sock_handle", "handle", handle, sizeof handle, NULL, 0);

    /* shm names (with their NUL) */
    const char *fifo = "/ccl-0123456789abcdef0123456789abcdef", *board = "/ccl-b0123456789abcdef0123456789abcdef";
    seed("fuzz_shm_name", "fifo", fifo, strlen(fifo) + 1, NULL, 0);
    seed("fuzz_shm_name", "board", board, strlen(board) + 1, NULL, 0);
    seed("fuzz_shm_name", "path", "/ccl-../../etc/passwd", 22, NULL, 0);
    return 0;
}
