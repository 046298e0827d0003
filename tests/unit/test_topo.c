/*
 * test_topo.c - topology discovery and the topology graph (src/topo/topo*.c).
 *
 * Loads the hwloc XML exports of real machines in ../shared/topologies (a
 * DGX-2, a 2-socket node with an mlx5 HCA, a 16-socket/4-NUMA IBM x3950 with
 * 8 Ethernet NICs, a 2-socket HP node with 3 GPUs and a ConnectX-2) and
 * asserts facts about each that can be checked in the file with lstopo:
 * counts, which NUMA node a device is local to, the PCIe switch above each
 * DGX-2 GPU, NVLink to the NVSwitches, path types and their order, the NIC
 * closest to a GPU or NUMA node, and local-rank affinity. Also: this
 * machine's live topology loads and agrees with the CPUs we may run on;
 * every topology survives a dump (CCL_TOPO_DUMP_FILE format) and reload
 * unchanged; CCL_TOPO_FILE and CCL_TOPO_DUMP_FILE work through
 * topo_discover, and topo_machine discovers once per process; bad files and bad arguments fail with a message; the
 * sysfs and device-name speed readers, and the CPU list parser.
 *
 * CCL_TEST_TOPO_DIR names the folder of XML files (for the tests only);
 * by default it is ../shared/topologies relative to the repository root,
 * found by walking up from the working directory. Tests that need a file
 * that is not there are SKIPPED.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "topo/topo.h"
#include "transport/net_dev.h"

/* LeakSanitizer (make SANITIZE=address): hwloc's PCI discovery of a live
 * machine (its pci plugin, over libpciaccess) leaves ~1 KB per load that
 * becomes unreachable when hwloc_topology_destroy unloads the plugin. Only
 * the libhwloc frame below the plugin names the culprit, and the default
 * frame-pointer unwinder stops inside the plugin, so malloc stacks are
 * unwound fully here (ASAN_OPTIONS still overrides). Nothing but
 * libhwloc's leaks is suppressed. The hooks must be visible: ccl builds
 * with -fvisibility=hidden. */
#define TEST_SANITIZER_HOOK __attribute__((used, visibility("default")))
const char *__asan_default_options(void) TEST_SANITIZER_HOOK;
const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0";
}
const char *__lsan_default_suppressions(void) TEST_SANITIZER_HOOK;
const char *__lsan_default_suppressions(void)
{
    return "leak:libhwloc.so\n";
}

#define DGX2 "nvidiaDGX2.xml"
#define TWO_SOCKET "32em64t-2n8c2t-pci-normalio.xml"
#define FOUR_NODE "96em64t-4n4d3ca2co-pci.xml"
#define HP_2SOCKET "24em64t-2n6c2t-pci.xml"

static char topo_dir[4200];
static char tmpdir[4096];

/* ../shared/topologies from the repository root (the first folder up from
 * the working directory that holds src/topo/topo.h). */
