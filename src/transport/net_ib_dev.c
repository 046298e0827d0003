/*
 * net_ib_dev.c - the ib plugin's port selection, GID choice and QP
 * attributes (pure functions, unit-tested), and the discovery that feeds
 * them from libibverbs (see net_ib_dev.h).
 */
#include "transport/net_ib_dev.h"
#include "base/err.h"
#include "base/log.h"
#include "base/param.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

ccl_result_t ib_hca_filter_parse(const char *text, ib_hca_filter_t *f)
{
    memset(f, 0, sizeof *f);
    const char *s = text ? text : "";
    while (*s == ' ')
        s++;
    if (*s == '^') {
        f->exclude = 1;
        s++;
    }
    if (*s == '=') {
        f->exact = 1;
        s++;
    }
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == 0) {
            s += end ? 1 : 0;
            if (!end)
                break;
            continue;
        }
        if (f->n == IB_HCA_MAX_SPECS)
            return err_set(CCL_ERR_INVALID_ARGUMENT, "CCL_IB_HCA=%s: more than %d entries", text, IB_HCA_MAX_SPECS);
        ib_hca_spec_t *sp = &f->spec[f->n];
        const char *colon = memchr(s, ':', len);
        size_t nlen = colon ? (size_t)(colon - s) : len;
        if (nlen == 0 || nlen >= sizeof sp->name)
            return err_set(CCL_ERR_INVALID_ARGUMENT, "CCL_IB_HCA=%s: entry '%.*s' has %s device name", text, (int)len,
                           s, nlen ? "too long a" : "no");
        memcpy(sp->name, s, nlen);
        sp->name[nlen] = '\0';
        sp->port = 0;
        if (colon) {
            char num[16];
            size_t plen = len - nlen - 1;
            char *pend;
            if (plen == 0 || plen >= sizeof num)
                return err_set(CCL_ERR_INVALID_ARGUMENT, "CCL_IB_HCA=%s: entry '%.*s' has a bad port", text, (int)len, s);
            memcpy(num, colon + 1, plen);
            num[plen] = '\0';
            long port = strtol(num, &pend, 10);
            if (*pend || port < 1 || port > 255)
                return err_set(CCL_ERR_INVALID_ARGUMENT, "CCL_IB_HCA=%s: entry '%.*s': port '%s' is not 1..255", text,
                               (int)len, s, num);
            sp->port = (int)port;
        }
        f->n++;
        s += len + (end ? 1 : 0);
    }
    if ((f->exclude || f->exact) && f->n == 0)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "CCL_IB_HCA=%s: no device after the %s", text,
                       f->exact ? "'='" : "'^'");
    return CCL_SUCCESS;
}

int ib_hca_filter_match(const ib_hca_filter_t *f, const char *dev, int port)
{
    if (f->n == 0)
        return 1;
    int hit = 0;
    for (int i = 0; i < f->n && !hit; i++) {
        const ib_hca_spec_t *sp = &f->spec[i];
        int name_ok = f->exact ? strcmp(dev, sp->name) == 0 : strncmp(dev, sp->name, strlen(sp->name)) == 0;
        hit = name_ok && (sp->port == 0 || sp->port == port);
    }
    return f->exclude ? !hit : hit;
}

static int ib_gid_is_zero(const uint8_t raw[16])
{
    for (int i = 0; i < 16; i++)
        if (raw[i])
            return 0;
    return 1;
}

static int ib_gid_is_v4_mapped(const uint8_t raw[16])
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(raw, prefix, sizeof prefix) == 0;
}

int ib_gid_pick(const ib_gid_cand_t *c, int n, int family)
{
    int have_family = 0;
    for (int i = 0; i < n; i++)
        if (!ib_gid_is_zero(c[i].raw) && ib_gid_is_v4_mapped(c[i].raw) == (family == AF_INET))
            have_family = 1;
    int best = -1, best_score = -1;
    for (int i = 0; i < n; i++) {
        if (ib_gid_is_zero(c[i].raw))
            continue;
        if (have_family && ib_gid_is_v4_mapped(c[i].raw) != (family == AF_INET))
            continue;
        int score = c[i].type == IB_GID_TYPE_ROCE_V2 ? 2 : c[i].type == IB_GID_TYPE_ROCE_V1 ? 1 : 0;
        if (score > best_score) { /* strictly: the lowest index wins ties */
            best = i;
            best_score = score;
        }
    }
    return best;
}

