/*
 * ccl_info.c - ccl-info: prints the topology ccl sees, without running a
 * job: sockets, NUMA nodes, cores, the PCI tree with GPUs and NICs (bus
 * ids, link rates, NIC speeds and where they came from), and the best-path
 * matrices GPU<->GPU and GPU/NUMA->NIC. It reads this machine, or the hwloc
 * XML export named by --topo or CCL_TOPO_FILE, and honours
 * CCL_TOPO_DUMP_FILE like the library does.
 *
 * With --explain it also shows what the tuner would do for a layout (this
 * machine's cores on one node by default, or --nodes/--ppn/--nranks): the
 * inputs of the cost model, the channels the schedules use (ring order,
 * the two trees, recursive doubling partners, the hierarchical rails), and
 * per collective the modelled cost of every algorithm and the pick from
 * 8 B to 1 GiB.
 *
 * It links libccl.a and uses the library's internal topology and tuner
 * APIs (src/topo/topo.h, src/topo/tune.h), so what it prints is what the
 * library works from.
 */
#include "core/comm.h"
#include "core/connect.h"
#include "core/tuner.h"
#include "base/err.h"
#include "algos/tree.h"
#include "base/mem.h"
#include "base/param.h"
#include "topo/cpus.h"
#include "topo/hugepages.h"
#include "topo/topo.h"
#include "topo/tune.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "USAGE: %s [--topo FILE] [--ranks N] [--explain [layout and link options]]\n"
            "Prints the topology ccl finds on this machine.\n"
            "  --topo FILE      an hwloc XML export to read instead (as CCL_TOPO_FILE=FILE does)\n"
            "  --ranks N        also show the GPU, NUMA node, NIC and CPUs each of N local ranks\n"
            "                   would use (GPUs when present, else NUMA nodes in blocks)\n"
            "  --explain        also show the tuner's view, without running a job: its inputs, the\n"
            "                   channels (ring, trees, recursive doubling, hierarchical rails) and\n"
            "                   per collective each algorithm's modelled cost and the pick by size\n"
            "Layout for --explain (default: one node, as many ranks as this machine has cores,\n"
            "at least 2, or --ranks N):\n"
            "  --nodes N        nodes (hosts)\n"
            "  --ppn N          ranks per node\n"
            "  --nranks N       ranks in all (default nodes x ppn), spread over the nodes in blocks\n"
            "Costs for --explain (default: CCL_NET_BW, CCL_NET_LAT, CCL_SHM_BW, CCL_SHM_LAT, else\n"
            "this machine's NIC and ccl's defaults):\n"
            "  --net-bw GB/s    one node's NIC, each direction\n"
            "  --net-lat US     one hop between nodes\n"
            "  --shm-bw GB/s    one rank's copy or reduce pass\n"
            "  --shm-lat US     one hop between ranks of a node\n"
            "  --cores N        cores per node (default this machine's; nodes faked on one machine\n"
            "                   share them: e.g. 0.5 for 4 nodes on 2 cores)\n"
            "  --algo LIST      allowed algorithms, CCL_ALGO's syntax (default: CCL_ALGO)\n"
            "  --colls LIST     collectives to tabulate, comma-separated (default: all)\n"
            "  --factor N       size step of the tables (default 4; sizes 8 B to 1 GiB)\n"
            "  -h, --help       this text\n"
            "Environment: CCL_TOPO_FILE, CCL_TOPO_DUMP_FILE (write what was found: hwloc XML,\n"
            "or this text when the name ends in .txt), CCL_BUFFSIZE, CCL_NSLOTS, CCL_ONESHOT_MAX,\n"
            "CCL_DEBUG=INFO.\n",
            prog);
    fprintf(f, "Algorithms (the registry's, for --algo and CCL_ALGO):");
    for (int a = 0; a < ALGO_COUNT; a++)
        fprintf(f, "%s %s", a ? "," : "", algo_name((algo_t)a));
    fprintf(f, "\n");
}

static const char *name_of(const topo_t *t, int idx)
{
    return idx >= 0 ? t->nodes[idx].name : "-";
}

/* --explain's layout and cost overrides; negative: not given. */
typedef struct {
    int nodes, ppn, nranks;
    double net_bw, net_lat, shm_bw, shm_lat, cores;
    const char *algo, *colls;
    int factor;
} explain_opts_t;

static void explain_line(void *arg, const char *text)
{
    (void)arg;
    printf("  %s\n", text);
}

