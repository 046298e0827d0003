#!/usr/bin/env bash
# run_short.sh - the short multi-node run of `make test`: builds a 2-node
# cluster of its own (tests/cluster/cluster.sh up 2, name "s<pid>"), runs
# tests/cluster/checks.sh on it and removes it again, whatever happens.
#
#   tests/cluster/run_short.sh [PART...]     parts: ompi perf crosscheck algos (default all)
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

why=$("$C" preflight) || skip "$why"
command -v mpirun >/dev/null 2>&1 || skip "mpirun not found"
mpirun --version 2>&1 | grep -q "Open MPI" || skip "the cluster runs need Open MPI's mpirun (rsh agent)"
for bin in "$BUILD/bin/ccl-perf" "$BUILD/bin/mpi-bench" "$BUILD/tests/mpi/test_mpi_crosscheck"; do
    [[ -x "$bin" ]] || skip "$bin not built (make && make tests tools, with mpicc)"
done

export CLUSTER_NAME="s$$"
cleanup() {
    "$C" down
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$C" up 2 --owner $$ || exit 1
"$HERE/checks.sh" "$@"
