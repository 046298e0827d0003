#!/usr/bin/env bash
# cross_host.sh - ccl against Open MPI across network-namespace nodes
# (tests/cluster/cluster.sh): per size, the time per call and the bus
# bandwidth of each, and what each small call costs in system calls and
# context switches (issue 36).
#
#   perf/cross_host.sh [-r ROUNDS] [-L LAYOUT] [-t RATE] [-C COLL] [-b MIN] [-e MAX]
#                      [-f FACTOR] [-n ITERS] [-k CALLS]
#
# Defaults: -r 5 -L 1,1 -C allreduce -b 8 -e 32K -f 8 -n 2000 -k 20000 (-k 0: no
# counts). LAYOUT gives the ranks per node (2,2: two nodes of two ranks; 2,2,2,2:
# four nodes of two); -t limits every node's link with tbf (e.g. 2gbit).
# Each round runs, one after the other on the same nodes: ccl-perf (blocking
# calls, -z 1, as MPI's are) with the defaults, ccl-perf with the net
# settings that were the defaults before issue 36 (CCL_SOCKET_NTHREADS=1:
# socket helper threads; CCL_NET_DUPLEX=0: one connection each way; "old
# net" below) and Open MPI's mpi-bench (btl tcp between the nodes, vader
# within one). The table gives the
# median time per call (out of place, max over ranks, us), ccl's time over Open
# MPI's, and the median bus bandwidths (GB/s).
#
# Then, for 8-byte calls (-k of them, out of place and in place), per call
# and per rank: system calls by kind (strace -f -c) and context switches
# (perf stat), for ccl, ccl with the old net settings and Open MPI; skipped
# with a note where strace or perf is missing. strace slows everything it
# traces: its counts are what happens, not how long it takes.
#
# Needs root, ip netns and the MPI build (make, with mpicc). CCL_* variables
# in the environment reach every rank. Raw tables stay in $LOG (printed).
set -uo pipefail
# shellcheck source=tests/cluster/paths.sh
source "$(dirname "$0")/../tests/cluster/paths.sh"
R=5 MIN=8 MAX=32K FACTOR=8 ITERS=2000 CALLS=20000 LAYOUT=1,1 RATE="" COLL=allreduce
while getopts "r:b:e:f:n:k:L:t:C:h" o; do
    case $o in
    r) R=$OPTARG ;; b) MIN=$OPTARG ;; e) MAX=$OPTARG ;; f) FACTOR=$OPTARG ;; n) ITERS=$OPTARG ;;
    k) CALLS=$OPTARG ;; L) LAYOUT=$OPTARG ;; t) RATE=$OPTARG ;; C) COLL=$OPTARG ;;
    *) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
for b in "$BUILD/bin/ccl-perf" "$BUILD/bin/mpi-bench"; do
    [[ -x "$b" ]] || { echo "cross_host.sh: $b missing (make, with mpicc for mpi-bench)" >&2; exit 2; }
done
export CLUSTER_NAME=${CLUSTER_NAME:-xh$$}
LOG=$(mktemp -d /tmp/ccl-cross-host.XXXXXX)
[[ "$LAYOUT" =~ ^[1-9](,[1-9])+$ ]] || { echo "cross_host.sh: -L $LAYOUT: ranks per node, e.g. 1,1 or 2,2,2,2" >&2; exit 2; }
NODES=$(($(tr -cd , <<<"$LAYOUT" | wc -c) + 1))
echo "# perf/cross_host.sh -r $R -L $LAYOUT ${RATE:+-t $RATE }-C $COLL -b $MIN -e $MAX -f $FACTOR -n $ITERS -k $CALLS (raw: $LOG)"
"$C" up "$NODES" ${RATE:+--rate "$RATE"} >"$LOG/up.txt" 2>&1 || { echo "cross_host.sh: cluster.sh up failed (see $LOG/up.txt)" >&2; exit 1; }
trap '"$C" down >/dev/null 2>&1' EXIT
mpi_opts=()
ompi_info --parsable 2>/dev/null | grep -q '^mca:op:avx:' && mpi_opts+=(--mca op ^avx)

: >"$LOG/rows"
sizes=(-b "$MIN" -e "$MAX" -f "$FACTOR" -n "$ITERS" -w 100)
for ((r = 1; r <= R; r++)); do
    for tag in ccl ccl-old ompi; do
        out="$LOG/$tag.$r.txt"
        case $tag in
        ccl) "$C" run -L "$LAYOUT" "$BUILD/bin/ccl-perf" -C "$COLL" -z 1 -a 3 "${sizes[@]}" >"$out" 2>&1 ;;
        ccl-old) CCL_SOCKET_NTHREADS=1 CCL_NET_DUPLEX=0 "$C" run -L "$LAYOUT" "$BUILD/bin/ccl-perf" -C "$COLL" -z 1 -a 3 "${sizes[@]}" >"$out" 2>&1 ;;
        ompi) "$C" run -L "$LAYOUT" "${mpi_opts[@]}" "$BUILD/bin/mpi-bench" -C "$COLL" "${sizes[@]}" >"$out" 2>&1 ;;
        esac || echo "cross_host.sh: $tag failed in round $r (see $out)" >&2
        awk -v t="$tag" '!/^#/ && NF >= 9 && $1 ~ /^[0-9]+$/ { print t, $1, $6, $8 }' "$out" >>"$LOG/rows"
    done
