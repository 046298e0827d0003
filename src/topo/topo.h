/*
 * topo.h - the machine as a graph: CPUs, NUMA nodes, the PCI tree, GPUs,
 * NICs and the links between them, with bandwidth and latency estimates.
 *
 * hwloc discovers this machine, or reads an hwloc XML export of another one
 * (CCL_TOPO_FILE); topo_hwloc.c turns what it finds into a topo_t, a small
 * graph that keeps only what collectives care about: NUMA nodes (the CPU
 * end of every path), PCIe host bridges and switches that lead to a GPU or
 * a NIC, the GPUs and NICs themselves and one NVSwitch fabric node. Links
 * join them: PCIe (per hop, hwloc's link rate), host bridge to its CPU,
 * SMP (socket interconnect, between every two NUMA nodes) and NVLink
 * (hwloc's NVLinkBandwidth matrix). topo_graph.c answers path questions on
 * it (best path between two nodes, the NIC closest to a GPU or a NUMA node,
 * a local rank's GPU/NUMA/NIC); topo_dump.c prints it and writes
 * CCL_TOPO_DUMP_FILE; topo_speed.c reads NIC speeds from sysfs and names.
 *
 * Units: bandwidth in GB/s (10^9 bytes per second, one direction), latency
 * in microseconds. A link's bandwidth is what the link carries after line
 * coding (hwloc's PCIe figure: 15.75 GB/s for Gen3 x16), not what a copy
 * achieves over it; protocol efficiency is the tuner's business. Where
 * hwloc gives no figure (socket interconnect, latencies, unknown PCIe
 * links, NIC speeds of files) the value is an estimate documented next to
 * its constant in topo_hwloc.c, and the NIC's speed_src says where its
 * speed came from.
 *
 * A topo_t is read-only after topo_load and may be shared between threads;
 * only topo_dump writes (annotations on the hwloc objects), so call it from
 * one thread.
 */
#ifndef CCL_TOPO_TOPO_H
#define CCL_TOPO_TOPO_H

#include "ccl.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    TOPO_NODE_MACHINE,    /* one; holds totals; no links */
    TOPO_NODE_PACKAGE,    /* a socket; no links (paths go through its NUMA nodes) */
    TOPO_NODE_NUMA,       /* a NUMA node: the CPU end of paths */
    TOPO_NODE_PCI_HOST,   /* a PCIe host bridge with its root ports */
    TOPO_NODE_PCI_SWITCH, /* a PCIe switch: upstream port with its downstream ports */
    TOPO_NODE_GPU,
    TOPO_NODE_NIC,        /* one PCI function with its network/OpenFabrics devices */
    TOPO_NODE_NVSWITCH,   /* all NVSwitches of the machine as one fabric */
    TOPO_NODE_TYPES
} topo_node_type_t;

typedef enum {
    TOPO_LINK_PCI,    /* a PCIe link (device or switch to its parent) */
    TOPO_LINK_HOST,   /* a host bridge (root complex) to its NUMA node */
    TOPO_LINK_SMP,    /* between two NUMA nodes (socket interconnect or on-die) */
    TOPO_LINK_NVLINK, /* NVLink, GPU to GPU or GPU to the NVSwitch fabric */
    TOPO_LINK_TYPES
} topo_link_type_t;

/* How far apart two nodes are, nearest first (the categories of
 * `nvidia-smi topo -m`). A path's type is the farthest thing it crosses. */
typedef enum {
    TOPO_PATH_LOC,  /* the same node */
    TOPO_PATH_NVL,  /* NVLink, directly or through the NVSwitch fabric */
    TOPO_PATH_PIX,  /* at most one PCIe switch */
    TOPO_PATH_PXB,  /* several PCIe switches, no host bridge */
    TOPO_PATH_PHB,  /* through a PCIe host bridge (the CPU's root complex) */
    TOPO_PATH_NODE, /* between host bridges of one NUMA node */
    TOPO_PATH_SYS,  /* across the SMP interconnect between NUMA nodes */
    TOPO_PATH_NONE  /* no path */
} topo_path_type_t;

typedef enum { TOPO_NIC_ETHERNET, TOPO_NIC_INFINIBAND, TOPO_NIC_OTHER } topo_nic_kind_t;

/* Where a NIC's speed came from, most trusted first. */
typedef enum {
    TOPO_SPEED_SYSFS,   /* /sys/class/infiniband or /sys/class/net of this machine */
    TOPO_SPEED_FILE,    /* a CCLNicSpeedGbps annotation (a CCL_TOPO_DUMP_FILE reloaded) */
    TOPO_SPEED_NAME,    /* the PCI device name ("Gigabit", "ConnectX-4") */
    TOPO_SPEED_DEFAULT  /* nothing known: a default per kind */
} topo_speed_src_t;

