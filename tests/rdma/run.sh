#!/usr/bin/env bash
# run.sh - ccl across qemu VMs over soft-RoCE (rdma_rxe): boots the VMs once
# (tests/rdma/vm.sh), then runs each case as jobs in them (tests/rdma/agent.sh)
# and prints one PASS/FAIL/SKIPPED line per case, ending with
# "N passed, N failed[, N skipped]"; exit 0 only when nothing failed.
#
#   tests/rdma/run.sh [--net ib|socket] [--vms N] [--ranks K] [--cases LIST] [--logs DIR]
#   tests/rdma/run.sh --check     only report what is missing (exit 1 if anything)
#
#   --net NAME   the transport between VMs, given to every rank as CCL_NET=NAME
#                (default ib; socket is ccl's TCP transport)
#   --vms N      VMs on one Ethernet segment (default 2; vmI is 10.77.0.I)
#   --ranks K    ranks per VM (default 2): ranks 0..K-1 on vm1, K..2K-1 on vm2, ...
#   --cases L    comma list of cases (default all): sanity, coll (= coll/default,
#                coll/ring, coll/tree, coll/hier, coll/bulk, or name one), kill,
#                gid, cut
#   --logs DIR   keep every job's log and each VM's console there
#
# Cases:
#   sanity     ibv_devinfo in each VM shows rxe0 PORT_ACTIVE (else the rest is
#              skipped), and an RC ping-pong over RoCE v2 (GID 1) from the
#              last VM to vm1 passes: verbs work before ccl is asked to
#   coll/ALGO  ccl-perf on all ranks: int32, float32 and bfloat16; sum, max and
#              avg; out of place and in place; results checked (-c 1) and
#              hashed across ranks (CCL_VERIFY=1). default: every collective
#              (-C all), the tuner's picks, 8 B, 512 B and 32 KiB; ring, tree,
#              hier: CCL_ALGO=ALGO at 8 B and 32 KiB on the collectives it
#              applies to (tree: allreduce; ring, hier: allreduce, allgather,
#              reduce_scatter, broadcast, reduce), and the tuner's allreduce
#              table must pick it at every size; bulk: 1 MiB float32 sums
#              (zero-copy sends) of allreduce, allgather, reduce_scatter and
#              broadcast. Each rank's CCL_DEBUG=INFO log must say the named
#              transport carried it ("net: plugin NAME")
#   kill       the last rank SIGKILLs itself inside an allreduce
#              (CCL_FAULT=kill:...:slice=1); every other rank must fail, naming
#              that rank and its VM
#   gid        (ib only) CCL_IB_GID_INDEX=99: every rank must fail with an error
#              that names the GID, not hang
#   cut        the last VM's link is cut (qemu monitor: set_link lan off) in
#              mid-run; every rank must fail, naming a peer across the cut
# Fault cases run with CCL_TIMEOUT=$RDMA_CCL_TIMEOUT (20) and must end within
# that plus a margin; every ccl-perf runs under timeout, so a hang is a FAIL
# ("hung"), never a stuck suite.
#
# When the VMs cannot boot here (no qemu, kernel image, rdma_rxe, static
# busybox, ...) or ccl-perf is not built, or --net ib and this ccl has no ib
# transport (no CCL_IB_* in ccl-perf --help-env): prints "SKIPPED: <reason>"
# and exits 0; with MAY_SKIP=1 (tests/run_all.sh) prints the reason alone
# and exits 77, as tests/cluster/run_short.sh does.
#
# Environment: BUILD (default build), NICE (qemu's niceness, default 0),
# RDMA_CCL_TIMEOUT (20), RDMA_CCL_ENV ("VAR=VALUE ..." for every rank), RDMA_MEM (MiB per VM, 1024), RDMA_CPUS (vCPUs per VM,
# default 1), RDMA_NET_VAR (the variable that names the
# transport, default CCL_NET), plus vm.sh's QEMU, QEMU_CPU, VM_KERNEL.
# Everything runs under qemu's TCG (no nested KVM here), 10-50x slower than
# the host: times printed are for bounding the run, never speed figures.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO" || exit 2
# shellcheck source=tests/rdma/vm.sh
. "$HERE/vm.sh"

