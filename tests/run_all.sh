#!/usr/bin/env bash
# run_all.sh - runs the whole ccl test suite; `make test` calls it as
#   BUILD=<dir> ASAN_BUILD=<dir or empty> HAVE_MPICC=<1 or empty> HAVE_FUZZ=<1 or empty> tests/run_all.sh
#
# Runs every binary in $BUILD/tests/{unit,sim,mp}, the MPI cross-checks
# under mpirun with 1 to 4 ranks (or one explicit SKIPPED line), a
# ccl-perf smoke check when $BUILD/bin/ccl-perf exists, each libFuzzer
# target over its seed corpus for a few seconds (with clang; otherwise one
# SKIPPED line), the short
# multi-node run in network namespaces (tests/cluster/run_short.sh; as root
# only, otherwise one SKIPPED line), in a CUDA build the GPU checks
# (tests/gpu/: the kernel list always, the rest where a GPU is), the GPU
# checks against the mock GPU (tests/mock_cuda) wherever the CUDA headers
# are, and
# ccl-info on this machine, with
# --explain, and on the DGX-2 export when $BUILD/bin/ccl-info exists. Each test runs under
# its own wall-clock timeout and prints PASS/FAIL with its time; a failure
# also prints the tail of its log. Full logs go to $BUILD/test-logs/. The
# last line is the only summary: "N passed, N failed[, N skipped]"; the exit
# status is non-zero when anything failed.
#
# Tests run one at a time: the mp tests fork up to 8 ranks, and running them
# side by side on a 2-core machine would only make timings meaningless.
#
# Environment:
#   TEST_TIMEOUT_SCALE   multiply every timeout (slow or sanitizer builds)
#   TEST_FILTER          only run tests whose name contains this string
set -u

BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-}
HAVE_MPICC=${HAVE_MPICC:-}
HAVE_FUZZ=${HAVE_FUZZ:-}
SCALE=${TEST_TIMEOUT_SCALE:-1}
FILTER=${TEST_FILTER:-}
LOGDIR="$BUILD/test-logs"
TAIL_LINES=40

cd "$(dirname "$0")/.." || exit 2
mkdir -p "$LOGDIR" || exit 2

passed=0
failed=0
skipped=0
failed_names=()
suite_start=$(date +%s.%N)

# Seconds for each kind of test (before TEST_TIMEOUT_SCALE).
timeout_for() {
    case "$1" in
    unit) echo 300 ;;
    sim) echo 600 ;;
    mp) echo 600 ;;
    mpi) echo 400 ;;
    perf) echo 300 ;;
    cluster) echo 300 ;;
    rdma) echo 900 ;;
    fuzz) echo 60 ;;
    gpu) echo 900 ;;
    gpu-mock) echo 600 ;;
    *) echo 300 ;;
    esac
}

elapsed_since() {
    awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'
}

# run_test <name> <kind> <command...>: logs to $LOGDIR/<name>.log.
# An optional post-check (a shell function name in $POST_CHECK) can fail a
# test whose command exited 0.
run_test() {
    local name=$1 kind=$2
    shift 2
    if [[ -n "$FILTER" && "$name" != *"$FILTER"* ]]; then
        return
    fi
    local log="$LOGDIR/${name//\//_}.log"
    local limit
    limit=$(awk -v t="$(timeout_for "$kind")" -v s="$SCALE" 'BEGIN { printf "%d", t * s }')
    local start rc why=""
    start=$(date +%s.%N)
    {
        echo "# $*"
        echo "# timeout ${limit}s, started $(date '+%F %T')"
    } >"$log"
    timeout -k 10 "$limit" "$@" >>"$log" 2>&1 </dev/null
    rc=$?
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then
        why=" (timed out after ${limit}s)"
    elif [[ $rc -ne 0 ]]; then
        why=" (exit status $rc)"
    elif [[ -n "${POST_CHECK:-}" ]]; then
        local check_out check_rc
        check_out=$("$POST_CHECK" "$log" 2>&1)
        check_rc=$?
        echo "$check_out" >>"$log"
        if [[ $check_rc -ne 0 ]]; then
            rc=1
            why=" (output check failed)"
        fi
    fi
    local t
    t=$(elapsed_since "$start")
    # Tests run with MAY_SKIP=1 exit 77 when they cannot run here, with the
    # reason on their last line.
    if [[ $rc -eq 77 && -n "${MAY_SKIP:-}" ]]; then
        echo "SKIPPED $name: $(tail -n 1 "$log")"
        skipped=$((skipped + 1))
        return
    fi
    if [[ $rc -eq 0 ]]; then
        echo "PASS $name (${t}s)"
        passed=$((passed + 1))
    else
        echo "FAIL $name (${t}s)$why"
        echo "---- last $TAIL_LINES lines of $log ----"
        tail -n "$TAIL_LINES" "$log" | sed 's/^/    /'
        echo "----"
        failed=$((failed + 1))
        failed_names+=("$name")
    fi
}

