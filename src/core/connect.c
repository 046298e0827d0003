/*
 * connect.c - builds the shm connections a communicator's algorithms use.
 *
 * Today that is the ring (each rank receives from rank-1 and sends to
 * rank+1), which also serves the two-rank direct algorithm. Each receiver
 * creates its segment, the names travel in a bootstrap allgather, senders map
 * them, and after a barrier (both sides mapped) the creators unlink the names.
 */
#include "core/comm.h"
#include "core/err.h"

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

void connect_poison(struct ccl_comm *comm)
{
    for (int i = 0; comm->send_conns && i < comm->nranks; i++) {
        shm_conn_poison(&comm->send_conns[i]);
        shm_conn_poison(&comm->recv_conns[i]);
    }
}

void connect_close(struct ccl_comm *comm)
{
    for (int i = 0; comm->send_conns && i < comm->nranks; i++) {
        shm_conn_close(&comm->send_conns[i]);
        shm_conn_close(&comm->recv_conns[i]);
    }
    free(comm->send_conns);
    free(comm->recv_conns);
    comm->send_conns = comm->recv_conns = NULL;
}