BUILD=${BUILD:-build}
NET=ib
NVMS=2
RPV=2
CASES=all
LOGS=""
CHECK=0
CCL_TMO=${RDMA_CCL_TIMEOUT:-20}
NET_VAR=${RDMA_NET_VAR:-CCL_NET}
MEM=${RDMA_MEM:-1024}
EXTRA_ENV=${RDMA_CCL_ENV:-}

usage() {
    sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 2
}
while [[ $# -gt 0 ]]; do
    case $1 in
    --net) NET=${2:?}; shift ;;
    --net=*) NET=${1#*=} ;;
    --vms) NVMS=${2:?}; shift ;;
    --ranks) RPV=${2:?}; shift ;;
    --cases) CASES=${2:?}; shift ;;
    --logs) LOGS=${2:?}; shift ;;
    --check) CHECK=1 ;;
    -h | --help) usage ;;
    *) echo "run.sh: unknown argument '$1' (run.sh --help)" >&2; exit 2 ;;
    esac
    shift
done
if ! [[ "$NVMS" =~ ^[0-9]+$ ]] || ((NVMS < 2 || NVMS > 16)); then
    echo "run.sh: --vms 2..16" >&2
    exit 2
fi
if ! [[ "$RPV" =~ ^[0-9]+$ ]] || ((RPV < 1 || RPV > 8)); then
    echo "run.sh: --ranks 1..8" >&2
    exit 2
fi
# One vCPU: with two, every wakeup of a thread on the other (halted) vCPU
# waits for the host to schedule that vCPU's qemu thread, and a 2+2-rank 8 B
# allreduce took 15 ms instead of 3-4 ms (README.md).
CPUS=${RDMA_CPUS:-1}
NRANKS=$((NVMS * RPV))
PERF_SRC="$BUILD/bin/ccl-perf"

# ---- what is missing ----------------------------------------------------------------
missing() {
    vm_missing
    if [[ ! -x "$PERF_SRC" ]]; then
        echo "$PERF_SRC not built (make)"
    # Not `| grep -q`: under pipefail, ccl-perf's SIGPIPE when grep stops early fails the test.
    elif [[ "$NET" == ib ]] && ! grep -q '^ *CCL_IB_' <<<"$("$PERF_SRC" --help-env 2>/dev/null)"; then
        echo "this ccl has no ib transport ($PERF_SRC --help-env lists no CCL_IB_* variable)"
    fi
}

if ((CHECK)); then
    m=$(missing)
    if [[ -z "$m" ]]; then
        echo "run.sh: nothing missing (kernel $(vm_kernel), $PERF_SRC, --net $NET)"
        exit 0
    fi
    echo "run.sh: missing:"
    printf '  %s\n' "${m//$'\n'/$'\n'  }"
    echo "run.sh: tests/rdma/deps.sh installs the Debian packages (as root)"
    exit 1
fi

skip() {
    if [[ "${MAY_SKIP:-}" == 1 ]]; then
        echo "$*"
        exit 77
    fi
    echo "SKIPPED: $*"
    exit 0
}
m=$(missing)
[[ -z "$m" ]] || skip "$(echo "$m" | paste -sd';' | sed 's/;/; /g')"

