#!/usr/bin/env bash
# install_check.sh - checks an installed ccl the way a user would consume it.
#
#   make install PREFIX=/some/dir && tests/install_check.sh /some/dir
#
# Checks that:
#   - the header, libraries, ccl-perf and ccl.pc are where `make install` puts them;
#   - the shared library's soname is libccl.so.0 and libccl.so -> libccl.so.0;
#   - pkg-config finds ccl through PKG_CONFIG_PATH, with the right prefix and version;
#   - a small program built with `pkg-config --cflags --libs ccl` needs
#     libccl.so.0, loads it from PREFIX/lib (LD_LIBRARY_PATH), and runs a
#     2-rank allreduce (ccl_comm_init_all, host streams) correctly;
#   - the same program linked against libccl.a plus Libs.private has no
#     libccl dependency and runs too, and the archive holds no LTO bytecode
#     (make install strips it: another GCC's -flto link would refuse it);
#   - ccl.h compiles as C++, when a C++ compiler exists;
#   - libnccl.so.2 (docs/nccl.md) is installed with its soname, libnccl.so
#     and ccl-nccl.pc, and exports nccl*/pnccl* only; where NVIDIA's nccl.h
#     is ($CUDA_HOME/include), a program built against it with
#     `pkg-config --libs ccl-nccl` loads PREFIX/lib's and runs an allreduce.
# Prints one line per check; exits non-zero at the first failure.
#
# Environment: CC (default cc), CXX (default c++), CUDA_HOME (/usr/local/cuda).
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
if [[ ! -d $1 ]]; then
    echo "FAIL $1 is not a directory (run make install PREFIX=$1 first)" >&2
    exit 1
fi
PREFIX=$(cd "$1" && pwd -P)
CC=${CC:-cc}
CXX=${CXX:-c++}
LIBDIR=$PREFIX/lib

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

ok() { echo "ok   $*"; }
die() {
    echo "FAIL $*" >&2
    exit 1
}

# ---- files ------------------------------------------------------------------
for f in include/ccl.h lib/libccl.a lib/libccl.so lib/libccl.so.0 lib/pkgconfig/ccl.pc bin/ccl-perf; do
    [[ -e $PREFIX/$f ]] || die "$PREFIX/$f is missing"
done
ok "installed files present"

