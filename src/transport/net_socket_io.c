/*
 * net_socket_io.c - the data path of the TCP plugin: requests, striping
 * across the sockets of a connection, and the helper threads that do the
 * non-blocking I/O (the protocol and the threading are described in
 * net_socket_io.h).
 *
 * Completions and failures ring the caller's doorbell through the activity
 * callback that ccl handed to the plugin's init (net_sock_io_set_activity):
 * this file knows nothing of who listens.
 *
 * Helpers never call err_set: its message is per thread and the caller's
 * thread would not see it. A helper that meets a failure records one message
 * in the comm, and the caller's next test() or post returns it.
 */
#include "transport/net_socket_io.h"
#include "transport/net_socket_io_crc.h"
#include "transport/net_socket_io_types.h"
#include "base/err.h"
#include "base/clock.h"
#include "base/crc32c.h"
#include "base/log.h"
#include "bootstrap/socket.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static void net_io_no_activity(void) {}
/* The plugin's activity callback (ccl_net_callbacks_t.activity). */
static void (*net_io_activity)(void) = net_io_no_activity;

void net_sock_io_set_activity(void (*activity)(void)) { net_io_activity = activity ? activity : net_io_no_activity; }

/* Records the comm's first failure; later ones are consequences. */
static void net_io_fail(net_sock_comm_t *c, ccl_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void net_io_fail(net_sock_comm_t *c, ccl_result_t code, const char *fmt, ...)
{
    pthread_mutex_lock(&c->fail_lock);
    if (!atomic_load_explicit(&c->failed, memory_order_relaxed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->fail_msg, sizeof c->fail_msg, fmt, ap);
        va_end(ap);
        c->fail_code = code;
        atomic_store_explicit(&c->failed, 1, memory_order_release);
    }
    pthread_mutex_unlock(&c->fail_lock);
    net_io_activity(); /* a sleeping proxy tests, and sees the failure */
}

/* A clean close at message seq: no byte of that message had arrived. Not
 * a failure of the comm yet: the peer's earlier messages may still be
 * arriving on the other sockets (it wrote them all before closing). */
static void net_io_closed(net_sock_comm_t *c, net_sock_t *s, uint64_t seq)
{
    s->eof = 1;
    pthread_mutex_lock(&c->fail_lock);
    if (!atomic_load_explicit(&c->failed, memory_order_relaxed) && seq < atomic_load(&c->closed_at)) {
        snprintf(c->fail_msg, sizeof c->fail_msg,
                 "net/socket: connection closed by %s before message %llu (socket %d of %d)", c->peer,
                 (unsigned long long)seq, s->index, c->nsocks);
        c->fail_code = CCL_ERR_REMOTE;
        atomic_store(&c->closed_at, seq);
    }
    pthread_mutex_unlock(&c->fail_lock);
    net_io_activity();
}

/* What a socket error means for the link. ETIMEDOUT is keepalive giving
 * up (net_socket.c): the peer's host stopped answering at all. */
static const char *net_io_why(const net_sock_comm_t *c, int e, char *buf, size_t len)
{
    if (e != ETIMEDOUT)
        return strerror(e);
    snprintf(buf, len, "no answer from its host for %d s (TCP keepalive): the link is down or the host is dead",
             c->silence_s);
    return buf;
}

static ccl_result_t net_io_failure(net_sock_comm_t *c)
{
    /* The writer published fail_msg before the release store of failed. */
    return err_set(c->fail_code, "%s", c->fail_msg);
}

/* Looks at the keepalive socket (at most every NET_IO_WATCH_NS unless
 * now): an error there (ETIMEDOUT from keepalive, a reset) fails the comm.
 * Its clean close is no failure: the data sockets say when messages stop. */
static void net_io_watch(net_sock_comm_t *c, int now)
{
    if (c->watch_fd < 0 || c->watch_eof || atomic_load_explicit(&c->failed, memory_order_relaxed))
        return;
    if (!now) {
        uint64_t t = clock_now_ns();
        if (t < c->watch_next)
            return;
        c->watch_next = t + NET_IO_WATCH_NS;
    }
    char b;
    ssize_t got = recv(c->watch_fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
    if (got == 0) {
        c->watch_eof = 1;
    } else if (got > 0) {
        c->watch_eof = 1; /* stop looking: the peer broke the protocol */
        net_io_fail(c, CCL_ERR_REMOTE, "net/socket: %s sent data on the connection's keepalive socket: not a ccl "
                    "peer, or the stream is corrupt", c->peer);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        char why[160];
        net_io_fail(c, CCL_ERR_REMOTE, "net/socket: connection to %s lost: %s", c->peer,
                    net_io_why(c, errno, why, sizeof why));
    }
}

/* CCL_FAULT corrupt_wire: the next piece with data that this process
 * sends goes out with one byte changed. */
static _Atomic int net_io_flip_pending;

void net_sock_io_fault_corrupt(void)
{
    atomic_store(&net_io_flip_pending, 1);
}

/* Whether the piece s is about to send takes the pending fault. */
static int net_io_take_flip(const net_sock_t *s)
{
    return s->left && atomic_load_explicit(&net_io_flip_pending, memory_order_relaxed) &&
           atomic_exchange(&net_io_flip_pending, 0);
}

/* Stripe width and count of a message of r->size bytes. */
static void net_io_layout(net_sock_req_t *r, int nsocks)
{
    if (r->size == 0) {
        r->stripe = 0;
        r->npieces = 1;
        return;
    }
    size_t k = (r->size + NET_SOCK_MIN_STRIPE - 1) / NET_SOCK_MIN_STRIPE;
    if (k > (size_t)nsocks)
        k = (size_t)nsocks;
    size_t stripe = (r->size + k - 1) / k;
    stripe = (stripe + NET_IO_STRIPE_ALIGN - 1) & ~(size_t)(NET_IO_STRIPE_ALIGN - 1);
    r->stripe = stripe;
    /* Rounding may leave fewer stripes than k; never an empty one. */
    r->npieces = (int)((r->size + stripe - 1) / stripe);
}

/* Wakes helpers that sleep: something changed. */
static void net_io_wake(net_sock_comm_t *c)
{
    /* seq_cst on both sides: either the sleeper sees the new gen before it
     * polls, or we see its sleeping flag and write its eventfd. */
    atomic_fetch_add(&c->gen, 1);
    for (int t = 0; t < c->nthreads; t++) {
        if (atomic_load(&c->threads[t].sleeping)) {
            uint64_t one = 1;
            if (write(c->threads[t].efd, &one, sizeof one) < 0) {
                /* Only EAGAIN (counter saturated) is possible: it is awake anyway. */
            }
        }
    }
}

/* Sets up s's next piece: skips messages that have no part on s. Returns 1
 * with a piece set up, 0 when s has nothing to do now. */
static int net_io_next(net_sock_comm_t *c, net_sock_t *s)
{
    uint64_t posted = atomic_load_explicit(&c->posted, memory_order_acquire);
    uint64_t cur = atomic_load_explicit(&s->cur, memory_order_relaxed);
    int found = 0;
    while (cur < posted) {
        net_sock_req_t *r = &c->reqs[cur % NET_SOCK_MAX_REQS];
        int lead = (int)(cur % (uint64_t)c->nsocks);
        int i = (s->index - lead + c->nsocks) % c->nsocks;
        if (!atomic_load_explicit(&r->hdr_ready, memory_order_acquire)) {
            /* Receive whose header is unread: the lead socket reads it,
             * the others cannot know their part yet. */
            if (i != 0)
                break;
            s->req = r;
            s->piece = 0;
            s->hdr_left = sizeof s->hdr;
            s->ptr = NULL;
            s->left = 0;
            found = 1;
            break;
        }
        if (i < r->npieces) {
            size_t off = (size_t)i * r->stripe;
            s->req = r;
            s->piece = i;
            s->ptr = r->size ? r->data + off : NULL;
            s->left = r->size ? (r->size - off < r->stripe ? r->size - off : r->stripe) : 0;
            s->hdr_left = 0;
            if (c->is_send && i == 0) {
                s->hdr = (net_sock_msg_hdr_t){NET_SOCK_MSG_MAGIC, r->tag, cur, r->size};
                s->hdr_left = sizeof s->hdr;
            }
            net_io_piece_begin(c, s);
            if (c->is_send && net_io_take_flip(s))
                net_io_piece_flip(c, s);
            found = 1;
            break;
        }
        cur++;
    }
    atomic_store_explicit(&s->cur, cur, memory_order_release);
    return found;
}

static void net_io_piece_done(net_sock_t *s)
{
    net_sock_req_t *r = s->req;
    s->req = NULL;
    atomic_fetch_add_explicit(&r->pieces_done, 1, memory_order_release);
    /* After this store the caller may reuse the slot: no access to r below. */
    atomic_store_explicit(&s->cur, atomic_load_explicit(&s->cur, memory_order_relaxed) + 1,
                          memory_order_release);
    net_io_activity(); /* the net proxy may sleep waiting for this */
}

int net_sock_msg_hdr_parse(const void *buf, size_t len, uint64_t seq, size_t cap, uint32_t tag, const char *peer,
                           net_sock_msg_hdr_t *out, char *why, size_t whylen)
{
    net_sock_msg_hdr_t h;
    if (len != sizeof h) {
        snprintf(why, whylen, "net/socket: %s: a message header of %zu bytes, %zu expected", peer, len, sizeof h);
        return -1;
    }
    memcpy(&h, buf, sizeof h);
    unsigned long long want = (unsigned long long)seq;
    if (h.magic != NET_SOCK_MSG_MAGIC)
        snprintf(why, whylen,
                 "net/socket: %s sent an invalid message header (magic 0x%08x, message %llu): not a ccl peer, "
                 "or the stream is corrupt",
                 peer, h.magic, want);
    else if (h.seq != seq)
        snprintf(why, whylen,
                 "net/socket: %s sent the header of message %llu where message %llu was due: the stream is "
                 "corrupt",
                 peer, (unsigned long long)h.seq, want);
    else if (h.size > cap)
        snprintf(why, whylen,
                 "net/socket: %s sent %llu bytes as message %llu, but the receive posted for it holds %zu bytes",
                 peer, (unsigned long long)h.size, want, cap);
    else if (h.tag != tag)
        snprintf(why, whylen, "net/socket: %s sent message %llu with tag %u, but the receive was posted with tag %u",
                 peer, want, h.tag, tag);
    else {
        *out = h;
        return 0;
    }
    return -1;
}

/* The lead socket read a header: check it against the posted receive
 * before anything is written to the buffer. Returns 0, or -1 (failed). */
static int net_io_header(net_sock_comm_t *c, net_sock_t *s)
{
    net_sock_req_t *r = s->req;
    net_sock_msg_hdr_t h;
    char why[400];
    if (net_sock_msg_hdr_parse(&s->hdr, sizeof s->hdr, r->seq, r->cap, r->tag, c->peer, &h, why, sizeof why) != 0) {
        net_io_fail(c, CCL_ERR_REMOTE, "%s (socket %d of %d)", why, s->index, c->nsocks);
        return -1;
    }
    r->size = (size_t)h.size;
    net_io_layout(r, c->nsocks);
    atomic_store_explicit(&r->hdr_ready, 1, memory_order_release);
    /* The other sockets (maybe of other helpers) can now see their part, or
     * that they have none and may go on to the next message. */
    net_io_wake(c);
    s->ptr = r->size ? r->data : NULL;
    s->left = r->size < r->stripe ? r->size : r->stripe;
    net_io_piece_begin(c, s);
    return 0;
}

/* Receiver: a piece's trailer is in. Returns 0 when it matches, else -1
 * (failed with CCL_ERR_CORRUPT). */
static int net_io_check_trail(net_sock_comm_t *c, net_sock_t *s)
{
    net_sock_req_t *r = s->req;
    if (s->trail == s->crc)
        return 0;
    size_t off = (size_t)s->piece * r->stripe;
    size_t len = r->size ? (r->size - off < r->stripe ? r->size - off : r->stripe) : 0;
    net_io_fail(c, CCL_ERR_CORRUPT,
                "net/socket: message %llu from %s " ERR_CORRUPT_MARK ": CRC-32C 0x%08x over its header and the "
                "%zu bytes of stripe %d (socket %d of %d), 0x%08x sent",
                (unsigned long long)r->seq, c->peer, s->crc, len, s->piece, s->index, c->nsocks, s->trail);
    return -1;
}

static int net_io_send_step(net_sock_comm_t *c, net_sock_t *s)
{
    for (int calls = 0; calls < NET_IO_CALLS_PER_STEP; calls++) {
        if (!s->req && !net_io_next(c, s))
            return NET_IO_IDLE;
        struct iovec iov[4];
        size_t want = 0, data = s->left;
        int n = 0;
        if (c->checksum) {
            net_io_crc_ahead(s);
            data = (size_t)(s->crc_at - s->ptr);
        }
        if (s->hdr_left) {
            iov[n++] = (struct iovec){(char *)&s->hdr + sizeof s->hdr - s->hdr_left, s->hdr_left};
            want += s->hdr_left;
        }
        if (s->flip_left) {
            iov[n++] = (struct iovec){&s->flip, 1};
            want += 1;
        }
        if (data) {
            iov[n++] = (struct iovec){s->ptr, data};
            want += data;
        }
        if (s->trail_left && data == s->left) {
            iov[n++] = (struct iovec){(char *)&s->trail + sizeof s->trail - s->trail_left, s->trail_left};
            want += s->trail_left;
        }
        if (n > 0) {
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            ssize_t w = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                    return NET_IO_WANT;
                char why[160];
                net_io_fail(c, CCL_ERR_REMOTE,
                            "net/socket: connection to %s lost while sending message %llu "
                            "(socket %d of %d): %s",
                            c->peer, (unsigned long long)s->req->seq, s->index, c->nsocks,
                            net_io_why(c, errno, why, sizeof why));
                return NET_IO_FAILED;
            }
            size_t done = (size_t)w, k;
            k = done < s->hdr_left ? done : s->hdr_left;
            s->hdr_left -= k;
            done -= k;
            k = done < s->flip_left ? done : s->flip_left;
            s->flip_left -= k;
            done -= k;
            k = done < data ? done : data;
            s->ptr += k;
            s->left -= k;
            done -= k;
            s->trail_left -= done; /* what is left was trailer */
            /* A short write means the socket buffer is full: poll. */
            if ((size_t)w < want)
                return NET_IO_WANT;
        }
        if (s->hdr_left || s->flip_left || s->left || s->trail_left)
            continue; /* the checksum went only part of the way */
        net_io_piece_done(s);
    }
    return NET_IO_MORE;
}

/* Bulk arriving on a socket that also sends (duplex): TCP then delays
 * acknowledgements, hoping to send them with data, and under loss (a
 * shaped link's drops) the sender waits out the delayed-ACK timer (40 ms)
 * at a time, or backs off. Small messages keep the piggyback; after a
 * large read we ask for an immediate ACK (the kernel clears the flag by
 * itself, so it is set again per read). */
#define NET_IO_QUICKACK_BYTES (16 * 1024)
static void net_io_quickack(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one) != 0) {
        /* Only a hint: without it, acknowledgements come later. */
    }
}

