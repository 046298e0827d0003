/*
 * topo_hwloc.c - discovery: hwloc's view of this machine (or of an hwloc
 * XML export, CCL_TOPO_FILE) turned into ccl's topology graph (topo.h).
 *
 * What becomes a node:
 *   - the machine, each package and each NUMA node (with its cores, PUs and
 *     memory); NUMA nodes are the CPU end of every path and are joined two
 *     by two by SMP links;
 *   - each PCIe host bridge (with its root ports folded in) and each PCIe
 *     switch (an upstream port with its downstream ports folded in) that
 *     leads to a GPU or NIC; other bridges and devices are dropped;
 *   - GPUs: NVIDIA display or 3D controllers (vendor 0x10de, class 0x0300
 *     or 0x0302), and any PCI function with a compute OS device (CUDA,
 *     OpenCL GPU, LevelZero, NVML or ROCm SMI); DRM cards alone are
 *     display outputs, not GPUs;
 *   - NICs: a PCI function (or non-PCI parent) with network or
 *     OpenFabrics OS devices, named after its OpenFabrics device (mlx5_0)
 *     or else its first interface (eth0);
 *   - one NVSwitch fabric for all NVSwitch functions, linked to the GPUs
 *     by hwloc's NVLinkBandwidth matrix (from NVML).
 *
 * hwloc gives PCIe link rates, NUMA distances and NVLink bandwidths; what
 * it does not give is estimated below, each constant with its reason.
 */
#include "topo/topo.h"
#include "base/err.h"
#include "base/param.h"

#include <hwloc.h>

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if HWLOC_API_VERSION < 0x00020000
#error "ccl needs hwloc 2.x (libhwloc-dev)"
#endif

/* A PCIe link hwloc has no rate for (XML files of older machines, virtual
 * devices): assume Gen3 x16, the common GPU and HCA slot since ~2013. */
#define TOPO_PCI_DEFAULT_GBS 15.75
/* Per PCIe link: a switch or root port forwards a packet in roughly
 * 0.1-0.15 us. */
#define TOPO_LAT_PCI 0.1
/* Host bridge to memory and cores: the root complex and the mesh/ring. */
#define TOPO_LAT_HOST 0.2
/* A hop over NVLink (to the NVSwitch fabric or a peer GPU). */
#define TOPO_LAT_NVLINK 0.1
/* Between NUMA nodes, 0.01 us per unit of hwloc's relative distance (SLIT:
 * 10 local, ~20 one socket away), i.e. ~0.1 us more than local memory per
 * socket hop; without distances, 0.1 within a package and 0.2 across. */
#define TOPO_LAT_SMP_PER_SLIT 0.01
#define TOPO_LAT_SMP_ONDIE 0.1
#define TOPO_LAT_SMP 0.2
/* Socket interconnect, GB/s per direction between two sockets. hwloc does
 * not measure it. Intel QPI (Nehalem to Broadwell, 6.4-9.6 GT/s, one link
 * between two sockets) ~12; Intel UPI (Skylake-SP, family 6 model 85, and
 * later: 2-3 links of 10.4 GT/s) ~20; AMD Infinity Fabric between sockets
 * (xGMI, several x16 links) ~32. Unknown CPUs get the QPI figure. Two NUMA
 * nodes of one package (sub-NUMA clusters, NPS) share the on-die fabric,
 * ~40. These are link rates; what a copy across achieves is lower. */
#define TOPO_BW_QPI 12.0
#define TOPO_BW_UPI 20.0
#define TOPO_BW_XGMI 32.0
#define TOPO_BW_ONDIE 40.0
/* NIC speeds (Gbit/s) when neither sysfs, a dump nor the device name says:
 * EDR InfiniBand (100) and 10 Gigabit Ethernet, the common speeds of the
 * clusters such files come from. */
#define TOPO_NIC_DEFAULT_IB_GBPS 100.0
#define TOPO_NIC_DEFAULT_ETH_GBPS 10.0
/* One-way latency of a small message through the NIC to a peer: verbs
 * over RDMA (~2 us), kernel TCP sockets (~20 us). */
#define TOPO_NET_LAT_RDMA 2.0
#define TOPO_NET_LAT_SOCKET 20.0

typedef enum { PCI_OTHER, PCI_GPU, PCI_NIC, PCI_NVSWITCH } topo_pci_kind_t;

/* ---- small hwloc helpers ----------------------------------------------------------- */

static const char *topo_info(hwloc_obj_t o, const char *name)
{
    const char *v = o ? hwloc_obj_get_info_by_name(o, name) : NULL;
    return v ? v : "";
}