static void find_topo_dir(void)
{
    const char *env = getenv("CCL_TEST_TOPO_DIR");
    if (env && *env) {
        snprintf(topo_dir, sizeof topo_dir, "%s", env);
        return;
    }
    char dir[4096];
    if (!getcwd(dir, sizeof dir))
        return;
    for (int up = 0; up < 8; up++) {
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/src/topo/topo.h", dir);
        if (access(probe, R_OK) == 0) {
            snprintf(topo_dir, sizeof topo_dir, "%s/../shared/topologies", dir);
            return;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            return;
        *slash = '\0';
    }
}

/* The path of a topology file, or NULL (the test is then skipped). */
static const char *topo_file(const char *name)
{
    static char path[4400];
    if (!topo_dir[0])
        return NULL;
    snprintf(path, sizeof path, "%s/%s", topo_dir, name);
    return access(path, R_OK) == 0 ? path : NULL;
}

static topo_t *load_or_skip(const char *name)
{
    const char *path = topo_file(name);
    if (!path) {
        print_message("SKIPPED: %s not found in %s (set CCL_TEST_TOPO_DIR)\n", name,
                      topo_dir[0] ? topo_dir : "(no repository root found)");
        skip();
    }
    topo_t *t = NULL;
    ccl_result_t res = topo_load(path, &t);
    if (res != CCL_SUCCESS)
        print_error("topo_load(%s): %s\n", path, err_message());
    assert_int_equal(res, CCL_SUCCESS);
    assert_non_null(t);
    return t;
}

static topo_path_t path_between(const topo_t *t, const char *a, const char *b, unsigned flags)
{
    const topo_node_t *na = topo_find(t, a), *nb = topo_find(t, b);
    if (!na || !nb)
        print_error("no node %s\n", na ? b : a);
    assert_non_null(na);
    assert_non_null(nb);
    topo_path_t p;
    assert_int_equal(topo_path(t, na->index, nb->index, flags, &p), CCL_SUCCESS);
    return p;
}

static void assert_near(double got, double want)
{
    if (fabs(got - want) > 0.01 * fabs(want) + 1e-9) {
        print_error("got %g, want %g\n", got, want);
        fail();
    }
}

static const char *closest_nic(const topo_t *t, const char *from)
{
    const topo_node_t *n = topo_find(t, from);
    assert_non_null(n);
    int nic;
    assert_int_equal(topo_nic_closest(t, n->index, &nic), CCL_SUCCESS);
    return nic >= 0 ? t->nodes[nic].name : "-";
}

/* ---- the DGX-2 ------------------------------------------------------------------ */

static void test_dgx2(void **state)
{
    (void)state;
    topo_t *t = load_or_skip(DGX2);
    assert_int_equal(topo_count(t, TOPO_NODE_PACKAGE), 2);
    assert_int_equal(topo_count(t, TOPO_NODE_NUMA), 2);
    assert_int_equal(topo_count(t, TOPO_NODE_GPU), 16);
    assert_int_equal(topo_count(t, TOPO_NODE_NIC), 0);
    assert_int_equal(topo_count(t, TOPO_NODE_PCI_HOST), 4);
    assert_int_equal(topo_count(t, TOPO_NODE_NVSWITCH), 1);
    assert_string_equal(t->nodes[0].model, "NVIDIA DGX-2H");
    for (int i = 0; i < 2; i++) {
        const topo_node_t *pkg = topo_node(t, TOPO_NODE_PACKAGE, i), *numa = topo_node(t, TOPO_NODE_NUMA, i);
        assert_int_equal(pkg->numa, numa->index);
        assert_int_equal(numa->package, pkg->index);
        assert_non_null(strstr(pkg->model, "Xeon(R) Platinum 8174"));
    }
    /* Skylake-SP: UPI between the sockets. */
    assert_near(path_between(t, "numa0", "numa1", 0).bw, 20);
    assert_int_equal(path_between(t, "numa0", "numa1", 0).type, TOPO_PATH_SYS);
    for (int i = 0; i < 16; i++) {
        const topo_node_t *g = topo_node(t, TOPO_NODE_GPU, i);
        assert_int_equal(g->vendor, 0x10de);
        assert_int_equal(g->class_id, 0x0302);
        assert_non_null(strstr(g->model, "V100-SXM3"));
        /* Every GPU sits right below a PCIe switch (a PLX 9781 pair). */
        assert_true(g->parent >= 0);
        assert_int_equal(t->nodes[g->parent].type, TOPO_NODE_PCI_SWITCH);
        assert_int_equal(t->nodes[g->parent].vendor, 0x10b5);
        assert_near(g->pci_gbs, 15.75);
        /* GPUs 0-7 are on socket 0, 8-15 on socket 1. */
        assert_string_equal(t->nodes[g->numa].name, i < 8 ? "numa0" : "numa1");
        assert_string_equal(t->nodes[g->package].name, i < 8 ? "pkg0" : "pkg1");
        /* NVML sees 6 NVLinks of 25 GB/s to 6 NVSwitches. */
        assert_int_equal(g->nvlink_peers, 6);
        assert_near(g->nvlink_gbs, 150);
    }
    assert_string_equal(topo_node(t, TOPO_NODE_GPU, 0)->busid, "0000:34:00.0");
    assert_string_equal(topo_node(t, TOPO_NODE_GPU, 15)->busid, "0000:e7:00.0");
    assert_ptr_equal(topo_find(t, "nvml3"), topo_node(t, TOPO_NODE_GPU, 3));
    assert_ptr_equal(topo_find(t, "0000:b7:00.0"), topo_node(t, TOPO_NODE_GPU, 8));
    const topo_node_t *fabric = topo_node(t, TOPO_NODE_NVSWITCH, 0);
    assert_int_equal(fabric->nswitches, 12);
    /* hwloc shows no switch-to-switch links: two islands of 6 switches. */
    assert_int_equal(fabric->islands, 2);
    assert_true(t->nvlink_known);
    topo_free(t);
}

static void test_dgx2_paths(void **state)
{
    (void)state;
    topo_t *t = load_or_skip(DGX2);
    /* Over PCIe: same switch < same top-level switch < same socket <
     * across sockets, in type and in latency. */
    topo_path_t pix = path_between(t, "gpu0", "gpu1", TOPO_PATH_PCI_ONLY);
    topo_path_t pxb = path_between(t, "gpu0", "gpu2", TOPO_PATH_PCI_ONLY);
    topo_path_t node = path_between(t, "gpu0", "gpu4", TOPO_PATH_PCI_ONLY);
    topo_path_t sys = path_between(t, "gpu0", "gpu8", TOPO_PATH_PCI_ONLY);
    assert_int_equal(pix.type, TOPO_PATH_PIX);
    assert_int_equal(pxb.type, TOPO_PATH_PXB);
    assert_int_equal(node.type, TOPO_PATH_NODE);
    assert_int_equal(sys.type, TOPO_PATH_SYS);
    assert_true(pix.lat < pxb.lat);
    assert_true(pxb.lat < node.lat);
    assert_true(node.lat < sys.lat);
    assert_true(pix.bw >= sys.bw);
    assert_near(pix.bw, 15.75);
    /* gpu0 -> its switch -> gpu1. */
    assert_int_equal(pix.nhops, 2);
    assert_int_equal(pix.nodes[0], topo_find(t, "gpu0")->index);
    assert_int_equal(t->nodes[pix.nodes[1]].type, TOPO_NODE_PCI_SWITCH);
    assert_int_equal(pix.nodes[2], topo_find(t, "gpu1")->index);
    /* The cross-socket path goes through both NUMA nodes. */
    int numa_seen = 0;
    for (int i = 0; i <= sys.nhops; i++)
        numa_seen += t->nodes[sys.nodes[i]].type == TOPO_NODE_NUMA;
    assert_int_equal(numa_seen, 2);
    /* With NVLink every pair meets at the NVSwitch fabric, 150 GB/s. */
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            topo_path_t p;
            assert_int_equal(topo_path(t, topo_node(t, TOPO_NODE_GPU, i)->index,
                                       topo_node(t, TOPO_NODE_GPU, j)->index, 0, &p),
                             CCL_SUCCESS);
            if (i == j) {
                assert_int_equal(p.type, TOPO_PATH_LOC);
                continue;
            }
            assert_int_equal(p.type, TOPO_PATH_NVL);
            assert_near(p.bw, 150);
            assert_int_equal(p.nhops, 2);
        }
    /* The CPU side: a NUMA node reaches its GPUs through the host bridge. */
    assert_int_equal(path_between(t, "numa0", "gpu0", 0).type, TOPO_PATH_PHB);
    assert_int_equal(path_between(t, "numa1", "gpu0", 0).type, TOPO_PATH_SYS);
    /* Affinity: local rank 9 of 16 drives gpu9 on socket 1, no NIC here. */
    topo_affinity_t a;
    assert_int_equal(topo_rank_affinity(t, 9, 16, 1, &a), CCL_SUCCESS);
    assert_string_equal(t->nodes[a.gpu].name, "gpu9");
    assert_string_equal(t->nodes[a.numa].name, "numa1");
    assert_int_equal(a.nic, -1);
    assert_string_equal(a.cpus, t->nodes[a.numa].cpus);
    topo_free(t);
}

