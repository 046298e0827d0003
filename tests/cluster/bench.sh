#!/usr/bin/env bash
# bench.sh - ccl against Open MPI and plain TCP across namespace "nodes"
# (tests/cluster/cluster.sh), every figure a median over interleaved rounds.
#
#   tests/cluster/bench.sh [SECTION...]     sections (default all three):
#
#   tbf     2 nodes x 2 ranks, each node's link limited to 2 Gbit/s (tbf, both
#           directions): allreduce of 64 MiB with ccl-perf CCL_ALGO=hier, with
#           CCL_ALGO=ring, and Open MPI's (mpi-bench, TCP BTL between nodes)
#   sweep   4 nodes x 2 ranks, links unlimited: ccl-perf allreduce 8 B..64 MiB
#           with the tuner's choice and with each forced CCL_ALGO
#   stream  2 nodes x 1 rank, links unlimited: ccl-perf allgather of 64 MiB
#           against one plain TCP stream between the same nodes (net-bench's
#           reference stream), and against two at once, one each way (what a
#           2-rank allgather does: both directions carry data together); ccl
#           also without socket helper threads (CCL_SOCKET_NTHREADS=0), and
#           "pinned": each node's process (all its threads) on a CPU of its
#           own (node i on CPU i-1, taskset), ccl and the TCP stream alike,
#           as on real nodes, which do not share their cores
#
# Everything is launched as on a cluster: mpirun -H node1:m,node2:m,... from
# node1, ranks from Open MPI's environment, CCL_COMM_ID at node1's address.
# Needs root and the MPI build (make && make tools, with mpicc).
#
# Environment: ROUNDS (default 5) rounds per section, the variants of a
# round run one after another; ITERS (default 10) timed calls per size and
# WARMUP (default 3), SMALL_ITERS (default 300) in the sweep up to 256 KiB;
# FACTOR (default 2) size step of the sweep; RATE
# (default 2gbit) of the tbf section; ALGOS (default "ring tree rd hier")
# forced in the sweep; BENCH_LOG (default /tmp/ccl-cluster-bench.PID) keeps
# every raw table. Sizes in the tables are bytes, times microseconds,
# bandwidths GB/s (1e9 B/s, nccl-tests' algbw and busbw, out of place).
# CCL_* variables in the environment reach every rank (e.g. CCL_BUFFSIZE).
set -uo pipefail

# shellcheck source=tests/cluster/paths.sh
. "$(dirname "${BASH_SOURCE[0]}")/paths.sh"

ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-10}
SMALL_ITERS=${SMALL_ITERS:-300}
WARMUP=${WARMUP:-3}
FACTOR=${FACTOR:-2}
RATE=${RATE:-2gbit}
ALGOS=${ALGOS:-ring tree rd hier}
LOG=${BENCH_LOG:-/tmp/ccl-cluster-bench.$$}
SUBNET=${CLUSTER_SUBNET:-10.77.0}
export CLUSTER_NAME="b$$"

for bin in "$BUILD/bin/ccl-perf" "$BUILD/bin/mpi-bench" "$BUILD/bin/net-bench"; do
    [[ -x "$bin" ]] || {
        echo "bench.sh: $bin is not built (make && make tools, with mpicc)" >&2
        exit 2
    }
done
if ! why=$("$C" preflight); then
    echo "bench.sh: $why" >&2
    exit 2
fi
mkdir -p "$LOG"

# Open MPI 4.1's op/avx component saturates small integer sums; not our
# float sums, but the cross-checks run without it and so does this.
mpi_opts=()
if ompi_info --parsable 2>/dev/null | grep -q '^mca:op:avx:'; then
    mpi_opts+=(--mca op ^avx)
fi

