/*
 * connect.c - builds the connections a communicator's algorithms use.
 *
 * Every rank gets a FIFO to and from every other rank (itself included, for
 * send/recv to self): shared memory within a host, the net transport
 * (transport/net.h) to other hosts. Rings, chains, alltoall and p2p all use
 * the same connections, which keeps the order of what crosses each one
 * simple to reason about. At init, connect_prefault faults in the FIFOs of
 * the peers of every reduction algorithm (ring, trees, recursive doubling,
 * hierarchical, chains) the tuner picks at some size, as CCL_ALGO allows,
 * and of the ring: a page faulted inside a timed collective costs ~11 us
 * on these VMs, and an algorithm the tuner switches to at some size would
 * pay it in its first calls. The mesh of every other peer (alltoall,
 * gather, scatter, send/recv) faults in on first use: pre-faulting it
 * would commit 2 (nranks - 1) FIFOs per rank, 8 MiB each across hosts.
 *
 * Segments and their names. Each receiver picks the names of its segments
 * and they travel in a bootstrap allgather before any segment exists; then
 * receivers create them, a barrier, senders map them, a barrier, and every
 * rank unlinks every name a rank of this host picked (all but one of those
 * calls find the name gone). So whoever dies during init, and whenever,
 * the survivors know every segment that may exist and remove it: a dead
 * rank cannot unlink its own. A rank that fails keeps taking part in the
 * barriers, so that the others fail with it instead of waiting for it. The
 * one-shot board is one segment for all ranks, created by rank 0 the same
 * way.
 */
#include "core/comm_state.h"
#include "core/connect.h"
#include "core/tuner.h"
#include "algos/registry.h"
#include "base/err.h"
#include "base/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int connect_is_local(const struct ccl_comm *comm, int q)
{
    return comm->layout.node_of[q] == comm->layout.node_of[comm->rank];
}

ccl_result_t connect_net(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = comm->nranks;
    if (comm->layout.nnodes < 2)
        return CCL_SUCCESS;
    int *remote = calloc((size_t)n, sizeof *remote);
    if (!remote)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    for (int q = 0; q < n; q++)
        remote[q] = !connect_is_local(comm, q);
    CCL_TRY(net_create(&comm->bs, comm->rank, n, remote, comm->nslots, comm->slot_size, comm->spin, comm->yield,
                       comm->send_conns, comm->recv_conns, &comm->net));
out:
    free(remote);
    return res;
}

/* Unlinks the names that ranks of this host picked (names[q * per + k]);
 * names of other hosts' ranks are theirs to remove. */
static void connect_unlink(const struct ccl_comm *comm, const char *names, int per)
{
    for (int q = 0; q < comm->nranks; q++)
        for (int k = 0; connect_is_local(comm, q) && k < per; k++)
            shm_name_unlink(names + ((size_t)q * (size_t)per + (size_t)k) * SHM_NAME_MAX);
}

ccl_result_t connect_mesh(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS, bres = CCL_SUCCESS;
    int n = comm->nranks, r = comm->rank;
    char *names = NULL;
    comm->send_conns = calloc((size_t)n, sizeof *comm->send_conns);
    comm->recv_conns = calloc((size_t)n, sizeof *comm->recv_conns);
    if (!comm->send_conns || !comm->recv_conns)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for %d connections", n);
    /* names[q*n + p]: the segment rank q creates to receive from rank p. */
    names = calloc((size_t)n * (size_t)n, SHM_NAME_MAX);
    if (!names)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    char *mine = names + (size_t)r * (size_t)n * SHM_NAME_MAX;
    for (int p = 0; p < n; p++)
        if (connect_is_local(comm, p))
            CCL_TRY(shm_name_new(mine + (size_t)p * SHM_NAME_MAX, "/ccl-"));
    /* Nothing exists yet: a failure here leaves nothing behind. */
    CCL_TRY(bs_allgather(&comm->bs, names, (size_t)n * SHM_NAME_MAX));
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
        names[i * SHM_NAME_MAX + SHM_NAME_MAX - 1] = '\0'; /* whatever a peer sent */
    /* Peers' names are opened and unlinked below: only names of the form
     * shm_name_new makes, never an arbitrary /dev/shm entry. */
    for (int q = 0; q < n; q++) {
        if (q == r || !connect_is_local(comm, q))
            continue;
        for (int p = 0; p < n; p++) {
            char *name = names + ((size_t)q * (size_t)n + (size_t)p) * SHM_NAME_MAX;
            char from[48];
            snprintf(from, sizeof from, "rank %d: rank %d", r, q);
            if (name[0] && shm_name_check(name, SHM_NAME_MAX, from) != CCL_SUCCESS)
                CCL_FAIL(CCL_ERR_REMOTE, "%s", err_message());
        }
    }
    for (int p = 0; p < n && res == CCL_SUCCESS; p++)
        if (connect_is_local(comm, p))
            res = shm_conn_create(&comm->recv_conns[p], comm->nslots, comm->slot_size,
                                  mine + (size_t)p * SHM_NAME_MAX, 0);
    /* Every segment exists (or its creator failed) after this barrier... */
    bres = bs_barrier(&comm->bs);
    for (int q = 0; q < n && res == CCL_SUCCESS && bres == CCL_SUCCESS; q++) {
        if (!connect_is_local(comm, q))
            continue;
        const char *theirs = names + ((size_t)q * (size_t)n + (size_t)r) * SHM_NAME_MAX;
        res = shm_conn_open(&comm->send_conns[q], theirs);
        if (res != CCL_SUCCESS)
            err_prefix("rank %d: mapping the segment of rank %d: ", r, q);
    }
    /* ... and is mapped by its sender after this one (unless someone
     * failed): the names can go either way. */
    ccl_result_t bres2 = bs_barrier(&comm->bs);
    connect_unlink(comm, names, n);
    CCL_TRY(res);
    CCL_TRY(bres);
    CCL_TRY(bres2);
out:
    free(names);
    return res;
}