# ---- the run's folder, the VMs, cleanup ------------------------------------------
# Under /var/tmp, not /tmp: the guests see the host's / (read-only) but a
# /tmp of their own, and they run the copy of ccl-perf made here, so that a
# rebuild in the middle of a run cannot change or remove it.
WORK=$(mktemp -d "${RDMA_WORKDIR:-/var/tmp}/ccl-rdma.XXXXXX") || exit 2
BIN="$WORK/ccl-perf"
cleanup() {
    local i t
    # The agents power their VMs off once told to stop; whatever is left
    # after a few seconds (or after a failed boot) is killed.
    for ((i = 1; i <= NVMS; i++)); do
        [[ -d "$WORK/vm$i/share" ]] && : >"$WORK/vm$i/share/stop"
    done
    for ((t = 0; t < 50; t++)); do
        for ((i = 1; i <= NVMS; i++)); do
            kill -0 "$(cat "$WORK/vm$i/wrapper.pid" 2>/dev/null)" 2>/dev/null && break
        done
        ((i > NVMS)) && break
        sleep 0.2
    done
    disown -a 2>/dev/null # no "Killed" line per VM
    for ((i = 1; i <= NVMS; i++)); do
        vm_stop "$WORK/vm$i"
    done
    if [[ -n "$LOGS" ]]; then
        mkdir -p "$LOGS" && for ((i = 1; i <= NVMS; i++)); do
            mkdir -p "$LOGS/vm$i"
            cp -r "$WORK/vm$i/share/jobs" "$WORK/vm$i/console.log" "$LOGS/vm$i/" 2>/dev/null
        done
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cp "$PERF_SRC" "$BIN" || exit 2
# The agent too: the guests mount fresh /tmp and /run over the host's, so a
# clone under /tmp (as CI makes) is not visible in them; WORK is.
cp "$HERE/agent.sh" "$WORK/agent.sh" || exit 2

passed=0
failed=0
skipped=0
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="${2:-$(now)}" 'BEGIN { printf "%.1f", b - a }'; }

# report RESULT NAME START [DETAIL] [WHY...]: the case's line; a FAIL's
# reasons follow, indented.
report() {
    local res=$1 name=$2 start=$3 detail=${4:-}
    shift $(($# < 4 ? $# : 4))
    case $res in
    PASS) passed=$((passed + 1)) ;;
    FAIL) failed=$((failed + 1)) ;;
    SKIPPED) skipped=$((skipped + 1)) ;;
    esac
    if [[ $res == SKIPPED ]]; then
        echo "SKIPPED $name: $detail"
    else
        echo "$res $name (${start:+$(since "$start")s})${detail:+: $detail}"
    fi
    local w
    for w in "$@"; do
        printf '%s\n' "$w" | sed 's/^/    /' | cut -c1-400
    done
}

vmdir() { echo "$WORK/vm$1"; }
jobdir() { echo "$WORK/vm$1/share/jobs"; }

# post VM NAME SCRIPT: hands the agent in VM a job (written, then renamed in).
post() {
    local d
    d=$(jobdir "$1")
    rm -f "$d/$2".{log,rc,run}
    printf '%s\n' "$3" >"$d/$2.tmp" && mv "$d/$2.tmp" "$d/$2.job"
}

# wait_jobs SECONDS VM:NAME...: until each job has its .rc, or SECONDS pass;
# leaves in DONE_AT[VM:NAME] the time the host saw it end. 1 on timeout.
declare -A DONE_AT
wait_jobs() {
    local limit=$1 start j left
    shift
    start=$(now)
    while :; do
        left=0
        for j in "$@"; do
            [[ -n "${DONE_AT[$j]:-}" ]] && continue
            if [[ -e "$(jobdir "${j%%:*}")/${j#*:}.rc" ]]; then
                DONE_AT[$j]=$(now)
            else
                left=1
            fi
        done
        ((left)) || return 0
        awk -v a="$(since "$start")" -v b="$limit" 'BEGIN { exit !(a > b) }' && return 1
        sleep 0.2
    done
}
job_rc() { cat "$(jobdir "${1%%:*}")/${1#*:}.rc" 2>/dev/null || echo none; }
job_log() { echo "$(jobdir "${1%%:*}")/${1#*:}.log"; }

vm_of_rank() { echo $(($1 / RPV + 1)); }
PORT=$((29500 + RANDOM % 400))