/* Copies a name from hwloc, without the padding some CPUs put in their
 * model string. */
static void topo_copy(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src);
    for (size_t n = strlen(dst); n > 0 && isspace((unsigned char)dst[n - 1]); n--)
        dst[n - 1] = '\0';
}

static ccl_result_t topo_set_cpus(topo_node_t *n, hwloc_const_bitmap_t set)
{
    char *s = NULL;
    if (!set || hwloc_bitmap_iszero(set))
        return CCL_SUCCESS;
    if (hwloc_bitmap_list_asprintf(&s, set) < 0 || !s)
        return err_set(CCL_ERR_SYSTEM, "topology: out of memory");
    free(n->cpus);
    n->cpus = s;
    return CCL_SUCCESS;
}

/* Our node built from this hwloc object, -1 if none. */
static int topo_node_of(const topo_t *t, hwloc_obj_t o)
{
    for (int i = 0; i < t->nnodes; i++)
        if (t->nodes[i].hw == o)
            return i;
    return -1;
}

/* The NUMA node local to a CPU-side object: the first NUMA node in its
 * nodeset (several when an I/O object hangs off the machine of a multi-NUMA
 * host: hwloc then cannot tell, and the first is as good as any). */
static int topo_numa_of(const topo_t *t, hwloc_obj_t cpuside)
{
    int first = -1;
    for (int i = 0; i < t->nnodes; i++) {
        const topo_node_t *n = &t->nodes[i];
        if (n->type != TOPO_NODE_NUMA)
            continue;
        if (first < 0)
            first = i;
        hwloc_obj_t numa = n->hw;
        if (cpuside && cpuside->nodeset && hwloc_bitmap_isset(cpuside->nodeset, numa->os_index))
            return i;
    }
    return first;
}

/* Fills the CPU-side locality of a node from the hwloc object it hangs off. */
static ccl_result_t topo_set_locality(topo_t *t, int idx, hwloc_topology_t hw, hwloc_obj_t o)
{
    hwloc_obj_t cpuside = o->type == HWLOC_OBJ_PCI_DEVICE || o->type == HWLOC_OBJ_BRIDGE ||
                                  o->type == HWLOC_OBJ_OS_DEVICE
                              ? hwloc_get_non_io_ancestor_obj(hw, o)
                              : o;
    hwloc_obj_t pkg = cpuside->type == HWLOC_OBJ_PACKAGE
                          ? cpuside
                          : hwloc_get_ancestor_obj_by_type(hw, HWLOC_OBJ_PACKAGE, cpuside);
    int numa = topo_numa_of(t, cpuside);
    int pkgnode = pkg ? topo_node_of(t, pkg) : -1;
    topo_node_t *n = &t->nodes[idx];
    n->numa = numa;
    n->package = pkgnode;
    return topo_set_cpus(n, cpuside->cpuset);
}

static void topo_pci_ids(topo_node_t *n, hwloc_obj_t o)
{
    const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
    snprintf(n->busid, sizeof n->busid, "%04x:%02x:%02x.%x", a->domain, a->bus, a->dev, a->func);
    n->vendor = a->vendor_id;
    n->device = a->device_id;
    n->class_id = a->class_id;
    n->pci_gbs = a->linkspeed > 0 ? a->linkspeed : 0;
}

/* ---- CPUs and memory ------------------------------------------------------------------ */

static double topo_smp_estimate(hwloc_topology_t hw)
{
    hwloc_obj_t pkg = hwloc_get_next_obj_by_type(hw, HWLOC_OBJ_PACKAGE, NULL);
    const char *vendor = topo_info(pkg, "CPUVendor"), *model = topo_info(pkg, "CPUModel");
    const char *family = topo_info(pkg, "CPUFamilyNumber"), *number = topo_info(pkg, "CPUModelNumber");
    if (strcmp(vendor, "AuthenticAMD") == 0 || strstr(model, "AMD"))
        return TOPO_BW_XGMI;
    if (strcmp(vendor, "GenuineIntel") == 0 || strstr(model, "Intel")) {
        if (atoi(family) == 6 && atoi(number) >= 85)
            return TOPO_BW_UPI;
        return TOPO_BW_QPI;
    }
    return TOPO_BW_QPI;
}

