/*
 * tuner.c - picks the algorithm of each call: the communicator's side of
 * the cost model in topo/tune.c.
 *
 * At comm init (tuner_init) every rank works out the model's inputs: link
 * costs from CCL_SHM_BW/LAT and CCL_NET_BW/LAT or, for the network, the
 * NIC the topology puts closest to it; cores per node; the node layout,
 * slot and board sizes; CCL_ALGO. Then the ranks agree on them through the
 * bootstrap (the slowest link figures, the fewest cores, rank 0's
 * CCL_ALGO): every rank must pick the same algorithm for every call, or
 * their schedules would not match. The model stays in the comm; per call,
 * tuner_pick evaluates it for the call's size: a few dozen floating-point
 * operations, skipped when the call has the size of the previous one.
 *
 * CCL_DEBUG=INFO CCL_DEBUG_SUBSYS=TUNING shows the inputs and the
 * allreduce cost table at init (rank 0), TRACE each call's pick.
 */
#include "core/tuner.h"
#include "base/err.h"
#include "base/param.h"
#include "device/reduce.h"
#include "topo/cpus.h"
#include "topo/topo.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where CCL_NET_BW and the topology say nothing: a 10 Gbit/s NIC (the
 * topology's own default for Ethernet) and a socket's latency. */
#define TUNER_NET_GBPS_DEFAULT 10.0
#define TUNER_NET_LAT_DEFAULT 20.0
/* TCP through the net transport carries about this much of the wire speed. */
#define TUNER_NET_EFFICIENCY 0.9
/* CCL_SHM_LAT=-1: a hop between ranks that each have a core is a cache
 * line handed over (0.1 us, from the 2-rank latencies in tune.c); with
 * more ranks than cores the receiver is usually not running and a hop
 * costs a wake-up: 4 ranks on the 2-core VM took 10-20 us per 8-byte
 * allreduce. Across nodes every rank also has a progress thread (the net
 * proxy), so there a node's cores are shared once they are fewer than
 * twice its ranks. */
#define TUNER_SHM_LAT_CORE 0.1
#define TUNER_SHM_LAT_SHARED 10.0
/* CCL_NET_LAT=-1 where cores are shared that way: a network hop wakes the
 * proxy and socket threads at both ends. What many hops at once cost on
 * shared cores is the model's CPU bound (tune.c, TUNE_NET_END_US); this is
 * one hop alone: 4 fake nodes x 2 ranks on the 2-core VM, an 8-byte ring
 * allreduce, whose one slice crosses 7 network and 7 shm hops in turn,
 * took 1.5-1.9 ms, ~0.95 ms of it what every algorithm paid there, so
 * 100-150 us a network hop (it was 500 us before that bound existed). */
#define TUNER_NET_LAT_SHARED 150.0
/* CCL_SINGLE_COPY_THRESHOLD=-1: from which size a collective reads local
 * peers' ccl_mem_alloc buffers in place rather than through the FIFOs, as
 * measured in A/Bs on the project's 2-core VMs (perf/RESULTS.md, "Single
 * copy from 1 MiB"): every collective from 1 MiB, reduce from 16 MiB.
 *
 * A FIFO moves each byte twice, and the reader takes every line from the
 * writer's cache. Where the VM's two vCPUs sit far apart on the host (a
 * cache line's round trip between them 500 ns instead of 85-110, by all
 * appearances another socket; the placement changes every few seconds)
 * that transfer collapses: the 2-rank FIFO allreduce took
 * 2.6-3.6x as long there as single copy at 1-8 MiB (578 against 220 us
 * at 1 MiB), while single copy, which reads lines its owner only read,
 * kept its speed. On the same socket single copy was 0.83-1.11x the FIFO
 * for allreduce (2, 4, 8 ranks), faster for reduce-scatter (2 ranks,
 * 0.67-1.03x), scatter (0.45-0.94x), gather from 2 MiB (0.66-1.0x; 1.02-
 * 1.07x at 1 MiB), the 2-rank allgather (1 and 2 MiB: 50 and 97 against
 * 69 and 149 us) once its twin copies stopped streaming below
 * CCL_STREAM_THRESHOLD (exec/host.c), about equal for the 4-rank
 * allgather; broadcast, alltoall and send/recv had been 1.03-3.5x faster
 * from 1 MiB before. Reduce is the exception: on 2 ranks single copy was
 * 1.19-1.37x slower up to 8 MiB, on 4 ranks 0.97-1.10x. */