/* ---- which net device a rank uses (transport/net_dev.c) -------------------------- */

static void test_net_dev_choice(void **state)
{
    (void)state;
    char why[256];
    assert_true(net_dev_path_has_busid("/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0", "0000:03:00.0"));
    assert_true(net_dev_path_has_busid("/sys/devices/pci0000:00/0000:00:03.0/virtio0", "0000:00:03.0"));
    assert_true(net_dev_path_has_busid("/sys/devices/pci0000:80/0000:80:03.0/0000:84:00.0", "0000:84:00.0"));
    assert_true(net_dev_path_has_busid("/sys/devices/pci0000:80/0000:80:03.0/0000:84:0A.0", "0000:84:0a.0"));
    assert_false(net_dev_path_has_busid("/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.1", "0000:03:00.0"));
    assert_false(net_dev_path_has_busid("/sys/devices/pci0000:00/0000:00:02.0/0000:03:00.01", "0000:03:00.0"));
    assert_false(net_dev_path_has_busid(NULL, "0000:03:00.0"));
    assert_false(net_dev_path_has_busid("/sys/devices/x", ""));

    /* One device, or no topology: device 0. */
    const char *one[] = {"/sys/devices/pci0000:00/0000:00:03.0"};
    assert_int_equal(net_dev_choose(NULL, one, 1, 0, 1, why, sizeof why), 0);
    const char *two[] = {"/a/0000:01:00.0", "/a/0000:02:00.0"};
    assert_int_equal(net_dev_choose(NULL, two, 2, 1, 2, why, sizeof why), 0);

    /* The 2-socket node: every rank's closest NIC is the mlx5 HCA (RDMA,
     * 100 Gb/s), whichever device index the plugin gives it. */
    topo_t *t = load_or_skip(TWO_SOCKET);
    const topo_node_t *hca = topo_find(t, "mlx5_0");
    assert_non_null(hca);
    char hca_path[128];
    snprintf(hca_path, sizeof hca_path, "/sys/devices/pci0000:80/0000:80:02.0/%s", hca->busid);
    const char *paths[] = {"/sys/devices/pci0000:00/0000:00:19.0", NULL, hca_path};
    for (int r = 0; r < 4; r++) {
        assert_int_equal(net_dev_choose(t, paths, 3, r, 4, why, sizeof why), 2);
        assert_non_null(strstr(why, "mlx5_0"));
    }
    /* The HCA is not among the plugin's devices: the first. */
    const char *no_hca[] = {"/sys/devices/pci0000:00/0000:00:19.0", "/x/0000:ff:00.0"};
    assert_int_equal(net_dev_choose(t, no_hca, 2, 1, 4, why, sizeof why), 0);
    topo_free(t);

    /* Four NUMA nodes of two Ethernet NICs each: no RDMA, so the first
     * device, however close another NIC is (its network may be another). */
    t = load_or_skip(FOUR_NODE);
    const char *eths[8];
    char eth_paths[8][96];
    for (int i = 0; i < 8; i++) {
        char name[8];
        snprintf(name, sizeof name, "eth%d", i);
        snprintf(eth_paths[i], sizeof eth_paths[i], "/sys/devices/pci0000:00/%s", topo_find(t, name)->busid);
        eths[i] = eth_paths[i];
    }
    assert_int_equal(net_dev_choose(t, eths, 8, 5, 8, why, sizeof why), 0);
    assert_non_null(strstr(why, "no RDMA"));
    topo_free(t);
}