cleanup() {
    "$C" down
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run_variant TAG LAYOUT [VAR=value...] -- command...: one run; appends
# "TAG size time_us algbw busbw" per out-of-place row to $LOG/rows.
run_variant() {
    local tag=$1 layout=$2 out
    shift 2
    local envs=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do
        envs+=("$1")
        shift
    done
    shift
    out="$LOG/$tag.$(date +%s%N).txt"
    if ! env "${envs[@]}" "$C" run -L "$layout" "$@" >"$out" 2>&1; then
        echo "bench.sh: $tag failed; see $out" >&2
        grep -m1 -i 'failed\|error' "$out" | sed 's/^/    /' >&2
        return 1
    fi
    awk -f "$REPO/tests/common/check_perf.awk" "$out" >/dev/null ||
        echo "bench.sh: $tag: wrong results (#wrong not 0); see $out" >&2
    awk -v tag="$tag" '!/^#/ && NF >= 9 && $1 ~ /^[0-9]+$/ { print tag, $1, $6, $7, $8 }' "$out" >>"$LOG/rows"
}

# Medians of each (tag, size): "tag size time algbw busbw".
medians() {
    sort -k1,1 -k2,2n "$LOG/rows" | awk '
        function med(a, n,   i, j, t) {
            for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        function flush() { if (n) printf "%s %s %.2f %.3f %.3f\n", key_t, key_s, med(tm, n), med(ab, n), med(bb, n); n = 0 }
        { if ($1 != key_t || $2 != key_s) { flush(); key_t = $1; key_s = $2 } n++; tm[n] = $3; ab[n] = $4; bb[n] = $5 }
        END { flush() }'
}

perf_args=(-n "$ITERS" -w "$WARMUP" -c 1)

section_tbf() {
    echo "## tbf: 2 nodes x 2 ranks, links limited to $RATE; allreduce float sum 64 MiB, $ROUNDS rounds"
    "$C" up 2 --rate "$RATE" --owner $$ >/dev/null || return 1
    : >"$LOG/rows"
    local r
    for ((r = 1; r <= ROUNDS; r++)); do
        run_variant ccl-hier 2,2 CCL_ALGO=hier -- "$BUILD/bin/ccl-perf" -C allreduce -b 64M -e 64M "${perf_args[@]}"
        run_variant ccl-ring 2,2 CCL_ALGO=ring -- "$BUILD/bin/ccl-perf" -C allreduce -b 64M -e 64M "${perf_args[@]}"
        run_variant ompi 2,2 -- "${mpi_opts[@]}" "$BUILD/bin/mpi-bench" -C allreduce -b 64M -e 64M "${perf_args[@]}"
        # What TCP payload the limited links carry with both directions
        # busy, as an allreduce's are: the bound below comes from it.
        tcp_stream_bidir tcp-bidir-tbf
    done
    printf '%-14s %12s %12s %8s %8s\n' variant bytes "time(us)" algbw busbw
    medians | awk '$1 != "tcp-bidir-tbf" { printf "%-14s %12d %12.0f %8.3f %8.3f\n", $1, $2, $3, $4, $5 }'
    # An allreduce across two nodes moves at least S = 64 MiB each way over
    # a node's link (half the partial sums out, half the results in); a
    # flat ring moves 1.5 S over it. Bounds from the nominal rate and from
    # the TCP payload rate measured above.
    medians | awk -v rate="$RATE" '
        { v[$1] = $1 == "tcp-bidir-tbf" ? $5 : $3 }
        END {
            S = 64 * 1048576; nominal = rate; unit = rate ~ /mbit$/ ? 1e6 : 1e9
            sub(/[gm]bit$/, "", nominal); nominal = nominal * unit / 8
            printf "link bound at the nominal %s: %.0f us (ring: %.0f)\n", rate, S / nominal * 1e6, 1.5 * S / nominal * 1e6
            if ("tcp-bidir-tbf" in v) {
                tcp = v["tcp-bidir-tbf"] * 1e9
                bound = S / tcp * 1e6
                printf "TCP payload both ways through the limit: %.3f GB/s per direction; bound %.0f us (ring: %.0f)\n", v["tcp-bidir-tbf"], bound, 1.5 * bound
                # The ring against its own bound; the others against the
                # bound of any algorithm.
                for (k in v) if (k != "tcp-bidir-tbf") {
                    f = k == "ccl-ring" ? 1.5 : 1
                    printf "  %-12s %.0f%% of its nominal bound, %.0f%% of its TCP bound\n", k, 100 * f * S / nominal * 1e6 / v[k], 100 * f * bound / v[k]
                }
            }
            if (("ccl-hier" in v) && ("ccl-ring" in v)) printf "hier / ring speedup: %.2fx\n", v["ccl-ring"] / v["ccl-hier"]
        }'
    cp "$LOG/rows" "$LOG/tbf.rows"
    "$C" down
}

section_sweep() {
    echo "## sweep: 4 nodes x 2 ranks, unlimited links; allreduce float sum 8 B..64 MiB (-f $FACTOR), $ROUNDS rounds"
    "$C" up 4 --owner $$ >/dev/null || return 1
    : >"$LOG/rows"
    local r a tags=(tuner)
    for a in $ALGOS; do
        tags+=("$a")
    done
    # Sizes up to 256 KiB take ~1.5-10 ms a call here, so ITERS calls
    # would be a few scheduler slices, and one run's time per call swings
    # 2x from the next (8 ranks and their proxy and socket threads on 2
    # cores): they get SMALL_ITERS, and the medians need 5 rounds or more.
    # Each round starts the variants at a different one, so none always
    # runs first.
    local small=(-n "$SMALL_ITERS" -w "$((SMALL_ITERS / 10 + 1))" -c 1) i k
    local split=8
    while ((split * FACTOR <= 262144)); do
        split=$((split * FACTOR))
    done
    local last=$((split * FACTOR))
    while ((last * FACTOR <= 67108864)); do
        last=$((last * FACTOR))
    done
    for ((r = 1; r <= ROUNDS; r++)); do
        for ((i = 0; i < ${#tags[@]}; i++)); do
            a=${tags[$(((i + r - 1) % ${#tags[@]}))]}
            local envs=()
            [[ $a == tuner ]] || envs=(CCL_ALGO="$a")
            for k in small large; do
                if [[ $k == small ]]; then
                    run_variant "$a" 2,2,2,2 "${envs[@]}" -- "$BUILD/bin/ccl-perf" -C allreduce -b 8 -e "$split" -f "$FACTOR" "${small[@]}"
                else
                    run_variant "$a" 2,2,2,2 "${envs[@]}" -- "$BUILD/bin/ccl-perf" -C allreduce -b "$((split * FACTOR))" -e 64M -f "$FACTOR" "${perf_args[@]}"
                    # The target names 64 MiB; a coarse FACTOR steps over it.
                    ((last == 67108864)) ||
                        run_variant "$a" 2,2,2,2 "${envs[@]}" -- "$BUILD/bin/ccl-perf" -C allreduce -b 64M -e 64M "${perf_args[@]}"
                fi
            done
        done
    done
    medians >"$LOG/sweep.medians"
    local col
    for col in 3 5; do
        [[ $col == 3 ]] && echo "# time (us), median" || echo "# busbw (GB/s), median"
        awk -v col="$col" -v order="${tags[*]}" '
            BEGIN { nt = split(order, t, " ") }
            { v[$1, $2] = $col; if (!($2 in seen)) { seen[$2] = 1; sizes[++ns] = $2 } }
            END {
                printf "%12s", "bytes"; for (i = 1; i <= nt; i++) printf " %10s", t[i]; printf "\n"
                for (s = 1; s <= ns; s++) {
                    printf "%12d", sizes[s]
                    for (i = 1; i <= nt; i++) printf " %10s", ((t[i], sizes[s]) in v) ? v[t[i], sizes[s]] : "-"
                    printf "\n"
                }
            }' < <(sort -k2,2n "$LOG/sweep.medians")
    done
    # The target: the tuner within 10% of the fastest forced algorithm.
    # "pick" is what the tuner chooses at each size (ccl-info, with the
    # half core per node that comm init computes here); "pick/best" sets
    # that algorithm's forced column against the fastest, so that it is
    # free of the tuner column's own run-to-run spread.
    echo "# the tuner's pick against the fastest forced algorithm (time)"
    "$BUILD/bin/ccl-info" --explain --nodes 4 --ppn 2 --cores 0.5 --colls allreduce --factor 2 2>/dev/null |
        awk '$1 ~ /^[0-9]+[KMG]?$/ && NF >= 3 { print "pick", $1, $NF }' >"$LOG/sweep.picks"
    awk 'function bytes(v,  u) { u = substr(v, length(v)); if (u ~ /[KMG]/) return (v + 0) * (u == "K" ? 1024 : u == "M" ? 1048576 : 1073741824); return v + 0 }
        $1 == "pick" { pick[bytes($2)] = $3; next }
        { t[$2, $1] = $3; if (!($2 in seen)) { seen[$2] = 1; sizes[++ns] = $2 } }
        END {
            printf "%12s %-8s %-8s %10s %14s\n", "bytes", "fastest", "pick", "pick/best", "tuner/fastest"
            for (s = 1; s <= ns; s++) {
                z = sizes[s]; best = ""
                for (k in t) {
                    split(k, p, SUBSEP)
                    if (p[1] == z && p[2] != "tuner" && (best == "" || t[k] < t[z, best])) best = p[2]
                }
                if (best == "") continue
                pk = (z in pick) ? pick[z] : "?"
                pr = ((z, pk) in t) ? sprintf("%.2f", t[z, pk] / t[z, best]) : "-"
                tr = ((z, "tuner") in t) ? sprintf("%.2f", t[z, "tuner"] / t[z, best]) : "-"
                printf "%12d %-8s %-8s %10s %14s\n", z, best, pk, pr, tr
            }
        }' "$LOG/sweep.picks" <(sort -k2,2n "$LOG/sweep.medians")
    cp "$LOG/rows" "$LOG/sweep.rows"
    "$C" down
}

# One plain TCP stream node1 -> node2, net-bench's reference (its plugin
# figure too), appended to $LOG/rows as GB/s in the bandwidth columns.
# With "pinned", node1's end runs on CPU 0 and node2's on CPU 1.
tcp_stream() {
    local out port=$((47000 + RANDOM % 500)) tag=tcp-stream pin1=() pin2=()
    if [[ ${1:-} == pinned ]]; then
        tag=tcp-stream-pinned pin1=(taskset -c 0) pin2=(taskset -c 1)
    fi
    out="$LOG/net-bench.$(date +%s%N).txt"
    "$C" exec 2 "${pin2[@]}" "$BUILD/bin/net-bench" -s -p "$port" >"$out.server" 2>&1 &
    local spid=$!
    "$C" exec 1 "${pin1[@]}" "$BUILD/bin/net-bench" -c "$SUBNET.2:$port" -b 4M -e 4M -t 256M -r 1 >"$out" 2>&1
    wait "$spid"
    awk -v tag="$tag" '!/^#/ && NF == 8 { print tag, $1, 0, $4, $4; if (tag == "tcp-stream") print "net-plugin", $1, 0, $2, $2 }' \
        "$out" >>"$LOG/rows"
}

# Two plain TCP streams at once, node1 -> node2 and node2 -> node1: what
# the 2 cores allow when both directions carry data, as a 2-rank allgather
# does (each rank sends its half and receives the other's at the same
# time). Appended to $LOG/rows as the mean of the two directions, in GB/s
# per direction: the same unit as a 2-rank allgather's busbw.
#   tcp_stream_bidir [TAG [pinned]]   TAG defaults to tcp-bidir; "pinned"
#                                     runs node i's two ends on CPU i-1
tcp_stream_bidir() {
    local tag=${1:-tcp-bidir} out port=$((47500 + RANDOM % 400)) pin1=() pin2=()
    if [[ ${2:-} == pinned ]]; then
        pin1=(taskset -c 0) pin2=(taskset -c 1)
    fi
    out="$LOG/net-bench-$tag.$(date +%s%N)"
    "$C" exec 2 "${pin2[@]}" "$BUILD/bin/net-bench" -s -p "$port" >"$out.server2" 2>&1 &
    local s2=$!
    "$C" exec 1 "${pin1[@]}" "$BUILD/bin/net-bench" -s -p "$((port + 1))" >"$out.server1" 2>&1 &
    local s1=$!
    sleep 0.3
    "$C" exec 1 "${pin1[@]}" "$BUILD/bin/net-bench" -c "$SUBNET.2:$port" -b 4M -e 4M -t 256M -r 1 >"$out.12" 2>&1 &
    local c1=$!
    "$C" exec 2 "${pin2[@]}" "$BUILD/bin/net-bench" -c "$SUBNET.1:$((port + 1))" -b 4M -e 4M -t 256M -r 1 >"$out.21" 2>&1
    wait "$c1" "$s1" "$s2"
    cat "$out.12" "$out.21" | awk -v tag="$tag" '!/^#/ && NF == 8 { sum += $4; n++ }
        END { if (n == 2) print tag, 0, 0, sum / 2, sum / 2 }' >>"$LOG/rows"
}

section_stream() {
    echo "## stream: 2 nodes x 1 rank, unlimited links; ccl allgather 64 MiB vs one TCP stream, $ROUNDS rounds"
    "$C" up 2 --owner $$ >/dev/null || return 1
    : >"$LOG/rows"
    local r
    for ((r = 1; r <= ROUNDS; r++)); do
        run_variant ccl-allgather 1,1 -- "$BUILD/bin/ccl-perf" -C allgather -b 64M -e 64M "${perf_args[@]}"
        # No socket helper threads: the proxy does the socket I/O itself,
        # one thread hand-off fewer per message on each side.
        run_variant ccl-inline-1 1,1 CCL_SOCKET_NTHREADS=0 CCL_NSOCKS_PERTHREAD=1 -- \
            "$BUILD/bin/ccl-perf" -C allgather -b 64M -e 64M "${perf_args[@]}"
        run_variant ccl-inline-2 1,1 CCL_SOCKET_NTHREADS=0 CCL_NSOCKS_PERTHREAD=2 -- \
            "$BUILD/bin/ccl-perf" -C allgather -b 64M -e 64M "${perf_args[@]}"
        # Each rank (and every thread it starts) on the CPU of its node.
        run_variant ccl-allgather-pinned 1,1 -- \
            bash -c 'exec taskset -c "$OMPI_COMM_WORLD_RANK" "$@"' pin "$BUILD/bin/ccl-perf" -C allgather -b 64M -e 64M "${perf_args[@]}"
        tcp_stream
        tcp_stream pinned
        tcp_stream_bidir
        tcp_stream_bidir tcp-bidir-pinned pinned
    done
    medians | awk '
        function show(what, k) { printf "%-40s %s\n", what, (k in bw) ? sprintf("%.3f GB/s", bw[k]) : "- (failed)" }
        { bw[$1] = $5 }
        END {
            show("ccl allgather busbw (64 MiB, 2 ranks)", "ccl-allgather")
            show("  the same, no helper threads, 1 socket", "ccl-inline-1")
            show("  the same, no helper threads, 2 sockets", "ccl-inline-2")
            show("  the same, each node on a CPU of its own", "ccl-allgather-pinned")
            show("one TCP stream (4 MiB messages)", "tcp-stream")
            show("  the same, each end on the CPU of its node", "tcp-stream-pinned")
            show("two TCP streams, one each way (per direction)", "tcp-bidir")
            show("  the same, each node on the CPU of its own", "tcp-bidir-pinned")
            show("net plugin alone (net-bench)", "net-plugin")
            if (("ccl-allgather" in bw) && bw["tcp-stream"] > 0)
                printf "%-40s %.0f%%\n", "ccl / TCP stream", 100 * bw["ccl-allgather"] / bw["tcp-stream"]
            if (("ccl-allgather-pinned" in bw) && bw["tcp-stream-pinned"] > 0)
                printf "%-40s %.0f%%\n", "ccl / TCP stream, both pinned", 100 * bw["ccl-allgather-pinned"] / bw["tcp-stream-pinned"]
            if (("ccl-allgather" in bw) && bw["tcp-bidir"] > 0)
                printf "%-40s %.0f%%\n", "ccl / TCP streams both ways", 100 * bw["ccl-allgather"] / bw["tcp-bidir"]
            if (("ccl-allgather-pinned" in bw) && bw["tcp-bidir-pinned"] > 0)
                printf "%-40s %.0f%%\n", "ccl / TCP streams both ways, pinned", 100 * bw["ccl-allgather-pinned"] / bw["tcp-bidir-pinned"]
        }'
    cp "$LOG/rows" "$LOG/stream.rows"
    "$C" down
}

sections=("$@")
[[ ${#sections[@]} -gt 0 ]] || sections=(tbf sweep stream)
echo "# ccl cluster bench, $(date '+%F %T'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); raw tables in $LOG"
echo "# ROUNDS=$ROUNDS ITERS=$ITERS WARMUP=$WARMUP; medians over rounds"
for s in "${sections[@]}"; do
    case "$s" in
    tbf | sweep | stream) "section_$s" ;;
    *)
        echo "bench.sh: unknown section '$s' (tbf sweep stream)" >&2
        exit 2
        ;;
    esac
done
