#!/usr/bin/env bash
# deps.sh - checks for what ccl's build and tests need and, on Debian as root,
# installs what is missing. `make deps` runs it; `make run` and `make test`
# depend on that, so it runs often and must be quick when nothing is missing.
#
#   to build       a C compiler (gcc, libc6-dev), make, hwloc (libhwloc-dev),
#                  rdma-core's verbs headers (libibverbs-dev; libccl loads libibverbs
#                  at run time, so without them it builds without the ib transport)
#   for the tests  cmocka (libcmocka-dev), Open MPI (openmpi-bin, libopenmpi-dev),
#                  ip (iproute2), pkg-config, clang with libFuzzer for the fuzz
#                  targets (clang, libclang-rt-dev), Debian's python3 with numpy,
#                  pytest, mpi4py and torch for the Python package's tests
#
# All present: prints nothing and exits 0, without touching apt or the network.
# Something missing, root and apt-get available: `apt-get update` once, then
# `apt-get install -y --no-install-recommends <packages>`.
# Otherwise (not root, no apt-get, or DEPS_NOINSTALL=1): names the missing
# packages and the command that installs them. The exit status is 1 only when
# the build itself cannot work (no compiler or no make); missing test
# dependencies are a warning, and the test runner reports what it skips.
#
# Environment:
#   CC, MPICC                the compilers to check (default cc, mpicc)
#   DEPS_NOINSTALL=1         report only, never run apt-get
#   DEPS_DRYRUN=1            print the apt-get commands instead of running them
#   DEPS_PRETEND_MISSING="p ..."  treat these Debian packages as missing
#                            (to exercise this script; nothing is uninstalled)
# shellcheck disable=SC2317  # the check functions are called through need()
set -u

CC_CMD=${CC:-cc}
MPICC_CMD=${MPICC:-mpicc}
PRETEND=" ${DEPS_PRETEND_MISSING:-} "

missing_build=()  # Debian packages, by group
missing_test=()
missing_opt=()
notes=()          # one line per failed check, for the report

pretended() {
    local p
    for p in "$@"; do
        [[ "$PRETEND" == *" $p "* ]] && return 0
    done
    return 1
}

have_cmd() { command -v "$1" >/dev/null 2>&1; }