/* ---- the 2-socket node with an mlx5 HCA ------------------------------------------ */

static void test_two_socket_hca(void **state)
{
    (void)state;
    topo_t *t = load_or_skip(TWO_SOCKET);
    assert_int_equal(topo_count(t, TOPO_NODE_PACKAGE), 2);
    assert_int_equal(topo_count(t, TOPO_NODE_NUMA), 2);
    assert_int_equal(t->nodes[0].ncores, 16);
    assert_int_equal(t->nodes[0].npus, 32);
    assert_int_equal(topo_node(t, TOPO_NODE_NUMA, 1)->ncores, 8);
    assert_string_equal(topo_node(t, TOPO_NODE_NUMA, 1)->cpus, "8-15,24-31");
    /* The ConnectX-4: InfiniBand, verbs device mlx5_0, IPoIB ib0, on
     * socket 1; 100 Gb/s from its PCI name. */
    const topo_node_t *hca = topo_find(t, "mlx5_0");
    assert_non_null(hca);
    assert_int_equal(hca->type, TOPO_NODE_NIC);
    assert_ptr_equal(topo_find(t, "ib0"), hca);
    assert_int_equal(hca->nic_kind, TOPO_NIC_INFINIBAND);
    assert_true(hca->rdma);
    assert_int_equal(hca->vendor, 0x15b3);
    assert_near(hca->speed_gbps, 100);
    assert_int_equal(hca->speed_src, TOPO_SPEED_NAME);
    assert_int_equal(topo_local_numa(t, hca->index), topo_find(t, "numa1")->index);
    assert_int_equal(t->nodes[hca->numa].os_index, 1);
    assert_string_equal(hca->cpus, "8-15,24-31");
    /* The two I350 ports: Gigabit Ethernet, also on socket 1. */
    assert_int_equal(topo_count(t, TOPO_NODE_NIC), 3);
    for (int i = 0; i < 2; i++) {
        const topo_node_t *e = topo_find(t, i ? "eth1" : "eth0");
        assert_non_null(e);
        assert_int_equal(e->nic_kind, TOPO_NIC_ETHERNET);
        assert_false(e->rdma);
        assert_near(e->speed_gbps, 1);
        assert_string_equal(t->nodes[e->numa].name, "numa1");
    }
    /* 3 Tesla M2075 by PCI id and the Radeon seen through OpenCL; the
     * Matrox BMC VGA is no GPU. */
    assert_int_equal(topo_count(t, TOPO_NODE_GPU), 4);
    assert_string_equal(topo_find(t, "opencl0d1")->name, "gpu3");
    assert_int_equal(topo_find(t, "gpu3")->vendor, 0x1002);
    assert_ptr_equal(topo_find(t, "cuda0"), topo_find(t, "0000:84:00.0"));
    for (int i = 0; i < topo_count(t, TOPO_NODE_GPU); i++)
        assert_int_not_equal(topo_node(t, TOPO_NODE_GPU, i)->vendor, 0x102b);
    /* Paths to the HCA: local from socket 1, across from socket 0; the
     * fastest NIC is the closest for both sockets. */
    assert_int_equal(path_between(t, "numa1", "mlx5_0", 0).type, TOPO_PATH_PHB);
    assert_int_equal(path_between(t, "numa0", "mlx5_0", 0).type, TOPO_PATH_SYS);
    assert_int_equal(path_between(t, "gpu0", "mlx5_0", 0).type, TOPO_PATH_SYS);
    assert_int_equal(path_between(t, "gpu1", "mlx5_0", 0).type, TOPO_PATH_PHB);
    assert_string_equal(closest_nic(t, "numa0"), "mlx5_0");
    assert_string_equal(closest_nic(t, "numa1"), "mlx5_0");
    assert_string_equal(closest_nic(t, "gpu2"), "mlx5_0");
    topo_free(t);
}

/* ---- the 4-NUMA IBM x3950 M2 with 8 Ethernet NICs -------------------------------- */

