/*
 * socket.h - TCP helpers for the bootstrap: every call has a deadline.
 *
 * Sockets are non-blocking and every wait is a poll() bounded by an absolute
 * deadline (clock_now_ns() clock), so a silent or dead peer turns into
 * CCL_ERR_TIMEOUT or CCL_ERR_REMOTE, never a hang.
 */
#ifndef CCL_BOOTSTRAP_SOCKET_H
#define CCL_BOOTSTRAP_SOCKET_H

#include "ccl.h"
#include "base/clock.h"
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An IPv4 or IPv6 address in a fixed-size form that can go on the wire. */
typedef union {
    struct sockaddr sa;
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
} sock_addr_t;

/* "1.2.3.4:5" or "[::1]:5", for messages. */
const char *sock_addr_str(const sock_addr_t *addr, char *buf, size_t len);
/* Parses "host:port" (name, IPv4 or [IPv6]). */
ccl_result_t sock_addr_parse(const char *text, sock_addr_t *addr);
/* The syntax half of sock_addr_parse, without name resolution: host (the
 * brackets of [IPv6] removed) into host[hostlen], the port (1..65535). */
ccl_result_t sock_addr_split(const char *text, char *host, size_t hostlen, int *port);
/* 1 for an IPv4 or IPv6 address with a port: one that came off the wire
 * and can be connected to. */
int sock_addr_valid(const sock_addr_t *addr);
socklen_t sock_addr_len(const sock_addr_t *addr);
/* The address of the interface bootstrap sockets use (CCL_SOCKET_IFNAME
 * or the first suitable one), port 0. */
ccl_result_t sock_pick_local_addr(sock_addr_t *addr, char *ifname, size_t ifname_len);
/* Every usable interface, best first, one address (port 0) each: those
 * CCL_SOCKET_IFNAME selects (IPv4 first) or, without it, ordinary interfaces,
 * then docker* / veth* / virbr*, then loopback. Returns how many were
 * written (0 when none, or getifaddrs failed). The net plugin's devices. */
#define SOCK_IFNAME_LEN 64
int sock_list_local_addrs(sock_addr_t *addrs, char (*names)[SOCK_IFNAME_LEN], int max);

/* Binds and listens at addr (port 0: any); *bound gets the real port. */
ccl_result_t sock_listen(const sock_addr_t *addr, int *fd, sock_addr_t *bound);
/* Retries refused connects until the deadline: the listener may not be up yet. */
ccl_result_t sock_connect(const sock_addr_t *addr, uint64_t deadline, int *fd);
/* For a listener known to be up (a peer's, open for its communicator's
 * life): a refusal means its process is gone, CCL_ERR_REMOTE at once. */
ccl_result_t sock_connect_live(const sock_addr_t *addr, uint64_t deadline, int *fd);
ccl_result_t sock_accept(int lfd, uint64_t deadline, int *fd);
ccl_result_t sock_send_all(int fd, const void *buf, size_t len, uint64_t deadline);
ccl_result_t sock_recv_all(int fd, void *buf, size_t len, uint64_t deadline);
/* Sends on one socket while receiving on another, so two ranks exchanging
 * more than a socket buffer each cannot deadlock. */
ccl_result_t sock_sendrecv(int sfd, const void *sbuf, size_t slen, int rfd, void *rbuf,
                           size_t rlen, uint64_t deadline);
void sock_close(int *fd);

/* Non-blocking pieces for callers that must never wait (the net plugin's
 * connect/accept run on a progress thread). Sockets come out non-blocking
 * with TCP_NODELAY and SO_KEEPALIVE. */
/* Starts a connect; a refusal seen at once is CCL_ERR_REMOTE. */
ccl_result_t sock_connect_start(const sock_addr_t *addr, int *fd);
/* *ready = 1 once the connect started by sock_connect_start succeeded.
 * Returns 0, or the errno of a failed connect (the caller words the
 * message: it knows who the peer is). Does not wait. */
int sock_connect_check(int fd, int *ready);
/* *fd = an accepted connection, or -1 when none is waiting. */
ccl_result_t sock_try_accept(int lfd, int *fd);
/* Probes an idle connection after idle_s seconds, every interval_s, and
 * declares it dead after count unanswered probes. */
void sock_set_keepalive(int fd, int idle_s, int interval_s, int count);

#endif