# A module of Debian's /usr/bin/python3 (the python3 first on PATH may be
# another one, without Debian's packages).
have_py_module() { [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c "import $1" >/dev/null 2>&1; }

# ip lives in /usr/sbin, which is not on a normal user's PATH on Debian.
have_ip() { have_cmd ip || [[ -x /usr/sbin/ip || -x /sbin/ip ]]; }

# clang that links a libFuzzer target (make fuzz; tests/fuzz/).
fuzz_works() {
    local c
    for c in clang clang-14 clang-15 clang-16; do
        have_cmd "$c" || continue
        printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' |
            "$c" -x c - -fsanitize=fuzzer -o /dev/null >/dev/null 2>&1 && return 0
    done
    return 1
}

cc_works() {
    # shellcheck disable=SC2086  # CC may carry flags, as in make
    printf 'int main(void) { return 0; }\n' | $CC_CMD -x c - -o /dev/null >/dev/null 2>&1
}

# have_header <header> [link flags]: the compiler finds the header (and, with
# flags, links against the library). Without a compiler, only looks for the
# file in /usr/include.
have_header() {
    local h=$1
    shift
    if [[ $cc_ok != 1 ]]; then
        [[ -e /usr/include/$h ]]
        return
    fi
    local mode=(-fsyntax-only)
    [[ $# -gt 0 ]] && mode=(-o /dev/null "$@")
    # cmocka.h needs these three before it.
    # shellcheck disable=SC2086
    printf '#include <stdarg.h>\n#include <stddef.h>\n#include <setjmp.h>\n#include <%s>\nint main(void) { return 0; }\n' "$h" |
        $CC_CMD -x c - "${mode[@]}" >/dev/null 2>&1
}

# need <group> <what it is> <check command...> -- <packages...>
need() {
    local group=$1 what=$2 check=() pkgs=()
    shift 2
    while [[ $# -gt 0 && $1 != -- ]]; do check+=("$1"); shift; done
    shift
    pkgs=("$@")
    if ! pretended "${pkgs[@]}" && "${check[@]}"; then
        return
    fi
    notes+=("  $group: $what (Debian: ${pkgs[*]})")
    case $group in
    build) missing_build+=("${pkgs[@]}") ;;
    test) missing_test+=("${pkgs[@]}") ;;
    *) missing_opt+=("${pkgs[@]}") ;;
    esac
}

check_all() {
    missing_build=() missing_test=() missing_opt=() notes=()
    cc_ok=0
    cc_works && cc_ok=1
    need build "C compiler ($CC_CMD)" test "$cc_ok" = 1 -- gcc libc6-dev
    need build "make" have_cmd make -- make
    need build "hwloc (hwloc.h, -lhwloc) for topology discovery" have_header hwloc.h -lhwloc -- libhwloc-dev
    need build "rdma-core's verbs headers (infiniband/verbs.h) for the ib transport" have_header infiniband/verbs.h -- libibverbs-dev
    need test "cmocka (cmocka.h, -lcmocka) for the unit tests" have_header cmocka.h -lcmocka -- libcmocka-dev
    need test "mpirun for the MPI cross-checks" have_cmd mpirun -- openmpi-bin
    need test "$MPICC_CMD for the MPI cross-checks" have_cmd "$MPICC_CMD" -- libopenmpi-dev
    need test "ip (iproute2)" have_ip -- iproute2
    need test "pkg-config for the install check" have_cmd pkg-config -- pkg-config
    need test "clang with libFuzzer for the fuzz targets" fuzz_works -- clang libclang-rt-dev
    need test "NumPy for the Python package's tests" have_py_module numpy -- python3-numpy
    need test "pytest for the Python package's tests" have_py_module pytest -- python3-pytest
    need test "mpi4py for the Python package's MPI test" have_py_module mpi4py -- python3-mpi4py
    need test "PyTorch for the Python package's tensor tests" have_py_module torch -- python3-torch
}

nmissing() { echo $((${#missing_build[@]} + ${#missing_test[@]} + ${#missing_opt[@]})); }

# The missing packages, each once, in a stable order.
packages() {
    printf '%s\n' "${missing_build[@]}" "${missing_test[@]}" "${missing_opt[@]}" |
        awk 'NF && !seen[$0]++' | tr '\n' ' ' | sed 's/ $//'
}

run() {
    if [[ ${DEPS_DRYRUN:-0} == 1 ]]; then
        echo "deps: would run: $*"
        return 0
    fi
    "$@"
}

check_all
[[ $(nmissing) -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]] && have_cmd apt-get && [[ ${DEPS_NOINSTALL:-0} != 1 ]]; then
    pkglist=$(packages)
    echo "deps: missing:"
    printf '%s\n' "${notes[@]}"
    echo "deps: installing: $pkglist"
    ok=1
    run apt-get update -q || ok=0 # the install may still work from older lists
    # shellcheck disable=SC2086  # one word per package
    run env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkglist || ok=0
    [[ $ok == 1 ]] || echo "deps: warning: apt-get failed; see its output above" >&2
    [[ ${DEPS_DRYRUN:-0} == 1 ]] && exit 0
    check_all
    if [[ $(nmissing) -eq 0 ]]; then
        echo "deps: all dependencies installed"
        exit 0
    fi
fi

# Report what is still missing and how to get it.
pkglist=$(packages)
{
    echo "deps: missing:"
    printf '%s\n' "${notes[@]}"
    if have_cmd apt-get; then
        sudo=
        [[ $(id -u) -ne 0 ]] && sudo="sudo "
        echo "deps: install them with:"
        echo "  ${sudo}apt-get update && ${sudo}apt-get install -y --no-install-recommends $pkglist"
    else
        echo "deps: no apt-get here; install the equivalents of these Debian packages: $pkglist"
    fi
} >&2
if [[ ${#missing_build[@]} -gt 0 ]]; then
    echo "deps: error: ccl cannot be built without the build dependencies above" >&2
    exit 1
fi
if [[ ${#missing_test[@]} -gt 0 ]]; then
    echo "deps: warning: the tests that need the packages above will not be built or will be SKIPPED" >&2
fi
exit 0