/* The ring in rank order with node boundaries, each tree as "rank->parent",
 * the recursive doubling exchanges and the hierarchical rails. */
static void explain_channels(const tune_model_t *m, const sched_layout_t *lay)
{
    int n = m->nranks;
    printf("\nchannels (%d ranks; nodes in [])\n  ring:", n);
    for (int r = 0; r < n; r++) {
        int node = lay->node_of[r];
        if (r == 0 || lay->node_of[r - 1] != node)
            printf(" [");
        printf("%d", r);
        printf(r + 1 == n || lay->node_of[r + 1] != node ? "]" : " ");
    }
    printf(" -> 0\n");
    for (int t = 0; t < 2 && n > 1; t++) {
        printf("  tree %d (rank->parent):", t);
        for (int r = 0; r < n; r++) {
            int parent, child[2];
            tree_links(n, t, r, &parent, child);
            if (parent < 0)
                printf(" %d=root", r);
            else
                printf(" %d->%d%s", r, parent, lay->node_of[r] != lay->node_of[parent] ? "*" : "");
        }
        printf("   (* crosses nodes; depth %d, %d inter-node hops)\n", m->tree_depth[t], m->tree_net[t]);
    }
    if (n > 1) {
        printf("  recursive doubling: %d exchange%s (rank ^", m->rd_logp, m->rd_logp == 1 ? "" : "s");
        for (int k = 0; k < m->rd_logp; k++)
            printf(" %d%s", 1 << k, m->rd_flows[k] ? "*" : "");
        printf(")");
        if (m->rd_extra)
            printf(", ranks %d..%d fold into rank - %d", n - m->rd_extra, n - 1, n - m->rd_extra);
        printf("\n");
    }
    if (m->nnodes > 1) {
        int S = m->max_local;
        printf("  hier: %d shards; shard s crosses nodes among local rank s %% size of each node:\n", S);
        for (int s = 0; s < S; s++) {
            printf("    shard %d:", s);
            for (int k = 0; k < m->nnodes; k++) {
                int sz = lay->node_first[k + 1] - lay->node_first[k];
                printf(" %d", lay->node_ranks[lay->node_first[k] + s % sz]);
            }
            printf("\n");
        }
    }
}

static int explain(const topo_t *t, const explain_opts_t *o, int local_ranks)
{
    ccl_result_t res = CCL_SUCCESS;
    sched_layout_t lay = {0};
    tune_model_t m;
    long ncpu = topo_usable_cpus();
    int nodes = o->nodes > 0 ? o->nodes : 1;
    int ppn = o->ppn > 0 ? o->ppn : local_ranks > 0 ? local_ranks : ncpu > 2 ? (int)ncpu : 2;
    int nranks = o->nranks > 0 ? o->nranks : nodes * ppn;
    if (nranks < nodes) {
        fprintf(stderr, "ccl-info: --nranks %d is fewer than --nodes %d\n", nranks, nodes);
        return 2;
    }
    CCL_TRY(tune_layout_blocked(nranks, nodes, &lay));
    int max_local = (nranks + nodes - 1) / nodes;
    tune_links_t links;
    tuner_links_local(t, 0, max_local, max_local, nodes, &links); /* nodes are machines like this one */
    if (o->net_bw > 0)
        links.net_bw = o->net_bw;
    if (o->net_lat >= 0)
        links.net_lat = o->net_lat;
    if (o->shm_bw > 0)
        links.shm_bw = o->shm_bw;
    if (o->shm_lat >= 0)
        links.shm_lat = o->shm_lat;
    if (o->cores > 0)
        links.cores = o->cores;
    /* What comm init would agree on: slots as comm_agree_fifo cuts
     * CCL_BUFFSIZE (CCL_NET_BUFFSIZE across nodes), the board as
     * mesh_connect_board sizes it (one node only). */
    int64_t nslots = param_int(PARAM_NSLOTS) > 0 ? param_int(PARAM_NSLOTS) : 8;
    int64_t buffsize = param_int(nodes > 1 ? PARAM_NET_BUFFSIZE : PARAM_BUFFSIZE);
    links.slot_bytes = (size_t)(buffsize / nslots / 64 * 64);
    if (links.slot_bytes == 0)
        links.slot_bytes = 4096;
    size_t board = (size_t)param_int(PARAM_ONESHOT_MAX);
    links.board_bytes = nodes == 1 && nranks >= 2 && nranks <= 64 && board ? (board + 63) / 64 * 64 : 0;
    CCL_TRY(tune_model_init(&m, &links, nranks, &lay));
    unsigned allowed[SCHED_NUM_COLLS];
    char bad[128];
    const char *algo = o->algo ? o->algo : param_str(PARAM_ALGO);
    if (tune_parse_algo(algo, allowed, bad, sizeof bad))
        fprintf(stderr, "ccl-info: algorithms \"%s\": %s (ignored)\n", algo, bad);

    printf("\ntuner (nothing is run; costs are the model's, in us)\n");
    tune_describe(&m, explain_line, NULL);
    if (algo[0])
        printf("  allowed algorithms: \"%s\"\n", algo);
    explain_channels(&m, &lay);
    for (int c = 0; c < SCHED_NUM_COLLS; c++) {
        if (c == SCHED_P2P_RECV)
            continue; /* the same table as send */
        const char *name = sched_coll_name((sched_coll_t)c);
        if (o->colls) {
            char list[256];
            snprintf(list, sizeof list, ",%s,", o->colls);
            char key[32];
            snprintf(key, sizeof key, ",%s,", name);
            if (!strcasestr(list, key))
                continue;
        }
        printf("\n");
        tune_table(&m, (sched_coll_t)c, 8, (size_t)1 << 30, (size_t)(o->factor > 1 ? o->factor : 4),
                   allowed[c], explain_line, NULL);
    }
out:
    tune_layout_free(&lay);
    if (res != CCL_SUCCESS) {
        fprintf(stderr, "ccl-info: %s: %s\n", ccl_get_error_string(res), err_message());
        return 1;
    }
    return 0;
}

