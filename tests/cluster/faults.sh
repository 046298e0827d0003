#!/usr/bin/env bash
# faults.sh - failures across the nodes of a cluster that is up
# (tests/cluster/cluster.sh up 3; CLUSTER_NAME selects it): a link that is
# cut and a rank that is killed while allreduces move data between nodes
# must become an error on every other rank, soon, naming what failed.
#
#   tests/cluster/faults.sh [PART...]     parts: cut relay kill corrupt (default all)
#
# Parts:
#   cut    2+2 ranks on node1 and node2 loop over 16 MiB allreduces with
#          CCL_TIMEOUT=10; node2's link is cut (its switch port goes down) in
#          mid-run. Every rank must fail within CUT_BOUND s (10) with a message
#          that names a rank, its host and its address across the cut and says
#          the link went silent (TCP keepalive, 5 s at this CCL_TIMEOUT), not
#          a bare timeout. Rank 1 runs with CCL_TIMEOUT=60, so its own sockets
#          would only give up after 20 s: it must hear of the cut from rank 0,
#          through their shared-memory connections.
#   relay  1+1+1 ranks on node1..node3, node3 is cut; rank 0 has
#          CCL_TIMEOUT=60, so it must hear of the cut from rank 1 over the
#          network, in the notice rank 1 sends before it closes its
#          connections (src/transport/net.c), and name node3 all the same.
#   kill   2+2 ranks loop over 256 MiB allreduces; rank 3 (node2) SIGKILLs
#          itself a quarter into the third one (fault_loop -K 3). Ranks 0, 1
#          (node1) and 2 (node2) must fail in that call, within KILL_BOUND s
#          (10) of the kill, naming rank 3 and node2.
#   corrupt 2+2 ranks loop over 16 MiB allreduces with net checksums on
#          (CCL_CHECKSUM=1); rank 2 (node2) sends one byte changed after its
#          checksum in its third call (CCL_FAULT=corrupt_wire). Every rank
#          must fail in that call with CCL_ERR_CORRUPT, within KILL_BOUND s,
#          naming the link: data from rank 2 (node2), the receiving rank's
#          host, net/socket and eth0.
#
# Ranks are started by this script in their node's namespaces (cluster.sh
# exec), rank and size in PMI_RANK/PMI_SIZE, and run
# $BUILD/tests/cluster/fault_loop, which prints how and when its call failed;
# mpirun is not used because Open MPI ends the whole job as soon as one
# rank dies. Each rank must exit with fault_loop's "a call failed" status
# (a rank that went on succeeding, computed a wrong sum or hung fails the
# part), its error (ccl_get_last_error, and the CCL_DEBUG=WARN line) must
# match the part's patterns, and the time from the cut or kill to its
# failure is printed. Exit status: 0 all passed, 1 something failed.

# The part_* functions are called by name ("part_$p"); shellcheck cannot see that.
# shellcheck disable=SC2317
set -uo pipefail

# shellcheck source=tests/cluster/paths.sh
. "$(dirname "${BASH_SOURCE[0]}")/paths.sh"
SUBNET=${CLUSTER_SUBNET:-10.77.0}
NAME=${CLUSTER_NAME:-ccl}
CUT_BOUND=${CUT_BOUND:-10}
KILL_BOUND=${KILL_BOUND:-10}
LOOP="$BUILD/tests/cluster/fault_loop"

nodes=$("$C" status 2>/dev/null | sed -n "s/^cluster '.*': \([0-9]*\) node.*/\1/p")
if [[ -z "$nodes" ]]; then
    echo "faults.sh: cluster '$NAME' is not up (tests/cluster/cluster.sh up 3)" >&2
    exit 1
fi
[[ -x "$LOOP" ]] || {
    echo "faults.sh: $LOOP is not built (make tests)" >&2
    exit 1
}

# FAULTS_LOGS=dir keeps the ranks' logs there (one folder per part).
TMP=${FAULTS_LOGS:-$(mktemp -d /tmp/ccl-cluster-faults.XXXXXX)}
mkdir -p "$TMP"
pids=()  # ranks of the current part, by rank
part_env=() # NAME=VALUE for every rank of the current part
cut_node=""
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill -KILL "$p" 2>/dev/null
    done
    [[ -z "$cut_node" ]] || "$C" link "$cut_node" up
    [[ -n "${FAULTS_LOGS:-}" ]] || rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