#define TUNER_SINGLE_COPY_BYTES ((size_t)1 << 20)
#define TUNER_SINGLE_COPY_REDUCE ((size_t)16 << 20)

const char *tuner_algo_name(algo_t algo)
{
    return tune_algo_name(algo);
}

/* What each rank proposes; the bootstrap allgathers it. */
typedef struct {
    double shm_bw, shm_lat, net_bw, net_lat;
    double cores;
    uint64_t single_copy;
    int32_t bad_algo, single_copy_auto;
    uint32_t allowed[SCHED_NUM_COLLS];
} tuner_wire_t;

/* The NIC the topology puts closest to this local rank: its speed and
 * latency; defaults when there is none. */
static void tuner_net_from_topo(const topo_t *topo, int local_rank, int nlocal, double *gbps, double *lat)
{
    topo_affinity_t aff = {.nic = -1};
    *gbps = TUNER_NET_GBPS_DEFAULT;
    *lat = TUNER_NET_LAT_DEFAULT;
    if (topo_rank_affinity(topo, local_rank, nlocal, 0, &aff) != CCL_SUCCESS || aff.nic < 0) {
        LOG_INFO(SUB_TUNING, "tuner: no NIC in the topology; assuming %g Gbit/s, %g us", *gbps, *lat);
        err_clear();
        return;
    }
    const topo_node_t *nic = &topo->nodes[aff.nic];
    if (nic->speed_gbps > 0)
        *gbps = nic->speed_gbps;
    if (nic->net_lat > 0)
        *lat = nic->net_lat;
    LOG_INFO(SUB_TUNING, "tuner: NIC %s, %g Gbit/s (%s), ~%g us", nic->name, nic->speed_gbps,
             topo_speed_src_str(nic->speed_src), nic->net_lat);
}

void tuner_links_local(const topo_t *topo, int local_rank, int nlocal, int kernel_ranks, int nnodes,
                       tune_links_t *out)
{
    long ncpu = topo_online_cpus();
    memset(out, 0, sizeof *out);
    if (kernel_ranks < nlocal)
        kernel_ranks = nlocal;
    /* This node's share of the machine's cores (fake nodes and network
     * namespaces share one machine), as the wait policy counts them. */
    out->cores = ncpu > 0 ? (double)ncpu * nlocal / kernel_ranks : 0;
    /* ... and no more than its cgroup's CPU quota, which its ranks share. */
    int quota = topo_cpu_quota();
    if (quota > 0 && out->cores > quota)
        out->cores = quota;
    int64_t sc = param_int(PARAM_SINGLE_COPY_THRESHOLD);
    out->single_copy_auto = sc < 0;
    if (sc >= 0) {
        out->single_copy_bytes = (size_t)sc;
    } else {
        out->single_copy_bytes = TUNER_SINGLE_COPY_BYTES;
    }
    out->shm_bw = param_num(PARAM_SHM_BW);
    if (out->shm_bw <= 0)
        out->shm_bw = 5;
    int threads = nnodes > 1 ? 2 * kernel_ranks : kernel_ranks;
    int shared = topo_cores_crowded(threads, nnodes > 1 ? 2 * nlocal : nlocal);
    out->shm_lat = param_num(PARAM_SHM_LAT);
    if (out->shm_lat < 0)
        out->shm_lat = shared ? TUNER_SHM_LAT_SHARED : TUNER_SHM_LAT_CORE;
    out->net_bw = param_num(PARAM_NET_BW);
    out->net_lat = param_num(PARAM_NET_LAT);
    if (out->net_lat < 0 && shared)
        out->net_lat = TUNER_NET_LAT_SHARED;
    /* What is left to the topology only local rank 0 reads, and for the
     * node: discovery takes tens of ms (and writes CCL_TOPO_DUMP_FILE),
     * so only when the network is used, once per node, and once per
     * process (topo_machine keeps it for the next comm). The others
     * leave net_bw 0 and net_lat -1: no opinion. */
    if ((out->net_bw > 0 && out->net_lat >= 0) || local_rank != 0)
        return;
    double gbps = TUNER_NET_GBPS_DEFAULT, lat = TUNER_NET_LAT_DEFAULT;
    if (!topo && nnodes > 1 && topo_machine(&topo) != CCL_SUCCESS)
        LOG_INFO(SUB_TUNING, "tuner: no topology (%s); assuming %g Gbit/s, %g us", err_message(), gbps, lat);
    err_clear();
    if (topo)
        tuner_net_from_topo(topo, local_rank, nlocal, &gbps, &lat);
    if (out->net_bw <= 0)
        out->net_bw = gbps / 8 * TUNER_NET_EFFICIENCY;
    if (out->net_lat < 0)
        out->net_lat = lat;
}

