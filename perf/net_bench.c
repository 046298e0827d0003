/*
 * net_bench.c - throughput of a net plugin between two processes, against
 * one plain TCP stream measured in the same run.
 *
 * The target for the net transport is allgather busbw of at least
 * 80% of a single TCP stream, so the reference is measured here between the
 * same two processes and interfaces, alternating with the plugin round by
 * round so both see the same machine state. One direction: the client
 * sends, the server receives, and a round's time runs from the client's
 * first send to the server's acknowledgement that every byte arrived. Each
 * round also reports the CPU time both processes spent per GB: on a shared
 * host the rates swing with other load, the CPU cost much less.
 *
 *   net-bench                          both ends on this host (fork)
 *   net-bench -s [-p PORT]             server: waits for one client
 *   net-bench -c HOST:PORT [options]   client: runs the rounds, prints
 *
 * Options (client or local): -b / -e / -f sizes of one message (first, last,
 * multiplication factor; K/M/G suffixes), -t bytes per round, -w messages
 * in flight, -r rounds, -n sockets per thread and -T helper threads (the
 * socket plugin's CCL_NSOCKS_PERTHREAD / CCL_SOCKET_NTHREADS, applied to
 * both ends), -P plugin (CCL_NET_PLUGIN; ib for the InfiniBand/RoCE one;
 * buffers are registered once, as ccl registers its FIFOs). Interfaces follow
 * CCL_SOCKET_IFNAME, for the plugin and the TCP stream alike.
 *
 * A side waiting for its requests calls test() a few times back to back,
 * then yields, then sleeps -S microseconds (default 20) between tests, as a
 * progress thread would on a host with more threads than cores (the
 * client passes -S to the server).
 */
#include "bench_size.h"
#include "bootstrap/socket.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/param.h"
#include "base/wait.h"
#include "transport/net_plugin.h"
#include "transport/net_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NB_MAX_SIZES 32
#define NB_MAX_ROUNDS 64
#define NB_MAX_WINDOW 32
#define NB_TIMEOUT_NS (120ull * 1000000000ull)

typedef struct {
    uint64_t sizes[NB_MAX_SIZES];
    uint32_t nsizes;
    uint32_t rounds;
    uint32_t window;
    int32_t nsocks;   /* -1: the param */
    int32_t nthreads;
    uint64_t total;   /* bytes per round */
    uint32_t sleep_us; /* -S, for both ends */
    char plugin[64];
} nb_config_t;

/* Server to client after the control connection is up. */
typedef struct {
    char handle[CCL_NET_HANDLE_MAXSIZE];
    sock_addr_t tcp;
} nb_setup_t;

typedef struct {
    int ctl;              /* control socket */
    int tcp;              /* the reference stream */
    net_plugin_t *plugin;
    void *comm;           /* send comm (client) or recv comm (server) */
    void *listen;
    char *buf;            /* window x largest size */
    size_t buf_len;
    void *mh;             /* buf registered on comm (RDMA plugins need it) */
} nb_side_t;

static void nb_die(const char *what)
{
    fprintf(stderr, "net-bench: %s: %s\n", what, err_message()[0] ? err_message() : strerror(errno));
    exit(1);
}

#define NB_CHECK(call, what)               \
    do {                                   \
        if ((call) != CCL_SUCCESS)         \
            nb_die(what);                  \
    } while (0)

static uint64_t nb_deadline(void) { return clock_now_ns() + NB_TIMEOUT_NS; }

/* Microseconds a waiting side sleeps between tests once spinning and
 * yielding did not help (-S); 0 never sleeps. */
static unsigned nb_sleep_us = 20;

/* Waits for one request as a progress thread would: test() in a loop, a
 * few tries back to back, then yielding, then short sleeps. */