soname=$(readelf -d "$LIBDIR/libccl.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libccl.so.0 ]] || die "soname of libccl.so is '$soname', expected libccl.so.0"
[[ $(readlink "$LIBDIR/libccl.so") == libccl.so.0 ]] || die "libccl.so does not point to libccl.so.0"
ok "soname libccl.so.0"

# ---- pkg-config ---------------------------------------------------------------
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
command -v pkg-config >/dev/null || die "pkg-config not found (Debian: pkg-config)"
pc_version=$(pkg-config --modversion ccl) || die "pkg-config cannot find ccl in $PKG_CONFIG_PATH"
pc_prefix=$(pkg-config --variable=prefix ccl)
[[ $(cd "$pc_prefix" && pwd -P) == "$PREFIX" ]] || die "ccl.pc has prefix $pc_prefix, expected $PREFIX"
read -ra cflags <<<"$(pkg-config --cflags ccl)"
read -ra libs <<<"$(pkg-config --libs ccl)"
read -ra static_libs <<<"$(pkg-config --static --libs ccl)"
# Libs.private: what --static adds to --libs.
private=()
for w in "${static_libs[@]}"; do
    [[ " ${libs[*]} " == *" $w "* ]] || private+=("$w")
done
[[ ${#private[@]} -gt 0 ]] || die "ccl.pc has no Libs.private"
ok "pkg-config: ccl $pc_version, cflags '${cflags[*]}', libs '${libs[*]}', private '${private[*]}'"

# ---- a user program -------------------------------------------------------------
cat >"$WORK/prog.c" <<'EOF'
/* 2 ranks in one process: ccl_comm_init_all, then an in-place allreduce on
 * each rank's host stream, so one thread can drive both ranks. */
#include <ccl.h>
#include <stdio.h>

#define NRANKS 2
#define COUNT 4096

#define CHECK(call, comm)                                                              \
    do {                                                                               \
        ccl_result_t r_ = (call);                                                      \
        if (r_ != CCL_SUCCESS) {                                                       \
            fprintf(stderr, "%s: %s: %s\n", #call, ccl_get_error_string(r_),           \
                    ccl_get_last_error(comm));                                         \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

int main(void)
{
    ccl_comm_t comms[NRANKS];
    ccl_stream_t streams[NRANKS];
    float *buf[NRANKS];
    int version;

    CHECK(ccl_get_version(&version), NULL);
    if (version != CCL_VERSION_CODE) {
        fprintf(stderr, "library version %d, header %d\n", version, CCL_VERSION_CODE);
        return 1;
    }
    printf("%d.%d.%d\n", version / 10000, version / 100 % 100, version % 100);

    CHECK(ccl_comm_init_all(comms, NRANKS, NULL), NULL);
    for (int r = 0; r < NRANKS; r++) {
        CHECK(ccl_mem_alloc((void **)&buf[r], COUNT * sizeof(float)), comms[r]);
        for (int i = 0; i < COUNT; i++)
            buf[r][i] = (float)(r + i);
        CHECK(ccl_stream_create(&streams[r]), comms[r]);
    }
    for (int r = 0; r < NRANKS; r++)
        CHECK(ccl_allreduce(buf[r], buf[r], COUNT, CCL_FLOAT32, CCL_SUM, comms[r], streams[r]),
              comms[r]);
    for (int r = 0; r < NRANKS; r++)
        CHECK(ccl_stream_synchronize(streams[r]), comms[r]);
    for (int r = 0; r < NRANKS; r++)
        for (int i = 0; i < COUNT; i++)
            if (buf[r][i] != (float)(NRANKS * i + NRANKS * (NRANKS - 1) / 2)) {
                fprintf(stderr, "rank %d: element %d is %g\n", r, i, buf[r][i]);
                return 1;
            }
    for (int r = 0; r < NRANKS; r++) {
        CHECK(ccl_stream_destroy(streams[r]), comms[r]);
        CHECK(ccl_mem_free(buf[r]), comms[r]);
        CHECK(ccl_comm_destroy(comms[r]), NULL);
    }
    printf("allreduce ok\n");
    return 0;
}
EOF

# run_prog <binary> <what> [env assignments...]
run_prog() {
    local bin=$1 what=$2 out
    shift 2
    out=$(env "$@" timeout 120 "$bin" 2>&1) || die "$what: $bin failed: $out"
    [[ $(head -n 1 <<<"$out") == "$pc_version" ]] ||
        die "$what: program reports version '$(head -n 1 <<<"$out")', ccl.pc says $pc_version"
    grep -qx "allreduce ok" <<<"$out" || die "$what: unexpected output: $out"
}

# Shared: exactly what the README tells users to do.
"$CC" -o "$WORK/prog_shared" "$WORK/prog.c" "${cflags[@]}" "${libs[@]}" ||
    die "cc \$(pkg-config --cflags --libs ccl) failed"
readelf -d "$WORK/prog_shared" | grep 'NEEDED.*\[libccl\.so\.0\]' >/dev/null ||
    die "program built with pkg-config does not need libccl.so.0"
resolved=$(LD_LIBRARY_PATH=$LIBDIR ldd "$WORK/prog_shared" | awk '$1 == "libccl.so.0" { print $3 }')
[[ $(readlink -f "$resolved") == $(readlink -f "$LIBDIR/libccl.so.0") ]] ||
    die "libccl.so.0 resolves to '$resolved', not $LIBDIR/libccl.so.0"
run_prog "$WORK/prog_shared" "shared" LD_LIBRARY_PATH="$LIBDIR"
ok "shared: links with pkg-config, loads $LIBDIR/libccl.so.0, 2-rank allreduce correct"

# Static: the archive plus Libs.private, no libccl.so anywhere.
# grep reads all of readelf's output (no -q): under pipefail an early exit
# would fail the pipeline with SIGPIPE and hide the match.
if readelf -S -W "$LIBDIR/libccl.a" | grep '\.gnu\.lto_' >/dev/null; then
    die "libccl.a still holds LTO bytecode (.gnu.lto_* sections): make install should strip it"
fi
"$CC" -o "$WORK/prog_static" "$WORK/prog.c" "${cflags[@]}" "$LIBDIR/libccl.a" "${private[@]}" ||
    die "linking against libccl.a with Libs.private (${private[*]}) failed"
if readelf -d "$WORK/prog_static" | grep 'NEEDED.*libccl' >/dev/null; then
    die "statically linked program still needs libccl"
fi
run_prog "$WORK/prog_static" "static"
ok "static: links libccl.a + Libs.private, runs without libccl.so"

# ---- C++ ----------------------------------------------------------------------------
if command -v "$CXX" >/dev/null 2>&1; then
    printf '#include <ccl.h>\nint main() { int v; return ccl_get_version(&v) == CCL_SUCCESS ? 0 : 1; }\n' \
        >"$WORK/prog.cc"
    "$CXX" -fsyntax-only -Wall -Wextra "${cflags[@]}" "$WORK/prog.cc" || die "ccl.h does not compile as C++"
    ok "ccl.h compiles as C++"
else
    echo "skip ccl.h as C++ ($CXX not found)"
fi
# ---- NCCL ABI ------------------------------------------------------------------------
for f in lib/libnccl.so.2 lib/libnccl.so lib/pkgconfig/ccl-nccl.pc; do
    [[ -e $PREFIX/$f ]] || die "$PREFIX/$f is missing"
done
soname=$(readelf -d "$LIBDIR/libnccl.so.2" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libnccl.so.2 ]] || die "soname of libnccl.so.2 is '$soname'"
others=$(nm -D --defined-only "$LIBDIR/libnccl.so.2" | awk '$3 !~ /^p?nccl/ { print $3 }' | head -n 3)
[[ -z $others ]] || die "libnccl.so.2 exports more than nccl*/pnccl*: $others"
ok "libnccl.so.2: soname, libnccl.so, ccl-nccl.pc, only nccl*/pnccl* exported"
nccl_inc=${CUDA_HOME:-/usr/local/cuda}/include
if [[ -f $nccl_inc/nccl.h ]]; then
    cat >"$WORK/nccl_prog.c" <<'PROG'
#include <nccl.h>
int main(void)
{
    ncclComm_t comms[2];
    float buf[2][3] = {{1, 2, 3}, {10, 20, 30}};
    if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess || ncclGroupStart() != ncclSuccess)
        return 1;
    for (int r = 0; r < 2; r++)
        ncclAllReduce(buf[r], buf[r], 3, ncclFloat32, ncclSum, comms[r], NULL);
    if (ncclGroupEnd() != ncclSuccess || buf[1][2] != 33)
        return 1;
    return ncclCommDestroy(comms[0]) != ncclSuccess || ncclCommDestroy(comms[1]) != ncclSuccess;
}
PROG
    read -ra nccl_libs <<<"$(pkg-config --libs ccl-nccl)"
    "$CC" -o "$WORK/nccl_prog" "$WORK/nccl_prog.c" -I"$nccl_inc" "${nccl_libs[@]}" ||
        die "a program against nccl.h with \$(pkg-config --libs ccl-nccl) did not build"
    loaded=$(LD_LIBRARY_PATH="$LIBDIR" ldd "$WORK/nccl_prog" | awk '$1 == "libnccl.so.2" { print $3 }')
    [[ $(readlink -f "$loaded") == $(readlink -f "$LIBDIR/libnccl.so.2") ]] ||
        die "libnccl.so.2 resolves to '$loaded', not $LIBDIR/libnccl.so.2"
    LD_LIBRARY_PATH="$LIBDIR" "$WORK/nccl_prog" || die "the nccl.h program failed on $LIBDIR/libnccl.so.2"
    ok "nccl.h program: links with pkg-config ccl-nccl, loads $LIBDIR/libnccl.so.2, allreduce correct"
else
    echo "skip the nccl.h program (no $nccl_inc/nccl.h)"
fi
echo "install check passed: $PREFIX"
