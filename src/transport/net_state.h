/*
 * net_state.h - what the net transport's own files share (not for others:
 * they see net.h): the state of one net_t and of each connection, between
 * the proxy (net.c) and the connection setup (net_setup.c).
 *
 * It includes the headers of what that state is made of, not net.h: the
 * proxy's module (net.h, net.c) and the setup's read it, and a way back
 * into net.h would make the two modules include each other.
 */
#ifndef CCL_TRANSPORT_NET_STATE_H
#define CCL_TRANSPORT_NET_STATE_H

#include "bootstrap/bootstrap.h"
#include "transport/net_hello.h"
#include "transport/net_plugin.h"
#include "transport/shm.h"

#include <pthread.h>
#include <stdatomic.h>

#define NET_ERR_MAX 512

/* net.h's opaque handle, defined here (the typedef repeats net.h's). */
typedef struct net net_t;

/* One direction of the connection to one peer, as the proxy sees it. With
 * a duplex plugin both directions' entries hold the same pcomm. */
typedef struct {
    int peer;
    int is_send;
    void *pcomm;       /* the plugin's send or recv comm */
    void *mh;          /* the FIFO slots registered on pcomm */
    shm_conn_t end;    /* the proxy's end of the FIFO; end.pos counts finished slots */
    uint32_t posted;   /* slots handed to the plugin */
    void *req[SHM_MAX_SLOTS];
    int bye;           /* send: goodbye posted; recv: goodbye received */
    void *bye_req;
    net_hello_t hello; /* setup only */
    void *hello_req;
    int hello_done;
    int broken;        /* the plugin failed this connection: nothing more to say on it */
    /* After a failure, send: 0 nothing said, 1 goodbye posted, 2 notice
     * posted, 3 done or given up. After a goodbye, recv: 0 no notice
     * looked for, 1 its receive is posted, 2 resolved. */
    int farewell;
    void *note_req;
    char *note;        /* where the notice lands */
    char *note_own;    /* recv: a buffer of ours for it, when no slot was posted */
} net_conn_t;

struct net {
    net_plugin_t *plugin;
    int dev;                 /* the plugin device this rank listens and connects on (net_dev.h) */
    int rank, nranks;
    const bs_peer_t *peers;
    net_conn_t *conns;       /* nconns: for each remote peer, its send then its recv */
    int nconns;
    uint32_t nslots;
    size_t slot_size;
    int spin, yield;
    int poll_plugin;         /* no CCL_NET_CAP_ACTIVITY: nothing rings the doorbell, look every few ms */
    int inline_io;           /* a comm moves data only inside our calls (the plugin's progress) */
    /* One plugin comm per remote peer carries both directions
     * (CCL_NET_CAP_DUPLEX): a peer's send and recv entries share pcomm. */
    int duplex;
    struct pollfd *pfds;     /* inline_io with pollfds: the bell's eventfd, then the comms' descriptors */
    pthread_t thread;
    int thread_started;
    _Atomic int stop;        /* net_destroy: say goodbye, then exit */
    _Atomic int poison;      /* net_poison: close everything now */
    _Atomic int poison_claimed;
    char poison_why[NET_ERR_MAX]; /* written by the claimer before poison is set */
    _Atomic int failed;
    _Atomic int fault_drop;        /* CCL_FAULT drop: end every connection as if cut */
    _Atomic uint64_t stall_until;  /* CCL_FAULT stall: clock_now_ns() deadline; UINT64_MAX: until stop */
    char err[NET_ERR_MAX];   /* written once, before failed is set */
    char root[NET_ERR_MAX];  /* what our notices say: err, or the notice that caused it */
    uint64_t farewell_since; /* proxy's: when it began telling its peers */
    char pending[NET_ERR_MAX]; /* proxy's: a connection's failure, waiting out NET_NOTICE_GRACE_NS */
    uint64_t pending_since;    /* proxy's: 0 when none */
    int closed;              /* proxy's: the plugin comms are closed */
    /* Held by whoever moves messages through the plugin: the proxy, or a
     * calling thread that drives them while it waits (net_drive). */
    pthread_mutex_t drive_lock;
    _Atomic int drivers;     /* callers inside net_drive_begin/end on this net */
};

static inline const ccl_net_v2_t *net_fns(const net_t *net) { return net->plugin->net; }

static inline const char *net_peer_host(const net_t *net, int q) { return net->peers[q].hostname; }

#endif