# launch CASE SECONDS "ENV=V ..." ARGS...: ccl-perf on every rank, rank r as
# job CASE.rR on its VM, under timeout SECONDS; the jobs' ids go to JOBS.
JOBS=()
launch() {
    local case=$1 limit=$2 env=$3 r vm
    shift 3
    PORT=$((PORT + 1))
    JOBS=()
    for ((r = 0; r < NRANKS; r++)); do
        vm=$(vm_of_rank "$r")
        DONE_AT[$vm:$case.r$r]=""
        # timeout -k: a rank that ignores TERM (stuck in a kernel call) still ends.
        post "$vm" "$case.r$r" "export CCL_COMM_ID=10.77.0.1:$PORT RANK=$r WORLD_SIZE=$NRANKS \
LOCAL_RANK=$((r % RPV)) LOCAL_WORLD_SIZE=$RPV $NET_VAR=$NET CCL_DEBUG=INFO CCL_SOCKET_IFNAME==eth0 $EXTRA_ENV $env
echo \"# \$(hostname) rank $r: $env\"
exec timeout -k 5 $limit $BIN $*"
        JOBS+=("$vm:$case.r$r")
    done
}

# tail_logs JOB...: the last lines of each job's log, for a FAIL.
tail_logs() {
    local j
    for j in "$@"; do
        echo "-- ${j#*:} on vm${j%%:*} (exit $(job_rc "$j")):"
        grep -v ' INFO ' "$(job_log "$j")" 2>/dev/null | tail -n 6
    done
}

# The first error a rank printed: ccl-perf's "failed" line, else a ccl WARN.
rank_error() {
    local log
    log=$(job_log "$1")
    grep -m1 'ccl-perf: .*failed' "$log" 2>/dev/null || grep -m1 'ccl WARN' "$log" 2>/dev/null
}

