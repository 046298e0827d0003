/*
 * net.c - the net transport's proxy thread, which moves FIFO slots through
 * the net plugin (see net.h), and the life cycle around it (create, poison,
 * faults, destroy). Connections are made by net_setup.c; the proxy speaks
 * to every plugin, the built-in TCP one included, only through the
 * ccl_net_v2_t of include/ccl_net.h.
 *
 * Slots. Message k on a connection is FIFO slot k: the tag is k (the plugin
 * checks that both ends agree), the size is the slice the executor posted.
 * A send slot is handed back to the executor (head) when the plugin reports
 * the send done; a receive slot is published (tail) when its data is in.
 * Slices are never empty, so an empty message is free to mean goodbye: it
 * ends the stream, and a connection that closes after it is no failure.
 *
 * Failing. A rank whose connection fails (or whose collective fails or is
 * aborted) closes all its connections, so that its peers fail at once
 * instead of at their timeout. A close alone does not say why, and a peer
 * would blame the rank that closed rather than the dead rank or cut link
 * behind it; so first, for a moment, the rank says goodbye followed by one
 * more message, a notice holding the root cause, which the peer reports as
 * its own error. A goodbye followed by a close is a peer that destroyed its
 * communicator; followed by a notice, a peer that failed.
 *
 * Sleeping. With nothing to do the proxy sleeps on one process-wide
 * doorbell that the executor rings when it posts or frees a net slot and
 * that plugins with CCL_NET_CAP_ACTIVITY ring (the activity callback) when
 * a request completes. Plugins without it cannot ring it, so with one of
 * those the proxy also looks every few milliseconds. A plugin whose comms
 * move data only inside our own calls (inline progress, e.g. the socket
 * plugin with CCL_SOCKET_NTHREADS=0) must be called while data is in
 * flight: then the proxy sleeps in poll() on the descriptors its pollfds
 * gives and on an eventfd that the doorbell also rings (net_poll_sleep),
 * or, without pollfds, only yields. The doorbell is net_bell.c's.
 *
 * Callers drive. With such inline comms a hand-off to the proxy is most of
 * a small message's cost (thread switches on 2 cores), so an executor that
 * waits on the net moves the messages itself: net_drive runs the proxy's
 * progress on the calling thread, under drive_lock, which the proxy takes
 * too. Between net_drive_begin and end the bell is hushed (posts and
 * completions do not wake the proxy) and the proxy leaves the sockets to
 * the caller; at the end it takes over what is in flight. After a failure
 * callers stop driving: telling the peers and closing is the proxy's.
 */
#include "transport/net.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/param.h"
#include "transport/net_bell.h"
#include "transport/net_dev.h"
#include "transport/net_setup.h"
#include "transport/net_state.h"

#include <ctype.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long a failed rank tries to get its notices out before it closes
 * every connection: notices to peers that read go out in microseconds;
 * this only bounds the wait on peers that do not (a cut link). */
#define NET_FAREWELL_NS (250ull * 1000000ull)
/* How long a connection that failed under us waits for a notice before it
 * fails the comm with its own message. A peer that fails sends its notice,
 * then closes all its connections; closing one it still had data to read
 * on resets it, and we may see that reset before we have read the notice
 * on another connection. The notice names the cause (a dead rank behind
 * that peer), the reset only the peer. */
#define NET_NOTICE_GRACE_NS (200ull * 1000000ull)
/* A proxy asleep in poll() looks at its state at least this often. */
#define NET_POLL_MS 5

/* First failure wins: record it, poison every FIFO so the executor's waits
 * end, and let the loop tell the peers and close the plugin comms. root is
 * what the notices to our peers will say: a peer's notice that caused this
 * failure is passed on as it came, so that the cause never drowns in a
 * chain of "rank x failed because rank y failed". NULL: our own message. */
