"""ccl under mpirun with mpi4py: the unique id goes out by mpi4py's bcast,
and each collective is checked against MPI's own (mpi_check.py, launched
with mpirun -np 3 by this test, each rank a /usr/bin/python3 process)."""

import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py")

HERE = os.path.dirname(os.path.abspath(__file__))


def _mpirun_args():
    version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    if "Open MPI" not in version:
        return []
    # More ranks than cores here: Open MPI refuses that without
    # --oversubscribe, and binding would pile the ranks onto one core.
    return ["--oversubscribe", "--bind-to", "none"]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not found")
@pytest.mark.parametrize("nranks", (3,))
def test_against_mpi(nranks):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = ["mpirun", *_mpirun_args(), "-np", str(nranks), "-x", "CCL_TIMEOUT", "-x", "PYTHONPATH",
           sys.executable, os.path.join(HERE, "mpi_check.py")]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"mpirun did not finish in 120 s:\n{e.stdout}\n{e.stderr}")
    assert out.returncode == 0, f"mpirun exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    assert f"ok all on {nranks} ranks" in out.stdout, out.stdout + out.stderr
