/*
 * comm.c - communicator life cycle: unique id, init (one rank, or all ranks
 * of a process), destroy, abort, and the queries.
 */
#include "core/comm.h"
#include "core/connect.h"
#include "core/group.h"
#include "core/redop.h"
#include "core/tuner.h"
#include "base/err.h"
#include "exec/fault.h"
#include "core/handle.h"
#include "base/param.h"
#include "base/wait.h"
#include "topo/cpus.h"
#include "topo/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

CCL_API ccl_result_t ccl_get_unique_id(ccl_unique_id_t *id)
{
    err_clear();
    if (!id)
        return err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_get_unique_id: id is NULL");
    return bs_id_create(id);
}

/* Every rank must use the same slot geometry (sender and receiver slice the
 * same way), so ranks agree on the smallest configured values. */
static ccl_result_t comm_agree_fifo(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS;
    /* A network message costs several thread hand-offs (executor, proxy,
     * socket helpers, both ends): across nodes, slots must be large enough
     * to amortise them. */
    int net = comm->layout.nnodes > 1;
    int64_t buffsize = param_int(net ? PARAM_NET_BUFFSIZE : PARAM_BUFFSIZE), nslots = param_int(PARAM_NSLOTS);
    if (nslots < 2 || nslots > SHM_MAX_SLOTS || buffsize < 4096 * nslots || buffsize / nslots >= SHM_SLOT_MAX_BYTES)
        return err_set(CCL_ERR_INVALID_ARGUMENT,
                       "%s=%lld / CCL_NSLOTS=%lld: need 2..%d slots of at least 4 KiB and under 2 GiB",
                       net ? "CCL_NET_BUFFSIZE" : "CCL_BUFFSIZE", (long long)buffsize, (long long)nslots,
                       SHM_MAX_SLOTS);
    int64_t *all = calloc((size_t)comm->nranks * 2, sizeof *all);
    if (!all)
        return err_set(CCL_ERR_SYSTEM, "out of memory");
    int64_t slot = buffsize / nslots / 64 * 64;
    all[2 * comm->rank] = slot;
    all[2 * comm->rank + 1] = nslots;
    CCL_TRY(bs_allgather(&comm->bs, all, 2 * sizeof *all));
    for (int i = 0; i < comm->nranks; i++) {
        if (all[2 * i] < slot)
            slot = all[2 * i];
        if (all[2 * i + 1] < nslots)
            nslots = all[2 * i + 1];
    }
    comm->slot_size = (size_t)slot;
    comm->nslots = (uint32_t)nslots;
out:
    free(all);
    return res;
}

/* Non-temporal stores skip reading a result's lines before writing them,
 * but leave the result out of the cache. They pay where the local ranks'
 * results together outgrow the caches: for allgather and broadcast
 * (copies) 64 MiB of them on this host. Interleaved A/Bs on the 2-core VM
 * (perf/RESULTS.md, "Streaming stores by the host's total"): 4-rank
 * allgather and broadcast at 16 MiB 0.76-0.79x the plain time, 8-rank
 * allgather at 8-16 MiB 0.52-0.86x, where 16 MiB on 2 ranks was even
 * (0.99) and 4-8 MiB on 2 or 4 ranks 1.4-2.2x slower; reductions
 * (allreduce, reduce-scatter: 16 MiB results on 4 ranks) gained nothing
 * (1.04-1.08x), so they keep 32 MiB, as do the other copies (gather,
 * scatter, alltoall, send/recv: not measured). nlocal counts this
 * communicator's ranks on the host, not other jobs'. */
