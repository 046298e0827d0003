#!/usr/bin/env bash
# run.sh - ccl's GPU checks and benchmarks, in one go (under 8 minutes on
# one H200). On a machine without a GPU it builds, checks that every kernel
# is in the library, says there is no GPU and exits 0.
#
#   tests/gpu/run.sh              build (make -j, CUDA=1), then everything below
#   tests/gpu/run.sh --no-build   use what BUILD (default build) holds
#   tests/gpu/run.sh --mock       the same checks against the mock GPU
#                                 (tests/mock_cuda, build/mockcuda): no GPU
#                                 needed, figures meaningless; colls on
#                                 1,2,3,5,8 ranks, p2p on 2,3,8, p2p-off on 3
#                                 (--full: 1 to 8 for each); exit 77
#                                 when the mock cannot be built (no CUDA headers)
#
# Steps, each under its own time limit, logs in $BUILD/gpu-logs/:
#   fatbin     every kernel as SASS for each CUDA_ARCH and as PTX (no GPU needed)
#   kernels    test_gpu_kernels: each reduction kernel (dtype x op x sources x
#              destinations x alignment) and the copy and hold kernels, bit
#              for bit against the host path
#   runtime    test_gpu_runtime: CUDA IPC of memory and events between two
#              processes, stream waits/writes on registered shared memory,
#              legacy-stream ordering (what the P2P transport builds on)
#   stream     test_gpu_stream: CUDA stream semantics of device-buffer calls
#              (returns at once, stream order, queues, groups, refusals),
#              once with the driver's stream wait and once with the polling kernel
#   colls      test_gpu_colls: every collective x dtype x op on device buffers
#              for 1..8 ranks sharing the GPU, against the host reference
#              (P2P on: five collectives on the device executor, the rest staged)
#   p2p        test_gpu_colls --p2p: the P2P collectives alone, small slots,
#              each call checked to have run on the device executor
#   p2p-off    test_gpu_colls --staged: the same with CCL_P2P_DISABLE=1, none may
#   p2p-life   test_gpu_p2p: call order across streams, destroy with calls
#              queued, abort letting a waiting stream go, ranks that disagree,
#              a peer dying while the others' streams wait on it
#   perf       ccl-perf -m device, every collective, dtype and op, 4 ranks, #wrong 0
#   bench      bench_gpu: reduce f32/bf16 sum of two 1 GiB buffers against
#              cudaMemcpy D2D and ccl's copy kernel, in the same run
#   allreduce  ccl-perf -m device: 4 ranks on the GPU, allreduce of 1 GiB, busbw
#              (over P2P: the device executor)
#   allreduce-staged  the same with CCL_P2P_DISABLE=1 (through host memory)
#   nccl       NCCL on the same GPU (one rank), where NCCL is installed
# and a short table last. Nothing here changes the GPU's settings (clocks,
# persistence, compute mode, MIG). The exit status is non-zero when a
# check failed; benchmarks only fail when their run fails.
#
# Environment: BUILD (MOCK_BUILD with --mock, default build/mockcuda),
# GPU_STEP_LIMIT (caps every step's time limit, in seconds: a lease of a few
# minutes cannot afford one hung step running to its full limit),
# GPU_STEPS (run only these steps, space-separated names; a rerun of what
# failed), GPU_COLLS_RANKS (rank counts of colls, default 1 to 8),
# CUDA_ARCH (passed to make), GPU_BENCH_MIB (buffer size of the
# benchmarks, default 1024; 8 with --mock, where bench is a smoke run),
# CUDA_HOME (where --mock finds the CUDA headers), and the mock's own
# MOCKCUDA_* (docs/gpu.md).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2

build=1 mock=0 full=0
for arg in "$@"; do
    case $arg in
    --no-build) build=0 ;;
    --mock) mock=1 ;;
    --full) full=1 ;;
    *) echo "usage: $0 [--no-build] [--mock [--full]]" >&2; exit 2 ;;
    esac
done
if [[ $mock == 1 ]]; then
    # Not BUILD: make test exports the main build's, which the mock must
    # never be built into.
    BUILD=${MOCK_BUILD:-build/mockcuda}
    BENCH_MIB=${GPU_BENCH_MIB:-8}
    headers=${CUDA_HOME:-/usr/local/cuda}/include/cuda_runtime_api.h
    if [[ $build == 1 && ! -r $headers ]]; then
        echo "no mock GPU: the mock build needs the CUDA headers ($headers not found; set CUDA_HOME)"
        exit 77
    fi