static void nb_wait(const ccl_net_v2_t *n, void *req)
{
    int done = 0;
    uint64_t deadline = nb_deadline();
    for (unsigned tries = 0; !done; tries++) {
        if (n->test(req, &done, NULL) != CCL_SUCCESS)
            nb_die("test");
        if (done || tries < 16)
            continue;
        if (tries < 64 || nb_sleep_us == 0)
            sched_yield();
        else
            usleep(nb_sleep_us);
        if ((tries & 255) == 255 && clock_now_ns() > deadline)
            nb_die("timed out waiting for a request");
    }
}

/* Moves `total` bytes in messages of `size`, `window` at a time. */
static void nb_plugin_round(nb_side_t *s, int is_send, size_t size, uint64_t total, int window)
{
    const ccl_net_v2_t *n = s->plugin->net;
    uint64_t count = (total + size - 1) / size;
    void *req[NB_MAX_WINDOW];
    uint64_t posted = 0, done = 0;
    while (done < count) {
        while (posted < count && posted - done < (uint64_t)window) {
            char *b = s->buf + (posted % (uint64_t)window) * size;
            void **r = &req[posted % (uint64_t)window];
            *r = NULL;
            uint64_t deadline = nb_deadline();
            while (!*r) {
                uint32_t tag = (uint32_t)posted;
                ccl_result_t rc = is_send ? n->isend(s->comm, b, size, tag, s->mh, r)
                                          : n->irecv(s->comm, 1, (void **)&b, &size, &tag, &s->mh, r);
                if (rc != CCL_SUCCESS)
                    nb_die(is_send ? "isend" : "irecv");
                if (!*r && clock_now_ns() > deadline)
                    nb_die("the plugin took no request for too long");
            }
            posted++;
        }
        nb_wait(n, req[done % (uint64_t)window]);
        done++;
    }
}

/* The reference: one blocking TCP socket, plain send() / recv() of each
 * message, as iperf does; the kernel's own buffering and wakeups only. */
static void nb_tcp_round(nb_side_t *s, int is_send, size_t size, uint64_t total, int window)
{
    uint64_t left = total;
    for (uint64_t i = 0; left > 0; i++) {
        size_t len = left < size ? (size_t)left : size;
        char *b = s->buf + (i % (uint64_t)window) * size;
        for (size_t off = 0; off < len;) {
            ssize_t n = is_send ? send(s->tcp, b + off, len - off, MSG_NOSIGNAL)
                                : recv(s->tcp, b + off, len - off, MSG_WAITALL);
            if (n <= 0 && !(n < 0 && errno == EINTR))
                nb_die(n == 0 ? "tcp stream closed" : "tcp stream");
            off += n > 0 ? (size_t)n : 0;
        }
        left -= len;
    }
}

static void nb_blocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        nb_die("fcntl");
}

/* CPU seconds this process (all threads) has used. */
static double nb_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* One round from the client; *gbs gets GB/s (1e9 bytes per second) and
 * *cpu the CPU seconds both ends spent per GB, a figure that other load on
 * the host disturbs far less than the rate. */
static void nb_client_round(nb_side_t *s, int kind, size_t size, const nb_config_t *cfg, double *gbs, double *cpu)
{
    char go = (char)kind;
    double server_cpu = 0;
    NB_CHECK(sock_send_all(s->ctl, &go, 1, nb_deadline()), "control");
    double c0 = nb_cpu_s();
    uint64_t t0 = clock_now_ns();
    if (kind == 0)
        nb_plugin_round(s, 1, size, cfg->total, (int)cfg->window);
    else
        nb_tcp_round(s, 1, size, cfg->total, (int)cfg->window);
    NB_CHECK(sock_recv_all(s->ctl, &server_cpu, sizeof server_cpu, nb_deadline()), "control");
    uint64_t t1 = clock_now_ns();
    *gbs = (double)cfg->total / (double)(t1 - t0);
    *cpu = (nb_cpu_s() - c0 + server_cpu) / ((double)cfg->total / 1e9);
}

static int nb_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double nb_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, nb_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static size_t nb_max_size(const nb_config_t *cfg)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < cfg->nsizes; i++)
        m = cfg->sizes[i] > m ? cfg->sizes[i] : m;
    return (size_t)m;
}

