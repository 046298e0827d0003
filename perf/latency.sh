#!/usr/bin/env bash
# latency.sh: the smallest call of each collective, ccl against Open MPI on
# this host, side by side in one run.
#
# For each collective and rank count: ccl-perf with its default -z 0 (calls
# queued on a ccl stream, then synchronized), ccl-perf -z 1 (every call
# blocks, as MPI's do), and build/bin/mpi-bench under Open MPI (vader), with
# and without glibc's malloc hugetlb tunable. The size is one float per
# rank where the collective splits its buffer over the ranks (8 B x ranks
# for reduce_scatter, allgather, alltoall, gather, scatter), else 8 B.
# Repetitions are interleaved (every configuration once, then again), and
# the median time per call is reported, with ccl / best Open MPI ratios
# (below 1: ccl faster). Each run times its size -N times in a row
# (nccl-tests' run_cycles, both benchmarks), and the median is over every
# cycle of every run: the first timed row of a ccl-perf run is often slower
# than the next ones, and this way neither benchmark is judged by one row.
# compare.sh does the same for bandwidth sizes, one row per run.
#
# usage: perf/latency.sh [-r R] [-n ITERS] [-N CYCLES] [-C COLLS] [-p "NPS"] [-o FILE]
#   -r R      repetitions per configuration (default 5)
#   -n ITERS  timed calls per run (default 5000, after ITERS/10 warm-up calls)
#   -N CYCLES timed rows per run (default 3)
#   -C COLLS  comma-separated collectives (default
#             allreduce,broadcast,reduce_scatter,alltoall)
#   -p NPS    rank counts (default "2 4")
#   -o FILE   also write the report to FILE
# environment: BUILD (default build), MPIRUN (default mpirun)

set -u -o pipefail

R=5
ITERS=5000
CYCLES=3
COLLS=allreduce,broadcast,reduce_scatter,alltoall
NPS="2 4"
OUT=""
while getopts "r:n:N:C:p:o:h" opt; do
    case $opt in
    r) R=$OPTARG ;;
    n) ITERS=$OPTARG ;;
    N) CYCLES=$OPTARG ;;
    C) COLLS=$OPTARG ;;
    p) NPS=$OPTARG ;;
    o) OUT=$OPTARG ;;
    *) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done

BUILD=${BUILD:-build}
MPIRUN=${MPIRUN:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for bin in "$BUILD/bin/ccl-perf" "$BUILD/bin/mpi-bench"; do
    [[ -x "$bin" ]] || { echo "latency.sh: $bin is not built (make && make tools)" >&2; exit 2; }
done
WARM=$((ITERS / 10 + 1))
RAW=$(mktemp -d /tmp/ccl-latency.XXXXXX)
trap 'rm -rf "$RAW"' EXIT

bytes_of() { # collective, ranks
    case $1 in
    reduce_scatter | allgather | alltoall | gather | scatter) echo $((8 * $2)) ;;
    *) echo 8 ;;
    esac
}

# One run: prints the time per call (us) of the out-of-place column, one
# line per cycle.
run_one() { # variant coll np bytes
    local v=$1 c=$2 np=$3 b=$4 flags
    flags=(-C "$c" -d float -o sum -b "$b" -e "$b" -f 2 -N "$CYCLES" -n "$ITERS" -w "$WARM" -c 0 -a 3)
    case $v in
    ccl) "$BUILD/bin/ccl-perf" -m host --np "$np" -z 0 "${flags[@]}" ;;
    cclb) "$BUILD/bin/ccl-perf" -m host --np "$np" -z 1 "${flags[@]}" ;;
    ompi) "$MPIRUN" --oversubscribe -np "$np" --mca pml ob1 --mca btl self,vader "$BUILD/bin/mpi-bench" "${flags[@]}" ;;
    ompih) GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$MPIRUN" --oversubscribe -np "$np" -x GLIBC_TUNABLES \
        --mca pml ob1 --mca btl self,vader "$BUILD/bin/mpi-bench" "${flags[@]}" ;;
    esac 2>/dev/null | awk -v b="$b" '!/^#/ && $1 == b { print $6 }'
}

variants=(ccl cclb ompi ompih)
IFS=, read -r -a colls <<<"$COLLS"
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load=$(cut -d' ' -f1-3 /proc/loadavg)
for ((rep = 1; rep <= R; rep++)); do
    for c in "${colls[@]}"; do
        for np in $NPS; do
            b=$(bytes_of "$c" "$np")
            for v in "${variants[@]}"; do
                t=$(run_one "$v" "$c" "$np" "$b")
                echo "${t:-NaN}" >>"$RAW/$c.$np.$v" # one line per cycle
            done
        done
    done
    echo "latency.sh: repetition $rep of $R done" >&2
done

median() { sort -g "$1" | grep -v NaN | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { m = (b < c) ? b : c; if (a == "-" || m <= 0) print "-"; else printf "%.2f\n", a / m }'; }

report() {
    echo "# Smallest-call latency: ccl against Open MPI"
    echo
    echo "$started; $(nproc) cores; load average at the start $load; Open MPI $(ompi_info --version 2>/dev/null | awk 'NR == 1 { print $NF }')."
    echo "Median over $R interleaved runs x $CYCLES cycles (-N); $ITERS timed calls per cycle after $WARM warm-up calls; time per call in us, max over ranks (-a 3), out of place."
    echo "ccl = ccl-perf -z 0 (queued on a ccl stream), ccl -z 1 = blocking calls; ompi+huge = GLIBC_TUNABLES=glibc.malloc.hugetlb=1."
    echo "Ratios: ccl time / best Open MPI time (below 1: ccl faster)."
    echo
    echo '```sh'
    echo "perf/latency.sh -r $R -n $ITERS -N $CYCLES -C $COLLS -p \"$NPS\""
    echo '```'
    echo
    echo "| collective | ranks | bytes | ccl | ccl -z 1 | ompi | ompi+huge | ccl / ompi | ccl -z 1 / ompi |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for c in "${colls[@]}"; do
        for np in $NPS; do
            local m=()
            for v in "${variants[@]}"; do
                m+=("$(median "$RAW/$c.$np.$v")")
            done
            echo "| $c | $np | $(bytes_of "$c" "$np") | ${m[0]} | ${m[1]} | ${m[2]} | ${m[3]} | $(ratio "${m[0]}" "${m[2]}" "${m[3]}") | $(ratio "${m[1]}" "${m[2]}" "${m[3]}") |"
        done
    done
}

if [[ -n "$OUT" ]]; then
    report | tee "$OUT"
else
    report
fi