static int parse_num(const char *opt, const char *text, double *out)
{
    if (param_parse_num(text, out) != 0 || *out < 0) {
        fprintf(stderr, "ccl-info: %s needs a number >= 0, not \"%s\"\n", opt, text);
        return -1;
    }
    return 0;
}

/* Whether a ccl_mem_alloc buffer of one huge page is mapped huge, as this
 * process's smaps says: the outcome, whatever decided it (shmem_enabled,
 * or the collapse base/mem.c asks for). 1 yes, 0 no, -1 unknown (no
 * buffer, or no smaps to read). */
static int info_mem_alloc_is_huge(void)
{
    char *buf = NULL;
    if (ccl_mem_alloc((void **)&buf, MEM_HUGE_PAGE) != CCL_SUCCESS)
        return -1;
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512], want[32];
    snprintf(want, sizeof want, "%lx-", (unsigned long)(uintptr_t)buf);
    int in = 0;
    long kb = -1;
    while (f && fgets(line, sizeof line, f)) {
        if ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f'))
            in = strncmp(line, want, strlen(want)) == 0; /* a mapping's header, not a field */
        else if (in && strncmp(line, "ShmemPmdMapped:", 15) == 0)
            kb = strtol(line + 15, NULL, 10);
    }
    if (f)
        fclose(f);
    if (ccl_mem_free(buf) != CCL_SUCCESS)
        fprintf(stderr, "ccl-info: freeing the probe buffer failed: %s\n", err_message());
    return kb < 0 ? -1 : kb > 0;
}

