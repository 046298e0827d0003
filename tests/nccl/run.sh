#!/usr/bin/env bash
# run.sh - the NCCL ABI test: tests/nccl/test_nccl_abi, built against
# NVIDIA's nccl.h and linked to ccl's libnccl.so.2, in each of its modes:
# processes (2, 3 and 4 ranks: even and odd), threads (ncclCommInitAll, 1
# and 3 ranks) and one thread driving 4 ranks in groups. First checks that
# the binary loads ccl's libnccl.so.2 from $BUILD/lib, not NVIDIA's.
#
#   BUILD=build tests/nccl/run.sh
#
# Exit 0 when every run passed; exit 77 (run_all.sh's MAY_SKIP) with the
# reason on the last line when the test was not built (no nccl.h in
# $CUDA_HOME/include or /usr/include).
set -u
cd "$(dirname "$0")/../.." || exit 2
BUILD=${BUILD:-build}
bin=$BUILD/tests/nccl/test_nccl_abi
if [[ ! -x "$bin" ]]; then
    echo "$bin not built: it needs NVIDIA's nccl.h in \$CUDA_HOME/include or /usr/include"
    exit 77
fi

lib=$(ldd "$bin" | awk '$1 == "libnccl.so.2" { print $3 }')
ours=$(readlink -f "$BUILD/lib/libnccl.so.2")
if [[ -z "$lib" || "$(readlink -f "$lib")" != "$ours" ]]; then
    echo "FAIL: $bin loads libnccl.so.2 from '${lib:-nowhere}', not $ours"
    exit 1
fi
echo "$bin loads $lib"

fail=0
for run in "procs 2" "procs 3" "procs 4" "threads 1" "threads 3" "group 4"; do
    # shellcheck disable=SC2086
    if ! timeout "${NCCL_TEST_TIMEOUT:-120}" "$bin" $run; then
        echo "FAIL: test_nccl_abi $run"
        fail=1
    fi
done
[[ $fail -eq 0 ]] && echo "nccl abi: all runs passed"
exit $fail