failed=0
passed=0

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="${2:-$(now)}" 'BEGIN { printf "%.2f", b - a }'; }
# over SECONDS LIMIT: whether SECONDS > LIMIT (decimals).
over() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# launch PART LAYOUT BYTES [RANK=SECONDS | RANK=-OPTION...]: ranks a,b,..
# per node, each running fault_loop on BYTES per call with CCL_TIMEOUT=10,
# or SECONDS for that rank, and the fault_loop OPTION given to it. Rank r
# logs to $TMP/PART/r.log and leaves "status epoch" in r.exit.
launch() {
    local part=$1 layout=$2 bytes=$3
    shift 3
    local dir="$TMP/$part" port=$((29900 + RANDOM % 90)) rank=0 n j t opt counts np=0 c
    mkdir -p "$dir"
    IFS=, read -r -a counts <<<"$layout"
    for c in "${counts[@]}"; do np=$((np + c)); done
    pids=()
    for ((n = 1; n <= ${#counts[@]}; n++)); do
        for ((j = 0; j < counts[n - 1]; j++)); do
            t=10
            opt=()
            for c in "$@"; do
                [[ "${c%%=*}" == "$rank" ]] || continue
                case "${c#*=}" in
                -*) opt+=("${c#*=}") ;;
                *) t=${c#*=} ;;
                esac
            done
            (
                "$C" exec "$n" env "${part_env[@]}" PMI_RANK=$rank PMI_SIZE=$np CCL_COMM_ID="$SUBNET.1:$port" CCL_TIMEOUT="$t" \
                    CCL_DEBUG=WARN "$LOOP" -s "$bytes" "${opt[@]}" >"$dir/$rank.log" 2>&1 </dev/null &
                echo $! >"$dir/$rank.pid"
                wait $! 2>/dev/null
                echo "$? $(now)" >"$dir/$rank.exit"
            ) &
            rank=$((rank + 1))
        done
    done
    for ((rank = 0; rank < np; rank++)); do
        while [[ ! -s "$dir/$rank.pid" ]]; do sleep 0.05; done
        pids+=("$(cat "$dir/$rank.pid")")
    done
}

# wait_lines PART PATTERN COUNT SECONDS: until COUNT lines of the ranks'
# logs match PATTERN (extended regex); 1 if that takes too long.
wait_lines() {
    local dir="$TMP/$1" start
    start=$(now)
    while (($(cat "$dir"/*.log 2>/dev/null | grep -cE "$2") < $3)); do
        if over "$(since "$start")" "$4" || compgen -G "$dir/*.exit" >/dev/null; then
            return 1
        fi
        sleep 0.1
    done
}

# wait_exit PART SECONDS: until every rank has exited; the ones still
# running after SECONDS are killed (check_rank reports them as hung).
wait_exit() {
    local dir="$TMP/$1" start r
    start=$(now)
    for ((r = 0; r < ${#pids[@]}; r++)); do
        while [[ ! -e "$dir/$r.exit" ]]; do
            if over "$(since "$start")" "$2"; then
                kill -KILL "${pids[r]}" 2>/dev/null
                while [[ ! -e "$dir/$r.exit" ]]; do sleep 0.1; done
                break
            fi
            sleep 0.1
        done
    done
    pids=()
}

# exit_times PART RANK... T0: seconds from T0 to each rank's exit.
exit_times() {
    local part=$1 t0=${!#} r
    for r in "${@:2:$#-2}"; do
        printf '%s ' "$(since "$t0" "$(cut -d' ' -f2 "$TMP/$part/$r.exit")")"
    done
}

# check_rank PART RANK T0 BOUND PATTERN...: rank RANK must have failed (status
# 3) within BOUND s of T0, and its error, in fault_loop's "failed" line and
# in a ccl WARN line, must match every PATTERN (extended regexes; one that
# starts with = is for the error alone: only that names the collective).
check_rank() {
    local part=$1 r=$2 t0=$3 bound=$4
    shift 4
    local log="$TMP/$part/$r.log" status line msg call when took re why=""
    read -r status _ <"$TMP/$part/$r.exit"
    line=$(grep -m1 '^failed ' "$log")
    case "$status" in
    3) ;;
    0) why="its allreduces all succeeded" ;;
    2) why="wrong result: $(grep -m1 '^wrong ' "$log")" ;;
    137) why="hung: killed after the deadline" ;;
    *) why="exit status $status" ;;
    esac
    if [[ -z "$why" ]]; then
        read -r _ _ call when took _ <<<"$line"
        msg=${line#* | }
        if over "$(since "$t0" "$when")" "$bound"; then
            why="failed $(since "$t0" "$when") s after the fault (bound $bound s)"
        fi
        for re in "$@"; do
            [[ -n "$why" ]] && break
            if [[ "$re" == =* ]]; then
                re=${re#=}
            else
                grep -E 'ccl WARN' "$log" | grep -qE "$re" || why="no ccl WARN line matches /$re/"
            fi
            grep -qE "$re" <<<"$msg" || why="its error does not match /$re/"
        done
    fi
    if [[ -z "$why" ]]; then
        echo "ok    $part: rank $r failed $(since "$t0" "$when") s after the fault, in call $call (which took" \
            "$took s): $msg" | cut -c1-500
        passed=$((passed + 1))
    else
        echo "FAIL  $part: rank $r: $why"
        # Its error first: a CI log may show only the first lines.
        [[ -n "$line" ]] && echo "    its error: ${line#* | }" | cut -c1-600
        sed 's/^/    /' "$log" | tail -n 15 | cut -c1-400
        failed=$((failed + 1))
    fi
}

# A failure of any rank before the fault is a failure of the part.
started() {
    local part=$1 np=$2 what=$3
    if ! wait_lines "$part" '^start [0-9]+ 2$' "$np" 120; then
        echo "FAIL  $part: the ranks did not get to their second call ($what)"
        wait_exit "$part" 0 >/dev/null
        tail -n 5 "$TMP/$part"/*.log | sed 's/^/    /'
        failed=$((failed + 1))
        return 1
    fi
}

# cut_part PART LAYOUT CUT_NODE SLOW_RANK: the cut and relay parts.
cut_part() {
    local part=$1 layout=$2 node=$3 slow=$4 t0 np
    np=$(awk -F, '{ for (i = 1; i <= NF; i++) s += $i; print s }' <<<"$layout")
    launch "$part" "$layout" 16M "$slow=60"
    started "$part" "$np" "layout $layout" || return
    sleep 0.5 # data in flight: the calls follow each other back to back
    t0=$(now)
    "$C" link "$node" down
    cut_node=$node
    wait_exit "$part" $((CUT_BOUND + 30))
    "$C" link "$node" up
    cut_node=""
    echo "      $part: node$node cut off; ranks 0-$((np - 1)) exited after $(exit_times "$part" $(seq 0 $((np - 1))) "$t0")s"
    local rank=0 n j counts far
    IFS=, read -r -a counts <<<"$layout"
    for ((n = 1; n <= ${#counts[@]}; n++)); do
        for ((j = 0; j < counts[n - 1]; j++)); do
            # The far side: node CUT_NODE for the others, any other node for its own ranks.
            if ((n == node)); then
                far="\(node[0-9]+\)"
                check_rank "$part" $rank "$t0" "$CUT_BOUND" "$far" "$SUBNET\.[0-9]+:[0-9]+" "TCP keepalive"
            else
                check_rank "$part" $rank "$t0" "$CUT_BOUND" "\(node$node\)" "$SUBNET\.$node:[0-9]+" "TCP keepalive"
            fi
            rank=$((rank + 1))
        done
    done
}

part_cut() {
    cut_part cut 2,2 2 1
}

part_relay() {
    if ((nodes < 3)); then
        echo "FAIL  relay: needs 3 nodes, cluster '$NAME' has $nodes"
        failed=$((failed + 1))
        return
    fi
    cut_part relay 1,1,1 3 0
}

part_kill() {
    local t0 r
    launch kill 2,2 256M 3=-K3
    started kill 4 "layout 2,2" || return
    wait_exit kill $((KILL_BOUND + 90))
    t0=$(awk '$1 == "killing" { print $4 }' "$TMP/kill/3.log")
    if [[ -z "$t0" ]]; then
        echo "FAIL  kill: rank 3 did not kill itself in call 3"
        tail -n 5 "$TMP"/kill/*.log | sed 's/^/    /'
        failed=$((failed + 1))
        return
    fi
    echo "      kill: rank 3 killed itself a quarter into call 3; ranks 0-2 exited after $(exit_times kill 0 1 2 "$t0")s"
    for r in 0 1 2; do
        # Call 3 fails: without rank 3 none of the survivors can finish it.
        check_rank kill $r "$t0" "$KILL_BOUND" "rank 3\b" "\(node2\)|on node2\b" "=allreduce #3 \("
    done
}

part_corrupt() {
    local t0 r
    part_env=(CCL_CHECKSUM=1 "CCL_FAULT=corrupt_wire:rank=2:op=3")
    launch corrupt 2,2 16M
    part_env=()
    started corrupt 4 "layout 2,2" || return
    wait_exit corrupt $((KILL_BOUND + 30))
    # When rank 2 sent the changed byte: its CCL_FAULT line's timestamp.
    t0=$(sed -n 's/^[^[]*\[\([0-9.]*\)\] ccl WARN CCL_FAULT: corrupt_wire: message.*/\1/p' "$TMP/corrupt/2.log" | head -1)
    if [[ -z "$t0" ]]; then
        echo "FAIL  corrupt: rank 2 did not send a changed byte in call 3"
        tail -n 5 "$TMP"/corrupt/*.log | sed 's/^/    /'
        failed=$((failed + 1))
        return
    fi
    echo "      corrupt: rank 2 sent a changed byte in call 3; ranks 0-3 exited after $(exit_times corrupt 0 1 2 3 "$t0")s"
    for r in 0 1 2 3; do
        if ! grep -qE '^failed [0-9]+ 3 .*data corruption' "$TMP/corrupt/$r.log"; then
            echo "FAIL  corrupt: rank $r did not fail call 3 with CCL_ERR_CORRUPT: $(grep -m1 '^failed ' "$TMP/corrupt/$r.log")"
            failed=$((failed + 1))
            continue
        fi
        check_rank corrupt $r "$t0" "$KILL_BOUND" "data from rank 2 \(node2\) was corrupted in flight on the link 2->[01] " \
            "rank [01] \(node1\)" "net/socket, device 0 eth0" "=allreduce #3 \("
    done
}

parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(cut relay kill corrupt)
for p in "${parts[@]}"; do
    case "$p" in
    cut | relay | kill | corrupt) "part_$p" ;;
    *)
        echo "faults.sh: unknown part '$p' (cut relay kill corrupt)" >&2
        exit 2
        ;;
    esac
done

echo "faults: $passed passed, $failed failed"
((failed == 0))