static void nb_open_plugin(nb_side_t *s, const nb_config_t *cfg)
{
    net_socket_set_layout(cfg->nsocks, cfg->nthreads);
    NB_CHECK(net_plugin_open(cfg->plugin[0] ? cfg->plugin : NULL, &s->plugin), "loading the net plugin");
    if (s->plugin->ndev < 1) {
        fprintf(stderr, "net-bench: the net plugin has no device\n");
        exit(1);
    }
    s->buf_len = (size_t)cfg->window * nb_max_size(cfg);
    s->buf = malloc(s->buf_len);
    if (!s->buf)
        nb_die("malloc");
    memset(s->buf, 0x5a, (size_t)cfg->window * nb_max_size(cfg));
}

static void nb_server(int lfd)
{
    nb_side_t s = {.ctl = -1, .tcp = -1};
    nb_config_t cfg;
    NB_CHECK(sock_accept(lfd, clock_now_ns() + 3600ull * 1000000000ull, &s.ctl), "waiting for the client");
    NB_CHECK(sock_recv_all(s.ctl, &cfg, sizeof cfg, nb_deadline()), "control");
    cfg.plugin[sizeof cfg.plugin - 1] = '\0';
    nb_sleep_us = cfg.sleep_us;
    if (cfg.nsizes > NB_MAX_SIZES || cfg.window > NB_MAX_WINDOW || cfg.window < 1)
        nb_die("bad configuration from the client");
    nb_open_plugin(&s, &cfg);
    const ccl_net_v2_t *n = s.plugin->net;

    nb_setup_t setup;
    memset(&setup, 0, sizeof setup);
    NB_CHECK(n->listen(0, 0, setup.handle, &s.listen), "listen");
    sock_addr_t local;
    char ifname[SOCK_IFNAME_LEN];
    int tl = -1;
    NB_CHECK(sock_pick_local_addr(&local, ifname, sizeof ifname), "picking an interface");
    NB_CHECK(sock_listen(&local, &tl, &setup.tcp), "listen (tcp)");
    NB_CHECK(sock_send_all(s.ctl, &setup, sizeof setup, nb_deadline()), "control");
    uint64_t deadline = nb_deadline();
    while (!s.comm) {
        NB_CHECK(n->accept(s.listen, &s.comm), "accept");
        if (!s.comm && clock_now_ns() > deadline)
            nb_die("no connection from the client");
    }
    NB_CHECK(n->reg_mr(s.comm, s.buf, s.buf_len, CCL_NET_PTR_HOST, &s.mh), "reg_mr");
    NB_CHECK(sock_accept(tl, nb_deadline(), &s.tcp), "accept (tcp)");
    nb_blocking(s.tcp);
    sock_close(&tl);
    /* One byte per round names it: 0 plugin, 1 tcp, 2 done. */
    for (;;) {
        char kind = 2, size_idx = 0;
        NB_CHECK(sock_recv_all(s.ctl, &size_idx, 1, clock_now_ns() + 3600ull * 1000000000ull), "control");
        if (size_idx < 0 || (uint32_t)size_idx >= cfg.nsizes)
            break;
        NB_CHECK(sock_recv_all(s.ctl, &kind, 1, nb_deadline()), "control");
        size_t size = (size_t)cfg.sizes[(int)size_idx];
        double c0 = nb_cpu_s();
        if (kind == 0)
            nb_plugin_round(&s, 0, size, cfg.total, (int)cfg.window);
        else
            nb_tcp_round(&s, 0, size, cfg.total, (int)cfg.window);
        double used = nb_cpu_s() - c0; /* the acknowledgement */
        NB_CHECK(sock_send_all(s.ctl, &used, sizeof used, nb_deadline()), "control");
    }
    NB_CHECK(n->dereg_mr(s.comm, s.mh), "dereg_mr");
    n->close_recv(s.comm);
    n->close_listen(s.listen);
    net_plugin_close(s.plugin);
    sock_close(&s.tcp);
    sock_close(&s.ctl);
    free(s.buf);
}