static ccl_result_t topo_build_cpus(topo_t *t, hwloc_topology_t hw)
{
    ccl_result_t res = CCL_SUCCESS;
    struct hwloc_distances_s *dist = NULL;
    hwloc_obj_t root = hwloc_get_root_obj(hw);
    int m = topo_add_node(t, TOPO_NODE_MACHINE, "machine");
    if (m < 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
    topo_node_t *mn = &t->nodes[m];
    mn->hw = root;
    mn->ncores = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_CORE);
    mn->npus = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PU);
    mn->mem_bytes = root->total_memory;
    topo_copy(mn->model, sizeof mn->model, topo_info(root, "DMIProductName"));
    CCL_TRY(topo_set_cpus(mn, root->cpuset));

    char name[32];
    int npkg = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < npkg; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(hw, HWLOC_OBJ_PACKAGE, (unsigned)i);
        snprintf(name, sizeof name, "pkg%d", i);
        int p = topo_add_node(t, TOPO_NODE_PACKAGE, name);
        if (p < 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
        topo_node_t *n = &t->nodes[p];
        n->hw = o;
        n->os_index = (int)o->os_index;
        n->package = p;
        n->ncores = hwloc_get_nbobjs_inside_cpuset_by_type(hw, o->cpuset, HWLOC_OBJ_CORE);
        n->npus = hwloc_get_nbobjs_inside_cpuset_by_type(hw, o->cpuset, HWLOC_OBJ_PU);
        topo_copy(n->model, sizeof n->model, topo_info(o, "CPUModel"));
        CCL_TRY(topo_set_cpus(n, o->cpuset));
    }

    int nnuma = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    int first_numa = t->nnodes;
    for (int i = 0; i < nnuma; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, (unsigned)i);
        snprintf(name, sizeof name, "numa%d", i);
        int idx = topo_add_node(t, TOPO_NODE_NUMA, name);
        if (idx < 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
        topo_node_t *n = &t->nodes[idx];
        n->hw = o;
        n->os_index = (int)o->os_index;
        n->numa = idx;
        n->mem_bytes = o->attr->numanode.local_memory;
        n->ncores = hwloc_get_nbobjs_inside_cpuset_by_type(hw, o->cpuset, HWLOC_OBJ_CORE);
        n->npus = hwloc_get_nbobjs_inside_cpuset_by_type(hw, o->cpuset, HWLOC_OBJ_PU);
        /* A NUMA node below a package belongs to it; one above several
         * packages (a Group holding four sockets) belongs to none. */
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(hw, HWLOC_OBJ_PACKAGE, o);
        n->package = n->parent = pkg ? topo_node_of(t, pkg) : -1;
        CCL_TRY(topo_set_cpus(n, o->cpuset));
    }
    /* Packages point at their first NUMA node. */
    for (int i = 0; i < t->nnodes; i++) {
        topo_node_t *n = &t->nodes[i];
        if (n->type != TOPO_NODE_PACKAGE)
            continue;
        hwloc_obj_t o = n->hw;
        for (int k = first_numa; k < first_numa + nnuma && n->numa < 0; k++) {
            hwloc_obj_t numa = t->nodes[k].hw;
            if (hwloc_bitmap_isset(o->nodeset, numa->os_index))
                n->numa = k;
        }
    }

    /* hwloc's NUMA distances (the firmware's SLIT) scale SMP latency. */
    t->nnuma = nnuma;
    unsigned nr = 1;
    if (nnuma > 1 && hwloc_distances_get_by_type(hw, HWLOC_OBJ_NUMANODE, &nr, &dist,
                                                 HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) == 0 &&
        nr == 1 && dist->nbobjs == (unsigned)nnuma) {
        t->numa_dist = calloc((size_t)nnuma * nnuma, sizeof(int));
        if (!t->numa_dist)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
        for (unsigned a = 0; a < dist->nbobjs; a++)
            for (unsigned b = 0; b < dist->nbobjs; b++) {
                unsigned la = dist->objs[a]->logical_index, lb = dist->objs[b]->logical_index;
                t->numa_dist[la * nnuma + lb] = (int)dist->values[a * dist->nbobjs + b];
            }
    } else if (nr == 0) {
        dist = NULL;
    }

    t->smp_bw = topo_smp_estimate(hw);
    for (int a = 0; a < nnuma; a++)
        for (int b = a + 1; b < nnuma; b++) {
            const topo_node_t *na = &t->nodes[first_numa + a], *nb = &t->nodes[first_numa + b];
            int ondie = na->package >= 0 && na->package == nb->package;
            double lat = ondie ? TOPO_LAT_SMP_ONDIE : TOPO_LAT_SMP;
            if (t->numa_dist && t->numa_dist[a * nnuma + b] > 0)
                lat = TOPO_LAT_SMP_PER_SLIT * t->numa_dist[a * nnuma + b];
            CCL_TRY(topo_add_link(t, first_numa + a, first_numa + b, TOPO_LINK_SMP,
                                  ondie ? TOPO_BW_ONDIE : t->smp_bw, lat));
        }
