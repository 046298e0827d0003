/*
 * test_cpus.c - the CPUs a host's ranks may use (src/topo/cpus.c).
 *
 * topo_cgroup_cpu_limit reads a fake /proc/self/mountinfo, /proc/self/cgroup
 * and cgroup tree written here under a temporary folder: cgroup v2 cpu.max
 * with a limit on an ancestor and a tighter one below, "max" everywhere, a
 * container whose mount root is its own cgroup, a cgroup outside a mount's
 * root (and climbing out with ".."), escaped mount points, cgroup v1
 * cpu,cpuacct with cfs quota and period (and a cpuacct-only mount that must
 * not count), unreadable and malformed files. topo_crowded: the kernel's
 * ranks against its online CPUs, the host's against its quota.
 * topo_usable_cpus stays between 1 and the online count. A real cgroup quota is checked by tests/run_all.sh
 * (tools/ccl-info-cgroup), where the machine allows one.
 *
 * The other thing a host offers its ranks that ccl reads from the kernel,
 * whether shared memory gets huge pages (src/topo/hugepages.c, printed by
 * ccl-info),
 * from a fake sysfs the same way: the PMD size's own setting, its
 * "inherit" of the top-level one, a top level that forbids what the size
 * allows, a kernel with only the top-level file, every setting's meaning,
 * and files missing or without a selection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo/cpus.h"
#include "topo/hugepages.h"

static char root[256];

static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    /* mkdir -p of the file's folder */
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int limit(void)
{
    char mi[300], cg[300];
    snprintf(mi, sizeof mi, "%s/mountinfo", root);
    snprintf(cg, sizeof cg, "%s/cgroup", root);
    return topo_cgroup_cpu_limit(mi, cg, root);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/ccl-test-cpus-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static const char *const v2_mount = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 cgroup2 rw\n";

static void test_v2_nested(void **state)
{
    (void)state;
    /* Other mounts around it are skipped. */
    char mi[256];
    snprintf(mi, sizeof mi, "22 1 8:1 / / rw - ext4 /dev/root rw\n%s", v2_mount);
    put("mountinfo", mi);
    put("cgroup", "0::/user.slice/job\n");
    put("sys/fs/cgroup/user.slice/job/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/user.slice/cpu.max", "250000 100000\n");
    assert_int_equal(limit(), 3); /* the ancestor's 2.5 CPUs, rounded up */
    put("sys/fs/cgroup/user.slice/job/cpu.max", "150000 100000\n");
    assert_int_equal(limit(), 2); /* the tighter of the two */
    put("sys/fs/cgroup/user.slice/job/cpu.max", "1000 100000\n");
    assert_int_equal(limit(), 1); /* a sliver is still one CPU */
}

static void test_v2_unlimited(void **state)
{
    (void)state;
    put("mountinfo", v2_mount);
    put("cgroup", "0::/a\n");
    put("sys/fs/cgroup/a/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/cpu.max", "max 100000\n");
    assert_int_equal(limit(), 0);
    put("sys/fs/cgroup/a/cpu.max", "garbage\n");
    assert_int_equal(limit(), 0);
    put("sys/fs/cgroup/a/cpu.max", "200000 0\n");
    assert_int_equal(limit(), 0);
}

/* Inside a container the mount's root is the container's cgroup, which
 * /proc/self/cgroup names in full. */
static void test_v2_container(void **state)
{
    (void)state;
    put("mountinfo", "40 30 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
    put("cgroup", "0::/docker/abc\n");
    put("sys/fs/cgroup/cpu.max", "400000 100000\n");
    assert_int_equal(limit(), 4);
    /* A process in a child of it: the child, then the container's. */
    put("cgroup", "0::/docker/abc/worker\n");
    put("sys/fs/cgroup/worker/cpu.max", "max 100000\n");
    assert_int_equal(limit(), 4);
    /* Its own limit is found below the mount point, not at /docker/abc/worker. */
    put("sys/fs/cgroup/worker/cpu.max", "200000 100000\n");
    put("sys/fs/cgroup/docker/abc/worker/cpu.max", "100000 100000\n");
    assert_int_equal(limit(), 2);
}

/* A cgroup that is not under the mount's root, or that climbs out of it
 * (a process outside its cgroup namespace): that mount says nothing of it. */
static void test_outside_root(void **state)
{
    (void)state;
    put("mountinfo", "40 30 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
    put("sys/fs/cgroup/cpu.max", "100000 100000\n");
    put("cgroup", "0::/docker/other\n");
    assert_int_equal(limit(), 0);
    put("mountinfo", v2_mount);
    put("cgroup", "0::/../sibling\n");
    put("sys/fs/cgroup/cpu.max", "max 100000\n");
    put("sys/fs/sibling/cpu.max", "100000 100000\n");
    assert_int_equal(limit(), 0);
}

/* mountinfo escapes spaces in paths as \040. */
static void test_escaped_mount(void **state)
{
    (void)state;
    put("mountinfo", "30 23 0:26 / /cg\\040root rw - cgroup2 cgroup2 rw\n");
    put("cgroup", "0::/job\n");
    put("cg root/job/cpu.max", "300000 100000\n");
    assert_int_equal(limit(), 3);
}

static void test_crowded(void **state)
{
    (void)state;
    /* No quota: the kernel's ranks against its online CPUs. */
    assert_false(topo_crowded(2, 2, 2, 0));
    assert_true(topo_crowded(4, 4, 2, 0));
    /* One container of 8 ranks limited to 4 CPUs on a 64-CPU machine. */
    assert_true(topo_crowded(8, 8, 64, 4));
    assert_false(topo_crowded(4, 4, 64, 4));
    /* 8 containers of one rank, 4 CPUs each, on that machine: each host's
     * one rank has its quota; the kernel's 8 fit its 64 CPUs. */
    assert_false(topo_crowded(8, 1, 64, 4));
    assert_true(topo_crowded(80, 1, 64, 4));
}

static void test_v1(void **state)
{
    (void)state;
    put("mountinfo", "41 30 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
                     "42 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
    put("cgroup", "5:cpuacct:/x\n4:cpu,cpuacct:/slurm/job1\n0::/\n");
    put("sys/fs/cgroup/cpuacct/x/cpu.cfs_quota_us", "100000\n"); /* not the cpu controller */
    put("sys/fs/cgroup/cpuacct/x/cpu.cfs_period_us", "100000\n");
    put("sys/fs/cgroup/cpu,cpuacct/slurm/job1/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu,cpuacct/slurm/job1/cpu.cfs_period_us", "100000\n");
    assert_int_equal(limit(), 0);
    put("sys/fs/cgroup/cpu,cpuacct/slurm/cpu.cfs_quota_us", "300000\n");
    put("sys/fs/cgroup/cpu,cpuacct/slurm/cpu.cfs_period_us", "100000\n");
    assert_int_equal(limit(), 3);
    put("sys/fs/cgroup/cpu,cpuacct/slurm/job1/cpu.cfs_quota_us", "50000\n");
    assert_int_equal(limit(), 1);
}

static void test_missing(void **state)
{
    (void)state;
    char mi[300], cg[300];
    snprintf(mi, sizeof mi, "%s/none-mountinfo", root);
    snprintf(cg, sizeof cg, "%s/none-cgroup", root);
    assert_int_equal(topo_cgroup_cpu_limit(mi, cg, root), 0);
    /* A cgroup whose folder is not there: no limit, no error. */
    put("mountinfo", v2_mount);
    put("cgroup", "0::/gone/away\n");
    assert_int_equal(limit(), 0);
}

static void test_usable(void **state)
{
    (void)state;
    int n = topo_usable_cpus();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    assert_true(n >= 1);
    assert_true(online < 1 || n <= online);
    assert_int_equal(topo_usable_cpus(), n); /* cached */
}

#define THP "sys/kernel/mm/transparent_hugepage/"

/* What the fake sysfs under root says: huge pages or not, and the
 * setting that decided. */
static void expect_huge(int want, const char *setting)
{
    char w[32];
    assert_int_equal(topo_shm_huge_pages_at(root, w, sizeof w), want);
    assert_string_equal(w, setting);
}

static void test_huge_pages(void **state)
{
    (void)state;
    /* Nothing there: unknown, no huge pages. */
    expect_huge(0, "unknown");
    /* Only the top-level file (kernels before multi-size THP). */
    put(THP "shmem_enabled", "always within_size advise [never] deny force\n");
    expect_huge(0, "never");
    const char *top[][2] = {{"[always] within_size advise never deny force\n", "always"},
                            {"always [within_size] advise never deny force\n", "within_size"},
                            {"always within_size [advise] never deny force\n", "advise"},
                            {"always within_size advise never [deny] force\n", "deny"},
                            {"always within_size advise never deny [force]\n", "force"}};
    for (int i = 0; i < 5; i++) {
        put(THP "shmem_enabled", top[i][0]);
        expect_huge(strcmp(top[i][1], "deny") != 0, top[i][1]);
    }
    /* Multi-size THP: the PMD size's own file decides the fault unless it
     * inherits, but only a top level that allows huge pages aligns the
     * mapping (without which no fault maps a huge page). */
    put(THP "hpage_pmd_size", "2097152\n");
    put(THP "hugepages-64kB/shmem_enabled", "[always] inherit within_size advise never\n"); /* not PMD size */
    static const struct {
        const char *top, *size;
        int huge;
        const char *decided;
    } both[] = {
        {"always within_size advise [never] deny force\n", "always [inherit] within_size advise never\n", 0, "never"},
        {"always within_size advise [never] deny force\n", "always inherit within_size [advise] never\n", 0, "never"},
        {"always within_size [advise] never deny force\n", "always [inherit] within_size advise never\n", 1, "advise"},
        {"[always] within_size advise never deny force\n", "always inherit within_size advise [never]\n", 0, "never"},
        {"[always] within_size advise never deny force\n", "always inherit [within_size] advise never\n", 1, "within_size"},
        {"always within_size advise never [deny] force\n", "[always] inherit within_size advise never\n", 0, "deny"},
    };
    for (size_t i = 0; i < sizeof both / sizeof both[0]; i++) {
        put(THP "shmem_enabled", both[i].top);
        put(THP "hugepages-2048kB/shmem_enabled", both[i].size);
        expect_huge(both[i].huge, both[i].decided);
    }
    put(THP "shmem_enabled", "[always] within_size advise never deny force\n");
    /* Another PMD size (arm64 64K pages: 512 MiB) names another file. */
    put(THP "hpage_pmd_size", "536870912\n");
    put(THP "hugepages-524288kB/shmem_enabled", "always [inherit] within_size advise never\n");
    expect_huge(1, "always");
    /* A file without a selection counts as unknown. */
    put(THP "hugepages-524288kB/shmem_enabled", "garbage\n");
    put(THP "shmem_enabled", "always advise\n");
    expect_huge(0, "unknown");
    assert_int_equal(topo_shm_huge_pages_at(root, NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_v2_nested, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_unlimited, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_container, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outside_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escaped_mount, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v1, setup, teardown),
        cmocka_unit_test(test_crowded),
        cmocka_unit_test_setup_teardown(test_missing, setup, teardown),
        cmocka_unit_test(test_usable),
        cmocka_unit_test_setup_teardown(test_huge_pages, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
