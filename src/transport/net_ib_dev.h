/*
 * net_ib_dev.h - the ib net plugin's devices: which ports it uses
 * (CCL_IB_HCA), which GID on RoCE, and the queue-pair attributes that
 * follow from both ends' link layers.
 *
 * The choices are pure functions over plain tables, so that the unit tests
 * check them for link layers and GID tables these machines do not have
 * (native InfiniBand, several NICs); ib_dev_discover() feeds them from
 * libibverbs (and sysfs where verbs do not say a GID's type).
 */
#ifndef CCL_TRANSPORT_NET_IB_DEV_H
#define CCL_TRANSPORT_NET_IB_DEV_H

#include "transport/net_ib_verbs.h"

#include <stddef.h>
#include <stdint.h>

/* ---- CCL_IB_HCA --------------------------------------------------------- */

#define IB_HCA_MAX_SPECS 32
#define IB_NAME_LEN 64

typedef struct {
    char name[IB_NAME_LEN];
    int port; /* 0: every port */
} ib_hca_spec_t;

typedef struct {
    int exclude; /* leading ^: the list names ports not to use */
    int exact;   /* leading =: names match whole, not as prefixes */
    int n;       /* 0: no filter, every port */
    ib_hca_spec_t spec[IB_HCA_MAX_SPECS];
} ib_hca_filter_t;

/* Parses NCCL's syntax, e.g. "mlx5_0:1,mlx5_1", "^mlx5_3", "=mlx5_1:2";
 * CCL_ERR_INVALID_ARGUMENT naming the bad entry. */
ccl_result_t ib_hca_filter_parse(const char *text, ib_hca_filter_t *f);
/* Whether port `port` of device `dev` passes the filter. */
int ib_hca_filter_match(const ib_hca_filter_t *f, const char *dev, int port);

/* ---- GIDs --------------------------------------------------------------- */

enum { IB_GID_TYPE_IB = 0, IB_GID_TYPE_ROCE_V1 = 1, IB_GID_TYPE_ROCE_V2 = 2 };

typedef struct {
    uint8_t raw[16];
    int type; /* IB_GID_TYPE_* */
} ib_gid_cand_t;

/* The index of the GID to use on a RoCE port from its table (n entries,
 * index = position): non-zero entries only; of the address family
 * (AF_INET: IPv4-mapped ::ffff:a.b.c.d, AF_INET6: the others) when one
 * exists; then RoCE v2 before v1; then the lowest index. -1 when the table
 * has no usable entry. */
int ib_gid_pick(const ib_gid_cand_t *c, int n, int family);
/* Parses CCL_IB_ADDR_FAMILY: AF_INET or AF_INET6 (-1 otherwise). */
int ib_addr_family_parse(const char *text);
/* "::ffff:10.77.0.1" style text of a GID. */
const char *ib_gid_str(const uint8_t raw[16], char *buf, size_t len);
/* The GID type from sysfs's gid_attrs/types text ("RoCE v2", "IB/RoCE v1"). */
int ib_gid_type_from_sysfs(const char *text);

#if CCL_HAVE_IBVERBS
/* ---- queue pairs -------------------------------------------------------- */

/* One end of a connection as the other end needs it to address it. */
typedef struct {
    int link_layer; /* IBV_LINK_LAYER_* */
    uint16_t lid;
    uint8_t gid[16];
    int gid_index;
    int mtu;        /* enum ibv_mtu */
    uint32_t psn;
} ib_end_t;

typedef struct {
    int tc, sl, timeout, retry_cnt;
} ib_qp_params_t;

/* The ready-to-receive attributes for a QP on port `port` of `local`
 * talking to QP `remote_qpn` of `remote`: path MTU the smaller of both,
 * an address with a global route header (GID, traffic class) on RoCE, or
 * by LID and service level on InfiniBand. */
void ib_qp_rtr_attr(const ib_end_t *local, const ib_end_t *remote, uint32_t remote_qpn, int port,
                    const ib_qp_params_t *p, struct ibv_qp_attr *a, int *mask);
/* The ready-to-send attributes (timeout, retries, our PSN). */
void ib_qp_rts_attr(const ib_end_t *local, const ib_qp_params_t *p, struct ibv_qp_attr *a, int *mask);

/* ---- devices ------------------------------------------------------------ */

#define IB_MAX_DEVS 16

/* One usable port: a device of the plugin. */
typedef struct {
    char name[IB_NAME_LEN + 8]; /* "mlx5_0:1" */
    char devname[IB_NAME_LEN];
    int port;
    struct ibv_context *ctx;    /* shared by the ports of one device; owner closes it */
    int ctx_owner;
    struct ibv_pd *pd;
    ib_end_t end;               /* psn 0 here; each QP draws its own */
    int gid_type;
    int speed_mbps;
    char pci_path[256];
    uint64_t guid;
    int max_qp_wr;
} ib_dev_t;

/* Finds the usable ports (active, passing CCL_IB_HCA, a GID per
 * CCL_IB_GID_INDEX / CCL_IB_ADDR_FAMILY on RoCE) and opens them. *ndev may
 * be 0 with why saying why; an error only for bad settings or a failing
 * verbs call. */
ccl_result_t ib_dev_discover(const ib_verbs_t *v, ib_dev_t *devs, int max, int *ndev, char *why, size_t whylen);
void ib_dev_close_all(const ib_verbs_t *v, ib_dev_t *devs, int ndev);
#endif

#endif
