"""PyTorch CPU tensors through the same Communicator as NumPy arrays, on 2
and 3 forked ranks, against NumPy references: every collective, torch's
dtypes (bfloat16 and int8/uint8 included), new results as tensors of the
sendbuf's dtype, and the same refusals as for arrays. CUDA tensors run
only where torch has a GPU (not on the machines this was written on)."""

import multiprocessing

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ccl  # noqa: E402  (after the skip: without torch there is nothing to test)
from _data import OPS, check, reduce_ref, values  # noqa: E402
from _ranks import RankPool  # noqa: E402

DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64")


@pytest.fixture(scope="module", params=(2, 3), ids=lambda n: f"{n}ranks")
def pool(request):
    p = RankPool(request.param)
    yield p
    p.close()


def _t(vals, dtype):
    return torch.tensor(vals, dtype=getattr(torch, dtype))


def _np(t):
    assert isinstance(t, torch.Tensor)
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy().copy(), str(t.dtype)


def _ranks_values(nranks, count, dtype, op):
    # int8/uint8 have no place in _data's seeds; borrow int32's values
    # (|v| <= 4, and non-negative ones for uint8: ccl wraps as C does).
    base = "int32" if dtype in ("int8", "uint8") else dtype
    vals = [values(r, count, base, op) for r in range(nranks)]
    if dtype == "uint8":
        vals = [np.abs(v) for v in vals]
    return vals


def _allreduce(comm, vals, dtype, op):
    x = _t(vals[comm.rank], dtype)
    return _np(comm.allreduce(x, op=op))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce(pool, dtype, op):
    vals = _ranks_values(pool.nranks, 257, dtype, op)
    want = reduce_ref(vals, op, dtype, pool.nranks)
    for rank, (out, tdtype) in enumerate(pool.run(_allreduce, vals, dtype, op)):
        assert tdtype == f"torch.{dtype}"
        check(out, want, dtype, f"rank {rank}")


def _every_collective(comm, vals, dtype):
    n, r = comm.size, comm.rank
    mine = _t(vals[r], dtype)
    out = {}
    out["allreduce"] = _np(comm.allreduce(mine, torch.empty_like(mine), op=ccl.MAX))
    out["allgather"] = _np(comm.allgather(mine))
    ag = torch.zeros(n * mine.numel(), dtype=mine.dtype)
    ag[r * mine.numel():(r + 1) * mine.numel()] = mine
    comm.allgather(ag[r * mine.numel():(r + 1) * mine.numel()], ag)  # in place
    out["allgather_inplace"] = _np(ag)
    out["reduce_scatter"] = _np(comm.reduce_scatter(torch.cat([mine] * n)))
    out["broadcast"] = _np(comm.broadcast(mine.clone(), root=n - 1))
    out["reduce"] = _np(comm.reduce(mine, torch.zeros_like(mine), root=0))
    out["alltoall"] = _np(comm.alltoall(torch.cat([mine] * n)))
    recv = torch.zeros_like(mine)
    with ccl.group():
        comm.send(mine, (r + 1) % n)
        comm.recv(recv, (r - 1) % n)
    out["ring"] = _np(recv)
    return out


@pytest.mark.parametrize("dtype", ("float32", "bfloat16", "int64"))
def test_every_collective(pool, dtype):
    n, count = pool.nranks, 101
    vals = _ranks_values(n, count, dtype, "sum")
    outs = pool.run(_every_collective, vals, dtype)
    total = np.sum(vals, axis=0)
    for rank, out in enumerate(outs):
        for name, (got, tdtype) in out.items():
            assert tdtype == f"torch.{dtype}", name
        check(out["allreduce"][0], np.max(vals, axis=0), dtype, "allreduce max")
        check(out["allgather"][0], np.concatenate(vals), dtype, "allgather")
        check(out["allgather_inplace"][0], np.concatenate(vals), dtype, "allgather in place")
        check(out["reduce_scatter"][0], total, dtype, "reduce_scatter")
        check(out["broadcast"][0], vals[n - 1], dtype, "broadcast")
        if rank == 0:
            check(out["reduce"][0], total, dtype, "reduce")
        check(out["alltoall"][0], np.concatenate([vals[p] for p in range(n)]), dtype, "alltoall")
        check(out["ring"][0], vals[(rank - 1) % n], dtype, "ring")


def _shapes(comm):
    x = torch.full((2, 3), float(comm.rank))
    return tuple(comm.allgather(x).shape), tuple(comm.reduce_scatter(torch.ones(comm.size * 2, 3)).shape)


def test_result_shapes(pool):
    for ag, rs in pool.run(_shapes):
        assert ag == (2 * pool.nranks, 3) and rs == (2, 3)


def test_refusals():
    with ccl.Communicator(1, ccl.get_unique_id(), 0) as comm:
        t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        with pytest.raises(ValueError, match="not contiguous"):
            comm.allreduce(t.t())
        with pytest.raises(TypeError, match="dtype int16, which ccl does not support"):
            comm.allreduce(torch.zeros(3, dtype=torch.int16))
        with pytest.raises(TypeError, match="recvbuf is float64 but sendbuf is float32"):
            comm.allreduce(t, torch.zeros(3, 4, dtype=torch.float64))
        with pytest.raises(ValueError, match="recvbuf has 11 elements, needs 12"):
            comm.allreduce(t, torch.zeros(11))
        with pytest.raises(TypeError, match="recvbuf must be a NumPy array or a torch tensor"):
            comm.allreduce(t, [0.0] * 12)
        assert comm.allreduce(t) is t


def _cuda_rank(nranks, uid, rank, queue):
    # Its own spawned process: CUDA does not survive fork.
    torch.cuda.set_device(rank % torch.cuda.device_count())
    with ccl.Communicator(nranks, uid, rank) as comm:
        x = torch.full((1001,), float(rank + 1), device="cuda")
        comm.allreduce(x)  # queued on torch's current stream
        queue.put((rank, x.cpu().tolist()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA device here")
def test_cuda_allreduce():
    ctx = multiprocessing.get_context("spawn")
    uid, queue = ccl.get_unique_id(), ctx.Queue()
    procs = [ctx.Process(target=_cuda_rank, args=(2, uid, r, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
    assert all(v == 3.0 for r in (0, 1) for v in results[r])
