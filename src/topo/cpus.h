/*
 * cpus.h - how many CPUs this host's ranks may really use.
 *
 * The online CPU count overstates it in the places clusters run jobs: a
 * container with a CPU limit (cgroup quota: `docker --cpus`, a Kubernetes
 * limit) sees every CPU of the host but gets a few. Wait policies, copy
 * help and the tuner ask whether ranks outnumber the CPUs; with the host's
 * count they would spin where they must yield. The quota is that of the
 * process's cgroup and every ancestor (cgroup v2 cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us), rounded up.
 *
 * Who shares the quota: the ranks of one host (one hostid: one container
 * or machine), which run in one job's cgroup. Ranks of other containers on
 * the same kernel have their own quotas but share the machine's CPUs, so
 * they count against the online CPUs only. The affinity mask is not used:
 * launchers pin each rank to its own cores (mpirun --bind-to core, srun
 * --cpu-bind, ccl-perf), which says nothing about how many ranks compete.
 */
#ifndef CCL_TOPO_CPUS_H
#define CCL_TOPO_CPUS_H

int topo_online_cpus(void);
/* The cgroup CPU quota in CPUs, rounded up; 0 when there is none. Read once
 * per process. */
int topo_cpu_quota(void);
/* The least of the two: what ccl-info prints, and the CPUs of a host whose
 * ranks share this process's cgroup. */
int topo_usable_cpus(void);
/* Whether ranks outnumber the CPUs they compete for: this kernel's ranks
 * (every host on it) its online CPUs, or this host's ranks its quota. */
int topo_cores_crowded(int kernel_ranks, int host_ranks);
/* The same from given counts (tests). */
int topo_crowded(int kernel_ranks, int host_ranks, int online, int quota);

/* The cgroup part alone, from the given files (tests point them at a fake
 * tree): mountinfo as /proc/self/mountinfo, cgroup as /proc/self/cgroup;
 * mount points found there are read under `prefix` ("" for the real ones).
 * Returns the quota in CPUs rounded up, or 0 when there is none. */
int topo_cgroup_cpu_limit(const char *mountinfo, const char *cgroup, const char *prefix);

#endif
