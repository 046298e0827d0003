/*
 * net_socket_conn.h - one connection of the built-in socket plugin, both
 * directions over the same sockets, and the plugin entry points that act
 * on it (net_socket_conn.c). For net_socket.c, which makes connections and
 * fills the plugin table; the comm argument of each entry point is a
 * connection.
 */
#ifndef CCL_TRANSPORT_NET_SOCKET_CONN_H
#define CCL_TRANSPORT_NET_SOCKET_CONN_H

#include "ccl.h"

#include <stddef.h>
#include <stdint.h>

/* Largest message: far above any buffer, low enough that no size
 * arithmetic on it overflows. */
#define NET_SOCK_MAX_MSG ((size_t)1 << 48)

typedef struct net_sock_conn net_sock_conn_t;

/* A connection over fds[0..nsocks): nsocks - 1 data sockets, then the
 * keepalive socket. Takes the descriptors, also when it fails. nthreads
 * helper threads per direction, silence_s the keepalive limit, checksum
 * whether messages carry CRC-32C trailers (both directions), and peer
 * the other end, for messages (net_sock_comm_create). */
ccl_result_t net_sock_conn_create(const int *fds, int nsocks, int nthreads, int silence_s, int checksum,
                                  const char *peer, net_sock_conn_t **out);

/* Who a comm of this plugin says it talks to in its messages ("rank 3 at
 * 10.0.0.2:41000"); "" for anything else. */
const char *net_socket_comm_peer(void *comm);

/* ccl_net_v2_t entry points. */
ccl_result_t net_sock_conn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ccl_result_t net_sock_conn_dereg_mr(void *comm, void *mhandle);
ccl_result_t net_sock_conn_isend(void *comm, const void *data, size_t size, uint32_t tag, void *mhandle,
                                 void **request);
ccl_result_t net_sock_conn_irecv(void *comm, int n, void **data, const size_t *sizes, const uint32_t *tags,
                                 void **mhandles, void **request);
ccl_result_t net_sock_conn_test(void *request, int *done, size_t *sizes);
ccl_result_t net_sock_conn_close(void *comm);
ccl_result_t net_sock_conn_progress(void *comm, int *inline_io);
struct pollfd;
int net_sock_conn_pollfds(void *comm, struct pollfd *pfds, int max);

#endif
