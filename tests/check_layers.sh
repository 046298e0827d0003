#!/usr/bin/env bash
# check_layers.sh - checks that src/ keeps the shape docs/architecture.md
# describes; make test runs it (tests/run_all.sh). Exit 0 when every rule
# holds, 1 with one line per breach otherwise.
#
# Rules:
#  1. Layers. A file includes headers of its own folder or of a lower
#     layer only:
#        base  <  bootstrap, device, algos  <  topo  <  transport  <  exec  <  core  <  nccl
#     src/nccl (the NCCL ABI) is built on the public API alone: it may
#     include no header of another folder of src/.
#     (src/base depends on nothing else in src/). One exception: the
#     executors read the communicator they run on, so exec/ may include
#     core/communicator.h, the header that defines it (and declares no
#     functions).
#  2. Honest headers. Every function a header of src/ declares is defined in
#     a source file that header owns: X.h owns X.c and X_*.c of its folder
#     (comm.h: comm.c, comm_split.c, ...), unless a longer prefix has its
#     own header; a folder's own header (exec/exec.h) also owns every source
#     of that folder, as the folder's interface. (Functions defined in no
#     .c file, such as CUDA kernels' launchers in .cu files, are not
#     checked.)
#  3. No include loop between modules (a header and the sources it owns).
#  4. No source file in src/ longer than MAX_LINES (800) lines: longer is a
#     sign that a file holds two concerns.
#
# Environment: CC (default cc), CFLAGS_EXTRA (e.g. hwloc's -I), MAX_LINES.
set -u
cd "$(dirname "$0")/.." || exit 2

CC=${CC:-cc}
MAX_LINES=${MAX_LINES:-800}
work=$(mktemp -d)
[[ -n "${KEEP_WORK:-}" ]] && echo "work: $work" || trap 'rm -rf "$work"' EXIT
breaches=0
breach() {
    echo "BREACH $*"
    breaches=$((breaches + 1))
}

layer_rank() {
    case "$1" in
    base) echo 0 ;;
    bootstrap | device | algos) echo 1 ;;
    topo) echo 2 ;;
    transport) echo 3 ;;
    exec) echo 4 ;;
    core) echo 5 ;;
    nccl) echo 6 ;;
    *) echo -1 ;;
    esac
}

