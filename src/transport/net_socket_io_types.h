/*
 * net_socket_io_types.h - the TCP plugin's message header and limits, and
 * the state of its data path, shared by its files (net_socket_io.c:
 * requests, sockets, helper threads; net_socket_io_crc.c: checksums).
 * Declares no functions; the protocol is described in net_socket_io.h.
 */
#ifndef CCL_TRANSPORT_NET_SOCKET_IO_TYPES_H
#define CCL_TRANSPORT_NET_SOCKET_IO_TYPES_H

#include "ccl.h"
#include "ccl_net.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Sockets per connection: the data sockets of all helper threads together,
 * and the keepalive socket. */
#define NET_SOCK_MAX_SOCKS 16
_Static_assert(NET_SOCK_MAX_SOCKS <= CCL_NET_MAX_POLLFDS, "pollfds returns one per socket");
#define NET_SOCK_MAX_REQS 32
/* Smallest stripe: below it one socket moves the message as fast as several. */
#define NET_SOCK_MIN_STRIPE (64 * 1024)

#define NET_SOCK_MSG_MAGIC 0x2067736du /* "msg " */
/* Heads every message, on the message's lead socket. What a peer sends:
 * checked by net_sock_msg_hdr_parse before use (fuzzed in tests/fuzz/). */
typedef struct {
    uint32_t magic;
    uint32_t tag;
    uint64_t seq;        /* message number on this connection, from 0 */
    uint64_t size;       /* bytes of the whole message */
} net_sock_msg_hdr_t;

typedef struct net_sock_comm net_sock_comm_t;
typedef struct net_sock_req net_sock_req_t;

/* How one step on a socket ended. */
enum {
    NET_IO_IDLE,   /* nothing posted for this socket */
    NET_IO_WANT,   /* blocked: the kernel buffer is full (send) or empty (recv) */
    NET_IO_MORE,   /* can go on at once: gave the other sockets a turn */
    NET_IO_FAILED  /* the comm failed (message recorded) */
};
/* send/recv calls one step may make on a socket before the next socket of
 * the same thread gets a turn; stripes then advance side by side. */
#define NET_IO_CALLS_PER_STEP 4
/* A helper that sleeps looks again after this long even if nothing woke it:
 * a safety net, not the mechanism. */
#define NET_IO_SLEEP_MS 1000
/* How often the keepalive socket is looked at by a caller that moves the
 * data itself (a helper thread polls it instead). */
#define NET_IO_WATCH_NS (100 * 1000000ull)
/* Stripes are whole pages, which keeps the kernel's copies aligned. */
#define NET_IO_STRIPE_ALIGN 4096
/* Receive sockets read ahead into a buffer of this size: a small message's
 * header and data, sent in one sendmsg, arrive in one recv instead of two.
 * What is left of a piece at least this big is read straight into place. */
#define NET_IO_STAGE_SIZE (32 * 1024)
/* A sender takes the checksum of at most this much of a piece ahead of
 * what it hands the kernel: the bytes are still in cache when the kernel
 * copies them, and a piece of up to this size (a 1 MiB slot's stripe)
 * goes out with its trailer in one call. 128 KiB cost 1.23x the time of
 * no checksums at 64 MiB, 512 KiB 1.09x (perf/RESULTS.md): fewer calls. */
#define NET_IO_CRC_AHEAD (512 * 1024)

struct net_sock_req {
    net_sock_comm_t *comm;
    uint64_t seq;
    char *data;
    size_t cap;             /* send: size; receive: bytes posted */
    uint32_t tag;
    int in_use;             /* caller's: posted, not yet reported done */
    /* Receive: written by the lead socket's helper before hdr_ready. */
    size_t size;
    size_t stripe;
    int npieces;            /* stripes, or 1 for an empty message (header only) */
    _Atomic int hdr_ready;  /* sends: at once */
    _Atomic int pieces_done;
};

/* One socket; everything but cur belongs to the thread that owns it. */
typedef struct {
    int fd;
    int index;
    _Atomic uint64_t cur;   /* next message to look at; read by the caller to reuse slots */
    net_sock_req_t *req;    /* the message of the piece in progress, NULL when none */
    int piece;
    net_sock_msg_hdr_t hdr;
    size_t hdr_left;        /* header bytes still to send or receive */
    char *ptr;
    size_t left;
    int eof;                /* the peer closed it between two messages */
    /* Receive: bytes read from the socket and not yet consumed,
     * stage[stage_rd..stage_wr); the stream's next bytes come from here first. */
    char *stage;
    size_t stage_rd, stage_wr;
    /* Checksums (comm->checksum): the piece's CRC-32C so far, over its seed
     * (net_io_seed) and its data up to crc_at (send: what may go out);
     * then its trailer. */
    uint32_t crc;
    char *crc_at;
    uint32_t trail;
    size_t trail_left;
    /* CCL_FAULT corrupt_wire (send): the piece's first byte, changed,
     * goes out instead of the real one, after the checksum was taken. */
    unsigned char flip;
    size_t flip_left;
} net_sock_t;

typedef struct {
    net_sock_comm_t *comm;
    int index;
    int efd;                /* written to wake the thread from poll() */
    int started;
    pthread_t tid;
    _Atomic int sleeping;
} net_sock_thread_t;

struct net_sock_comm {
    int is_send;
    int nsocks;
    int nthreads;           /* 0: the caller's calls do the I/O */
    int silence_s;          /* the sockets' keepalive limit, for messages */
    int checksum;           /* every piece ends with a CRC-32C trailer (net_socket_io.h) */
    /* Receive: the connection's keepalive socket (net_socket.c), idle both
     * ways, so TCP keepalive probes it even while the data sockets have
     * unacknowledged data (which stops their probes): its error is how a
     * dead host or a cut link shows. -1 when none; closed with the comm. */
    int watch_fd;
    int watch_eof;          /* the peer closed it: nothing more to learn */
    uint64_t watch_next;    /* caller's: when to look at it next */
    char peer[128];
    net_sock_t socks[NET_SOCK_MAX_SOCKS];
    net_sock_thread_t threads[NET_SOCK_MAX_SOCKS];
    net_sock_req_t reqs[NET_SOCK_MAX_REQS];
    uint64_t posted_local;  /* caller's copy of posted */
    uint64_t completed;     /* caller's: requests below this are done */
    _Atomic uint64_t posted;
    /* Bumped by every post and every header read, so a thread about to
     * sleep can tell whether something changed since it last looked. */
    _Atomic uint64_t gen;
    _Atomic int stop;
    _Atomic int failed;
    /* The peer closed the connection between messages: messages from this
     * one on cannot come, earlier ones may still be completing on the
     * other sockets. UINT64_MAX while open. */
    _Atomic uint64_t closed_at;
    pthread_mutex_t fail_lock;
    ccl_result_t fail_code;
    char fail_msg[512];
};

#endif
