/*
 * test_net_plugin.c - choosing and loading net plugins (src/transport/
 * net_plugin.c) against the ABI of include/ccl_net.h.
 *
 * CCL_NET_PLUGIN=example loads tests/plugins/net_example.c built as
 * libccl-net-example.so, a version 1 plugin (main re-executes the test with
 * the plugin folder in LD_LIBRARY_PATH, which dlopen reads only at startup),
 * is shared by net_plugin_get, and a message goes through it, a failure's
 * message arriving through net_plugin_error; a path works too; a plugin
 * whose struct says version 3, one that only exports ccl_net_plugin_v3 and
 * a missing library are refused with messages saying why; "" and "socket"
 * are the built-in.
 *
 * Version 2's capabilities: the example built as v2 (libccl-net-example2.so)
 * rings ccl's doorbell through the activity callback, reports inline
 * progress and gives a descriptor that poll() sees ready once a message
 * waits; the built-in socket plugin reports inline progress and poll
 * descriptors only without helper threads, and its helpers ring the
 * doorbell. Finally the socket plugin built as libccl-net-socket.so carries
 * a real job: 4 forked ranks on two fake hosts (CCL_HOSTID, 2+2), with
 * CCL_NET_PLUGIN naming the .so, run checked collectives over it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/wait.h"
#include "test_common.h"
#include "test_launch.h"
#include "transport/net_bell.h"
#include "transport/net_plugin.h"
#include "transport/net_socket.h"

#define SEC 1000000000ull

static char plugin_dir[PATH_MAX];

static int contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle)) {
        print_error("message \"%s\" lacks \"%s\"\n", hay, needle);
        return 0;
    }
    return 1;
}

/* A connected pair through plugin n: *s sends, *r receives. */
static void connect_pair(const ccl_net_v2_t *n, void **l, void **s, void **r)
{
    char handle[CCL_NET_HANDLE_MAXSIZE];
    *l = *s = *r = NULL;
    assert_int_equal(n->listen(0, 0, handle, l), CCL_SUCCESS);
    uint64_t deadline = clock_now_ns() + 10 * SEC;
    while (!*s || !*r) {
        if (!*s)
            assert_int_equal(n->connect(0, 1, handle, s), CCL_SUCCESS);
        if (!*r)
            assert_int_equal(n->accept(*l, r), CCL_SUCCESS);
        assert_true(clock_now_ns() < deadline);
    }
}

static void run_one_message(net_plugin_t *p)
{
    const ccl_net_v2_t *n = p->net;
    void *l = NULL, *s = NULL, *r = NULL, *sr = NULL, *rr = NULL;
    connect_pair(n, &l, &s, &r);
    char msg[] = "through a plugin", in[64] = {0};
    void *dptr = in;
    size_t cap = sizeof in, got = 0;
    uint32_t tag = 3;
    assert_int_equal(n->isend(s, msg, sizeof msg, 3, NULL, &sr), CCL_SUCCESS);
    assert_int_equal(n->irecv(r, 1, &dptr, &cap, &tag, NULL, &rr), CCL_SUCCESS);
    int done = 0;
    while (!done)
        assert_int_equal(n->test(rr, &done, &got), CCL_SUCCESS);
    done = 0;
    while (!done)
        assert_int_equal(n->test(sr, &done, NULL), CCL_SUCCESS);
    assert_int_equal(got, sizeof msg);
    assert_string_equal(in, msg);
    /* A failure's message comes through net_plugin_error. */
    tag = 4;
    assert_int_equal(n->isend(s, msg, sizeof msg, 3, NULL, &sr), CCL_SUCCESS);
    done = 0;
    while (!done)
        assert_int_equal(n->test(sr, &done, NULL), CCL_SUCCESS);
    assert_int_equal(n->irecv(r, 1, &dptr, &cap, &tag, NULL, &rr), CCL_SUCCESS);
    ccl_result_t rc = CCL_SUCCESS;
    done = 0;
    while (rc == CCL_SUCCESS && !done)
        rc = n->test(rr, &done, &got);
    assert_int_equal(rc, CCL_ERR_REMOTE);
    assert_int_equal(net_plugin_error(p, rc), CCL_ERR_REMOTE);
    assert_true(contains(err_message(), "tag"));
    assert_int_equal(n->close_send(s), CCL_SUCCESS);
    assert_int_equal(n->close_recv(r), CCL_SUCCESS);
    assert_int_equal(n->close_listen(l), CCL_SUCCESS);
}