mapfile -t files < <(find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.def' \) | sort)
[[ ${#files[@]} -gt 0 ]] || { echo "no files under src/"; exit 2; }

# ---- 1. layers ---------------------------------------------------------------
for f in "${files[@]}"; do
    from=${f#src/}
    from=${from%%/*}
    rf=$(layer_rank "$from")
    [[ $rf -ge 0 ]] || { breach "$f: folder src/$from/ has no layer (add it to check_layers.sh and docs/architecture.md)"; continue; }
    while IFS= read -r inc; do
        to=${inc%%/*}
        [[ "$inc" == */* && -e "src/$inc" ]] || continue
        [[ "$to" == "$from" ]] && continue
        [[ "$from" == exec && "$inc" == core/communicator.h ]] && continue
        if [[ "$from" == nccl ]]; then
            breach "$f includes $inc: src/nccl/ is built on include/ccl.h alone"
            continue
        fi
        rt=$(layer_rank "$to")
        if [[ $rt -ge $rf ]]; then
            breach "$f includes $inc: src/$to/ is not below src/$from/"
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

# ---- which header owns which source -------------------------------------------
# owners_of <source>: the headers that own it, one a line.
owners_of() {
    local src=$1 dir base name best="" h p
    dir=$(dirname "$src")
    base=$(basename "$src")
    name=${base%.*}
    if [[ -f "$dir/$name.h" ]]; then
        best="$dir/$name.h"
    else
        for h in "$dir"/*.h; do
            [[ -f "$h" ]] || continue
            p=$(basename "$h" .h)
            if [[ "$name" == "${p}_"* && ${#p} -gt $(($(basename "${best:-x}" .h | wc -c) - 1)) ]]; then
                best=$h
            fi
        done
    fi
    [[ -n "$best" ]] && echo "$best"
    local folder_h="$dir/$(basename "$dir").h"
    [[ -f "$folder_h" && "$folder_h" != "$best" ]] && echo "$folder_h"
}

# The module a file belongs to, for the loop check: a header is its own;
# a source belongs to its first owner (itself when it has none).
: >"$work/owners"
for f in "${files[@]}"; do
    case "$f" in
    *.c | *.cu)
        mapfile -t own < <(owners_of "$f")
        echo "$f ${own[*]:-}" >>"$work/owners"
        ;;
    esac
done
module_of() {
    case "$1" in
    *.h | *.cuh | *.def) echo "$1" ;;
    *) awk -v f="$1" '$1 == f { print ($2 != "" ? $2 : $1); exit }' "$work/owners" ;;
    esac
}

# ---- 2. honest headers --------------------------------------------------------
# gcc -aux-info lists every prototype (NC) and definition (NF) a translation
# unit sees, with the file and line each comes from.
hwloc_cflags=$(pkg-config --cflags hwloc 2>/dev/null)
for f in "${files[@]}"; do
    [[ "$f" == *.c ]] || continue
    # shellcheck disable=SC2086
    "$CC" -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc $hwloc_cflags ${CFLAGS_EXTRA:-} -fsyntax-only \
        -aux-info "$work/aux.$$" "$f" 2>"$work/cc.err" || { breach "$f does not compile: $(head -n 3 "$work/cc.err")"; continue; }
    cat "$work/aux.$$" >>"$work/aux"
done
# "name file kind": kind C (declared) or F (defined), only src/ files.
sed -n 's|^/\* \(src/[^:]*\):[0-9]*:[A-Z]*\([CF]\) \*/ \(.*\)$|\1 \2 \3|p' "$work/aux" |
    awk '{ line = $0; sub(/ *\(.*/, "", line); n = split(line, w, /[ *]+/); print w[n], $1, $2 }' | sort -u >"$work/funcs"
awk '$3 == "F" && $2 ~ /\.c$/ { print $1, $2 }' "$work/funcs" | sort -u >"$work/defs"
awk '$3 == "C" && $2 ~ /\.h$/ { print $1, $2 }' "$work/funcs" | sort -u >"$work/decls"
while read -r fn hdr; do
    def=$(awk -v n="$fn" '$1 == n { print $2; exit }' "$work/defs")
    [[ -n "$def" ]] || continue
    if ! grep -qx "$def .*$hdr.*" "$work/owners" && ! awk -v d="$def" -v h="$hdr" '$1 == d { for (i = 2; i <= NF; i++) if ($i == h) found = 1 } END { exit !found }' "$work/owners"; then
        breach "$hdr declares $fn, which $def defines: a header declares its own module's functions only"
    fi
done <"$work/decls"

# ---- 3. no include loops -------------------------------------------------------
: >"$work/edges"
for f in "${files[@]}"; do
    m=$(module_of "$f")
    while IFS= read -r inc; do
        [[ -e "src/$inc" ]] || continue
        t=$(module_of "src/$inc")
        [[ "$t" == "$m" ]] && continue
        echo "$m $t" >>"$work/edges"
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
sort -u "$work/edges" -o "$work/edges"
# tsort names the members of each loop it finds on stderr.
if ! tsort "$work/edges" >/dev/null 2>"$work/loops"; then
    loop=$(grep -v 'input contains a loop' "$work/loops" | sed 's/^tsort: //' | tr '\n' ' ')
    breach "include loop between modules: $loop"
fi

# ---- 4. file length -----------------------------------------------------------
for f in "${files[@]}"; do
    n=$(wc -l <"$f")
    [[ $n -le $MAX_LINES ]] || breach "$f has $n lines (at most $MAX_LINES: split it by concern)"
done

nsrc=$(grep -c . "$work/owners")
ndecl=$(grep -c . "$work/decls")
if [[ $breaches -gt 0 ]]; then
    echo "check_layers: $breaches breaches (${#files[@]} files, $nsrc sources, $ndecl declarations)"
    exit 1
fi
echo "check_layers: ok (${#files[@]} files, $nsrc sources, $ndecl declarations, every rule holds)"