/* recv() on s's stream: the read-ahead first, then the socket (straight
 * into dst for a large rest, else through the read-ahead). Returns what
 * recv would; *staged says the bytes came from the read-ahead, so the
 * socket was not asked and a short count does not mean it has no more. */
static ssize_t net_io_read(net_sock_t *s, char *dst, size_t want, int *staged)
{
    *staged = 0;
    if (s->stage_rd == s->stage_wr && (want >= NET_IO_STAGE_SIZE || !s->stage)) {
        ssize_t got = recv(s->fd, dst, want, MSG_DONTWAIT);
        if (got >= NET_IO_QUICKACK_BYTES)
            net_io_quickack(s->fd);
        return got;
    }
    if (s->stage_rd == s->stage_wr) {
        ssize_t got = recv(s->fd, s->stage, NET_IO_STAGE_SIZE, MSG_DONTWAIT);
        if (got <= 0)
            return got;
        if (got >= NET_IO_QUICKACK_BYTES)
            net_io_quickack(s->fd);
        s->stage_rd = 0;
        s->stage_wr = (size_t)got;
    } else {
        *staged = 1;
    }
    size_t n = s->stage_wr - s->stage_rd;
    if (n > want)
        n = want;
    memcpy(dst, s->stage + s->stage_rd, n);
    s->stage_rd += n;
    return (ssize_t)n;
}