/* main() set CCL_NET_PLUGIN=example and the library path. */
static void test_plugin_from_env(void **state)
{
    (void)state;
    net_plugin_t *p = NULL;
    assert_int_equal(net_plugin_get(&p), CCL_SUCCESS);
    assert_non_null(p->dl);
    assert_string_equal(p->net->name, "example");
    assert_string_equal(p->name, "example");
    assert_int_equal(p->ndev, 1);
    /* A v1 plugin: driven as v2, without any optional capability. */
    assert_non_null(p->v1);
    assert_int_equal(p->net->version, 1);
    assert_int_equal(p->net->caps, 0);
    assert_null(p->net->progress);
    assert_null(p->net->pollfds);
    net_plugin_t *again = NULL;
    assert_int_equal(net_plugin_get(&again), CCL_SUCCESS);
    assert_ptr_equal(again, p); /* shared by every comm */
    net_plugin_put(again);
    run_one_message(p);
    assert_true(contains(err_message(), "net plugin example: "));
    net_plugin_put(p);
}

static void test_plugin_by_path(void **state)
{
    (void)state;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/libccl-net-example.so", plugin_dir);
    net_plugin_t *p = NULL;
    assert_int_equal(net_plugin_open(path, &p), CCL_SUCCESS);
    assert_string_equal(p->net->name, "example");
    run_one_message(p);
    net_plugin_close(p);
}

static void test_plugin_refused(void **state)
{
    (void)state;
    net_plugin_t *p = NULL;
    assert_int_equal(net_plugin_open("badversion", &p), CCL_ERR_INVALID_USAGE);
    assert_null(p);
    assert_true(contains(err_message(), "declares version 3"));
    assert_true(contains(err_message(), "libccl-net-badversion.so"));
    assert_int_equal(net_plugin_open("onlyv3", &p), CCL_ERR_INVALID_USAGE);
    assert_true(contains(err_message(), "ABI version 3"));
    assert_true(contains(err_message(), "ccl_net_plugin_v1"));
    assert_true(contains(err_message(), "ccl_net_plugin_v2"));
    assert_int_equal(net_plugin_open("nosuchplugin", &p), CCL_ERR_SYSTEM);
    assert_true(contains(err_message(), "CCL_NET_PLUGIN=nosuchplugin"));
    assert_true(contains(err_message(), "libccl-net-nosuchplugin.so"));
    assert_null(p);
}

static void test_plugin_builtin_names(void **state)
{
    (void)state;
    const char *names[] = {"", "socket"};
    for (int i = 0; i < 2; i++) {
        net_plugin_t *p = NULL;
        assert_int_equal(net_plugin_open(names[i], &p), CCL_SUCCESS);
        assert_ptr_equal(p->net, &net_socket_plugin);
        assert_null(p->dl);
        assert_string_equal(p->net->name, "socket");
        net_plugin_close(p);
    }
}

/* Whether fd is readable now. */
static int readable(int fd)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

static void test_plugin_v2_capabilities(void **state)
{
    (void)state;
    net_plugin_t *p = NULL;
    assert_int_equal(net_plugin_open("example2", &p), CCL_SUCCESS);
    const ccl_net_v2_t *n = p->net;
    assert_null(p->v1);
    assert_int_equal(n->version, CCL_NET_ABI_VERSION);
    assert_true(n->caps & CCL_NET_CAP_ACTIVITY);
    run_one_message(p);
    void *l, *s, *r, *sr = NULL, *rr = NULL;
    connect_pair(n, &l, &s, &r);
    int inline_io = 0;
    assert_int_equal(n->progress(r, &inline_io), CCL_SUCCESS);
    assert_int_equal(inline_io, 1);
    struct pollfd pfds[CCL_NET_MAX_POLLFDS];
    assert_int_equal(n->pollfds(r, pfds, CCL_NET_MAX_POLLFDS), 1);
    assert_false(readable(pfds[0].fd));
    uint32_t rung = net_activity_count();
    char msg[] = "v2", in[8];
    void *dptr = in;
    size_t cap = sizeof in, got = 0;
    uint32_t tag = 0;
    assert_int_equal(n->isend(s, msg, sizeof msg, 0, NULL, &sr), CCL_SUCCESS);
    assert_true(net_activity_count() != rung); /* the activity callback is ccl's doorbell */
    assert_true(readable(pfds[0].fd));
    assert_int_equal(n->irecv(r, 1, &dptr, &cap, &tag, NULL, &rr), CCL_SUCCESS);
    int done = 0;
    assert_int_equal(n->test(rr, &done, &got), CCL_SUCCESS);
    assert_int_equal(done, 1);
    assert_string_equal(in, msg);
    assert_false(readable(pfds[0].fd));
    assert_int_equal(n->test(sr, &done, NULL), CCL_SUCCESS);
    n->close_send(s);
    n->close_recv(r);
    n->close_listen(l);
    net_plugin_close(p);
}

