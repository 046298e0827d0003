/*
 * rejoin.c - hands the id of a new communicator from one member of an old
 * one to the others, without the old one's ring.
 *
 * ccl_comm_shrink runs when ranks of the old communicator are dead: its
 * bootstrap ring passes through them and its data connections are
 * poisoned. What survives is every rank's bootstrap listener (open for the
 * communicator's lifetime) and the table of their addresses. The new
 * communicator's first member (the leader) collects, on its listener, one
 * request from every other member, each proving the old secret and naming
 * the rejoin (tag: the members derive it from the excluded set). Only when
 * all have asked and all agree does it create the new id (a root of its
 * own) and hand it out; everyone then joins the new id as usual. Answering
 * all at once is what lets every member fail alike: a request with another
 * tag, or from a rank the leader excludes, turns into CCL_ERR_MISMATCH for
 * every caller (answered as they arrive), and a leader that gives up (a
 * member that exited, CCL_TIMEOUT) tells the members waiting on it why.
 * Because the listener lives as long as the old communicator, a refused
 * connection to it means the leader's process is gone: followers fail at
 * once instead of retrying until CCL_TIMEOUT.
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/wait.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* How often a waiting leader looks for members that exited. */
#define REJOIN_CHECK_MS 100
/* A member sends its request right after connecting; anything slower is a
 * stray client. */
#define REJOIN_REQ_TIMEOUT_NS (5ull * 1000000000ull)
/* Followers wait this much past CCL_TIMEOUT, so that a leader that gives
 * up at its own CCL_TIMEOUT can still tell them why. */
#define REJOIN_FOLLOW_SLACK_NS (2ull * 1000000000ull)


static int bs_rejoin_member_index(const int *members, int n, int rank)
{
    for (int i = 0; i < n; i++)
        if (members[i] == rank)
            return i;
    return -1;
}

/* Answers one follower and closes its connection. A follower that gave up
 * meanwhile is only logged: the leader's own result says what went wrong. */
static void bs_rejoin_answer(bs_t *bs, int *fd, int rank, int status, const ccl_unique_id_t *id, const char *why)
{
    bs_rejoin_reply_t r;
    memset(&r, 0, sizeof r);
    r.magic = BS_MAGIC;
    r.status = status;
    if (id)
        r.id = *id;
    if (why)
        snprintf(r.why, sizeof r.why, "%s", why);
    if (sock_send_all(*fd, &r, sizeof r, clock_now_ns() + REJOIN_REQ_TIMEOUT_NS) != CCL_SUCCESS)
        LOG_WARN(SUB_BOOTSTRAP, "rank %d: rank %d left before the answer to its rejoin request", bs->rank, rank);
    sock_close(fd);
}

/* The next valid request on the listener, or *fd = -1 when none came within
 * ms. Strays (wrong secret, malformed, already closed again) are dropped. */
static void bs_rejoin_next(bs_t *bs, int ms, int *fd, bs_rejoin_req_t *q)
{
    struct pollfd p = {bs->listen_fd, POLLIN, 0};
    *fd = -1;
    if (poll(&p, 1, ms) <= 0 || sock_try_accept(bs->listen_fd, fd) != CCL_SUCCESS || *fd < 0)
        return;
    char extra, frame[sizeof *q];
    if (sock_recv_all(*fd, frame, sizeof frame, clock_now_ns() + REJOIN_REQ_TIMEOUT_NS) == CCL_SUCCESS &&
        bs_rejoin_req_parse(frame, sizeof frame, bs->secret, "a rejoin request", q) == CCL_SUCCESS) {
        /* A follower keeps its connection open for the answer: one that
         * closed it gave up (an earlier, failed attempt left it queued). */
        if (recv(*fd, &extra, 1, MSG_PEEK | MSG_DONTWAIT) != 0)
            return;
        LOG_INFO(SUB_BOOTSTRAP, "rank %d: dropped a stale rejoin request of rank %d", bs->rank, q->rank);
    } else {
        LOG_WARN(SUB_BOOTSTRAP, "rank %d: dropped a connection on the bootstrap listener that is not a "
                 "survivor asking to rejoin", bs->rank);
    }
    sock_close(fd);
}

