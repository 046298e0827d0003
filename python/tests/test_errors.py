"""Misuse raises exceptions with a message, never a crash or a hang:
arguments the package refuses itself (ValueError, TypeError: unsupported
dtypes, wrong sizes, non-contiguous or read-only buffers) and those ccl
refuses (CclError subclasses carrying ccl_get_last_error's text), calls
after destroy and abort, failures inside a group, a peer that aborts, and
a bootstrap that times out."""

import os
import pickle
import subprocess
import sys
import time

import numpy as np
import pytest

import ccl
from _ranks import RankPool


@pytest.fixture
def comm():
    # One rank: ccl checks every argument as with many, and no peer can
    # be left waiting by a failing call.
    c = ccl.Communicator(1, ccl.get_unique_id(), 0)
    yield c
    c.destroy()


def test_exception_classes():
    e = pickle.loads(pickle.dumps(ccl.CclTimeoutError(ccl.Result.ERR_TIMEOUT, "waited")))
    assert type(e) is ccl.CclTimeoutError and e.code == ccl.Result.ERR_TIMEOUT and e.message == "waited"
    assert str(e) == "waited [ERR_TIMEOUT]"
    assert issubclass(ccl.CclArgumentError, ccl.CclError)
    assert issubclass(ccl.CclArgumentError, ValueError)
    assert issubclass(ccl.CclTimeoutError, TimeoutError)
    assert issubclass(ccl.CclError, RuntimeError)


def test_op_values(comm):
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(ValueError, match="unknown reduction op 'median'"):
        comm.allreduce(x, op="median")
    with pytest.raises(TypeError, match="op must be"):
        comm.allreduce(x, op=1.5)
    # An int goes to ccl, which judges it.
    with pytest.raises(ccl.CclArgumentError, match="op 99") as e:
        comm.allreduce(x, op=99)
    assert e.value.code == ccl.Result.ERR_INVALID_OP
    assert "ccl_allreduce" in e.value.message
    assert comm.allreduce(x, op="MAX") is x  # names are case-insensitive


@pytest.mark.parametrize("dtype", ("int16", "complex64", "bool", "float128"))
def test_unsupported_dtype(comm, dtype):
    with pytest.raises(TypeError, match=f"dtype {dtype}, which ccl does not support"):
        comm.allreduce(np.zeros(4, dtype=dtype))


def test_not_an_array(comm):
    with pytest.raises(TypeError, match="NumPy array or a torch tensor, not list"):
        comm.allreduce([1.0, 2.0])


def test_recvbuf_size(comm):
    x = np.ones(10, dtype=np.float32)
    with pytest.raises(ValueError, match="recvbuf has 9 elements, needs 10"):
        comm.allreduce(x, np.empty(9, dtype=np.float32))
    with pytest.raises(ValueError, match="recvbuf has 11 elements, needs 10"):
        comm.allreduce(x, np.empty(11, dtype=np.float32))
    with pytest.raises(ValueError, match="recvbuf has 5 elements, needs 10"):
        comm.allgather(x, np.empty(5, dtype=np.float32))
    with pytest.raises(TypeError, match="recvbuf is float64 but sendbuf is float32"):
        comm.allreduce(x, np.empty(10, dtype=np.float64))


def test_non_contiguous(comm):
    x = np.arange(10, dtype=np.float64)
    with pytest.raises(ValueError, match="sendbuf is not C-contiguous"):
        comm.allreduce(x[::2])
    with pytest.raises(ValueError, match="recvbuf is not C-contiguous"):
        comm.allreduce(x[:5], np.zeros((5, 2))[:, 0])
    with pytest.raises(ValueError, match="not C-contiguous"):
        comm.broadcast(np.asfortranarray(np.zeros((3, 4))))


def test_read_only(comm):
    x = np.ones(4, dtype=np.int32)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="sendbuf is read-only"):
        comm.allreduce(x)  # in place writes it
    with pytest.raises(ValueError, match="recvbuf is read-only"):
        comm.allreduce(np.ones(4, dtype=np.int32), x)
    out = comm.allreduce(x, np.empty(4, dtype=np.int32))  # only read: fine
    assert (out == 1).all()


def test_ccl_refusals(comm):
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(ccl.CclArgumentError, match="root 5") as e:
        comm.broadcast(x, root=5)
    assert e.value.code == ccl.Result.ERR_INVALID_RANK
    with pytest.raises(ccl.CclArgumentError) as e:
        comm.send(x, 3)
    assert e.value.code == ccl.Result.ERR_INVALID_RANK
    with pytest.raises(ccl.CclArgumentError) as e:
        comm.alltoall(x, x)  # ccl has no in-place alltoall
    assert e.value.code == ccl.Result.ERR_INPLACE_LAYOUT
    # None of that broke the communicator.
    assert (comm.allreduce(x) == 1).all()
    assert comm.broadcast(x, root=np.int64(0)) is x  # NumPy integers are ints


