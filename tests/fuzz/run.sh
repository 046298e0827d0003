#!/usr/bin/env bash
# run.sh - runs libFuzzer targets that `make fuzz-build` made.
#
#   tests/fuzz/run.sh SECONDS BUILD/fuzz/bin/fuzz_<name>...
#
# Each target starts from its seed corpus, tests/fuzz/corpus/<name>/ (read
# only: it is committed), and what earlier runs found, BUILD/fuzz/corpus/
# <name>/ (where new inputs go), then fuzzes until SECONDS have passed. A
# crash, a leak or a broken promise (FUZZ_REQUIRE) leaves the input in
# BUILD/fuzz/artifacts/ and fails the run; the line to replay it is printed.
# Prints one line per target; exits non-zero if any failed.
set -u
if [[ $# -lt 2 ]]; then
    echo "usage: $0 SECONDS FUZZ_BINARY..." >&2
    exit 2
fi
secs=$1
shift
src=$(cd "$(dirname "$0")" && pwd)
failed=0
for bin in "$@"; do
    name=$(basename "$bin")
    fuzzdir=$(dirname "$(dirname "$bin")")
    work="$fuzzdir/corpus/$name"
    art="$fuzzdir/artifacts"
    log="$fuzzdir/logs/$name.log"
    mkdir -p "$work" "$art" "$(dirname "$log")"
    seeds="$src/corpus/$name"
    [[ -d "$seeds" ]] || seeds=""
    start=$(date +%s)
    # -timeout: one input may take 10 s at most (a hang is a failure too).
    "$bin" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$art/$name-" "$work" ${seeds:+"$seeds"} >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [[ $rc -eq 0 ]]; then
        echo "fuzz $name: ok, ${runs:-?} inputs in $(($(date +%s) - start)) s (log $log)"
    else
        failed=1
        echo "fuzz $name: FAILED (exit $rc), log $log:"
        grep -E "ERROR|SUMMARY|parser accepted|Test unit written" "$log" | head -n 20 | sed 's/^/    /'
        crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
        [[ -n "$crash" ]] && echo "    replay: $bin $crash"
    fi
done
exit $failed