ccl_result_t bs_rejoin_lead(bs_t *bs, const int *members, int n, uint64_t tag, bs_gone_fn gone, void *gone_arg,
                            ccl_unique_id_t *id)
{
    ccl_result_t res = CCL_SUCCESS;
    uint64_t deadline = clock_now_ns() + bs->timeout_ns;
    int *fds = malloc((size_t)n * sizeof *fds);
    char *heard = calloc((size_t)n, 1);
    int left = n - 1, differs = -1; /* differs: the first rank whose list is not ours */
    int differs_excluded = 0;       /* ... and it is one we exclude */
    if (!fds || !heard)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    for (int i = 0; i < n; i++)
        fds[i] = -1;
    while (left > 0) {
        uint64_t now = clock_now_ns();
        if (now >= deadline) {
            if (differs >= 0)
                break; /* the mismatch is the error to report */
            char missing[128] = "";
            size_t len = 0;
            for (int i = 1; i < n && len < sizeof missing - 16; i++)
                if (!heard[i])
                    len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", members[i]);
            CCL_FAIL(CCL_ERR_TIMEOUT, "rank %d: ranks %s did not ask for the new communicator within CCL_TIMEOUT "
                     "(not calling ccl_comm_shrink, or passing another exclude list)", bs->rank, missing);
        }
        uint64_t slice = deadline - now;
        if (slice > REJOIN_CHECK_MS * 1000000ull)
            slice = REJOIN_CHECK_MS * 1000000ull;
        int fd;
        bs_rejoin_req_t q;
        bs_rejoin_next(bs, (int)(slice / 1000000ull) + 1, &fd, &q);
        if (fd < 0) {
            int dead = -1;
            for (int i = 1; gone && dead < 0 && i < n; i++)
                if (!heard[i] && gone(gone_arg, members[i]))
                    dead = members[i];
            if (dead >= 0 && differs < 0)
                CCL_FAIL(CCL_ERR_REMOTE, "rank %d (pid %d on %s) exited, but it is not in the exclude list", dead,
                         (int)bs->peers[dead].pid, bs->peers[dead].hostname);
            if (dead >= 0)
                break;
            continue;
        }
        int idx = bs_rejoin_member_index(members, n, q.rank);
        if (idx == 0) {
            LOG_WARN(SUB_BOOTSTRAP, "rank %d: dropped a rejoin request that claims to come from this rank", bs->rank);
            sock_close(&fd);
            continue;
        }
        if (idx < 0 || q.tag != tag) {
            /* A rank we exclude, or with another list: nobody gets an id. */
            if (differs < 0) {
                differs = q.rank;
                differs_excluded = idx < 0;
            }
            bs_rejoin_answer(bs, &fd, q.rank, REJOIN_MISMATCH, NULL, NULL);
        } else if (fds[idx] >= 0) {
            sock_close(&fds[idx]); /* it asked again: answer the newer request */
            fds[idx] = fd;
            continue;
        } else {
            fds[idx] = fd;
        }
        if (idx > 0 && !heard[idx]) {
            heard[idx] = 1;
            left--;
        }
        /* Members that asked already learn of a mismatch now, not at the
         * end: a member that never comes must not keep them waiting. */
        for (int i = 1; differs >= 0 && i < n; i++)
            if (fds[i] >= 0)
                bs_rejoin_answer(bs, &fds[i], members[i], REJOIN_MISMATCH, NULL, NULL);
    }
    if (differs >= 0)
        CCL_FAIL(CCL_ERR_MISMATCH, "rank %d asked for a new communicator with another set of excluded ranks "
                 "than rank %d%s (every survivor must pass the same list; excluded ranks must not call)",
                 differs, bs->rank, differs_excluded ? ", which excludes it" : "");
    CCL_TRY(bs_id_create_local(id));
    for (int i = 1; i < n; i++)
        if (fds[i] >= 0)
            bs_rejoin_answer(bs, &fds[i], members[i], REJOIN_OK, id, NULL);
out:
    for (int i = 1; fds && i < n; i++)
        if (fds[i] >= 0)
            bs_rejoin_answer(bs, &fds[i], members[i], res == CCL_ERR_MISMATCH ? REJOIN_MISMATCH : REJOIN_FAILED,
                             NULL, err_message());
    free(fds);
    free(heard);
    return res;
}

ccl_result_t bs_rejoin_follow(bs_t *bs, int leader, uint64_t tag, ccl_unique_id_t *id)
{
    ccl_result_t res = CCL_SUCCESS;
    uint64_t deadline = clock_now_ns() + bs->timeout_ns + REJOIN_FOLLOW_SLACK_NS;
    int fd = -1;
    char abuf[80];
    const bs_peer_t *l = &bs->peers[leader];
    bs_rejoin_req_t q;
    bs_rejoin_reply_t r;
    memset(&q, 0, sizeof q);
    q.magic = BS_MAGIC;
    q.version = BS_VERSION;
    memcpy(q.secret, bs->secret, BS_SECRET_BYTES);
    q.kind = BS_KIND_REJOIN;
    q.rank = bs->rank;
    q.tag = tag;
    res = sock_connect_live(&l->addr, deadline, &fd);
    if (res != CCL_SUCCESS) {
        err_prefix("rank %d: rank %d (pid %d on %s, %s), the first survivor, which hands out the new "
                   "communicator, is gone (exclude it too): ", bs->rank, leader, (int)l->pid, l->hostname,
                   sock_addr_str(&l->addr, abuf, sizeof abuf));
        goto out;
    }
    char frame[sizeof r];
    res = sock_send_all(fd, &q, sizeof q, deadline);
    if (res == CCL_SUCCESS)
        res = sock_recv_all(fd, frame, sizeof frame, deadline);
    if (res != CCL_SUCCESS) {
        err_prefix("rank %d: asking rank %d (pid %d on %s, %s) for the new communicator (is it alive, and "
                   "calling too?): ", bs->rank, leader, (int)l->pid, l->hostname,
                   sock_addr_str(&l->addr, abuf, sizeof abuf));
        goto out;
    }
    char from[32];
    snprintf(from, sizeof from, "rank %d", leader);
    CCL_TRY(bs_rejoin_reply_parse(frame, sizeof frame, from, &r));
    if (r.status == REJOIN_MISMATCH)
        CCL_FAIL(CCL_ERR_MISMATCH, "rank %d builds the new communicator from another set of excluded ranks "
                 "than rank %d, or another rank did (every survivor must pass the same list; excluded ranks "
                 "must not call)", leader, bs->rank);
    if (r.status == REJOIN_FAILED)
        CCL_FAIL(CCL_ERR_REMOTE, "rank %d, which hands out the new communicator, gave up: %s", leader,
                 r.why[0] ? r.why : "(no reason given)");
    *id = r.id;
out:
    sock_close(&fd);
    return res;
}
