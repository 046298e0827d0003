/*
 * accept.c - the bootstrap's acceptor (see accept.h): every connection on a
 * listener gets a slot, a deadline and a frame buffer; one poll() watches
 * the listener and all slots, so nothing a stranger does (or fails to do)
 * delays the real peers.
 */
#include "bootstrap/accept.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/wait.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    int fd; /* -1: free */
    sock_addr_t from;
    uint64_t serial;   /* arrival order: the oldest goes first in a flood */
    uint64_t deadline;
    size_t got;
    unsigned char buf[BS_FRAME_MAX];
} bs_pending_t;

struct bs_acceptor {
    int lfd;
    size_t frame_len;
    int peer_waits;
    uint8_t secret[BS_SECRET_BYTES];
    char who[64];
    uint64_t accepted;
    bs_refuse_fn refuse;
    void *refuse_arg;
    bs_pending_t pend[BS_ACCEPT_MAX_PENDING];
};

ccl_result_t bs_acceptor_open(int lfd, const uint8_t secret[BS_SECRET_BYTES], size_t frame_len, int peer_waits,
                              const char *who, bs_acceptor_t **out)
{
    *out = NULL;
    if (frame_len < sizeof(bs_auth_t) || frame_len > BS_FRAME_MAX)
        return err_set(CCL_ERR_INTERNAL, "%s: frames of %zu bytes cannot be accepted (%zu..%d)", who, frame_len,
                       sizeof(bs_auth_t), BS_FRAME_MAX);
    bs_acceptor_t *a = calloc(1, sizeof *a);
    if (!a)
        return err_set(CCL_ERR_SYSTEM, "%s: out of memory", who);
    a->lfd = lfd;
    a->frame_len = frame_len;
    a->peer_waits = peer_waits;
    memcpy(a->secret, secret, BS_SECRET_BYTES);
    snprintf(a->who, sizeof a->who, "%s", who);
    for (int i = 0; i < BS_ACCEPT_MAX_PENDING; i++)
        a->pend[i].fd = -1;
    *out = a;
    return CCL_SUCCESS;
}

void bs_acceptor_set_refuse(bs_acceptor_t *a, bs_refuse_fn refuse, void *arg)
{
    a->refuse = refuse;
    a->refuse_arg = arg;
}

static void bs_pending_drop(bs_acceptor_t *a, bs_pending_t *p, const char *why)
{
    char abuf[80];
    if (why)
        LOG_WARN(SUB_BOOTSTRAP, "%s: dropped a connection from %s: %s", a->who,
                 sock_addr_str(&p->from, abuf, sizeof abuf), why);
    sock_close(&p->fd);
}

/* Takes every connection waiting in the backlog. */
static ccl_result_t bs_acceptor_take(bs_acceptor_t *a, uint64_t now)
{
    for (;;) {
        int fd = -1;
        ccl_result_t res = sock_try_accept(a->lfd, &fd);
        if (res != CCL_SUCCESS || fd < 0)
            return res;
        bs_pending_t *p = NULL, *oldest = &a->pend[0];
        for (int i = 0; i < BS_ACCEPT_MAX_PENDING && !p; i++) {
            if (a->pend[i].fd < 0)
                p = &a->pend[i];
            else if (a->pend[i].serial < oldest->serial)
                oldest = &a->pend[i];
        }
        if (!p) {
            /* A flood: the oldest has had the longest to send its frame,
             * and a real peer sends its own at once. */
            bs_pending_drop(a, oldest, "too many connections wait for their first frame");
            p = oldest;
        }
        memset(p, 0, sizeof *p);
        p->fd = fd;
        socklen_t alen = sizeof p->from;
        if (getpeername(fd, &p->from.sa, &alen) != 0)
            memset(&p->from, 0, sizeof p->from);
        p->serial = a->accepted++;
        p->deadline = now + BS_FRAME_TIMEOUT_NS;
    }
}

/* Reads what has arrived on p, never past its frame: what follows the
 * frame belongs to the caller. Returns 1 with a whole frame, 0 when more
 * must come, -1 when p was dropped. */
static int bs_pending_read(bs_acceptor_t *a, bs_pending_t *p, uint64_t now)
{
    char why[128];
    while (p->got < a->frame_len) {
        ssize_t n = recv(p->fd, p->buf + p->got, a->frame_len - p->got, MSG_DONTWAIT);
        if (n > 0) {
            p->got += (size_t)n;
            continue;
        }
        if (n == 0) {
            if (p->got == 0)
                bs_pending_drop(a, p, "closed without sending anything");
            else {
                snprintf(why, sizeof why, "closed after %zu of %zu bytes (truncated frame)", p->got,
                         a->frame_len);
                bs_pending_drop(a, p, why);
            }
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            snprintf(why, sizeof why, "%s after %zu bytes", strerror(errno), p->got);
            bs_pending_drop(a, p, why);
            return -1;
        }
        if (now > p->deadline) {
            snprintf(why, sizeof why, "sent %zu of %zu bytes within %llu s", p->got, a->frame_len,
                     (unsigned long long)(BS_FRAME_TIMEOUT_NS / 1000000000ull));
            bs_pending_drop(a, p, why);
            return -1;
        }
        return 0;
    }
    return 1;
}