#define COMM_STREAM_DEFAULT ((size_t)32 << 20)
#define COMM_STREAM_HOST_TOTAL ((size_t)64 << 20)
#define COMM_STREAM_COPIES_MIN ((size_t)8 << 20)
/* The fused 2-rank allreduce (exec_pair.c) streams where its four buffers
 * (both ranks' inputs and outputs) reach that host total, 16 MiB each;
 * in place it never does (the outputs are the lines it just read: plain
 * stores took 0.67-0.93x the time of streamed ones at 2-64 MiB). 2 ranks,
 * perf/ab.sh -r 4, time streamed / plain, out of place: 0.66-0.67 at
 * 16-64 MiB rotating over 64 MiB buffers, 0.92 at 16 MiB on 16 MiB
 * buffers, but 1.5-1.9 at 1-8 MiB on buffers that fit the 32 MiB L3
 * (perf/RESULTS.md, "Fused 2-rank allreduce"). */
#define COMM_STREAM_PAIR_BUFFERS 4

static void comm_stream_thresholds(struct ccl_comm *comm)
{
    int64_t v = param_int(PARAM_STREAM_THRESHOLD);
    if (v >= 0) {
        comm->stream_threshold = comm->stream_copies_from = comm->stream_pair_from = (size_t)v;
        return;
    }
    size_t copies = COMM_STREAM_HOST_TOTAL / (size_t)(comm->nlocal > 0 ? comm->nlocal : 1);
    comm->stream_threshold = COMM_STREAM_DEFAULT;
    comm->stream_pair_from = COMM_STREAM_HOST_TOTAL / COMM_STREAM_PAIR_BUFFERS;
    comm->stream_copies_from = copies < COMM_STREAM_COPIES_MIN ? COMM_STREAM_COPIES_MIN
                               : copies > COMM_STREAM_DEFAULT ? COMM_STREAM_DEFAULT
                                                              : copies;
}

/* Groups ranks by host id into nodes, numbered by their lowest rank, and
 * finds this rank's place. Any spread works: 3 ranks on one node and 1 on
 * another, or ranks of one node interleaved with another's. */
static ccl_result_t comm_layout(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = comm->nranks;
    int *arr = calloc((size_t)(4 * n + 1), sizeof *arr);
    if (!arr)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for the node layout of %d ranks", n);
    int *node_of = arr, *local_rank = arr + n, *node_ranks = arr + 2 * n, *node_first = arr + 3 * n;
    int nnodes = 0;
    for (int i = 0; i < n; i++) {
        node_of[i] = -1;
        for (int j = 0; j < i; j++)
            if (comm->bs.peers[j].hostid == comm->bs.peers[i].hostid) {
                node_of[i] = node_of[j];
                break;
            }
        if (node_of[i] < 0)
            node_of[i] = nnodes++;
    }
    /* Counting sort by node keeps rank order within each node. */
    for (int i = 0; i < n; i++)
        node_first[node_of[i] + 1]++;
    for (int k = 0; k < nnodes; k++)
        node_first[k + 1] += node_first[k];
    int max_local = 0;
    for (int k = 0; k < nnodes; k++) {
        int at = node_first[k];
        for (int i = 0; i < n; i++)
            if (node_of[i] == k) {
                local_rank[i] = at - node_first[k];
                node_ranks[at++] = i;
            }
        if (at - node_first[k] > max_local)
            max_local = at - node_first[k];
    }
    comm->layout = (sched_layout_t){nnodes, node_of, local_rank, node_first, node_ranks};
    comm->nlocal = node_first[node_of[comm->rank] + 1] - node_first[node_of[comm->rank]];
    comm->local_rank = local_rank[comm->rank];
    comm->max_local = max_local;
out:
    return res;
}

void comm_free(struct ccl_comm *comm)
{
    comm_async_free(comm);
    free((void *)comm->layout.node_of); /* the one allocation behind every array */
    connect_close(comm);
    shm_peer_cache_close(&comm->peer_maps);
    bs_close(&comm->bs);
    sched_free(&comm->sched);
    for (int i = 0; i < comm->group_scheds_cap; i++)
        sched_free(&comm->group_scheds[i]);
    free(comm->group_scheds);
    sched_free(&comm->p2p_sched);
    free(comm->eng_arena);
    redop_free(comm);
    free(comm->scratch);
    exec_lock_destroy(&comm->exec_lock);
    pthread_mutex_destroy(&comm->p2p_queue_lock);
    pthread_mutex_destroy(&comm->bs_lock);
    pthread_mutex_destroy(&comm->redop_lock);
    pthread_mutex_destroy(&comm->pending_lock);
    pthread_cond_destroy(&comm->pending_cond);
    free(comm);
}

