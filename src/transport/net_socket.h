/*
 * net_socket.h - the built-in TCP net plugin ("socket") and its wire format.
 *
 * net_socket.c implements the ccl_net_v2_t entry points (devices, the
 * connection handshake, registration); net_socket_io.c moves the messages.
 * A connection is several TCP sockets; each message is cut into at most one
 * stripe per socket and the stripes travel in parallel (see
 * net_socket_io.h). The formats below are what a peer may send during the
 * handshake (the message header of the data path is net_socket_io.h's): each
 * one is validated field by field before it is used, and they are here so
 * that the unit tests can forge them. Byte order is the host's: both ends
 * run the same build of ccl, as with the bootstrap.
 */
#ifndef CCL_TRANSPORT_NET_SOCKET_H
#define CCL_TRANSPORT_NET_SOCKET_H

#include "bootstrap/socket.h"
#include "ccl_net.h"

#include <stddef.h>
#include <stdint.h>

#define NET_SOCK_HANDLE_MAGIC 0x6b73636eu /* "ncsk" */
#define NET_SOCK_HELLO_MAGIC 0x6f6c6568u  /* "helo" */
#define NET_SOCK_WIRE_VERSION 3 /* 2: the last socket of a connection is its keepalive socket; 3: hello flags */
/* net_sock_hello_t.flags: every piece of every message carries a CRC-32C
 * trailer (net_socket_io.h), in both directions; the connector decides. */
#define NET_SOCK_HELLO_CHECKSUM 0x1u

/* What listen() writes into the opaque handle. The first part is for the
 * peer; connect() keeps its progress in the rest (its own process only). */
typedef struct {
    uint32_t magic;
    uint32_t version;
    int32_t rank;        /* the listener's rank, -1 when not given */
    uint32_t reserved;
    uint64_t listen_id;  /* random: a hello must echo it */
    sock_addr_t addr;    /* where the listener accepts */
    /* connect() state, meaningful only in the connecting process */
    uint32_t stage;      /* 0: not started (listen writes 0) */
    void *pending;       /* the connection being set up */
} net_sock_handle_t;
_Static_assert(sizeof(net_sock_handle_t) <= CCL_NET_HANDLE_MAXSIZE, "handle too large");

/* First bytes on each socket of a connection, connector to listener. The
 * listener groups sockets by conn_id and hands out the connection once all
 * nsocks have arrived; the last (index nsocks - 1) is the keepalive socket,
 * which carries nothing after its hello. */
typedef struct {
    uint32_t magic;
    uint32_t version;
    uint64_t listen_id;  /* from the handle: refuses strays */
    uint64_t conn_id;    /* random per connection */
    int32_t rank;        /* the connector's rank, -1 when not given */
    uint16_t nsocks;     /* 2..NET_SOCK_MAX_SOCKS (net_socket_io.h) */
    uint16_t index;      /* this socket's place, < nsocks */
    uint32_t flags;      /* NET_SOCK_HELLO_*, the same on every socket of the connection */
    uint32_t reserved;
} net_sock_hello_t;

/* ---- parsers: what a peer sends, checked before use (fuzzed in tests/fuzz/) */

/* A socket's hello (len bytes arrived) for the listener with listen_id:
 * NULL with *out filled, or the reason to drop the socket. */
const char *net_sock_hello_parse(const void *buf, size_t len, uint64_t listen_id, net_sock_hello_t *out);
/* A handle as connect() receives it from a peer (through the bootstrap),
 * before connect() keeps state in it. */
ccl_result_t net_sock_handle_parse(const void *buf, size_t len, net_sock_handle_t *out);

/* The plugin struct (the default of net_plugin.c; also exported as
 * ccl_net_plugin_v2 by libccl-net-socket.so). */
extern const ccl_net_v2_t net_socket_plugin;

/* Overrides CCL_NSOCKS_PERTHREAD and CCL_SOCKET_NTHREADS for connections
 * created after the call (tests and net-bench compare layouts in one
 * process; params are read once). -1 leaves a value to its param. */
void net_socket_set_layout(int nsocks_per_thread, int nthreads);
#endif
