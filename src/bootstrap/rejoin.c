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
 * set); everyone then joins the new id as usual. Anything else that
 * arrives on the listener is dropped and logged.
 */
#include "bootstrap/wire.h"
#include "core/err.h"
#include "core/wait.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BS_KIND_REJOIN 0x726a6e31u /* "rjn1" */

typedef struct {
    uint32_t magic;
    uint32_t version;
    uint8_t secret[BS_SECRET_BYTES];
    uint32_t kind;
    int32_t rank;  /* the sender's rank in the old communicator */
    uint64_t tag;
} bs_rejoin_req_t;

typedef struct {
    uint32_t magic;
    int32_t status; /* 0: id follows; 1: the leader expects another tag */
    ccl_unique_id_t id;
} bs_rejoin_reply_t;

static int bs_rejoin_member_index(const int *members, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (members[i] == rank)
            return i;
    return -1;
}

ccl_result_t bs_rejoin_lead(bs_t *bs, const int *members, int n, uint64_t tag, const ccl_unique_id_t *id)
{
    ccl_result_t res = CCL_SUCCESS;
    uint64_t deadline = wait_now_ns() + bs->timeout_ns;
    char *served = calloc((size_t)n, 1);
    int fd = -1, left = n - 1;
    if (!served)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    while (left > 0) {
        res = sock_accept(bs->listen_fd, deadline, &fd);
        if (res != CCL_SUCCESS) {
            char missing[128] = "";
            size_t len = 0;
            for (int i = 1; i < n && len < sizeof missing - 16; i++)
                if (!served[i])
                    len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", members[i]);
            err_prefix("rank %d: waiting for ranks %s to ask for the new communicator: ", bs->rank, missing);
            goto out;
        }
        bs_rejoin_req_t q;
        uint64_t dl = wait_now_ns() + 5000000000ull;
        int idx = -1;
        if (sock_recv_all(fd, &q, sizeof q, dl < deadline ? dl : deadline) == CCL_SUCCESS &&
            q.magic == BS_MAGIC && q.version == BS_VERSION && q.kind == BS_KIND_REJOIN &&
            bs_secret_equal(q.secret, bs->secret))
            idx = bs_rejoin_member_index(members, n, q.rank);
        if (idx <= 0 || served[idx]) {
            LOG_WARN(SUB_BOOTSTRAP, "rank %d: dropped a connection on the bootstrap listener that is not a "
                     "survivor asking to rejoin", bs->rank);
            sock_close(&fd);
            continue;
        }
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
    if (r.magic != BS_MAGIC || (r.status != 0 && r.status != 1))
        CCL_FAIL(CCL_ERR_REMOTE, "rank %d answered the rejoin request with a malformed frame", leader);
    if (r.status != 0)
        CCL_FAIL(CCL_ERR_MISMATCH, "rank %d builds the new communicator from another set of excluded ranks "
                 "than rank %d (every survivor must pass the same list)", leader, bs->rank);
    *id = r.id;
out:
    sock_close(&fd);
    return res;
}