ccl_result_t comm_build(struct ccl_comm *comm, const ccl_unique_id_t *id)
{
    ccl_result_t res = CCL_SUCCESS;
    bs_peer_t me;
    CCL_TRY(fault_init());
    int64_t window = param_int(PARAM_ENGINE_WINDOW);
    if (window < 0 || window > 64)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "CCL_ENGINE_WINDOW=%lld: must be 1..64, or 0 for the default",
                 (long long)window);
    memset(&me, 0, sizeof me);
    me.hostid = topo_host_id();
    me.kernelid = topo_kernel_id();
    me.pid = (int32_t)getpid();
    topo_hostname(me.hostname, sizeof me.hostname);
    CCL_TRY(bs_init(&comm->bs, id, comm->rank, comm->nranks, &me));

    CCL_TRY(comm_layout(comm));
    /* Across hosts, a rank that waits for a reply over the network can
     * move the next round meanwhile (engine.h); on one host no gain was
     * measured, and one round at a time takes the shortest path. */
    comm->eng_window = window > 0 ? (size_t)window : comm->layout.nnodes > 1 ? 2 : 1;
    /* Ranks of other nodes may still share our cores (CCL_HOSTID, network
     * namespaces): the wait policy counts everyone on this kernel, twice
     * when each also runs a busy net proxy thread. */
    int cores_shared_by = 0, host_shared_by = comm->nlocal;
    for (int i = 0; i < comm->nranks; i++)
        cores_shared_by += comm->bs.peers[i].kernelid == me.kernelid;
    comm->kernel_ranks = cores_shared_by;
    if (comm->layout.nnodes > 1) {
        cores_shared_by *= 2;
        host_shared_by *= 2;
    }
    /* This host's ranks share its cgroup's CPU quota, if any (cpus.h). */
    int crowded = topo_cores_crowded(cores_shared_by, host_shared_by);
    comm->spin = wait_spin_budget(crowded);
    comm->yield = wait_yield_budget(crowded);
    int64_t help = param_int(PARAM_COPY_HELP);
    comm->copy_help = help >= 2 || (help == 1 && !crowded);
    comm->copy_help_idle = help >= 1;
    CCL_TRY(comm_agree_fifo(comm));
    CCL_TRY(connect_host(comm));
    CCL_TRY(tuner_init(comm));
    CCL_TRY(connect_prefault(comm));
    if (posix_memalign(&comm->scratch, 4096, 2 * comm->slot_size) != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for %zu bytes of scratch", 2 * comm->slot_size);
    memset(comm->scratch, 0, 2 * comm->slot_size);
    comm->check_args = param_int(PARAM_CHECK_ARGS) != 0;
    comm->verify_every = param_int(PARAM_VERIFY) > 0 ? (int)param_int(PARAM_VERIFY) : 0;
    comm->redop_tag = redop_new_tag();
    comm_stream_thresholds(comm);
    for (int c = 0; c < SCHED_NUM_COLLS; c++)
        comm->single_copy_from[c] = tuner_single_copy_bytes(comm, (sched_coll_t)c);
    comm->net_zero_copy_threshold = (size_t)param_int(PARAM_NET_ZERO_COPY_THRESHOLD);
    LOG_INFO(SUB_INIT, "rank %d/%d ready: %d nodes, %d local ranks (local rank %d), %u slots of %zu bytes, spin %d",
             comm->rank, comm->nranks, comm->layout.nnodes, comm->nlocal, comm->local_rank, comm->nslots, comm->slot_size, comm->spin);
    /* ccl's GPU kernels, before any call of ours can hold a stream
     * (kernels_cuda.h, dev_cuda_load_kernels): only in a process that uses
     * CUDA already, so host-only users never start it. A failure here
     * fails no host call; the first device-buffer call reports it. */
    if (dev_cuda_loaded() && dev_kernels_ready() != CCL_SUCCESS) {
        LOG_WARN(SUB_INIT, "rank %d: %s; calls on device buffers will fail", comm->rank, err_message());
        err_clear();
    }
out:
    return res;
}