typedef struct {
    int peer; /* node index */
    topo_link_type_t type;
    double bw;  /* GB/s */
    double lat; /* us */
} topo_link_t;

typedef struct {
    topo_node_type_t type;
    int index;      /* position in topo_t.nodes */
    int type_index; /* rank among the nodes of its type: gpu3 has 3 */
    char name[32];  /* machine, pkg0, numa1, host0, sw4, gpu3, mlx5_0, eth2, nvswitch */
    int parent;     /* PCI: the host bridge or switch above; NUMA: its package
                       (or -1 when it spans several); others -1 */
    int numa;       /* the local NUMA node (node index; itself for a NUMA node), -1 if none */
    int package;    /* the package holding the local CPUs, -1 if none or several */
    int os_index;   /* package and NUMA: the OS number; -1 otherwise */
    char *cpus;     /* local PUs as a list ("0-11,24-35"); "" if none */
    int ncores, npus;   /* machine, package, NUMA: cores and PUs inside */
    uint64_t mem_bytes; /* machine and NUMA: memory */
    char model[96];     /* CPU model (package), GPU model, PCI device name, or "" */
    /* PCI functions (host bridge: the bus range, "0000:[2b-3b]") */
    char busid[24];
    uint16_t vendor, device, class_id;
    double pci_gbs; /* this function's PCIe link rate from hwloc, 0 = unknown */
    /* GPU */
    char osdevs[64];   /* OS devices: "cuda0,nvml0", "opencl0d1" */
    int nvlink_peers;  /* NVLink neighbours (GPUs, NVSwitches) in hwloc's matrix */
    double nvlink_gbs; /* total NVLink bandwidth to them */
    /* NIC */
    topo_nic_kind_t nic_kind;
    int rdma;            /* has an OpenFabrics (verbs) device */
    double speed_gbps;   /* wire speed, Gbit/s */
    topo_speed_src_t speed_src;
    double net_lat;      /* estimated one-way network latency through it, us */
    /* NVSwitch fabric */
    int nswitches;      /* NVSwitch PCI functions found */
    int islands;        /* groups of switches hwloc shows joined (see topo_hwloc.c) */
    /* links */
    topo_link_t *links;
    int nlinks, cap_links;
    void *hw; /* the hwloc object (PCI function or CPU-side object) */
} topo_node_t;

typedef struct {
    topo_node_t *nodes;
    int nnodes, cap_nodes;
    int count[TOPO_NODE_TYPES];
    int *by_type[TOPO_NODE_TYPES]; /* node indices of each type, in order */
    char source[256];   /* "this machine" or the XML file */
    int from_file;
    int nvlink_known;   /* hwloc gave an NVLinkBandwidth matrix */
    double smp_bw;      /* the socket interconnect estimate used */
    int nnuma;
    int *numa_dist;     /* nnuma x nnuma relative latencies (SLIT, 10 = local), or NULL */
    void *hw;           /* hwloc_topology_t, kept for topo_dump */
} topo_t;

#define TOPO_PATH_MAX 128

typedef struct {
    double bw;  /* bottleneck bandwidth of the best path, GB/s; 0 when none */
    double lat; /* sum of link latencies on it, us */
    topo_path_type_t type;
    int nhops;                     /* links on the path */
    int nodes[TOPO_PATH_MAX + 1];  /* nodes[0] = from ... nodes[nhops] = to */
} topo_path_t;

/* topo_path flags */
#define TOPO_PATH_PCI_ONLY 1u /* ignore NVLink (GPUDirect over PCIe, or to compare) */

/* ---- loading ---------------------------------------------------------- */

/* Builds the topology of this machine (xml NULL or "") or of an hwloc XML
 * export. Fails with CCL_ERR_INVALID_ARGUMENT when the file cannot be read
 * or parsed, CCL_ERR_SYSTEM when hwloc fails on this machine. */
ccl_result_t topo_load(const char *xml, topo_t **out);
/* topo_load(CCL_TOPO_FILE), then, when CCL_TOPO_DUMP_FILE is set, topo_dump
 * to it. */
ccl_result_t topo_discover(topo_t **out);
/* topo_discover once per process (topo_machine.c): the same read-only
 * topology for every later call; the caller must not free it. */
ccl_result_t topo_machine(const topo_t **out);
void topo_free(topo_t *topo);

/* Writes the topology to path: "*.txt" gets the text summary of
 * topo_print; any other name gets hwloc XML (what hwloc found, with ccl's
 * findings added as CCL* info attributes), which CCL_TOPO_FILE and
 * topo_load read back to the same graph, and lstopo can draw. */
ccl_result_t topo_dump(topo_t *topo, const char *path);
/* The readable summary ccl-info prints: machine, packages, NUMA nodes, the
 * PCI tree with GPUs and NICs, and the path matrices GPU<->GPU and
 * GPU/NUMA->NIC. */