static int net_io_recv_step(net_sock_comm_t *c, net_sock_t *s)
{
    for (int calls = 0; calls < NET_IO_CALLS_PER_STEP; calls++) {
        if (!s->req && !net_io_next(c, s))
            return NET_IO_IDLE;
        if (s->eof)
            return NET_IO_IDLE;
        int in_hdr = s->hdr_left > 0, in_trail = !in_hdr && !s->left && s->trail_left;
        char *dst = in_hdr     ? (char *)&s->hdr + sizeof s->hdr - s->hdr_left
                    : in_trail ? (char *)&s->trail + sizeof s->trail - s->trail_left
                               : s->ptr;
        size_t want = in_hdr ? s->hdr_left : in_trail ? s->trail_left : s->left;
        if (want > 0) {
            int staged;
            ssize_t got = net_io_read(s, dst, want, &staged);
            if (got == 0 && in_hdr && want == sizeof s->hdr) {
                net_io_closed(c, s, s->req->seq);
                return NET_IO_IDLE;
            }
            if (got == 0) {
                net_io_fail(c, CCL_ERR_REMOTE,
                            "net/socket: connection closed by %s during message %llu (socket %d "
                            "of %d, %zu bytes of its %s still missing)",
                            c->peer, (unsigned long long)s->req->seq, s->index, c->nsocks, want,
                            in_hdr ? "header" : in_trail ? "checksum" : "data");
                return NET_IO_FAILED;
            }
            if (got < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                    return NET_IO_WANT;
                char why[160];
                net_io_fail(c, CCL_ERR_REMOTE,
                            "net/socket: connection to %s lost while receiving message %llu "
                            "(socket %d of %d): %s",
                            c->peer, (unsigned long long)s->req->seq, s->index, c->nsocks,
                            net_io_why(c, errno, why, sizeof why));
                return NET_IO_FAILED;
            }
            if (in_hdr) {
                s->hdr_left -= (size_t)got;
                if (s->hdr_left && staged)
                    continue; /* the read-ahead ran out: now the socket */
                if (s->hdr_left)
                    return NET_IO_WANT;
                if (net_io_header(c, s) != 0)
                    return NET_IO_FAILED;
                continue; /* now the data of stripe 0 */
            }
            if (in_trail) {
                s->trail_left -= (size_t)got;
                if (s->trail_left)
                    return staged ? NET_IO_MORE : NET_IO_WANT;
                if (net_io_check_trail(c, s) != 0)
                    return NET_IO_FAILED;
            } else {
                if (c->checksum)
                    s->crc = crc32c_update(s->crc, dst, (size_t)got);
                s->ptr += got;
                s->left -= (size_t)got;
                if (s->left && !staged)
                    return NET_IO_WANT; /* short read: nothing more buffered */
                if (s->left || s->trail_left)
                    continue; /* the read-ahead ran out (now the socket), or the trailer */
            }
        }
        net_io_piece_done(s);
    }
    return NET_IO_MORE;
}