else
    BUILD=${BUILD:-build}
    BENCH_MIB=${GPU_BENCH_MIB:-1024}
fi
LOGS=$BUILD/gpu-logs

if [[ $build == 1 && $mock == 1 ]]; then
    echo "== build (make -j$(nproc) CUDA=mock gpu-tests, in $BUILD)"
    make -j"$(nproc)" CUDA=mock BUILD="$BUILD" gpu-tests >"$BUILD.gpu-build.log" 2>&1 || {
        tail -n 30 "$BUILD.gpu-build.log"
        echo "FAIL build (log: $BUILD.gpu-build.log)"
        exit 1
    }
elif [[ $build == 1 ]]; then
    echo "== build (make -j$(nproc) all tests CUDA=1)"
    make -j"$(nproc)" CUDA=1 BUILD="$BUILD" all tests >"$BUILD.gpu-build.log" 2>&1 || {
        tail -n 30 "$BUILD.gpu-build.log"
        echo "FAIL build (log: $BUILD.gpu-build.log)"
        exit 1
    }
fi
mkdir -p "$LOGS" || exit 2

rows=()
failed=0
wanted() { [[ -z ${GPU_STEPS:-} || " $GPU_STEPS " == *" $1 "* ]]; }
# step <name> <limit s> <command...>: PASS/FAIL with time; the log is kept.
step() {
    local name=$1 limit=$2 start=$SECONDS rc
    shift 2
    wanted "$name" || return 0
    [[ -n ${GPU_STEP_LIMIT:-} && $GPU_STEP_LIMIT -lt $limit ]] && limit=$GPU_STEP_LIMIT
    timeout -k 10 "$limit" "$@" >"$LOGS/$name.log" 2>&1 </dev/null
    rc=$?
    local t=$((SECONDS - start))
    if [[ $rc -eq 0 ]]; then
        echo "PASS $name (${t}s)"
        rows+=("$name|PASS|${t}s|$(summary_of "$name")")
    else
        echo "FAIL $name (${t}s, exit $rc$([[ $rc -eq 124 ]] && echo ", timed out after ${limit}s"))"
        tail -n 25 "$LOGS/$name.log" | sed 's/^/    /'
        rows+=("$name|FAIL|${t}s|exit $rc, log $LOGS/$name.log")
        failed=$((failed + 1))
    fi
    return $rc
}

# One line of figures per step for the table.
summary_of() {
    local log=$LOGS/$1.log
    case $1 in
    kernels) grep -o '[0-9]* checks, [0-9]* failed' "$log" | tail -n 1 ;;
    colls | p2p | p2p-off) awk '/cases checked/ { n++; p += $(NF-4) } END { printf "%d rank counts, %d calls over P2P on rank 0", n, p }' "$log" ;;
    perf) awk '/Out of bounds/ { n += $NF == "OK" ? 0 : 1; t++ } END { printf "%d tables, %d with wrong results", t, n }' "$log" ;;
    bench) awk '$1 == "bench" { printf "%s %.0f GB/s  ", $2, $5 }' "$log" ;;
    p2p-life) awk '/let go/ { t = t " " $(NF-3) } / reported [0-9.]+ s after/ { for (i = 1; i < NF; i++) if ($i == "reported") d = d " " $(i+1) }
                  END { printf "abort let a waiting stream go in%s s; a dead peer surfaced in%s s", t, d }' "$log" ;;
    allreduce | allreduce-staged) awk '$1 ~ /^[0-9]+$/ && NF >= 13 { printf "%s B: busbw %.2f GB/s out of place, %.2f in place", $1, $8, $12 }' "$log" ;;
    nccl) awk '$1 == "bench" { printf "1 rank algbw %.0f GB/s  ", $5 } /4 ranks on one GPU/ { sub(/^# nccl: /, ""); printf "%s", $0 }' "$log" ;;
    *) echo "" ;;
    esac
}

check_perf() { awk -v na_ok=1 -f tests/common/check_perf.awk "$1"; }

# The mock build has no GPU code to list.
[[ $mock == 0 ]] && step fatbin 60 env BUILD="$BUILD" CUDA_ARCH="${CUDA_ARCH:-80 90}" tests/gpu/check_fatbin.sh

if ! probe=$("$BUILD/tests/gpu/gpu_probe" 2>&1); then
    echo "$probe"
    if [[ $mock == 1 ]]; then
        echo "FAIL: the mock GPU's probe failed (MOCKCUDA_DEVICES=0, or MOCKCUDA_DRIVER names no file?)"
        exit 1
    fi
    echo "no GPU: compiled only (the fatbin check above is all that ran)"
    [[ $failed -eq 0 ]]
    exit