/* The built-in plugin's capabilities, with and without helper threads. */
static void test_socket_v2_capabilities(void **state)
{
    (void)state;
    net_plugin_t *p = NULL;
    assert_int_equal(net_plugin_open("socket", &p), CCL_SUCCESS);
    const ccl_net_v2_t *n = p->net;
    assert_true(n->caps & CCL_NET_CAP_ACTIVITY);
    assert_true(n->caps & CCL_NET_CAP_DUPLEX);
    assert_non_null(n->progress);
    assert_non_null(n->pollfds);
    for (int helpers = 0; helpers < 2; helpers++) {
        net_socket_set_layout(2, helpers);
        void *l, *s, *r, *sr = NULL, *rr = NULL;
        connect_pair(n, &l, &s, &r);
        int inline_io = -1;
        assert_int_equal(n->progress(s, &inline_io), CCL_SUCCESS);
        assert_int_equal(inline_io, !helpers);
        char in[64] = {0}, msg[] = "capabilities";
        void *dptr = in;
        size_t cap = sizeof in, got = 0;
        uint32_t tag = 7;
        assert_int_equal(n->irecv(r, 1, &dptr, &cap, &tag, NULL, &rr), CCL_SUCCESS);
        struct pollfd pfds[CCL_NET_MAX_POLLFDS];
        /* Inline: the receive waits on its lead socket's data, and on the
         * keepalive socket's error. */
        int nfds = n->pollfds(r, pfds, CCL_NET_MAX_POLLFDS);
        assert_int_equal(nfds, helpers ? 0 : 2);
        if (nfds) {
            assert_int_equal(pfds[0].events, POLLIN);
            assert_int_equal(pfds[1].events, POLLIN);
        }
        uint32_t rung = net_activity_count();
        assert_int_equal(n->isend(s, msg, sizeof msg, 7, NULL, &sr), CCL_SUCCESS);
        if (nfds)
            assert_int_equal(poll(pfds, (nfds_t)nfds, 10000), 1);
        int done = 0;
        uint64_t deadline = clock_now_ns() + 10 * SEC;
        while (!done) {
            assert_int_equal(n->test(rr, &done, &got), CCL_SUCCESS);
            assert_true(clock_now_ns() < deadline);
        }
        assert_string_equal(in, msg);
        /* A helper finished the receive, so it rings; it publishes the
         * completion before it rings, so test() may see done first. */
        while (helpers && net_activity_count() == rung) {
            assert_true(clock_now_ns() < deadline);
            sched_yield();
        }
        done = 0;
        while (!done)
            assert_int_equal(n->test(sr, &done, NULL), CCL_SUCCESS);
        n->close_send(s);
        n->close_recv(r);
        n->close_listen(l);
    }
    net_socket_set_layout(-1, -1);
    net_plugin_close(p);
}

#define SO_COUNT 70000 /* beyond one slot: several messages per call */

/* One rank of the libccl-net-socket.so job: ranks 0,1 on one fake host,
 * 2,3 on another, so that ranks 0 and 2 (and 1 and 3) talk over the .so. */