ccl_result_t connect_board(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = comm->nranks;
    size_t slot = (size_t)param_int(PARAM_ONESHOT_MAX);
    char *names = NULL;
    if (n < 2 || comm->nlocal != n || slot == 0 || n > 64)
        return CCL_SUCCESS; /* no board: the tuner never picks one-shot */
    slot = (slot + 63) / 64 * 64;
    names = calloc((size_t)n, SHM_NAME_MAX);
    if (!names)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    /* As connect_mesh: the name first, then the segment (rank 0's), a
     * barrier, the others map it, a barrier, everyone unlinks. */
    if (comm->rank == 0)
        CCL_TRY(shm_name_new(names, "/ccl-b"));
    CCL_TRY(bs_allgather(&comm->bs, names, SHM_NAME_MAX));
    names[SHM_NAME_MAX - 1] = '\0';
    if (comm->rank != 0) {
        /* Opened and unlinked below: only a name of the form rank 0's
         * shm_name_new makes, never an arbitrary /dev/shm entry. */
        char from[32];
        snprintf(from, sizeof from, "rank %d: rank 0", comm->rank);
        CCL_TRY(shm_name_check(names, SHM_NAME_MAX, from));
    }
    if (comm->rank == 0)
        res = shm_board_create(&comm->board, n, slot, names);
    ccl_result_t bres = bs_barrier(&comm->bs);
    if (res == CCL_SUCCESS && bres == CCL_SUCCESS && comm->rank != 0)
        res = shm_board_open(&comm->board, names, n, comm->rank);
    ccl_result_t bres2 = bs_barrier(&comm->bs); /* all mapped (or failed) */
    shm_name_unlink(names);
    CCL_TRY(res);
    CCL_TRY(bres);
    CCL_TRY(bres2);
out:
    free(names);
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
        shm_conn_prefault(&comm->send_conns[q]);
        shm_conn_prefault(&comm->recv_conns[q]);
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
    net_poison(comm->net, reason);
    shm_board_poison(&comm->board);
    for (int i = 0; comm->send_conns && i < comm->nranks; i++) {
        shm_conn_poison(&comm->send_conns[i], reason);
        shm_conn_poison(&comm->recv_conns[i], reason);
    }
    /* Last: once released, our GPU's queued P2P work moves garbage on to
     * the peers, whose own calls then finish; the reason must be there
     * for them to find when they look (exec_device.c, async errors). */
    connect_p2p_release(comm);
}

void connect_close(struct ccl_comm *comm)
{
    /* The GPU may still run queued P2P work: it ends before anything goes. */
    connect_p2p_close(comm);
    /* The proxy thread uses the far ends of the net FIFOs: it goes first. */
    net_destroy(comm->net);
    comm->net = NULL;
    shm_board_close(&comm->board);
    for (int i = 0; comm->send_conns && i < comm->nranks; i++) {
        shm_conn_close(&comm->send_conns[i]);
        shm_conn_close(&comm->recv_conns[i]);
    }
    free(comm->send_conns);
    free(comm->recv_conns);
    comm->send_conns = comm->recv_conns = NULL;
}
