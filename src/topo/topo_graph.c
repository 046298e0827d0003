/*
 * topo_graph.c - the topology graph: node and link storage, and the
 * questions the rest of ccl asks of it (see topo.h): best paths, the NIC
 * closest to a GPU or NUMA node, a local rank's affinity.
 *
 * Graphs are small (tens to a few hundred nodes: only bridges that lead to
 * a GPU or NIC are kept), so each path query runs two plain O(n^2)
 * Dijkstra passes instead of keeping an all-pairs table: the first finds
 * the widest bottleneck, the second the lowest latency among links at
 * least that wide. One pass ordered by (bandwidth, latency) would be wrong:
 * "widest, then shortest" is not a metric Dijkstra can extend edge by edge.
 */
#include "topo/topo.h"
#include "base/err.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const topo_node_names[TOPO_NODE_TYPES] = {
    [TOPO_NODE_MACHINE] = "machine",  [TOPO_NODE_PACKAGE] = "package",
    [TOPO_NODE_NUMA] = "numa",        [TOPO_NODE_PCI_HOST] = "pci-host",
    [TOPO_NODE_PCI_SWITCH] = "pci-switch", [TOPO_NODE_GPU] = "gpu",
    [TOPO_NODE_NIC] = "nic",          [TOPO_NODE_NVSWITCH] = "nvswitch",
};

const char *topo_node_type_str(topo_node_type_t type)
{
    return (unsigned)type < TOPO_NODE_TYPES ? topo_node_names[type] : "?";
}

const char *topo_link_type_str(topo_link_type_t type)
{
    static const char *const names[TOPO_LINK_TYPES] = {"PCI", "HOST", "SMP", "NVL"};
    return (unsigned)type < TOPO_LINK_TYPES ? names[type] : "?";
}

const char *topo_path_type_str(topo_path_type_t type)
{
    static const char *const names[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "NODE", "SYS", "-"};
    return (unsigned)type <= TOPO_PATH_NONE ? names[type] : "?";
}

const char *topo_nic_kind_str(topo_nic_kind_t kind)
{
    switch (kind) {
    case TOPO_NIC_ETHERNET: return "Ethernet";
    case TOPO_NIC_INFINIBAND: return "InfiniBand";
    default: return "other";
    }
}

const char *topo_speed_src_str(topo_speed_src_t src)
{
    switch (src) {
    case TOPO_SPEED_SYSFS: return "sysfs";
    case TOPO_SPEED_FILE: return "file";
    case TOPO_SPEED_NAME: return "PCI name";
    default: return "default";
    }
}

/* ---- storage ---------------------------------------------------------------- */

int topo_add_node(topo_t *topo, topo_node_type_t type, const char *name)
{
    if (topo->nnodes == topo->cap_nodes) {
        int cap = topo->cap_nodes ? 2 * topo->cap_nodes : 64;
        topo_node_t *nodes = realloc(topo->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes)
            return -1;
        topo->nodes = nodes;
        topo->cap_nodes = cap;
    }
    char *cpus = strdup("");
    if (!cpus)
        return -1;
    int i = topo->nnodes++;
    topo_node_t *n = &topo->nodes[i];
    memset(n, 0, sizeof *n);
    n->type = type;
    n->index = i;
    n->parent = n->numa = n->package = n->os_index = -1;
    n->cpus = cpus;
    snprintf(n->name, sizeof n->name, "%s", name);
    return i;
}

static ccl_result_t topo_push_link(topo_node_t *n, int peer, topo_link_type_t type, double bw, double lat)
{
    if (n->nlinks == n->cap_links) {
        int cap = n->cap_links ? 2 * n->cap_links : 4;
        topo_link_t *links = realloc(n->links, (size_t)cap * sizeof *links);
        if (!links)
            return err_set(CCL_ERR_SYSTEM, "topology: out of memory for links");
        n->links = links;
        n->cap_links = cap;
    }
    n->links[n->nlinks++] = (topo_link_t){.peer = peer, .type = type, .bw = bw, .lat = lat};
    return CCL_SUCCESS;
}

