/*
 * net_ib_qp.c - the ib plugin's comms: a completion queue, RC queue pairs
 * with their receive work requests posted, the FIFO; the connection info
 * both ends trade, and the queue pairs' way to ready-to-send (the
 * handshake that carries it: net_ib.c).
 */
#include "transport/net_ib.h"
#include "base/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if CCL_HAVE_IBVERBS
int ib_post_recv_wr(ib_comm_t *c, int q)
{
    struct ibv_recv_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = (uint64_t)q;
    return ibv_post_recv(c->qp[q], &wr, &bad);
}

void ib_comm_destroy(ib_comm_t *c)
{
    if (!c)
        return;
    const ib_verbs_t *v = ib_verbs();
    for (int q = 0; q < c->nqps; q++)
        if (c->qp[q])
            v->destroy_qp(c->qp[q]);
    if (c->cq)
        v->destroy_cq(c->cq);
    for (int i = 0; i < IB_NREQ; i++) {
        if (c->req[i].own_mr)
            v->dereg_mr(c->req[i].own_mr);
        ib_mr_cache_put(c->req[i].cached);
    }
    if (c->fifo_mr)
        v->dereg_mr(c->fifo_mr);
    free(c->fifo);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

/* A comm with its CQ, queue pairs (INIT) and FIFO; fd becomes its. */
ccl_result_t ib_comm_create(ib_dev_t *d, int is_send, int nqps, int fd, ib_comm_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    const ib_verbs_t *v = ib_verbs();
    ib_comm_t *c = calloc(1, sizeof *c);
    if (!c)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    c->fd = fd;
    c->is_send = is_send;
    c->dev = d;
    c->nqps = nqps;
    c->peer_rank = -1;
    c->cq = v->create_cq(d->ctx, c->nqps * 2 * IB_NREQ + IB_NREQ + 32, c, NULL, 0);
    if (!c->cq)
        CCL_FAIL(CCL_ERR_SYSTEM, "net/ib: %s: cannot create a completion queue: %s", d->name, strerror(errno));
    if (posix_memalign((void **)&c->fifo, 4096, IB_NREQ * sizeof(ib_fifo_entry_t)) != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    memset(c->fifo, 0, IB_NREQ * sizeof(ib_fifo_entry_t));
    c->fifo_mr = v->reg_mr(d->pd, c->fifo, IB_NREQ * sizeof(ib_fifo_entry_t),
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!c->fifo_mr)
        CCL_FAIL(CCL_ERR_SYSTEM, "net/ib: %s: cannot register the FIFO: %s", d->name, strerror(errno));
    for (int q = 0; q < c->nqps; q++) {
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof ia);
        ia.qp_context = c;
        ia.send_cq = c->cq;
        ia.recv_cq = c->cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = 2 * IB_NREQ;
        ia.cap.max_recv_wr = IB_NREQ;
        ia.cap.max_send_sge = 1;
        ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data = sizeof(ib_fifo_entry_t);
        c->qp[q] = v->create_qp(d->pd, &ia);
        if (!c->qp[q]) { /* some providers have no inline data */
            ia.cap.max_inline_data = 0;
            c->qp[q] = v->create_qp(d->pd, &ia);
        }
        if (!c->qp[q])
            CCL_FAIL(CCL_ERR_SYSTEM, "net/ib: %s: cannot create a queue pair: %s", d->name, strerror(errno));
        c->max_inline = ia.cap.max_inline_data;
        struct ibv_qp_attr a;
        memset(&a, 0, sizeof a);
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = (uint8_t)d->port;
        a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        if (v->modify_qp(c->qp[q], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "net/ib: %s: queue pair to INIT failed: %s", d->name, strerror(errno));
        for (int i = 0; i < IB_NREQ; i++)
            if (ib_post_recv_wr(c, q) != 0)
                CCL_FAIL(CCL_ERR_SYSTEM, "net/ib: %s: cannot post receives: %s", d->name, strerror(errno));
    }
    *out = c;
    c = NULL;
out:
    if (c) {
        c->fd = -1; /* the caller's still */
        ib_comm_destroy(c);
    }
    return res;
}

void ib_info_fill(const ib_comm_t *c, uint64_t listen_id, int rank, uint32_t psn, const char *host,
                  ib_conn_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->magic = IB_INFO_MAGIC;
    info->version = IB_WIRE_VERSION;
    info->listen_id = listen_id;
    info->rank = rank;
    info->nqps = (uint32_t)c->nqps;
    for (int q = 0; q < c->nqps; q++)
        info->qpn[q] = c->qp[q]->qp_num;
    info->psn = psn;
    info->link_layer = (uint32_t)c->dev->end.link_layer;
    info->lid = c->dev->end.lid;
    info->mtu = (uint32_t)c->dev->end.mtu;
    info->gid_index = (uint32_t)c->dev->end.gid_index;
    memcpy(info->gid, c->dev->end.gid, 16);
    if (c->is_send) {
        info->fifo_addr = (uint64_t)(uintptr_t)c->fifo;
        info->fifo_rkey = c->fifo_mr->rkey;
    }
    snprintf(info->host, sizeof info->host, "%s", host);
    snprintf(info->dev, sizeof info->dev, "%s", c->dev->name);
}

/* Both ends agree on the queue pairs: ours to RTR then RTS, aimed at the
 * peer's (same count: the connector's decides, the acceptor follows). */
ccl_result_t ib_comm_connect_qps(ib_comm_t *c, uint32_t psn, const ib_qp_params_t *qp, const ib_conn_info_t *peer)
{
    const ib_verbs_t *v = ib_verbs();
    if (peer->rank >= 0) /* else the rank the handle named stays */
        c->peer_rank = peer->rank;
    snprintf(c->peer_host, sizeof c->peer_host, "%s", peer->host);
    snprintf(c->peer_dev, sizeof c->peer_dev, "%s", peer->dev);
    memcpy(c->peer_gid, peer->gid, 16);
    if (!c->is_send) {
        c->rfifo_addr = peer->fifo_addr;
        c->rfifo_rkey = peer->fifo_rkey;
    }
    if ((int)peer->link_layer != c->dev->end.link_layer)
        return ib_comm_fail(c, CCL_ERR_INVALID_USAGE, "its port is %s, ours %s: one link layer on both ends",
                            peer->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                            c->dev->end.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand");
    ib_end_t local = c->dev->end, remote = {0};
    local.psn = psn;
    remote.link_layer = (int)peer->link_layer;
    remote.lid = (uint16_t)peer->lid;
    memcpy(remote.gid, peer->gid, 16);
    remote.gid_index = (int)peer->gid_index;
    remote.mtu = (int)peer->mtu;
    remote.psn = peer->psn;
    for (int q = 0; q < c->nqps; q++) {
        struct ibv_qp_attr a;
        int mask;
        ib_qp_rtr_attr(&local, &remote, peer->qpn[q], c->dev->port, qp, &a, &mask);
        if (v->modify_qp(c->qp[q], &a, mask) != 0)
            return ib_comm_fail(c, CCL_ERR_SYSTEM, "queue pair %u to ready-to-receive failed: %s (GID index %d)",
                                c->qp[q]->qp_num, strerror(errno), c->dev->end.gid_index);
        ib_qp_rts_attr(&local, qp, &a, &mask);
        if (v->modify_qp(c->qp[q], &a, mask) != 0)
            return ib_comm_fail(c, CCL_ERR_SYSTEM, "queue pair %u to ready-to-send failed: %s",
                                c->qp[q]->qp_num, strerror(errno));
    }
    return CCL_SUCCESS;
}

const char *ib_conn_info_check(const ib_conn_info_t *info, uint64_t listen_id)
{
    if (info->magic != IB_INFO_MAGIC)
        return "not a ccl ib connection";
    if (info->version != IB_WIRE_VERSION)
        return "another ccl ib wire version";
    if (listen_id && info->listen_id != listen_id)
        return "meant for another listener";
    if (info->nqps < 1 || info->nqps > IB_MAX_QPS)
        return "a queue pair count out of range";
    if (info->link_layer != IBV_LINK_LAYER_ETHERNET && info->link_layer != IBV_LINK_LAYER_INFINIBAND)
        return "an unknown link layer";
    if (info->mtu < IBV_MTU_256 || info->mtu > IBV_MTU_4096)
        return "an MTU out of range";
    if (memchr(info->host, '\0', sizeof info->host) == NULL || memchr(info->dev, '\0', sizeof info->dev) == NULL)
        return "unterminated names";
    return NULL;
}
#endif