ccl_result_t comm_alloc(struct ccl_comm **out, int nranks, int rank)
{
    struct ccl_comm *comm = calloc(1, sizeof *comm);
    if (!comm)
        return err_set(CCL_ERR_SYSTEM, "out of memory for a communicator");
    wait_setup(); /* before the comm's first lock: whether it may have an owner */
    comm->rank = rank;
    comm->nranks = nranks;
    comm->bs.listen_fd = comm->bs.next_fd = comm->bs.prev_fd = -1;
    exec_lock_init(&comm->exec_lock);
    pthread_mutex_init(&comm->p2p_queue_lock, NULL);
    pthread_mutex_init(&comm->bs_lock, NULL);
    pthread_mutex_init(&comm->redop_lock, NULL);
    pthread_mutex_init(&comm->pending_lock, NULL);
    pthread_cond_init(&comm->pending_cond, NULL);
    *out = comm;
    return CCL_SUCCESS;
}

ccl_result_t comm_create(struct ccl_comm **out, int nranks, const ccl_unique_id_t *id, int rank)
{
    ccl_result_t res = CCL_SUCCESS;
    struct ccl_comm *comm = NULL;
    CCL_TRY(comm_alloc(&comm, nranks, rank));
    log_set_rank(rank);
    CCL_TRY(comm_build(comm, id));
    CCL_TRY(comm_publish(comm));
    *out = comm;
    comm = NULL;
out:
    if (comm)
        comm_free(comm);
    return res;
}

CCL_API ccl_result_t ccl_comm_init_rank(ccl_comm_t *out, int nranks, ccl_unique_id_t id, int rank)
{
    ccl_result_t res = CCL_SUCCESS;
    err_clear();
    if (!out)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_rank: comm is NULL");
    *out = NULL;
    if (nranks < 1)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_rank: nranks=%d, must be at least 1", nranks);
    if (rank < 0 || rank >= nranks)
        CCL_FAIL(CCL_ERR_INVALID_RANK, "ccl_comm_init_rank: rank %d is not in 0..%d", rank, nranks - 1);
    CCL_TRY(comm_create(out, nranks, &id, rank));
out:
    return res;
}

typedef struct {
    ccl_unique_id_t id;
    int ndev, rank;
    ccl_comm_t comm;
    ccl_result_t res;
    char err[COMM_ERR_MAX];
} init_all_arg_t;

static void *comm_init_all_thread(void *p)
{
    init_all_arg_t *a = p;
    a->res = ccl_comm_init_rank(&a->comm, a->ndev, a->id, a->rank);
    if (a->res != CCL_SUCCESS)
        snprintf(a->err, sizeof a->err, "%s", err_message());
    return NULL;
}

CCL_API ccl_result_t ccl_comm_init_all(ccl_comm_t *comms, int ndev, const int *devlist)
{
    ccl_result_t res = CCL_SUCCESS;
    init_all_arg_t *args = NULL;
    pthread_t *threads = NULL;
    int started = 0;
    err_clear();
    if (!comms)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_all: comms is NULL");
    if (ndev < 1)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_init_all: ndev=%d, must be at least 1", ndev);
    args = calloc((size_t)ndev, sizeof *args);
    threads = calloc((size_t)ndev, sizeof *threads);
    if (!args || !threads)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory");
    ccl_unique_id_t id;
    CCL_TRY(ccl_get_unique_id(&id));
    for (int i = 0; i < ndev; i++) {
        args[i] = (init_all_arg_t){.id = id, .ndev = ndev, .rank = i};
        int rc = pthread_create(&threads[i], NULL, comm_init_all_thread, &args[i]);
        if (rc != 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "cannot start init thread %d of %d", i, ndev);
        started++;
    }
out:
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; args && i < ndev; i++) {
        if (res == CCL_SUCCESS && args[i].res != CCL_SUCCESS) {
            res = args[i].res;
            err_set(res, "ccl_comm_init_all: rank %d: %s", i, args[i].err);
        }
    }
    for (int i = 0; args && i < ndev; i++) {
        if (res == CCL_SUCCESS)
            comms[i] = args[i].comm;
        else if (args[i].comm)
            ccl_comm_destroy(args[i].comm);
    }
    free(args);
    free(threads);
    return res;
}