fi
echo "$probe"

# The mock's ranks are host processes on a 2-core VM: colls (and the P2P
# sweeps) on a subset of rank counts unless --full, perf up to 1 MiB.
colls_ranks=() p2p_ranks=() off_ranks=()
perf_sizes=(-b 8 -e 256K -f 64)
if [[ $mock == 1 ]]; then
    [[ $full == 0 ]] && colls_ranks=(1 2 3 5 8) p2p_ranks=(2 3 8) off_ranks=(3)
    perf_sizes=(-b 8 -e 1M -f 128)
fi
step kernels 180 "$BUILD/tests/gpu/test_gpu_kernels"
step runtime 60 "$BUILD/tests/gpu/test_gpu_runtime"
step stream 180 env CCL_CUDA_STREAM_WAIT=auto "$BUILD/tests/gpu/test_gpu_stream"
step stream-kernel 180 env CCL_CUDA_STREAM_WAIT=kernel "$BUILD/tests/gpu/test_gpu_stream"
[[ -n ${GPU_COLLS_RANKS:-} ]] && read -ra colls_ranks <<<"$GPU_COLLS_RANKS"
step colls 300 "$BUILD/tests/gpu/test_gpu_colls" "${colls_ranks[@]}"
step p2p 180 "$BUILD/tests/gpu/test_gpu_colls" --p2p "${p2p_ranks[@]}"
step p2p-off 180 "$BUILD/tests/gpu/test_gpu_colls" --staged "${off_ranks[@]}"
step p2p-life 180 "$BUILD/tests/gpu/test_gpu_p2p"
if step perf 240 "$BUILD/bin/ccl-perf" -m device --np 4 "${perf_sizes[@]}" -n 1 -w 1 -c 1 -C all -d all -o all && wanted perf; then
    check_perf "$LOGS/perf.log" >>"$LOGS/perf.log" 2>&1 || {
        echo "FAIL perf: a #wrong column is not 0"
        failed=$((failed + 1))
    }
fi
step bench 120 "$BUILD/tests/gpu/bench_gpu" "$BENCH_MIB"
if [[ $mock == 1 && -x $BUILD/tests/unit/test_cuda_rt ]]; then
    # ccl's refusal of device-stream calls in a CUDA build without a driver,
    # and with a driver but no device (on a GPU machine these cannot be made).
    step no-driver 60 env MOCKCUDA_DRIVER=/nonexistent/libcuda.so.1 "$BUILD/tests/unit/test_cuda_rt"
    step no-device 60 env MOCKCUDA_DEVICES=0 "$BUILD/tests/unit/test_cuda_rt"
fi
if [[ $mock == 1 ]]; then
    rows+=("allreduce|SKIP|0s|a bandwidth figure: meaningless on the mock GPU")
    rows+=("allreduce-staged|SKIP|0s|a bandwidth figure: meaningless on the mock GPU")
    rows+=("nccl|SKIP|0s|NCCL needs a GPU")
else
    step allreduce 240 "$BUILD/bin/ccl-perf" -m device --np 4 -b "${BENCH_MIB}M" -e "${BENCH_MIB}M" -n 3 -w 1 -c 1 -C allreduce
    step allreduce-staged 240 env CCL_P2P_DISABLE=1 "$BUILD/bin/ccl-perf" -m device --np 4 -b "${BENCH_MIB}M" -e "${BENCH_MIB}M" -n 3 -w 1 -c 1 -C allreduce
    if [[ -x $BUILD/tests/gpu/nccl_ref ]]; then
        step nccl 120 "$BUILD/tests/gpu/nccl_ref" "$BENCH_MIB"
    else
        rows+=("nccl|SKIP|0s|NCCL not installed beside CUDA at build time")
    fi
fi

echo
echo "== GPU summary ($(head -n 1 <<<"$probe"))$([[ $mock == 1 ]] && echo ": the mock GPU, times and GB/s mean nothing")"
printf '%-17s %-5s %6s  %s\n' step result time figures
for r in "${rows[@]}"; do
    IFS='|' read -r n res t fig <<<"$r"
    printf '%-17s %-5s %6s  %s\n' "$n" "$res" "$t" "$fig"
done
grep '^#' "$LOGS/bench.log" 2>/dev/null
passed=$(printf '%s\n' "${rows[@]}" | grep -c '|PASS|')
echo "gpu: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
