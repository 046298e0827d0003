# paths.sh - sourced by the scripts of tests/cluster: HERE (this folder),
# REPO (the repository), BUILD (the build folder, absolute and exported; a
# relative BUILD is taken from the repository root, default build) and C
# (cluster.sh).
# shellcheck shell=bash disable=SC2034 # the variables are for the sourcing script
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${BUILD:-build}
[[ "$BUILD" = /* ]] || BUILD="$REPO/$BUILD"
export BUILD
C="$HERE/cluster.sh"
