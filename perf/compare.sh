#!/usr/bin/env bash
# compare.sh: ccl against Open MPI on this host, side by side, in one run.
#
# Runs ccl-perf, Open MPI (through build/bin/mpi-bench, which prints the same
# nccl-tests table) and Open MPI with glibc's malloc hugetlb tunable, each
# configuration R times, and prints markdown tables of the median per size:
#
#   - the single-thread memcpy ceiling (64 MiB and 4 MiB);
#   - allreduce float32 sum, 2 ranks, 8 B .. 64 MiB;
#   - allgather, 2 and 4 ranks, 1 MiB .. 64 MiB;
#   - oversubscribed: 8-byte allreduce on 4 ranks, 64 MiB allreduce on 8
#     ranks (time per call and wall time of the whole run).
#
# With -C, instead: the named collectives on 2 and 4 ranks (NPS), each at its
# smallest size (8 B, or one float per rank where the size is split over the
# ranks: 16 B on 4 ranks for reduce_scatter, allgather, alltoall, gather,
# scatter) and at 4, 16 and 64 MiB.
#
# Repetitions are interleaved (every configuration once, then again) so that
# load from other users of the machine spreads over all columns instead of
# landing on one; the median then drops the odd disturbed run.
#
# usage: perf/compare.sh [-r R] [-q] [-I] [-C COLLS] [-o FILE] [-k DIR | -R DIR]
#   -r R     repetitions per configuration, median reported (default 3)
#   -C COLLS comma-separated collectives (allreduce allgather reduce_scatter
#            broadcast reduce alltoall gather scatter sendrecv) in place of
#            the default sections
#   -q       quick smoke test: fewer sizes and iterations
#   -I       compare the in-place columns instead of the out-of-place ones.
#            For broadcast this is the like-for-like comparison: MPI_Bcast has
#            one buffer (mpi-bench's "out of place" only lets the root send
#            from another buffer), while ccl's out-of-place broadcast, as
#            NCCL's, also copies the root's send buffer to its receive buffer
#   -o FILE  also write the markdown report to FILE
#   -k DIR   keep every raw benchmark output in DIR
#   -R DIR   run nothing: report again from the raw output a -k run kept in
#            DIR (give the same options and environment as that run, so the
#            commands listed match; wall times are not kept)
# environment:
#   BUILD        build folder (default build)
#   CCL_PERF     ccl-perf binary (default $BUILD/bin/ccl-perf), run as
#                "$CCL_PERF -m host --np N -W 1 <nccl-tests flags>" (host
#                memory, as Open MPI's, also where a GPU would make device the
#                default; -W 1: warm-up calls before every size, as mpi-bench)
#   CCL_LAUNCH   replaces that launcher entirely; "{np}" in it becomes the
#                rank count, e.g. to check this script against MPI alone:
#                CCL_LAUNCH='mpirun --oversubscribe -np {np} build/bin/mpi-bench'
#   ITERS WARMUP iterations and warm-up calls per size (default 20 and 5;
#                quick: 5 and 2)
#   CHECK        -c value given to both benchmarks (default 0: no data check,
#                as the ccl command is specified)
#   AVERAGE      -a value given to both: how a call's time is reduced over
#                ranks (nccl-tests: 0 rank 0, 1 mean, 2 min, 3 max; default 3,
#                the slowest rank, which is when the collective is done)
#   MPIRUN       mpirun command (default mpirun)
#   SM_BTL       Open MPI shared-memory BTL (default: vader, or sm where the
#                installed Open MPI only has sm, as in 5.x)
#   NPS          rank counts of the -C sections (default "2 4")
#   BLOCKING     1: one more column, ccl-perf with -z 1 (every call blocks, as
#                MPI's do; the plain ccl column queues the calls of a row on
#                a ccl stream, nccl-tests' default). Default 1 with -C, else 0
#   RUN_TIMEOUT  seconds before one benchmark run is killed (default 600)

set -u -o pipefail