static void test_four_node_nics(void **state)
{
    (void)state;
    topo_t *t = load_or_skip(FOUR_NODE);
    /* Four chassis of four 6-core Xeons each: hwloc shows 16 packages in 4
     * NUMA nodes (one Group per chassis). */
    assert_int_equal(topo_count(t, TOPO_NODE_NUMA), 4);
    assert_int_equal(topo_count(t, TOPO_NODE_PACKAGE), 16);
    assert_int_equal(t->nodes[0].ncores, 96);
    assert_int_equal(topo_count(t, TOPO_NODE_GPU), 0);
    assert_int_equal(topo_count(t, TOPO_NODE_NIC), 8);
    for (int k = 0; k < 4; k++) {
        const topo_node_t *numa = topo_node(t, TOPO_NODE_NUMA, k);
        assert_int_equal(numa->ncores, 24);
        assert_int_equal(numa->package, -1); /* spans 4 packages */
        for (int p = 0; p < 4; p++)
            assert_int_equal(topo_node(t, TOPO_NODE_PACKAGE, 4 * k + p)->numa, numa->index);
        for (int p = 0; p < 2; p++) {
            char name[8];
            snprintf(name, sizeof name, "eth%d", 2 * k + p);
            const topo_node_t *e = topo_find(t, name);
            assert_non_null(e);
            assert_int_equal(e->nic_kind, TOPO_NIC_ETHERNET);
            assert_int_equal(e->vendor, 0x14e4); /* Broadcom BCM5709 */
            assert_near(e->speed_gbps, 1);
            assert_int_equal(e->numa, numa->index);
        }
        char eth[8];
        snprintf(eth, sizeof eth, "eth%d", 2 * k);
        assert_string_equal(closest_nic(t, numa->name), eth);
        /* A rank on this NUMA node gets its NIC; ranks spread in blocks,
         * and the two ranks of a block take its two NICs (rails). */
        topo_affinity_t a;
        assert_int_equal(topo_rank_affinity(t, 2 * k, 8, 1, &a), CCL_SUCCESS);
        assert_int_equal(a.gpu, -1);
        assert_int_equal(a.numa, numa->index);
        assert_string_equal(t->nodes[a.nic].name, eth);
        snprintf(eth, sizeof eth, "eth%d", 2 * k + 1);
        assert_int_equal(topo_rank_affinity(t, 2 * k + 1, 8, 1, &a), CCL_SUCCESS);
        assert_int_equal(a.numa, numa->index);
        assert_string_equal(t->nodes[a.nic].name, eth);
        /* 16 ranks: four per NUMA node, alternating its two NICs. */
        for (int r = 0; r < 4; r++) {
            snprintf(eth, sizeof eth, "eth%d", 2 * k + r % 2);
            assert_int_equal(topo_rank_affinity(t, 4 * k + r, 16, 0, &a), CCL_SUCCESS);
            assert_int_equal(a.numa, numa->index);
            assert_string_equal(t->nodes[a.nic].name, eth);
        }
    }
    /* NUMA distances 10/26: every remote NIC is one SMP hop away. */
    assert_non_null(t->numa_dist);
    assert_int_equal(t->numa_dist[1], 26);
    topo_path_t local = path_between(t, "numa2", "eth4", 0), remote = path_between(t, "numa2", "eth0", 0);
    assert_int_equal(local.type, TOPO_PATH_PHB);
    assert_int_equal(remote.type, TOPO_PATH_SYS);
    assert_true(remote.lat > local.lat);
    topo_free(t);
}

/* ---- the HP 2-socket node with 3 GPUs and a ConnectX-2 ----------------------- */

static void test_hp_two_socket(void **state)
{
    (void)state;
    topo_t *t = load_or_skip(HP_2SOCKET);
    assert_int_equal(topo_count(t, TOPO_NODE_NUMA), 2);
    assert_int_equal(topo_count(t, TOPO_NODE_GPU), 3);
    /* GPUs in bus order, whatever hwloc's tree order. */
    assert_string_equal(topo_find(t, "gpu1")->busid, "0000:11:00.0");
    assert_string_equal(topo_find(t, "gpu2")->busid, "0000:14:00.0");
    assert_string_equal(t->nodes[topo_find(t, "gpu0")->numa].name, "numa0");
    assert_string_equal(t->nodes[topo_find(t, "gpu2")->numa].name, "numa1");
    /* Class 0x0c06 is InfiniBand; one PCI function with eth2, ib0, mlx4_0. */
    const topo_node_t *hca = topo_find(t, "mlx4_0");
    assert_non_null(hca);
    assert_ptr_equal(topo_find(t, "eth2"), hca);
    assert_int_equal(hca->nic_kind, TOPO_NIC_INFINIBAND);
    assert_int_equal(hca->speed_src, TOPO_SPEED_DEFAULT);
    /* PCIe Gen2 x4 (2 GB/s) limits the HCA; Gen2 x8 (4 GB/s) the GPUs. */
    assert_near(path_between(t, "numa0", "mlx4_0", 0).bw, 2.0);
    assert_near(path_between(t, "gpu0", "mlx4_0", 0).bw, 2.0);
    assert_near(path_between(t, "gpu1", "gpu2", 0).bw, 4.0);
    assert_int_equal(path_between(t, "gpu1", "gpu2", 0).type, TOPO_PATH_PHB);
    /* The 82576 ports are 1 Gb/s: the HCA is the better NIC from anywhere. */
    assert_string_equal(closest_nic(t, "gpu0"), "mlx4_0");
    assert_string_equal(closest_nic(t, "numa1"), "mlx4_0");
    topo_free(t);
}

/* ---- this machine ------------------------------------------------------------------- */

