#!/usr/bin/env bash
# check_perf_json.sh - ccl-perf -J: the JSON file holds one object per row
# and placement of the text table, with its sizes and no wrong values,
# and parses as JSON (Debian's python3, or jq, where present).
#   tests/common/check_perf_json.sh CCL_PERF [ccl-perf options...]
set -uo pipefail
perf=$1
shift
dir=$(mktemp -d /tmp/ccl-perf-json.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$perf" "$@" -J "$dir/out.json" >"$dir/out.txt" || { cat "$dir/out.txt"; echo "ccl-perf failed"; exit 1; }
cat "$dir/out.txt"
rows=$(awk '!/^#/ && NF >= 13' "$dir/out.txt" | wc -l)
objs=$(grep -c '"collective"' "$dir/out.json")
[[ $rows -gt 0 && $objs -eq $((2 * rows)) ]] || { echo "JSON: $objs objects for $rows table rows (want 2 per row)"; exit 1; }
# Each table row's size appears in the JSON, out of place with a time.
while read -r size; do
    grep -q "\"size_bytes\": $size, .*\"in_place\": false, \"time_us\": [0-9]" "$dir/out.json" ||
        { echo "JSON: no out-of-place row of $size B with a time"; exit 1; }
done < <(awk '!/^#/ && NF >= 13 { print $1 }' "$dir/out.txt")
if grep -q '"wrong": [1-9]' "$dir/out.json"; then
    echo "JSON: a row reports wrong values"
    exit 1
fi
if [[ -x /usr/bin/python3 ]]; then
    /usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$dir/out.json" || { echo "JSON does not parse"; exit 1; }
elif command -v jq >/dev/null; then
    jq empty "$dir/out.json" || { echo "JSON does not parse"; exit 1; }
fi
echo "JSON: $objs objects, consistent with the table"
