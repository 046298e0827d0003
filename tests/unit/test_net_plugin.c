/*
 * test_net_plugin.c - choosing and loading net plugins (src/transport/
 * net_plugin.c) against the ABI of include/ccl_net.h.
 *
 * CCL_NET_PLUGIN=example loads tests/plugins/net_example.c built as
 * libccl-net-example.so (main re-executes the test with the plugin folder in
 * LD_LIBRARY_PATH, which dlopen reads only at startup), is shared by
 * net_plugin_get, and a message goes through it, a failure's message
 * arriving through net_plugin_error; a path works too; a plugin whose struct
 * says version 2, one that only exports ccl_net_plugin_v2 and a missing
 * library are refused with messages saying why; "" and "socket" are the
 * built-in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/wait.h"
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

static void run_one_message(net_plugin_t *p)
{
    const ccl_net_v1_t *n = p->net;
    char handle[CCL_NET_HANDLE_MAXSIZE];
    void *l = NULL, *s = NULL, *r = NULL, *sr = NULL, *rr = NULL;
    assert_int_equal(n->listen(0, 0, handle, &l), CCL_SUCCESS);
    uint64_t deadline = clock_now_ns() + 10 * SEC;
    while (!s || !r) {
        if (!s)
            assert_int_equal(n->connect(0, 1, handle, &s), CCL_SUCCESS);
        if (!r)
            assert_int_equal(n->accept(l, &r), CCL_SUCCESS);
        assert_true(clock_now_ns() < deadline);
    }
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
    assert_true(contains(err_message(), "declares version 2"));
    assert_true(contains(err_message(), "libccl-net-badversion.so"));
    assert_int_equal(net_plugin_open("onlyv2", &p), CCL_ERR_INVALID_USAGE);
    assert_true(contains(err_message(), "ABI version 2"));
    assert_true(contains(err_message(), "ccl_net_plugin_v1"));
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

int main(int argc, char **argv)
{
    (void)argc;
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
    setenv("CCL_NET_PLUGIN", "example", 1);
    alarm(120); /* a hang is a failure */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plugin_from_env),
        cmocka_unit_test(test_plugin_by_path),
        cmocka_unit_test(test_plugin_refused),
        cmocka_unit_test(test_plugin_builtin_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
