/*
 * topo_dump.c - the topology for people: the text summary ccl-info prints
 * (topo_print) and CCL_TOPO_DUMP_FILE (topo_dump).
 *
 * The dump is hwloc XML rather than a format of ccl's own: it holds
 * everything hwloc found, so loading it back (CCL_TOPO_FILE) rebuilds the
 * same graph with the same code path as a live machine, and lstopo can
 * draw it. What ccl adds that a reload could not recompute (NIC speeds
 * read from this machine's sysfs) travels as CCL* info attributes. A
 * name ending in ".txt" gets the text summary instead.
 */
#include "topo/topo.h"
#include "base/err.h"

#include <hwloc.h>

#include <errno.h>
#include <math.h>
#include <string.h>

static void topo_print_node_line(const topo_t *t, const topo_node_t *n, FILE *f)
{
    switch (n->type) {
    case TOPO_NODE_PCI_HOST:
        fprintf(f, "%s %s, local to %s", n->name, n->busid, n->numa >= 0 ? t->nodes[n->numa].name : "?");
        break;
    case TOPO_NODE_PCI_SWITCH:
        fprintf(f, "%s PCIe switch %s %04x:%04x", n->name, n->busid, n->vendor, n->device);
        break;
    case TOPO_NODE_GPU:
        fprintf(f, "%s %s %04x:%04x %s", n->name, n->busid, n->vendor, n->device, n->model[0] ? n->model : "GPU");
        if (n->osdevs[0])
            fprintf(f, " [%s]", n->osdevs);
        if (n->nvlink_peers)
            fprintf(f, ", NVLink to %d peers, %.1f GB/s", n->nvlink_peers, n->nvlink_gbs);
        break;
    case TOPO_NODE_NIC:
        fprintf(f, "%s %s %s%s %g Gb/s (%s) [%s]", n->name, n->busid[0] ? n->busid : "(no PCI)",
                topo_nic_kind_str(n->nic_kind), n->rdma ? " RDMA" : "", n->speed_gbps,
                topo_speed_src_str(n->speed_src), n->osdevs);
        if (n->model[0])
            fprintf(f, " %s", n->model);
        break;
    default:
        fprintf(f, "%s", n->name);
        break;
    }
    if (n->type != TOPO_NODE_PCI_HOST && n->busid[0]) {
        if (n->pci_gbs > 0)
            fprintf(f, ", PCIe %.2f GB/s", n->pci_gbs);
        else
            fprintf(f, ", PCIe rate unknown");
    }
    fputc('\n', f);
}

static void topo_print_pci(const topo_t *t, int parent, int depth, FILE *f)
{
    for (int i = 0; i < t->nnodes; i++) {
        const topo_node_t *n = &t->nodes[i];
        if (n->parent != parent || (n->type != TOPO_NODE_PCI_SWITCH && n->type != TOPO_NODE_GPU &&
                                    n->type != TOPO_NODE_NIC))
            continue;
        fprintf(f, "%*s", 2 * depth, "");
        topo_print_node_line(t, n, f);
        topo_print_pci(t, i, depth + 1, f);
    }
}

static void topo_print_cell(const topo_t *t, int a, int b, unsigned flags, FILE *f)
{
    topo_path_t p;
    if (topo_path(t, a, b, flags, &p) != CCL_SUCCESS || p.type == TOPO_PATH_NONE)
        fprintf(f, " %11s", "-");
    else if (p.type == TOPO_PATH_LOC)
        fprintf(f, " %11s", "X");
    else
        fprintf(f, " %6.4g %-4s", p.bw, topo_path_type_str(p.type));
}

static void topo_print_matrix(const topo_t *t, topo_node_type_t rows1, topo_node_type_t rows2,
                              topo_node_type_t cols, unsigned flags, FILE *f)
{
    fprintf(f, "%-10s", "");
    for (int j = 0; j < t->count[cols]; j++)
        fprintf(f, " %11s", topo_node(t, cols, j)->name);
    fputc('\n', f);
    topo_node_type_t rows[2] = {rows1, rows2};
    for (int r = 0; r < (rows1 == rows2 ? 1 : 2); r++)
        for (int i = 0; i < t->count[rows[r]]; i++) {
            const topo_node_t *a = topo_node(t, rows[r], i);
            fprintf(f, "%-10s", a->name);
            for (int j = 0; j < t->count[cols]; j++)
                topo_print_cell(t, a->index, topo_node(t, cols, j)->index, flags, f);
            fputc('\n', f);
        }
}