R=3
QUICK=0
OUTFILE=
KEEP=
REREPORT=
COLLS=
INPLACE=0
usage() { sed -n '/^# usage:/,/^# *RUN_TIMEOUT/s/^# \{0,1\}//p' "$0"; }
while getopts "r:qIo:k:R:C:h" opt; do
    case $opt in
    r) R=$OPTARG ;;
    q) QUICK=1 ;;
    I) INPLACE=1 ;;
    o) OUTFILE=$OPTARG ;;
    k) KEEP=$OPTARG ;;
    R) REREPORT=$OPTARG ;;
    C) COLLS=${OPTARG//,/ } ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -ne 0 ] || ! [[ $R =~ ^[1-9][0-9]*$ ]]; then usage >&2; exit 2; fi

die() { echo "compare.sh: $*" >&2; exit 2; }

BUILD=${BUILD:-build}
CCL_PERF=${CCL_PERF:-$BUILD/bin/ccl-perf}
MPI_BENCH=$BUILD/bin/mpi-bench
MEMCPY_BENCH=$BUILD/bin/memcpy-bench
CORE_RTT=$BUILD/bin/core-rtt
MPIRUN=${MPIRUN:-mpirun}
RUN_TIMEOUT=${RUN_TIMEOUT:-600}
CHECK=${CHECK:-0}
AVERAGE=${AVERAGE:-3}
if [ "$QUICK" = 1 ]; then
    ITERS=${ITERS:-5}
    WARMUP=${WARMUP:-2}
else
    ITERS=${ITERS:-20}
    WARMUP=${WARMUP:-5}
fi

# Everything must be there before the first run: a comparison with a column
# missing is not a comparison.
if [ -n "${CCL_LAUNCH:-}" ]; then
    read -r -a probe <<<"$CCL_LAUNCH"
    command -v "${probe[0]}" >/dev/null 2>&1 || die "CCL_LAUNCH command not found: ${probe[0]}"
else
    [ -x "$CCL_PERF" ] || die "missing $CCL_PERF (build it: make BUILD=$BUILD perf, or set CCL_PERF)"
    # -W 1: ccl-perf warms up before every row, over the buffers' rotation,
    # as mpi-bench does; without it ccl (warmed at the largest and smallest
    # size only, as nccl-tests) would pay first-use costs in its timed
    # calls that Open MPI pays in its warm-up.
    CCL_LAUNCH="$CCL_PERF -m host --np {np} -W 1"
fi
[ -x "$MPI_BENCH" ] || die "missing $MPI_BENCH (needs mpicc; build it: make BUILD=$BUILD tools)"
[ -x "$MEMCPY_BENCH" ] || die "missing $MEMCPY_BENCH (build it: make BUILD=$BUILD tools)"
command -v "$MPIRUN" >/dev/null 2>&1 || die "missing $MPIRUN (Debian: apt-get install openmpi-bin libopenmpi-dev)"
command -v timeout >/dev/null 2>&1 || die "missing timeout (coreutils)"

if [ -z "${SM_BTL:-}" ]; then
    if ompi_info 2>/dev/null | grep -q 'MCA btl: vader '; then SM_BTL=vader
    elif ompi_info 2>/dev/null | grep -q 'MCA btl: sm '; then SM_BTL=sm
    else die "cannot find Open MPI's shared-memory BTL with ompi_info; set SM_BTL"
    fi
fi
# Open MPI refuses to start as root unless told twice.
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

HUGETLB=glibc.malloc.hugetlb=1
MPIRUN_BASE="$MPIRUN --oversubscribe -np {np} --mca pml ob1 --mca btl self,$SM_BTL"

# Size ranges "min:max:factor[:iters:warmup]", one benchmark invocation each;
# a section's ranges are merged by size. Small sizes get their own
# invocation with many more iterations: a call of a microsecond or so timed
# 20 times is dominated by one scheduler hiccup (seen: 5 us against 0.6 us
# steady state for Open MPI's 8-byte allreduce). A 64 MiB call on 8 ranks
# takes 0.1 to 1 s, so 5 calls time it well and 20 would take minutes.
# Calls of 5 to 500 us (64 KiB to 1 MiB) get 200 iterations: with 20, one
# preemption on this shared VM moved a row by 5x from run to run.
# Both benchmarks rotate each call to the next slice of buffers as large as
# the invocation's largest size, and warm up over the first slices: in one
# invocation from 2 to 64 MiB the 2 MiB row has 32 slices and 5 warm-up
# calls, so most timed calls were first uses of their pages (ccl's single
# copy then maps the peer's pages, 2-10 us each here, which an application
# that reuses its buffers pays once). Invocations up to 8 MiB and from 16
# MiB have at most 4 slices a row, all warmed.
# Quick mode keeps the sizes the report quotes (8 B, 4 MiB, 64 MiB).
if [ "$QUICK" = 1 ]; then
    SMALL_ITERS=${SMALL_ITERS:-200}
    SMALL_WARMUP=${SMALL_WARMUP:-20}
    AR_RANGES="8:8:2:$SMALL_ITERS:$SMALL_WARMUP 4M:64M:16"
    AG_RANGES="1M:64M:8"
    OS8_RANGE="64M:64M:2:1:1"
else
    SMALL_ITERS=${SMALL_ITERS:-1000}
    SMALL_WARMUP=${SMALL_WARMUP:-100}
    MID_ITERS=${MID_ITERS:-200}
    MID_WARMUP=${MID_WARMUP:-20}
    AR_RANGES="8:32K:2:$SMALL_ITERS:$SMALL_WARMUP 64K:1M:2:$MID_ITERS:$MID_WARMUP 2M:8M:2 16M:64M:2"
    AG_RANGES="1M:1M:2:$MID_ITERS:$MID_WARMUP 2M:8M:2 16M:64M:2"
    OS8_RANGE="64M:64M:2:5:2"
fi

# Sections: id|title|ranks|collective|ranges|kind (sweep: busbw per size;
# oversub: time per call and wall time). Ids must not contain dots.
if [ -z "$COLLS" ]; then
    SECTIONS=(
        "ar2|allreduce float32 sum, 2 ranks|2|allreduce|$AR_RANGES|sweep"
        "ag2|allgather float32, 2 ranks|2|allgather|$AG_RANGES|sweep"
        "ag4|allgather float32, 4 ranks|4|allgather|$AG_RANGES|sweep"
        "os4|oversubscribed: 8 B allreduce, 4 ranks on $(nproc) cores|4|allreduce|8:8:2:$SMALL_ITERS:$SMALL_WARMUP|oversub"
        "os8|oversubscribed: 64 MiB allreduce, 8 ranks on $(nproc) cores|8|allreduce|$OS8_RANGE|oversub"
    )
else
    SECTIONS=()
    if [ "$QUICK" = 1 ]; then BIG_RANGE="64M:64M:2"; else BIG_RANGE="4M:4M:2 16M:64M:4"; fi
    for coll in $COLLS; do
        case $coll in
        allreduce | broadcast | reduce | sendrecv) split=0 ;;
        allgather | reduce_scatter | alltoall | gather | scatter) split=1 ;;
        *) die "-C: unknown collective '$coll'" ;;
        esac
        for np in ${NPS:-2 4}; do
            # nccl-tests splits the size over the ranks for these: 8 B on 4
            # ranks would be 0 floats each, so the smallest size is one each.
            small=8
            if [ $split = 1 ] && [ $((4 * np)) -gt $small ]; then small=$((4 * np)); fi
            title="$coll float32"
            case $coll in allreduce | reduce_scatter | reduce) title="$title sum" ;; esac
            SECTIONS+=("${coll//_/}$np|$title, $np ranks|$np|$coll|$small:$small:2:$SMALL_ITERS:$SMALL_WARMUP $BIG_RANGE|sweep")
        done
    done
