#!/usr/bin/env bash
# checks.sh - correctness across the nodes of a cluster that is up
# (tests/cluster/cluster.sh up K, K >= 2; CLUSTER_NAME selects it):
#
#   tests/cluster/checks.sh [PART...]      or   tests/cluster/cluster.sh check [PART...]
#
# Parts (default: all four, in this order):
#   ompi        mpirun -H node1:2,node2:2 puts two ranks on each node; Open MPI's
#               own allreduce, allgather and alltoall (mpi-bench -c 1, TCP BTL
#               between the nodes) are right on 2+2 and allreduce on 3+1
#   perf        ccl-perf -C all -d all -o all -c 1, small sizes, on 2+2 ranks,
#               launched like a cluster job: mpirun -H node1:2,node2:2, ranks
#               from Open MPI's environment, CCL_COMM_ID=<node1 address>:<port>
#   crosscheck  build/tests/mpi/test_mpi_crosscheck (ccl against Open MPI on
#               the same data, every collective) on 2+2 ranks
#   algos       every forced CCL_ALGO on the collectives it applies to, on the
#               uneven 3+1 layout (direct: 1+1, the two-rank allreduce)
#
# Every ccl-perf and mpi-bench table must have 0 in every #wrong column
# (tests/common/check_perf.awk), ccl-perf must list its ranks on the nodes
# the layout asks for, and the bytes that crossed node2's link must cover
# what the collective has to move, so a run that quietly stayed on one node
# fails.
#
# Exit status: 0 all passed; 1 something failed; 77 nothing failed but the
# ccl parts did not run because ccl refused ranks on several nodes
# (CCL_ERR_UNSUPPORTED): the last line says so. CHECK_TIMEOUT (seconds,
# default 300) bounds each mpirun.

# The part_* functions are called by name ("part_$p"); shellcheck cannot see that.
# shellcheck disable=SC2317
set -uo pipefail

# shellcheck source=tests/cluster/paths.sh
. "$(dirname "${BASH_SOURCE[0]}")/paths.sh"
LIMIT=${CHECK_TIMEOUT:-300}
NAME=${CLUSTER_NAME:-ccl}

failed=0
unsupported="" # ccl's reason for refusing several nodes, once seen
passed=0

nodes=$("$C" status 2>/dev/null | sed -n "s/^cluster '.*': \([0-9]*\) node.*/\1/p")
if [[ -z "$nodes" ]]; then
    echo "checks.sh: cluster '$NAME' is not up (tests/cluster/cluster.sh up 2)" >&2
    exit 1
fi
if ((nodes < 2)); then
    echo "checks.sh: cluster '$NAME' has $nodes node; the checks need 2" >&2
    exit 1
fi
for bin in "$BUILD/bin/ccl-perf" "$BUILD/bin/mpi-bench" "$BUILD/tests/mpi/test_mpi_crosscheck"; do
    [[ -x "$bin" ]] || {
        echo "checks.sh: $bin is not built (make && make tests tools, with mpicc)" >&2
        exit 1
    }
done

# Open MPI 4.1's op/avx saturates 8- and 16-bit integer sums instead of
# wrapping (open-mpi/ompi#8045), so MPI itself would be wrong on uint8 sums.
mpi_opts=()
if ompi_info --parsable 2>/dev/null | grep -q '^mca:op:avx:'; then
    mpi_opts+=(--mca op ^avx)