/* Waits for queued and running calls, then frees. Abort first makes them
 * finish quickly. */
ccl_result_t comm_teardown(ccl_comm_t comm, const char *who)
{
    if (!comm || !comm_unpublish(comm))
        return err_set(CCL_ERR_NULL_COMM, "%s: comm is NULL or already destroyed", who);
    comm_pending_wait(comm);
    comm_free(comm);
    return CCL_SUCCESS;
}

CCL_API ccl_result_t ccl_comm_destroy(ccl_comm_t comm)
{
    err_clear();
    /* Destroy waits for queued calls, which this thread would only run at
     * its ccl_group_end: refuse rather than wait forever. */
    if (comm_is_live(comm) && group_holds(comm))
        return err_set(CCL_ERR_GROUP, "ccl_comm_destroy: this thread's open group has calls queued on the "
                       "communicator; call ccl_group_end first (or ccl_comm_abort to drop them)");
    if (!comm_is_live(comm))
        return comm_async_teardown(comm, 0, "ccl_comm_destroy");
    return comm_teardown(comm, "ccl_comm_destroy");
}

CCL_API ccl_result_t ccl_comm_abort(ccl_comm_t comm)
{
    err_clear();
    if (!comm_is_live(comm))
        return comm_async_teardown(comm, 1, "ccl_comm_abort");
    atomic_store(&comm->aborted, 1);
    group_drop(comm); /* queued in this thread's open group: they never run */
    /* Wakes our own blocked waiters and tells peers, whose waits on these
     * connections end with an error instead of a timeout. */
    connect_poison(comm, NULL);
    return comm_teardown(comm, "ccl_comm_abort");
}

CCL_API ccl_result_t ccl_comm_count(ccl_comm_t comm, int *count)
{
    err_clear();
    if (!comm_is_live(comm) && !comm_async_known(comm))
        return err_set(CCL_ERR_NULL_COMM, "ccl_comm_count: comm is NULL or destroyed");
    if (!count) {
        err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_count: count is NULL");
        comm_record_error(comm);
        return CCL_ERR_INVALID_ARGUMENT;
    }
    *count = comm->nranks;
    return CCL_SUCCESS;
}

CCL_API ccl_result_t ccl_comm_user_rank(ccl_comm_t comm, int *rank)
{
    err_clear();
    if (!comm_is_live(comm) && !comm_async_known(comm))
        return err_set(CCL_ERR_NULL_COMM, "ccl_comm_user_rank: comm is NULL or destroyed");
    if (!rank) {
        err_set(CCL_ERR_INVALID_ARGUMENT, "ccl_comm_user_rank: rank is NULL");
        comm_record_error(comm);
        return CCL_ERR_INVALID_ARGUMENT;
    }
    *rank = comm->rank;
    return CCL_SUCCESS;
}

CCL_API const char *ccl_get_last_error(ccl_comm_t comm)
{
    if (comm && comm_is_live(comm))
        return comm->last_error;
    /* A failed nonblocking init's message is the comm's; while the init
     * runs, only its thread writes there, so the caller gets its own. */
    if (comm && comm_async_known(comm) && comm_async_state(comm) != CCL_IN_PROGRESS)
        return comm->last_error;
    return err_message();
}
