#!/usr/bin/env bash
# check_docs.sh - the parts of docs/ that are facts about the code must match
# the code. run_all.sh runs it (docs/check_docs); it needs no build.
#
#   - docs/env.md must be exactly what scripts/gen_env_doc.sh prints from
#     src/base/params.def now (regenerate: scripts/gen_env_doc.sh > docs/env.md);
#   - every code of ccl_result_t in include/ccl.h (CCL_SUCCESS, CCL_IN_PROGRESS
#     and every CCL_ERR_*) must have its row in docs/api.md's table of
#     results, "| `NAME` | VALUE | meaning |", with the value ccl.h gives it.
#
# Prints what is wrong (the diff, the missing codes) and exits 1; prints one
# summary line and exits 0 when all is well.
set -u

cd "$(dirname "$0")/.." || exit 2
env_doc=${ENV_DOC:-docs/env.md}
api_doc=${API_DOC:-docs/api.md}
fail=0

# ---- docs/env.md --------------------------------------------------------------
if ! fresh=$(scripts/gen_env_doc.sh); then
    echo "FAIL: scripts/gen_env_doc.sh failed (see above)"
    fail=1
elif [[ ! -f "$env_doc" ]]; then
    echo "FAIL: $env_doc is missing; run: scripts/gen_env_doc.sh > docs/env.md"
    fail=1
elif ! diff -u --label "$env_doc" --label "scripts/gen_env_doc.sh (from src/base/params.def)" \
        "$env_doc" <(printf '%s\n' "$fresh"); then
    echo "FAIL: $env_doc differs from what src/base/params.def gives now;"
    echo "      run: scripts/gen_env_doc.sh > docs/env.md"
    fail=1
fi
nvars=$(grep -c '^CCL_PARAM(' src/base/params.def)

# ---- result codes in docs/api.md ------------------------------------------------
# NAME VALUE for each enumerator of ccl_result_t (CCL_NUM_RESULTS is a count).
codes=$(awk '/^typedef enum/ { inside = 1; n = 0; next }
             inside && /^} *ccl_result_t;/ { for (i = 0; i < n; i++) print names[i], vals[i]; exit }
             inside && /^} / { inside = 0; next }
             inside && match($0, /^[ \t]*CCL_[A-Z0-9_]+[ \t]*=[ \t]*[0-9]+/) {
                 s = substr($0, RSTART, RLENGTH); gsub(/[ \t]/, "", s); split(s, kv, "=")
                 names[n] = kv[1]; vals[n] = kv[2]; n++ }' include/ccl.h)
ncodes=$(grep -c . <<<"$codes")
if [[ $ncodes -lt 21 ]] || ! grep -q '^CCL_ERR_' <<<"$codes"; then
    echo "FAIL: found only $ncodes codes of ccl_result_t in include/ccl.h; has its layout changed?"
    fail=1
fi
missing=()
if [[ ! -f "$api_doc" ]]; then
    echo "FAIL: $api_doc is missing"
    fail=1
else
    while read -r name value; do
        [[ -n "$name" ]] || continue
        if ! grep -Eq "^\| *\`$name\` *\| *$value *\| *[^ |]" "$api_doc"; then
            missing+=("$name = $value")
        fi
    done <<<"$codes"
fi
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "FAIL: $api_doc has no row \"| \`NAME\` | VALUE | meaning |\" for ${#missing[@]} code(s) of include/ccl.h:"
    printf '      %s\n' "${missing[@]}"
    fail=1
fi

if [[ $fail -eq 0 ]]; then
    echo "docs: $env_doc matches $nvars rows of src/base/params.def; $api_doc documents all $ncodes result codes"
fi
exit $fail
