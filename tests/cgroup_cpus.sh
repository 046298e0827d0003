#!/usr/bin/env bash
# cgroup_cpus.sh <ccl-info>: ccl counts the CPUs a real cgroup quota leaves
# it (src/topo/cpus.c), not the machine's.
#
# Creates a cgroup with a quota of half a CPU (cgroup v1's cpu controller,
# or v2 where the root already delegates cpu), runs ccl-info inside it and
# expects "usable CPUs: 1 of N" with N the online CPUs; then removes the
# cgroup. Exits 77 (skipped) with the reason on its last line where that
# cannot be done: not root, fewer than 2 CPUs, no writable cpu controller.
set -u
info=$1
online=$(getconf _NPROCESSORS_ONLN)
if [[ $(id -u) -ne 0 ]]; then echo "needs root to create a cgroup"; exit 77; fi
if [[ $online -lt 2 ]]; then echo "one CPU online: a quota cannot lower the count"; exit 77; fi

dir=""
if [[ -w /sys/fs/cgroup/cpu && -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
    dir=/sys/fs/cgroup/cpu/ccl-test-$$
    mkdir "$dir" || { echo "cannot create $dir"; exit 77; }
    echo 100000 >"$dir/cpu.cfs_period_us" && echo 50000 >"$dir/cpu.cfs_quota_us"
elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    dir=/sys/fs/cgroup/ccl-test-$$
    mkdir "$dir" || { echo "cannot create $dir"; exit 77; }
    echo "50000 100000" >"$dir/cpu.max"
else
    echo "no cgroup cpu controller to write (v1 cpu, or v2 with cpu delegated from the root)"
    exit 77
fi
cleanup() { rmdir "$dir" 2>/dev/null; }
trap cleanup EXIT

out=$(sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2"' sh "$dir" "$info" 2>&1)
rc=$?
echo "$out" | grep "usable CPUs"
if [[ $rc -ne 0 ]]; then
    echo "$out"
    echo "ccl-info failed inside the cgroup (exit $rc)"
    exit 1
fi
if ! echo "$out" | grep -q "^usable CPUs: 1 of $online online"; then
    echo "expected 'usable CPUs: 1 of $online online' under a quota of half a CPU"
    exit 1
fi
# Outside it, the quota no longer applies.
if "$info" | grep -q "^usable CPUs: 1 of $online online" && [[ $(nproc) -ge 2 ]]; then
    echo "ccl-info counts 1 CPU outside the cgroup too"
    exit 1
fi
echo "ok: 1 usable CPU under the quota, $online online"
