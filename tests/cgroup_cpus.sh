#!/usr/bin/env bash
# cgroup_cpus.sh <ccl-info>: ccl counts the CPUs a real cgroup quota leaves
# it (src/topo/cpus.c), not the machine's.
#
# Creates a cgroup with a quota of half a CPU (cgroup v1's cpu controller,
# or v2 where the root already delegates cpu) below the one this script
# runs in, runs ccl-info inside it and expects "usable CPUs: 1 of N"; then
# removes the cgroup. Exits 77 (skipped) with the reason on its last line
# where that cannot be done: not root, fewer than 2 usable CPUs to start
# with, no cpu controller to write.
set -u
info=$1
usable() { "$info" | sed -n 's/^usable CPUs: \([0-9]*\) of.*/\1/p'; }
skip() { echo "$1"; exit 77; }

[[ $(id -u) -eq 0 ]] || skip "needs root to create a cgroup"
before=$(usable)
[[ -n "$before" ]] || { echo "ccl-info printed no 'usable CPUs' line"; exit 1; }
[[ $before -ge 2 ]] || skip "$before usable CPU(s) already: a quota cannot lower the count"

dir=""
cleanup() { [[ -n "$dir" ]] && rmdir "$dir" 2>/dev/null; }
trap cleanup EXIT
self=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}cpu\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup | head -n 1)
if [[ -n "$self" && -e "/sys/fs/cgroup/cpu$self/cpu.cfs_quota_us" ]]; then
    dir=/sys/fs/cgroup/cpu${self%/}/ccl-test-$$
    mkdir "$dir" 2>/dev/null || { dir=""; skip "cannot create a cgroup under /sys/fs/cgroup/cpu$self"; }
    echo 100000 >"$dir/cpu.cfs_period_us" && echo 50000 >"$dir/cpu.cfs_quota_us" ||
        skip "cannot set a cfs quota in $dir"
elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    dir=/sys/fs/cgroup/ccl-test-$$
    mkdir "$dir" 2>/dev/null || { dir=""; skip "cannot create $dir"; }
    echo "50000 100000" >"$dir/cpu.max" || skip "cannot set cpu.max in $dir"
else
    skip "no cgroup cpu controller to write (v1 cpu, or v2 with cpu delegated from the root)"
fi

out=$(sh -c 'echo $$ >"$1/cgroup.procs" || exit 77; exec "$2"' sh "$dir" "$info" 2>&1)
rc=$?
[[ $rc -eq 77 ]] && skip "cannot move a process into $dir"
echo "$out" | grep "usable CPUs"
if [[ $rc -ne 0 ]]; then
    echo "$out"
    echo "ccl-info failed inside the cgroup (exit $rc)"
    exit 1
fi
if ! echo "$out" | grep -q "^usable CPUs: 1 of"; then
    echo "expected 'usable CPUs: 1 of ...' under a quota of half a CPU ($before outside)"
    exit 1
fi
after=$(usable)
if [[ "$after" != "$before" ]]; then
    echo "outside the cgroup ccl-info counts $after usable CPUs, $before before"
    exit 1
fi
echo "ok: 1 usable CPU under the quota, $before outside"