ccl_result_t topo_add_link(topo_t *topo, int a, int b, topo_link_type_t type, double bw, double lat)
{
    ccl_result_t res = CCL_SUCCESS;
    if (a < 0 || b < 0 || a >= topo->nnodes || b >= topo->nnodes || a == b)
        CCL_FAIL(CCL_ERR_INTERNAL, "topology: bad link %d-%d", a, b);
    CCL_TRY(topo_push_link(&topo->nodes[a], b, type, bw, lat));
    CCL_TRY(topo_push_link(&topo->nodes[b], a, type, bw, lat));
out:
    return res;
}

ccl_result_t topo_index_types(topo_t *topo)
{
    ccl_result_t res = CCL_SUCCESS;
    for (int t = 0; t < TOPO_NODE_TYPES; t++) {
        free(topo->by_type[t]);
        topo->by_type[t] = NULL;
        topo->count[t] = 0;
    }
    for (int i = 0; i < topo->nnodes; i++)
        topo->count[topo->nodes[i].type]++;
    for (int t = 0; t < TOPO_NODE_TYPES; t++) {
        topo->by_type[t] = calloc((size_t)topo->count[t] + 1, sizeof(int));
        if (!topo->by_type[t])
            CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
        topo->count[t] = 0;
    }
    for (int i = 0; i < topo->nnodes; i++) {
        topo_node_t *n = &topo->nodes[i];
        n->type_index = topo->count[n->type];
        topo->by_type[n->type][topo->count[n->type]++] = i;
    }
out:
    return res;
}

/* ---- lookups -------------------------------------------------------------- */

int topo_count(const topo_t *topo, topo_node_type_t type)
{
    return (unsigned)type < TOPO_NODE_TYPES ? topo->count[type] : 0;
}

const topo_node_t *topo_node(const topo_t *topo, topo_node_type_t type, int i)
{
    if ((unsigned)type >= TOPO_NODE_TYPES || i < 0 || i >= topo->count[type])
        return NULL;
    return &topo->nodes[topo->by_type[type][i]];
}

/* Whether name is one of the comma-separated words of list. */
static int topo_in_list(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, len) == 0)
            return 1;
        if (!end)
            break;
        p = end + 1;
    }
    return 0;
}

const topo_node_t *topo_find(const topo_t *topo, const char *name)
{
    if (!name || !*name)
        return NULL;
    for (int i = 0; i < topo->nnodes; i++) {
        const topo_node_t *n = &topo->nodes[i];
        if (strcmp(n->name, name) == 0 || (n->busid[0] && strcasecmp(n->busid, name) == 0) ||
            topo_in_list(n->osdevs, name))
            return n;
    }
    return NULL;
}

int topo_local_numa(const topo_t *topo, int node)
{
    if (node < 0 || node >= topo->nnodes)
        return -1;
    return topo->nodes[node].numa;
}

/* ---- paths -------------------------------------------------------------------- */

/* GPUs and NICs end paths but never forward them: data between two GPUs
 * does not hop through a third one's PCIe link, nor GPU to NIC through
 * another GPU (ccl has no such relay). */
static int topo_transit(const topo_node_t *n)
{
    return n->type == TOPO_NODE_NUMA || n->type == TOPO_NODE_PCI_HOST ||
           n->type == TOPO_NODE_PCI_SWITCH || n->type == TOPO_NODE_NVSWITCH;
}

static int topo_link_usable(const topo_link_t *l, unsigned flags)
{
    return !((flags & TOPO_PATH_PCI_ONLY) && l->type == TOPO_LINK_NVLINK);
}

