#!/usr/bin/env bash
# check_fatbin.sh - fails when libccl lacks GPU code for a kernel on an
# architecture it was built for. Needs no GPU: it reads the fat binary in
# the library (tests/gpu/fatbin_list.c) and compares it with the kernels
# ccl must have:
#   dev_k_reduce_<op>_<type>  for op in sum prod max min and every type,
#   dev_k_copy<16|8|4|2|1>, dev_k_wait_flag,
# each as SASS (ELF) for every sm_XX of CUDA_ARCH and as PTX for the highest.
#
#   BUILD=build CUDA_ARCH="80 90" tests/gpu/check_fatbin.sh
#
# run_all.sh runs it in every CUDA build (`make test`), so a kernel that
# stops compiling, or an architecture dropped from the build, fails CI on
# machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${BUILD:-build}
CUDA_ARCH=${CUDA_ARCH:-80 90}
lister=$BUILD/tests/gpu/fatbin_list
lib=$(ls "$BUILD"/lib/libccl.so.*.*.* 2>/dev/null | head -n 1)

[[ -x $lister ]] || { echo "FAIL: $lister not built (make tests in a CUDA build)"; exit 1; }
[[ -n $lib ]] || { echo "FAIL: no $BUILD/lib/libccl.so.X.Y.Z"; exit 1; }

listing=$("$lister" "$lib") || { echo "FAIL: cannot list the GPU code of $lib"; exit 1; }

kernels=()
for t in i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64 e4m3 e5m2; do
    for op in sum prod max min; do
        kernels+=("dev_k_reduce_${op}_$t")
    done
done
kernels+=(dev_k_copy16 dev_k_copy8 dev_k_copy4 dev_k_copy2 dev_k_copy1 dev_k_wait_flag)

ptx=$(printf '%s\n' $CUDA_ARCH | sort -n | tail -n 1)
targets=()
for a in $CUDA_ARCH; do
    targets+=("sm_$a elf")
done
targets+=("compute_$ptx ptx")

missing=0
for target in "${targets[@]}"; do
    have=$(grep -c "^$target " <<<"$listing" || true)
    for k in "${kernels[@]}"; do
        if ! grep -qx "$target $k" <<<"$listing"; then
            echo "missing: $k ($target)"
            missing=$((missing + 1))
        fi
    done
    echo "$target: $have kernels"
done
if [[ $missing -gt 0 ]]; then
    echo "FAIL: $missing kernel images missing from $lib (CUDA_ARCH=\"$CUDA_ARCH\")"
    exit 1
fi
echo "ok: ${#kernels[@]} kernels x ${#targets[@]} targets (${targets[*]}) in $lib"