out:
    if (dist)
        hwloc_distances_release(hw, dist);
    return res;
}

/* ---- PCI: GPUs, NICs, bridges ------------------------------------------------------------- */

static int topo_is_compute_osdev(hwloc_obj_t os)
{
    const char *sub = os->subtype ? os->subtype : "";
    switch (os->attr->osdev.type) {
    case HWLOC_OBJ_OSDEV_COPROC:
        if (strcmp(sub, "OpenCL") == 0)
            return strcmp(topo_info(os, "OpenCLDeviceType"), "GPU") == 0;
        return 1; /* CUDA, LevelZero, ... */
    case HWLOC_OBJ_OSDEV_GPU:
        /* NVML and ROCm SMI devices manage compute GPUs; DRM cardN and
         * renderDN also exist for plain display adapters (BMC VGA). */
        return os->name && (strncmp(os->name, "nvml", 4) == 0 || strncmp(os->name, "rsmi", 4) == 0);
    default:
        return 0;
    }
}

static int topo_is_net_osdev(hwloc_obj_t os)
{
    return os->type == HWLOC_OBJ_OS_DEVICE && (os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
                                               os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS);
}

static topo_pci_kind_t topo_pci_kind(hwloc_obj_t o)
{
    const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
    if ((o->subtype && strcmp(o->subtype, "NVSwitch") == 0) || (a->vendor_id == 0x10de && a->class_id == 0x0680))
        return PCI_NVSWITCH;
    if (a->vendor_id == 0x10de && (a->class_id == 0x0300 || a->class_id == 0x0302))
        return PCI_GPU;
    int nic = 0;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE)
            continue;
        if (topo_is_compute_osdev(c))
            return PCI_GPU;
        nic |= topo_is_net_osdev(c);
    }
    return nic ? PCI_NIC : PCI_OTHER;
}

/* Whether a bridge or device leads to a GPU or NIC. */
static int topo_pci_keeps(hwloc_obj_t o)
{
    if (o->type == HWLOC_OBJ_PCI_DEVICE) {
        topo_pci_kind_t k = topo_pci_kind(o);
        return k == PCI_GPU || k == PCI_NIC;
    }
    if (o->type != HWLOC_OBJ_BRIDGE)
        return 0;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
        if (topo_pci_keeps(c))
            return 1;
    return 0;
}

/* The rate of a PCIe link from what each end reports (0 = unknown). */
static double topo_pci_link_gbs(double below, double above)
{
    if (below > 0 && above > 0)
        return below < above ? below : above;
    if (below > 0)
        return below;
    return above > 0 ? above : TOPO_PCI_DEFAULT_GBS;
}

static void topo_append(char *list, size_t len, const char *word)
{
    size_t used = strlen(list);
    snprintf(list + used, len - used, "%s%s", used ? "," : "", word);
}

/* Fills a NIC node from its OS devices (children of o, or o itself when
 * it is an OS device without a PCI parent). */