done
echo
echo "| size (B) | ccl (us) | ccl, old net (us) | Open MPI tcp (us) | ccl / Open MPI | old / Open MPI | busbw ccl, old, Open MPI (GB/s) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
sort -k2,2n -k1,1 "$LOG/rows" | awk '
    function median(s,    v, n, i, j, t) {
        n = split(s, v, " ")
        for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
        return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    { all[$1, $2] = all[$1, $2] " " $3; bw[$1, $2] = bw[$1, $2] " " $4
      if (!($2 in seen)) { seen[$2] = 1; order[++ns] = $2 } }
    END {
        for (i = 1; i <= ns; i++) {
            s = order[i]; c = median(all["ccl", s]); z = median(all["ccl-old", s]); m = median(all["ompi", s])
            printf "| %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.3f, %.3f, %.3f |\n", s, c, z, m, (m > 0 ? c / m : 0), (m > 0 ? z / m : 0),
                median(bw["ccl", s]), median(bw["ccl-old", s]), median(bw["ompi", s])
        }
    }'

# ---- per call: system calls and context switches -----------------------------------
# count_8b TAG wrapper...: TAG's program on 8-byte calls, under wrapper
# (a command that execs its arguments); output to $LOG/count-TAG.txt.
count_8b() {
    local tag=$1 envs=() pre=()
    shift
    local prog=("$BUILD/bin/ccl-perf" -C "$COLL" -b 8 -e 8 -z 1 -n "$CALLS" -w 10)
    case $tag in
    ccl-old) envs=(CCL_SOCKET_NTHREADS=1 CCL_NET_DUPLEX=0) ;;
    ompi) pre=("${mpi_opts[@]}") prog=("$BUILD/bin/mpi-bench" -C "$COLL" -b 8 -e 8 -n "$CALLS" -w 10) ;;
    esac
    env "${envs[@]}" "$C" run -L "$LAYOUT" "${pre[@]}" "$@" "${prog[@]}" >"$LOG/count-$tag.txt" 2>&1 ||
        echo "cross_host.sh: counting $tag failed (see $LOG/count-$tag.txt)" >&2
}
[[ "$CALLS" -gt 0 ]] || exit 0
calls=$((2 * CALLS)) # out of place and in place
if command -v strace >/dev/null; then
    for tag in ccl ccl-old ompi; do
        count_8b "$tag" bash -c 'exec strace -f -c -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$LOG/strace-$tag"
    done
    echo
    echo "System calls per 8-byte call on rank 0 (strace -f -c over $calls calls):"
    echo
    echo "| syscall | ccl | ccl, old net | Open MPI |"
    echo "| --- | --- | --- | --- |"
    awk -v n="$calls" '
        FNR == 1 { f++ }
        $NF ~ /^[a-z_0-9]+$/ && $NF != "total" && $NF != "syscall" && NF >= 5 { c[f, $NF] = $4; k[$NF] = 1 }
        END { for (s in k) { if ((c[1, s] + c[2, s] + c[3, s]) / n >= 0.05)
                  printf "| %s | %.2f | %.2f | %.2f |\n", s, c[1, s] / n, c[2, s] / n, c[3, s] / n } }' \
        "$LOG/strace-ccl.0" "$LOG/strace-ccl-old.0" "$LOG/strace-ompi.0" | sort -t'|' -k3,3gr
else
    echo "(strace not found: no system-call counts)"
fi
if command -v perf >/dev/null; then
    for tag in ccl ccl-old ompi; do
        count_8b "$tag" bash -c 'exec perf stat -x, -e context-switches,task-clock -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
            "$LOG/pstat-$tag"
    done
    echo
    echo "Per 8-byte call, per rank (perf stat, mean of the two ranks):"
    echo
    echo "| | context switches | CPU time (us) |"
    echo "| --- | --- | --- |"
    for tag in ccl ccl-old ompi; do
        cat "$LOG/pstat-$tag".* 2>/dev/null | awk -F, -v t="$tag" -v n="$calls" '
            $3 == "context-switches" { cs += $1; r++ } $3 == "task-clock" { ms += $1 }
            END { if (r) printf "| %s | %.2f | %.2f |\n", t, cs / r / n, ms / r / n * 1000 }'
    done
else
    echo "(perf not found: no context-switch counts)"
fi