static int net_io_step(net_sock_comm_t *c, net_sock_t *s)
{
    return c->is_send ? net_io_send_step(c, s) : net_io_recv_step(c, s);
}

/* CCL_SOCKET_NTHREADS=0: the caller's thread moves what can move now. */
static void net_io_progress_inline(net_sock_comm_t *c)
{
    net_io_watch(c, 0);
    /* Bounded: the caller polls again. */
    for (int pass = 0; pass < 64 && !atomic_load_explicit(&c->failed, memory_order_acquire); pass++) {
        uint64_t gen = atomic_load(&c->gen);
        int more = 0;
        for (int j = 0; j < c->nsocks; j++) {
            int r = net_io_step(c, &c->socks[j]);
            if (r == NET_IO_FAILED)
                return;
            more |= r == NET_IO_MORE;
        }
        if (!more && atomic_load(&c->gen) == gen)
            return;
    }
}

static void *net_io_thread(void *arg)
{
    net_sock_thread_t *t = arg;
    net_sock_comm_t *c = t->comm;
    struct pollfd pfd[NET_SOCK_MAX_SOCKS + 2];
    short ev = c->is_send ? POLLOUT : POLLIN;
    while (!atomic_load_explicit(&c->stop, memory_order_acquire)) {
        uint64_t gen = atomic_load(&c->gen);
        int np = 0, more = 0;
        pfd[np++] = (struct pollfd){t->efd, POLLIN, 0};
        int watch = t->index == 0 && c->watch_fd >= 0 && !c->watch_eof ? np : -1;
        if (watch >= 0)
            pfd[np++] = (struct pollfd){c->watch_fd, POLLIN, 0};
        /* After a failure the thread only waits to be stopped. */
        for (int j = t->index; j < c->nsocks && !atomic_load_explicit(&c->failed, memory_order_acquire);
             j += c->nthreads) {
            net_sock_t *s = &c->socks[j];
            int r = net_io_step(c, s);
            if (r == NET_IO_MORE)
                more = 1;
            else if (r == NET_IO_WANT)
                pfd[np++] = (struct pollfd){s->fd, ev, 0};
        }
        if (more)
            continue;
        atomic_store(&t->sleeping, 1);
        if (atomic_load(&c->gen) == gen && !atomic_load(&c->stop))
            poll(pfd, (nfds_t)np, NET_IO_SLEEP_MS);
        atomic_store(&t->sleeping, 0);
        if (watch >= 0 && pfd[watch].revents)
            net_io_watch(c, 1);
        uint64_t drain;
        if ((pfd[0].revents & POLLIN) && read(t->efd, &drain, sizeof drain) < 0) {
            /* EAGAIN: another read won the race; the eventfd is non-blocking. */
        }
    }
    return NULL;
}

