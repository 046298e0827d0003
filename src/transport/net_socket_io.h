/*
 * net_socket_io.h - moving messages over the sockets of one TCP connection.
 *
 * Striping. Message seq of size S has a lead socket, seq % nsocks, so that
 * consecutive small messages spread over the sockets. S is cut into
 * k = min(nsocks, ceil(S / 64 KiB)) stripes of equal size (rounded up to
 * 4 KiB); stripe i goes on socket (lead + i) % nsocks. The lead socket
 * carries the header (net_sock_msg_hdr_t) and then stripe 0; an empty
 * message is a header alone. Every socket carries its part of each message
 * in message order, so neither side needs per-stripe headers: the receiver
 * computes the same layout from the size in the header, after checking that
 * size against the posted receive. Nothing the peer sends can make a socket
 * read past the buffer of the message it belongs to.
 *
 * Who does the I/O. With CCL_SOCKET_NTHREADS = T > 0 each comm starts
 * min(T, nsocks) helper threads; socket j belongs to thread j % T. A helper
 * tries its sockets without waiting and sleeps in poll() when none can move
 * (an eventfd wakes it for new requests and for headers another helper
 * read). The caller's test() then only reads counters. With T = 0 the
 * caller's own isend/irecv/test calls do the non-blocking I/O: no threads,
 * for hosts where ranks already outnumber cores.
 *
 * Checksums. With checksum set (CCL_CHECKSUM, chosen by the connecting
 * side and told in its hello) every piece (a stripe, or the header alone
 * of an empty message) is followed on its socket by a 4-byte trailer: the
 * CRC-32C over a seed (the message's header and the piece's index) and the
 * piece's data. The sender takes it as the data goes out (at most
 * NET_IO_CRC_AHEAD ahead), the receiver as it comes in (src/base/crc32c.c); a mismatch fails
 * the comm with CCL_ERR_CORRUPT, naming the message and the socket.
 *
 * Receive sockets read ahead (up to 32 KiB) so that a small message costs
 * one recv; a piece read ahead is copied from there, a large rest is read
 * straight into the posted buffer.
 *
 * Requests live in a ring of NET_SOCK_MAX_REQS slots per comm. A slot is
 * reused only after its request was reported done and every socket has
 * moved past it, so a helper never reads a slot the caller rewrites.
 */
#ifndef CCL_TRANSPORT_NET_SOCKET_IO_H
#define CCL_TRANSPORT_NET_SOCKET_IO_H

#include "ccl.h"
#include "transport/net_socket_io_types.h" /* limits, the message header, the comm */

#include <stddef.h>
#include <stdint.h>

/* The header of message seq, for a receive posted with cap bytes and tag:
 * 0 with *out filled, or -1 with the reason (naming peer) in why. Writes no
 * thread state, so the plugin's helper threads can call it. */
int net_sock_msg_hdr_parse(const void *buf, size_t len, uint64_t seq, size_t cap, uint32_t tag, const char *peer,
                           net_sock_msg_hdr_t *out, char *why, size_t whylen);

/* Takes the connected sockets fds[0..nsocks) and watch_fd (closed on
 * failure too) and starts the comm's helpers. watch_fd (-1: none) is a
 * socket of the connection that carries nothing: a receive comm watches it
 * for the error that TCP keepalive raises when the peer's host dies or the
 * link is cut. peer describes the other end for messages ("rank 3 at
 * 10.0.0.2:41000"); silence_s is how long keepalive lets a peer's host stay
 * silent before a socket fails with ETIMEDOUT, which the message names. */
ccl_result_t net_sock_comm_create(int is_send, const int *fds, int nsocks, int watch_fd, int nthreads,
                                  int silence_s, int checksum, const char *peer, net_sock_comm_t **out);
/* CCL_FAULT corrupt_wire: the next piece with data that this process sends
 * goes out with one byte changed after its checksum was taken. */
void net_sock_io_fault_corrupt(void);
/* Stops the helpers, closes the sockets, frees the comm and its requests. */
void net_sock_comm_destroy(net_sock_comm_t *comm);
/* The plugin's progress (ccl_net_v2_t): CCL_SOCKET_NTHREADS=0 (no
 * helpers) moves what can move now, *inline_io 1; a comm with helpers is
 * left to them, *inline_io 0. comm is a net_sock_comm_t. */
ccl_result_t net_sock_comm_progress(void *comm, int *inline_io);
/* Where completions and failures are announced (the plugin's activity
 * callback); NULL: nowhere. Set by init, before any comm exists. */
void net_sock_io_set_activity(void (*activity)(void));
/* The plugin's pollfds (ccl_net_v2_t): for CCL_SOCKET_NTHREADS=0, the
 * sockets with a message in progress, which only the kernel can move on;
 * none for a comm with helpers. comm is a net_sock_comm_t. */
struct pollfd;
int net_sock_comm_pollfds(void *comm, struct pollfd *pfds, int max);
const char *net_sock_comm_peer(const net_sock_comm_t *comm);

/* Posts a send (size bytes) or a receive (up to size bytes). *req is NULL
 * when all slots are busy. */
ccl_result_t net_sock_post(net_sock_comm_t *comm, void *data, size_t size, uint32_t tag,
                           net_sock_req_t **req);
ccl_result_t net_sock_test(net_sock_req_t *req, int *done, size_t *size);

#endif