static void net_fail(net_t *net, const char *root, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void net_fail(net_t *net, const char *root, const char *fmt, ...)
{
    if (atomic_load(&net->failed))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(net->err, sizeof net->err, fmt, ap);
    va_end(ap);
    snprintf(net->root, sizeof net->root, "%s", root ? root : net->err);
    atomic_store(&net->failed, 1);
    LOG_INFO(SUB_NET, "net: %s", net->err);
    for (int i = 0; i < net->nconns; i++)
        shm_conn_poison(&net->conns[i].end, NULL);
}

/* A connection failed: it is done with, and its message becomes the comm's
 * failure unless a notice arrives first (net_fail_pending). */
static void net_fail_call(net_t *net, net_conn_t *c, ccl_result_t code, const char *what)
{
    net_plugin_error(net->plugin, code);
    c->broken = 1;
    if (net->pending_since || atomic_load(&net->failed))
        return;
    if (code == CCL_ERR_CORRUPT) {
        /* Name the link: which ranks, hosts, transport and device; the
         * mark makes it CCL_ERR_CORRUPT on the ranks that hear of it. */
        const ccl_net_v2_t *fn = net_fns(net);
        ccl_net_props_t props = {0};
        if (fn->get_properties(0, &props) != CCL_SUCCESS || !props.name)
            props.name = "?";
        snprintf(net->pending, sizeof net->pending,
                 "rank %d (%s): data from rank %d (%s) " ERR_CORRUPT_MARK " on the link %d->%d (net/%s, device 0 %s): %s",
                 net->rank, net_peer_host(net, net->rank), c->peer, net_peer_host(net, c->peer), c->peer, net->rank,
                 fn->name, props.name, err_message());
    } else
        snprintf(net->pending, sizeof net->pending, "rank %d: %s rank %d (%s) failed: %s", net->rank, what, c->peer,
                 net_peer_host(net, c->peer), err_message());
    net->pending_since = clock_now_ns();
    LOG_INFO(SUB_NET, "net: %s (waiting briefly for a notice that says why)", net->pending);
}

/* The pending failure becomes the comm's once its grace is over, or at once
 * when no connection is left that could still bring a notice. */
static void net_fail_pending(net_t *net)
{
    if (!net->pending_since || atomic_load(&net->failed))
        return;
    int listening = 0;
    for (int i = 0; i < net->nconns && !listening; i++) {
        const net_conn_t *c = &net->conns[i];
        listening = !c->is_send && !c->broken && c->farewell < 2;
    }
    if (!listening || clock_now_ns() - net->pending_since > NET_NOTICE_GRACE_NS)
        net_fail(net, NULL, "%s", net->pending);
}

static void net_close_comms(net_t *net)
{
    const ccl_net_v2_t *fn = net_fns(net);
    for (int i = 0; i < net->nconns; i++) {
        net_conn_t *c = &net->conns[i];
        if (c->pcomm && c->mh && fn->dereg_mr(c->pcomm, c->mh) != CCL_SUCCESS)
            net_plugin_error(net->plugin, CCL_ERR_SYSTEM); /* logged; the comm closes next */
        c->mh = NULL;
    }
    for (int i = 0; i < net->nconns; i++) {
        net_conn_t *c = &net->conns[i];
        if (c->pcomm)
            (c->is_send ? fn->close_send : fn->close_recv)(c->pcomm);
        /* A duplex comm is closed once: its recv entry follows. */
        if (c->is_send && i + 1 < net->nconns && net->conns[i + 1].pcomm == c->pcomm)
            net->conns[i + 1].pcomm = NULL;
        c->pcomm = NULL;
    }
}

/* Hands slot c->posted to the plugin: 1 posted, 0 the plugin takes no
 * more now, -1 failed. */
static int net_post_slot(net_t *net, net_conn_t *c)
{
    const ccl_net_v2_t *fn = net_fns(net);
    void *req = NULL, *data = shm_slot_at(&c->end, c->posted), *mh = c->mh;
    uint32_t tag = c->posted;
    ccl_result_t res;
    if (c->is_send) {
        /* A reference slot: the data stays in the user's buffer, which the
         * executor keeps unchanged until we report the send done. */
        if (shm_slot_is_ref_at(&c->end, c->posted)) {
            shm_ref_t ref;
            memcpy(&ref, data, sizeof ref);
            data = (void *)(uintptr_t)ref.vaddr;
            mh = NULL;
        }
        res = fn->isend(c->pcomm, data, shm_slot_len_at(&c->end, c->posted), tag, mh, &req);
    } else {
        size_t size = net->slot_size;
        res = fn->irecv(c->pcomm, 1, &data, &size, &tag, &mh, &req);
    }
    if (res != CCL_SUCCESS) {
        net_fail_call(net, c, res, c->is_send ? "sending to" : "receiving from");
        return -1;
    }
    if (!req)
        return 0;
    c->req[c->posted % net->nslots] = req;
    c->posted++;
    return 1;
}

/* Tests the oldest slot in flight: 1 done (*got: its size), 0 not yet,
 * -1 failed. */
static int net_test_slot(net_t *net, net_conn_t *c, size_t *got)
{
    int done = 0;
    ccl_result_t res = net_fns(net)->test(c->req[c->end.pos % net->nslots], &done, got);
    if (res != CCL_SUCCESS) {
        net_fail_call(net, c, res, c->is_send ? "sending to" : "receiving from");
        return -1;
    }
    return done;
}

/* The message after a peer's goodbye (message end.pos): empty when the
 * peer destroyed its communicator, the cause when it failed. Returns 1 once
 * resolved, 0 while it has not arrived, -1 when it was a failure. */
static int net_read_trailer(net_t *net, net_conn_t *c)
{
    const ccl_net_v2_t *fn = net_fns(net);
    const char *host = net_peer_host(net, c->peer);
    uint32_t n = c->end.pos + 1;
    int done = 0;
    size_t got = 0;
    if (c->farewell == 0) {
        if (c->posted > n) {
            /* Already posted into a free slot, like any message. */
            c->note_req = c->req[n % net->nslots];
            c->note = shm_slot_at(&c->end, n);
        } else {
            if (!c->note_own)
                c->note_own = malloc(NET_ERR_MAX);
            void *data = c->note_own;
            size_t size = NET_ERR_MAX;
            uint32_t tag = n;
            if (!data || fn->irecv(c->pcomm, 1, &data, &size, &tag, NULL, &c->note_req) != CCL_SUCCESS)
                goto destroyed; /* it is gone already: a goodbye is all we got */
            if (!c->note_req)
                return 0;
            c->note = c->note_own;
        }
        c->farewell = 1;
    }
    if (fn->test(c->note_req, &done, &got) != CCL_SUCCESS)
        goto destroyed;
    if (!done)
        return 0;
    c->farewell = 2;
    if (got > 0) {
        /* The peer's text: printable characters only, and terminated. */
        char note[NET_ERR_MAX];
        size_t len = 0;
        for (; len < got && len + 1 < sizeof note && c->note[len]; len++)
            note[len] = isprint((unsigned char)c->note[len]) ? c->note[len] : '?';
        note[len] = '\0';
        net_fail(net, note, "rank %d: rank %d (%s) gave up: %s", net->rank, c->peer, host, note);
        return -1;
    }
destroyed:
    /* Only a wait on this connection ends (a collective that still expects
     * data from the peer); the others carry on, e.g. p2p between the
     * remaining ranks. Receives posted after the goodbye never complete. */
    c->farewell = 2;
    char why[128];
    snprintf(why, sizeof why, "rank %d (%s) destroyed its communicator", c->peer, host);
    shm_conn_poison(&c->end, why);
    LOG_INFO(SUB_NET, "rank %d: %s", net->rank, why);
    return 1;
}

/* Moves what can move on one connection; returns the number of events
 * (posts and completions), -1 on failure. */
static int net_progress(net_t *net, net_conn_t *c)
{
    int events = 0, r;
    if (c->broken)
        return 0;
    /* Sends: every slot the executor posted. Receives: every free slot. */
    uint32_t limit = shm_peer_count(&c->end) + (c->is_send ? 0 : net->nslots);
    while (!c->bye && c->posted != limit && (r = net_post_slot(net, c)) != 0) {
        if (r < 0)
            return -1;
        events++;
    }
    size_t got = 0;
    while (!c->bye && c->end.pos != c->posted && (r = net_test_slot(net, c, &got)) != 0) {
        if (r < 0)
            return -1;
        events++;
        if (c->is_send)
            shm_recv_done(&c->end); /* the slot is the executor's again */
        else if (got == 0)
            c->bye = 1; /* goodbye: its trailer says why (net_read_trailer) */
        else
            shm_send_post(&c->end, SHM_SLOT_DATA, got);
    }
    if (c->bye && !c->is_send && c->farewell < 2) {
        r = net_read_trailer(net, c);
        if (r < 0)
            return -1;
        events += r;
    }
    return events;
}

/* Says goodbye on send connection c: an empty message, then the trailer
 * (note, len bytes; empty for a destroy). Returns 1 once both have left or
 * the connection failed (nothing more can be said on it), 0 meanwhile. */
static int net_say_goodbye(net_t *net, net_conn_t *c, const char *note, size_t len)
{
    const ccl_net_v2_t *fn = net_fns(net);
    if (c->farewell == 3 || c->broken || !c->pcomm)
        return 1;
    ccl_result_t res = CCL_SUCCESS;
    if (c->farewell == 0) {
        res = fn->isend(c->pcomm, &c->hello, 0, c->posted, NULL, &c->bye_req);
        if (res == CCL_SUCCESS && c->bye_req) {
            c->bye = 1; /* nothing more of the executor's goes out */
            c->farewell = 1;
        }
    }
    if (res == CCL_SUCCESS && c->farewell == 1) {
        res = fn->isend(c->pcomm, len ? note : (const char *)&c->hello, len, c->posted + 1, NULL, &c->note_req);
        if (res == CCL_SUCCESS && c->note_req)
            c->farewell = 2;
    }
    if (res == CCL_SUCCESS && c->farewell == 2) {
        /* Requests complete in order: the trailer done means all is out. */
        int done = 0;
        res = fn->test(c->note_req, &done, NULL);
        if (res == CCL_SUCCESS && done)
            c->farewell = 3;
    }
    if (res != CCL_SUCCESS)
        c->farewell = 3; /* the peer is gone: nothing left to say */
    return c->farewell == 3;
}

/* Destroy: every slot the executor posted has left, then a goodbye with an
 * empty trailer tells each peer we are done (not failed). Returns the
 * connections still busy. A peer that destroyed its comm first has closed
 * its end, and our goodbye to it fails: that is no news, so not a WARN. */
static int net_goodbye(net_t *net)
{
    int pending = 0;
    int was = err_expected(1);
    for (int i = 0; i < net->nconns; i++) {
        net_conn_t *c = &net->conns[i];
        if (!c->is_send)
            continue;
        if (c->farewell == 0 && (c->end.pos != c->posted || c->posted != shm_peer_count(&c->end)))
            pending++;
        else
            pending += !net_say_goodbye(net, c, NULL, 0);
    }
    err_expected(was);
    return pending;
}

/* Failure: a goodbye whose trailer is the root cause, on every connection
 * still standing, whatever was in flight (it goes out first). Returns the
 * connections still busy. */
static int net_farewell(net_t *net)
{
    /* The peer posted its receive for a slot (or our NET_ERR_MAX). */
    size_t len = strlen(net->root) + 1;
    if (len > net->slot_size)
        len = net->slot_size;
    int pending = 0;
    for (int i = 0; i < net->nconns; i++)
        if (net->conns[i].is_send)
            pending += !net_say_goodbye(net, &net->conns[i], net->root, len);
    return pending;
}

static ccl_result_t net_sleep_check(void *arg, uint64_t waited_ns)
{
    net_t *net = arg;
    (void)waited_ns;
    if (atomic_load(&net->stop) || atomic_load(&net->poison))
        return CCL_ERR_ABORTED;
    /* Only plugins with CCL_NET_CAP_ACTIVITY ring the doorbell on completions. */
    return net->poll_plugin ? CCL_IN_PROGRESS : CCL_SUCCESS;
}

/* Inline comms: nobody else moves their data, so we sleep until one of
 * them can move (its pollfds), or the doorbell rings (an executor posted, a
 * destroy or abort began); net_bell_poll keeps a ring from being lost
 * between our last look and the poll. */
static void net_poll_sleep(net_t *net, uint32_t seen)
{
    int n = 0;
    net->pfds[n++] = (struct pollfd){net_bell_fd(), POLLIN, 0};
    int (*pollfds)(void *, struct pollfd *, int) = net_fns(net)->pollfds;
    /* While callers drive, they read the sockets: we would only wake to
     * find nothing (and take their CPU). */
    for (int i = 0; atomic_load(&net->drivers) == 0 && i < net->nconns; i++) {
        net_conn_t *c = &net->conns[i];
        if (net->duplex && !c->is_send)
            continue; /* the send entry's comm gave both directions' */
        if (c->pcomm && !c->broken)
            n += pollfds(c->pcomm, net->pfds + n, CCL_NET_MAX_POLLFDS);
    }
    net_bell_poll(net->pfds, n, seen, NET_POLL_MS);
}

/* Asks each comm whether it moves data only inside our calls (inline
 * progress); if one does and the plugin gives poll descriptors, sets up
 * the proxy's poll() on them. */
static ccl_result_t net_inline_setup(net_t *net)
{
    ccl_result_t res = CCL_SUCCESS;
    const ccl_net_v2_t *fn = net_fns(net);
    for (int i = 0; fn->progress && i < net->nconns; i++) {
        int inline_io = 0;
        CCL_TRY(net_plugin_error(net->plugin, fn->progress(net->conns[i].pcomm, &inline_io)));
        net->inline_io |= inline_io;
    }
    if (net->inline_io && fn->pollfds) {
        int bell_fd = net_bell_fd();
        net->pfds = calloc((size_t)net->nconns * CCL_NET_MAX_POLLFDS + 1, sizeof *net->pfds);
        if (bell_fd < 0 || !net->pfds)
            CCL_FAIL(CCL_ERR_SYSTEM, "rank %d: cannot set up the net proxy's poll (inline progress): %s", net->rank,
                     bell_fd < 0 ? "no eventfd" : "out of memory");
    }
out:
    return res;
}

/* A hint, read without the lock: a send slot posted by the executor and
 * not yet reported done. */
static int net_sends_in_flight(net_t *net)
{
    for (int i = 0; i < net->nconns; i++) {
        net_conn_t *c = &net->conns[i];
        if (c->is_send && c->end.pos != shm_peer_count(&c->end))
            return 1;
    }
    return 0;
}

int net_drivable(const net_t *net)
{
    return net && net->inline_io;
}

void net_drive_begin(net_t *net)
{
    if (net_drivable(net)) {
        atomic_fetch_add(&net->drivers, 1);
        net_bell_hush(1);
    }
}

void net_drive_end(net_t *net, int push)
{
    if (net_drivable(net)) {
        /* A last push: a small send posted by the call's final steps
         * usually leaves at once, and the proxy need not be woken for it.
         * Not after a failed call: a plugin call failing now would replace
         * the message the caller is about to report. */
        if (push)
            net_drive(net);
        atomic_fetch_sub(&net->drivers, 1);
        net_bell_hush(-1);
        /* Whatever we left in flight is the proxy's again: wake it when a
         * send is unfinished (receives it finds on its next look, within
         * NET_POLL_MS, or the next call drives them). */
        if (net_sends_in_flight(net))
            net_activity_bump();
    }
}

/* CCL_FAULT=stall: this rank's network progress stops, whoever drives
 * it (the proxy and callers alike), as a hung progress engine would. */
static int net_stalled(net_t *net)
{
    uint64_t stall = atomic_load(&net->stall_until);
    return stall && clock_now_ns() < stall;
}

int net_drive(void *arg)
{
    net_t *net = arg;
    /* After a failure, the proxy alone tells the peers and closes. */
    if (!net_drivable(net) || atomic_load(&net->failed) || atomic_load(&net->stop) || atomic_load(&net->poison) ||
        net_stalled(net))
        return 0;
    if (pthread_mutex_trylock(&net->drive_lock) != 0)
        return 0;
    int events = 0;
    for (int i = 0; i < net->nconns && !atomic_load(&net->failed); i++) {
        int e = net_progress(net, &net->conns[i]);
        events += e > 0 ? e : 0;
    }
    pthread_mutex_unlock(&net->drive_lock);
    return events;
}

static void *net_proxy_main(void *arg)
{
    net_t *net = arg;
    log_set_rank(net->rank);
    uint64_t stop_since = 0;
    for (;;) {
        uint32_t seen = net_bell_seen();
        if (atomic_load(&net->poison) && !atomic_load(&net->failed))
            net_fail(net, NULL, "%s", net->poison_why);
        if (atomic_load(&net->fault_drop) && !atomic_load(&net->failed))
            net_fail(net, NULL, "rank %d (%s): CCL_FAULT dropped this rank's network connections", net->rank,
                     net_peer_host(net, net->rank));
        if (atomic_load(&net->stall_until) && !atomic_load(&net->stop) && !atomic_load(&net->poison)) {
            if (net_stalled(net)) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
                continue;
            }
            atomic_store(&net->stall_until, 0);
        }
        int events = 0;
        /* A caller driving this net does the progress now: no need to
         * wait for it (a futex wake each time); the bell brings us back. */
        int driven = atomic_load(&net->drivers) > 0 && !atomic_load(&net->failed);
        if (!driven)
            pthread_mutex_lock(&net->drive_lock);
        else if (pthread_mutex_trylock(&net->drive_lock) != 0)
            goto idle;
        if (!atomic_load(&net->failed)) {
            /* A connection that fails leaves the others going: one of
             * them may bring the notice that says why. */
            for (int i = 0; i < net->nconns && !atomic_load(&net->failed); i++) {
                int e = net_progress(net, &net->conns[i]);
                events += e > 0 ? e : 0;
            }
            net_fail_pending(net);
        }
        pthread_mutex_unlock(&net->drive_lock);
        if (atomic_load(&net->failed) && !net->closed) {
            /* Tell the peers why, then close: they fail now, not at their
             * timeout, and name the cause. */
            uint64_t now = clock_now_ns();
            if (!net->farewell_since)
                net->farewell_since = now;
            /* The lock: a caller that was inside net_drive when we failed
             * has left the plugin before we talk through it. */
            pthread_mutex_lock(&net->drive_lock);
            int telling = net_farewell(net) > 0;
            pthread_mutex_unlock(&net->drive_lock);
            if (telling && now - net->farewell_since < NET_FAREWELL_NS) {
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
                continue;
            }
            pthread_mutex_lock(&net->drive_lock);
            net_close_comms(net);
            pthread_mutex_unlock(&net->drive_lock);
            net->closed = 1;
        }
        if (atomic_load(&net->stop)) {
            if (!stop_since)
                stop_since = clock_now_ns();
            /* Queued sends get the comm's timeout to leave, as any wait. */
            pthread_mutex_lock(&net->drive_lock);
            int left = atomic_load(&net->failed) ? 0 : net_goodbye(net);
            pthread_mutex_unlock(&net->drive_lock);
            if (atomic_load(&net->failed) || left == 0 ||
                clock_now_ns() - stop_since > 10ull * 1000000000ull)
                break;
            sched_yield();
            continue;
        }
        if (events > 0)
            continue;
    idle:
        if (net->pending_since && !atomic_load(&net->failed)) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (net->inline_io && !atomic_load(&net->failed)) {
            if (net->pfds)
                net_poll_sleep(net, seen);
            else
                sched_yield(); /* no descriptors to sleep on: keep testing */
            continue;
        }
        wait_policy_t pol = {net_sleep_check, net, net->spin, net->yield, NULL, NULL};
        net_bell_wait(seen, &pol);
        if (atomic_load(&net->failed) && !atomic_load(&net->stop) && !atomic_load(&net->poison)) {
            /* Nothing left to move: sleep until destroy, without spinning. */
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    net_close_comms(net);
    return NULL;
}

ccl_result_t net_create(bs_t *bs, int rank, int nranks, const int *remote, uint32_t nslots,
                        size_t slot_size, int spin, int yield, shm_conn_t *send_conns,
                        shm_conn_t *recv_conns, net_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    char *handles = NULL;
    void *listen_comm = NULL;
    *out = NULL;
    net_t *net = calloc(1, sizeof *net);
    if (!net)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    *net = (net_t){.rank = rank, .nranks = nranks, .peers = bs->peers, .nslots = nslots,
                   .slot_size = slot_size, .spin = spin, .yield = yield};
    pthread_mutex_init(&net->drive_lock, NULL);
    int nremote = 0;
    for (int q = 0; q < nranks; q++)
        nremote += remote[q] != 0;
    net->conns = calloc((size_t)nremote * 2 + 1, sizeof *net->conns);
    handles = calloc((size_t)nranks, CCL_NET_HANDLE_MAXSIZE);
    if (!net->conns || !handles)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for %d net connections", 2 * nremote);
    for (int q = 0, i = 0; q < nranks; q++) {
        if (!remote[q])
            continue;
        net->conns[i++] = (net_conn_t){.peer = q, .is_send = 1};
        net->conns[i++] = (net_conn_t){.peer = q, .is_send = 0};
    }
    net->nconns = 2 * nremote;
    CCL_TRY(net_plugin_get(&net->plugin));
    net->poll_plugin = !(net_fns(net)->caps & CCL_NET_CAP_ACTIVITY);
    net->duplex = (net_fns(net)->caps & CCL_NET_CAP_DUPLEX) && param_int(PARAM_NET_DUPLEX) != 0;
    const ccl_net_v2_t *fn = net_fns(net);
    if (net->plugin->ndev < 1)
        CCL_FAIL(CCL_ERR_SYSTEM, "rank %d: net plugin %s found no network device (check CCL_SOCKET_IFNAME), "
                 "but ranks on other hosts need one", rank, fn->name);
    int local_rank = 0, nlocal = 0;
    for (int q = 0; q < nranks; q++) {
        nlocal += !remote[q];
        local_rank += !remote[q] && q < rank;
    }
    char why[256];
    CCL_TRY(net_dev_pick(net->plugin, local_rank, nlocal, &net->dev, why, sizeof why));
    if (net->plugin->ndev > 1)
        LOG_INFO(SUB_NET, "rank %d: net device %d of %d: %s", rank, net->dev, net->plugin->ndev, why);
    res = net_plugin_error(net->plugin, fn->listen(net->dev, rank, handles + (size_t)rank * CCL_NET_HANDLE_MAXSIZE,
                                                   &listen_comm));
    if (res != CCL_SUCCESS) {
        err_prefix("rank %d: net listen: ", rank);
        goto out;
    }
    res = bs_allgather(bs, handles, CCL_NET_HANDLE_MAXSIZE);
    if (res == CCL_SUCCESS)
        res = net_setup_conns(net, bs, listen_comm, handles);
    fn->close_listen(listen_comm);
    listen_comm = NULL;
    /* Every rank holds all its connections (or failed) after this. */
    ccl_result_t bres = bs_barrier(bs);
    CCL_TRY(res);
    CCL_TRY(bres);
    CCL_TRY(net_inline_setup(net));
    for (int i = 0; i < net->nconns; i++) {
        net_conn_t *c = &net->conns[i];
        shm_conn_t *exec_end = c->is_send ? &send_conns[c->peer] : &recv_conns[c->peer];
        CCL_TRY(shm_conn_create_local(exec_end, &c->end, c->is_send, nslots, slot_size, net_bell_ring_soft));
        /* Slots registered once (RDMA plugins need it; the user buffers of
         * zero-copy sends go unregistered, the plugin sees to them). */
        res = net_plugin_error(net->plugin, fn->reg_mr(c->pcomm, c->end.slots, (size_t)nslots * slot_size,
                                                       CCL_NET_PTR_HOST, &c->mh));
        if (res != CCL_SUCCESS) {
            err_prefix("rank %d: registering the FIFO to rank %d: ", rank, c->peer);
            goto out;
        }
    }
    int rc = pthread_create(&net->thread, NULL, net_proxy_main, net);
    if (rc != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "cannot start the net proxy thread: %s", strerror(rc));
    net->thread_started = 1;
    LOG_INFO(SUB_NET, "rank %d: net plugin %s: connected to %d remote ranks (%s), %u slots of %zu bytes each way",
             rank, fn->name, nremote, net->duplex ? "one duplex connection each" : "one connection each way",
             nslots, slot_size);
    *out = net;
    net = NULL;
out:
    if (listen_comm)
        net_fns(net)->close_listen(listen_comm);
    free(handles);
    if (net) {
        for (int i = 0; i < net->nconns; i++)
            if (net->conns[i].end.fifo) {
                net_conn_t *c = &net->conns[i];
                shm_conn_close(c->is_send ? &send_conns[c->peer] : &recv_conns[c->peer]);
            }
        if (net->plugin)
            net_close_comms(net);
        net_destroy(net);
    }
    return res;
}

int net_failed(const net_t *net)
{
    return atomic_load(&net->failed);
}

const char *net_error(const net_t *net)
{
    return atomic_load(&net->failed) ? net->err : "";
}

void net_poison(net_t *net, const char *why)
{
    if (!net)
        return;
    /* The first caller's reason is the one the peers hear; it is written
     * before poison is set, and only by that caller. */
    if (atomic_exchange(&net->poison_claimed, 1) == 0) {
        snprintf(net->poison_why, sizeof net->poison_why, "%s",
                 why && why[0] ? why : "the communicator was aborted or a collective failed");
        atomic_store(&net->poison, 1);
    }
    net_activity_bump();
}

void net_fault_drop(net_t *net)
{
    atomic_store(&net->fault_drop, 1);
    net_activity_bump();
}

void net_fault_stall(net_t *net, int64_t ms)
{
    atomic_store(&net->stall_until, ms > 0 ? clock_now_ns() + (uint64_t)ms * 1000000ull : UINT64_MAX);
}

void net_fault_corrupt_wire(net_t *net)
{
    if (!net_plugin_fault_corrupt(net->plugin))
        LOG_WARN(SUB_ALL, "CCL_FAULT: corrupt_wire works on the built-in socket transport only, not on %s",
                 net_fns(net)->name);
}

void net_destroy(net_t *net)
{
    if (!net)
        return;
    if (net->thread_started) {
        atomic_store(&net->stop, 1);
        net_activity_bump();
        pthread_join(net->thread, NULL);
    }
    if (net->plugin) {
        net_close_comms(net);
        net_plugin_put(net->plugin);
    }
    for (int i = 0; i < net->nconns; i++)
        free(net->conns[i].note_own);
    free(net->conns);
    free(net->pfds);
    pthread_mutex_destroy(&net->drive_lock);
    free(net);
}
