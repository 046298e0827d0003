/*
 * schedule.h - the schedule: what an algorithm emits and an executor runs.
 *
 * An algorithm never moves bytes. For one rank it turns an operation into an
 * ordered list of steps; each step names the peers it receives from and sends
 * to, the user-buffer regions it reads and writes, and one action. Executors
 * (the host one in core/, a CUDA one later) run the steps, pipelining each in
 * slices of a connection slot. Because schedules are plain data, the schedule
 * simulator (tests/sim) runs any algorithm for 1..1024 ranks in one process.
 */
#ifndef CCL_ALGOS_SCHEDULE_H
#define CCL_ALGOS_SCHEDULE_H

#include "ccl.h"
#include <stddef.h>

typedef enum {
    SCHED_SEND,                  /* src -> peer */
    SCHED_RECV,                  /* peer -> dst */
    SCHED_COPY,                  /* src -> dst, local */
    SCHED_RECV_REDUCE_SEND,      /* (peer op src) -> peer */
    SCHED_RECV_REDUCE_COPY,      /* (peer op src) -> dst */
    SCHED_RECV_COPY_SEND,        /* peer -> dst and -> peer */
    SCHED_RECV_REDUCE_COPY_SEND, /* (peer op src) -> dst and -> peer */
    SCHED_LOCAL_REDUCE,          /* (src op dst) -> dst, local */
    SCHED_NUM_ACTIONS
} sched_action_t;

/* Which user buffer a region lives in. */
typedef enum { SCHED_BUF_NONE = 0, SCHED_BUF_SEND, SCHED_BUF_RECV } sched_buf_t;

/* Step flags. */
#define SCHED_POSTOP 0x1 /* apply the op's final transform (avg: divide by nranks) to the result */
#define SCHED_SOLE_SEND 0x2 /* no other step of the schedule sends to this step's send_peer (sched_mark_sole_sends) */

typedef struct {
    unsigned char action; /* sched_action_t */
    unsigned char flags;
    unsigned char src_buf, dst_buf; /* sched_buf_t */
    /* Rounds this step runs behind: slice k in round k + lag. Never
     * smaller than an earlier step's (steps depend on earlier ones), and
     * equal at both ends of every message (the message's round). It lets
     * a step whose input waits on a slow link (hier's intra-node
     * allgather) stay out of the way of the next round's traffic on its
     * connections. */
    unsigned char lag;
    int recv_peer;        /* rank to receive from, -1 if the action receives nothing */
    int send_peer;        /* rank to send to, -1 if the action sends nothing */
    size_t src_off;       /* element offsets into the buffers */
    size_t dst_off;
    size_t count;         /* elements */
} sched_step_t;

typedef enum {
    SCHED_ALLREDUCE,
    SCHED_ALLGATHER,
    SCHED_REDUCE_SCATTER,
    SCHED_BROADCAST,
    SCHED_REDUCE,
    SCHED_ALLTOALL,
    SCHED_GATHER,
    SCHED_SCATTER,
    SCHED_P2P_SEND, /* point to point: one rank's half of a transfer */
    SCHED_P2P_RECV,
    SCHED_NUM_COLLS
} sched_coll_t;

/* How ranks sit on nodes (hosts). Ranks of node k are
 * node_ranks[node_first[k] .. node_first[k+1]), in rank order. NULL in
 * sched_op_t means every rank on one node. */
typedef struct {
    int nnodes;
    const int *node_of;    /* [nranks] */
    const int *local_rank; /* [nranks] */
    const int *node_first; /* [nnodes+1] */
    const int *node_ranks; /* [nranks] */
} sched_layout_t;

/* The operation as this rank sees it. `count` is per the API: allreduce's,
 * broadcast's and reduce's element count, the per-rank block of
 * allgather/reduce-scatter/alltoall/gather/scatter, a send's or receive's
 * length. `root` is the root of rooted collectives and the peer of p2p. */
typedef struct {
    sched_coll_t coll;
    size_t count;
    size_t elem_size;
    int nranks;
    int rank;
    int root;
    const sched_layout_t *layout; /* NULL: one node */
} sched_op_t;

typedef struct {
    sched_step_t *steps;
    int nsteps;
    int cap;
    /* Set by algorithms in which, even in place, a rank overwrites a part
     * of its send buffer only after every peer that reads that part has
     * read it (the ring: the value that overwrites it is derived from
     * those reads). Executors may then send such parts by reference. */
    int send_refs_safe_in_place;
    /* Set when no step reads what an earlier step of the same schedule
     * wrote (pairwise: alltoall, allgather, gather, scatter, p2p): the engine may then run the
     * steps in any order, subject only to each connection's order. */
    int steps_independent;
    /* Set when a step sends data that a later step of the same rank
     * overwrites (recursive doubling's running value): nothing of it may go
     * by reference. */
    int no_refs;
} sched_t;

/* Grows the step array; returns CCL_ERR_SYSTEM when out of memory. */
ccl_result_t sched_reserve(sched_t *s, int nsteps);
sched_step_t *sched_add(sched_t *s); /* after sched_reserve: never fails */
/* Adds one step whose source and destination share the element offset
 * `off` (the common case); after sched_reserve, never fails. */
sched_step_t *sched_add_step(sched_t *s, int action, int recv_peer, int send_peer, int src_buf, int dst_buf,
                             size_t off, size_t count, unsigned flags);
/* Empties the schedule and sets its flags; every algorithm starts here. */
void sched_reset(sched_t *s, int send_refs_safe_in_place, int steps_independent, int no_refs);
void sched_free(sched_t *s);
/* Sets SCHED_SOLE_SEND on every step that is the only one of the schedule
 * to send to its peer: such a step's messages are the whole traffic of
 * that connection within the operation. Executors call it when they need
 * it (whole-step references); algorithms need not. */
void sched_mark_sole_sends(sched_t *s);
const char *sched_action_name(int action);
/* Splits count elements into nparts contiguous parts aligned for SIMD; part
 * k is [*off, *off + *len). Identical on every rank. */
void sched_partition(size_t count, size_t elem_size, int nparts, int k, size_t *off, size_t *len);

/* Execution order, shared by every executor and the simulator: for round
 * k = 0, 1, ... run slice k (k - lag for a lagging step) of every step, in
 * step order; a step with fewer slices is skipped in later rounds. Running whole steps one after another
 * would deadlock as soon as a step exceeds the FIFO (every rank would be
 * sending, none receiving); by rounds, each rank consumes in round k what its
 * peer produced in round k, so FIFOs of two or more slots suffice. */
static inline size_t sched_step_slices(const sched_step_t *st, size_t elem_size, size_t slot_bytes)
{
    size_t bytes = st->count * elem_size;
    return (bytes + slot_bytes - 1) / slot_bytes;
}
size_t sched_rounds(const sched_t *s, size_t elem_size, size_t slot_bytes);

const char *sched_coll_name(sched_coll_t coll);
/* Whether the collective combines values with a reduction operator. */
static inline int sched_coll_reduces(sched_coll_t c)
{
    return c == SCHED_ALLREDUCE || c == SCHED_REDUCE_SCATTER || c == SCHED_REDUCE;
}
/* Elements this rank reads from sendbuf and writes to recvbuf. */
void sched_op_extent(const sched_op_t *op, size_t *send_elems, size_t *recv_elems);

/* The algorithms live one to a file of this folder, each with its own
 * header (ring.h, tree.h, hier.h, ...) declaring a generator of this
 * shape, which fills `out` (reset first) for op->rank:
 *   ccl_result_t X_schedule(const sched_op_t *op, sched_t *out);
 * registry.h holds the table of them. */

#endif