void topo_print(const topo_t *t, FILE *f)
{
    const topo_node_t *m = &t->nodes[0];
    fprintf(f, "topology of %s%s\n", t->source, t->from_file ? " (hwloc XML)" : "");
    fprintf(f, "machine%s%s: %d packages, %d NUMA nodes, %d cores, %d PUs, %.1f GiB\n", m->model[0] ? " " : "",
            m->model, t->count[TOPO_NODE_PACKAGE], t->count[TOPO_NODE_NUMA], m->ncores, m->npus,
            m->mem_bytes / 1073741824.0);
    for (int i = 0; i < t->count[TOPO_NODE_PACKAGE]; i++) {
        const topo_node_t *n = topo_node(t, TOPO_NODE_PACKAGE, i);
        fprintf(f, "  %s (P#%d) %s: %d cores, %d PUs (%s)\n", n->name, n->os_index,
                n->model[0] ? n->model : "CPU", n->ncores, n->npus, n->cpus);
    }
    for (int i = 0; i < t->count[TOPO_NODE_NUMA]; i++) {
        const topo_node_t *n = topo_node(t, TOPO_NODE_NUMA, i);
        fprintf(f, "  %s (P#%d) in %s: %.1f GiB, %d cores, %d PUs (%s)", n->name, n->os_index,
                n->package >= 0 ? t->nodes[n->package].name : "several packages", n->mem_bytes / 1073741824.0,
                n->ncores, n->npus, n->cpus[0] ? n->cpus : "no CPUs");
        if (t->numa_dist) {
            fprintf(f, ", distances");
            for (int j = 0; j < t->nnuma; j++)
                fprintf(f, " %d", t->numa_dist[i * t->nnuma + j]);
        }
        fputc('\n', f);
    }
    if (t->count[TOPO_NODE_NUMA] > 1)
        fprintf(f, "  socket interconnect (estimate): %.1f GB/s between packages\n", t->smp_bw);

    fprintf(f, "PCI (%d host bridges, %d switches leading to %d GPUs and %d NICs)\n",
            t->count[TOPO_NODE_PCI_HOST], t->count[TOPO_NODE_PCI_SWITCH], t->count[TOPO_NODE_GPU],
            t->count[TOPO_NODE_NIC]);
    for (int i = 0; i < t->count[TOPO_NODE_PCI_HOST]; i++) {
        const topo_node_t *h = topo_node(t, TOPO_NODE_PCI_HOST, i);
        fprintf(f, "  ");
        topo_print_node_line(t, h, f);
        topo_print_pci(t, h->index, 2, f);
    }
    for (int i = 0; i < t->count[TOPO_NODE_NIC]; i++) {
        const topo_node_t *n = topo_node(t, TOPO_NODE_NIC, i);
        if (n->parent < 0) {
            fprintf(f, "  ");
            topo_print_node_line(t, n, f);
        }
    }
    for (int i = 0; i < t->count[TOPO_NODE_NVSWITCH]; i++) {
        const topo_node_t *n = topo_node(t, TOPO_NODE_NVSWITCH, i);
        fprintf(f, "NVSwitch fabric: %d NVSwitch PCI functions", n->nswitches);
        if (!t->nvlink_known)
            fprintf(f, "; no NVLink matrix from hwloc, links unknown\n");
        else if (n->islands > 1)
            fprintf(f, "; hwloc's NVLink matrix shows %d islands, assumed joined by trunk links\n", n->islands);
        else
            fputc('\n', f);
    }
    for (int i = 0; i < t->count[TOPO_NODE_NIC]; i++) {
        const topo_node_t *n = topo_node(t, TOPO_NODE_NIC, i);
        if (i == 0)
            fprintf(f, "NICs\n");
        fprintf(f, "  %s: local to %s (%s), %s network latency ~%.0f us\n", n->name,
                n->numa >= 0 ? t->nodes[n->numa].name : "?", n->cpus[0] ? n->cpus : "-",
                n->rdma ? "RDMA" : "socket", n->net_lat);
    }

    int ngpu = t->count[TOPO_NODE_GPU], nnic = t->count[TOPO_NODE_NIC];
    if (ngpu > 1) {
        fprintf(f, "\nGPU<->GPU best path (GB/s, type)\n");
        topo_print_matrix(t, TOPO_NODE_GPU, TOPO_NODE_GPU, TOPO_NODE_GPU, 0, f);
        if (t->nvlink_known) {
            fprintf(f, "\nGPU<->GPU over PCIe only (GB/s, type)\n");
            topo_print_matrix(t, TOPO_NODE_GPU, TOPO_NODE_GPU, TOPO_NODE_GPU, TOPO_PATH_PCI_ONLY, f);
        }
    }
    if (nnic > 0) {
        fprintf(f, "\nGPU/NUMA->NIC best path (GB/s, type; the NIC's own speed is above)\n");
        topo_print_matrix(t, TOPO_NODE_GPU, TOPO_NODE_NUMA, TOPO_NODE_NIC, 0, f);
    }
    fprintf(f, "\ntypes: NVL NVLink, PIX one PCIe switch, PXB several switches, PHB host bridge, "
               "NODE between host bridges of a NUMA node, SYS across sockets\n");
}

/* Records each NIC's speed on its hwloc object, once. */
static void topo_annotate(topo_t *t)
{
    char buf[32];
    for (int i = 0; i < t->count[TOPO_NODE_NIC]; i++) {
        const topo_node_t *n = topo_node(t, TOPO_NODE_NIC, i);
        hwloc_obj_t o = n->hw;
        if (!o || hwloc_obj_get_info_by_name(o, TOPO_INFO_NIC_SPEED))
            continue;
        snprintf(buf, sizeof buf, "%g", n->speed_gbps);
        hwloc_obj_add_info(o, TOPO_INFO_NIC_SPEED, buf);
        hwloc_obj_add_info(o, TOPO_INFO_NIC_SPEED_SRC, topo_speed_src_str(n->speed_src));
    }
}

ccl_result_t topo_dump(topo_t *t, const char *path)
{
    ccl_result_t res = CCL_SUCCESS;
    FILE *f = NULL;
    if (!t || !path || !*path)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topo_dump: no topology or no path");
    size_t len = strlen(path);
    if (len > 4 && strcmp(path + len - 4, ".txt") == 0) {
        f = fopen(path, "w");
        if (!f)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology dump %s: %s", path, strerror(errno));
        topo_print(t, f);
        int bad = ferror(f);
        int closed = fclose(f);
        f = NULL;
        if (bad || closed != 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology dump %s: write failed", path);
    } else {
        topo_annotate(t);
        if (hwloc_topology_export_xml(t->hw, path, 0) != 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology dump %s: hwloc cannot write it: %s", path, strerror(errno));
    }
    LOG_INFO(SUB_INIT, "topology of %s written to %s", t->source, path);
out:
    if (f)
        fclose(f);
    return res;
}