fi
BLOCKING=${BLOCKING:-$([ -n "$COLLS" ] && echo 1 || echo 0)}
CONFIGS="ccl ompi ompih"
if [ "$BLOCKING" = 1 ]; then CONFIGS="ccl cclb ompi ompih"; fi

# The command line of one configuration, with {np} filled in.
build_cmd() { # config np coll min:max:factor[:iters:warmup]
    local cfg=$1 np=$2 coll=$3 b e f n w launch
    IFS=: read -r b e f n w <<<"$4"
    case $cfg in
    ccl) launch=$CCL_LAUNCH ;;
    cclb) launch="$CCL_LAUNCH -z 1" ;;
    ompi) launch="$MPIRUN_BASE $MPI_BENCH" ;;
    ompih) launch="$MPIRUN_BASE -x GLIBC_TUNABLES=$HUGETLB $MPI_BENCH" ;;
    esac
    printf '%s -C %s -d float -o sum -b %s -e %s -f %s -n %s -w %s -c %s -a %s' \
        "${launch//\{np\}/$np}" "$coll" "$b" "$e" "$f" "${n:-$ITERS}" "${w:-$WARMUP}" "$CHECK" "$AVERAGE"
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ccl-compare.XXXXXX") || die "cannot make a temporary folder"
trap 'rm -rf "$WORK"' EXIT
if [ -n "$KEEP" ]; then mkdir -p "$KEEP" || die "cannot create $KEEP"; fi
RAW=${KEEP:-$WORK}
FAILED=0

