/*
 * bootstrap.h - out-of-band rendezvous of the ranks of a communicator.
 *
 * The unique id carries the root's TCP address and a random secret. Every
 * rank opens a listening socket, registers it with the root (proving the
 * secret), and receives the table of all ranks: address, host identity, pid,
 * hostname. Ranks then connect in a ring over TCP, which carries the small
 * allgathers and barriers that transports need during setup.
 */
#ifndef CCL_BOOTSTRAP_BOOTSTRAP_H
#define CCL_BOOTSTRAP_BOOTSTRAP_H

#include "bootstrap/socket.h"
#include "bootstrap/wire.h" /* bs_peer_t, BS_SECRET_BYTES */
#include "ccl.h"

#include <stdint.h>

typedef struct {
    int rank, nranks;
    uint8_t secret[BS_SECRET_BYTES];
    int listen_fd, next_fd, prev_fd;
    bs_peer_t *peers;   /* nranks entries */
    uint64_t timeout_ns;
    uint32_t seq;       /* bs_allgather calls so far (bs_ring_hdr_t) */
} bs_t;

/* Writes a new id. Starts the root in this process unless CCL_COMM_ID is set
 * (then the id encodes that address and rank 0's bs_init starts the root). */
ccl_result_t bs_id_create(ccl_unique_id_t *id);
/* A new id whose root runs in this process on an ephemeral port, even
 * when CCL_COMM_ID is set (split and shrink: the fixed port is taken). */
ccl_result_t bs_id_create_local(ccl_unique_id_t *id);
/* `me` supplies hostid, pid and hostname; the address is filled in here. */
ccl_result_t bs_init(bs_t *bs, const ccl_unique_id_t *id, int rank, int nranks, const bs_peer_t *me);
/* data holds nranks blocks of `size` bytes; block `rank` is ours on entry,
 * all are filled on return. */
ccl_result_t bs_allgather(bs_t *bs, void *data, size_t size);
ccl_result_t bs_barrier(bs_t *bs);
void bs_close(bs_t *bs);

/* rejoin.c: a new communicator from some members of this one, without its
 * ring (shrink). members[0] (the caller of bs_rejoin_lead) waits for every
 * other member to call bs_rejoin_follow, then creates the new id and hands
 * it to all; all pass the same tag, or every caller fails with
 * CCL_ERR_MISMATCH. gone (may be NULL) says whether a rank of this
 * communicator is known to have exited: the leader then gives up at once
 * and tells the members waiting on it. */
typedef int (*bs_gone_fn)(void *arg, int rank);
ccl_result_t bs_rejoin_lead(bs_t *bs, const int *members, int n, uint64_t tag, bs_gone_fn gone, void *gone_arg,
                            ccl_unique_id_t *id);
ccl_result_t bs_rejoin_follow(bs_t *bs, int leader, uint64_t tag, ccl_unique_id_t *id);

/* Internal to the bootstrap layer: root.c's root, started by bootstrap.c. */
ccl_result_t bs_root_start(const sock_addr_t *addr, const uint8_t secret[BS_SECRET_BYTES],
                           sock_addr_t *bound);

#endif