/* With peer_waits, after a frame that passed its checks: the peer must now
 * wait for our answer, so a byte more is a frame longer than the
 * protocol's, and a close a peer that gave up. Returns 1 when p was
 * dropped for it. */
static int bs_pending_trailing(bs_acceptor_t *a, bs_pending_t *p)
{
    char extra, why[128];
    ssize_t n = recv(p->fd, &extra, 1, MSG_DONTWAIT | MSG_PEEK);
    if (n > 0) {
        snprintf(why, sizeof why, "sent more than its %zu-byte frame (oversized)", a->frame_len);
        bs_pending_drop(a, p, why);
        return 1;
    }
    if (n == 0) {
        bs_pending_drop(a, p, "closed right after its frame");
        return 1;
    }
    return 0;
}

ccl_result_t bs_acceptor_next(bs_acceptor_t *a, bs_frame_check_fn check, void *arg, uint64_t deadline, int *fd,
                              void *frame, sock_addr_t *from)
{
    *fd = -1;
    for (;;) {
        uint64_t now = clock_now_ns();
        ccl_result_t res = bs_acceptor_take(a, now);
        if (res != CCL_SUCCESS)
            return res;
        uint64_t wake = deadline;
        struct pollfd pfd[BS_ACCEPT_MAX_PENDING + 1];
        int np = 0;
        bs_pending_t *good = NULL;
        pfd[np++] = (struct pollfd){a->lfd, POLLIN, 0};
        /* Every connection with a whole frame is judged in this pass, also
         * after a good one turned up: strays are dropped (and logged with
         * their reason) as soon as their bytes are in. */
        for (int i = 0; i < BS_ACCEPT_MAX_PENDING; i++) {
            bs_pending_t *p = &a->pend[i];
            if (p->fd < 0)
                continue;
            int r = bs_pending_read(a, p, now);
            if (r < 0)
                continue;
            if (r == 0) {
                if (p->deadline < wake)
                    wake = p->deadline;
                pfd[np++] = (struct pollfd){p->fd, POLLIN, 0};
                continue;
            }
            char abuf[80], src[160];
            snprintf(src, sizeof src, "%s: dropped a connection from %s", a->who,
                     sock_addr_str(&p->from, abuf, sizeof abuf));
            /* The check's err_set logs why, with src, at WARN. */
            if (bs_auth_check(p->buf, p->got, a->secret, src) != CCL_SUCCESS) {
                if (a->refuse)
                    a->refuse(p->fd, p->buf, p->got, src, a->refuse_arg);
                bs_pending_drop(a, p, NULL);
            } else if (check(p->buf, p->got, src, arg) != CCL_SUCCESS)
                bs_pending_drop(a, p, NULL);
            else if (a->peer_waits && bs_pending_trailing(a, p))
                continue;
            else if (!good)
                good = p; /* a later good one waits for the next call */
        }
        if (good) {
            memcpy(frame, good->buf, a->frame_len);
            if (from)
                *from = good->from;
            *fd = good->fd;
            good->fd = -1;
            return CCL_SUCCESS;
        }
        if (now >= deadline)
            return err_set(CCL_ERR_TIMEOUT, "%s: no valid connection arrived before the timeout (CCL_TIMEOUT)",
                           a->who);
        if (wait_check_cancel(a->who) != CCL_SUCCESS)
            return CCL_ERR_ABORTED;
        uint64_t ms = (wake > now ? wake - now : 0) / 1000000 + 1;
        poll(pfd, (nfds_t)np, wait_poll_cap_ms(ms > 1000 ? 1000 : (int)ms));
    }
}

void bs_acceptor_close(bs_acceptor_t *a)
{
    if (!a)
        return;
    char why[128];
    for (int i = 0; i < BS_ACCEPT_MAX_PENDING; i++) {
        bs_pending_t *p = &a->pend[i];
        if (p->fd < 0)
            continue;
        snprintf(why, sizeof why, "%zu of %zu bytes of its frame had come when %s stopped listening", p->got,
                 a->frame_len, a->who);
        bs_pending_drop(a, p, why);
    }
    free(a);
}

ccl_result_t bs_accept_one(int lfd, const uint8_t secret[BS_SECRET_BYTES], size_t frame_len, int peer_waits,
                           const char *who, bs_frame_check_fn check, void *arg, uint64_t deadline, int *fd,
                           void *frame)
{
    ccl_result_t res = CCL_SUCCESS;
    bs_acceptor_t *a = NULL;
    *fd = -1;
    CCL_TRY(bs_acceptor_open(lfd, secret, frame_len, peer_waits, who, &a));
    CCL_TRY(bs_acceptor_next(a, check, arg, deadline, fd, frame, NULL));
out:
    bs_acceptor_close(a);
    return res;
}