void net_sock_comm_destroy(net_sock_comm_t *c)
{
    if (!c)
        return;
    atomic_store_explicit(&c->stop, 1, memory_order_release);
    for (int t = 0; t < c->nthreads; t++) {
        net_sock_thread_t *th = &c->threads[t];
        if (th->started) {
            uint64_t one = 1;
            if (write(th->efd, &one, sizeof one) < 0) {
                /* Saturated counter: it is awake. */
            }
            pthread_join(th->tid, NULL);
        }
        if (th->efd >= 0)
            close(th->efd);
    }
    for (int j = 0; j < c->nsocks; j++) {
        sock_close(&c->socks[j].fd);
        free(c->socks[j].stage);
    }
    sock_close(&c->watch_fd);
    pthread_mutex_destroy(&c->fail_lock);
    free(c);
}

ccl_result_t net_sock_comm_create(int is_send, const int *fds, int nsocks, int watch_fd, int nthreads,
                                  int silence_s, int checksum, const char *peer, net_sock_comm_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    *out = NULL;
    net_sock_comm_t *c = calloc(1, sizeof *c);
    if (!c) {
        for (int j = 0; j < nsocks; j++)
            close(fds[j]);
        if (watch_fd >= 0)
            close(watch_fd);
        CCL_FAIL(CCL_ERR_SYSTEM, "net/socket: out of memory for a connection to %s", peer);
    }
    c->watch_fd = watch_fd;
    pthread_mutex_init(&c->fail_lock, NULL);
    atomic_store(&c->closed_at, UINT64_MAX);
    c->is_send = is_send;
    c->nsocks = nsocks;
    c->nthreads = nthreads < nsocks ? nthreads : nsocks;
    c->silence_s = silence_s;
    c->checksum = checksum;
    snprintf(c->peer, sizeof c->peer, "%s", peer);
    for (int j = 0; j < nsocks; j++) {
        c->socks[j].fd = fds[j];
        c->socks[j].index = j;
    }
    for (int j = 0; !is_send && j < nsocks; j++)
        if (!(c->socks[j].stage = malloc(NET_IO_STAGE_SIZE)))
            CCL_FAIL(CCL_ERR_SYSTEM, "net/socket: out of memory for a connection to %s", peer);
    for (int t = 0; t < c->nthreads; t++)
        c->threads[t].efd = -1;
    for (int t = 0; t < c->nthreads; t++) {
        c->threads[t].comm = c;
        c->threads[t].index = t;
        c->threads[t].efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (c->threads[t].efd < 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "net/socket: eventfd failed: %s", strerror(errno));
    }
    for (int t = 0; t < c->nthreads; t++) {
        int rc = pthread_create(&c->threads[t].tid, NULL, net_io_thread, &c->threads[t]);
        if (rc != 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "net/socket: cannot start a helper thread: %s", strerror(rc));
        c->threads[t].started = 1;
    }
    LOG_INFO(SUB_ALL, "net/socket: %s comm with %s: %d socket(s), %d helper thread(s), %s",
             is_send ? "send" : "recv", peer, nsocks, c->nthreads,
             checksum ? (crc32c_hw() ? "CRC-32C checksums (SSE4.2)" : "CRC-32C checksums (table)") : "no checksums");
    *out = c;
    c = NULL;
out:
    net_sock_comm_destroy(c);
    return res;
}