static void test_live(void **state)
{
    (void)state;
    topo_t *t = NULL;
    ccl_result_t res = topo_load(NULL, &t);
    if (res != CCL_SUCCESS)
        print_error("topo_load(this machine): %s\n", err_message());
    assert_int_equal(res, CCL_SUCCESS);
    assert_false(t->from_file);
    assert_true(topo_count(t, TOPO_NODE_PACKAGE) >= 1);
    assert_true(topo_count(t, TOPO_NODE_NUMA) >= 1);
    assert_int_equal(t->nodes[0].type, TOPO_NODE_MACHINE);
    assert_true(t->nodes[0].ncores >= 1);
    assert_true(t->nodes[0].npus >= t->nodes[0].ncores);
    /* Every CPU this process may run on is in the machine's list. */
    cpu_set_t mine, all;
    assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
    assert_int_equal(topo_cpus_parse(t->nodes[0].cpus, &all), CCL_SUCCESS);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mine) && !CPU_ISSET(c, &all)) {
            print_error("cpu %d is not in the machine's cpus %s\n", c, t->nodes[0].cpus);
            fail();
        }
    int pus = 0;
    for (int i = 0; i < topo_count(t, TOPO_NODE_NUMA); i++) {
        const topo_node_t *n = topo_node(t, TOPO_NODE_NUMA, i);
        pus += n->npus;
        assert_true(n->mem_bytes > 0);
    }
    assert_int_equal(pus, t->nodes[0].npus);
    /* Whatever devices there are, each reaches every NUMA node. */
    for (int i = 0; i < t->nnodes; i++) {
        const topo_node_t *n = &t->nodes[i];
        if (n->type != TOPO_NODE_NIC && n->type != TOPO_NODE_GPU)
            continue;
        assert_true(n->numa >= 0);
        assert_true(n->name[0] != '\0');
        if (n->type == TOPO_NODE_NIC)
            assert_true(n->speed_gbps > 0);
        for (int k = 0; k < topo_count(t, TOPO_NODE_NUMA); k++) {
            topo_path_t p;
            assert_int_equal(topo_path(t, topo_node(t, TOPO_NODE_NUMA, k)->index, i, 0, &p), CCL_SUCCESS);
            assert_int_not_equal(p.type, TOPO_PATH_NONE);
            assert_true(p.bw > 0);
        }
    }
    topo_affinity_t a;
    assert_int_equal(topo_rank_affinity(t, 0, 1, 0, &a), CCL_SUCCESS);
    assert_int_equal(a.numa, topo_node(t, TOPO_NODE_NUMA, 0)->index);
    topo_free(t);
}

/* ---- dump and reload --------------------------------------------------------------- */

/* The graph t2 must equal t1's: nodes, locality, speeds, and the paths
 * GPU<->GPU and GPU/NUMA->NIC. */
static void assert_same_topology(const topo_t *t1, const topo_t *t2)
{
    assert_int_equal(t1->nnodes, t2->nnodes);
    for (int k = 0; k < TOPO_NODE_TYPES; k++)
        assert_int_equal(t1->count[k], t2->count[k]);
    for (int i = 0; i < t1->nnodes; i++) {
        const topo_node_t *a = &t1->nodes[i], *b = &t2->nodes[i];
        assert_int_equal(a->type, b->type);
        assert_string_equal(a->name, b->name);
        assert_string_equal(a->busid, b->busid);
        assert_string_equal(a->cpus, b->cpus);
        assert_int_equal(a->numa, b->numa);
        assert_int_equal(a->nlinks, b->nlinks);
        if (a->type == TOPO_NODE_NIC) {
            assert_near(b->speed_gbps, a->speed_gbps);
            assert_int_equal(b->speed_src, TOPO_SPEED_FILE);
        }
    }
    for (int i = 0; i < t1->nnodes; i++)
        for (int j = 0; j < t1->nnodes; j++) {
            topo_node_type_t ti = t1->nodes[i].type, tj = t1->nodes[j].type;
            if (!((ti == TOPO_NODE_GPU || ti == TOPO_NODE_NUMA) && (tj == TOPO_NODE_GPU || tj == TOPO_NODE_NIC)))
                continue;
            topo_path_t p1, p2;
            assert_int_equal(topo_path(t1, i, j, 0, &p1), CCL_SUCCESS);
            assert_int_equal(topo_path(t2, i, j, 0, &p2), CCL_SUCCESS);
            assert_int_equal(p1.type, p2.type);
            assert_true(p1.bw == p2.bw || fabs(p1.bw - p2.bw) < 1e-6);
            assert_int_equal(p1.nhops, p2.nhops);
        }
}

