/*
 * accept.h - taking authenticated connections on a bootstrap listener
 * without letting strangers stall anyone.
 *
 * Anyone who can reach a bootstrap port can connect to it: a port scanner,
 * a rank of another job, an attacker. An acceptor reads the first frame of
 * every connection it accepts, all of them at once (poll), each within its
 * own deadline, so a connection that sends nothing or half a frame holds up
 * nobody but itself. A frame is frame_len bytes (a connection that sends
 * less or closes early is dropped; with peer_waits, where the protocol has
 * the peer wait for an answer, so is one that sends more), must prove the
 * secret (bs_auth_check) and pass the caller's check; every connection
 * dropped is logged at WARN with its source address and the reason. Bytes
 * after the frame are left on the connection for the caller. The root serves
 * all ranks through one acceptor; a rank takes its ring neighbour with
 * bs_accept_one.
 */
#ifndef CCL_BOOTSTRAP_ACCEPT_H
#define CCL_BOOTSTRAP_ACCEPT_H

#include "bootstrap/wire.h"

#include <stddef.h>
#include <stdint.h>

/* Connections waiting for their first frame; past this the oldest goes. */
#define BS_ACCEPT_MAX_PENDING 64
/* Largest frame an acceptor reads. */
#define BS_FRAME_MAX 512
/* A real peer sends its frame right after connecting: past this it is a
 * stray (or dead) and is dropped. */
#define BS_FRAME_TIMEOUT_NS (5ull * 1000000000ull)

/* Decides about an authenticated frame of frame_len bytes: CCL_SUCCESS
 * takes the connection, an error (with err_set's message, which should
 * start with `from`) drops it. */
typedef ccl_result_t (*bs_frame_check_fn)(const void *frame, size_t len, const char *from, void *arg);

typedef struct bs_acceptor bs_acceptor_t;

/* Called with a frame that failed bs_auth_check, before its connection is
 * dropped: may answer on fd (non-blocking) to tell the peer why. */
typedef void (*bs_refuse_fn)(int fd, const void *frame, size_t len, const char *from, void *arg);

/* An acceptor on listening socket lfd (not owned) for frames of frame_len
 * bytes (sizeof(bs_auth_t) .. BS_FRAME_MAX) that prove `secret`. peer_waits:
 * the peer sends nothing after its frame until it gets an answer, so more
 * bytes mean an oversized frame. who names the listener in messages
 * ("bootstrap root", "rank 3"). */
ccl_result_t bs_acceptor_open(int lfd, const uint8_t secret[BS_SECRET_BYTES], size_t frame_len, int peer_waits,
                              const char *who, bs_acceptor_t **out);
/* Frames that fail authentication go through `refuse` first (NULL: none). */
void bs_acceptor_set_refuse(bs_acceptor_t *a, bs_refuse_fn refuse, void *arg);
/* Waits until a connection's frame passes `check`, or the deadline
 * (CCL_ERR_TIMEOUT). *fd gets the connection (non-blocking), frame its
 * frame_len bytes, *from (if not NULL) its source address. Connections
 * still sending their frame stay pending for the next call. */
ccl_result_t bs_acceptor_next(bs_acceptor_t *a, bs_frame_check_fn check, void *arg, uint64_t deadline, int *fd,
                              void *frame, sock_addr_t *from);
/* Drops (and logs) the connections still pending; lfd stays open. */
void bs_acceptor_close(bs_acceptor_t *a);

/* One connection whose frame passes `check`, dropping every other one that
 * arrives before it: an acceptor opened and closed around one next(). */
ccl_result_t bs_accept_one(int lfd, const uint8_t secret[BS_SECRET_BYTES], size_t frame_len, int peer_waits,
                           const char *who, bs_frame_check_fn check, void *arg, uint64_t deadline, int *fd,
                           void *frame);

#endif