ccl_result_t net_sock_comm_progress(void *comm, int *inline_io)
{
    net_sock_comm_t *c = comm;
    *inline_io = c->nthreads == 0;
    if (*inline_io)
        net_io_progress_inline(c);
    return CCL_SUCCESS;
}

int net_sock_comm_pollfds(void *comm, struct pollfd *pfds, int max)
{
    const net_sock_comm_t *c = comm;
    int n = 0;
    if (c->nthreads > 0 || atomic_load_explicit(&c->failed, memory_order_acquire))
        return 0;
    /* The caller's last calls moved every socket as far as it could go:
     * one with a message in progress waits for the kernel. */
    for (int j = 0; j < c->nsocks && n < max; j++)
        if (c->socks[j].req && !c->socks[j].eof)
            pfds[n++] = (struct pollfd){c->socks[j].fd, c->is_send ? POLLOUT : POLLIN, 0};
    /* While messages are awaited, the keepalive socket's error wakes us. */
    if (n > 0 && n < max && c->watch_fd >= 0 && !c->watch_eof)
        pfds[n++] = (struct pollfd){c->watch_fd, POLLIN, 0};
    return n;
}

const char *net_sock_comm_peer(const net_sock_comm_t *c) { return c->peer; }

ccl_result_t net_sock_post(net_sock_comm_t *c, void *data, size_t size, uint32_t tag,
                           net_sock_req_t **out)
{
    *out = NULL;
    if (c->nthreads == 0)
        net_io_progress_inline(c); /* moves sockets past old slots, too */
    if (atomic_load_explicit(&c->failed, memory_order_acquire))
        return net_io_failure(c);
    if (size > 0 && !data)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "net/socket: NULL buffer for %zu bytes", size);
    uint64_t seq = c->posted_local;
    net_sock_req_t *r = &c->reqs[seq % NET_SOCK_MAX_REQS];
    if (r->in_use)
        return CCL_SUCCESS; /* max_requests in flight: the caller retries */
    if (seq >= NET_SOCK_MAX_REQS) {
        for (int j = 0; j < c->nsocks; j++)
            if (atomic_load_explicit(&c->socks[j].cur, memory_order_acquire) <= seq - NET_SOCK_MAX_REQS)
                return CCL_SUCCESS; /* a socket still looks at the slot's last message */
    }
    r->comm = c;
    r->seq = seq;
    r->data = data;
    r->cap = size;
    r->tag = tag;
    r->in_use = 1;
    atomic_store_explicit(&r->pieces_done, 0, memory_order_relaxed);
    if (c->is_send) {
        r->size = size;
        net_io_layout(r, c->nsocks);
        atomic_store_explicit(&r->hdr_ready, 1, memory_order_relaxed);
    } else {
        r->size = 0;
        atomic_store_explicit(&r->hdr_ready, 0, memory_order_relaxed);
    }
    c->posted_local = seq + 1;
    /* Publishes the slot to the helpers (they read posted with acquire). */
    atomic_store_explicit(&c->posted, seq + 1, memory_order_release);
    if (c->nthreads > 0)
        net_io_wake(c);
    else
        net_io_progress_inline(c);
    *out = r;
    return CCL_SUCCESS;
}

