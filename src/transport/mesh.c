/*
 * mesh.c - sets up, poisons and closes a communicator's host connections
 * (mesh.h).
 *
 * Every rank gets a FIFO to and from every other rank (itself included, for
 * send/recv to self): shared memory within a host, the net transport
 * (net.h) to other hosts. Rings, chains, alltoall and p2p all use the same
 * connections, which keeps the order of what crosses each one simple to
 * reason about. Which of them to fault in at init is the communicator's
 * call (core/connect.c, from the algorithms the tuner may pick).
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
#include "transport/mesh.h"
#include "base/err.h"
#include "base/param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mesh_is_local(const mesh_spec_t *s, int q)
{
    return s->layout->node_of[q] == s->layout->node_of[s->rank];
}

ccl_result_t mesh_connect_net(mesh_t *m, const mesh_spec_t *s)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = s->nranks;
    if (s->layout->nnodes < 2)
        return CCL_SUCCESS;
    int *remote = calloc((size_t)n, sizeof *remote);
    if (!remote)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    for (int q = 0; q < n; q++)
        remote[q] = !mesh_is_local(s, q);
    CCL_TRY(net_create(s->bs, s->rank, n, remote, s->nslots, s->slot_size, s->spin, s->yield,
                       m->send, m->recv, &m->net));
out:
    free(remote);
    return res;
}

/* Unlinks the names that ranks of this host picked (names[q * per + k]);
 * names of other hosts' ranks are theirs to remove. */
/* A setup step's own result, then those of the two barriers around it:
 * every rank took part in both whatever failed, so that no peer waits. */
static ccl_result_t mesh_first_error(ccl_result_t res, ccl_result_t bres, ccl_result_t bres2)
{
    return res != CCL_SUCCESS ? res : bres != CCL_SUCCESS ? bres : bres2;
}

static void mesh_unlink(const mesh_spec_t *s, const char *names, int per)
{
    for (int q = 0; q < s->nranks; q++)
        for (int k = 0; mesh_is_local(s, q) && k < per; k++)
            shm_name_unlink(names + ((size_t)q * (size_t)per + (size_t)k) * SHM_NAME_MAX);
}

ccl_result_t mesh_connect_shm(mesh_t *m, const mesh_spec_t *s)
{
    ccl_result_t res = CCL_SUCCESS, bres = CCL_SUCCESS;
    int n = s->nranks, r = s->rank;
    char *names = NULL;
    m->send = calloc((size_t)n, sizeof *m->send);
    m->recv = calloc((size_t)n, sizeof *m->recv);
    if (!m->send || !m->recv)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for %d connections", n);
    /* names[q*n + p]: the segment rank q creates to receive from rank p. */
    names = calloc((size_t)n * (size_t)n, SHM_NAME_MAX);
    if (!names)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    char *mine = names + (size_t)r * (size_t)n * SHM_NAME_MAX;
    for (int p = 0; p < n; p++)
        if (mesh_is_local(s, p))
            CCL_TRY(shm_name_new(mine + (size_t)p * SHM_NAME_MAX, "/ccl-"));
    /* Nothing exists yet: a failure here leaves nothing behind. */
    CCL_TRY(bs_allgather(s->bs, names, (size_t)n * SHM_NAME_MAX));
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
        names[i * SHM_NAME_MAX + SHM_NAME_MAX - 1] = '\0'; /* whatever a peer sent */
    /* Peers' names are opened and unlinked below: only names of the form
     * shm_name_new makes, never an arbitrary /dev/shm entry. */
    for (int q = 0; q < n; q++) {
        if (q == r || !mesh_is_local(s, q))
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
        if (mesh_is_local(s, p))
            res = shm_conn_create(&m->recv[p], s->nslots, s->slot_size,
                                  mine + (size_t)p * SHM_NAME_MAX, 0);
    /* Every segment exists (or its creator failed) after this barrier... */
    bres = bs_barrier(s->bs);
    for (int q = 0; q < n && res == CCL_SUCCESS && bres == CCL_SUCCESS; q++) {
        if (!mesh_is_local(s, q))
            continue;
        const char *theirs = names + ((size_t)q * (size_t)n + (size_t)r) * SHM_NAME_MAX;
        res = shm_conn_open(&m->send[q], theirs);
        if (res != CCL_SUCCESS)
            err_prefix("rank %d: mapping the segment of rank %d: ", r, q);
    }
    /* ... and is mapped by its sender after this one (unless someone
     * failed): the names can go either way. */
    ccl_result_t bres2 = bs_barrier(s->bs);
    mesh_unlink(s, names, n);
    CCL_TRY(mesh_first_error(res, bres, bres2));
out:
    free(names);
    return res;
}

ccl_result_t mesh_connect_board(mesh_t *m, const mesh_spec_t *s)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = s->nranks;
    size_t slot = (size_t)param_int(PARAM_ONESHOT_MAX);
    char *names = NULL;
    if (n < 2 || s->nlocal != n || slot == 0 || n > 64)
        return CCL_SUCCESS; /* no board: the tuner never picks one-shot */
    slot = (slot + 63) / 64 * 64;
    names = calloc((size_t)n, SHM_NAME_MAX);
    if (!names)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    /* As mesh_connect_shm: the name first, then the segment (rank 0's), a
     * barrier, the others map it, a barrier, everyone unlinks. */
    if (s->rank == 0)
        CCL_TRY(shm_name_new(names, "/ccl-b"));
    CCL_TRY(bs_allgather(s->bs, names, SHM_NAME_MAX));
    names[SHM_NAME_MAX - 1] = '\0';
    if (s->rank != 0) {
        /* Opened and unlinked below: only a name of the form rank 0's
         * shm_name_new makes, never an arbitrary /dev/shm entry. */
        char from[32];
        snprintf(from, sizeof from, "rank %d: rank 0", s->rank);
        CCL_TRY(shm_name_check(names, SHM_NAME_MAX, from));
    }
    if (s->rank == 0)
        res = shm_board_create(&m->board, n, slot, names);
    ccl_result_t bres = bs_barrier(s->bs);
    if (res == CCL_SUCCESS && bres == CCL_SUCCESS && s->rank != 0)
        res = shm_board_open(&m->board, names, n, s->rank);
    ccl_result_t bres2 = bs_barrier(s->bs); /* all mapped (or failed) */
    shm_name_unlink(names);
    CCL_TRY(mesh_first_error(res, bres, bres2));
out:
    free(names);
    return res;
}

void mesh_prefault(mesh_t *m, int peer)
{
    shm_conn_prefault(&m->send[peer]);
    shm_conn_prefault(&m->recv[peer]);
}

void mesh_poison(mesh_t *m, int nranks, const char *reason)
{
    net_poison(m->net, reason);
    shm_board_poison(&m->board);
    for (int i = 0; m->send && i < nranks; i++) {
        shm_conn_poison(&m->send[i], reason);
        shm_conn_poison(&m->recv[i], reason);
    }
}

void mesh_close(mesh_t *m, int nranks)
{
    /* The proxy thread uses the far ends of the net FIFOs: it goes first. */
    net_destroy(m->net);
    m->net = NULL;
    shm_board_close(&m->board);
    for (int i = 0; m->send && i < nranks; i++) {
        shm_conn_close(&m->send[i]);
        shm_conn_close(&m->recv[i]);
    }
    free(m->send);
    free(m->recv);
    m->send = m->recv = NULL;
}
