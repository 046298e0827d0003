/*
 * connect.c - builds the shm connections a communicator's algorithms use.
 *
 * Today that is the ring (each rank receives from rank-1 and sends to
 * rank+1), which also serves the two-rank direct algorithm. Each receiver
 * creates its segment, the names travel in a bootstrap allgather, senders map
 * them, and after a barrier (both sides mapped) the creators unlink the names.
 * The one-shot board is one segment for all ranks, created by rank 0.
 */
#include "core/comm.h"
#include "core/err.h"
#include "core/param.h"

#include <stdlib.h>
#include <string.h>

ccl_result_t connect_ring(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = comm->nranks, r = comm->rank;
    char *names = NULL;
    comm->send_conns = calloc((size_t)n, sizeof *comm->send_conns);
    comm->recv_conns = calloc((size_t)n, sizeof *comm->recv_conns);
    if (!comm->send_conns || !comm->recv_conns)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for %d connections", n);
    if (n == 1)
        goto out;
    int prev = (r + n - 1) % n, next = (r + 1) % n;
    names = calloc((size_t)n, SHM_NAME_MAX);
    if (!names)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    char *mine = names + (size_t)r * SHM_NAME_MAX;
    CCL_TRY(shm_conn_create(&comm->recv_conns[prev], comm->nslots, comm->slot_size, mine));
    res = bs_allgather(&comm->bs, names, SHM_NAME_MAX);
    if (res != CCL_SUCCESS) {
        shm_name_unlink(mine);
        goto out;
    }
    char *theirs = names + (size_t)next * SHM_NAME_MAX;
    theirs[SHM_NAME_MAX - 1] = '\0';
    res = shm_conn_open(&comm->send_conns[next], theirs);
    /* Everyone has mapped (or failed) after this barrier; the name can go
     * either way, so a failed init leaves nothing in /dev/shm. */
    ccl_result_t bres = bs_barrier(&comm->bs);
    shm_name_unlink(mine);
    if (res != CCL_SUCCESS) {
        err_prefix("rank %d: mapping the segment of rank %d: ", r, next);
        goto out;
    }
    CCL_TRY(bres);
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
    if (comm->rank == 0)
        CCL_TRY(shm_board_create(&comm->board, n, slot, names));
    res = bs_allgather(&comm->bs, names, SHM_NAME_MAX);
    if (res == CCL_SUCCESS && comm->rank != 0) {
        names[SHM_NAME_MAX - 1] = '\0';
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

void connect_poison(struct ccl_comm *comm)
{
    shm_board_poison(&comm->board);
    for (int i = 0; comm->send_conns && i < comm->nranks; i++) {
        shm_conn_poison(&comm->send_conns[i]);
        shm_conn_poison(&comm->recv_conns[i]);
    }
}

void connect_close(struct ccl_comm *comm)
{
    shm_board_close(&comm->board);
    for (int i = 0; comm->send_conns && i < comm->nranks; i++) {
        shm_conn_close(&comm->send_conns[i]);
        shm_conn_close(&comm->recv_conns[i]);
    }
    free(comm->send_conns);
    free(comm->recv_conns);
    comm->send_conns = comm->recv_conns = NULL;
}