ccl_result_t net_sock_test(net_sock_req_t *r, int *done, size_t *size)
{
    *done = 0;
    if (!r->in_use)
        return err_set(CCL_ERR_INVALID_USAGE, "net/socket: test on a request that already completed");
    net_sock_comm_t *c = r->comm;
    if (c->nthreads == 0)
        net_io_progress_inline(c); /* also looks at the keepalive socket */
    int failed = atomic_load_explicit(&c->failed, memory_order_acquire);
    /* Requests complete in order: a later one may have all its stripes
     * while an earlier one still waits for some. */
    while (c->completed < c->posted_local) {
        net_sock_req_t *q = &c->reqs[c->completed % NET_SOCK_MAX_REQS];
        if (!atomic_load_explicit(&q->hdr_ready, memory_order_acquire) ||
            atomic_load_explicit(&q->pieces_done, memory_order_acquire) < q->npieces)
            break;
        c->completed++;
    }
    /* A request that completed before the comm failed is still done: the
     * peer's last message arrives even when it closes right after it. */
    if (r->seq < c->completed) {
        *done = 1;
        if (size)
            *size = r->size;
        r->in_use = 0;
        return CCL_SUCCESS;
    }
    if (failed || r->seq >= atomic_load(&c->closed_at))
        return net_io_failure(c);
    return CCL_SUCCESS;
}