int ib_addr_family_parse(const char *text)
{
    if (strcmp(text, "AF_INET") == 0)
        return AF_INET;
    if (strcmp(text, "AF_INET6") == 0)
        return AF_INET6;
    return -1;
}

const char *ib_gid_str(const uint8_t raw[16], char *buf, size_t len)
{
    if (!inet_ntop(AF_INET6, raw, buf, (socklen_t)len))
        snprintf(buf, len, "?");
    return buf;
}

int ib_gid_type_from_sysfs(const char *text)
{
    if (strncmp(text, "RoCE v2", 7) == 0)
        return IB_GID_TYPE_ROCE_V2;
    if (strncmp(text, "IB/RoCE v1", 10) == 0 || strncmp(text, "RoCE v1", 7) == 0)
        return IB_GID_TYPE_ROCE_V1;
    return IB_GID_TYPE_IB;
}

#if CCL_HAVE_IBVERBS
void ib_qp_rtr_attr(const ib_end_t *local, const ib_end_t *remote, uint32_t remote_qpn, int port,
                    const ib_qp_params_t *p, struct ibv_qp_attr *a, int *mask)
{
    memset(a, 0, sizeof *a);
    a->qp_state = IBV_QPS_RTR;
    a->path_mtu = (enum ibv_mtu)(local->mtu < remote->mtu ? local->mtu : remote->mtu);
    a->dest_qp_num = remote_qpn;
    a->rq_psn = remote->psn;
    a->max_dest_rd_atomic = 1;
    a->min_rnr_timer = 12; /* 0.64 ms: a receive is reposted as soon as its completion is seen */
    a->ah_attr.port_num = (uint8_t)port;
    a->ah_attr.sl = (uint8_t)p->sl;
    if (local->link_layer == IBV_LINK_LAYER_ETHERNET) {
        /* RoCE has no LIDs: every packet is routed by GID. */
        a->ah_attr.is_global = 1;
        memcpy(a->ah_attr.grh.dgid.raw, remote->gid, 16);
        a->ah_attr.grh.sgid_index = (uint8_t)local->gid_index;
        a->ah_attr.grh.hop_limit = 255;
        a->ah_attr.grh.traffic_class = (uint8_t)p->tc;
    } else {
        a->ah_attr.is_global = 0;
        a->ah_attr.dlid = remote->lid;
    }
    *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

void ib_qp_rts_attr(const ib_end_t *local, const ib_qp_params_t *p, struct ibv_qp_attr *a, int *mask)
{
    memset(a, 0, sizeof *a);
    a->qp_state = IBV_QPS_RTS;
    a->timeout = (uint8_t)p->timeout;
    a->retry_cnt = (uint8_t)p->retry_cnt;
    a->rnr_retry = 7; /* 7: retry for ever; a dead peer is found by the retry count and the side channel */
    a->sq_psn = local->psn;
    a->max_rd_atomic = 1;
    *mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
            IBV_QP_MAX_QP_RD_ATOMIC;
}

/* Port speed in Mbit/s from the verbs enums (per-lane rate x lanes). */
static int ib_port_speed_mbps(int speed, int width)
{
    int lane;
    switch (speed) {
    case 1: lane = 2500; break;
    case 2: lane = 5000; break;
    case 4: case 8: lane = 10000; break;
    case 16: lane = 14000; break;
    case 32: lane = 25000; break;
    case 64: lane = 50000; break;
    case 128: lane = 100000; break;
    case 256: lane = 200000; break;
    default: lane = 10000; break;
    }
    int lanes = width == 1 ? 1 : width == 2 ? 4 : width == 4 ? 8 : width == 8 ? 12 : width == 16 ? 2 : 1;
    return lane * lanes;
}

/* The GID table of a RoCE port, with types (query_gid_ex, else sysfs). */
static int ib_gid_table(const ib_verbs_t *v, const ib_dev_t *d, int len, ib_gid_cand_t *c)
{
    for (int i = 0; i < len; i++) {
        memset(&c[i], 0, sizeof c[i]);
        struct ibv_gid_entry e;
        if (v->query_gid_ex && v->query_gid_ex(d->ctx, (uint32_t)d->port, (uint32_t)i, &e, 0, sizeof e) == 0) {
            memcpy(c[i].raw, e.gid.raw, 16);
            c[i].type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? IB_GID_TYPE_ROCE_V2
                        : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? IB_GID_TYPE_ROCE_V1 : IB_GID_TYPE_IB;
            continue;
        }
        union ibv_gid g;
        if (v->query_gid(d->ctx, (uint8_t)d->port, i, &g) != 0)
            continue; /* an empty entry (query_gid_ex says ENODATA) */
        memcpy(c[i].raw, g.raw, 16);
        char path[256], text[32] = "";
        snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", d->devname, d->port, i);
        FILE *fp = fopen(path, "r");
        if (fp) {
            if (!fgets(text, sizeof text, fp))
                text[0] = '\0';
            fclose(fp);
        }
        c[i].type = ib_gid_type_from_sysfs(text);
    }
    return len;
}

/* Picks the GID of a RoCE port per CCL_IB_GID_INDEX / CCL_IB_ADDR_FAMILY. */
static ccl_result_t ib_dev_pick_gid(const ib_verbs_t *v, ib_dev_t *d, int tbl_len)
{
    ccl_result_t res = CCL_SUCCESS;
    ib_gid_cand_t *c = calloc((size_t)(tbl_len > 0 ? tbl_len : 1), sizeof *c);
    if (!c)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    ib_gid_table(v, d, tbl_len, c);
    int64_t want = param_int(PARAM_IB_GID_INDEX);
    int family = ib_addr_family_parse(param_str(PARAM_IB_ADDR_FAMILY));
    if (family < 0)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "CCL_IB_ADDR_FAMILY=%s: not AF_INET or AF_INET6",
                 param_str(PARAM_IB_ADDR_FAMILY));
    int idx = -1;
    if (want >= 0) {
        if (want >= tbl_len || ib_gid_is_zero(c[want].raw))
            CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "CCL_IB_GID_INDEX=%lld: %s port %d has no GID there (%d entries%s)",
                     (long long)want, d->devname, d->port, tbl_len, want < tbl_len ? ", that one is empty" : "");
        idx = (int)want;
    } else {
        idx = ib_gid_pick(c, tbl_len, family);
        if (idx < 0)
            CCL_FAIL(CCL_ERR_UNSUPPORTED, "%s port %d has no usable GID (%d entries, all empty)", d->devname, d->port,
                     tbl_len);
    }
    d->end.gid_index = idx;
    memcpy(d->end.gid, c[idx].raw, 16);
    d->gid_type = c[idx].type;
