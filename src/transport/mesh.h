/*
 * mesh.h - a communicator's host connections as one thing: a FIFO to and
 * from every rank (shared memory within a host, the net transport to other
 * hosts, the same slot interface either way) and the one-shot board.
 *
 * They are set up together at init, poisoned together when a call fails
 * (so that every peer fails at once instead of at its timeout) and closed
 * together, always in the same order; keeping that here, beside the
 * transports, means a new net transport (ib, ucx) is connected by the same
 * code as the socket one. The communicator (core) says who the ranks are
 * and where they sit (mesh_spec_t); the mesh knows nothing else of it.
 */
#ifndef CCL_TRANSPORT_MESH_H
#define CCL_TRANSPORT_MESH_H

#include "algos/schedule.h"
#include "bootstrap/bootstrap.h"
#include "transport/net.h"
#include "transport/shm.h"
#include "transport/shm_board.h"

typedef struct {
    shm_conn_t *send;   /* [nranks]: FIFO to each rank; fifo == NULL where unconnected */
    shm_conn_t *recv;   /* [nranks]: FIFO from each rank */
    net_t *net;         /* the far ends of FIFOs to other hosts; NULL on one host */
    shm_board_t board;  /* one-shot board; hdr == NULL when not all ranks are local */
} mesh_t;

/* What the setup needs to know of the communicator it connects. */
typedef struct {
    bs_t *bs;                      /* allgathers and barriers of the setup */
    int rank, nranks, nlocal;
    const sched_layout_t *layout;  /* node of each rank */
    uint32_t nslots;               /* FIFO geometry, agreed by all ranks */
    size_t slot_size;
    int spin, yield;               /* wait policy (us) of the net proxy's FIFO ends */
} mesh_spec_t;

/* Shared-memory FIFOs between every pair of local ranks (and each rank to
 * itself), the net transport to every rank of another host, and the board
 * (only when every rank is local and CCL_ONESHOT_MAX allows). Collective
 * over the bootstrap; on failure what was made stays for mesh_close. */
ccl_result_t mesh_connect_shm(mesh_t *m, const mesh_spec_t *s);
ccl_result_t mesh_connect_net(mesh_t *m, const mesh_spec_t *s);
ccl_result_t mesh_connect_board(mesh_t *m, const mesh_spec_t *s);
/* Faults in the FIFOs to and from peer (a page first touched inside a
 * timed call costs ~11 us on these machines). */
void mesh_prefault(mesh_t *m, int peer);
/* Ends every connection now: peers waiting on us fail with `reason`. */
void mesh_poison(mesh_t *m, int nranks, const char *reason);
/* Closes everything (the net proxy first: it uses the FIFOs' far ends). */
void mesh_close(mesh_t *m, int nranks);

#endif
