/*
 * connect.c - the communicator's side of its host connections: it tells
 * the mesh (transport/mesh.h, which sets them up, poisons and closes them)
 * who the ranks are, and decides which FIFOs to fault in at init.
 *
 * At init, connect_prefault faults in the FIFOs of
 * the peers of every reduction algorithm (ring, trees, recursive doubling,
 * hierarchical, chains) the tuner picks at some size, as CCL_ALGO allows,
 * and of the ring: a page faulted inside a timed collective costs ~11 us
 * on these VMs, and an algorithm the tuner switches to at some size would
 * pay it in its first calls. The mesh of every other peer (alltoall,
 * gather, scatter, send/recv) faults in on first use: pre-faulting it
 * would commit 2 (nranks - 1) FIFOs per rank, 8 MiB each across hosts.
 */
#include "core/comm_state.h"
#include "core/connect.h"
#include "core/tuner.h"
#include "algos/registry.h"
#include "transport/mesh.h"
#include "base/err.h"
#include "base/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

ccl_result_t connect_host(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS;
    mesh_spec_t s = {&comm->bs, comm->rank, comm->nranks, comm->nlocal, &comm->layout,
                     comm->nslots, comm->slot_size, comm->spin, comm->yield};
    CCL_TRY(mesh_connect_shm(&comm->mesh, &s));
    CCL_TRY(mesh_connect_net(&comm->mesh, &s));
    CCL_TRY(mesh_connect_board(&comm->mesh, &s));
out:
    return res;
}

/* Marks in used[] the peers this rank sends to or receives from when the
 * algorithm runs the collective: a size at which no step is empty (64-byte
 * parts of every rank, shard and tree), root 0. */
static ccl_result_t connect_algo_peers(const struct ccl_comm *comm, sched_coll_t coll, algo_t algo, char *used)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = comm->nranks;
    sched_t s = {0};
    sched_op_t op = {coll, (size_t)64 * (size_t)n * (size_t)n, 4, n, comm->rank, 0,
                     comm->layout.nnodes > 1 ? &comm->layout : NULL};
    CCL_TRY(algo_schedule(&op, algo, &s));
    for (int i = 0; i < s.nsteps; i++) {
        if (s.steps[i].recv_peer >= 0 && s.steps[i].recv_peer < n)
            used[s.steps[i].recv_peer] = 1;
        if (s.steps[i].send_peer >= 0 && s.steps[i].send_peer < n)
            used[s.steps[i].send_peer] = 1;
    }
out:
    sched_free(&s);
    return res;
}

ccl_result_t connect_prefault(struct ccl_comm *comm)
{
    static const sched_coll_t colls[] = {SCHED_ALLREDUCE, SCHED_ALLGATHER, SCHED_REDUCE_SCATTER, SCHED_BROADCAST,
                                         SCHED_REDUCE};
    /* One-shot uses the board, pairwise every peer: see the top. */
    const unsigned skip = TUNE_BIT(ALGO_ONESHOT) | TUNE_BIT(ALGO_PAIRWISE);
    ccl_result_t res = CCL_SUCCESS;
    int n = comm->nranks, faulted = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *used = calloc((size_t)n, 1);
    if (!used)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for %d peers", n);
    /* The ring's neighbours always: ring is every fallback. */
    used[(comm->rank + 1) % n] = used[(comm->rank + n - 1) % n] = 1;
    for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++) {
        /* What the tuner picks from 8 bytes to 1 GiB, alone or in a group
         * (per call it picks the same way: tuner_pick). */
        unsigned picked = 0;
        for (int grouped = 0; grouped < 2; grouped++)
            for (size_t size = 8; size <= ((size_t)1 << 30); size *= 4)
                picked |= TUNE_BIT(tune_pick(&comm->tune, colls[c], size, grouped, comm->algo_allowed[colls[c]],
                                             NULL, NULL));
        for (int a = 0; a < ALGO_COUNT; a++)
            if ((picked & TUNE_BIT(a)) && !(TUNE_BIT(a) & skip))
                CCL_TRY(connect_algo_peers(comm, colls[c], (algo_t)a, used));
    }
    for (int q = 0; q < n; q++) {
        if (!used[q])
            continue;
        mesh_prefault(&comm->mesh, q);
        faulted++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    LOG_INFO(SUB_INIT, "rank %d: FIFOs to and from %d of %d peers faulted in, %.1f ms", comm->rank, faulted, n,
             (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
out:
    free(used);
    return res;
}

void connect_poison(struct ccl_comm *comm, const char *why)
{
    /* Peers see this in their own error: say who we are. */
    char reason[1024];
    const char *host = comm->bs.peers ? comm->bs.peers[comm->rank].hostname : "?";
    if (why)
        snprintf(reason, sizeof reason, "rank %d (%s) failed: %s", comm->rank, host, why);
    else
        snprintf(reason, sizeof reason, "rank %d (%s) called ccl_comm_abort", comm->rank, host);
    mesh_poison(&comm->mesh, comm->nranks, reason);
    /* Last: once released, our GPU's queued P2P work moves garbage on to
     * the peers, whose own calls then finish; the reason must be there
     * for them to find when they look (exec/device.c, async errors). */
    connect_p2p_release(comm);
}

void connect_close(struct ccl_comm *comm)
{
    /* The GPU may still run queued P2P work: it ends before anything goes. */
    connect_p2p_close(comm);
    mesh_close(&comm->mesh, comm->nranks);
}
