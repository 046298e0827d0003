#!/usr/bin/env bash
# two_jobs.sh - two jobs that share one CCL_COMM_ID never form one
# communicator (issue 37): their ranks stay together or fail with a message
# that says why, never mixed.
#
#   tests/net/two_jobs.sh BUILD_DIR
#
# Each job is 2 ranks of $BUILD/tests/net/job_member, which sums its job's
# mark over the communicator (job A marks 1, job B 1000: a mixed one sums
# 1001 and job_member exits 3). Cases:
#  - RANK/WORLD_SIZE launches with torchrun's TORCHELASTIC_RUN_ID, in
#    interleaved start orders, the issue's first (A0, B1, B0, A1);
#  - two mpirun jobs (Open MPI names each by PMIx namespace), the second
#    started while the first one's root still waits for its late rank 1:
#    the second's rank 1 must be refused by name;
#  - no launcher job name at all: the one WARN that says jobs cannot be
#    told apart (and how to fix it).
# Every rank that fails must print an error: a refusal naming the other
# job, the taken root port, or a timeout waiting for its own ranks.
set -u
BUILD=${1:-build}
BIN="$BUILD/tests/net/job_member"
[[ -x "$BIN" ]] || { echo "two_jobs: $BIN is not built"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
# Launcher variables of whatever runs this test must not name our jobs.
unset PMIX_NAMESPACE OMPI_MCA_ess_base_jobid TORCHELASTIC_RUN_ID SLURM_JOB_ID SLURM_JOBID SLURM_STEP_ID \
    SLURM_STEPID FLUX_JOB_ID PBS_JOBID LSB_JOBID CCL_COMM_SECRET
port=$((30000 + RANDOM % 20000))

bad() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# check CASE: every rank's output in $work/CASE.*; none mixed, every
# failure explained; prints what each rank said.
check() {
    local c=$1 f st refused=0
    for f in "$work/$c".*.out; do
        st=$(cat "${f%.out}.rc")
        sed 's/^/    /' "$f" | grep -E "^    job|refused|cannot run" | head -3
        case $st in
        0) ;;
        3) bad "$c: $(basename "$f"): ranks of two jobs formed one communicator" ;;
        1) grep -qE "another job|CCL_COMM_ID|timed out|waiting for all" "$f" ||
               bad "$c: $(basename "$f"): failed without saying why"
           grep -q "belongs to another job" "$f" && refused=1 ;;
        *) bad "$c: $(basename "$f"): exit status $st" ;;
        esac
    done
    echo "$refused" > "$work/$c.refused"
}

# rank CASE JOB MARK RANK [DELAY_MS] in the background, RANK/WORLD_SIZE style
rank() {
    local c=$1 job=$2 mark=$3 r=$4 delay=${5:-0}
    (env CCL_COMM_ID="127.0.0.1:$port" CCL_TIMEOUT=6 TORCHELASTIC_RUN_ID="$job" RANK="$r" WORLD_SIZE=2 \
        "$BIN" "$mark" "$delay" > "$work/$c.$job$r.out" 2>&1
     echo $? > "$work/$c.$job$r.rc") &
}

# Start orders: job:rank[:seconds to sleep after starting it]
orders=("A:0:0.3 B:1:0.1 B:0:0.3 A:1" "B:1:0.3 A:0:0.3 A:1:0.2 B:0" "A:0:0.2 B:0:0.2 A:1:0.2 B:1"
        "A:0 A:1:0.5 B:0 B:1")
n=0
for order in "${orders[@]}"; do
    n=$((n + 1)) port=$((port + 1))
    echo "order $n ($order), CCL_COMM_ID 127.0.0.1:$port:"
    for step in $order; do
        IFS=: read -r job r pause <<<"$step"
        rank "env$n" "$job" "$([[ $job == A ]] && echo 1 || echo 1000)" "$r"
        [[ -n "$pause" ]] && sleep "$pause"
    done
    wait
    check "env$n"
done
# The issue's order must reach the refusal, not just avoid mixing.
[[ $(cat "$work/env1.refused") == 1 ]] || bad "order 1: no rank was told it reached another job's root"

if command -v mpirun >/dev/null 2>&1; then
    port=$((port + 1))
    echo "two mpirun jobs, CCL_COMM_ID 127.0.0.1:$port:"
    mpi=(mpirun --oversubscribe --bind-to none --mca btl self,vader -np 2 -x CCL_COMM_ID -x CCL_TIMEOUT)
    for job in A B; do
        (env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 CCL_COMM_ID="127.0.0.1:$port" CCL_TIMEOUT=6 \
            "${mpi[@]}" "$BIN" $([[ $job == A ]] && echo "1 1500" || echo "1000 0") > "$work/mpi.$job.out" 2>&1
         echo $? > "$work/mpi.$job.rc") &
        sleep 0.5
    done
    wait
    # mpirun's status is its worst rank's: 3 still means mixed.
    check mpi
    [[ $(cat "$work/mpi.A.rc") == 0 ]] || bad "mpi: job A (started first) failed"
    [[ $(cat "$work/mpi.refused") == 1 ]] || bad "mpi: job B's rank 1 was not told it reached job A's root"
else
    echo "SKIPPED: the mpirun case (no mpirun)"
fi

port=$((port + 1))
echo "no launcher job name:"
env CCL_COMM_ID="127.0.0.1:$port" CCL_TIMEOUT=6 RANK=0 WORLD_SIZE=1 "$BIN" 7 \
    > "$work/anon.out" 2>&1 || bad "anonymous 1-rank job failed: $(cat "$work/anon.out")"
grep -q "cannot be told apart" "$work/anon.out" || bad "no WARN that jobs cannot be told apart"
grep -c "cannot be told apart" "$work/anon.out" | grep -qx 1 || bad "the WARN came more than once"

if ((fails)); then
    echo "two_jobs: $fails failure(s)"
    exit 1
fi
echo "two_jobs: passed"