# Runs one benchmark: output to $RAW/<tag>.out, then one line per result
# row appended to $WORK/rows: "tag-prefix size time_us busbw wrong wall_s".
# Appends the result rows of one benchmark output to $WORK/rows.
add_rows() { # tag output-file t0 t1
    # The invocation's placement (its .rtt: before and after): one class,
    # "moved" when they differ, "unknown" without core-rtt.
    local place=unknown rtt="${2%.out}.rtt"
    [ -s "$rtt" ] && place=$(awk 'NF == 2 { print ($1 == $2 ? $1 : "moved"); exit }' "$rtt")
    [ -n "$place" ] || place=unknown
    awk -v tag="$1" -v t0="$3" -v t1="$4" -v inplace="$INPLACE" -v place="$place" '
        # nccl-tests row: size count type redop root, then time algbw busbw
        # #wrong for out-of-place, then the same four for in-place; one of
        # the two is compared (-I).
        $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= (inplace ? 13 : 9) {
            if (inplace) print tag, $1, $10, $12, $13, t1 - t0, place
            else print tag, $1, $6, $8, $9, t1 - t0, place
            n++
        }
        END { if (!n) { print "compare.sh: no result rows in " FILENAME > "/dev/stderr"; exit 1 } }
    ' "$2" >>"$WORK/rows" || FAILED=1
}

run_one() { # tag command...
    local tag=$1; shift
    local out=$RAW/$tag.out t0 t1 rc
    # Where the vCPUs sit, before and after (perf/core_rtt.c): runs are
    # comparable only within one placement.
    [ -x "$CORE_RTT" ] && timeout 15 "$CORE_RTT" -n 5000 2>/dev/null | awk '{ printf "%s ", $2 }' >"$RAW/$tag.rtt"
    t0=$(date +%s.%N)
    timeout -k 10 "$RUN_TIMEOUT" "$@" >"$out" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    [ -x "$CORE_RTT" ] && timeout 15 "$CORE_RTT" -n 5000 2>/dev/null | awk '{ print $2 }' >>"$RAW/$tag.rtt"
    # A failed run still gives its rows when it printed any (a run that
    # found wrong results exits non-zero after its table).
    if [ $rc -ne 0 ]; then
        FAILED=1
        {
            echo "compare.sh: run failed (exit $rc$([ $rc = 124 ] && echo ", timed out after ${RUN_TIMEOUT}s")): $*"
            tail -n 15 "$out" | sed 's/^/    /'
        } >&2
    fi
    add_rows "$tag" "$out" "$t0" "$t1"
}

LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
if [ -z "$REREPORT" ]; then
    echo "compare.sh: $R repetition(s), ${ITERS} iterations and ${WARMUP} warm-up calls per size; raw output in $RAW" >&2
fi

# Commands, printed once in the report exactly as run.
CMDS=$WORK/commands
{
    echo "$MEMCPY_BENCH -s 64M -s 4M"
    for s in "${SECTIONS[@]}"; do
        IFS="|" read -r id _ np coll ranges _ <<<"$s"
        for cfg in $CONFIGS; do
            for rg in $ranges; do
                build_cmd "$cfg" "$np" "$coll" "$rg"
                echo
            done
        done
    done
} >"$CMDS"