void topo_print(const topo_t *topo, FILE *f);

/* ---- queries -------------------------------------------------------------- */

int topo_count(const topo_t *topo, topo_node_type_t type);
/* The i-th node of a type (gpu i, numa i...), NULL when out of range. */
const topo_node_t *topo_node(const topo_t *topo, topo_node_type_t type, int i);
/* A node by name ("gpu3", "numa0", "mlx5_0"), by one of its OS devices
 * ("ib0", "cuda0") or by PCI bus id ("0000:34:00.0"); NULL if none. */
const topo_node_t *topo_find(const topo_t *topo, const char *name);

/* The best path between two nodes (indices into topo->nodes): the widest
 * (largest bottleneck bandwidth), and among the widest the one with the
 * least latency. Paths go through bridges, switches, NUMA nodes and the
 * NVSwitch fabric, never through another GPU or NIC. Machine and package
 * nodes have no links: ask for their NUMA nodes. A node to itself is
 * TOPO_PATH_LOC with bw INFINITY; no path gives TOPO_PATH_NONE and bw 0,
 * both with CCL_SUCCESS. */
ccl_result_t topo_path(const topo_t *topo, int from, int to, unsigned flags, topo_path_t *out);
/* The NIC closest to a node (a GPU or a NUMA node): nearest path type
 * first, then the most bandwidth (path bottleneck and NIC speed), then the
 * least latency, then the lowest index. *nic = -1 when there is no NIC. */
ccl_result_t topo_nic_closest(const topo_t *topo, int from, int *nic);
/* The same among several equally close NICs (rails): the rail-th of them
 * in index order, modulo their number. */
ccl_result_t topo_nic_closest_rail(const topo_t *topo, int from, int rail, int *nic);
/* The NUMA node local to a node (index), -1 if none. */
int topo_local_numa(const topo_t *topo, int node);

/* What a local rank should use, as node indices (-1 when none):
 * with use_gpus and GPUs present, GPU local_rank % ngpus, its NUMA node and
 * the NIC closest to it; otherwise ranks are spread over NUMA nodes in
 * blocks (rank r of n gets NUMA r * nnuma / n) with the NIC closest to it.
 * Ranks sharing a GPU or NUMA node take turns among the NICs equally close
 * to it (rails).
 * cpus is the local NUMA node's PU list. */
typedef struct {
    int gpu, numa, nic;
    const char *cpus;
} topo_affinity_t;
ccl_result_t topo_rank_affinity(const topo_t *topo, int local_rank, int local_nranks, int use_gpus,
                                topo_affinity_t *out);

/* "0-3,8,10-11" into a CPU mask (for sched_setaffinity). */
ccl_result_t topo_cpus_parse(const char *list, cpu_set_t *set);

const char *topo_node_type_str(topo_node_type_t type);
const char *topo_link_type_str(topo_link_type_t type);
const char *topo_path_type_str(topo_path_type_t type);
const char *topo_nic_kind_str(topo_nic_kind_t kind);
const char *topo_speed_src_str(topo_speed_src_t src);

/* ---- internals shared by the topo files (and their tests) ---------------- */

/* hwloc info attribute topo_dump adds to a NIC's PCI function (Gbit/s),
 * so that a dump reloads with the speed sysfs gave on the dumped machine. */
#define TOPO_INFO_NIC_SPEED "CCLNicSpeedGbps"
#define TOPO_INFO_NIC_SPEED_SRC "CCLNicSpeedSource"

/* Appends a node (its links empty, cpus ""); returns its index or -1 when
 * out of memory. Pointers into topo->nodes are invalidated. */
int topo_add_node(topo_t *topo, topo_node_type_t type, const char *name);
/* Adds a link both ways (a then b). */
ccl_result_t topo_add_link(topo_t *topo, int a, int b, topo_link_type_t type, double bw, double lat);
/* Fills count and by_type once every node exists. */
ccl_result_t topo_index_types(topo_t *topo);

/* NIC speed of this machine from sysfs under sysroot ("/sys"), Gbit/s, or 0
 * when unknown: the interface's speed file (Mbit/s), or the best port rate
 * of an InfiniBand device ("100 Gb/sec (4X EDR)"), whose link layer
 * ("InfiniBand" or "Ethernet") goes to link_layer when given. */
double topo_sysfs_net_gbps(const char *sysroot, const char *ifname);
double topo_sysfs_ib_gbps(const char *sysroot, const char *ibdev, char *link_layer, size_t len);
/* Speed a PCI device name implies, Gbit/s, or 0: "Gigabit" 1, "10-Gigabit"
 * or "10GbE" 10, "ConnectX-4" 100... */
double topo_name_gbps(const char *pci_name);

#endif