def test_after_destroy():
    c = ccl.Communicator(1, ccl.get_unique_id(), 0)
    c.destroy()
    c.destroy()  # again: nothing
    assert (c.rank, c.size, c.handle) == (0, 1, 0)
    x = np.ones(3, dtype=np.float32)
    calls = [
        lambda: c.allreduce(x), lambda: c.allgather(x), lambda: c.reduce_scatter(x),
        lambda: c.broadcast(x), lambda: c.reduce(x), lambda: c.alltoall(x), lambda: c.barrier(),
        lambda: c.send(x, 0), lambda: c.recv(x, 0), lambda: c.split(0), lambda: c.finalize(),
    ]
    for call in calls:
        with pytest.raises(ccl.CclError, match="destroyed or aborted") as e:
            call()
        assert e.value.code == ccl.Result.ERR_NULL_COMM


def test_after_abort_and_context():
    c = ccl.Communicator(1, ccl.get_unique_id(), 0)
    c.abort()
    c.abort()
    with pytest.raises(ccl.CclError, match="destroyed or aborted"):
        c.barrier()
    # A with block that raises aborts; one that ends finalizes and destroys.
    with pytest.raises(KeyError):
        with ccl.Communicator(1, ccl.get_unique_id(), 0) as c:
            raise KeyError
    assert c.handle == 0
    with ccl.Communicator(1, ccl.get_unique_id(), 0) as c:
        c.barrier()
    assert c.handle == 0 and "destroyed" in repr(c)


def test_bad_init_arguments():
    uid = ccl.get_unique_id()
    with pytest.raises(ValueError, match="uid has 5 bytes"):
        ccl.Communicator(1, b"short", 0)
    with pytest.raises(ccl.CclError, match="unique id"):
        ccl.Communicator(1, bytes(ccl.UNIQUE_ID_BYTES), 0)
    with pytest.raises(ccl.CclError) as e:
        ccl.Communicator(2, uid, 7)
    assert e.value.message
    with pytest.raises(TypeError, match="rank must be an int"):
        ccl.Communicator(1, uid, "0")
    with pytest.raises(TypeError, match="rank must be an int"):
        ccl.Communicator(1, uid, 0.0)


def test_group_failure(comm):
    x = np.ones(4, dtype=np.float32)
    # The refused call raises at once; the group's end runs nothing and
    # does not raise again over it.
    with pytest.raises(ccl.CclArgumentError, match="root 9"):
        with ccl.group():
            comm.allreduce(x)
            comm.broadcast(x, root=9)
    assert (x == 1).all()
    with ccl.group():  # the next group is unaffected
        comm.allreduce(x)
    assert (x == 1).all()


def _uneven(comm):
    try:
        comm.reduce_scatter(np.ones(comm.size * 2 + 1, dtype=np.float32))
    except ValueError as e:
        refused = str(e)
    else:
        refused = None
    x = np.ones(3, dtype=np.float32)
    comm.allreduce(x)  # still usable: the refusal came before any ccl call
    return refused, x


def _abort_rank0(comm):
    if comm.rank == 0:
        comm.abort()
        return None
    start = time.monotonic()
    try:
        comm.allreduce(np.ones(1 << 16, dtype=np.float32))
    except ccl.CclError as e:
        return type(e).__name__, e.code, e.message, time.monotonic() - start
    return "no error"


def test_two_ranks():
    pool = RankPool(2)
    try:
        for refused, x in pool.run(_uneven):
            assert refused == "reduce_scatter: sendbuf has 5 elements, not a multiple of the 2 ranks"
            assert (x == 2).all()
        # A peer's abort: the survivor gets an error naming it, well
        # within CCL_TIMEOUT, instead of hanging.
        _, (name, code, message, seconds) = pool.run(_abort_rank0)
        assert code in (ccl.Result.ERR_REMOTE, ccl.Result.ERR_ABORTED, ccl.Result.ERR_TIMEOUT), (name, message)
        assert "rank 0" in message, message
        assert seconds < 30, (seconds, message)
        print(f"survivor of the abort: {name} after {seconds:.2f} s: {message}")
    finally:
        pool.close()


def test_bootstrap_timeout():
    # A rank whose peer never comes fails after CCL_TIMEOUT. Its own
    # process, as ccl reads CCL_TIMEOUT at a process's first call. The
    # bootstrap root (a thread of this same process) gives up at the same
    # deadline and closes the rank's connection, so ccl may report either
    # the timeout or that closed connection.
    code = ("import ccl, time\n"
            "start = time.monotonic()\n"
            "try:\n"
            "    ccl.Communicator(2, ccl.get_unique_id(), 0)\n"
            "except ccl.CclError as e:\n"
            "    print(e.code.name, round(time.monotonic() - start), e.message)\n")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, CCL_TIMEOUT="2", PYTHONPATH=here)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    name, seconds, message = (out.stdout.split(" ", 2) + ["", "", ""])[:3]
    assert name in ("ERR_TIMEOUT", "ERR_REMOTE"), (out.stdout, out.stderr)
    assert 1 <= int(seconds) <= 10 and "join" in message, out.stdout