static void topo_fill_nic(topo_node_t *n, hwloc_topology_t hw, hwloc_obj_t o)
{
    char ibname[32] = "", netname[32] = "";
    hwloc_obj_t single = o->type == HWLOC_OBJ_OS_DEVICE ? o : NULL;
    hwloc_obj_t first = single ? single : o->io_first_child;
    int live = hwloc_topology_is_thissystem(hw);
    double sysfs = 0;
    char link_layer[32] = "";
    for (hwloc_obj_t c = first; c; c = single ? NULL : c->next_sibling) {
        if (!topo_is_net_osdev(c) || !c->name)
            continue;
        topo_append(n->osdevs, sizeof n->osdevs, c->name);
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
            n->rdma = 1;
            if (!ibname[0])
                snprintf(ibname, sizeof ibname, "%s", c->name);
            if (live) {
                char ll[32] = "";
                double g = topo_sysfs_ib_gbps("/sys", c->name, ll, sizeof ll);
                if (g > sysfs) {
                    sysfs = g;
                    snprintf(link_layer, sizeof link_layer, "%s", ll);
                }
            }
        } else {
            if (!netname[0])
                snprintf(netname, sizeof netname, "%s", c->name);
            if (live) {
                double g = topo_sysfs_net_gbps("/sys", c->name);
                if (g > sysfs)
                    sysfs = g;
            }
        }
    }
    snprintf(n->name, sizeof n->name, "%s", ibname[0] ? ibname : netname);

    unsigned cls = o->type == HWLOC_OBJ_PCI_DEVICE ? o->attr->pcidev.class_id : 0;
    if (cls == 0x0207 || cls == 0x0c06 || strcmp(link_layer, "InfiniBand") == 0 ||
        (n->rdma && strncmp(netname, "ib", 2) == 0 && !link_layer[0]))
        n->nic_kind = TOPO_NIC_INFINIBAND;
    else if ((cls >> 8) == 0x02 || strcmp(link_layer, "Ethernet") == 0 || strncmp(netname, "eth", 3) == 0 ||
             strncmp(netname, "en", 2) == 0)
        n->nic_kind = TOPO_NIC_ETHERNET;
    else
        n->nic_kind = TOPO_NIC_OTHER;

    /* Speed: this machine's sysfs, then a previous dump's annotation, then
     * the device's name, then a default (topo.h, topo_speed_src_t). */
    const char *annot = topo_info(o, TOPO_INFO_NIC_SPEED);
    double name_gbps = topo_name_gbps(topo_info(o, "PCIDevice"));
    if (sysfs > 0) {
        n->speed_gbps = sysfs;
        n->speed_src = TOPO_SPEED_SYSFS;
    } else if (atof(annot) > 0) {
        n->speed_gbps = atof(annot);
        n->speed_src = TOPO_SPEED_FILE;
    } else if (name_gbps > 0) {
        n->speed_gbps = name_gbps;
        n->speed_src = TOPO_SPEED_NAME;
    } else {
        n->speed_gbps = n->nic_kind == TOPO_NIC_INFINIBAND ? TOPO_NIC_DEFAULT_IB_GBPS : TOPO_NIC_DEFAULT_ETH_GBPS;
        n->speed_src = TOPO_SPEED_DEFAULT;
    }
    n->net_lat = n->rdma ? TOPO_NET_LAT_RDMA : TOPO_NET_LAT_SOCKET;
}

static void topo_fill_gpu(topo_node_t *n, hwloc_obj_t o)
{
    const char *model = "";
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE || !topo_is_compute_osdev(c) || !c->name)
            continue;
        topo_append(n->osdevs, sizeof n->osdevs, c->name);
        if (!model[0])
            model = topo_info(c, "GPUModel");
    }
    if (!model[0])
        model = topo_info(o, "PCIDevice");
    topo_copy(n->model, sizeof n->model, model);
}

/* Adds the nodes below hwloc object parent_obj, attached to our node
 * parent. port_gbs is the rate reported by a root or downstream port
 * folded into parent, for the link to what hangs below it. *max_gbs
 * collects the fastest link added directly below parent. */
