#!/usr/bin/env bash
# pack.sh - run.sh's GPU checks for a machine that cannot build them: a GPU
# machine whose image has CUDA's driver but no hwloc, no compiler for the
# host code, or too little time to build (a lent GPU for a few minutes).
#
#   tests/gpu/pack.sh [ARCHIVE]
#       here, after `make all tests` (CUDA=1): ccl-perf, libccl.so, the
#       programs of tests/gpu and the libhwloc/libudev they load, in one
#       xz archive (default build/gpu-pack.tar.xz, ~5 MB: the programs
#       share one fatbin, which xz stores once)
#   tests/gpu/pack.sh --run ARCHIVE LOGDIR [run.sh arguments]
#       there, in a checkout of the same commit: unpacks into build/, runs
#       run.sh --no-build with the packed libraries found first, and leaves
#       the environment (nvidia-smi, ldd), run.sh's output and its logs
#       (gpu-logs.tgz) in LOGDIR. run.sh's GPU_STEP_LIMIT, GPU_STEPS and
#       GPU_COLLS_RANKS pass through; RUN_LIMIT (seconds) bounds the whole.
#
# Binaries built on Debian 12 ran on the H200 machine's image (glibc is
# newer there); the NCCL reference finds NCCL through ldconfig there.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2

if [[ ${1:-} == --run ]]; then
    archive=${2:?usage: $0 --run ARCHIVE LOGDIR [run.sh arguments]}
    logs=${3:?usage: $0 --run ARCHIVE LOGDIR [run.sh arguments]}
    shift 3
    unpacked=$(mktemp -d /tmp/gpupack.XXXXXX) || exit 2
    tar -C "$unpacked" -xJf "$archive" || { echo "pack.sh: cannot unpack $archive"; exit 2; }
    rm -rf build && cp -a "$unpacked/build" build || exit 2
    mkdir -p "$logs" || exit 2
    libs=$unpacked/syslib
    [[ -d /usr/local/nvidia/lib64 ]] && libs=$libs:/usr/local/nvidia/lib64
    export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    {
        nvidia-smi
        echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
        nproc
        ldd build/bin/ccl-perf
        [[ -x build/tests/gpu/nccl_ref ]] && ldd build/tests/gpu/nccl_ref
    } >"$logs/env.txt" 2>&1
    timeout -k 5 "${RUN_LIMIT:-3600}" tests/gpu/run.sh --no-build "$@" >"$logs/run.txt" 2>&1
    rc=$?
    echo "run.sh exit $rc" >>"$logs/run.txt"
    tar -C build -czf "$logs/gpu-logs.tgz" gpu-logs
    cat "$logs/run.txt"
    rm -rf "$unpacked"
    exit $rc
fi

archive=${1:-build/gpu-pack.tar.xz}
need=(build/bin/ccl-perf build/tests/gpu/gpu_probe build/tests/gpu/test_gpu_kernels)
for f in "${need[@]}"; do
    [[ -x $f ]] || { echo "pack.sh: $f is missing: run make all tests in a CUDA build first"; exit 1; }
done
stage=$(mktemp -d /tmp/gpupack.XXXXXX) || exit 2
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/bin" "$stage/build/lib" "$stage/build/tests/gpu" "$stage/syslib"
cp build/bin/ccl-perf "$stage/build/bin/" &&
    cp -a build/lib/libccl.so* "$stage/build/lib/" &&
    cp build/tests/gpu/* "$stage/build/tests/gpu/" || exit 1
# What the programs load that a CUDA image may lack: hwloc and its udev.
for lib in libhwloc.so.15 libudev.so.1; do
    path=$(ldd build/bin/ccl-perf | awk -v l="$lib" '$1 == l { print $3 }')
    [[ -n $path ]] && cp -L "$path" "$stage/syslib/"
done
tar -C "$stage" -cf - . | xz -T0 -9e --lzma2=dict=192MiB >"$archive" || exit 1
echo "pack.sh: $archive ($(du -h "$archive" | cut -f1)); there: tests/gpu/pack.sh --run $archive LOGDIR"
