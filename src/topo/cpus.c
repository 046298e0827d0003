/*
 * cpus.c - how many CPUs a host's ranks may really use (cpus.h).
 *
 * The cgroup quota is found the way the kernel exposes it: /proc/self/cgroup
 * names the process's cgroup per hierarchy, /proc/self/mountinfo where each
 * hierarchy is mounted (and which part of it: a container sees its own
 * cgroup as the mount's root). A limit set on any ancestor binds too, so
 * every level from the process's cgroup up to the mount is read. Files that
 * are missing or unreadable mean no limit: this only ever lowers the count.
 */
#include "topo/cpus.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CPUS_PATH_MAX 4096

/* The quota of one cgroup directory in CPUs, rounded up; 0: none. */
static long cpus_dir_limit(const char *dir, int v2)
{
    char path[CPUS_PATH_MAX + 32]; /* dir and a file name */
    long long quota = -1, period = 0;
    if (v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        char q[32] = "";
        if (fscanf(f, "%31s %lld", q, &period) == 2 && strcmp(q, "max") != 0)
            quota = strtoll(q, NULL, 10);
        fclose(f);
    } else {
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        if (fscanf(f, "%lld", &quota) != 1)
            quota = -1;
        fclose(f);
        snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
        f = fopen(path, "r");
        if (!f)
            return 0;
        if (fscanf(f, "%lld", &period) != 1)
            period = 0;
        fclose(f);
    }
    if (quota <= 0 || period <= 0)
        return 0;
    return (long)((quota + period - 1) / period);
}

/* Least limit from `dir` up to `top` (a prefix of it); 0: none. */
static long cpus_walk_up(char *dir, size_t top_len, int v2)
{
    long best = 0;
    for (;;) {
        long l = cpus_dir_limit(dir, v2);
        if (l > 0 && (best == 0 || l < best))
            best = l;
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= top_len || !slash || (size_t)(slash - dir) < top_len)
            return best;
        *slash = '\0';
    }
}

/* mountinfo writes space, tab, newline and backslash in paths as \ooo. */
static void cpus_unescape(char *s)
{
    char *out = s;
    for (const char *in = s; *in; out++) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' && in[3] >= '0' &&
            in[3] <= '7') {
            *out = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 4;
        } else {
            *out = *in++;
        }
    }
    *out = '\0';
}

/* Whether a comma-separated list holds `word`. */
static int cpus_has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

int topo_cgroup_cpu_limit(const char *mountinfo, const char *cgroup, const char *prefix)
{
    char v1_path[CPUS_PATH_MAX] = "", v2_path[CPUS_PATH_MAX] = "";
    int have_v1 = 0, have_v2 = 0;
    char line[CPUS_PATH_MAX + 256];
    FILE *f = fopen(cgroup, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        /* hierarchy-id:controllers:path */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        if (strcmp(line, "0") == 0 && ctrls[0] == '\0') {
            snprintf(v2_path, sizeof v2_path, "%s", path);
            have_v2 = 1;
        } else if (cpus_has_word(ctrls, "cpu")) {
            snprintf(v1_path, sizeof v1_path, "%s", path);
            have_v1 = 1;
        }
    }
    fclose(f);
    if (!have_v1 && !have_v2)
        return 0;
    f = fopen(mountinfo, "r");
    if (!f)
        return 0;
    long best = 0;
    while (fgets(line, sizeof line, f)) {
        /* id parent major:minor root mountpoint options [optional...] - fstype source superoptions */
        char root[CPUS_PATH_MAX], mnt[CPUS_PATH_MAX], fstype[64], super[512];
        char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 ||
            sscanf(dash + 3, "%63s %*s %511s", fstype, super) != 2)
            continue;
        cpus_unescape(root);
        cpus_unescape(mnt);
        int v2 = strcmp(fstype, "cgroup2") == 0;
        if (!(v2 && have_v2) && !(strcmp(fstype, "cgroup") == 0 && have_v1 && cpus_has_word(super, "cpu")))
            continue;
        const char *path = v2 ? v2_path : v1_path;
        /* A container's mount shows its own cgroup as the root: the part
         * of the path below it is what lies under the mount point. A path
         * outside the mount's root (or climbing out with "..", as a
         * process outside its cgroup namespace sees it) is not under this
         * mount at all: its limits are not ours to read. */
        size_t rl = strlen(root);
        const char *rel;
        if (strcmp(root, "/") == 0)
            rel = path;
        else if (strncmp(path, root, rl) == 0 && (path[rl] == '/' || path[rl] == '\0'))
            rel = path + rl;
        else
            continue;
        if (strstr(rel, "/..") != NULL)
            continue;
        char dir[CPUS_PATH_MAX];
        int top = snprintf(dir, sizeof dir, "%s%s", prefix, mnt);
        if (top < 0 || (size_t)top >= sizeof dir)
            continue;
        snprintf(dir + top, sizeof dir - (size_t)top, "%s", strcmp(rel, "/") == 0 ? "" : rel);
        long l = cpus_walk_up(dir, (size_t)top, v2);
        if (l > 0 && (best == 0 || l < best))
            best = l;
    }
    fclose(f);
    return best > INT_MAX ? INT_MAX : (int)best;
}

int topo_cpu_quota(void)
{
    /* Racing first callers compute the same value; no lock needed. -1:
     * not read yet (0 is "no quota"). */
    static atomic_int cached = -1;
    int q = atomic_load_explicit(&cached, memory_order_relaxed);
    if (q < 0) {
        q = topo_cgroup_cpu_limit("/proc/self/mountinfo", "/proc/self/cgroup", "");
        atomic_store_explicit(&cached, q, memory_order_relaxed);
    }
    return q;
}

int topo_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > INT_MAX ? INT_MAX : (int)n;
}

int topo_usable_cpus(void)
{
    int n = topo_online_cpus(), q = topo_cpu_quota();
    return q > 0 && q < n ? q : n;
}

int topo_crowded(int kernel_ranks, int host_ranks, int online, int quota)
{
    return kernel_ranks > online || (quota > 0 && host_ranks > quota);
}

int topo_cores_crowded(int kernel_ranks, int host_ranks)
{
    return topo_crowded(kernel_ranks, host_ranks, topo_online_cpus(), topo_cpu_quota());
}
