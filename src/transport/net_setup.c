/*
 * net_setup.c - making the net transport's connections (net_create's part
 * before the proxy starts): every rank connects to every remote rank while
 * accepting the connections of the others, all in one non-blocking loop.
 *
 * Accepted connections do not say who is calling, so each connection's
 * first message is a hello carrying the caller's rank and the comm's
 * identity; only then are receive connections matched to peers.
 *
 * With a duplex plugin (net->duplex) each pair of ranks makes one
 * connection: the lower rank connects and says hello, the higher accepts,
 * and the one comm serves both of the peer's entries. An
 * accepted connection whose hello is wrong, fails, or names a peer already
 * connected is dropped with a warning, and the setup waits for the real one.
 */
#include "transport/net_setup.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/wait.h"
#include "transport/net_hello.h"
#include "transport/net_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Names the comm in hellos without revealing its secret: a hash of it. */
static uint64_t net_comm_id(const bs_t *bs)
{
    uint64_t h = 0xcbf29ce484222325ull ^ 0x6e6574; /* FNV-1a, salted "net" */
    for (int i = 0; i < BS_SECRET_BYTES; i++) {
        h ^= bs->secret[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Connects to every remote peer and accepts theirs, hellos included, before
 * the deadline. Both directions progress in one loop since every rank
 * connects and accepts at once. */
ccl_result_t net_setup_conns(net_t *net, bs_t *bs, void *listen_comm, char *handles)
{
    ccl_result_t res = CCL_SUCCESS;
    const ccl_net_v2_t *fn = net_fns(net);
    /* nremote: the connections we accept. */
    int nremote = 0, nmatched = 0, ninflight = 0;
    for (int i = 0; i < net->nconns; i += 2)
        nremote += !net->duplex || net->conns[i].peer < net->rank;
    /* Accepted connections whose hello has not been matched yet; pcomm
     * NULL marks a free entry. */
    net_conn_t *pending = calloc((size_t)nremote + 1, sizeof *pending);
    if (!pending)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    uint64_t deadline = clock_now_ns() + bs->timeout_ns;
    uint64_t comm_id = net_comm_id(bs);
    for (;;) {
        int waiting = 0, moved = 0;
        for (int i = 0; i < net->nconns; i += 2) {
            net_conn_t *c = &net->conns[i];
            if (net->duplex && c->peer < net->rank)
                continue; /* it connects to us */
            if (!c->pcomm) {
                res = fn->connect(net->dev, net->rank, handles + (size_t)c->peer * CCL_NET_HANDLE_MAXSIZE, &c->pcomm);
                if (res != CCL_SUCCESS) {
                    net_plugin_error(net->plugin, res);
                    err_prefix("rank %d: connecting to rank %d (%s): ", net->rank, c->peer, net_peer_host(net, c->peer));
                    goto out;
                }
                if (!c->pcomm) {
                    waiting++;
                    continue;
                }
                moved++;
                c->hello = (net_hello_t){NET_HELLO_MAGIC, comm_id, net->rank, net->nranks};
                if (net->duplex)
                    net->conns[i + 1].pcomm = c->pcomm;
            }
            if (!c->hello_req && !c->hello_done) {
                CCL_TRY(net_plugin_error(net->plugin, fn->isend(c->pcomm, &c->hello, sizeof c->hello, NET_HELLO_TAG,
                                                                NULL, &c->hello_req)));
                if (!c->hello_req) {
                    waiting++;
                    continue;
                }
            }
            if (!c->hello_done) {
                CCL_TRY(net_plugin_error(net->plugin, fn->test(c->hello_req, &c->hello_done, NULL)));
                waiting += !c->hello_done;
                moved += c->hello_done;
            }
        }
        while (nmatched + ninflight < nremote) {
            void *rc = NULL;
            CCL_TRY(net_plugin_error(net->plugin, fn->accept(listen_comm, &rc)));
            if (!rc)
                break;
            net_conn_t *p = pending;
            while (p->pcomm)
                p++; /* one is free: fewer than nremote are in flight */
            *p = (net_conn_t){.pcomm = rc};
            ninflight++;
            moved++;
        }
        waiting += nremote - nmatched - ninflight;
        for (int a = 0; a < nremote; a++) {
            net_conn_t *p = &pending[a];
            if (!p->pcomm)
                continue;
            if (!p->hello_req) {
                void *data = &p->hello;
                size_t size = sizeof p->hello;
                uint32_t tag = NET_HELLO_TAG;
                CCL_TRY(net_plugin_error(net->plugin, fn->irecv(p->pcomm, 1, &data, &size, &tag, NULL, &p->hello_req)));
                if (!p->hello_req) {
                    waiting++;
                    continue;
                }
            }
            size_t got = 0;
            char from[64];
            snprintf(from, sizeof from, "rank %d: dropped a net connection", net->rank);
            ccl_result_t tres = net_plugin_error(net->plugin, fn->test(p->hello_req, &p->hello_done, &got));
            if (tres == CCL_SUCCESS && !p->hello_done) {
                waiting++;
                continue;
            }
            moved++;
            net_hello_t h = {0}; /* set by a successful parse (zeroed for GCC under LTO) */
            net_conn_t *c = NULL;
            if (tres != CCL_SUCCESS)
                LOG_WARN(SUB_NET, "%s: its hello failed: %s", from, err_message());
            else if (net_hello_parse(&p->hello, got, comm_id, net->nranks, net->rank, from, &h) == CCL_SUCCESS) {
                for (int i = 1; i < net->nconns; i += 2)
                    if (net->conns[i].peer == h.rank)
                        c = &net->conns[i];
                if (!c)
                    LOG_WARN(SUB_NET, "%s: rank %d is on this host, not a net peer", from, (int)h.rank);
                else if (c->pcomm) {
                    LOG_WARN(SUB_NET, "%s: rank %d is connected already", from, (int)h.rank);
                    c = NULL;
                } else if (net->duplex && h.rank > net->rank) {
                    LOG_WARN(SUB_NET, "%s: rank %d connected, but we connect to it (a higher rank)", from,
                             (int)h.rank);
                    c = NULL;
                }
            }
            if (c) {
                c->pcomm = p->pcomm;
                if (net->duplex) { /* our send entry: the same comm, no hello of ours */
                    c[-1].pcomm = p->pcomm;
                    c[-1].hello_done = 1;
                }
                nmatched++;
            } else {
                fn->close_recv(p->pcomm); /* nothing to report: the connection is gone */
            }
            p->pcomm = NULL;
            ninflight--;
        }
        if (waiting == 0)
            break;
        if (wait_check_cancel("making net connections") != CCL_SUCCESS) {
            res = CCL_ERR_ABORTED;
            goto out;
        }
        if (clock_now_ns() > deadline) {
            for (int i = 0; i < net->nconns; i++)
                if (!net->conns[i].pcomm || (net->conns[i].is_send && !net->conns[i].hello_done))
                    CCL_FAIL(CCL_ERR_TIMEOUT, "rank %d: no net connection %s rank %d (%s) within %llu s (CCL_TIMEOUT)",
                             net->rank, net->conns[i].is_send ? "to" : "from", net->conns[i].peer,
                             net_peer_host(net, net->conns[i].peer),
                             (unsigned long long)(bs->timeout_ns / 1000000000ull));
            CCL_FAIL(CCL_ERR_TIMEOUT, "rank %d: net connections not complete within CCL_TIMEOUT", net->rank);
        }
        if (!moved) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
out:
    for (int a = 0; pending && a < nremote; a++)
        if (pending[a].pcomm)
            fn->close_recv(pending[a].pcomm);
    free(pending);
    return res;
}

