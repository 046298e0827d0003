/*
 * net_plugin.c - loads the network plugin CCL_NET_PLUGIN names, or hands out
 * the built-in TCP one, and checks a loaded one against the ABI before any
 * of its functions runs (what the rules are: net_plugin.h, ccl_net.h).
 */
#include "transport/net_plugin.h"
#include "base/err.h"
#include "base/log.h"
#include "base/param.h"
#include "transport/net_bell.h"
#include "transport/net_ib.h" /* the built-in ib plugin */
#include "transport/net_socket.h" /* the built-in table: the only use of it outside the plugin */
#include "transport/net_socket_io.h" /* and its fault hook */

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* When neither symbol is there, newer ones up to this version are looked
 * for, to tell "built for another ccl" from "not a plugin". */
#define NET_PLUGIN_MAX_PROBED_VERSION 16

static pthread_mutex_t net_plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static net_plugin_t *net_plugin_shared;
static int net_plugin_refs;

/* The log function plugins get: their lines go where ccl's go. */
static void net_plugin_log(int level, const char *file, int line, const char *fmt, ...)
{
    if (level < LOG_WARN)
        level = LOG_WARN;
    if (level > LOG_TRACE)
        level = LOG_TRACE;
    if (!log_enabled((log_level_t)level, SUB_ALL))
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    log_write((log_level_t)level, SUB_ALL, file ? file : "plugin", line, "%s", buf);
}

/* The first NULL required function of a plugin struct (v1 and v2 name
 * them alike), or NULL if all are set. */
#define NET_PLUGIN_MISSING_FN(T)                                                       \
    static const char *net_plugin_missing_##T(const T *n)                              \
    {                                                                                  \
        const void *fns[] = {n->name, (const void *)n->init, (const void *)n->devices,  \
            (const void *)n->get_properties, (const void *)n->listen,                   \
            (const void *)n->connect, (const void *)n->accept, (const void *)n->reg_mr, \
            (const void *)n->dereg_mr, (const void *)n->isend, (const void *)n->irecv,  \
            (const void *)n->test, (const void *)n->close_send,                         \
            (const void *)n->close_recv, (const void *)n->close_listen,                 \
            (const void *)n->finalize, (const void *)n->last_error};                    \
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)                         \
            if (!fns[i])                                                                \
                return net_plugin_fn_names[i];                                          \
        return NULL;                                                                    \
    }
static const char *const net_plugin_fn_names[] = {
    "name", "init", "devices", "get_properties", "listen", "connect", "accept", "reg_mr", "dereg_mr",
    "isend", "irecv", "test", "close_send", "close_recv", "close_listen", "finalize", "last_error"};
NET_PLUGIN_MISSING_FN(ccl_net_v1_t)
NET_PLUGIN_MISSING_FN(ccl_net_v2_t)

/* What ccl gives v2 plugins: its log and its doorbell. */
static const ccl_net_callbacks_t net_plugin_callbacks = {
    .size = sizeof(ccl_net_callbacks_t), .log = net_plugin_log, .activity = net_bell_ring_soft};

/* A v1 plugin driven as v2: the same functions, no capability (init is
 * called through p->v1, with the log alone). */
static void net_plugin_adapt_v1(net_plugin_t *p, const ccl_net_v1_t *n)
{
    p->v1 = n;
    p->v1_as_v2 = (ccl_net_v2_t){
        .version = CCL_NET_ABI_VERSION_V1, .name = n->name, .devices = n->devices,
        .get_properties = n->get_properties, .listen = n->listen, .connect = n->connect, .accept = n->accept,
        .reg_mr = n->reg_mr, .dereg_mr = n->dereg_mr, .isend = n->isend, .irecv = n->irecv, .test = n->test,
        .close_send = n->close_send, .close_recv = n->close_recv, .close_listen = n->close_listen,
        .finalize = n->finalize, .last_error = n->last_error};
    p->net = &p->v1_as_v2;
}

