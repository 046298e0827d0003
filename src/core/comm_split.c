/*
 * comm_split.c - communicators made from others: split by color and key,
 * shrink without failed ranks, and the background error query.
 *
 * Both builders only agree on a member list and hand its first member's
 * fresh unique id to the others; the new comm is then set up like any
 * other (its own bootstrap, segments and connections), so it shares
 * nothing with the parent and outlives it. Split agrees over the parent's
 * bootstrap ring (all ranks take part). Shrink cannot: the ring runs
 * through the dead, so the survivors meet at the first survivor's
 * bootstrap listener (bootstrap/rejoin.c).
 */
#include "core/comm.h"
#include "exec/exec.h"
#include "base/err.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int32_t color, key, rank;
} split_entry_t;

static int split_cmp(const void *x, const void *y)
{
    const split_entry_t *a = x, *b = y;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

CCL_API ccl_result_t ccl_comm_split(ccl_comm_t comm, int color, int key, ccl_comm_t *newcomm)
{
    ccl_result_t res = CCL_SUCCESS, idres = CCL_SUCCESS;
    split_entry_t *all = NULL, *mine = NULL;
    ccl_unique_id_t *ids = NULL;
    int locked = 0, n = 0, newrank = -1, nmine = 0;
    err_clear();
    if (!comm_is_live(comm))
        return comm_not_live(comm, "ccl_comm_split");
    /* A destroy or abort in another thread waits for us instead of freeing
     * the ring under us. */
    comm_pending_add(comm);
    if (!newcomm)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_split: newcomm is NULL");
    *newcomm = NULL;
    if (color < 0 && color != CCL_SPLIT_NOCOLOR)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_split: color %d is negative (CCL_SPLIT_NOCOLOR is %d)", color,
                 CCL_SPLIT_NOCOLOR);
    n = comm->nranks;
    all = calloc((size_t)n, sizeof *all);
    mine = calloc((size_t)n, sizeof *mine);
    ids = calloc((size_t)n, sizeof *ids);
    if (!all || !mine || !ids)
        CCL_FAIL(CCL_ERR_SYSTEM, "ccl_comm_split: out of memory for %d ranks", n);
    /* Not exec_lock: a collective on comm (a stream's, another thread's)
     * holds it while it waits for peers that may be here, in the split,
     * waiting for us. The ring carries nothing else after init. */
    pthread_mutex_lock(&comm->bs_lock);
    locked = 1;
    if (atomic_load(&comm->aborted) || atomic_load(&comm->broken_code) != CCL_SUCCESS)
        CCL_FAIL(CCL_ERR_INVALID_USAGE, "ccl_comm_split: the communicator failed or was aborted; "
                 "ccl_comm_shrink builds a new one from the survivors");
    all[comm->rank] = (split_entry_t){color, key, comm->rank};
    CCL_TRY(bs_allgather(&comm->bs, all, sizeof *all));
    for (int i = 0; i < n; i++)
        if (all[i].color == color && color != CCL_SPLIT_NOCOLOR)
            mine[nmine++] = all[i];
    qsort(mine, (size_t)nmine, sizeof *mine, split_cmp);
    for (int i = 0; i < nmine; i++)
        if (mine[i].rank == comm->rank)
            newrank = i;
    /* A leader that cannot make an id still takes part in the exchange
     * (leaving it zeroed), so the others fail at once rather than wait. */
    if (newrank == 0)
        idres = bs_id_create_local(&ids[comm->rank]);
    CCL_TRY(bs_allgather(&comm->bs, ids, sizeof *ids));
    pthread_mutex_unlock(&comm->bs_lock);
    locked = 0;
    CCL_TRY(idres);
    if (color != CCL_SPLIT_NOCOLOR) {
        static const ccl_unique_id_t none;
        if (memcmp(&ids[mine[0].rank], &none, sizeof none) == 0)
            CCL_FAIL(CCL_ERR_REMOTE, "rank %d, the first of color %d, could not create the new communicator's id",
                     mine[0].rank, color);
        CCL_TRY(comm_create(newcomm, nmine, &ids[mine[0].rank], newrank));
    }
out:
    if (locked)
        pthread_mutex_unlock(&comm->bs_lock);
    if (res != CCL_SUCCESS) {
        err_prefix("ccl_comm_split (rank %d, color %d): ", comm->rank, color);
        comm_record_error(comm);
    }
    comm_pending_done(comm); /* last: destroy may free comm now */
    free(all);
    free(mine);
    free(ids);
    return res;
}

/* The survivors' common name for this shrink: the excluded set. Not how
 * many shrinks of comm came before: ranks excluded from one shrink do not
 * call it, so they could not count it, and a later shrink of the same comm
 * with them in it would look like a mismatch. A follower's request cannot
 * reach a later shrink's leader: every member of one shrink finishes its
 * new comm (which needs all of them) before it starts the next. */
static uint64_t shrink_tag(const char *excluded, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)(excluded[i] ? i + 1 : 0)) * 0x100000001b3ull;
    return h;
}