out:
    free(c);
    return res;
}

/* Opens port `port` of an open device as d, or says why it is not usable
 * (*usable 0). */
static ccl_result_t ib_dev_open_port(const ib_verbs_t *v, ib_dev_t *d, int *usable, char *why, size_t whylen)
{
    struct ibv_port_attr pa;
    memset(&pa, 0, sizeof pa);
    *usable = 0;
    if (v->query_port(d->ctx, (uint8_t)d->port, &pa) != 0) {
        snprintf(why, whylen, "%s: query_port failed: %s", d->name, strerror(errno));
        return CCL_SUCCESS;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
        snprintf(why, whylen, "%s is %s", d->name, v->port_state_str(pa.state));
        return CCL_SUCCESS;
    }
    if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET &&
        pa.link_layer != IBV_LINK_LAYER_UNSPECIFIED) {
        snprintf(why, whylen, "%s: link layer %d is neither InfiniBand nor Ethernet", d->name, pa.link_layer);
        return CCL_SUCCESS;
    }
    d->end.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
    d->end.lid = pa.lid;
    d->end.mtu = pa.active_mtu;
    d->speed_mbps = ib_port_speed_mbps(pa.active_speed, pa.active_width);
    if (d->end.link_layer == IBV_LINK_LAYER_ETHERNET) {
        ccl_result_t res = ib_dev_pick_gid(v, d, pa.gid_tbl_len);
        if (res != CCL_SUCCESS)
            return res;
    } else {
        union ibv_gid g;
        int64_t want = param_int(PARAM_IB_GID_INDEX);
        d->end.gid_index = want >= 0 ? (int)want : 0;
        if (v->query_gid(d->ctx, (uint8_t)d->port, d->end.gid_index, &g) == 0)
            memcpy(d->end.gid, g.raw, 16);
        d->gid_type = IB_GID_TYPE_IB;
    }
    d->pd = v->alloc_pd(d->ctx);
    if (!d->pd)
        return err_set(CCL_ERR_SYSTEM, "net/ib: %s: cannot allocate a protection domain: %s", d->name, strerror(errno));
    *usable = 1;
    return CCL_SUCCESS;
}