static void tuner_local(const struct ccl_comm *comm, tuner_wire_t *w)
{
    tune_links_t l;
    tuner_links_local(NULL, comm->local_rank, comm->nlocal, comm->kernel_ranks, comm->layout.nnodes, &l);
    memset(w, 0, sizeof *w);
    w->shm_bw = l.shm_bw;
    w->shm_lat = l.shm_lat;
    w->net_bw = l.net_bw;
    w->net_lat = l.net_lat;
    w->cores = l.cores;
    w->single_copy = l.single_copy_bytes;
    w->single_copy_auto = l.single_copy_auto;
    char bad[128];
    w->bad_algo = tune_parse_algo(param_str(PARAM_ALGO), w->allowed, bad, sizeof bad);
    static atomic_int warned;
    if (w->bad_algo && !atomic_exchange(&warned, 1))
        LOG_WARN(SUB_TUNING, "CCL_ALGO=\"%s\": %s%s; ignored", param_str(PARAM_ALGO), bad,
                 w->bad_algo > 1 ? " (and more)" : "");
}

static void tuner_log_line(void *arg, const char *text)
{
    (void)arg;
    LOG_INFO(SUB_TUNING, "%s", text);
}

size_t tuner_single_copy_bytes(const struct ccl_comm *comm, sched_coll_t coll)
{
    size_t sc = comm->tune.link.single_copy_bytes;
    if (!comm->tune.link.single_copy_auto || sc == 0)
        return sc;
    return coll == SCHED_REDUCE && sc < TUNER_SINGLE_COPY_REDUCE ? TUNER_SINGLE_COPY_REDUCE : sc;
}

ccl_result_t tuner_init(struct ccl_comm *comm)
{
    ccl_result_t res = CCL_SUCCESS;
    int n = comm->nranks;
    tuner_wire_t *all = calloc((size_t)n, sizeof *all);
    if (!all)
        CCL_FAIL(CCL_ERR_SYSTEM, "out of memory for the tuner's inputs of %d ranks", n);
    tuner_local(comm, &all[comm->rank]);
    CCL_TRY(bs_allgather(&comm->bs, all, sizeof *all));
    /* The slowest figures any rank gave (net ones: of the ranks that had
     * an opinion); rank 0's CCL_ALGO and CCL_SINGLE_COPY_THRESHOLD, or
     * where rank 0 left the threshold automatic, the largest any rank
     * worked out (today every rank works out the same; a figure that came
     * to depend on the node would need no change here). */
    tuner_wire_t agreed = all[0];
    int algo_differs = 0, copy_differs = 0;
    for (int r = 1; r < n; r++) {
        const tuner_wire_t *w = &all[r];
        agreed.shm_bw = fmin(agreed.shm_bw, w->shm_bw);
        agreed.shm_lat = fmax(agreed.shm_lat, w->shm_lat);
        if (w->net_bw > 0 && (agreed.net_bw <= 0 || w->net_bw < agreed.net_bw))
            agreed.net_bw = w->net_bw;
        agreed.net_lat = fmax(agreed.net_lat, w->net_lat);
        if (w->cores > 0 && (agreed.cores <= 0 || w->cores < agreed.cores))
            agreed.cores = w->cores; /* the most crowded node */
        algo_differs |= memcmp(w->allowed, all[0].allowed, sizeof w->allowed) != 0;
        if (all[0].single_copy_auto && w->single_copy_auto && w->single_copy > agreed.single_copy)
            agreed.single_copy = w->single_copy;
        copy_differs |= w->single_copy_auto != all[0].single_copy_auto ||
                        (!all[0].single_copy_auto && w->single_copy != all[0].single_copy);
    }
    if (agreed.net_bw <= 0) /* rank 0 of every node had one: cannot happen */
        agreed.net_bw = TUNER_NET_GBPS_DEFAULT / 8 * TUNER_NET_EFFICIENCY;
    if (agreed.net_lat < 0)
        agreed.net_lat = TUNER_NET_LAT_DEFAULT;
    if (algo_differs && comm->rank == 0)
        LOG_WARN(SUB_TUNING, "CCL_ALGO differs between ranks; every rank uses rank 0's (\"%s\" here)",
                 param_str(PARAM_ALGO));
    if (copy_differs && comm->rank == 0)
        LOG_WARN(SUB_TUNING, "CCL_SINGLE_COPY_THRESHOLD differs between ranks; every rank uses rank 0's (%s here)",
                 all[0].single_copy_auto ? "automatic" : param_str(PARAM_SINGLE_COPY_THRESHOLD));
    tune_links_t links = {
        .shm_bw = agreed.shm_bw,
        .shm_lat = agreed.shm_lat,
        .net_bw = agreed.net_bw,
        .net_lat = agreed.net_lat,
        .cores = agreed.cores,
        .slot_bytes = comm->slot_size,
        .board_bytes = comm->mesh.board.hdr ? comm->mesh.board.slot_bytes : 0,
        .single_copy_bytes = (size_t)agreed.single_copy,
        .single_copy_auto = all[0].single_copy_auto,
    };
    CCL_TRY(tune_model_init(&comm->tune, &links, n, &comm->layout));
    memcpy(comm->algo_allowed, agreed.allowed, sizeof comm->algo_allowed);
    for (int c = 0; c < SCHED_NUM_COLLS; c++)
        comm->tune_last[c].algo = -1;
    if (comm->rank == 0 && log_enabled(LOG_INFO, SUB_TUNING)) {
        tune_describe(&comm->tune, tuner_log_line, NULL);
        if (comm->tune.link.single_copy_auto)
            LOG_INFO(SUB_TUNING, "tuner: single copy from %zu bytes, for reduce from %zu",
                     tuner_single_copy_bytes(comm, SCHED_ALLREDUCE), tuner_single_copy_bytes(comm, SCHED_REDUCE));
        if (param_str(PARAM_ALGO)[0])
            LOG_INFO(SUB_TUNING, "tuner: CCL_ALGO=\"%s\"", param_str(PARAM_ALGO));
        tune_table(&comm->tune, SCHED_ALLREDUCE, 8, (size_t)1 << 30, 8, comm->algo_allowed[SCHED_ALLREDUCE],
                   tuner_log_line, NULL);
    }
out:
    free(all);
    return res;
}