static int so_rank(tst_ctx_t *ctx, void *arg)
{
    (void)arg;
    char host[32];
    snprintf(host, sizeof host, "fake-so-node%d", ctx->rank / 2);
    setenv("CCL_HOSTID", host, 1); /* read at the first ccl call */
    ccl_comm_t comm = tst_comm_init(ctx);
    float *buf = calloc(SO_COUNT * 4, sizeof *buf);
    if (!buf)
        tst_fatal(ctx, "out of memory");
    for (int size = 1; size <= SO_COUNT; size *= 7) {
        tst_set_case(ctx, "allreduce of %d floats", size);
        for (int i = 0; i < size; i++)
            buf[i] = (float)(ctx->rank + 1 + i % 3);
        TST_CCL(ctx, comm, ccl_allreduce(buf, buf, (size_t)size, CCL_FLOAT32, CCL_SUM, comm, NULL));
        for (int i = 0; i < size; i++)
            if (buf[i] != (float)(10 + 4 * (i % 3))) {
                tst_fail(ctx, "allreduce of %d: element %d is %g", size, i, (double)buf[i]);
                break;
            }
    }
    tst_set_case(ctx, "allgather");
    float *mine = buf + (size_t)ctx->rank * SO_COUNT; /* in place */
    for (int i = 0; i < SO_COUNT; i++)
        mine[i] = (float)(ctx->rank * 1000 + i % 1000);
    TST_CCL(ctx, comm, ccl_allgather(mine, buf, SO_COUNT, CCL_FLOAT32, comm, NULL));
    for (int q = 0; q < 4; q++)
        for (int i = 0; i < SO_COUNT; i++)
            if (buf[(size_t)q * SO_COUNT + i] != (float)(q * 1000 + i % 1000)) {
                tst_fail(ctx, "allgather: rank %d's element %d is wrong", q, i);
                q = 4;
                break;
            }
    /* The collectives went through net connections (their executor rang
     * the proxies' doorbell), and the plugin is the .so, not the built-in
     * table. */
    if (net_activity_count() == 0)
        tst_fail(ctx, "no net connection was used");
    net_plugin_t *p = NULL;
    if (net_plugin_get(&p) != CCL_SUCCESS || !p->dl || strcmp(p->net->name, "socket") != 0 ||
        p->net == &net_socket_plugin)
        tst_fail(ctx, "the net plugin is not libccl-net-socket.so");
    net_plugin_put(p);
    tst_comm_destroy(ctx, comm);
    free(buf);
    return 0;
}

/* Runs so_rank in a fresh process of this test (main's "--so-ranks"): the
 * parameters, CCL_NET_PLUGIN among them, are read once per process. */
static void test_socket_so_fake_nodes(void **state)
{
    (void)state;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(len > 0);
    exe[len] = '\0';
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl(exe, exe, "--so-ranks", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
    /* The example plugins are in <build>/tests/net-plugins; dlopen reads
     * LD_LIBRARY_PATH only at startup, so set it and start again. */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 1;
    exe[n] = '\0';
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", exe);
    snprintf(plugin_dir, sizeof plugin_dir, "%s/net-plugins", dirname(dirname(tmp)));
    const char *llp = getenv("LD_LIBRARY_PATH");
    if (!llp || !strstr(llp, plugin_dir)) {
        char val[2 * PATH_MAX + 2];
        snprintf(val, sizeof val, "%s%s%s", plugin_dir, llp && llp[0] ? ":" : "", llp ? llp : "");
        setenv("LD_LIBRARY_PATH", val, 1);
        execv(exe, argv);
        perror("execv");
        return 1;
    }
    /* Before the first ccl call: the param table is read once. */
    setenv("CCL_DEBUG", "NONE", 0);
    if (argc > 1 && strcmp(argv[1], "--so-ranks") == 0) {
        char so[PATH_MAX + 32];
        snprintf(so, sizeof so, "%s/libccl-net-socket.so", plugin_dir);
        setenv("CCL_NET_PLUGIN", so, 1);
        return tst_run_ranks("libccl-net-socket.so on 2+2 fake nodes", 4, 120, so_rank, NULL);
    }
    setenv("CCL_NET_PLUGIN", "example", 1);
    alarm(180); /* a hang is a failure */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plugin_from_env),
        cmocka_unit_test(test_plugin_by_path),
        cmocka_unit_test(test_plugin_refused),
        cmocka_unit_test(test_plugin_builtin_names),
        cmocka_unit_test(test_plugin_v2_capabilities),
        cmocka_unit_test(test_socket_v2_capabilities),
        cmocka_unit_test(test_socket_so_fake_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
