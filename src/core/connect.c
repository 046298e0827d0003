/*
 * connect.c - builds the connections a communicator's algorithms use.
 *
 * Every rank gets a FIFO to and from every other rank (itself included, for
 * send/recv to self): shared memory within a host, the net transport
 * (transport/net.h) to other hosts. Rings, chains, alltoall and p2p all use
 * the same connections, which keeps the order of what crosses each one
 * simple to reason about. Only the ring neighbour's FIFO is pre-faulted at
 * init; the others fault in on first use. Each receiver creates its
 * segments, the names travel in a bootstrap allgather, senders map them, and
 * after a barrier (both sides mapped) the creators unlink the names.
 * The one-shot board is one segment for all ranks, created by rank 0.
 */
#include "core/comm.h"
#include "core/err.h"
#include "core/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

ccl_result_t connect_mesh(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = comm->nranks, r = comm->rank, created = 0;
    char *names = NULL;
    comm->send_conns = calloc((size_t)n, sizeof *comm->send_conns);
    comm->recv_conns = calloc((size_t)n, sizeof *comm->recv_conns);
    if (!comm->send_conns || !comm->recv_conns)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for %d connections", n);
    int prev = (r + n - 1) % n;
    /* names[q*n + p]: the segment rank q created to receive from rank p. */
    names = calloc((size_t)n * (size_t)n, SHM_NAME_MAX);
    if (!names)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    char *mine = names + (size_t)r * (size_t)n * SHM_NAME_MAX;
    for (int p = 0; p < n; p++, created++)
        if (connect_is_local(comm, p))
            CCL_TRY(shm_conn_create(&comm->recv_conns[p], comm->nslots, comm->slot_size,
                                    mine + (size_t)p * SHM_NAME_MAX, p == prev));
    res = bs_allgather(&comm->bs, names, (size_t)n * SHM_NAME_MAX);
    if (res != CCL_SUCCESS)
        goto out;
    for (int q = 0; q < n && res == CCL_SUCCESS; q++) {
        if (!connect_is_local(comm, q))
            continue;
        char *theirs = names + ((size_t)q * (size_t)n + (size_t)r) * SHM_NAME_MAX;
        char from[48];
        snprintf(from, sizeof from, "rank %d: rank %d", r, q);
        res = shm_name_check(theirs, SHM_NAME_MAX, from);
        if (res == CCL_SUCCESS)
            res = shm_conn_open(&comm->send_conns[q], theirs);
        if (res != CCL_SUCCESS)
            err_prefix("rank %d: mapping the segment of rank %d: ", r, q);
    }
    /* Everyone has mapped (or failed) after this barrier; the names can go
     * either way, so a failed init leaves nothing in /dev/shm. */
    ccl_result_t bres = bs_barrier(&comm->bs);
    CCL_TRY(res);
    CCL_TRY(bres);
out:
    for (int p = 0; names && p < created; p++)
        shm_name_unlink(names + ((size_t)r * (size_t)n + (size_t)p) * SHM_NAME_MAX);
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
    if (comm->rank == 0)
        CCL_TRY(shm_board_create(&comm->board, n, slot, names));
    res = bs_allgather(&comm->bs, names, SHM_NAME_MAX);
    if (res == CCL_SUCCESS && comm->rank != 0) {
        char from[32];
        snprintf(from, sizeof from, "rank %d: rank 0", comm->rank);
        res = shm_name_check(names, SHM_NAME_MAX, from);
        if (res == CCL_SUCCESS)
            res = shm_board_open(&comm->board, names, n, comm->rank);
    }
    ccl_result_t bres = bs_barrier(&comm->bs); /* all mapped (or failed) */
    if (comm->rank == 0)
        shm_name_unlink(names);
    CCL_TRY(res);
    CCL_TRY(bres);
out:
    free(names);
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
}

void connect_close(struct ccl_comm *comm)
{
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
