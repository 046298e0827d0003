/*
 * connect.h - a communicator's connections: the host ones (connect.c, over
 * transport/mesh.h), P2P connections between GPUs (connect_p2p.c)
 * and the thread that watches them for failed peers (connect_p2p_watch.c).
 */
#ifndef CCL_CORE_CONNECT_H
#define CCL_CORE_CONNECT_H

#include "core/communicator.h"

/* connect.c: the host connections (transport/mesh.h): shm FIFOs between
 * every pair of local ranks, net connections to every rank of another
 * host, and the one-shot board. */
ccl_result_t connect_host(struct ccl_comm *comm);
/* Faults in, at init, the FIFOs to and from the peers of the reduction
 * algorithms this communicator may run (after tuner_init: CCL_ALGO). */
ccl_result_t connect_prefault(struct ccl_comm *comm);
void connect_close(struct ccl_comm *comm);
/* Ends every connection now so that peers fail instead of waiting: why
 * says how a collective failed here (NULL: ccl_comm_abort), and reaches
 * them in their error messages. */
void connect_poison(struct ccl_comm *comm, const char *why);

/* connect_p2p.c: sets up the P2P connections on device `device` (a
 * collective over the bootstrap; every rank makes it at its first
 * candidate call). Leaves p2p.state UP or OFF (the same on every rank);
 * fails only when the exchange itself fails. */
ccl_result_t connect_p2p(struct ccl_comm *comm, int device);
/* Waits (bounded) for the GPU to finish the comm's P2P work, releasing
 * its waits when the comm was aborted or broke, then frees it all. */
void connect_p2p_close(struct ccl_comm *comm);
/* Lets streams waiting on the comm's P2P connections go on (abort). */
void connect_p2p_release(struct ccl_comm *comm);

/* connect_p2p_watch.c: the thread that breaks the comm and lets its
 * streams go when a peer fails while the GPU has P2P work queued. start:
 * once the P2P setup has succeeded here; stop (joins; idempotent): before
 * the P2P connections close. */
ccl_result_t watch_p2p_start(struct ccl_comm *comm);
void watch_p2p_stop(struct ccl_comm *comm);

#endif
