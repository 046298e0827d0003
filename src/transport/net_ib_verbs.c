/*
 * net_ib_verbs.c - dlopen() of libibverbs for the ib net plugin (why at
 * run time: net_ib_verbs.h). Loaded once per process and never unloaded:
 * providers keep threads and handlers of their own, and a dlclose under
 * them is what rdma-core's documentation warns against.
 */
#include "transport/net_ib_verbs.h"

#if CCL_HAVE_IBVERBS
#include "base/err.h"
#include "base/param.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define IB_VERBS_DEFAULT_LIB "libibverbs.so.1"

static pthread_mutex_t ib_verbs_lock = PTHREAD_MUTEX_INITIALIZER;
static ib_verbs_t ib_verbs_table;
static int ib_verbs_state; /* 0 not tried, 1 loaded, -1 failed (ib_verbs_why) */
static char ib_verbs_why[512];

/* dlsym into a function pointer of any type without a cast per line. */
#define IB_SYM(lib, field, name, required)                                              \
    do {                                                                               \
        *(void **)&ib_verbs_table.field = dlsym(lib, name);                            \
        if (!ib_verbs_table.field && (required)) {                                     \
            snprintf(ib_verbs_why, sizeof ib_verbs_why, "%s has no %s", path, name);   \
            return -1;                                                                 \
        }                                                                              \
    } while (0)

static int ib_verbs_resolve(void *lib, const char *path)
{
    IB_SYM(lib, get_device_list, "ibv_get_device_list", 1);
    IB_SYM(lib, free_device_list, "ibv_free_device_list", 1);
    IB_SYM(lib, get_device_name, "ibv_get_device_name", 1);
    IB_SYM(lib, open_device, "ibv_open_device", 1);
    IB_SYM(lib, close_device, "ibv_close_device", 1);
    IB_SYM(lib, query_device, "ibv_query_device", 1);
    IB_SYM(lib, query_port, "ibv_query_port", 1);
    IB_SYM(lib, query_gid, "ibv_query_gid", 1);
    IB_SYM(lib, query_gid_ex, "_ibv_query_gid_ex", 0);
    IB_SYM(lib, alloc_pd, "ibv_alloc_pd", 1);
    IB_SYM(lib, dealloc_pd, "ibv_dealloc_pd", 1);
    IB_SYM(lib, reg_mr, "ibv_reg_mr", 1);
    IB_SYM(lib, dereg_mr, "ibv_dereg_mr", 1);
    IB_SYM(lib, create_cq, "ibv_create_cq", 1);
    IB_SYM(lib, destroy_cq, "ibv_destroy_cq", 1);
    IB_SYM(lib, create_qp, "ibv_create_qp", 1);
    IB_SYM(lib, modify_qp, "ibv_modify_qp", 1);
    IB_SYM(lib, destroy_qp, "ibv_destroy_qp", 1);
    IB_SYM(lib, get_async_event, "ibv_get_async_event", 1);
    IB_SYM(lib, ack_async_event, "ibv_ack_async_event", 1);
    IB_SYM(lib, wc_status_str, "ibv_wc_status_str", 1);
    IB_SYM(lib, event_type_str, "ibv_event_type_str", 1);
    IB_SYM(lib, port_state_str, "ibv_port_state_str", 1);
    return 0;
}

ccl_result_t ib_verbs_load(const ib_verbs_t **out)
{
    pthread_mutex_lock(&ib_verbs_lock);
    if (ib_verbs_state == 0) {
        const char *path = param_str(PARAM_IBVERBS_LIB);
        if (!path[0])
            path = IB_VERBS_DEFAULT_LIB;
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            snprintf(ib_verbs_why, sizeof ib_verbs_why, "cannot load %s (rdma-core's libibverbs1%s): %s", path,
                     param_str(PARAM_IBVERBS_LIB)[0] ? ", CCL_IBVERBS_LIB" : "", dlerror());
            ib_verbs_state = -1;
        } else if (ib_verbs_resolve(lib, path) != 0) {
            dlclose(lib);
            ib_verbs_state = -1;
        } else {
            ib_verbs_state = 1;
        }
    }
    int state = ib_verbs_state;
    pthread_mutex_unlock(&ib_verbs_lock);
    *out = state == 1 ? &ib_verbs_table : NULL;
    return state == 1 ? CCL_SUCCESS : err_set(CCL_ERR_UNSUPPORTED, "net/ib: %s", ib_verbs_why);
}
#endif