fi
# Open MPI itself leaks at MPI_Finalize (its MCA components, hwloc), so in a
# sanitizer build LeakSanitizer would fail the MPI programs for MPI's sake,
# as run_all.sh says of its MPI runs; ccl's own leaks are the mp tests' to
# catch. ccl-perf runs without MPI and keeps the leak check.
mpi_opts+=(-x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")

TMP=$(mktemp -d /tmp/ccl-cluster-checks.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# Ctrl-C or a timeout stops everything, not just the mpirun in flight. Each
# mpirun runs under timeout --foreground so that it stays in the terminal's
# process group and sees Ctrl-C itself (it then ends its ranks and orteds).
trap 'exit 130' INT
trap 'exit 143' TERM

rx_bytes() {
    "$C" exec "$1" cat /sys/class/net/eth0/statistics/rx_bytes
}

# Expected "Rank r ... on HOST" hosts of a layout a,b,..: rank order is node
# by node, as mpirun's default by-slot mapping of -H node1:a,node2:b,...
layout_hosts() {
    awk -F, '{ for (i = 1; i <= NF; i++) for (j = 0; j < $i; j++) printf "node%d ", i }' <<<"$1"
}

# ccl-perf's rank list must match the layout.
check_rank_hosts() {
    local log=$1 layout=$2 got want
    got=$(awk '/^#  Rank +[0-9]+ Pid +[0-9]+ on / { h[$3] = $NF; if ($3 > m) m = $3 }
               END { for (r = 0; r <= m; r++) printf "%s ", h[r] }' "$log")
    want=$(layout_hosts "$layout")
    [[ "$got" == "$want" ]] && return 0
    echo "check: ranks ran on [${got% }], expected [${want% }]"
    return 1
}

# run_step NAME KIND LAYOUT MIN_RX POST -- mpirun/run words...
#   KIND     ompi (Open MPI only) or ccl (skipped once ccl refused several nodes)
#   LAYOUT   ranks per node, e.g. 2,2 or 3,1
#   MIN_RX   bytes node2's eth0 must at least receive during the step
#   POST     extra check: table (check_perf.awk), perf (that and ccl-perf's
#            rank list), or none
run_step() {
    local name=$1 kind=$2 layout=$3 min_rx=$4 post=$5
    shift 6
    local log="$TMP/$name.log" rc rx0 rx1 start t why=""
    if [[ "$kind" == ccl && -n "$unsupported" ]]; then
        echo "SKIP  $name (ccl refuses several nodes)"
        return
    fi
    start=$(date +%s.%N)
    rx0=$(rx_bytes 2)
    timeout --foreground -k 10 "$LIMIT" "$C" run -L "$layout" "$@" >"$log" 2>&1 </dev/null
    rc=$?
    rx1=$(rx_bytes 2)
    t=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if [[ $rc -ne 0 ]]; then
        # ccl-perf prints the whole message, the cross-check only the code.
        if [[ "$kind" == ccl ]] && grep -q 'ccl_comm_init_rank.*not supported by this build or machine' "$log"; then
            unsupported=$(grep -m1 -o 'not supported by this build or machine: ranks span.*' "$log" ||
                grep -m1 -o 'ccl_comm_init_rank.*not supported by this build or machine' "$log")
            echo "SKIP  $name (${t}s): ccl: $unsupported"
            return
        fi
        why="exit status $rc"
        [[ $rc -eq 124 || $rc -eq 137 ]] && why="timed out after ${LIMIT}s"
    elif [[ "$post" == table || "$post" == perf ]]; then
        awk -f "$REPO/tests/common/check_perf.awk" "$log" >"$log.check" 2>&1 || why="wrong results"
        if [[ -z "$why" && "$post" == perf ]]; then
            check_rank_hosts "$log" "$layout" >>"$log.check" 2>&1 || why="ranks on the wrong nodes"
        fi
        cat "$log.check" >>"$log"
    fi
    # want_algo (set by part_algos): the forced algorithm must have run; the
    # ranks' COLL traces (CCL_DEBUG_FILE) name the algorithm of every call.
    if [[ -z "$why" && -n "${want_algo:-}" ]]; then
        if ! grep -qs "algo $want_algo\b" "$TMP/trace.$name".*; then
            echo "check: no call ran algo $want_algo (CCL_ALGO=$want_algo fell back to: $(cat "$TMP/trace.$name".* 2>/dev/null |
                grep -o 'algo [a-z]*' | sort | uniq -c | tr -s ' \n' ' '))" >>"$log"
            why="CCL_ALGO=$want_algo was not applied"
        fi
    fi
    if [[ -z "$why" && $((rx1 - rx0)) -lt $min_rx ]]; then
        echo "check: node2's eth0 received $((rx1 - rx0)) bytes, expected at least $min_rx" >>"$log"
        why="no traffic between the nodes"
    fi
    if [[ -z "$why" ]]; then
        echo "ok    $name (${t}s, node2 received $(((rx1 - rx0) / 1024)) KiB)"
        passed=$((passed + 1))
    else
        echo "FAIL  $name (${t}s): $why"
        echo "---- cluster.sh run -L $layout $*"
        tail -n 40 "$log" | sed 's/^/    /'
        echo "----"
        failed=$((failed + 1))
    fi
}

part_ompi() {
    local log="$TMP/hostname.log" got
    if timeout --foreground -k 10 60 "$C" run -L 2,2 -- hostname >"$log" 2>&1 </dev/null &&
        got=$(sort "$log" | tr '\n' ' ') && [[ "$got" == "node1 node1 node2 node2 " ]]; then
        echo "ok    ompi-placement (mpirun -H node1:2,node2:2 hostname: $got)"
        passed=$((passed + 1))
    else
        echo "FAIL  ompi-placement: expected node1 node1 node2 node2, got:"
        sed 's/^/    /' "$log"
        failed=$((failed + 1))
    fi
    local c sizes=(-b 8 -e 4M -f 8 -n 2 -w 1 -c 1)
    # 4 MiB across the link at least once (the ring moves more).
    for c in allreduce allgather alltoall; do
        run_step "ompi-$c-2x2" ompi 2,2 $((1 << 20)) table -- "${mpi_opts[@]}" "$BUILD/bin/mpi-bench" -C "$c" "${sizes[@]}"
    done
    run_step "ompi-allreduce-3+1" ompi 3,1 $((1 << 20)) table -- "${mpi_opts[@]}" "$BUILD/bin/mpi-bench" -C allreduce "${sizes[@]}"
}

# mpi-bench prints no rank list; only ccl-perf's tables get check_rank_hosts.
part_perf() {
    run_step "ccl-perf-all-2x2" ccl 2,2 $((64 << 10)) perf -- "$BUILD/bin/ccl-perf" \
        -C all -d all -o all -c 1 -b 8 -e 64K -f 64 -n 1 -w 1
}

part_crosscheck() {
    run_step "crosscheck-2x2" ccl 2,2 $((64 << 10)) none -- "${mpi_opts[@]}" "$BUILD/tests/mpi/test_mpi_crosscheck"
}

# CCL_ALGO value, layout, collectives it applies to, extra ccl-perf options.
algo_cases=(
    "ring     3,1 allreduce,allgather,reduce_scatter"
    "tree     3,1 allreduce"
    "rd       3,1 allreduce"
    "hier     3,1 allreduce"
    "chain    3,1 broadcast,reduce -r -1"
    "pairwise 3,1 alltoall,gather,scatter,sendrecv -r -1"
    "direct   1,1 allreduce"
)
part_algos() {
    local line algo layout colls extra name want_algo
    for line in "${algo_cases[@]}"; do
        read -r algo layout colls extra <<<"$line"
        name="ccl-algo-$algo-${layout/,/+}"
        want_algo=$algo
        # shellcheck disable=SC2086 # $extra is a list of options
        CCL_ALGO=$algo CCL_DEBUG=TRACE CCL_DEBUG_SUBSYS=COLL CCL_DEBUG_FILE="$TMP/trace.$name.%h.%p" \
            run_step "$name" ccl "$layout" $((256 << 10)) perf -- \
            "$BUILD/bin/ccl-perf" -C "$colls" -d float,int8,double -o sum,max,avg -c 1 \
            -b 8 -e 2M -f 16 -n 1 -w 1 $extra
    done
}

parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(ompi perf crosscheck algos)
for p in "${parts[@]}"; do
    case "$p" in
    ompi | perf | crosscheck | algos) "part_$p" ;;
    *)
        echo "checks.sh: unknown part '$p' (ompi perf crosscheck algos)" >&2
        exit 2
        ;;
    esac
done

echo "checks: $passed passed, $failed failed${unsupported:+, ccl parts skipped}"
if ((failed > 0)); then
    exit 1
fi
if [[ -n "$unsupported" ]]; then
    echo "ccl refuses ranks on several nodes: $unsupported"
    exit 77
fi
exit 0