static void ib_dev_fill_ids(ib_dev_t *d, const struct ibv_device_attr *da)
{
    char link[256], real[PATH_MAX];
    snprintf(link, sizeof link, "/sys/class/infiniband/%s/device", d->devname);
    if (realpath(link, real))
        snprintf(d->pci_path, sizeof d->pci_path, "%.255s", real);
    d->guid = da->node_guid;
    d->max_qp_wr = da->max_qp_wr;
}

ccl_result_t ib_dev_discover(const ib_verbs_t *v, ib_dev_t *devs, int max, int *ndev, char *why, size_t whylen)
{
    ccl_result_t res = CCL_SUCCESS;
    ib_hca_filter_t filter;
    int num = 0, n = 0;
    *ndev = 0;
    snprintf(why, whylen, "no RDMA device");
    CCL_TRY(ib_hca_filter_parse(param_str(PARAM_IB_HCA), &filter));
    struct ibv_device **list = v->get_device_list(&num);
    if (!list) {
        snprintf(why, whylen, "ibv_get_device_list failed: %s", strerror(errno));
        return CCL_SUCCESS;
    }
    for (int i = 0; i < num && n < max; i++) {
        const char *name = v->get_device_name(list[i]);
        struct ibv_context *ctx = v->open_device(list[i]);
        if (!ctx) {
            snprintf(why, whylen, "%s: cannot open: %s", name, strerror(errno));
            continue;
        }
        struct ibv_device_attr da;
        int used = 0;
        if (v->query_device(ctx, &da) != 0) {
            snprintf(why, whylen, "%s: query_device failed: %s", name, strerror(errno));
            da.phys_port_cnt = 0;
        }
        for (int port = 1; port <= da.phys_port_cnt && n < max; port++) {
            ib_dev_t *d = &devs[n];
            memset(d, 0, sizeof *d);
            snprintf(d->devname, sizeof d->devname, "%s", name);
            snprintf(d->name, sizeof d->name, "%s:%d", name, port);
            d->port = port;
            d->ctx = ctx;
            if (!ib_hca_filter_match(&filter, name, port)) {
                snprintf(why, whylen, "%s excluded by CCL_IB_HCA=%s", d->name, param_str(PARAM_IB_HCA));
                continue;
            }
            int usable = 0;
            res = ib_dev_open_port(v, d, &usable, why, whylen);
            if (res != CCL_SUCCESS)
                break;
            if (!usable)
                continue;
            ib_dev_fill_ids(d, &da);
            d->ctx_owner = !used;
            used = 1;
            n++;
        }
        if (!used)
            v->close_device(ctx);
        if (res != CCL_SUCCESS)
            break;
    }
    v->free_device_list(list);
    if (res != CCL_SUCCESS) {
        ib_dev_close_all(v, devs, n);
        return res;
    }
    *ndev = n;
    if (n > 0)
        snprintf(why, whylen, "%d active port(s)", n);
out:
    return res;
}

void ib_dev_close_all(const ib_verbs_t *v, ib_dev_t *devs, int ndev)
{
    for (int i = 0; i < ndev; i++)
        if (devs[i].pd)
            v->dealloc_pd(devs[i].pd);
    for (int i = 0; i < ndev; i++)
        if (devs[i].ctx_owner)
            v->close_device(devs[i].ctx);
}
#endif
