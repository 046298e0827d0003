#!/bin/bash
# ab.sh - interleaved A/B of ccl settings (and Open MPI), sorted by where the
# vCPUs sat: the tool behind perf/RESULTS.md's threshold choices.
#
# usage: perf/ab.sh [-r REPS] [-n NP] [-C COLL] [-b MIN] [-e MAX] [-i ITERS] [-w WARMUP] [-z 0|1] CONFIG...
#   CONFIG: name=VAR=value[,VAR=value...] runs ccl-perf with those variables
#           (name=- for none; a comma starts another VAR=value only where
#           one follows, so CCL_ALGO=tree,rd stays whole); ompi and ompih
#           run mpi-bench under Open MPI
#           (ompih with GLIBC_TUNABLES=glibc.malloc.hugetlb=1).
#   Defaults: -r 5 -n 2 -C allreduce -b 1M -e 16M -i 20 -w 5 -z 0
#   (-z: ccl-perf's; 1 = every ccl call blocks, as MPI's do).
#   e.g. perf/ab.sh -C allgather base=- sc1=CCL_SINGLE_COPY_THRESHOLD=1M ompih
#   PERF_BIN=path in a configuration runs that ccl-perf instead of
#   build/bin/ccl-perf (an A/B of two builds: old=PERF_BIN=/tmp/old/ccl-perf).
#
# Each repetition runs every configuration once, in turn, so that they share
# the machine's slow and fast phases. build/bin/core-rtt runs before and
# after each invocation: on the project's VMs the host moves the vCPUs
# every few seconds (perf/core_rtt.c), and FIFO transfers run 3-5x slower
# when they sit far apart, so the report gives medians per placement
# (smt, socket, far; "moved" when before and after differ, "unknown" when
# core-rtt could not run), with the
# invocation count, and each configuration's time over the first one's.
# Times are ccl-perf's out-of-place column (-a 3: max over ranks), in us.
set -u
cd "$(dirname "$0")/.." || exit 2
R=5 NP=2 COLL=allreduce MIN=1M MAX=16M ITERS=20 WARMUP=5 Z=0
while getopts "r:n:C:b:e:i:w:z:h" o; do
    case $o in
    r) R=$OPTARG ;; n) NP=$OPTARG ;; C) COLL=$OPTARG ;; b) MIN=$OPTARG ;; e) MAX=$OPTARG ;;
    i) ITERS=$OPTARG ;; w) WARMUP=$OPTARG ;; z) Z=$OPTARG ;;
    *) sed -n '/^# usage:/,/^#   e.g./s/^# \{0,1\}//p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "ab.sh: name at least one configuration (-h)" >&2; exit 2; }
need="build/bin/ccl-perf build/bin/core-rtt"
case " $* " in *" ompi "* | *" ompih "*) need="$need build/bin/mpi-bench" ;; esac
for b in $need; do
    [ -x $b ] || { echo "ab.sh: $b missing: run make all tools" >&2; exit 2; }
done
case "$R" in '' | *[!0-9]*) echo "ab.sh: -r wants a number" >&2; exit 2 ;; esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ARGS=(-C "$COLL" -d float -o sum -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w "$WARMUP" -c 0 -a 3)
MPI=(mpirun --oversubscribe -np "$NP" --mca pml ob1 --mca btl self,vader)
ROWS=$(mktemp)
trap 'rm -f "$ROWS"' EXIT
place() { timeout 15 build/bin/core-rtt -n 5000 2>/dev/null | awk '{ print $2 }' | grep . || echo unknown; }
for ((rep = 1; rep <= R; rep++)); do
    for cfg in "$@"; do
        name=${cfg%%=*}
        before=$(place)
        case $cfg in
        ompi) out=$("${MPI[@]}" build/bin/mpi-bench "${ARGS[@]}") ;;
        ompih) out=$("${MPI[@]}" -x GLIBC_TUNABLES=glibc.malloc.hugetlb=1 build/bin/mpi-bench "${ARGS[@]}") ;;
        *=*)
            # Split at the commas that start another VAR= only: values such
            # as CCL_ALGO=tree,rd hold commas of their own.
            kv=()
            [ "${cfg#*=}" = - ] || mapfile -t kv < <(sed 's/,\([A-Z_][A-Z0-9_]*=\)/\n\1/g' <<<"${cfg#*=}")
            bin=build/bin/ccl-perf
            for i in "${!kv[@]}"; do
                case ${kv[$i]} in PERF_BIN=*) bin=${kv[$i]#PERF_BIN=}; unset "kv[$i]" ;; esac
            done
            [ -x "$bin" ] || { echo "ab.sh: $name: $bin is not an executable ccl-perf" >&2; exit 2; }
            out=$(env "${kv[@]}" "$bin" -m host --np "$NP" -W 1 -z "$Z" "${ARGS[@]}") ;;
        *) echo "ab.sh: configuration '$cfg' is neither name=VARS nor ompi/ompih" >&2; exit 2 ;;
        esac
        after=$(place)
        where=$([ "$before" = "$after" ] && echo "$before" || echo moved)
        echo "$out" | awk -v p="$where" -v c="$name" '$1 ~ /^[0-9]+$/ && NF >= 9 { print p, c, $1, $6 }' >>"$ROWS"
    done
    echo "ab.sh: repetition $rep of $R done" >&2
done
echo "# perf/ab.sh -r $R -n $NP -z $Z -C $COLL -b $MIN -e $MAX -i $ITERS -w $WARMUP $*"
echo "# median us per call (invocations), by vCPU placement; ratio = time / $(echo "${1%%=*}")'s"
awk -v order="$(for c in "$@"; do printf '%s ' "${c%%=*}"; done)" '
    function median(list,    v, n, i, j, t) {
        n = split(list, v, " ")
        for (i = 2; i <= n; i++) {
            t = v[i] + 0
            for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]
            v[j + 1] = t
        }
        return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    { t[$1, $2, $3] = t[$1, $2, $3] " " $4; cnt[$1, $2, $3]++; size[$3] = 1; seen[$1] = 1 }
    END {
        nc = split(order, cf, " ")
        ns = 0
        for (s in size) sz[++ns] = s + 0
        for (i = 2; i <= ns; i++) { x = sz[i]; for (j = i - 1; j >= 1 && sz[j] > x; j--) sz[j + 1] = sz[j]; sz[j + 1] = x }
        split("smt socket far moved unknown", pl, " ")
        for (p = 1; p <= 5; p++) {
            if (!(pl[p] in seen)) continue
            for (k = 1; k <= ns; k++) {
                line = sprintf("%-6s %9d", pl[p], sz[k]); base = ""
                for (c = 1; c <= nc; c++) {
                    key = pl[p] SUBSEP cf[c] SUBSEP sz[k]
                    if (!(key in cnt)) { line = line sprintf("  %s -", cf[c]); continue }
                    m = median(t[key])
                    if (c == 1) base = m
                    line = line sprintf(m < 10 ? "  %s %.3f (%d)" : "  %s %.1f (%d)", cf[c], m, cnt[key])
                    if (c > 1 && base != "") line = line sprintf(" %.2f", m / base)
                }
                print line
            }
        }
    }' "$ROWS"