/* Widest bottleneck from src to dst (-1 when unreachable). */
static double topo_widest(const topo_t *topo, int src, int dst, unsigned flags, double *wide, char *done)
{
    int n = topo->nnodes;
    for (int i = 0; i < n; i++) {
        wide[i] = -1;
        done[i] = 0;
    }
    wide[src] = INFINITY;
    for (;;) {
        int u = -1;
        for (int i = 0; i < n; i++)
            if (!done[i] && wide[i] >= 0 && (u < 0 || wide[i] > wide[u]))
                u = i;
        if (u < 0 || u == dst)
            break;
        done[u] = 1;
        const topo_node_t *nu = &topo->nodes[u];
        if (u != src && !topo_transit(nu))
            continue;
        for (int k = 0; k < nu->nlinks; k++) {
            const topo_link_t *l = &nu->links[k];
            if (!topo_link_usable(l, flags) || done[l->peer])
                continue;
            double w = fmin(wide[u], l->bw);
            if (w > wide[l->peer])
                wide[l->peer] = w;
        }
    }
    return wide[dst];
}

/* Least latency (then fewest hops) from src to dst over links of at least
 * min_bw; fills prev. Returns the latency, or -1 when unreachable. */
static double topo_shortest(const topo_t *topo, int src, int dst, unsigned flags, double min_bw, double *lat,
                            int *hops, int *prev, char *done)
{
    int n = topo->nnodes;
    for (int i = 0; i < n; i++) {
        lat[i] = INFINITY;
        hops[i] = INT_MAX;
        prev[i] = -1;
        done[i] = 0;
    }
    lat[src] = 0;
    hops[src] = 0;
    for (;;) {
        int u = -1;
        for (int i = 0; i < n; i++)
            if (!done[i] && isfinite(lat[i]) &&
                (u < 0 || lat[i] < lat[u] || (lat[i] == lat[u] && hops[i] < hops[u])))
                u = i;
        if (u < 0 || u == dst)
            break;
        done[u] = 1;
        const topo_node_t *nu = &topo->nodes[u];
        if (u != src && !topo_transit(nu))
            continue;
        for (int k = 0; k < nu->nlinks; k++) {
            const topo_link_t *l = &nu->links[k];
            int v = l->peer;
            if (!topo_link_usable(l, flags) || done[v] || l->bw < min_bw)
                continue;
            double d = lat[u] + l->lat;
            if (d < lat[v] || (d == lat[v] && hops[u] + 1 < hops[v])) {
                lat[v] = d;
                hops[v] = hops[u] + 1;
                prev[v] = u;
            }
        }
    }
    return isfinite(lat[dst]) ? lat[dst] : -1;
}

static const topo_link_t *topo_link_between(const topo_t *topo, int a, int b, unsigned flags, double min_bw)
{
    const topo_node_t *na = &topo->nodes[a];
    const topo_link_t *best = NULL;
    for (int k = 0; k < na->nlinks; k++) {
        const topo_link_t *l = &na->links[k];
        if (l->peer == b && topo_link_usable(l, flags) && l->bw >= min_bw && (!best || l->lat < best->lat))
            best = l;
    }
    return best;
}

/* The farthest thing a path crosses (see topo_path_type_t). */
static topo_path_type_t topo_classify(const topo_t *topo, const topo_path_t *p, unsigned flags)
{
    if (p->nhops == 0)
        return TOPO_PATH_LOC;
    topo_path_type_t type = TOPO_PATH_LOC;
    int switches = 0, pci = 0;
    for (int i = 0; i <= p->nhops; i++) {
        const topo_node_t *n = &topo->nodes[p->nodes[i]];
        int endpoint = i == 0 || i == p->nhops;
        if (n->type == TOPO_NODE_PCI_SWITCH)
            switches++;
        if (n->type == TOPO_NODE_PCI_HOST && type < TOPO_PATH_PHB)
            type = TOPO_PATH_PHB;
        if (n->type == TOPO_NODE_NUMA && !endpoint && type < TOPO_PATH_NODE)
            type = TOPO_PATH_NODE;
        if (i == p->nhops)
            break;
        const topo_link_t *l = topo_link_between(topo, p->nodes[i], p->nodes[i + 1], flags, p->bw);
        if (!l)
            continue;
        if (l->type == TOPO_LINK_SMP)
            type = TOPO_PATH_SYS;
        else if (l->type == TOPO_LINK_NVLINK && type < TOPO_PATH_NVL)
            type = TOPO_PATH_NVL;
        else if (l->type == TOPO_LINK_PCI)
            pci = 1;
    }
    if (pci) {
        topo_path_type_t t = switches > 1 ? TOPO_PATH_PXB : TOPO_PATH_PIX;
        if (type < t)
            type = t;
    }
    return type;
}

