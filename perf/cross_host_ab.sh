#!/usr/bin/env bash
# cross_host_ab.sh - interleaved A/B of ccl settings across network-namespace
# nodes (tests/cluster/cluster.sh), with Open MPI's tcp in the same rounds:
# per size, the median time per call of each variant.
#
#   perf/cross_host_ab.sh [-r ROUNDS] [-L LAYOUT] [-C COLL] [-b MIN] [-e MAX] [-n ITERS] VARIANT...
#
# VARIANT is NAME:VAR=VALUE[,VAR=VALUE...] (ccl-perf with those variables),
# NAME alone (ccl-perf with the defaults), or "ompi" (mpi-bench, btl tcp
# between the nodes). Sizes step by 2. Every round runs each variant once,
# in the order given, so all see the same machine state (the vCPUs move:
# perf/RESULTS.md "How noisy this machine is"). Example, the slot size:
#   perf/cross_host_ab.sh -r 5 -L 1,1 -b 256K -e 64M ompi new \
#       old:CCL_NET_BUFFSIZE=8M,CCL_NET_ZERO_COPY_THRESHOLD=1M
set -uo pipefail
# shellcheck source=tests/cluster/paths.sh
source "$(dirname "$0")/../tests/cluster/paths.sh"
R=5 LAYOUT=1,1 COLL=allreduce MIN=256K MAX=4M ITERS=20
while getopts "r:L:C:b:e:n:h" o; do
    case $o in
    r) R=$OPTARG ;; L) LAYOUT=$OPTARG ;; C) COLL=$OPTARG ;; b) MIN=$OPTARG ;; e) MAX=$OPTARG ;; n) ITERS=$OPTARG ;;
    *) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -gt 0 ]] || { echo "cross_host_ab.sh: name at least one variant" >&2; exit 2; }
export CLUSTER_NAME=${CLUSTER_NAME:-ab$$}
NODES=$(($(tr -cd , <<<"$LAYOUT" | wc -c) + 1))
LOG=$(mktemp -d /tmp/ccl-cross-host-ab.XXXXXX)
"$C" up "$NODES" >"$LOG/up.txt" 2>&1 || { echo "cross_host_ab.sh: cluster.sh up failed ($LOG/up.txt)" >&2; exit 1; }
trap '"$C" down >/dev/null 2>&1' EXIT
echo "# perf/cross_host_ab.sh -r $R -L $LAYOUT -C $COLL -b $MIN -e $MAX -n $ITERS $* (raw: $LOG)"
sizes=(-b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w 10)
for ((r = 1; r <= R; r++)); do
    for v in "$@"; do
        name=${v%%:*} envs=()
        [[ "$v" == *:* ]] && IFS=, read -r -a envs <<<"${v#*:}"
        out="$LOG/$name.$r.txt"
        if [[ $name == ompi ]]; then
            "$C" run -L "$LAYOUT" "$BUILD/bin/mpi-bench" -C "$COLL" "${sizes[@]}" >"$out" 2>&1
        else
            env "${envs[@]}" "$C" run -L "$LAYOUT" "$BUILD/bin/ccl-perf" -C "$COLL" -z 1 -a 3 "${sizes[@]}" >"$out" 2>&1
        fi || echo "cross_host_ab.sh: $name failed in round $r (see $out)" >&2
        awk -v t="$name" '!/^#/ && NF >= 9 && $1 ~ /^[0-9]+$/ { print t, $1, $6 }' "$out" >>"$LOG/rows"
    done
done
echo "| size (B) | $(printf '%s (us) | ' "${@%%:*}")"
echo "|---|$(printf -- '---|%.0s' "$@")"
awk '{ t[$2] = t[$2] " " $1 "=" $3; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } } END { for (i = 1; i <= n; i++) print order[i] t[order[i]] }' \
    "$LOG/rows" | while read -r size rest; do
    line="| $size |"
    for v in "$@"; do
        name=${v%%:*}
        line+=" $(tr ' ' '\n' <<<"$rest" | awk -F= -v n="$name" '$1 == n { print $2 }' | sort -g |
            awk '{ v[NR] = $1 } END { if (NR) printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }') |"
    done
    echo "$line"
done
