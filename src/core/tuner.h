/*
 * tuner.h - the tuner: the cost model's inputs agreed at init, the
 * algorithm picked for each call (inline memo first), estimates.
 */
#ifndef CCL_CORE_TUNER_H
#define CCL_CORE_TUNER_H

#include "core/communicator.h"

/* tuner.c: the cost model's inputs, agreed by all ranks (at init, after
 * the FIFOs and the board exist); the pick for one call (bytes: as
 * exec_board_bytes counts them, the same on every rank). */
ccl_result_t tuner_init(struct ccl_comm *comm);
/* One rank's view of the link costs before the ranks agree: CCL_SHM_*,
 * CCL_NET_*, else defaults and, on local rank 0 only, the topology's NIC
 * closest to it (topo NULL: discovered if the network is used); other
 * local ranks leave what is not set at net_bw 0, net_lat -1. kernel_ranks
 * share this machine's cores (nlocal of them on this node; more with fake
 * nodes or network namespaces): out->cores is this node's share. Slot and
 * board are left 0. ccl-info --explain shows local rank 0's. */
void tuner_links_local(const topo_t *topo, int local_rank, int nlocal, int kernel_ranks, int nnodes,
                       tune_links_t *out);
/* The algorithm for a call: what the tuner picked for the comm's last call
 * of coll when it had this size (the memo, inline: it is on every call's
 * path), else the model's pick for `size` (tuner_pick_model, which updates
 * the memo). bytes: what the largest rank puts on the board
 * (exec_board_bytes), the same on every rank; the model wants nccl-tests'
 * size, which for allgather and gather is every rank's block. Under the
 * comm's exec_lock. */
algo_t tuner_pick_model(const struct ccl_comm *comm, sched_coll_t coll, size_t size, int grouped);
static inline algo_t tuner_pick(const struct ccl_comm *comm, sched_coll_t coll, size_t bytes, int grouped)
{
    if (coll == SCHED_P2P_SEND || coll == SCHED_P2P_RECV)
        return ALGO_PAIRWISE;
    size_t size = coll == SCHED_ALLGATHER || coll == SCHED_GATHER ? bytes * (size_t)comm->nranks : bytes;
    const tuner_last_t *last = &comm->tune_last[coll];
    if (last->algo >= 0 && last->size == size && last->grouped == grouped)
        return (algo_t)last->algo;
    return tuner_pick_model(comm, coll, size, grouped);
}
/* From how many bytes per rank a call of coll reads local peers' registered
 * buffers in place: CCL_SINGLE_COPY_THRESHOLD as the ranks agreed, or
 * where that is automatic, the figure for this collective; 0: never. */
size_t tuner_single_copy_bytes(const struct ccl_comm *comm, sched_coll_t coll);
/* The modelled time (us) of call a on its comm, with the algorithm the
 * tuner picks for it (ccl_group_simulate_end). */
double tuner_estimate_us(const coll_args_t *a, int grouped);
const char *tuner_algo_name(algo_t algo);

#endif
