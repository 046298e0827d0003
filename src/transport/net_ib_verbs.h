/*
 * net_ib_verbs.h - libibverbs, loaded at run time for the ib net plugin.
 *
 * libccl must run on machines without rdma-core, so it never links
 * libibverbs: ib_verbs_load() dlopen()s libibverbs.so.1 (CCL_IBVERBS_LIB
 * overrides the path) and resolves the functions the plugin calls into a
 * table. The types come from rdma-core's headers at build time
 * (libibverbs-dev); where they are missing the plugin is built without
 * verbs (CCL_HAVE_IBVERBS 0) and says so when asked for. Posting work
 * requests and polling completions are inline functions of verbs.h that
 * call through the provider's ops in the context, so they need no symbol.
 */
#ifndef CCL_TRANSPORT_NET_IB_VERBS_H
#define CCL_TRANSPORT_NET_IB_VERBS_H

#include "ccl.h"

#if defined(__has_include)
#if __has_include(<infiniband/verbs.h>)
#define CCL_HAVE_IBVERBS 1
#endif
#endif
#ifndef CCL_HAVE_IBVERBS
#define CCL_HAVE_IBVERBS 0
#endif

#if CCL_HAVE_IBVERBS
#include <infiniband/verbs.h>

typedef struct {
    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *dev);
    struct ibv_context *(*open_device)(struct ibv_device *dev);
    int (*close_device)(struct ibv_context *ctx);
    int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
    /* The exported symbol fills the old prefix of ibv_port_attr (through
     * link_layer), which is all the plugin reads. */
    int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
    /* NULL in rdma-core older than v32: the GID type then comes from sysfs. */
    int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index, struct ibv_gid_entry *entry,
                        uint32_t flags, size_t entry_size);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
                                int comp_vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(struct ibv_qp *qp);
    int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *event);
    void (*ack_async_event)(struct ibv_async_event *event);
    const char *(*wc_status_str)(enum ibv_wc_status status);
    const char *(*event_type_str)(enum ibv_event_type type);
    const char *(*port_state_str)(enum ibv_port_state state);
} ib_verbs_t;

/* The process-wide table, loaded once (thread-safe); CCL_ERR_UNSUPPORTED
 * with the reason when libibverbs cannot be loaded. */
ccl_result_t ib_verbs_load(const ib_verbs_t **out);
#endif

/* Why this build has no verbs, for the message of CCL_NET=ib. */
#define IB_VERBS_MISSING "this libccl was built without rdma-core's headers (install libibverbs-dev and rebuild)"

#endif