# ---- boot -----------------------------------------------------------------------
BOOT_LIMIT=${RDMA_BOOT_TIMEOUT:-300}
# Every VM's qemu ends on its own by then, even if this script is SIGKILLed.
VM_LIMIT=${RDMA_VM_TIMEOUT:-1800}
boot() {
    local start i lan why=()
    start=$(now)
    vm_initrd "$WORK/initrd.gz" || {
        report FAIL boot "$start" "building the initramfs failed"
        return 1
    }
    lan=$(vm_lan)
    for ((i = 1; i <= NVMS; i++)); do
        mkdir -p "$(jobdir "$i")"
        echo "exec bash $WORK/agent.sh" >"$(vmdir "$i")/share/cmd"
        vm_start "$i" "$lan" "$(vmdir "$i")" "$WORK/initrd.gz" "$VM_LIMIT" "$MEM" "$CPUS" || {
            report FAIL boot "$start" "qemu did not start"
            return 1
        }
    done
    for ((i = 1; i <= NVMS; i++)); do
        while [[ ! -s "$(vmdir "$i")/share/ready" ]]; do
            if [[ -e "$(vmdir "$i")/share/exit" ]] || ! kill -0 "$(cat "$(vmdir "$i")/wrapper.pid")" 2>/dev/null; then
                why+=("vm$i stopped before its agent ran; console:" "$(tail -n 15 "$(vmdir "$i")/console.log")"
                    "$(cat "$(vmdir "$i")/share/out.log" "$(vmdir "$i")/qemu.log" 2>/dev/null | tail -n 5)")
                break
            fi
            if awk -v a="$(since "$start")" -v b="$BOOT_LIMIT" 'BEGIN { exit !(a > b) }'; then
                why+=("vm$i not up after ${BOOT_LIMIT}s; console:" "$(tail -n 15 "$(vmdir "$i")/console.log")")
                break
            fi
            sleep 0.3
        done
    done
    if ((${#why[@]})); then
        report FAIL boot "$start" "" "${why[@]}"
        return 1
    fi
    echo "# booted $NVMS VMs ($CPUS vCPUs, $MEM MiB each, TCG) in $(since "$start")s; $NRANKS ranks, --net $NET"
}

# ---- cases ----------------------------------------------------------------------
case_sanity() {
    local start i j why=() jobs=()
    start=$(now)
    for ((i = 1; i <= NVMS; i++)); do
        post "$i" sanity "ibv_devinfo -d rxe0; ibv_devinfo -d rxe0 -v | grep -i 'GID\\['"
        jobs+=("$i:sanity")
    done
    wait_jobs 60 "${jobs[@]}"
    for j in "${jobs[@]}"; do
        if ! grep -q 'state:.*PORT_ACTIVE' "$(job_log "$j")" 2>/dev/null; then
            why+=("vm${j%%:*}: rxe0 is not PORT_ACTIVE (ibv_devinfo exit $(job_rc "$j")):"
                "$(tail -n 8 "$(job_log "$j")" 2>/dev/null)" "rdma link add: $(cat "$(vmdir "${j%%:*}")/share/rxe.log")")
        fi
    done
    if ((${#why[@]})); then
        report FAIL sanity/rxe0 "$start" "" "${why[@]}"
        return 1
    fi
    report PASS sanity/rxe0 "$start" "rxe0 PORT_ACTIVE in vm1..vm$NVMS"

    # Verbs between two VMs: RC QPs over RoCE v2 (GID index 1: ::ffff:10.77.0.I).
    start=$(now)
    post 1 pingpong "exec timeout -k 2 60 ibv_rc_pingpong -d rxe0 -g 1 -n 20 -s 4096"
    post "$NVMS" pingpong "sleep 2; exec timeout -k 2 58 ibv_rc_pingpong -d rxe0 -g 1 -n 20 -s 4096 10.77.0.1"
    wait_jobs 75 1:pingpong "$NVMS:pingpong"
    if [[ $(job_rc 1:pingpong) == 0 && $(job_rc "$NVMS:pingpong") == 0 ]]; then
        report PASS sanity/rc_pingpong "$start" "$(grep -m1 'iters in' "$(job_log "$NVMS:pingpong")")"
    else
        report FAIL sanity/rc_pingpong "$start" "ibv_rc_pingpong vm$NVMS -> vm1 over RoCE v2 failed" \
            "$(tail_logs 1:pingpong "$NVMS:pingpong")"
    fi
    return 0
}

# Three types, three ops, both placements; the default run (every
# collective, the tuner's picks) at 8 B, 512 B and 32 KiB, a forced algorithm
# at 8 B and 32 KiB, on the collectives it applies to (the others fall back
# to the tuner's choice with a WARN, and would repeat the default run); bulk:
# 1 MiB, float32 and bfloat16 sums, where messages go zero-copy from the
# user's buffer (CCL_NET_ZERO_COPY_THRESHOLD, 256 KiB). Under TCG every call
# takes milliseconds (tens with ib), so each row counts against the few
# minutes the whole run may take.
COLL_ARGS=${RDMA_COLL_ARGS:--d int32,float32,bfloat16 -o sum,max,avg -b 8 -e 32K -f 64 -n 1 -w 0 -c 1}
ALGO_ARGS=${RDMA_ALGO_ARGS:--d int32,float32,bfloat16 -o sum,max,avg -b 8 -e 32K -f 4096 -n 1 -w 0 -c 1}
BULK_ARGS=${RDMA_BULK_ARGS:--d float32 -o sum -b 1M -e 1M -n 1 -w 0 -c 1}
coll_list() {
    case $1 in
    default) echo all ;;
    tree) echo allreduce ;;
    bulk) echo allreduce,allgather,reduce_scatter,broadcast ;;
    *) echo allreduce,allgather,reduce_scatter,broadcast,reduce ;;
    esac
}
case_coll() {
    local algo=$1 start env="CCL_VERIFY=1 CCL_TIMEOUT=60" j why=() log0 ncoll nok
    start=$(now)
    local args=$COLL_ARGS
    case $algo in
    default) ;;
    bulk) args=$BULK_ARGS ;;
    *)
        args=$ALGO_ARGS
        env+=" CCL_ALGO=$algo"
        ;;
    esac
    # shellcheck disable=SC2086 # one word per argument
    launch "coll-$algo" 400 "$env" -C "$(coll_list "$algo")" $args
    if ! wait_jobs 420 "${JOBS[@]}"; then
        why+=("ranks still running after 420 s")
    fi
    for j in "${JOBS[@]}"; do
        local rc log
        rc=$(job_rc "$j")
        log=$(job_log "$j")
        case $rc in
        0) ;;
        124 | 137) why+=("${j#*:}: hung (killed by timeout)") ;;
        *) why+=("${j#*:}: exit $rc: $(rank_error "$j")") ;;
        esac
        grep -q "net: plugin $NET\b" "$log" 2>/dev/null ||
            why+=("${j#*:}: no 'net: plugin $NET' in its log ($(grep -m1 -o 'net: plugin [^,]*' "$log" 2>/dev/null || echo 'no net: plugin line'))")
    done
    log0=$(job_log "${JOBS[0]}")
    ncoll=$(grep -c '^# ccl-perf: ' "$log0")
    nok=$(grep -c '^# Out of bounds values : 0 OK' "$log0")
    ((ncoll > 0 && nok == ncoll)) || why+=("rank 0: $nok of $ncoll collectives ended with 'Out of bounds values : 0 OK'")
    grep -q '^# Out of bounds values : [1-9]' "$log0" && why+=("$(grep '^# Out of bounds values : [1-9]' "$log0" | head -3)")
    # The tuner's INFO table of allreduce must pick the forced algorithm at every size.
    if [[ $algo != default && $algo != bulk ]]; then
        local picks
        picks=$(awk '/ccl INFO allreduce +bytes/ { t = 1; next }
                     t && / ccl INFO +[0-9]+[KMG]? / { print $NF; next } { t = 0 }' "$log0" | sort -u | paste -sd,)
        [[ $picks == "$algo" ]] || why+=("rank 0: the tuner picked '${picks:-nothing}' for allreduce, not $algo")
    fi
    if ((${#why[@]})); then
        report FAIL "coll/$algo" "$start" "" "${why[@]}" "$(tail_logs "${JOBS[@]}")"
    else
        local rows
        rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$log0")
        report PASS "coll/$algo" "$start" "$ncoll collectives, $rows rows, #wrong 0, CCL_VERIFY=1, net: plugin $NET on all $NRANKS ranks"
    fi
}

# check_failed START BOUND JOB PATTERN WHAT: JOB must have failed on its own
# (not by the timeout) within BOUND s of START, its error matching PATTERN
# (extended regex); else a reason goes to WHY.
check_failed() {
    local t0=$1 bound=$2 j=$3 re=$4 what=$5 rc err took
    rc=$(job_rc "$j")
    err=$(rank_error "$j")
    took=$(since "$t0" "${DONE_AT[$j]:-$(now)}")
    [[ $took == -* ]] && took=0.0 # seen in the same poll as the fault
    case $rc in
    0) WHY+=("${j#*:}: exited 0, no error") ;;
    124 | 137) WHY+=("${j#*:}: hung: killed by timeout") ;;
    none) WHY+=("${j#*:}: still running") ;;
    *)
        if [[ -z "$err" ]]; then
            WHY+=("${j#*:}: exit $rc without an error message")
        elif ! grep -qE "$re" <<<"$err"; then
            WHY+=("${j#*:}: its error does not name $what (/$re/): $err")
        elif awk -v a="$took" -v b="$bound" 'BEGIN { exit !(a > b) }'; then
            WHY+=("${j#*:}: failed ${took}s after the fault (bound ${bound}s)")
        else
            NOTES+=("${j#*:} (vm${j%%:*}) failed after ${took}s: $(cut -c1-300 <<<"$err")")
        fi
        ;;
    esac
}

