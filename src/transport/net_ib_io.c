/*
 * net_ib_io.c - the ib plugin's data path: receivers post their buffers
 * into the sender's FIFO, senders RDMA-write into them with immediate
 * data, completions are polled from each comm's CQ (the scheme: net_ib.h).
 *
 * Work request ids say what completed: the kind in the top byte, then the
 * queue pair, then the request slot. A message's first piece (queue pair
 * 0) carries its size in the immediate; the other pieces carry the
 * message's index, so a receiver matches each piece to its message even
 * when the queue pairs' completions interleave.
 */
#include "transport/net_ib.h"
#include "base/err.h"
#include "base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

int ib_npieces(size_t size, int nqps)
{
    if (nqps <= 1 || size < 2 * (size_t)IB_STRIPE_MIN)
        return 1;
    size_t m = size / IB_STRIPE_MIN;
    return m < (size_t)nqps ? (int)m : nqps;
}

void ib_piece(size_t size, int npieces, int j, size_t *off, size_t *len)
{
    /* Pieces of whole cache lines; the last one takes the rest. */
    size_t chunk = ((size + (size_t)npieces - 1) / (size_t)npieces + 63) & ~(size_t)63;
    *off = (size_t)j * chunk;
    *len = j == npieces - 1 ? size - *off : chunk;
}

#if CCL_HAVE_IBVERBS

enum { IB_WR_DATA = 1, IB_WR_FIFO = 2 };
#define IB_WR_ID(kind, q, slot) (((uint64_t)(kind) << 56) | ((uint64_t)(q) << 48) | (uint64_t)(slot))
#define IB_WR_KIND(id) ((int)((id) >> 56))
#define IB_WR_SLOT(id) ((int)((id) & 0xffff))
/* Receive work requests carry only their queue pair: id < 2^8. */

/* Registers a buffer for one request when the caller gave no region. */
static ccl_result_t ib_req_register(ib_comm_t *c, ib_req_t *r, void *data, size_t size, struct ibv_mr **mr)
{
    r->own_mr = ib_verbs()->reg_mr(c->dev->pd, data, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!r->own_mr)
        return ib_comm_fail(c, CCL_ERR_SYSTEM, "cannot register %zu bytes at %p: %s", size, data, strerror(errno));
    *mr = r->own_mr;
    return CCL_SUCCESS;
}

/* The region covering [data, data + size): the caller's, or one of our own. */
static ccl_result_t ib_req_mr(ib_comm_t *c, ib_req_t *r, void *data, size_t size, void *mhandle, struct ibv_mr **mr)
{
    struct ibv_mr *m = mhandle;
    if (m && (char *)data >= (char *)m->addr && (char *)data + size <= (char *)m->addr + m->length) {
        *mr = m;
        return CCL_SUCCESS;
    }
    if (ib_mr_cache_get(c->dev, data, size, mr, &r->cached))
        return CCL_SUCCESS;
    return ib_req_register(c, r, data, size, mr);
}

static void ib_req_release(ib_req_t *r)
{
    if (r->own_mr)
        ib_verbs()->dereg_mr(r->own_mr);
    ib_mr_cache_put(r->cached);
    r->own_mr = NULL;
    r->cached = NULL;
    r->state = IB_REQ_FREE;
}

/* Tells the receiver of message k that it was refused (size or tag). */
static void ib_send_refusal(ib_comm_t *c, size_t size)
{
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = IB_WR_ID(IB_WR_FIFO, 0, 0);
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(IB_IMM_REFUSED | (uint32_t)(size > IB_MAX_MSG ? IB_MAX_MSG : size));
    const ib_fifo_entry_t *e = &c->fifo[c->nposted % IB_NREQ];
    wr.wr.rdma.remote_addr = e->addr;
    wr.wr.rdma.rkey = e->rkey;
    if (ibv_post_send(c->qp[0], &wr, &bad) != 0)
        LOG_WARN(SUB_NET, "net/ib: could not tell the receiver why its message was refused: %s", strerror(errno));
}

