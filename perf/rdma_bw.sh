#!/usr/bin/env bash
# rdma_bw.sh - the ib transport's bandwidth against perftest's ib_write_bw
# between two soft-RoCE VMs (tests/rdma/vm.sh), interleaved round by round:
# only the ratio counts, since the VMs run under software emulation (TCG)
# and move about 10 MB/s (perf/RESULTS.md "soft-RoCE").
#
#   perf/rdma_bw.sh [-r ROUNDS] [-s BYTES] [-n MESSAGES]
#
# Defaults: -r 3 rounds of 1 MiB messages, 20 per run. Each round runs
# `ib_write_bw -d rxe0 -x 1 -s BYTES -n MESSAGES --report_gbits` (RDMA write,
# RoCE v2 GID 1) and then `net-bench -P ib` (ccl's ib plugin, messages of
# BYTES, 4 in flight, BYTES x MESSAGES per round, one round) between the same
# two VMs; prints each figure in GB/s (1e9 B/s) and the median ratio.
# Needs what tests/rdma/run.sh needs (tests/rdma/vm.sh --check) and perftest.
#   perf/rdma_bw.sh --guest server|client ROUNDS BYTES MESSAGES   (inside a VM)
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-build}

guest() {
    local role=$1 rounds=$2 bytes=$3 msgs=$4 r
    export CCL_TIMEOUT=120
    for ((r = 1; r <= rounds; r++)); do
        if [[ $role == server ]]; then
            timeout 300 ib_write_bw -d rxe0 -x 1 -s "$bytes" -n "$msgs" -F --report_gbits >/dev/null 2>&1
            timeout 300 "$BUILD/bin/net-bench" -s -p 29600 >/dev/null 2>&1
        else
            sleep 3 # the server's ib_write_bw listens first
            timeout 300 ib_write_bw -d rxe0 -x 1 -s "$bytes" -n "$msgs" -F --report_gbits 10.77.0.1 2>&1 |
                tee -a /tmp/out/perftest.txt | awk -v r="$r" -v b="$bytes" '$1 == b && NF >= 5 { printf "perftest %d %.6f\n", r, $4 / 8 }'
            sleep 3
            timeout 300 "$BUILD/bin/net-bench" -c 10.77.0.1:29600 -P ib -b "$bytes" -e "$bytes" \
                -t $((bytes * msgs)) -w 4 -r 1 2>&1 | awk -v r="$r" '!/^#/ && NF == 8 { printf "ccl %d %s\n", r, $2 }'
        fi
    done
}

if [[ ${1:-} == --guest ]]; then
    guest "$2" "$3" "$4" "$5"
    exit 0
fi

R=3 BYTES=1048576 MSGS=20
while getopts "r:s:n:h" o; do
    case $o in
    r) R=$OPTARG ;; s) BYTES=$OPTARG ;; n) MSGS=$OPTARG ;;
    *) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
cd "$REPO" || exit 2
"$REPO/tests/rdma/vm.sh" --check >/dev/null 2>&1 || { echo "rdma_bw.sh: the VMs cannot boot here (tests/rdma/vm.sh --check)" >&2; exit 2; }
command -v ib_write_bw >/dev/null || { echo "rdma_bw.sh: ib_write_bw missing (apt-get install perftest)" >&2; exit 2; }
[[ -x "$BUILD/bin/net-bench" ]] || { echo "rdma_bw.sh: $BUILD/bin/net-bench missing (make)" >&2; exit 2; }
# Under /var/tmp: the guests mount fresh /tmp and /run over the host's, so
# this script and net-bench run from copies there (a clone under /tmp would
# not be visible in them).
LOG=$(mktemp -d /var/tmp/ccl-rdma-bw.XXXXXX)
mkdir -p "$LOG/bin/perf" "$LOG/bin/$BUILD/bin"
cp "$0" "$LOG/bin/perf/rdma_bw.sh" && cp "$BUILD/bin/net-bench" "$LOG/bin/$BUILD/bin/" || exit 2
group=239.77.0.$((RANDOM % 200 + 20)):$((47100 + RANDOM % 800))
echo "# perf/rdma_bw.sh -r $R -s $BYTES -n $MSGS (raw: $LOG)"
"$REPO/tests/rdma/vm.sh" -i 1 -l "$group" -c 1 -s "$LOG/vm1" -t 1800 -- \
    cd "$LOG/bin" "&&" bash perf/rdma_bw.sh --guest server "$R" "$BYTES" "$MSGS" >/dev/null 2>&1 &
server=$!
sleep 2
"$REPO/tests/rdma/vm.sh" -i 2 -l "$group" -c 1 -s "$LOG/vm2" -t 1800 -- \
    cd "$LOG/bin" "&&" bash perf/rdma_bw.sh --guest client "$R" "$BYTES" "$MSGS" >"$LOG/client.txt" 2>&1
wait "$server"
grep -E '^(perftest|ccl) ' "$LOG/client.txt" >"$LOG/rows"
echo "| round | ib_write_bw (GB/s) | ccl ib, net-bench (GB/s) | ccl / ib_write_bw |"
echo "| --- | --- | --- | --- |"
awk '{ v[$1, $2] = $3; if ($2 + 0 > n + 0) n = $2 + 0 }
     END { for (r = 1; r <= n; r++) printf "| %d | %.5f | %.5f | %.2f |\n", r, v["perftest", r], v["ccl", r],
           (v["perftest", r] > 0 ? v["ccl", r] / v["perftest", r] : 0) }' "$LOG/rows" | tee "$LOG/table"
awk -F'|' '{ print $5 + 0 }' "$LOG/table" | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "median ratio: %.2f (%d rounds)\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, NR }'