static void nb_client(const sock_addr_t *server, nb_config_t *cfg)
{
    nb_side_t s = {.ctl = -1, .tcp = -1};
    NB_CHECK(sock_connect(server, nb_deadline(), &s.ctl), "connecting to the server");
    NB_CHECK(sock_send_all(s.ctl, cfg, sizeof *cfg, nb_deadline()), "control");
    nb_open_plugin(&s, cfg);
    const ccl_net_v2_t *n = s.plugin->net;
    nb_setup_t setup;
    NB_CHECK(sock_recv_all(s.ctl, &setup, sizeof setup, nb_deadline()), "control");
    uint64_t deadline = nb_deadline();
    while (!s.comm) {
        NB_CHECK(n->connect(0, 1, setup.handle, &s.comm), "connect");
        if (!s.comm && clock_now_ns() > deadline)
            nb_die("connect did not complete");
    }
    NB_CHECK(n->reg_mr(s.comm, s.buf, s.buf_len, CCL_NET_PTR_HOST, &s.mh), "reg_mr");
    NB_CHECK(sock_connect(&setup.tcp, nb_deadline(), &s.tcp), "connect (tcp)");
    nb_blocking(s.tcp);

    char a[80];
    ccl_net_props_t props;
    NB_CHECK(n->get_properties(0, &props), "get_properties");
    printf("# net-bench: plugin %s on %s (%d Mbps) to %s", n->name, props.name, props.speed_mbps,
           sock_addr_str(&setup.tcp, a, sizeof a));
    if (!strcmp(n->name, "socket"))
        printf(", CCL_NSOCKS_PERTHREAD=%lld CCL_SOCKET_NTHREADS=%lld",
               cfg->nsocks >= 0 ? (long long)cfg->nsocks : (long long)param_int(PARAM_NSOCKS_PERTHREAD),
               cfg->nthreads >= 0 ? (long long)cfg->nthreads : (long long)param_int(PARAM_SOCKET_NTHREADS));
    printf("\n# %.0f MiB per round, %u messages in flight, %u rounds alternating plugin / one TCP stream;\n"
           "# medians and maxima in GB/s (1e9 B/s); ratio = plugin / tcp medians; cpu = CPU seconds of both ends per GB\n",
           (double)cfg->total / (1 << 20), cfg->window, cfg->rounds);
    printf("# %10s %10s %10s %10s %10s %7s %11s %11s\n", "msg bytes", "plugin med", "plugin max", "tcp med",
           "tcp max", "ratio", "plugin cpu", "tcp cpu");
    for (uint32_t i = 0; i < cfg->nsizes; i++) {
        double pr[NB_MAX_ROUNDS], tr[NB_MAX_ROUNDS], pc[NB_MAX_ROUNDS], tc[NB_MAX_ROUNDS], pmax = 0, tmax = 0;
        for (uint32_t r = 0; r < cfg->rounds; r++) {
            char idx = (char)i;
            /* Alternate which goes first, so neither always runs warm. */
            for (int k = 0; k < 2; k++) {
                int kind = (int)((r + (uint32_t)k) & 1);
                NB_CHECK(sock_send_all(s.ctl, &idx, 1, nb_deadline()), "control");
                nb_client_round(&s, kind, (size_t)cfg->sizes[i], cfg, kind == 0 ? &pr[r] : &tr[r],
                                kind == 0 ? &pc[r] : &tc[r]);
            }
            pmax = pr[r] > pmax ? pr[r] : pmax;
            tmax = tr[r] > tmax ? tr[r] : tmax;
        }
        double pm = nb_median(pr, (int)cfg->rounds), tm = nb_median(tr, (int)cfg->rounds);
        printf("  %10llu %10.4g %10.4g %10.4g %10.4g %6.0f%% %11.3f %11.3f\n", (unsigned long long)cfg->sizes[i], pm,
               pmax, tm, tmax, 100.0 * pm / tm, nb_median(pc, (int)cfg->rounds), nb_median(tc, (int)cfg->rounds));
        fflush(stdout);
    }
    char stop = -1;
    NB_CHECK(sock_send_all(s.ctl, &stop, 1, nb_deadline()), "control");
    NB_CHECK(n->dereg_mr(s.comm, s.mh), "dereg_mr");
    n->close_send(s.comm);
    net_plugin_close(s.plugin);
    sock_close(&s.tcp);
    sock_close(&s.ctl);
    free(s.buf);
}

