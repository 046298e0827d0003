/*
 * net_plugin.c - loads the network plugin CCL_NET_PLUGIN names, or hands out
 * the built-in TCP one, and checks a loaded one against the ABI before any
 * of its functions runs (what the rules are: net_plugin.h, ccl_net.h).
 */
#include "transport/net_plugin.h"
#include "base/err.h"
#include "base/log.h"
#include "base/param.h"
#include "transport/net_socket.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* When ccl_net_plugin_v1 is missing, newer symbols up to this version are
 * looked for, to tell "built for another ccl" from "not a plugin". */
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

/* The first NULL function of a plugin struct, or NULL if all are set. */
static const char *net_plugin_missing_fn(const ccl_net_v1_t *n)
{
#define NET_PLUGIN_NEED(f) \
    if (!n->f)             \
        return #f;
    NET_PLUGIN_NEED(name)
    NET_PLUGIN_NEED(init)
    NET_PLUGIN_NEED(devices)
    NET_PLUGIN_NEED(get_properties)
    NET_PLUGIN_NEED(listen)
    NET_PLUGIN_NEED(connect)
    NET_PLUGIN_NEED(accept)
    NET_PLUGIN_NEED(reg_mr)
    NET_PLUGIN_NEED(dereg_mr)
    NET_PLUGIN_NEED(isend)
    NET_PLUGIN_NEED(irecv)
    NET_PLUGIN_NEED(test)
    NET_PLUGIN_NEED(close_send)
    NET_PLUGIN_NEED(close_recv)
    NET_PLUGIN_NEED(close_listen)
    NET_PLUGIN_NEED(finalize)
    NET_PLUGIN_NEED(last_error)
#undef NET_PLUGIN_NEED
    return NULL;
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
    const ccl_net_v1_t *n = dlsym(p->dl, CCL_NET_PLUGIN_SYMBOL);
    if (!n) {
        for (int v = NET_PLUGIN_MAX_PROBED_VERSION; v >= 2; v--) {
            snprintf(sym, sizeof sym, "ccl_net_plugin_v%d", v);
            if (dlsym(p->dl, sym))
                return err_set(CCL_ERR_INVALID_USAGE,
                               "CCL_NET_PLUGIN=%s: %s exports %s but not %s: it was built for net plugin "
                               "ABI version %d, this ccl speaks version %d",
                               p->name, lib, sym, CCL_NET_PLUGIN_SYMBOL, v, CCL_NET_ABI_VERSION);
        }
        return err_set(CCL_ERR_INVALID_USAGE, "CCL_NET_PLUGIN=%s: %s does not export %s (not a ccl net plugin?)",
                       p->name, lib, CCL_NET_PLUGIN_SYMBOL);
    }
    if (n->version != CCL_NET_ABI_VERSION)
        return err_set(CCL_ERR_INVALID_USAGE,
                       "CCL_NET_PLUGIN=%s: %s in %s declares version %u, this ccl speaks version %d",
                       p->name, CCL_NET_PLUGIN_SYMBOL, lib, n->version, CCL_NET_ABI_VERSION);
    const char *missing = net_plugin_missing_fn(n);
    if (missing)
        return err_set(CCL_ERR_INVALID_USAGE, "CCL_NET_PLUGIN=%s: %s in %s leaves %s NULL", p->name,
                       CCL_NET_PLUGIN_SYMBOL, lib, missing);
    p->net = n;
    return CCL_SUCCESS;
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

ccl_result_t net_plugin_open(const char *name, net_plugin_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    int inited = 0;
    *out = NULL;
    net_plugin_t *p = calloc(1, sizeof *p);
    if (!p)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    if (!name)
        name = param_str(PARAM_NET_PLUGIN);
    snprintf(p->name, sizeof p->name, "%s", name[0] ? name : "socket");
    if (strcmp(p->name, "socket") == 0)
        p->net = &net_socket_plugin;
    else
        CCL_TRY(net_plugin_load(p));
    res = net_plugin_error(p, p->net->init(net_plugin_log));
    if (res != CCL_SUCCESS) {
        err_prefix("CCL_NET_PLUGIN=%s: init failed: ", p->name);
        goto out;
    }
    inited = 1;
    CCL_TRY(net_plugin_error(p, p->net->devices(&p->ndev)));
    LOG_INFO(SUB_INIT, "net: plugin %s (CCL_NET_PLUGIN=%s), %d device(s)", p->net->name, p->name, p->ndev);
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