static void round_trip(const char *file)
{
    topo_t *t1 = NULL, *t2 = NULL;
    if (file)
        t1 = load_or_skip(file);
    else
        assert_int_equal(topo_load(NULL, &t1), CCL_SUCCESS);
    char xml[4200], txt[4200];
    snprintf(xml, sizeof xml, "%s/dump-%s.xml", tmpdir, file ? file : "live");
    snprintf(txt, sizeof txt, "%s/dump-%s.txt", tmpdir, file ? file : "live");
    assert_int_equal(topo_dump(t1, xml), CCL_SUCCESS);
    assert_int_equal(topo_dump(t1, txt), CCL_SUCCESS);
    /* Dumping again does not repeat the annotations. */
    assert_int_equal(topo_dump(t1, xml), CCL_SUCCESS);
    ccl_result_t res = topo_load(xml, &t2);
    if (res != CCL_SUCCESS)
        print_error("reload %s: %s\n", xml, err_message());
    assert_int_equal(res, CCL_SUCCESS);
    assert_true(t2->from_file);
    assert_same_topology(t1, t2);
    /* The text summary names what was found. */
    FILE *f = fopen(txt, "r");
    assert_non_null(f);
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_non_null(strstr(buf, "numa0"));
    if (topo_count(t1, TOPO_NODE_GPU) > 0)
        assert_non_null(strstr(buf, "gpu0"));
    if (topo_count(t1, TOPO_NODE_NIC) > 0)
        assert_non_null(strstr(buf, topo_node(t1, TOPO_NODE_NIC, 0)->name));
    unlink(xml);
    unlink(txt);
    topo_free(t1);
    topo_free(t2);
}

static void test_round_trip_dgx2(void **state) { (void)state; round_trip(DGX2); }
static void test_round_trip_two_socket(void **state) { (void)state; round_trip(TWO_SOCKET); }
static void test_round_trip_four_node(void **state) { (void)state; round_trip(FOUR_NODE); }
static void test_round_trip_hp(void **state) { (void)state; round_trip(HP_2SOCKET); }
static void test_round_trip_live(void **state) { (void)state; round_trip(NULL); }

/* main() set CCL_TOPO_FILE to the DGX-2 and CCL_TOPO_DUMP_FILE into
 * tmpdir before any ccl call (parameters are read once). */
static void test_discover_env(void **state)
{
    (void)state;
    if (!topo_file(DGX2))
        skip();
    char dump[4200];
    snprintf(dump, sizeof dump, "%s/discover.xml", tmpdir);
    topo_t *t = NULL, *t2 = NULL;
    assert_int_equal(topo_discover(&t), CCL_SUCCESS);
    assert_true(t->from_file);
    assert_int_equal(topo_count(t, TOPO_NODE_GPU), 16);
    assert_int_equal(access(dump, R_OK), 0);
    assert_int_equal(topo_load(dump, &t2), CCL_SUCCESS);
    assert_same_topology(t, t2);
    unlink(dump);
    topo_free(t);
    topo_free(t2);
}

/* topo_machine discovers once per process (the dump is written once) and
 * hands every later caller the same read-only topology. */
static void test_machine_once(void **state)
{
    (void)state;
    if (!topo_file(DGX2))
        skip();
    char dump[4200];
    snprintf(dump, sizeof dump, "%s/discover.xml", tmpdir);
    unlink(dump);
    const topo_t *a = NULL, *b = NULL;
    assert_int_equal(topo_machine(&a), CCL_SUCCESS);
    assert_non_null(a);
    assert_int_equal(topo_count(a, TOPO_NODE_GPU), 16);
    assert_int_equal(access(dump, R_OK), 0);
    unlink(dump);
    assert_int_equal(topo_machine(&b), CCL_SUCCESS);
    assert_ptr_equal(a, b);
    assert_int_not_equal(access(dump, R_OK), 0);
}

/* ---- errors ---------------------------------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    topo_t *t = NULL;
    assert_int_equal(topo_load("/nonexistent/topo.xml", &t), CCL_ERR_INVALID_ARGUMENT);
    assert_null(t);
    assert_non_null(strstr(err_message(), "/nonexistent/topo.xml"));

    char bad[4200];
    snprintf(bad, sizeof bad, "%s/bad.xml", tmpdir);
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("this is not an hwloc export\n", f);
    fclose(f);
    assert_int_equal(topo_load(bad, &t), CCL_ERR_INVALID_ARGUMENT);
    assert_null(t);
    assert_non_null(strstr(err_message(), bad));
    unlink(bad);

    assert_int_equal(topo_load(NULL, &t), CCL_SUCCESS);
    topo_path_t p;
    assert_int_equal(topo_path(t, 0, 1, 0, &p), CCL_ERR_INVALID_ARGUMENT); /* machine has no links */
    assert_int_equal(topo_path(t, -1, 0, 0, &p), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(topo_path(t, 0, t->nnodes, 0, &p), CCL_ERR_INVALID_ARGUMENT);
    const topo_node_t *numa = topo_node(t, TOPO_NODE_NUMA, 0);
    assert_int_equal(topo_path(t, numa->index, numa->index, 0, &p), CCL_SUCCESS);
    assert_int_equal(p.type, TOPO_PATH_LOC);
    assert_int_equal(p.nhops, 0);
    topo_affinity_t a;
    assert_int_equal(topo_rank_affinity(t, 2, 2, 0, &a), CCL_ERR_INVALID_ARGUMENT);
    assert_int_equal(topo_rank_affinity(t, 0, 0, 0, &a), CCL_ERR_INVALID_ARGUMENT);
    assert_null(topo_node(t, TOPO_NODE_NUMA, 1000));
    assert_null(topo_find(t, "no-such-device"));
    assert_int_equal(topo_dump(t, "/nonexistent/dir/topo.xml"), CCL_ERR_SYSTEM);
    assert_int_equal(topo_dump(t, "/nonexistent/dir/topo.txt"), CCL_ERR_SYSTEM);
    topo_free(t);
    topo_free(NULL);
}