# wait_line JOB REGEX SECONDS: until JOB's log has a line matching REGEX.
wait_line() {
    local start
    start=$(now)
    until grep -qE "$2" "$(job_log "$1")" 2>/dev/null; do
        [[ -e "$(jobdir "${1%%:*}")/${1#*:}.rc" ]] && return 1
        awk -v a="$(since "$start")" -v b="$3" 'BEGIN { exit !(a > b) }' && return 1
        sleep 0.2
    done
}

BOUND=$((CCL_TMO + 15))
ROW='^ +[0-9]+ +[0-9]+ +[a-z0-9]+ '

case_kill() {
    local start last=$((NRANKS - 1)) lastvm t0 r
    WHY=() NOTES=()
    start=$(now)
    lastvm=$(vm_of_rank "$last")
    # Call 6 is an allreduce of the timed loop (the first calls are ccl-perf's
    # barrier, its probe and warmups); slice=1: the kill lands inside it.
    launch kill 300 "CCL_TIMEOUT=$CCL_TMO CCL_FAULT=kill:rank=$last:op=6:slice=1" \
        -C allreduce -b 256K -e 256K -n 20 -w 1 -c 0
    wait_jobs $((BOUND + 120)) "${JOBS[@]}"
    t0=${DONE_AT[$lastvm:kill.r$last]:-}
    if [[ -z "$t0" || $(job_rc "$lastvm:kill.r$last") != 137 ]]; then
        report FAIL kill "$start" "rank $last did not die by SIGKILL (exit $(job_rc "$lastvm:kill.r$last"))" "$(tail_logs "${JOBS[@]}")"
        return
    fi
    for ((r = 0; r < last; r++)); do
        check_failed "$t0" "$BOUND" "${JOBS[r]}" "rank $last\b.*vm$lastvm\b|vm$lastvm\b.*rank $last\b" "rank $last and vm$lastvm"
    done
    if ((${#WHY[@]})); then
        report FAIL kill "$start" "" "${WHY[@]}" "$(tail_logs "${JOBS[@]}")"
    else
        report PASS kill "$start" "rank $last SIGKILLed in an allreduce; ranks 0-$((last - 1)) failed naming it" "${NOTES[@]}"
    fi
}

case_gid() {
    local start r
    WHY=() NOTES=()
    start=$(now)
    if [[ $NET != ib ]]; then
        report SKIPPED gid "" "CCL_IB_GID_INDEX applies to --net ib only"
        return
    fi
    launch gid 200 "CCL_TIMEOUT=$CCL_TMO CCL_IB_GID_INDEX=99" -C allreduce -b 8 -e 8 -n 1 -w 1 -c 1
    wait_jobs $((BOUND + 120)) "${JOBS[@]}"
    for ((r = 0; r < NRANKS; r++)); do
        # Timed from the launch: the ranks must give up within the bound, not wait forever.
        check_failed "$start" $((BOUND + 60)) "${JOBS[r]}" "[Gg][Ii][Dd]" "the GID"
    done
    if ((${#WHY[@]})); then
        report FAIL gid "$start" "" "${WHY[@]}" "$(tail_logs "${JOBS[@]}")"
    else
        report PASS gid "$start" "CCL_IB_GID_INDEX=99: all $NRANKS ranks failed naming the GID" "${NOTES[@]}"
    fi
}

case_cut() {
    local start t0 r vm mon out re
    WHY=() NOTES=()
    start=$(now)
    mon="$(vmdir "$NVMS")/monitor.sock"
    # Many short cycles (-N): rows keep coming, so the cut lands in mid-run.
    # Blocking calls (-z 1): the error each rank reports is the failing call's
    # own. With calls queued on a stream (-z 0) the ones queued behind the failed
    # call fail too, and ccl_stream_synchronize's message names only the last
    # ("an earlier collective on this communicator failed"), not the cause.
    launch cut 300 "CCL_TIMEOUT=$CCL_TMO" -C allreduce -b 64K -e 64K -n 5 -w 1 -c 0 -z 1 -N 100000
    if ! wait_line "${JOBS[0]}" "$ROW" 180; then
        report FAIL cut "$start" "the ranks did not get going" "$(tail_logs "${JOBS[@]}")"
        wait_jobs $((BOUND + 120)) "${JOBS[@]}"
        return
    fi
    t0=$(now)
    if ! out=$(vm_monitor "$mon" "set_link lan off" 2>&1); then
        report FAIL cut "$start" "qemu monitor: set_link lan off failed: $out"
        wait_jobs 400 "${JOBS[@]}"
        return
    fi
    wait_jobs $((BOUND + 60)) "${JOBS[@]}"
    vm_monitor "$mon" "set_link lan on" >/dev/null 2>&1
    for ((r = 0; r < NRANKS; r++)); do
        vm=$(vm_of_rank "$r")
        if ((vm == NVMS)); then
            re="vm([1-9]|1[0-6])\b|10\.77\.0\.[0-9]+" # a peer on another VM
            ((NVMS < 10)) && re="vm[1-$((NVMS - 1))]\b|10\.77\.0\.[1-$((NVMS - 1))]\b"
        else
            re="vm$NVMS\b|10\.77\.0\.$NVMS\b"
        fi
        check_failed "$t0" "$BOUND" "${JOBS[r]}" "$re" "a peer across the cut"
    done
    if ((${#WHY[@]})); then
        report FAIL cut "$start" "" "${WHY[@]}" "$(tail_logs "${JOBS[@]}")"
    else
        report PASS cut "$start" "vm$NVMS's link cut in mid-run; all $NRANKS ranks failed naming a peer across it" "${NOTES[@]}"
    fi
}

# rxe's counters of retransmissions, sequence errors and RNR NAKs, nonzero
# ones, per VM: where ib calls were slow, whether the wire lost packets.
rxe_counters() {
    local i j jobs=()
    for ((i = 1; i <= NVMS; i++)); do
        # shellcheck disable=SC2016 # expanded in the VM
        post "$i" counters 'cd /sys/class/infiniband/rxe0/ports/1/hw_counters 2>/dev/null &&
for f in *; do v=$(cat "$f"); [ "$v" != 0 ] && printf "%s=%s " "$f" "$v"; done; echo'
        jobs+=("$i:counters")
    done
    wait_jobs 30 "${jobs[@]}"
    for j in "${jobs[@]}"; do
        echo "# vm${j%%:*} rxe0 counters: $(head -c 600 "$(job_log "$j")" 2>/dev/null)"
    done
}

# ---- main -----------------------------------------------------------------------
case_list=()
for c in ${CASES//,/ }; do
    case $c in
    all) case_list+=(sanity coll/default coll/ring coll/tree coll/hier coll/bulk kill gid cut) ;;
    coll) case_list+=(coll/default coll/ring coll/tree coll/hier coll/bulk) ;;
    sanity | kill | gid | cut | coll/*) case_list+=("$c") ;;
    *) echo "run.sh: unknown case '$c' (sanity coll coll/ALGO kill gid cut)" >&2; exit 2 ;;
    esac
done
# sanity gates the rest: without rxe0 nothing else means anything.
[[ " ${case_list[*]} " == *" sanity "* ]] || case_list=(sanity "${case_list[@]}")

suite_start=$(now)
echo "# tests/rdma/run.sh --net $NET --vms $NVMS --ranks $RPV: $NRANKS ranks, work in $WORK"
if boot; then
    for c in "${case_list[@]}"; do
        case $c in
        sanity)
            if ! case_sanity; then
                echo "# rxe0 is not active: the other cases are skipped"
                skipped=$((skipped + ${#case_list[@]} - 1))
                break
            fi
            ;;
        coll/*) case_coll "${c#coll/}" ;;
        kill) case_kill ;;
        gid) case_gid ;;
        cut) case_cut ;;
        esac
    done
    [[ $NET == ib ]] && rxe_counters
fi
echo "# total $(since "$suite_start")s"
if ((skipped)); then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
((failed == 0))