/* Checks a found struct: its version field and its required functions. */
static ccl_result_t net_plugin_check(const net_plugin_t *p, const char *lib, const char *sym, uint32_t version,
                                     int want, const char *missing)
{
    if (version != (uint32_t)want)
        return err_set(CCL_ERR_INVALID_USAGE, "CCL_NET_PLUGIN=%s: %s in %s declares version %u, this ccl reads "
                       "version %d there", p->name, sym, lib, version, want);
    if (missing)
        return err_set(CCL_ERR_INVALID_USAGE, "CCL_NET_PLUGIN=%s: %s in %s leaves %s NULL", p->name, sym, lib,
                       missing);
    return CCL_SUCCESS;
}

static ccl_result_t net_plugin_load(net_plugin_t *p)
{
    char lib[sizeof p->name + 32], sym[64];
    if (strchr(p->name, '/'))
        snprintf(lib, sizeof lib, "%s", p->name);
    else
        snprintf(lib, sizeof lib, "%s%s.so", CCL_NET_PLUGIN_LIB_PREFIX, p->name);
    p->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl)
        return err_set(CCL_ERR_SYSTEM, "CCL_NET_PLUGIN=%s: cannot load %s: %s", p->name, lib, dlerror());
    const ccl_net_v2_t *n2 = dlsym(p->dl, CCL_NET_PLUGIN_SYMBOL);
    if (n2) {
        ccl_result_t res = net_plugin_check(p, lib, CCL_NET_PLUGIN_SYMBOL, n2->version, CCL_NET_ABI_VERSION,
                                            net_plugin_missing_ccl_net_v2_t(n2));
        if (res == CCL_SUCCESS)
            p->net = n2;
        return res;
    }
    const ccl_net_v1_t *n1 = dlsym(p->dl, CCL_NET_PLUGIN_SYMBOL_V1);
    if (n1) {
        ccl_result_t res = net_plugin_check(p, lib, CCL_NET_PLUGIN_SYMBOL_V1, n1->version, CCL_NET_ABI_VERSION_V1,
                                            net_plugin_missing_ccl_net_v1_t(n1));
        if (res == CCL_SUCCESS)
            net_plugin_adapt_v1(p, n1);
        return res;
    }
    for (int v = NET_PLUGIN_MAX_PROBED_VERSION; v > CCL_NET_ABI_VERSION; v--) {
        snprintf(sym, sizeof sym, "ccl_net_plugin_v%d", v);
        if (dlsym(p->dl, sym))
            return err_set(CCL_ERR_INVALID_USAGE,
                           "CCL_NET_PLUGIN=%s: %s exports %s but neither %s nor %s: it was built for net plugin "
                           "ABI version %d, this ccl speaks versions %d and %d",
                           p->name, lib, sym, CCL_NET_PLUGIN_SYMBOL, CCL_NET_PLUGIN_SYMBOL_V1, v,
                           CCL_NET_ABI_VERSION_V1, CCL_NET_ABI_VERSION);
    }
    return err_set(CCL_ERR_INVALID_USAGE, "CCL_NET_PLUGIN=%s: %s exports neither %s nor %s (not a ccl net plugin?)",
                   p->name, lib, CCL_NET_PLUGIN_SYMBOL, CCL_NET_PLUGIN_SYMBOL_V1);
}

ccl_result_t net_plugin_error(const net_plugin_t *p, ccl_result_t code)
{
    if (code == CCL_SUCCESS || !p->dl)
        return code;
    const char *msg = p->net->last_error();
    if ((unsigned)code >= CCL_NUM_RESULTS)
        return err_set(CCL_ERR_INTERNAL, "net plugin %s returned %d, not a ccl_result_t: %s", p->net->name,
                       (int)code, msg && msg[0] ? msg : "(no message)");
    return err_set(code, "net plugin %s: %s", p->net->name, msg && msg[0] ? msg : ccl_get_error_string(code));
}

/* Initialises p->net (set already) and counts its devices. */
static ccl_result_t net_plugin_start(net_plugin_t *p, int *inited)
{
    ccl_result_t res = net_plugin_error(p, p->v1 ? p->v1->init(net_plugin_log) : p->net->init(&net_plugin_callbacks));
    if (res != CCL_SUCCESS) {
        err_prefix("%s=%s: init failed: ", p->dl ? "CCL_NET_PLUGIN" : "CCL_NET", p->name);
        return res;
    }
    *inited = 1;
    return net_plugin_error(p, p->net->devices(&p->ndev));
}

