/*
 * cpus.h - how many CPUs this process may really use.
 *
 * The online CPU count overstates it in the places clusters run jobs: a
 * container with a CPU limit (cgroup quota: `docker --cpus`, a Kubernetes
 * limit) or a CPU set (cpuset cgroup, taskset) sees every CPU of the host
 * but gets a few. Wait policies, copy help and the tuner ask whether the
 * local ranks outnumber the CPUs; with the host's count they would spin
 * where they must yield. The answer is the least of the online CPUs, the
 * affinity mask and the CPU quota of the process's cgroup and its
 * ancestors (cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us),
 * rounded up, at least 1.
 */
#ifndef CCL_TOPO_CPUS_H
#define CCL_TOPO_CPUS_H

/* Cached after the first call: quotas are read once per process. */
int topo_usable_cpus(void);

/* The cgroup part alone, from the given files (tests point them at a fake
 * tree): mountinfo as /proc/self/mountinfo, cgroup as /proc/self/cgroup;
 * mount points found there are read under `prefix` ("" for the real ones).
 * Returns the quota in CPUs rounded up, or 0 when there is none. */
int topo_cgroup_cpu_limit(const char *mountinfo, const char *cgroup, const char *prefix);

#endif