/* ---- helpers ----------------------------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + strlen(tmpdir) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(dir, 0700);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_sysfs_speeds(void **state)
{
    (void)state;
    char root[4200], p[4400];
    snprintf(root, sizeof root, "%s/sys", tmpdir);
    snprintf(p, sizeof p, "%s/class/net/eth9/speed", root);
    write_file(p, "25000\n");
    snprintf(p, sizeof p, "%s/class/net/down0/speed", root);
    write_file(p, "-1\n");
    snprintf(p, sizeof p, "%s/class/infiniband/mlx5_3/ports/1/rate", root);
    write_file(p, "100 Gb/sec (4X EDR)\n");
    snprintf(p, sizeof p, "%s/class/infiniband/mlx5_3/ports/1/link_layer", root);
    write_file(p, "InfiniBand\n");
    snprintf(p, sizeof p, "%s/class/infiniband/mlx5_3/ports/2/rate", root);
    write_file(p, "200 Gb/sec (4X HDR)\n");
    snprintf(p, sizeof p, "%s/class/infiniband/mlx5_3/ports/2/link_layer", root);
    write_file(p, "Ethernet\n");
    assert_near(topo_sysfs_net_gbps(root, "eth9"), 25);
    assert_true(topo_sysfs_net_gbps(root, "down0") == 0);
    assert_true(topo_sysfs_net_gbps(root, "missing") == 0);
    char ll[32] = "";
    assert_near(topo_sysfs_ib_gbps(root, "mlx5_3", ll, sizeof ll), 200);
    assert_string_equal(ll, "Ethernet");
    assert_true(topo_sysfs_ib_gbps(root, "mlx5_9", ll, sizeof ll) == 0);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

static void test_name_speeds(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        double gbps;
    } cases[] = {
        {"I350 Gigabit Network Connection", 1},
        {"82576 Gigabit Network Connection", 1},
        {"NetXtreme II BCM5709 Gigabit Ethernet", 1},
        {"82599ES 10-Gigabit SFI/SFP+ Network Connection", 10},
        {"Ethernet Controller X710 for 10GbE SFP+", 10},
        {"Ethernet Controller XL710 for 40GbE QSFP+", 40},
        {"MT27700 Family [ConnectX-4]", 100},
        {"MT27710 Family [ConnectX-4 Lx]", 50},
        {"MT28908 Family [ConnectX-6]", 200},
        {"MT2910 Family [ConnectX-7]", 400},
        {"Virtio network device", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = topo_name_gbps(cases[i].name);
        if (got != cases[i].gbps) {
            print_error("topo_name_gbps(\"%s\") = %g, want %g\n", cases[i].name, got, cases[i].gbps);
            fail();
        }
    }
    assert_true(topo_name_gbps(NULL) == 0);
}

static void test_cpus_parse(void **state)
{
    (void)state;
    cpu_set_t s;
    assert_int_equal(topo_cpus_parse("0-3,8,10-11", &s), CCL_SUCCESS);
    assert_int_equal(CPU_COUNT(&s), 7);
    assert_true(CPU_ISSET(8, &s));
    assert_false(CPU_ISSET(9, &s));
    assert_int_equal(topo_cpus_parse("", &s), CCL_SUCCESS);
    assert_int_equal(CPU_COUNT(&s), 0);
    static const char *const bad[] = {"3-1", "a", "1,,2", "1-", "-1", "0-99999", "1;2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (topo_cpus_parse(bad[i], &s) != CCL_ERR_INVALID_ARGUMENT) {
            print_error("topo_cpus_parse(\"%s\") accepted\n", bad[i]);
            fail();
        }
}

int main(void)
{
    find_topo_dir();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ccl-test-topo-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    /* Parameters are read once, on first use: set them before any ccl call. */
    const char *dgx2 = topo_file(DGX2);
    if (dgx2) {
        char dump[4200];
        snprintf(dump, sizeof dump, "%s/discover.xml", tmpdir);
        setenv("CCL_TOPO_FILE", dgx2, 1);
        setenv("CCL_TOPO_DUMP_FILE", dump, 1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx2),
        cmocka_unit_test(test_dgx2_paths),
        cmocka_unit_test(test_two_socket_hca),
        cmocka_unit_test(test_net_dev_choice),
        cmocka_unit_test(test_four_node_nics),
        cmocka_unit_test(test_hp_two_socket),
        cmocka_unit_test(test_live),
        cmocka_unit_test(test_round_trip_dgx2),
        cmocka_unit_test(test_round_trip_two_socket),
        cmocka_unit_test(test_round_trip_four_node),
        cmocka_unit_test(test_round_trip_hp),
        cmocka_unit_test(test_round_trip_live),
        cmocka_unit_test(test_discover_env),
        cmocka_unit_test(test_machine_once),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_sysfs_speeds),
        cmocka_unit_test(test_name_speeds),
        cmocka_unit_test(test_cpus_parse),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(tmpdir);
    return failed;
}