algo_t tuner_pick_model(const struct ccl_comm *comm, sched_coll_t coll, size_t size, int grouped)
{
    /* Calls run under the comm's exec_lock, so the one-entry memo per
     * collective (tuner_pick reads it) needs no atomics (tune_last is the
     * comm's scratch). A memo hit is not logged: it is every call's path. */
    tuner_last_t *last = (tuner_last_t *)&comm->tune_last[coll];
    unsigned allowed = comm->algo_allowed[coll];
    double cost;
    tune_why_t why;
    algo_t algo = tune_pick(&comm->tune, coll, size, grouped, allowed, &cost, &why);
    if (why == TUNE_PICK_FALLBACK) {
        static atomic_uint warned; /* one warning per collective per process */
        if (!(atomic_fetch_or(&warned, 1u << coll) & (1u << coll)))
            LOG_WARN(SUB_TUNING, "CCL_ALGO=\"%s\": no algorithm it allows applies to %s of %zu bytes on %d ranks "
                     "(%d node%s); using the tuner's choice, %s (warned once per collective)",
                     param_str(PARAM_ALGO), sched_coll_name(coll), size, comm->nranks, comm->layout.nnodes,
                     comm->layout.nnodes == 1 ? "" : "s", tune_algo_name(algo));
    }
    LOG_TRACE(SUB_TUNING, "%s %zu bytes%s: %s, %.3g us modelled%s", sched_coll_name(coll), size,
              grouped ? " (grouped)" : "", tune_algo_name(algo), cost,
              why == TUNE_PICK_MODEL ? "" : why == TUNE_PICK_BANDWIDTH ? " (CCL_ALGO: bandwidth algorithm)"
                                                                       : " (CCL_ALGO does not apply)");
    *last = (tuner_last_t){size, grouped, (int)algo};
    return algo;
}

double tuner_estimate_us(const coll_args_t *a, int grouped)
{
    const struct ccl_comm *comm = a->comm;
    /* The model's size is nccl-tests': the whole gathered or scattered
     * buffer where counts are per rank, the same on every rank. */
    size_t size = a->count * dev_dtype_size(a->dtype);
    switch (a->coll) {
    case SCHED_ALLGATHER:
    case SCHED_GATHER:
    case SCHED_REDUCE_SCATTER:
    case SCHED_SCATTER:
    case SCHED_ALLTOALL:
        size *= (size_t)comm->nranks;
        break;
    default:
        break;
    }
    double cost = 0;
    tune_why_t why;
    tune_pick(&comm->tune, a->coll, size, grouped, comm->algo_allowed[a->coll], &cost, &why);
    return cost;
}