ccl_result_t ib_isend(void *comm, const void *data, size_t size, uint32_t tag, void *mhandle, void **request)
{
    ccl_result_t res = CCL_SUCCESS;
    ib_comm_t *c = comm;
    *request = NULL;
    CCL_TRY(ib_comm_check(c));
    uint32_t k = c->nposted, slot = k % IB_NREQ;
    volatile ib_fifo_entry_t *e = &c->fifo[slot];
    if (c->req[slot].state != IB_REQ_FREE || e->seq != k + 1)
        return CCL_SUCCESS; /* the receiver has not posted message k yet */
    atomic_thread_fence(memory_order_acquire);
    if (e->tag != tag || size > e->size) {
        ib_send_refusal(c, size);
        if (e->tag != tag)
            return ib_comm_fail(c, CCL_ERR_INVALID_USAGE, "message %u has tag %u, the receiver expects %u", k, tag,
                                e->tag);
        return ib_comm_fail(c, CCL_ERR_INVALID_USAGE, "message %u of %zu bytes is larger than the %u bytes the "
                            "receiver posted (refused, not truncated)", k, size, e->size);
    }
    ib_req_t *r = &c->req[slot];
    memset(r, 0, sizeof *r);
    r->comm = c;
    r->msg = k;
    r->size = size;
    struct ibv_mr *mr = NULL;
    int inl = size <= c->max_inline;
    if (!inl)
        CCL_TRY(ib_req_mr(c, r, (void *)data, size, mhandle, &mr));
    int m = ib_npieces(size, c->nqps);
    for (int j = 0; j < m; j++) {
        size_t off, len;
        ib_piece(size, m, j, &off, &len);
        struct ibv_sge sge = {.addr = (uintptr_t)data + off, .length = (uint32_t)len, .lkey = mr ? mr->lkey : 0};
        struct ibv_send_wr wr, *bad;
        memset(&wr, 0, sizeof wr);
        wr.wr_id = IB_WR_ID(IB_WR_DATA, j, slot);
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
        wr.sg_list = len ? &sge : NULL;
        wr.num_sge = len ? 1 : 0;
        wr.imm_data = htonl(j == 0 ? (uint32_t)size : (k & IB_MAX_MSG));
        wr.wr.rdma.remote_addr = e->addr + off;
        wr.wr.rdma.rkey = e->rkey;
        if (ibv_post_send(c->qp[j], &wr, &bad) != 0) {
            ib_req_release(r);
            return ib_comm_fail(c, CCL_ERR_SYSTEM, "posting message %u failed: %s", k, strerror(errno));
        }
        r->pending++;
    }
    r->state = IB_REQ_POSTED;
    c->nposted++;
    *request = r;
out:
    return res;
}

ccl_result_t ib_irecv(void *comm, int n, void **data, const size_t *sizes, const uint32_t *tags, void **mhandles,
                      void **request)
{
    ccl_result_t res = CCL_SUCCESS;
    ib_comm_t *c = comm;
    *request = NULL;
    if (n != 1)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/ib: grouped receives (n = %d) are not supported", n);
    CCL_TRY(ib_comm_check(c));
    uint32_t k = c->nposted, slot = k % IB_NREQ;
    ib_req_t *r = &c->req[slot];
    if (r->state != IB_REQ_FREE)
        return CCL_SUCCESS;
    memset(r, 0, sizeof *r);
    r->comm = c;
    r->msg = k;
    r->posted = sizes[0] > IB_MAX_MSG ? IB_MAX_MSG : sizes[0];
    struct ibv_mr *mr = NULL;
    if (r->posted)
        CCL_TRY(ib_req_mr(c, r, data[0], r->posted, mhandles ? mhandles[0] : NULL, &mr));
    ib_fifo_entry_t *e = &c->fifo[slot];
    e->addr = (uintptr_t)data[0];
    e->rkey = mr ? mr->rkey : 0;
    e->size = (uint32_t)r->posted;
    e->tag = tags[0];
    e->seq = k + 1;
    struct ibv_sge sge = {.addr = (uintptr_t)e, .length = sizeof *e, .lkey = c->fifo_mr->lkey};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = IB_WR_ID(IB_WR_FIFO, 0, slot);
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED | (c->max_inline >= sizeof *e ? IBV_SEND_INLINE : 0);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = c->rfifo_addr + slot * sizeof *e;
    wr.wr.rdma.rkey = c->rfifo_rkey;
    if (ibv_post_send(c->qp[0], &wr, &bad) != 0) {
        ib_req_release(r);
        return ib_comm_fail(c, CCL_ERR_SYSTEM, "posting receive %u failed: %s", k, strerror(errno));
    }
    r->state = IB_REQ_POSTED;
    c->nposted++;
    *request = r;
out:
    return res;
}

