"""pytest setup for ccl's Python tests: the package under test is this
clone's (python/ccl, which loads build/lib/libccl.so unless CCL_LIBRARY
says otherwise), and every wait is bounded.

ccl reads its environment at the first call of a process, so CCL_TIMEOUT
is set here, before any test imports ccl: a rank that fails leaves its
peers an error after 60 s at most, not a hang (run_tests.sh sets it too).
"""

import os
import pathlib
import sys

os.environ.setdefault("CCL_TIMEOUT", "60")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