: >"$WORK/rows"
if [ -n "$REREPORT" ]; then
    # Tags are the file names; the repetition count is the largest found.
    R=0
    for out in "$REREPORT"/*.out; do
        [ -e "$out" ] || die "no *.out files in $REREPORT"
        tag=$(basename "$out" .out)
        rep=${tag##*.}
        if [ "${tag%%.*}" = memcpy ]; then
            awk '$1 == "memcpy" { print "memcpy.x.x", $2, 0, $3, 0, 0, "unknown" }' "$out" >>"$WORK/rows"
        else
            add_rows "$tag" "$out" 0 0
        fi
        if [ "$rep" -gt "$R" ]; then R=$rep; fi
    done
    LOADAVG="unknown (report made again from $REREPORT)"
fi
for ((rep = 1; rep <= (${#REREPORT} ? 0 : R); rep++)); do
    echo "compare.sh: repetition $rep of $R" >&2
    if "$MEMCPY_BENCH" -s 64M -s 4M >"$RAW/memcpy.$rep.out" 2>&1; then
        awk '$1 == "memcpy" { print "memcpy.x.x", $2, 0, $3, 0, 0, "unknown" }' "$RAW/memcpy.$rep.out" >>"$WORK/rows"
    else
        FAILED=1
        echo "compare.sh: memcpy-bench failed" >&2
    fi
    for s in "${SECTIONS[@]}"; do
        IFS="|" read -r id _ np coll ranges _ <<<"$s"
        for cfg in $CONFIGS; do
            i=0
            for rg in $ranges; do
                read -r -a cmd <<<"$(build_cmd "$cfg" "$np" "$coll" "$rg")"
                echo "compare.sh:   $id $cfg $rg" >&2
                run_one "$id.$cfg.$i.$rep" "${cmd[@]}"
                i=$((i + 1))
            done
        done
    done
done

# Medians over repetitions, then the report. Tags are section.config.range.rep;
# a size is keyed by section and config, whichever range produced it.
printf '%s\n' "${SECTIONS[@]}" >"$WORK/sections"

# Per configuration, how many invocations ran with the vCPUs on one core's
# hyperthreads, one socket, or far apart (before and after agree), and how
# many saw them move; nothing when core-rtt did not run.
placements() {
    local dir=${REREPORT:-$RAW} cfg line
    ls "$dir"/*.rtt >/dev/null 2>&1 || return 0
    line=""
    for cfg in $CONFIGS; do
        line="$line$(cat "$dir"/*."$cfg".*.rtt 2>/dev/null | awk -v c="$cfg" '
            NF == 2 { n[$1 == $2 ? $1 : "moved"]++ }
            END { printf "%s: %d smt, %d socket, %d far, %d moved; ", c, n["smt"], n["socket"], n["far"], n["moved"] }')"
    done
    echo "vCPU placement per invocation ($CORE_RTT before and after; far = a cache line's round trip of 300 ns and more,"
    echo "where FIFO transfers slow down 3-5x, perf/RESULTS.md): ${line%; }."
}

report() {
    echo "# ccl vs Open MPI on $(hostname)"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo);" \
        "$(ompi_info 2>/dev/null | awk -F': *' '/Open MPI:/ { print "Open MPI " $2; exit }');" \
        "$(ldd --version 2>/dev/null | awk 'NR == 1 { print "glibc " $NF }');" \
        "THP $(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)," \
        "shared-memory THP $(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)" \
        "(ccl-info prints it)."
    echo "Load average when started: $LOADAVG."
    placements
    echo "Median of $R run(s) per configuration; per size $ITERS timed iterations after $WARMUP warm-up calls,"
    if [ -n "$COLLS" ]; then
        echo "the smallest size of each section $SMALL_ITERS after $SMALL_WARMUP."
    elif [ -n "${MID_ITERS:-}" ]; then
        echo "small sizes $SMALL_ITERS after $SMALL_WARMUP, 64 KiB to 1 MiB $MID_ITERS after $MID_WARMUP, the 8-rank 64 MiB case as in its command."
    else
        echo "small sizes $SMALL_ITERS after $SMALL_WARMUP, the 8-rank 64 MiB case as in its command."
    fi
    echo "ompi = Open MPI (pml ob1, btl self,$SM_BTL) through mpi-bench on malloc'd buffers;"
    echo "ompi+huge = the same with GLIBC_TUNABLES=$HUGETLB (malloc asks for transparent huge pages)."
    echo "Time per call: $(awk -v a="$AVERAGE" 'BEGIN { split("rank 0|mean|min|max", n, "|"); print n[a + 1] }') over ranks (-a $AVERAGE)."
    echo "busbw in GB/s (nccl-tests convention), times in us, $([ "$INPLACE" = 1 ] && echo in-place || echo out-of-place). Ratios, from the times:"
    echo "busbw ccl / best ompi (above 1: ccl faster), time ccl / best ompi (below 1: ccl faster)."
    echo "same placement (size sweeps): best ompi median time / ccl median time among the invocations whose vCPUs"
    echo "stayed on one socket (or far apart) throughout, with the invocation counts (ccl/ompi): the medians of the"
    echo "other columns mix placements, and large copies run up to 2x faster far apart."
    if [ "$BLOCKING" = 1 ]; then
        echo "ccl = ccl-perf's default (-z 0: a row's calls are queued on a ccl stream, then synchronized);"
        echo "ccl -z 1 = every call blocks (NULL stream), as each MPI call does."
        echo "paired = median over repetitions of (best ompi time / ccl time) within each repetition."
    fi
    echo
    echo "Commands:"
    echo
    echo '```sh'
    [ "$(id -u)" = 0 ] && echo "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    cat "$CMDS"
    echo '```'
    echo
    awk -v R="$R" -v B="$([ "$BLOCKING" = 1 ] && echo 1 || echo 0)" '
        function median(list,    v, n, i, j, t) {
            n = split(list, v, " ")
            for (i = 2; i <= n; i++) {          # insertion sort: mawk has no asort
                t = v[i] + 0
                for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]
                v[j + 1] = t
            }
            if (n == 0) return ""
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        function human(b) {
            if (b >= 1048576 && b % 1048576 == 0) return b / 1048576 " MiB"
            if (b >= 1024 && b % 1024 == 0) return b / 1024 " KiB"
            return b " B"
        }
        function fmt(x, p) { return x == "" ? "-" : sprintf("%." p "f", x) }
        # Times as nccl-tests prints them: fewer decimals as they grow.
        function fmt_t(x) {
            if (x == "") return "-"
            return sprintf(x >= 10000 ? "%.0f" : x >= 100 ? "%.1f" : "%.2f", x)
        }
        function cell(sec, cfg, size, what,    x) {
            x = med[sec, cfg, size, what]
            return what == "t" ? fmt_t(x) : fmt(x, 2)
        }
        # Best of the two Open MPI columns: the lower time (so the higher
        # busbw). Ratios come from times, which carry more digits than the
        # two-decimal busbw of an 8-byte call; for one size and collective
        # busbw ratio = inverse time ratio.
        function best_t(sec, size,    a, b) {
            a = med[sec, "ompi", size, "t"]; b = med[sec, "ompih", size, "t"]
            if (a == "") return b
            if (b == "") return a
            return a + 0 < b + 0 ? a : b
        }
        function best_bw(sec, size,    a, b) {
            a = med[sec, "ompi", size, "bw"]; b = med[sec, "ompih", size, "bw"]
            if (a == "") return b
            if (b == "") return a
            return a + 0 > b + 0 ? a : b
        }
        function ratio(x, y) { return (x == "" || y == "" || y + 0 == 0) ? "-" : sprintf("%.2f", x / y) }
        FILENAME ~ /sections$/ { nsec++; split($0, f, "|"); sid[nsec] = f[1]; stitle[nsec] = f[2]; skind[nsec] = f[6]; next }
        {
            split($1, tg, "."); sec = tg[1]; cfg = tg[2]
            k = sec SUBSEP cfg SUBSEP $2
            L[k, "t"] = L[k, "t"] " " $3; L[k, "bw"] = L[k, "bw"] " " $4; L[k, "wall"] = L[k, "wall"] " " $6
            if ($5 != "N/A" && $5 + 0 != 0) wrong[sec " " cfg " " $2] = $5
            if (!((sec, $2) in seen)) { seen[sec, $2] = 1; sizes[sec] = sizes[sec] " " $2 }
            T[sec, cfg, $2, tg[4]] = $3; if (tg[4] + 0 > nrep) nrep = tg[4] + 0
            if ($7 == "socket" || $7 == "far") { P[sec, cfg, $2, $7] = P[sec, cfg, $2, $7] " " $3; NP[sec, cfg, $2, $7]++ }
        }
        # Within one placement (perf/core_rtt.c: the vCPUs on one socket,
        # or far apart, where large copies run up to 2x faster): best ompi
        # median time over ccl median time, with the invocation counts;
        # "-" where either side has no run there. Only runs whose
        # placement held from start to end count.
        function placed(sec, size, pl, cfg,    c, a, b, na, nb) {
            c = median(P[sec, cfg, size, pl]); a = median(P[sec, "ompi", size, pl]); b = median(P[sec, "ompih", size, pl])
            na = NP[sec, "ompi", size, pl] + 0; nb = NP[sec, "ompih", size, pl] + 0
            if (a == "" || (b != "" && b + 0 < a + 0)) { a = b; na = nb }
            if (a == "" || c == "" || c + 0 == 0) return "-"
            return sprintf("%.2f (%d/%d)", a / c, NP[sec, cfg, size, pl], na)
        }
        # Paired ratio: in each repetition, best ompi time / the time of cfg,
        # then the median over repetitions. Load on this shared VM
        # drifts over minutes; configurations of one repetition run close
        # together, so this ratio moves less than a ratio of medians.
        function paired(sec, cfg, size,    r, a, b, c, list) {
            list = ""
            for (r = 1; r <= nrep; r++) {
                a = T[sec, "ompi", size, r]; b = T[sec, "ompih", size, r]; c = T[sec, cfg, size, r]
                if (a == "" || (b != "" && b + 0 < a + 0)) a = b
                if (a == "" || c == "" || c + 0 == 0) continue
                list = list " " a / c
            }
            return list == "" ? "-" : sprintf("%.2f", median(list))
        }
        END {
            for (k in L) med[k] = median(L[k])
            # Run-to-run spread of each cell: slowest over fastest time.
            for (k in L) {
                split(k, kk, SUBSEP)
                if (kk[4] != "t" || (n = split(L[k], v, " ")) < 2) continue
                lo = hi = v[1] + 0
                for (i = 2; i <= n; i++) { if (v[i] + 0 < lo) lo = v[i] + 0; if (v[i] + 0 > hi) hi = v[i] + 0 }
                if (lo > 0 && hi / lo > spread[kk[1]]) { spread[kk[1]] = hi / lo; spread_at[kk[1]] = kk[2] " at " human(kk[3]) }
            }
            m64 = med["memcpy", "x", 67108864, "bw"]; m4 = med["memcpy", "x", 4194304, "bw"]
            print "## memcpy ceiling (single thread, GB/s counts bytes copied)"
            print ""
            print "| size | memcpy GB/s |"
            print "|---:|---:|"
            print "| 64 MiB | " fmt(m64, 2) " |"
            print "| 4 MiB | " fmt(m4, 2) " |"
            print ""
            for (s = 1; s <= nsec; s++) {
                sec = sid[s]
                print "## " stitle[s]
                print ""
                n = split(sizes[sec], sz, " ")
                for (i = 2; i <= n; i++) {      # sizes ascending
                    t = sz[i] + 0
                    for (j = i - 1; j >= 1 && sz[j] + 0 > t; j--) sz[j + 1] = sz[j]
                    sz[j + 1] = t
                }
                if (R > 1 && sec in spread)
                    printf "Run-to-run spread: at most %.2fx between the slowest and fastest of %d runs (%s).\n\n",
                        spread[sec], R, spread_at[sec]
                if (skind[s] == "sweep" && B) {
                    # busbw ratios only: for one size the time ratio is the inverse.
                    print "| size | ccl busbw | ccl -z 1 busbw | ompi busbw | ompi+huge busbw | ccl / best ompi | ccl -z 1 / best ompi | paired ccl | paired ccl -z 1 | same placement: ccl socket | ccl far | ccl -z 1 socket | ccl -z 1 far | ccl us | ccl -z 1 us | ompi us | ompi+huge us |"
                    print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                    for (i = 1; i <= n; i++) {
                        z = sz[i]
                        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", human(z),
                            cell(sec, "ccl", z, "bw"), cell(sec, "cclb", z, "bw"),
                            cell(sec, "ompi", z, "bw"), cell(sec, "ompih", z, "bw"),
                            ratio(best_t(sec, z), med[sec, "ccl", z, "t"]),
                            ratio(best_t(sec, z), med[sec, "cclb", z, "t"]),
                            paired(sec, "ccl", z), paired(sec, "cclb", z),
                            placed(sec, z, "socket", "ccl"), placed(sec, z, "far", "ccl"),
                            placed(sec, z, "socket", "cclb"), placed(sec, z, "far", "cclb"),
                            cell(sec, "ccl", z, "t"), cell(sec, "cclb", z, "t"),
                            cell(sec, "ompi", z, "t"), cell(sec, "ompih", z, "t")
                    }
                    print ""
                } else if (skind[s] == "sweep") {
                    print "| size | ccl busbw | ompi busbw | ompi+huge busbw | ccl / best ompi | same placement: socket | far | ccl us | ompi us | ompi+huge us | time ccl / best ompi |"
                    print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                    for (i = 1; i <= n; i++) {
                        z = sz[i]
                        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", human(z),
                            cell(sec, "ccl", z, "bw"), cell(sec, "ompi", z, "bw"), cell(sec, "ompih", z, "bw"),
                            ratio(best_t(sec, z), med[sec, "ccl", z, "t"]),
                            placed(sec, z, "socket", "ccl"), placed(sec, z, "far", "ccl"),
                            cell(sec, "ccl", z, "t"), cell(sec, "ompi", z, "t"), cell(sec, "ompih", z, "t"),
                            ratio(med[sec, "ccl", z, "t"], best_t(sec, z))
                    }
                    print ""
                    c = med[sec, "ccl", 67108864, "bw"]; o = best_bw(sec, 67108864)
                    if (m64 != "" && c != "")
                        printf "ccl busbw at 64 MiB = %.0f%% of memcpy (%.2f of %.2f GB/s); best ompi = %s\n\n",
                            100 * c / m64, c, m64, o == "" ? "-" : sprintf("%.0f%%", 100 * o / m64)
                } else {
                    print "| size | ccl us/call | ompi us/call | ompi+huge us/call | time ccl / best ompi | ccl wall s | ompi wall s | ompi+huge wall s |"
                    print "|---:|---:|---:|---:|---:|---:|---:|---:|"
                    for (i = 1; i <= n; i++) {
                        z = sz[i]
                        printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", human(z),
                            cell(sec, "ccl", z, "t"), cell(sec, "ompi", z, "t"), cell(sec, "ompih", z, "t"),
                            ratio(med[sec, "ccl", z, "t"], best_t(sec, z)),
                            cell(sec, "ccl", z, "wall"), cell(sec, "ompi", z, "wall"), cell(sec, "ompih", z, "wall")
                    }
                    print ""
                    print "wall s = the whole benchmark invocation (start-up, warm-up, in-place pass included)."
                    print ""
                }
            }
            for (w in wrong) { print "**wrong results**: " w " (" wrong[w] " elements)"; bad = 1 }
            if (bad) print ""
        }
    ' "$WORK/sections" "$WORK/rows"
    if [ "$FAILED" = 1 ]; then
        echo "**Some runs failed** (messages on stderr); a cell they did not fill shows \"-\"."
    fi
}

if [ -n "$OUTFILE" ]; then
    report | tee "$OUTFILE"
else
    report
fi
[ "$FAILED" = 0 ]