/* A receive completion: piece q of some message. */
static ccl_result_t ib_recv_piece(ib_comm_t *c, int q, uint32_t imm)
{
    ib_req_t *r;
    if (q == 0) {
        uint32_t k = c->q0_next++;
        r = &c->req[k % IB_NREQ];
        if (r->state != IB_REQ_POSTED || r->msg != k)
            return ib_comm_fail(c, CCL_ERR_REMOTE, "data for message %u, which was not posted", k);
        if (imm & IB_IMM_REFUSED)
            return ib_comm_fail(c, CCL_ERR_REMOTE, "the sender refused message %u: %u bytes for the %zu posted, or "
                                "another tag (never truncated)", k, imm & IB_MAX_MSG, r->posted);
        r->size = imm;
        if (r->size > r->posted)
            return ib_comm_fail(c, CCL_ERR_REMOTE, "message %u says %zu bytes, %zu were posted", k, r->size, r->posted);
        r->npieces = ib_npieces(r->size, c->nqps);
    } else {
        r = &c->req[imm % IB_NREQ];
        if (r->state != IB_REQ_POSTED || (r->msg & IB_MAX_MSG) != imm)
            return ib_comm_fail(c, CCL_ERR_REMOTE, "piece %d of message %u, which is not in flight", q, imm);
    }
    r->got++;
    if (ib_post_recv_wr(c, q) != 0)
        return ib_comm_fail(c, CCL_ERR_SYSTEM, "cannot repost a receive: %s", strerror(errno));
    return CCL_SUCCESS;
}

static ccl_result_t ib_completion(ib_comm_t *c, const struct ibv_wc *wc)
{
    if (wc->status != IBV_WC_SUCCESS)
        return ib_comm_fail(c, CCL_ERR_REMOTE, "%s %s (verbs status %d, vendor error %#x)",
                            wc->opcode & IBV_WC_RECV ? "a receive completed with" : "a write completed with",
                            ib_verbs()->wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
    if (wc->opcode & IBV_WC_RECV)
        return ib_recv_piece(c, (int)wc->wr_id, ntohl(wc->imm_data));
    if (IB_WR_KIND(wc->wr_id) == IB_WR_DATA) {
        ib_req_t *r = &c->req[IB_WR_SLOT(wc->wr_id)];
        if (r->state == IB_REQ_POSTED && r->pending > 0)
            r->pending--;
    }
    return CCL_SUCCESS;
}

/* Drains the CQ, then marks requests done in their order. */
static ccl_result_t ib_poll(ib_comm_t *c)
{
    struct ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0)
        for (int i = 0; i < n; i++)
            if (ib_completion(c, &wc[i]) != CCL_SUCCESS)
                return err_set(c->fail_code, "%s", c->err);
    if (n < 0)
        return ib_comm_fail(c, CCL_ERR_SYSTEM, "polling the completion queue failed");
    while (c->ndone != c->nposted) {
        ib_req_t *r = &c->req[c->ndone % IB_NREQ];
        int done = c->is_send ? r->pending == 0 : r->npieces > 0 && r->got == r->npieces;
        if (r->state != IB_REQ_POSTED || !done)
            break;
        r->state = IB_REQ_DONE;
        c->ndone++;
    }
    return CCL_SUCCESS;
}

ccl_result_t ib_test(void *request, int *done, size_t *sizes)
{
    ib_req_t *r = request;
    ib_comm_t *c = r->comm;
    *done = 0;
    ccl_result_t res = c->fail_code == CCL_SUCCESS ? ib_poll(c) : c->fail_code;
    if (r->state == IB_REQ_DONE) { /* done before any failure: still reported */
        if (sizes)
            sizes[0] = r->size;
        ib_req_release(r);
        *done = 1;
        return CCL_SUCCESS;
    }
    if (res != CCL_SUCCESS)
        return err_set(c->fail_code, "%s", c->err);
    return ib_comm_check(c);
}
#endif