ccl_result_t topo_path(const topo_t *topo, int from, int to, unsigned flags, topo_path_t *out)
{
    ccl_result_t res = CCL_SUCCESS;
    double *wide = NULL, *lat = NULL;
    int *hops = NULL, *prev = NULL;
    char *done = NULL;
    if (!topo || !out)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topo_path: NULL argument");
    if (from < 0 || to < 0 || from >= topo->nnodes || to >= topo->nnodes)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topo_path: node %d or %d out of range [0, %d)", from, to,
                 topo->nnodes);
    for (int k = 0; k < 2; k++) {
        const topo_node_t *n = &topo->nodes[k ? to : from];
        if (n->type == TOPO_NODE_MACHINE || n->type == TOPO_NODE_PACKAGE)
            CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topo_path: %s has no links; ask for one of its NUMA nodes",
                     n->name);
    }
    memset(out, 0, sizeof *out);
    out->nodes[0] = from;
    out->type = TOPO_PATH_LOC;
    if (from == to) {
        out->bw = INFINITY;
        goto out;
    }
    size_t n = (size_t)topo->nnodes;
    wide = malloc(n * sizeof *wide);
    lat = malloc(n * sizeof *lat);
    hops = malloc(n * sizeof *hops);
    prev = malloc(n * sizeof *prev);
    done = malloc(n);
    if (!wide || !lat || !hops || !prev || !done)
        CCL_FAIL(CCL_ERR_SYSTEM, "topo_path: out of memory");
    double w = topo_widest(topo, from, to, flags, wide, done);
    if (w < 0) {
        out->type = TOPO_PATH_NONE;
        goto out;
    }
    double l = topo_shortest(topo, from, to, flags, w, lat, hops, prev, done);
    if (l < 0)
        CCL_FAIL(CCL_ERR_INTERNAL, "topo_path: %s to %s reachable at %.2f GB/s but no path found",
                 topo->nodes[from].name, topo->nodes[to].name, w);
    if (hops[to] > TOPO_PATH_MAX)
        CCL_FAIL(CCL_ERR_INVALID_USAGE, "topo_path: %s to %s takes %d hops, more than %d",
                 topo->nodes[from].name, topo->nodes[to].name, hops[to], TOPO_PATH_MAX);
    out->bw = w;
    out->lat = l;
    out->nhops = hops[to];
    for (int v = to, i = hops[to]; v >= 0 && i >= 0; v = prev[v], i--)
        out->nodes[i] = v;
    out->type = topo_classify(topo, out, flags);
out:
    free(wide);
    free(lat);
    free(hops);
    free(prev);
    free(done);
    return res;
}

/* Whether NIC path (type, bw, lat) a is better than b, for topo_nic_closest. */
static int topo_nic_better(topo_path_type_t ta, double bwa, double lata, topo_path_type_t tb, double bwb, double latb)
{
    return ta < tb || (ta == tb && bwa > bwb) || (ta == tb && bwa == bwb && lata < latb);
}

