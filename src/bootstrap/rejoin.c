/*
 * rejoin.c - hands the id of a new communicator from one member of an old
 * one to the others, without the old one's ring.
 *
 * ccl_comm_shrink runs when ranks of the old communicator are dead: its
 * bootstrap ring passes through them and its data connections are
 * poisoned. What survives is every rank's bootstrap listener (open for the
 * communicator's lifetime) and the table of their addresses. The new
 * communicator's first member creates a fresh id (a root of its own) and
 * answers, on its listener, each survivor that proves the old secret and
 * names the same rejoin (tag: the members agree on it from the excluded
 * set); everyone then joins the new id as usual. Requests come through an
 * acceptor (accept.h): anything else that arrives on the listener is
 * dropped and logged with its address, and a silent or slow stranger does
 * not hold up the survivors.
 */
#include "bootstrap/accept.h"
#include "core/err.h"
#include "core/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bs_rejoin_member_index(const int *members, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (members[i] == rank)
            return i;
    return -1;
}

typedef struct {
    const bs_t *bs;
    const int *members;
    int n;
    const char *served;
} bs_rejoin_want_t;

/* The acceptor's check: a request from a survivor not answered yet. */
static ccl_result_t bs_rejoin_check(const void *frame, size_t len, const char *from, void *arg)
{
    const bs_rejoin_want_t *w = arg;
    bs_rejoin_req_t q;
    ccl_result_t res = bs_rejoin_req_parse(frame, len, w->bs->secret, from, &q);
    if (res != CCL_SUCCESS)
        return res;
    int idx = bs_rejoin_member_index(w->members, w->n, q.rank);
    if (idx <= 0)
        return err_set(CCL_ERR_REMOTE, "%s: rank %d is not a survivor that rank %d waits for", from, q.rank,
                       w->bs->rank);
    if (w->served[idx])
        return err_set(CCL_ERR_REMOTE, "%s: rank %d asked already", from, q.rank);
    return CCL_SUCCESS;
}

ccl_result_t bs_rejoin_lead(bs_t *bs, const int *members, int n, uint64_t tag, const ccl_unique_id_t *id)
{
    ccl_result_t res = CCL_SUCCESS;
    uint64_t deadline = wait_now_ns() + bs->timeout_ns;
    char *served = calloc((size_t)n, 1);
    int fd = -1, left = n - 1;
    bs_acceptor_t *acc = NULL;
    char who[32];
    if (!served)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    snprintf(who, sizeof who, "rank %d", bs->rank);
    /* A survivor waits for the reply: bytes after its request are a stray's. */
    CCL_TRY(bs_acceptor_open(bs->listen_fd, bs->secret, sizeof(bs_rejoin_req_t), 1, who, &acc));
    bs_rejoin_want_t want = {bs, members, n, served};
    while (left > 0) {
        bs_rejoin_req_t q;
        res = bs_acceptor_next(acc, bs_rejoin_check, &want, deadline, &fd, &q, NULL);
        if (res != CCL_SUCCESS) {
            char missing[128] = "";
            size_t len = 0;
            for (int i = 1; i < n && len < sizeof missing - 16; i++)
                if (!served[i])
                    len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", members[i]);
            err_prefix("rank %d: waiting for ranks %s to ask for the new communicator: ", bs->rank, missing);
            goto out;
        }
        int idx = bs_rejoin_member_index(members, n, q.rank);
        bs_rejoin_reply_t r;
        memset(&r, 0, sizeof r);
        r.magic = BS_MAGIC;
        r.status = q.tag == tag ? 0 : 1;
        if (r.status == 0)
            r.id = *id;
        res = sock_send_all(fd, &r, sizeof r, deadline);
        sock_close(&fd);
        if (res != CCL_SUCCESS) {
            err_prefix("rank %d: answering rank %d: ", bs->rank, q.rank);
            goto out;
        }
        if (r.status != 0)
            CCL_FAIL(CCL_ERR_MISMATCH, "rank %d asked for a new communicator with another set of excluded ranks "
                     "than rank %d (every survivor must pass the same list)", q.rank, bs->rank);
        served[idx] = 1;
        left--;
    }
out:
    bs_acceptor_close(acc);
    sock_close(&fd);
    free(served);
    return res;
}

ccl_result_t bs_rejoin_follow(bs_t *bs, int leader, uint64_t tag, ccl_unique_id_t *id)
{
    ccl_result_t res = CCL_SUCCESS;
    uint64_t deadline = wait_now_ns() + bs->timeout_ns;
    int fd = -1;
    char abuf[80];
    bs_rejoin_req_t q;
    bs_rejoin_reply_t r;
    memset(&q, 0, sizeof q);
    q.magic = BS_MAGIC;
    q.version = BS_VERSION;
    memcpy(q.secret, bs->secret, BS_SECRET_BYTES);
    q.kind = BS_KIND_REJOIN;
    q.rank = bs->rank;
    q.tag = tag;
    res = sock_connect(&bs->peers[leader].addr, deadline, &fd);
    if (res == CCL_SUCCESS)
        res = sock_send_all(fd, &q, sizeof q, deadline);
    if (res == CCL_SUCCESS)
        res = sock_recv_all(fd, &r, sizeof r, deadline);
    if (res != CCL_SUCCESS) {
        err_prefix("rank %d: asking rank %d (%s, %s) for the new communicator (is it alive, and calling too?): ",
                   bs->rank, leader, bs->peers[leader].hostname,
                   sock_addr_str(&bs->peers[leader].addr, abuf, sizeof abuf));
        goto out;
    }
    char from[32];
    snprintf(from, sizeof from, "rank %d", leader);
    CCL_TRY(bs_rejoin_reply_parse(&r, sizeof r, from, &r));
    if (r.status != 0)
        CCL_FAIL(CCL_ERR_MISMATCH, "rank %d builds the new communicator from another set of excluded ranks "
                 "than rank %d (every survivor must pass the same list)", leader, bs->rank);
    *id = r.id;
out:
    sock_close(&fd);
    return res;
}
