#!/usr/bin/env bash
# run_short.sh - the short multi-node run of `make test`: builds a cluster of
# its own (tests/cluster/cluster.sh up, name "s<pid>"), runs
# tests/cluster/checks.sh (2 nodes) and tests/cluster/faults.sh (3 nodes) on
# it and removes it again, whatever happens.
#
#   tests/cluster/run_short.sh [PART...]
#       parts: ompi perf crosscheck algos (checks.sh), faults (faults.sh);
#       default all
#
# Exit status: 0 passed, 1 failed, 77 skipped; when skipped, the last line
# of output is the reason (not root, no network namespaces, MPI missing, or
# ccl refusing ranks on several nodes). BUILD selects the build folder.
set -uo pipefail

# shellcheck source=tests/cluster/paths.sh
. "$(dirname "${BASH_SOURCE[0]}")/paths.sh"

skip() {
    echo "$*"
    exit 77
}

checks=() # parts for checks.sh
faults=0
for p in "${@:-ompi perf crosscheck algos faults}"; do
    for q in $p; do
        case "$q" in
        faults) faults=1 ;;
        *) checks+=("$q") ;;
        esac
    done
done

why=$("$C" preflight) || skip "$why"
if ((${#checks[@]} > 0)); then
    # The faults need no MPI: fault_loop's ranks are started directly.
    command -v mpirun >/dev/null 2>&1 || skip "mpirun not found"
    mpirun --version 2>&1 | grep -q "Open MPI" || skip "the cluster runs need Open MPI's mpirun (rsh agent)"
    for bin in "$BUILD/bin/ccl-perf" "$BUILD/bin/mpi-bench" "$BUILD/tests/mpi/test_mpi_crosscheck"; do
        [[ -x "$bin" ]] || skip "$bin not built (make && make tests tools, with mpicc)"
    done
fi
if ((faults)); then
    [[ -x "$BUILD/tests/cluster/fault_loop" ]] || skip "$BUILD/tests/cluster/fault_loop not built (make tests)"
fi

export CLUSTER_NAME="s$$"
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    "$C" down
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$C" up $((faults ? 3 : 2)) --owner $$ || exit 1
rc=0
if ((${#checks[@]} > 0)); then
    "$HERE/checks.sh" "${checks[@]}"
    rc=$?
fi
if ((faults)); then
    "$HERE/faults.sh" || rc=1
fi
exit $rc