static void nb_usage(void)
{
    fprintf(stderr,
            "usage: net-bench [-s [-p PORT] | -c HOST:PORT] [-b SIZE] [-e SIZE] [-f FACTOR] [-t BYTES]\n"
            "                 [-w WINDOW] [-r ROUNDS] [-n NSOCKS_PER_THREAD] [-T NTHREADS] [-P PLUGIN] [-S SLEEP_US]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    nb_config_t cfg = {.rounds = 5, .window = 8, .nsocks = -1, .nthreads = -1, .total = 1ull << 30, .sleep_us = 20};
    size_t first = 128 * 1024, last = 4 * 1024 * 1024, factor = 4;
    int server = 0, port = 0, opt;
    const char *connect_to = NULL;
    while ((opt = getopt(argc, argv, "sp:c:b:e:f:t:w:r:n:T:P:S:h")) != -1) {
        size_t v = 0;
        switch (opt) {
        case 's': server = 1; break;
        case 'p': port = atoi(optarg); break;
        case 'c': connect_to = optarg; break;
        case 'b': if (bench_parse_size(optarg, &first, 0)) nb_usage(); break;
        case 'e': if (bench_parse_size(optarg, &last, 0)) nb_usage(); break;
        case 'f': factor = (size_t)atoi(optarg); break;
        case 't': if (bench_parse_size(optarg, &v, 0)) nb_usage(); cfg.total = v; break;
        case 'w': cfg.window = (uint32_t)atoi(optarg); break;
        case 'r': cfg.rounds = (uint32_t)atoi(optarg); break;
        case 'n': cfg.nsocks = atoi(optarg); break;
        case 'T': cfg.nthreads = atoi(optarg); break;
        case 'P': snprintf(cfg.plugin, sizeof cfg.plugin, "%s", optarg); break;
        case 'S': cfg.sleep_us = (uint32_t)atoi(optarg); break;
        default: nb_usage();
        }
    }
    if (cfg.window < 1 || cfg.window > NB_MAX_WINDOW || cfg.rounds < 1 || cfg.rounds > NB_MAX_ROUNDS ||
        factor < 2 || first > last)
        nb_usage();
    for (size_t sz = first; sz <= last && cfg.nsizes < NB_MAX_SIZES; sz *= factor)
        cfg.sizes[cfg.nsizes++] = sz;
    signal(SIGPIPE, SIG_IGN);
    nb_sleep_us = cfg.sleep_us;

    if (connect_to) {
        sock_addr_t a;
        NB_CHECK(sock_addr_parse(connect_to, &a), "server address");
        nb_client(&a, &cfg);
        return 0;
    }
    /* Server, or both ends here: the control listener on every address. */
    sock_addr_t any;
    memset(&any, 0, sizeof any);
    any.sin.sin_family = AF_INET;
    any.sin.sin_port = htons((uint16_t)port);
    int lfd = -1;
    sock_addr_t bound;
    NB_CHECK(sock_listen(&any, &lfd, &bound), "control listen");
    if (server) {
        printf("net-bench: server waiting on port %u\n", ntohs(bound.sin.sin_port));
        fflush(stdout);
        nb_server(lfd);
        return 0;
    }
    pid_t pid = fork();
    if (pid < 0)
        nb_die("fork");
    if (pid == 0) {
        nb_server(lfd);
        _exit(0);
    }
    sock_close(&lfd);
    sock_addr_t local;
    NB_CHECK(sock_addr_parse("127.0.0.1:1", &local), "address");
    local.sin.sin_port = bound.sin.sin_port;
    nb_client(&local, &cfg);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