run_dir() {
    local kind=$1 dir="$BUILD/tests/$1" bin
    [[ -d "$dir" ]] || return
    for bin in "$dir"/*; do
        [[ -f "$bin" && -x "$bin" ]] || continue
        run_test "$kind/$(basename "$bin")" "$kind" "$bin"
    done
}

# ---- unit, sim, mp ----------------------------------------------------------
run_dir unit
run_dir sim
# The engine with two rounds in flight (CCL_ENGINE_WINDOW's default on
# comms that span hosts) over every schedule, up to 64 ranks.
run_test "sim/test_sim_schedules[--window=2]" sim "$BUILD/tests/sim/test_sim_schedules" --window=2 --max-ranks=64
run_dir mp

# The default tuning sends small messages one way and large ones another, so
# the collective sweeps run again with each algorithm forced, and once with
# the smallest FIFO ccl accepts and single copy off, so that every message
# crosses many slots and wraps the FIFO counters, and once on ccl_mem_alloc
# buffers with single copy and non-temporal stores from 1 KiB, so that the
# reference path sees every dtype, op, placement and algorithm. (CCL_*
# variables are rows of src/base/params.def; CCL_TEST_* belong to the tests.)
# test_colls (every other collective) runs its variants on two rank counts
# only, to keep the suite's time in bounds; its default run has them all.
# (CCL_TEST_* variables belong to the tests: see tests/common/test_coll.h.)
# The last variant checks that CCL_CHECK_ARGS=1 finds no mismatch in calls
# that do match (NULL buffers on non-roots, in place on some ranks only,
# groups of collectives and sends, one thread driving several ranks).
variants=(
    "CCL_ALGO=ring"
    "CCL_ALGO=direct"
    "CCL_BUFFSIZE=8K CCL_NSLOTS=2 CCL_SINGLE_COPY_THRESHOLD=0"
    "CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K CCL_STREAM_THRESHOLD=1K"
    "CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K CCL_ALGO=direct"
)
# run_variant <variant> <test> [args...]
run_variant() {
    local v=$1 t=$2 bin="$BUILD/tests/mp/$2"
    shift 2
    [[ -x "$bin" ]] || return
    # shellcheck disable=SC2086 # $v is a list of NAME=value words
    run_test "mp/${t}[${v// /,}]" mp env $v "$bin" "$@"
}
for v in "${variants[@]}"; do
    for t in test_allreduce test_allgather test_repeat test_large; do
        run_variant "$v" "$t"
    done
    # On ccl_mem_alloc buffers (fresh, first-touched memory every case) only
    # the counts that reach the 1 KiB single-copy threshold, on 3 ranks.
    if [[ "$v" == *CCL_TEST_CCL_MEM=1* ]]; then
        run_variant "CCL_TEST_COUNTS=1021 $v" test_colls 3
    else
        run_variant "$v" test_colls 3 4
    fi
done
# Shared-memory slot checksums (CCL_CHECKSUM=2), the one-shot board off so
# that small calls go through the checksummed FIFOs too: every collective,
# type and op, and no false alarm.
run_variant "CCL_CHECKSUM=2 CCL_ONESHOT_MAX=0" test_colls 3 4
# The fused 2-rank allreduce (ALGO_PAIR, the tuner's pick from the
# single-copy size on ccl_mem_alloc buffers; the variants above run it on
# 2 ranks) where only even ranks' buffers are registered: both ranks
# decline and run what a group would (direct, from 16 MiB the ring).
run_variant "CCL_TEST_CCL_MEM=2 CCL_SINGLE_COPY_THRESHOLD=1K" test_allreduce 2 3
# Single copy (the pair included) between ranks that are threads of one
# process (ccl_comm_init_all), blocking and driven by one thread on streams.
run_variant "CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K" test_init_all
# Whole-step references (a send buffer read in place by one reference per
# step, a broadcast passing the root's on) need steps longer than a slot:
# ccl_mem_alloc buffers, single copy from 1 KiB and 4 KiB slots (so 2053
# elements of every dtype wider than a byte span several; 1021 of 8 bytes).
run_variant "CCL_TEST_COUNTS=1021,2053 CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K CCL_BUFFSIZE=8K CCL_NSLOTS=2" test_colls 3 4
# The same with the poster of each whole-step reference copying slices of
# it into its reader's buffer (CCL_COPY_HELP=2: also with more ranks than
# cores, where it is off by default), from 2 ranks (scatter, gather and
# broadcast have an idle side there).
run_variant "CCL_TEST_COUNTS=1021,2053 CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K CCL_BUFFSIZE=8K CCL_NSLOTS=2 CCL_COPY_HELP=2" test_colls 2 3 4
# A 2-rank broadcast's root out of place there copies into both ranks'
# buffers with its reader (the reference's twin); with streaming stores
# too (dev_copy_stream2, at every alignment the cases' misaligned buffers
# give).
run_variant "CCL_TEST_COUNTS=1021,2053 CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K CCL_BUFFSIZE=8K CCL_NSLOTS=2 CCL_COPY_HELP=2 CCL_STREAM_THRESHOLD=1K" test_colls 2
# Registered buffers on even ranks only: a reader whose buffer is not
# registered declines help, and the poster then makes its twin's copy
# alone.
run_variant "CCL_TEST_COUNTS=1021,2053 CCL_TEST_CCL_MEM=2 CCL_SINGLE_COPY_THRESHOLD=1K CCL_BUFFSIZE=8K CCL_NSLOTS=2 CCL_COPY_HELP=2" test_colls 2 3 4
# Allgather read from each block's owner (pairwise), which the tuner picks
# only from the single-copy size up: every count and placement through the
# FIFOs, and by reference.
# The single-copy variants above now get pairwise, so the ring by
# reference runs here; pairwise by reference with the poster
# copying too (CCL_COPY_HELP=2: every rank is reader and poster, and its
# own block's copy goes with its first reader's, the twin), also with
# registered buffers on even ranks only (readers that decline); grouped
# with every other collective and send/recv.
run_variant "CCL_ALGO=allgather:pairwise" test_allgather
run_variant "CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K CCL_COPY_HELP=2 CCL_ALGO=allgather:pairwise" test_allgather
run_variant "CCL_TEST_CCL_MEM=2 CCL_SINGLE_COPY_THRESHOLD=1K CCL_COPY_HELP=2 CCL_ALGO=allgather:pairwise" test_allgather
run_variant "CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K CCL_ALGO=allgather:ring" test_allgather
run_variant "CCL_ALGO=allgather:pairwise" test_groups
# Broadcast as a star (pairwise), which the tuner picks from the
# single-copy size where ranks outnumber cores: through the FIFOs, by
# reference with the root (nothing to receive) copying slices for its
# readers, by default on 3-4 ranks here, also as the twin of its own
# copy; with registered buffers on even ranks only (readers that decline);
# grouped with every other collective.
run_variant "CCL_TEST_COLLS=broadcast CCL_ALGO=broadcast:pairwise" test_colls 2 3 4
run_variant "CCL_TEST_COLLS=broadcast CCL_TEST_COUNTS=1021,2053 CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K CCL_BUFFSIZE=8K CCL_NSLOTS=2 CCL_ALGO=broadcast:pairwise" test_colls 3 4
run_variant "CCL_TEST_COLLS=broadcast CCL_TEST_COUNTS=1021,2053 CCL_TEST_CCL_MEM=2 CCL_SINGLE_COPY_THRESHOLD=1K CCL_BUFFSIZE=8K CCL_NSLOTS=2 CCL_ALGO=broadcast:pairwise" test_colls 3 4
run_variant "CCL_ALGO=broadcast:pairwise" test_groups
# ... and the chain by reference (forwarding ranks pass the root's buffer
# on), which the tuner no longer picks here from the single-copy size.
run_variant "CCL_TEST_COLLS=broadcast CCL_TEST_COUNTS=1021,2053,65537 CCL_TEST_CCL_MEM=1 CCL_SINGLE_COPY_THRESHOLD=1K CCL_BUFFSIZE=8K CCL_NSLOTS=2 CCL_ALGO=broadcast:chain" test_colls 3 4
# Algorithms that only allreduce has (rank counts around powers of two).
for v in "CCL_ALGO=tree" "CCL_ALGO=rd" "CCL_ALGO=oneshot"; do
    run_variant "$v" test_allreduce 3 4 5 8
done
for t in test_allreduce test_colls; do
    run_variant "CCL_CHECK_ARGS=1" "$t" 3 4
done
# CCL_VERIFY compares results bit for bit: no algorithm may give ranks
# different bits (a false alarm fails the run).
for v in "CCL_VERIFY=1" "CCL_VERIFY=1 CCL_ALGO=tree" "CCL_VERIFY=1 CCL_ALGO=rd"; do
    run_variant "$v" test_allreduce 3 5
done
run_variant "CCL_CHECK_ARGS=1" test_groups
# Every comm from the nonblocking init (ccl_comm_init_rank_config,
# blocking = 0; tests/common/test_launch.c polls it ready).
run_variant "CCL_TEST_NONBLOCKING_INIT=1" test_allreduce 3 4
run_variant "CCL_TEST_NONBLOCKING_INIT=1" test_colls 3
# Four rounds in flight on one host (CCL_ENGINE_WINDOW; the default there
# is one): the executor's side of the windowed engine, groups included.
run_variant "CCL_ENGINE_WINDOW=4" test_allreduce 3 4
run_variant "CCL_ENGINE_WINDOW=4" test_colls 3
run_variant "CCL_ENGINE_WINDOW=4" test_groups
# A host stream holding two calls at most: every enqueue past that waits
# for room (CCL_STREAM_DEPTH), and nothing may deadlock or reorder.
run_variant "CCL_STREAM_DEPTH=2" test_streams
# Net failures (a peer killed, one that aborts or destroys, a cut) with
# socket helper threads (by default the callers drive their messages,
# net_drive): every failure must reach every rank named either way.
run_variant "CCL_SOCKET_NTHREADS=1" test_net_fault

# ---- AddressSanitizer pass ------------------------------------------------------
# A plain `make test` also builds the library and a few multi-process tests
# with -fsanitize=address into $ASAN_BUILD: peer death (kill -9) and abort,
# init/destroy cycles (20 per case of test_cycles, 10 of test_lifecycle),
# every collective but allreduce/allgather on 3 ranks at two small counts
# and the big one, and again (allgather too, on 2 and 3 ranks) at a
# single-copy count on ccl_mem_alloc buffers. LeakSanitizer is on: a rank that leaks fails. Ranks run
# ~3x slower under ASan, so the timeouts (run_all's and the tests' own)
# scale by 3 on top of TEST_TIMEOUT_SCALE.
if [[ -n "$ASAN_BUILD" ]]; then
    asan_scale=$(awk -v s="$SCALE" 'BEGIN { print s * 3 }')
    # asan_run <name> <NAME=value words> <test> [args...]
    asan_run() {
        local name=$1 envs=$2 bin="$ASAN_BUILD/tests/mp/$3"
        shift 3
        # shellcheck disable=SC2086 # $envs is a list of NAME=value words
        SCALE=$asan_scale run_test "asan/$name" mp env TEST_TIMEOUT_SCALE="$asan_scale" $envs "$bin" "$@"
    }
    asan_run test_fault "" test_fault
    asan_run "test_cycles[20]" "CCL_TEST_CYCLES=20" test_cycles
    asan_run "test_lifecycle[10]" "CCL_TEST_CYCLES=10" test_lifecycle
    asan_run "test_colls[3,CCL_TEST_COUNTS=1,13]" "CCL_TEST_COUNTS=1,13" test_colls 3
    # Single copy through peers' mappings: ccl_mem_alloc buffers (huge
    # pages, mapped aligned by every peer), whole-step references, help
    # and twin copies, at a count over 1 MiB per rank.
    asan_run "test_colls[3,ccl_mem,CCL_TEST_COUNTS=262147]" "CCL_TEST_CCL_MEM=1 CCL_TEST_COUNTS=262147" test_colls 3
    asan_run "test_allgather[2,3,ccl_mem,CCL_TEST_COUNTS=262147]" "CCL_TEST_CCL_MEM=1 CCL_TEST_COUNTS=262147" \
        test_allgather 2 3
    # The fused 2-rank allreduce: each rank reduces into both ranks' buffers.
    asan_run "test_allreduce[2,ccl_mem,CCL_TEST_COUNTS=262147]" "CCL_TEST_CCL_MEM=1 CCL_TEST_COUNTS=262147" \
        test_allreduce 2
fi

# ---- MPI cross-checks ---------------------------------------------------------
mpi_bins=()
if [[ -d "$BUILD/tests/mpi" ]]; then
    for bin in "$BUILD"/tests/mpi/*; do
        [[ -f "$bin" && -x "$bin" ]] && mpi_bins+=("$bin")
    done
fi
if [[ -z "$HAVE_MPICC" ]]; then
    echo "SKIPPED: mpi (mpicc not found, MPI cross-checks not built)"
    skipped=$((skipped + 1))
elif ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIPPED: mpi (mpirun not found)"
    skipped=$((skipped + 1))
elif [[ ${#mpi_bins[@]} -eq 0 ]]; then
    # mpicc exists, so the build should have produced them.
    echo "FAIL mpi (0.0s) (no binaries in $BUILD/tests/mpi although HAVE_MPICC=1)"
    failed=$((failed + 1))
    failed_names+=("mpi")
else
    mpirun_args=()
    if mpirun --version 2>&1 | grep -q "Open MPI"; then
        # Ranks outnumber cores here; Open MPI refuses that without
        # --oversubscribe, and binding would pile ranks onto one core.
        mpirun_args+=(--oversubscribe --bind-to none)
        # Shared-memory transport: "vader" up to Open MPI 4, "sm" from 5.
        btls=$(ompi_info --parsable 2>/dev/null | sed -n 's/^mca:btl:\([a-z0-9]*\):version.*/\1/p' | sort -u)
        if grep -qx vader <<<"$btls"; then
            mpirun_args+=(--mca btl "self,vader")
        elif grep -qx sm <<<"$btls"; then
            mpirun_args+=(--mca btl "self,sm")
        fi
        # Open MPI 4.1's op/avx component saturates 8- and 16-bit integer
        # sums instead of wrapping (open-mpi/ompi#8045, closed wontfix), so
        # MPI itself gets uint8 sums wrong; the reference must be the plain
        # C reduction.
        if ompi_info --parsable 2>/dev/null | grep -q '^mca:op:avx:'; then
            mpirun_args+=(--mca op ^avx)
        fi
    fi
    # Open MPI itself leaks at MPI_Finalize (its MCA components, hwloc), so
    # in a sanitizer build LeakSanitizer would fail these runs for MPI's
    # sake; ccl's own leaks are caught by the mp tests, which run without MPI.
    asan_opts="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    for bin in "${mpi_bins[@]}"; do
        for np in 1 2 3 4; do
            run_test "mpi/$(basename "$bin")-np$np" mpi \
                env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
                ASAN_OPTIONS="$asan_opts" \
                mpirun "${mpirun_args[@]}" -np "$np" "$bin"
        done
    done
fi

# ---- ccl-perf smoke -------------------------------------------------------------
# Every data row must report 0 in each "#wrong" column (-c 1 turns checking
# on, so "N/A" is a failure too), and at least one row must exist. Host
# memory (-m host) even where a GPU would make device the default:
# tests/gpu/run.sh runs ccl-perf on device buffers.
check_perf_output() {
    # PERF_INPLACE_NA=1: collectives without an in-place form (alltoall,
    # scatter, sendrecv) may report N/A in the in-place #wrong column.
    awk -v na_ok="${PERF_INPLACE_NA:-0}" -f tests/common/check_perf.awk "$1"
}
if [[ -x "$BUILD/bin/ccl-perf" ]]; then
    for coll in allreduce allgather; do
        POST_CHECK=check_perf_output run_test "perf/ccl-perf-$coll" perf \
            "$BUILD/bin/ccl-perf" -m host --np 3 -b 8 -e 1M -f 8 -c 1 -C "$coll"
    done
    # Rooted one-shot calls do not wait for everyone (a broadcast's root
    # posts and leaves): 50 checked calls back to back per size and root
    # catch a rank that overwrites a board slot another still reads.
    PERF_INPLACE_NA=1 POST_CHECK=check_perf_output run_test "perf/ccl-perf-rooted-board" perf \
        "$BUILD/bin/ccl-perf" -m host --np 5 -b 8 -e 4K -f 8 -n 1 -w 0 -c 50 -r -1 -z 1 \
        -C broadcast,scatter,reduce,gather
    # -J FILE: the same rows as JSON (perf/ccl_perf_json.c).
    run_test "perf/ccl-perf-json" perf tests/common/check_perf_json.sh "$BUILD/bin/ccl-perf" -m host --np 3 \
        -b 8 -e 64K -f 8 -n 5 -w 1 -c 1 -C allreduce,alltoall
else
    echo "SKIPPED: perf ($BUILD/bin/ccl-perf not built)"
    skipped=$((skipped + 1))
fi

# ---- fuzz targets --------------------------------------------------------------
# Each wire parser's libFuzzer target (tests/fuzz/) over its seed corpus and
# what earlier runs found, then FUZZ_TEST_SECONDS (2) of new inputs: a
# smoke run that keeps the suite short; `make fuzz` fuzzes for real.
fuzz_bins=()
if [[ -d "$BUILD/fuzz/bin" ]]; then
    for bin in "$BUILD"/fuzz/bin/fuzz_*; do
        [[ -f "$bin" && -x "$bin" ]] && fuzz_bins+=("$bin")
    done
fi
if [[ -z "$HAVE_FUZZ" ]]; then
    echo "SKIPPED: fuzz (clang with libFuzzer not found; install clang to build the targets in tests/fuzz/)"
    skipped=$((skipped + 1))
elif [[ ${#fuzz_bins[@]} -eq 0 ]]; then
    echo "FAIL fuzz (0.0s) (no binaries in $BUILD/fuzz/bin although HAVE_FUZZ=1: run make fuzz-build)"
    failed=$((failed + 1))
    failed_names+=("fuzz")
else
    for bin in "${fuzz_bins[@]}"; do
        run_test "fuzz/$(basename "$bin")" fuzz tests/fuzz/run.sh "${FUZZ_TEST_SECONDS:-2}" "$bin"
    done
fi

# ---- net transport on one machine (fake nodes) ---------------------------------
# Ranks given different CCL_HOSTIDs (tests/net/fake_node.sh) connect over
# ccl's TCP net transport: every collective, dtype and op, and each
# algorithm forced (with CCL_VERIFY=1: every algorithm must leave
# bit-identical results on all ranks), on even (2+2), uneven (3+1) and interleaved (0,1,0,1)
# layouts, plus the MPI cross-check with its ranks on two fake nodes; all
# with net checksums on (CCL_CHECKSUM=1): no false alarm on any of them.
# tests/cluster/ runs the same across real network namespaces.
if [[ -n "${mpirun_args+x}" && -x "$BUILD/bin/ccl-perf" ]]; then
    net_port=$((20000 + RANDOM % 20000))
    net_perf=(-m host -b 8 -e 300K -f 37 -n 2 -w 1 -C all -d all -o all -c 1 -r -1)
    # map:algorithm:zero-copy threshold (1: every net send from the user
    # buffer; empty: 0, every send through the FIFO)
    for case in "0,0,1,1::" "0,0,0,1:ring:" "0,0,0,1:hier:" "0,0,0,1:tree:" "0,0,0,1:rd:" "0,1,0,1::" \
                "0,0,1,1::1" "0,1,0,1:hier:1"; do
        IFS=: read -r map algo zcopy <<<"$case"
        net_port=$((net_port + 1))
        PERF_INPLACE_NA=1 POST_CHECK=check_perf_output \
            run_test "net/ccl-perf-nodes[$map${algo:+,$algo}${zcopy:+,zero-copy}]" mp \
            env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            HOSTMAP="$map" CCL_ALGO="$algo" CCL_COMM_ID="127.0.0.1:$net_port" \
            CCL_NET_ZERO_COPY_THRESHOLD="${zcopy:-0}" CCL_VERIFY=1 CCL_CHECKSUM=1 \
            mpirun "${mpirun_args[@]}" -np 4 -x HOSTMAP -x CCL_ALGO -x CCL_COMM_ID -x CCL_NET_ZERO_COPY_THRESHOLD \
            -x CCL_VERIFY -x CCL_CHECKSUM \
            tests/net/fake_node.sh "$BUILD/bin/ccl-perf" "${net_perf[@]}"
    done
    # Socket helper threads (CCL_SOCKET_NTHREADS=2, one socket each), the
    # layout before inline I/O became the default: the helpers ring the
    # proxy's doorbell, and no call may wait for a ring that never comes.
    net_port=$((net_port + 1))
    PERF_INPLACE_NA=1 POST_CHECK=check_perf_output \
        run_test "net/ccl-perf-nodes[0,1,0,1,helper-threads]" mp \
        env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        HOSTMAP=0,1,0,1 CCL_COMM_ID="127.0.0.1:$net_port" CCL_NSOCKS_PERTHREAD=1 CCL_SOCKET_NTHREADS=2 \
        CCL_TIMEOUT=60 CCL_CHECKSUM=1 \
        mpirun "${mpirun_args[@]}" -np 4 -x HOSTMAP -x CCL_COMM_ID -x CCL_NSOCKS_PERTHREAD -x CCL_SOCKET_NTHREADS \
        -x CCL_TIMEOUT -x CCL_CHECKSUM \
        tests/net/fake_node.sh "$BUILD/bin/ccl-perf" -m host -b 8 -e 16M -f 16 -n 2 -w 1 -C all -c 1 -r -1
    for bin in "${mpi_bins[@]}"; do
        run_test "net/$(basename "$bin")-nodes[0,1,0]" mpi \
            env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
            ASAN_OPTIONS="$asan_opts" HOSTMAP=0,1,0 CCL_CHECKSUM=1 \
            mpirun "${mpirun_args[@]}" -np 3 -x HOSTMAP -x ASAN_OPTIONS -x CCL_CHECKSUM tests/net/fake_node.sh "$bin"
    done
else
    echo "SKIPPED: net fake-node tests (need mpirun and ccl-perf)"
    skipped=$((skipped + 1))
fi

# Two jobs on one CCL_COMM_ID (launched with RANK/WORLD_SIZE in interleaved
# orders, and by two mpiruns) never form one communicator: each job's ranks
# stay together or fail with a message naming the other job.
run_test "net/two_jobs" mp env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    tests/net/two_jobs.sh "$BUILD"

# ---- NCCL ABI: a program built against NVIDIA's nccl.h on ccl's libnccl.so.2 (docs/nccl.md)
MAY_SKIP=1 run_test "nccl/abi" mp env BUILD="$BUILD" tests/nccl/run.sh

# ---- soft-RoCE VMs: the ib transport over real verbs (tests/rdma/README.md)
# Two qemu VMs (TCG) with rdma_rxe, two ranks each: every collective over
# CCL_NET=ib with each algorithm, then a killed rank, a wrong GID index and
# a cut link, each an error on every survivor. A few minutes; SKIPPED with
# the reason where the VMs cannot boot (make test installs their packages
# through tests/rdma/deps.sh).
MAY_SKIP=1 run_test "rdma/ib" rdma env BUILD="$BUILD" tests/rdma/run.sh --net ib

# ---- multi-node cluster ---------------------------------------------------------------
# Two nodes in network namespaces (tests/cluster/): Open MPI's collectives,
# ccl-perf over every collective, type and op, the MPI cross-check, and each
# forced algorithm on 3+1 ranks, all launched by mpirun across the nodes;
# then, on three nodes, a cut link, a killed rank and a byte changed on the
# wire (net checksums on) in mid-allreduce must fail every other rank within
# 10 s, naming what failed (faults.sh).
# Each part builds and removes its own cluster. Needs root, `ip netns` and
# the MPI binaries; otherwise one SKIPPED line.
if ! cluster_why=$(tests/cluster/cluster.sh preflight); then
    echo "SKIPPED cluster/short: $cluster_why"
    skipped=$((skipped + 1))
elif [[ -z "$HAVE_MPICC" ]] || ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIPPED cluster/short: the cluster runs need mpicc and mpirun (Open MPI)"
    skipped=$((skipped + 1))
else
    for part in ompi perf crosscheck algos faults; do
        MAY_SKIP=1 run_test "cluster/$part" cluster env BUILD="$BUILD" tests/cluster/run_short.sh "$part"
    done
fi

# ---- GPU ----------------------------------------------------------------------------------
# In a CUDA build (make sets CUDA=1 when nvcc is found): the library must
# hold every kernel for every architecture of CUDA_ARCH (no GPU needed, so
# CI catches a kernel that stops compiling); where a GPU is present,
# tests/gpu/run.sh runs the GPU checks and benchmarks too.
if [[ "${CUDA:-0}" == 1 ]]; then
    run_test "gpu/fatbin" unit env BUILD="$BUILD" CUDA_ARCH="${CUDA_ARCH:-80 90}" tests/gpu/check_fatbin.sh
    if [[ -n "$FILTER" && "gpu/run" != *"$FILTER"* ]]; then
        :
    elif gpu_why=$("$BUILD/tests/gpu/gpu_probe" 2>&1); then
        run_test "gpu/run" gpu env BUILD="$BUILD" CUDA_ARCH="${CUDA_ARCH:-80 90}" tests/gpu/run.sh --no-build
    else
        echo "SKIPPED gpu/run: ${gpu_why:-no gpu_probe}"
        skipped=$((skipped + 1))
    fi
elif [[ "${CUDA:-0}" != mock ]]; then
    echo "SKIPPED gpu: host-only build (CUDA=0, or nvcc not found)"
    skipped=$((skipped + 1))
fi
# The mock GPU (tests/mock_cuda, docs/gpu.md): the same GPU checks on host
# memory, GPU or not, wherever the CUDA headers are (nvcc not needed).
# run.sh --mock builds build/mockcuda itself (incrementally after the first
# time; ~2 minutes of the 2-core VM from nothing) unless this is that build;
# without the headers it prints why and the step is SKIPPED.
if [[ "${CUDA:-0}" == mock ]]; then
    MAY_SKIP=1 run_test "gpu/mock" gpu-mock env MOCK_BUILD="$BUILD" tests/gpu/run.sh --mock --no-build
else
    MAY_SKIP=1 run_test "gpu/mock" gpu-mock tests/gpu/run.sh --mock
fi

# ---- ccl-info smoke -------------------------------------------------------------
# ccl-info must print this machine's topology (NUMA nodes at least) and
# the DGX-2's. On a live machine hwloc's PCI plugin leaks at unload, so
# LeakSanitizer is off for that run; tests/unit/test_topo checks ccl's own
# topology code for leaks.
check_info_output() {
    grep -q '^  numa0 ' "$1" || {
        echo "ccl-info check: no numa0 line"
        return 1
    }
}
if [[ -x "$BUILD/bin/ccl-info" ]]; then
    POST_CHECK=check_info_output run_test "tools/ccl-info" perf \
        env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$BUILD/bin/ccl-info" --ranks 4
    # The tuner's view of 4 nodes x 2 ranks over 2 Gbit/s links, no job run.
    # Nodes with cores to spare (8 each): recursive doubling for 8 bytes,
    # hierarchical from 32 MiB. Nodes faked on this machine's 2 cores (0.5
    # each), where every slice crossing nodes costs the shared cores a
    # context switch or more: hierarchical at 8 bytes too, as measured
    # (perf/RESULTS.md, the tuner sweep).
    check_explain_output() {
        awk -v want8="$EXPLAIN_AT_8" '$1 == "allreduce" { t = 1; next } t && $1 == "8" { p8 = $NF } t && $1 == "32M" { p32 = $NF }
             END { if (p8 != want8 || p32 != "hier") { printf "ccl-info --explain: picks %s at 8 B (want %s), %s at 32M (want hier)\n", p8, want8, p32; exit 1 } }' "$1"
    }
    for cores in 8 0.5; do
        [[ $cores == 8 ]] && EXPLAIN_AT_8=rd || EXPLAIN_AT_8=hier
        POST_CHECK=check_explain_output run_test "tools/ccl-info-explain[cores=$cores]" perf \
            env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$BUILD/bin/ccl-info" --explain \
            --nodes 4 --ppn 2 --cores "$cores" --net-bw 0.25 --net-lat 50 --colls allreduce
    done
    # Allgather on 4 local ranks: the ring up to the single-copy size, from
    # there each block read from its owner (pairwise); the ring throughout
    # without single copy. The threshold reaches the model as comm init
    # passes it (tuner_links_local).
    check_explain_allgather() {
        awk -v want32="$EXPLAIN_AG_32M" '$1 == "allgather" { t = 1; next } t && $1 == "8M" { p8 = $NF } t && $1 == "32M" { p32 = $NF }
             END { if (p8 != "ring" || p32 != want32) { printf "ccl-info --explain: allgather picks %s at 8M (want ring), %s at 32M (want %s)\n", p8, p32, want32; exit 1 } }' "$1"
    }
    for sc in 16M 0; do
        [[ $sc == 0 ]] && EXPLAIN_AG_32M=ring || EXPLAIN_AG_32M=pairwise
        POST_CHECK=check_explain_allgather run_test "tools/ccl-info-explain-allgather[single_copy=$sc]" perf \
            env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" CCL_SINGLE_COPY_THRESHOLD=$sc \
            "$BUILD/bin/ccl-info" --explain --ranks 4 --colls allgather
    done
    # A real cgroup CPU quota (half a CPU) lowers the CPUs ccl counts, as in
    # a container with a CPU limit; skipped where no cgroup can be made.
    MAY_SKIP=1 run_test "tools/ccl-info-cgroup" perf \
        env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" bash tests/cgroup_cpus.sh "$BUILD/bin/ccl-info"
    dgx2="${CCL_TEST_TOPO_DIR:-../shared/topologies}/nvidiaDGX2.xml"
    if [[ -r "$dgx2" ]]; then
        POST_CHECK=check_info_output run_test "tools/ccl-info-dgx2" perf "$BUILD/bin/ccl-info" --topo "$dgx2"
    else
        echo "SKIPPED tools/ccl-info-dgx2: no $dgx2 (a clone outside the project folder: set CCL_TEST_TOPO_DIR)"
        skipped=$((skipped + 1))
    fi
fi

# ---- python --------------------------------------------------------------------
# The ccl package (python/ccl, docs/python.md): pytest under /usr/bin/python3 on
# 1-3 forked ranks and 3 under mpirun + mpi4py; skipped without numpy or pytest.
MAY_SKIP=1 run_test "python/pytest" unit env BUILD="$BUILD" python/run_tests.sh

# ---- docs ------------------------------------------------------------------------------
# docs/env.md is generated from params.def, and docs/api.md lists every result code.
run_test "docs/check_docs" unit bash tests/check_docs.sh

# ---- structure -------------------------------------------------------------------------
# src/ keeps the layers, honest headers and loop-free modules of docs/architecture.md.
run_test "layers/check_layers" unit bash tests/check_layers.sh

# ---- summary -------------------------------------------------------------------------
echo "total time $(elapsed_since "$suite_start")s; logs in $LOGDIR/"
if [[ $failed -gt 0 ]]; then
    echo "failed: ${failed_names[*]}"
fi
summary="$passed passed, $failed failed"
if [[ $skipped -gt 0 ]]; then
    summary+=", $skipped skipped"
fi
echo "$summary"
[[ $failed -eq 0 ]]