ccl_result_t topo_nic_closest_rail(const topo_t *topo, int from, int rail, int *nic)
{
    ccl_result_t res = CCL_SUCCESS;
    topo_path_t *p = NULL;
    int *tied = NULL, ntied = 0;
    if (!topo || !nic || rail < 0)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topo_nic_closest: NULL argument or rail %d", rail);
    *nic = -1;
    int nnics = topo->count[TOPO_NODE_NIC];
    p = malloc(sizeof *p);
    tied = malloc(sizeof *tied * (size_t)(nnics > 0 ? nnics : 1));
    if (!p || !tied)
        CCL_FAIL(CCL_ERR_SYSTEM, "topo_nic_closest: out of memory");
    topo_path_type_t best_type = TOPO_PATH_NONE;
    double best_bw = 0, best_lat = 0;
    for (int i = 0; i < nnics; i++) {
        int idx = topo->by_type[TOPO_NODE_NIC][i];
        CCL_TRY(topo_path(topo, from, idx, 0, p));
        if (p->type == TOPO_PATH_NONE)
            continue;
        double bw = fmin(p->bw, topo->nodes[idx].speed_gbps / 8);
        if (ntied == 0 || topo_nic_better(p->type, bw, p->lat, best_type, best_bw, best_lat)) {
            ntied = 0;
            best_type = p->type;
            best_bw = bw;
            best_lat = p->lat;
        } else if (topo_nic_better(best_type, best_bw, best_lat, p->type, bw, p->lat)) {
            continue;
        }
        tied[ntied++] = idx; /* in index order: rail 0 is the lowest */
    }
    if (ntied > 0)
        *nic = tied[rail % ntied];
out:
    free(tied);
    free(p);
    return res;
}

ccl_result_t topo_nic_closest(const topo_t *topo, int from, int *nic)
{
    return topo_nic_closest_rail(topo, from, 0, nic);
}

ccl_result_t topo_rank_affinity(const topo_t *topo, int local_rank, int local_nranks, int use_gpus,
                                topo_affinity_t *out)
{
    ccl_result_t res = CCL_SUCCESS;
    if (!topo || !out)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topo_rank_affinity: NULL argument");
    if (local_nranks < 1 || local_rank < 0 || local_rank >= local_nranks)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topo_rank_affinity: local rank %d of %d", local_rank, local_nranks);
    *out = (topo_affinity_t){.gpu = -1, .numa = -1, .nic = -1, .cpus = ""};
    int ngpus = topo->count[TOPO_NODE_GPU], nnuma = topo->count[TOPO_NODE_NUMA];
    int anchor = -1; /* what the NIC should be close to */
    int rail = 0;    /* this rank's place among the ranks of that anchor */
    if (use_gpus && ngpus > 0) {
        out->gpu = topo->by_type[TOPO_NODE_GPU][local_rank % ngpus];
        out->numa = topo->nodes[out->gpu].numa;
        anchor = out->gpu;
        rail = local_rank / ngpus;
    } else if (nnuma > 0) {
        /* Blocks rather than round robin: neighbouring ranks, which talk
         * most in rings and chains, share a NUMA node. */
        int i = (int)((int64_t)local_rank * nnuma / local_nranks);
        out->numa = topo->by_type[TOPO_NODE_NUMA][i];
        anchor = out->numa;
        while (rail < local_rank && (int)((int64_t)(local_rank - rail - 1) * nnuma / local_nranks) == i)
            rail++;
    }
    if (out->numa >= 0)
        out->cpus = topo->nodes[out->numa].cpus;
    /* Ranks that share an anchor spread over the NICs equally close to it
     * (rails), so that two NICs on a NUMA node both carry traffic. */
    if (anchor >= 0)
        CCL_TRY(topo_nic_closest_rail(topo, anchor, rail, &out->nic));
out:
    return res;
}

ccl_result_t topo_cpus_parse(const char *list, cpu_set_t *set)
{
    ccl_result_t res = CCL_SUCCESS;
    if (!list || !set)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topo_cpus_parse: NULL argument");
    CPU_ZERO(set);
    for (const char *p = list; *p;) {
        char *end;
        errno = 0;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || errno || lo < 0)
            CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "cpu list \"%s\": bad number at \"%s\"", list, p);
        p = end;
        if (*p == '-') {
            hi = strtol(++p, &end, 10);
            if (end == p || errno || hi < lo)
                CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "cpu list \"%s\": bad range", list);
            p = end;
        }
        if (hi >= CPU_SETSIZE)
            CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "cpu list \"%s\": cpu %ld beyond CPU_SETSIZE %d", list, hi,
                     CPU_SETSIZE);
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, set);
        if (*p == ',')
            p++;
        else if (*p)
            CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "cpu list \"%s\": unexpected \"%s\"", list, p);
    }
out:
    return res;
}