/* Whether rank q of comm is known to have exited. Only ranks of this host:
 * elsewhere a pid means nothing to us. */
static int comm_rank_gone(void *arg, int q)
{
    struct ccl_comm *comm = arg;
    const bs_peer_t *p = &comm->bs.peers[q];
    return q != comm->rank && comm->layout.node_of[q] == comm->layout.node_of[comm->rank] &&
           p->pid != (int32_t)getpid() && exec_pid_dead((pid_t)p->pid);
}

CCL_API ccl_result_t ccl_comm_shrink(ccl_comm_t comm, const int *exclude_ranks, int nexclude, ccl_comm_t *newcomm)
{
    ccl_result_t res = CCL_SUCCESS;
    char *excluded = NULL;
    int *members = NULL, nmembers = 0, newrank = -1;
    err_clear();
    if (!comm_is_live(comm))
        return comm_not_live(comm, "ccl_comm_shrink");
    /* An abort of comm in another thread (a blocked call's) waits for us
     * instead of closing the listener under us. */
    comm_pending_add(comm);
    if (!newcomm)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_shrink: newcomm is NULL");
    *newcomm = NULL;
    if (nexclude < 0 || (nexclude > 0 && !exclude_ranks))
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_shrink: %d excluded ranks in a %s list", nexclude,
                 exclude_ranks ? "given" : "NULL");
    int n = comm->nranks;
    excluded = calloc((size_t)n, 1);
    members = calloc((size_t)n, sizeof *members);
    if (!excluded || !members)
        CCL_FAIL(CCL_ERR_SYSTEM, "ccl_comm_shrink: out of memory for %d ranks", n);
    for (int i = 0; i < nexclude; i++) {
        int q = exclude_ranks[i];
        if (q < 0 || q >= n)
            CCL_FAIL(CCL_ERR_INVALID_RANK, "ccl_comm_shrink: excluded rank %d is not in 0..%d", q, n - 1);
        if (excluded[q])
            CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_shrink: rank %d is excluded twice", q);
        excluded[q] = 1;
    }
    if (excluded[comm->rank])
        CCL_FAIL(CCL_ERR_INVALID_USAGE, "ccl_comm_shrink: rank %d is in its own exclude list; excluded ranks "
                 "must not call", comm->rank);
    for (int i = 0; i < n; i++)
        if (!excluded[i]) {
            if (i == comm->rank)
                newrank = nmembers;
            members[nmembers++] = i;
        }
    uint64_t tag = shrink_tag(excluded, n);
    ccl_unique_id_t id;
    if (newrank == 0)
        CCL_TRY(bs_rejoin_lead(&comm->bs, members, nmembers, tag, comm_rank_gone, comm, &id));
    else
        CCL_TRY(bs_rejoin_follow(&comm->bs, members[0], tag, &id));
    CCL_TRY(comm_create(newcomm, nmembers, &id, newrank));
    LOG_INFO(SUB_INIT, "ccl_comm_shrink: rank %d of %d is rank %d of %d in the new communicator", comm->rank, n,
             newrank, nmembers);
out:
    if (res != CCL_SUCCESS) {
        err_prefix("ccl_comm_shrink (rank %d): ", comm->rank);
        comm_record_error(comm);
    }
    comm_pending_done(comm); /* last: an abort may free comm now */
    free(excluded);
    free(members);
    return res;
}

CCL_API ccl_result_t ccl_comm_get_async_error(ccl_comm_t comm, ccl_result_t *async_error)
{
    err_clear();
    if (!comm_is_live(comm) && !comm_async_known(comm))
        return err_set(CCL_ERR_NULL_COMM, "ccl_comm_get_async_error: comm is NULL or destroyed");
    if (!async_error) {
        err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_get_async_error: async_error is NULL");
        comm_record_error(comm);
        return CCL_ERR_INVALID_ARGUMENT;
    }
    if (!comm_is_live(comm)) {
        /* A nonblocking init's comm: running, or failed (its message is the
         * comm's last error). */
        *async_error = comm_async_state(comm);
        return CCL_SUCCESS;
    }
    ccl_result_t e = CCL_SUCCESS;
    if (atomic_load(&comm->aborted)) {
        e = err_set(CCL_ERR_ABORTED, "the communicator was aborted");
    } else if (comm->mesh.net && net_failed(comm->mesh.net)) {
        e = err_set(CCL_ERR_REMOTE, "%s", net_error(comm->mesh.net));
    } else if (atomic_load(&comm->broken_code) != CCL_SUCCESS) {
        /* The failed call's own message is already in last_error. */
        *async_error = (ccl_result_t)atomic_load(&comm->broken_code);
        return CCL_SUCCESS;
    } else {
        /* A local rank that failed (its reason) or exited; one that
         * destroyed its comm, then exited, left in order: not an error
         * until a call needs it (that call names it). */
        e = exec_local_failure(comm, 0, comm->nranks - 1, 1, "use the communicator");
    }
    if (e != CCL_SUCCESS)
        comm_record_error(comm);
    *async_error = e;
    return CCL_SUCCESS;
}