static ccl_result_t topo_build_pci(topo_t *t, hwloc_topology_t hw, hwloc_obj_t parent_obj, int parent,
                                   double port_gbs, double *max_gbs)
{
    ccl_result_t res = CCL_SUCCESS;
    for (hwloc_obj_t c = parent_obj->io_first_child; c; c = c->next_sibling) {
        if (!topo_pci_keeps(c))
            continue;
        double below = c->type == HWLOC_OBJ_BRIDGE ? c->attr->bridge.upstream.pci.linkspeed
                                                   : c->attr->pcidev.linkspeed;
        if (c->type == HWLOC_OBJ_BRIDGE) {
            /* Below a host bridge (depth 0), root ports sit at depth 1;
             * under them switches alternate upstream ports (even depth)
             * and downstream ports (odd). Ports are folded into the node
             * above: only switches are nodes. */
            unsigned depth = c->attr->bridge.depth;
            if (depth < 2 || depth % 2 == 1) {
                CCL_TRY(topo_build_pci(t, hw, c, parent, below, max_gbs));
                continue;
            }
            int sw = topo_add_node(t, TOPO_NODE_PCI_SWITCH, "");
            if (sw < 0)
                CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
            topo_node_t *n = &t->nodes[sw];
            n->hw = c;
            n->parent = parent;
            const struct hwloc_pcidev_attr_s *a = &c->attr->bridge.upstream.pci;
            snprintf(n->busid, sizeof n->busid, "%04x:%02x:%02x.%x", a->domain, a->bus, a->dev, a->func);
            n->vendor = a->vendor_id;
            n->device = a->device_id;
            n->class_id = a->class_id;
            n->pci_gbs = below > 0 ? below : 0;
            topo_copy(n->model, sizeof n->model, topo_info(c, "PCIDevice"));
            CCL_TRY(topo_set_locality(t, sw, hw, c));
            double gbs = topo_pci_link_gbs(below, port_gbs);
            CCL_TRY(topo_add_link(t, parent, sw, TOPO_LINK_PCI, gbs, TOPO_LAT_PCI));
            if (gbs > *max_gbs)
                *max_gbs = gbs;
            double inner = 0;
            CCL_TRY(topo_build_pci(t, hw, c, sw, 0, &inner));
            continue;
        }
        topo_pci_kind_t kind = topo_pci_kind(c);
        int idx = topo_add_node(t, kind == PCI_GPU ? TOPO_NODE_GPU : TOPO_NODE_NIC, "");
        if (idx < 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
        topo_node_t *n = &t->nodes[idx];
        n->hw = c;
        n->parent = parent;
        topo_pci_ids(n, c);
        if (kind == PCI_GPU) {
            topo_fill_gpu(n, c);
        } else {
            topo_fill_nic(n, hw, c);
            topo_copy(n->model, sizeof n->model, topo_info(c, "PCIDevice"));
        }
        CCL_TRY(topo_set_locality(t, idx, hw, c));
        double gbs = topo_pci_link_gbs(below, port_gbs);
        CCL_TRY(topo_add_link(t, parent, idx, TOPO_LINK_PCI, gbs, TOPO_LAT_PCI));
        if (gbs > *max_gbs)
            *max_gbs = gbs;
    }
out:
    return res;
}

static ccl_result_t topo_build_io(topo_t *t, hwloc_topology_t hw)
{
    ccl_result_t res = CCL_SUCCESS;
    for (hwloc_obj_t b = NULL; (b = hwloc_get_next_bridge(hw, b)) != NULL;) {
        if (b->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_HOST || !topo_pci_keeps(b))
            continue;
        int h = topo_add_node(t, TOPO_NODE_PCI_HOST, "");
        if (h < 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
        topo_node_t *n = &t->nodes[h];
        n->hw = b;
        snprintf(n->busid, sizeof n->busid, "%04x:[%02x-%02x]", b->attr->bridge.downstream.pci.domain,
                 b->attr->bridge.downstream.pci.secondary_bus, b->attr->bridge.downstream.pci.subordinate_bus);
        CCL_TRY(topo_set_locality(t, h, hw, b));
        double max_gbs = 0;
        CCL_TRY(topo_build_pci(t, hw, b, h, 0, &max_gbs));
        /* The root complex is not the bottleneck of any one device below
         * it: give it the rate of its fastest link. */
        int numa = t->nodes[h].numa;
        if (numa >= 0)
            CCL_TRY(topo_add_link(t, h, numa, TOPO_LINK_HOST, max_gbs > 0 ? max_gbs : TOPO_PCI_DEFAULT_GBS,
                                  TOPO_LAT_HOST));
    }
    /* Network devices without a PCI function (SoC NICs) hang off the CPU
     * side directly. */
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(hw, o)) != NULL;) {
        if (!topo_is_net_osdev(o) || !o->parent || o->parent->type == HWLOC_OBJ_PCI_DEVICE)
            continue;
        int idx = topo_add_node(t, TOPO_NODE_NIC, "");
        if (idx < 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
        topo_node_t *n = &t->nodes[idx];
        n->hw = o;
        topo_fill_nic(n, hw, o);
        CCL_TRY(topo_set_locality(t, idx, hw, o));
        n = &t->nodes[idx];
        if (n->numa >= 0)
            CCL_TRY(topo_add_link(t, idx, n->numa, TOPO_LINK_HOST, n->speed_gbps / 8, TOPO_LAT_HOST));
    }
out:
    return res;
}

/* ---- NVLink ------------------------------------------------------------------------------- */

static int topo_uf_find(int *up, int i)
{
    while (up[i] != i)
        i = up[i] = up[up[i]];
    return i;
}

/* Our node for an object of hwloc's NVLink matrix: a GPU (its PCI function
 * or an OS device of it), the NVSwitch fabric, or a NUMA node (NVLink to
 * the CPU, POWER9). */
static int topo_nvlink_end(topo_t *t, hwloc_topology_t hw, hwloc_obj_t o, int fabric, int *is_switch)
{
    *is_switch = 0;
    if (o->type == HWLOC_OBJ_OS_DEVICE)
        o = o->parent;
    if (!o)
        return -1;
    if (o->type == HWLOC_OBJ_PCI_DEVICE) {
        if (topo_pci_kind(o) == PCI_NVSWITCH) {
            *is_switch = 1;
            return fabric;
        }
        int idx = topo_node_of(t, o);
        return idx >= 0 && t->nodes[idx].type == TOPO_NODE_GPU ? idx : -1;
    }
    if (o->type == HWLOC_OBJ_BRIDGE)
        return -1;
    return topo_numa_of(t, o);
}

static ccl_result_t topo_build_nvlink(topo_t *t, hwloc_topology_t hw)
{
    ccl_result_t res = CCL_SUCCESS;
    struct hwloc_distances_s *d = NULL;
    double *to_fabric = NULL;
    int *end = NULL, *sw = NULL, *uf = NULL;
    int nsw = 0;
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(hw, o)) != NULL;)
        nsw += topo_pci_kind(o) == PCI_NVSWITCH;
    int fabric = -1;
    if (nsw > 0) {
        fabric = topo_add_node(t, TOPO_NODE_NVSWITCH, "nvswitch");
        if (fabric < 0)
            CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
        t->nodes[fabric].nswitches = nsw;
    }
    unsigned nr = 1;
    if (hwloc_distances_get_by_name(hw, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0) {
        d = NULL;
        if (nsw > 0)
            LOG_INFO(SUB_INIT, "topology: %d NVSwitch functions but no NVLink bandwidth matrix (hwloc without "
                               "NVML): NVLink connectivity unknown, paths use PCIe", nsw);
        goto out;
    }
    t->nvlink_known = 1;
    unsigned n = d->nbobjs;
    to_fabric = calloc((size_t)t->nnodes, sizeof *to_fabric);
    end = calloc(3 * (size_t)n + 1, sizeof *end);
    if (!to_fabric || !end)
        CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
    sw = end + n; /* whether object i is an NVSwitch */
    uf = sw + n;  /* union-find of switches into islands */
    for (unsigned i = 0; i < n; i++) {
        end[i] = topo_nvlink_end(t, hw, d->objs[i], fabric, &sw[i]);
        uf[i] = (int)i;
    }
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = i + 1; j < n; j++) {
            uint64_t v = d->values[i * n + j] > d->values[j * n + i] ? d->values[i * n + j] : d->values[j * n + i];
            if (v == 0 || end[i] < 0 || end[j] < 0)
                continue;
            double gbs = v / 1000.0; /* hwloc gives MB/s */
            int a = end[i], b = end[j];
            if (sw[i] && sw[j]) {
                uf[topo_uf_find(uf, (int)i)] = topo_uf_find(uf, (int)j);
                continue;
            }
            if (sw[i] || sw[j]) {
                /* A GPU reaches the fabric by the sum of its switch links. */
                topo_node_t *g = &t->nodes[sw[i] ? b : a];
                to_fabric[g->index] += gbs;
                g->nvlink_peers++;
                g->nvlink_gbs += gbs;
                continue;
            }
            if (a == b)
                continue;
            CCL_TRY(topo_add_link(t, a, b, TOPO_LINK_NVLINK, gbs, TOPO_LAT_NVLINK));
            for (int k = 0; k < 2; k++) {
                topo_node_t *g = &t->nodes[k ? b : a];
                if (g->type == TOPO_NODE_GPU) {
                    g->nvlink_peers++;
                    g->nvlink_gbs += gbs;
                }
            }
        }
    /* Switches a GPU links to are joined through it. */
    for (unsigned i = 0; i < n; i++) {
        if (sw[i] || end[i] < 0 || t->nodes[end[i]].type != TOPO_NODE_GPU)
            continue;
        int first = -1;
        for (unsigned j = 0; j < n; j++) {
            if (!sw[j] || (d->values[i * n + j] == 0 && d->values[j * n + i] == 0))
                continue;
            if (first < 0)
                first = (int)j;
            else
                uf[topo_uf_find(uf, (int)j)] = topo_uf_find(uf, first);
        }
    }
    if (fabric >= 0) {
        int islands = 0;
        for (unsigned i = 0; i < n; i++)
            islands += sw[i] && topo_uf_find(uf, (int)i) == (int)i;
        t->nodes[fabric].islands = islands;
        /* hwloc (NVML) reports GPU-to-switch links only. On every NVSwitch
         * machine (DGX-2/HGX-2: two baseboards of 6 switches; DGX A100 and
         * later: one board) the switches are joined by trunk links it does
         * not show, so one fabric node stands for all of them. */
        if (islands > 1)
            LOG_INFO(SUB_INIT, "topology: NVLink matrix shows %d NVSwitch islands; assuming trunk links join them "
                               "(hwloc does not report switch-to-switch links)", islands);
        for (int g = 0; g < t->nnodes; g++)
            if (to_fabric[g] > 0)
                CCL_TRY(topo_add_link(t, g, fabric, TOPO_LINK_NVLINK, to_fabric[g], TOPO_LAT_NVLINK));
    }
