#!/usr/bin/env bash
# run_tests.sh - runs the Python package's tests (python/tests, pytest) under
# Debian's /usr/bin/python3, against this clone's libccl.
#
#   [BUILD=<dir>] python/run_tests.sh [pytest arguments]
#
# The library is $CCL_LIBRARY if set, else <repo>/$BUILD/lib/libccl.so
# (BUILD defaults to build). Exits 77 (skipped, for tests/run_all.sh's
# MAY_SKIP) with the reason on its last line when the interpreter, numpy or
# pytest is missing; the mpi4py and torch tests skip themselves when their
# module is missing (pytest reports them as skipped).
#
# Environment:
#   PYTHON       the interpreter (default /usr/bin/python3: the other
#                python3 on these machines has no numpy, torch or mpi4py)
#   CCL_TIMEOUT  seconds any ccl wait may last (default 60 here), so a
#                failing rank ends the run instead of hanging it
set -u

cd "$(dirname "$0")/.." || exit 2
PY=${PYTHON:-/usr/bin/python3}

if [[ ! -x $PY ]]; then
    echo "no $PY: the Python tests need Debian's python3"
    exit 77
fi
for mod in numpy pytest; do
    if ! "$PY" -c "import $mod" 2>/dev/null; then
        echo "$PY cannot import $mod: apt-get install python3-$mod"
        exit 77
    fi
done

if [[ -z ${CCL_LIBRARY:-} ]]; then
    CCL_LIBRARY="$PWD/${BUILD:-build}/lib/libccl.so"
fi
if [[ ! -e $CCL_LIBRARY ]]; then
    echo "no $CCL_LIBRARY: run make first"
    exit 1
fi
export CCL_LIBRARY
export CCL_TIMEOUT=${CCL_TIMEOUT:-60}
# Leave no __pycache__ or .pytest_cache behind in the source tree.
export PYTHONDONTWRITEBYTECODE=1
exec "$PY" -m pytest -p no:cacheprovider -q -rs python/tests "$@"