int main(int argc, char **argv)
{
    enum { OPT_EXPLAIN = 256, OPT_NODES, OPT_PPN, OPT_NRANKS, OPT_NET_BW, OPT_NET_LAT, OPT_SHM_BW, OPT_SHM_LAT,
           OPT_ALGO, OPT_COLLS, OPT_FACTOR, OPT_CORES };
    static const struct option opts[] = {
        {"topo", required_argument, 0, 't'},       {"ranks", required_argument, 0, 'r'},
        {"explain", no_argument, 0, OPT_EXPLAIN},  {"nodes", required_argument, 0, OPT_NODES},
        {"ppn", required_argument, 0, OPT_PPN},    {"nranks", required_argument, 0, OPT_NRANKS},
        {"net-bw", required_argument, 0, OPT_NET_BW}, {"net-lat", required_argument, 0, OPT_NET_LAT},
        {"shm-bw", required_argument, 0, OPT_SHM_BW}, {"shm-lat", required_argument, 0, OPT_SHM_LAT},
        {"algo", required_argument, 0, OPT_ALGO},  {"colls", required_argument, 0, OPT_COLLS},
        {"factor", required_argument, 0, OPT_FACTOR}, {"cores", required_argument, 0, OPT_CORES},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *file = NULL;
    int ranks = 0, c, do_explain = 0;
    explain_opts_t ex = {.nodes = -1, .ppn = -1, .nranks = -1, .net_bw = -1, .net_lat = -1, .shm_bw = -1,
                         .shm_lat = -1, .cores = -1, .factor = 4};
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int *count = c == 'r' ? &ranks : c == OPT_NODES ? &ex.nodes : c == OPT_PPN ? &ex.ppn
                   : c == OPT_NRANKS ? &ex.nranks : c == OPT_FACTOR ? &ex.factor : NULL;
        if (count) {
            *count = atoi(optarg);
            if (*count < 1) {
                fprintf(stderr, "%s: --%s needs a positive number\n", argv[0],
                        c == 'r' ? "ranks" : c == OPT_NODES ? "nodes" : c == OPT_PPN ? "ppn"
                        : c == OPT_NRANKS ? "nranks" : "factor");
                return 2;
            }
            continue;
        }
        switch (c) {
        case 't': file = optarg; break;
        case OPT_EXPLAIN: do_explain = 1; break;
        case OPT_NET_BW: if (parse_num("--net-bw", optarg, &ex.net_bw)) return 2; break;
        case OPT_NET_LAT: if (parse_num("--net-lat", optarg, &ex.net_lat)) return 2; break;
        case OPT_SHM_BW: if (parse_num("--shm-bw", optarg, &ex.shm_bw)) return 2; break;
        case OPT_SHM_LAT: if (parse_num("--shm-lat", optarg, &ex.shm_lat)) return 2; break;
        case OPT_CORES: if (parse_num("--cores", optarg, &ex.cores)) return 2; break;
        case OPT_ALGO: ex.algo = optarg; break;
        case OPT_COLLS: ex.colls = optarg; break;
        case 'h': usage(stdout, argv[0]); return 0;
        default: usage(stderr, argv[0]); return 2;
        }
    }
    if (optind < argc) {
        usage(stderr, argv[0]);
        return 2;
    }

    topo_t *t = NULL;
    ccl_result_t res;
    if (file) {
        res = topo_load(file, &t);
        const char *dump = param_str(PARAM_TOPO_DUMP_FILE);
        if (res == CCL_SUCCESS && dump[0])
            res = topo_dump(t, dump);
    } else {
        res = topo_discover(&t);
    }
    if (res != CCL_SUCCESS) {
        fprintf(stderr, "ccl-info: %s: %s\n", ccl_get_error_string(res), err_message());
        topo_free(t);
        return 1;
    }
    topo_print(t, stdout);
    if (!file) { /* of this process, not of the machine a file describes */
        char thp[32];
        int advised = topo_shm_huge_pages_at("", thp, sizeof thp);
        int huge = info_mem_alloc_is_huge();
        printf("usable CPUs: %d of %d online (cgroup CPU quota)\n", topo_usable_cpus(), topo_online_cpus());
        printf("shared-memory huge pages: %s (shmem_enabled: %s%s)%s\n", huge > 0 ? "yes" : huge == 0 ? "no" : "unknown",
               thp, huge > 0 && !advised ? "; ccl_mem_alloc collapses its buffers" : "",
               huge == 0 ? "; single copy maps peers' buffers 4 KiB at a time (README, Memory)" : "");
    }
    if (ranks > 0) {
        printf("\nlocal rank affinity (%d ranks)\n%-6s %-8s %-8s %-10s %s\n", ranks, "rank", "gpu", "numa", "nic",
               "cpus");
        for (int r = 0; r < ranks && res == CCL_SUCCESS; r++) {
            topo_affinity_t a;
            res = topo_rank_affinity(t, r, ranks, 1, &a);
            if (res == CCL_SUCCESS)
                printf("%-6d %-8s %-8s %-10s %s\n", r, name_of(t, a.gpu), name_of(t, a.numa), name_of(t, a.nic),
                       a.cpus[0] ? a.cpus : "-");
        }
        if (res != CCL_SUCCESS)
            fprintf(stderr, "ccl-info: %s: %s\n", ccl_get_error_string(res), err_message());
    }
    int rc = res == CCL_SUCCESS ? 0 : 1;
    if (rc == 0 && do_explain)
        rc = explain(t, &ex, ranks);
    topo_free(t);
    return rc;
}