out:
    free(to_fabric);
    free(end);
    if (d)
        hwloc_distances_release(hw, d);
    return res;
}

/* ---- load --------------------------------------------------------------------------------- */

static int topo_cmp_busid(const void *a, const void *b, void *arg)
{
    const topo_t *t = arg;
    return strcmp(t->nodes[*(const int *)a].busid, t->nodes[*(const int *)b].busid);
}

void topo_free(topo_t *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nnodes; i++) {
        free(t->nodes[i].links);
        free(t->nodes[i].cpus);
    }
    free(t->nodes);
    for (int k = 0; k < TOPO_NODE_TYPES; k++)
        free(t->by_type[k]);
    free(t->numa_dist);
    if (t->hw)
        hwloc_topology_destroy(t->hw);
    free(t);
}

ccl_result_t topo_load(const char *xml, topo_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    topo_t *t = NULL;
    hwloc_topology_t hw;
    if (!out)
        CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topo_load: out is NULL");
    *out = NULL;
    t = calloc(1, sizeof *t);
    if (!t)
        CCL_FAIL(CCL_ERR_SYSTEM, "topology: out of memory");
    if (hwloc_topology_init(&hw) != 0)
        CCL_FAIL(CCL_ERR_SYSTEM, "topology: hwloc_topology_init failed: %s", strerror(errno));
    t->hw = hw;
    /* hwloc drops all I/O objects by default, and its "important" filter
     * would drop NVSwitch functions (class 0x0680, other bridge) and the
     * switch ports that do not lead to a known device class. */
    hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (xml && *xml) {
        if (access(xml, R_OK) != 0)
            CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topology file %s: %s", xml, strerror(errno));
        if (hwloc_topology_set_xml(hw, xml) != 0)
            CCL_FAIL(CCL_ERR_INVALID_ARGUMENT, "topology file %s: hwloc cannot read it: %s", xml, strerror(errno));
        t->from_file = 1;
        snprintf(t->source, sizeof t->source, "%s", xml);
    } else {
        snprintf(t->source, sizeof t->source, "this machine");
    }
    if (hwloc_topology_load(hw) != 0)
        CCL_FAIL(t->from_file ? CCL_ERR_INVALID_ARGUMENT : CCL_ERR_SYSTEM,
                 "topology of %s: hwloc cannot load it (%s); a file must be an hwloc XML export (lstopo file.xml)",
                 t->source, strerror(errno));
    CCL_TRY(topo_build_cpus(t, hw));
    CCL_TRY(topo_build_io(t, hw));
    CCL_TRY(topo_build_nvlink(t, hw));
    CCL_TRY(topo_index_types(t));
    /* GPUs are numbered in PCI bus order, as nvidia-smi and
     * CUDA_DEVICE_ORDER=PCI_BUS_ID number them. */
    qsort_r(t->by_type[TOPO_NODE_GPU], (size_t)t->count[TOPO_NODE_GPU], sizeof(int), topo_cmp_busid, t);
    static const struct {
        topo_node_type_t type;
        const char *prefix;
    } numbered[] = {{TOPO_NODE_PCI_HOST, "host"}, {TOPO_NODE_PCI_SWITCH, "sw"}, {TOPO_NODE_GPU, "gpu"}};
    for (size_t k = 0; k < sizeof numbered / sizeof numbered[0]; k++)
        for (int i = 0; i < t->count[numbered[k].type]; i++) {
            topo_node_t *n = &t->nodes[t->by_type[numbered[k].type][i]];
            n->type_index = i;
            snprintf(n->name, sizeof n->name, "%s%d", numbered[k].prefix, i);
        }
    LOG_INFO(SUB_INIT, "topology of %s: %d packages, %d NUMA nodes, %d cores, %d GPUs, %d NICs", t->source,
             t->count[TOPO_NODE_PACKAGE], t->count[TOPO_NODE_NUMA], t->nodes[0].ncores, t->count[TOPO_NODE_GPU],
             t->count[TOPO_NODE_NIC]);
    *out = t;
    t = NULL;
out:
    topo_free(t);
    return res;
}

ccl_result_t topo_discover(topo_t **out)
{
    ccl_result_t res = CCL_SUCCESS;
    topo_t *t = NULL;
    const char *dump = param_str(PARAM_TOPO_DUMP_FILE);
    CCL_TRY(topo_load(param_str(PARAM_TOPO_FILE), &t));
    if (dump[0])
        CCL_TRY(topo_dump(t, dump));
    *out = t;
    t = NULL;
out:
    topo_free(t);
    return res;
}