/* CCL_NET: a built-in transport by name, or (empty) ib where it has an
 * active port, else socket. why: what decided, for the INFO line. */
static ccl_result_t net_plugin_builtin(net_plugin_t *p, int *inited, char *why, size_t whylen)
{
    ccl_result_t res = CCL_SUCCESS;
    const char *want = param_str(PARAM_NET);
    if (strcmp(want, "ucx") == 0)
        return err_set(CCL_ERR_UNSUPPORTED, "CCL_NET=ucx: this ccl has no ucx transport yet; use ib or socket");
    if (want[0] && strcmp(want, "ib") != 0 && strcmp(want, "socket") != 0)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "CCL_NET=%s: not ib, socket or ucx", want);
    if (strcmp(want, "socket") != 0) {
        snprintf(p->name, sizeof p->name, "ib");
        p->net = &net_ib_plugin;
        CCL_TRY(net_plugin_start(p, inited));
        if (p->ndev > 0) {
            snprintf(why, whylen, "%s%s", want[0] ? "CCL_NET=ib: " : "automatic: ", net_ib_why());
            return CCL_SUCCESS;
        }
        if (want[0])
            CCL_FAIL(CCL_ERR_UNSUPPORTED, "CCL_NET=ib: no usable InfiniBand/RoCE port: %s", net_ib_why());
        snprintf(why, whylen, "automatic: no ib port (%s)", net_ib_why());
        p->net->finalize();
        *inited = 0;
    } else {
        snprintf(why, whylen, "CCL_NET=socket");
    }
    snprintf(p->name, sizeof p->name, "socket");
    p->net = &net_socket_plugin;
    CCL_TRY(net_plugin_start(p, inited));
out:
    return res;
}

ccl_result_t net_plugin_open(const char *name, net_plugin_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    int inited = 0;
    char why[320] = "";
    *out = NULL;
    net_plugin_t *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    if (!name)
        name = param_str(PARAM_NET_PLUGIN);
    snprintf(p->name, sizeof p->name, "%s", name);
    if (!name[0]) {
        CCL_TRY(net_plugin_builtin(p, &inited, why, sizeof why));
    } else {
        if (strcmp(p->name, "socket") == 0)
            p->net = &net_socket_plugin;
        else if (strcmp(p->name, "ib") == 0)
            p->net = &net_ib_plugin;
        else
            CCL_TRY(net_plugin_load(p));
        snprintf(why, sizeof why, "CCL_NET_PLUGIN=%s", p->name);
        CCL_TRY(net_plugin_start(p, &inited));
    }
    LOG_INFO(SUB_INIT, "net: plugin %s (%s), %d device(s)", p->net->name, why, p->ndev);
    *out = p;
    p = NULL;
out:
    if (p) {
        if (inited)
            p->net->finalize();
        if (p->dl)
            dlclose(p->dl);
        free(p);
    }
    return res;
}

void net_plugin_close(net_plugin_t *p)
{
    if (!p)
        return;
    ccl_result_t res = p->net->finalize();
    if (res != CCL_SUCCESS)
        net_plugin_error(p, res); /* logged; nothing left to undo */
    if (p->dl)
        dlclose(p->dl);
    free(p);
}

ccl_result_t net_plugin_get(net_plugin_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    pthread_mutex_lock(&net_plugin_lock);
    if (!net_plugin_shared)
        res = net_plugin_open(NULL, &net_plugin_shared);
    if (res == CCL_SUCCESS)
        net_plugin_refs++;
    *out = net_plugin_shared;
    pthread_mutex_unlock(&net_plugin_lock);
    return res;
}

void net_plugin_put(net_plugin_t *p)
{
    pthread_mutex_lock(&net_plugin_lock);
    if (p && p == net_plugin_shared && --net_plugin_refs == 0) {
        net_plugin_close(net_plugin_shared);
        net_plugin_shared = NULL;
    }
    pthread_mutex_unlock(&net_plugin_lock);
}

int net_plugin_fault_corrupt(const net_plugin_t *plugin)
{
    if (plugin->net != &net_socket_plugin)
        return 0;
    net_sock_io_fault_corrupt();
    return 1;
}
