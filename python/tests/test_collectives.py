"""Every collective of ccl.Communicator on 2 and 3 forked ranks, against
NumPy references: float32, float64, int32, int64, float16 (NumPy arrays)
and bfloat16 (torch tensors, where torch is installed); sum, prod, max,
min and avg; odd counts; in place and out of place."""

import threading
import time

import numpy as np
import pytest

import ccl
from _data import ALL_DTYPES, NUMPY_DTYPES, OPS, as_numpy, check, make, reduce_ref, values
from _ranks import RankPool

COUNTS = (1, 1001)


@pytest.fixture(scope="module", params=(2, 3), ids=lambda n: f"{n}ranks")
def pool(request):
    p = RankPool(request.param)
    yield p
    p.close()


def _need(dtype):
    if dtype == "bfloat16":
        pytest.importorskip("torch")


# ---- what each rank runs (module level: sent to the ranks by reference) ----


def _allreduce(comm, count, dtype, op, mode):
    x = make(values(comm.rank, count, dtype, op), dtype)
    before = as_numpy(x)
    if mode == "out":
        out = comm.allreduce(x, make(np.zeros(count), dtype), op=op)
        check(as_numpy(x), before, dtype, "sendbuf changed")
    elif mode == "inplace":
        out = comm.allreduce(x, op=op)
        assert out is x
    else:  # recvbuf is sendbuf: in place too
        out = comm.allreduce(x, x, op=op)
    return as_numpy(out)


def _reduce_scatter(comm, n, dtype, op, mode):
    x = make(values(comm.rank, n * comm.size, dtype, op), dtype)
    if mode == "new":
        out = comm.reduce_scatter(x, op=op)
    elif mode == "out":
        out = comm.reduce_scatter(x, make(np.zeros(n), dtype), op=op)
    else:  # NCCL's in place: recvbuf is this rank's block of sendbuf
        out = comm.reduce_scatter(x, x[comm.rank * n:(comm.rank + 1) * n], op=op)
    return as_numpy(out)


def _allgather(comm, n, dtype, mode):
    mine = make(values(comm.rank, n, dtype), dtype)
    if mode == "new":
        out = comm.allgather(mine)
    elif mode == "out":
        out = comm.allgather(mine, make(np.zeros(n * comm.size), dtype))
    else:  # NCCL's in place: sendbuf is this rank's block of recvbuf
        out = make(np.zeros(n * comm.size), dtype)
        block = out[comm.rank * n:(comm.rank + 1) * n]
        block[:] = mine
        comm.allgather(block, out)
    return as_numpy(out)


def _broadcast(comm, count, dtype, root, mode):
    x = make(values(comm.rank, count, dtype), dtype)
    if mode == "inplace":
        out = comm.broadcast(x, root=root)
    elif mode == "out":
        out = comm.broadcast(x, make(np.zeros(count), dtype), root=root)
    else:  # off the root, no sendbuf at all
        recv = make(np.zeros(count), dtype)
        out = comm.broadcast(x if comm.rank == root else None, recv, root=root)
    return as_numpy(out)


def _reduce(comm, count, dtype, op, root, mode):
    x = make(values(comm.rank, count, dtype, op), dtype)
    if mode == "inplace":
        out = comm.reduce(x, op=op, root=root)
    else:
        out = comm.reduce(x, make(np.zeros(count), dtype), op=op, root=root)
    return as_numpy(out)


def _alltoall(comm, n, dtype, mode):
    x = make(values(comm.rank, n * comm.size, dtype), dtype)
    if mode == "new":
        out = comm.alltoall(x)
    else:
        out = comm.alltoall(x, make(np.zeros(n * comm.size), dtype))
    return as_numpy(out)


# ---- the tests -------------------------------------------------------------


@pytest.mark.parametrize("mode", ("out", "inplace", "same"))
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("count", COUNTS)
def test_allreduce(pool, count, dtype, op, mode):
    _need(dtype)
    outs = pool.run(_allreduce, count, dtype, op, mode)
    want = reduce_ref([values(r, count, dtype, op) for r in range(pool.nranks)], op, dtype, pool.nranks)
    for rank, out in enumerate(outs):
        check(out, want, dtype, f"rank {rank}")


@pytest.mark.parametrize("dtype,op", [("float32", "sum"), ("int64", "max"), ("float64", "avg")])
def test_allreduce_large(pool, dtype, op):
    # Large enough for the pipelined algorithms, odd so no slice is even.
    count = 262147
    outs = pool.run(_allreduce, count, dtype, op, "out")
    want = reduce_ref([values(r, count, dtype, op) for r in range(pool.nranks)], op, dtype, pool.nranks)
    for rank, out in enumerate(outs):
        check(out, want, dtype, f"rank {rank}")


def test_allreduce_empty(pool):
    outs = pool.run(_allreduce, 0, "float32", "sum", "out")
    assert all(out.size == 0 for out in outs)


@pytest.mark.parametrize("mode", ("new", "out", "inplace"))
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("n", (1, 333))
def test_reduce_scatter(pool, n, dtype, op, mode):
    _need(dtype)
    outs = pool.run(_reduce_scatter, n, dtype, op, mode)
    full = reduce_ref([values(r, n * pool.nranks, dtype, op) for r in range(pool.nranks)], op, dtype,
                      pool.nranks)
    for rank, out in enumerate(outs):
        check(out, full[rank * n:(rank + 1) * n], dtype, f"rank {rank}")


@pytest.mark.parametrize("mode", ("new", "out", "inplace"))
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("n", COUNTS)
def test_allgather(pool, n, dtype, mode):
    _need(dtype)
    outs = pool.run(_allgather, n, dtype, mode)
    want = np.concatenate([values(r, n, dtype) for r in range(pool.nranks)])
    for rank, out in enumerate(outs):
        assert out.shape == (n * pool.nranks,)
        check(out, want, dtype, f"rank {rank}")


def test_allgather_shape(pool):
    # A new recvbuf stacks the ranks' arrays along the first axis.
    outs = pool.run(_allgather_2d)
    for out in outs:
        assert out.shape == (2 * pool.nranks, 3)
        assert (out[:, 0] == np.repeat(np.arange(pool.nranks), 2)).all()


def _allgather_2d(comm):
    return comm.allgather(np.full((2, 3), comm.rank, dtype=np.int32))


@pytest.mark.parametrize("mode", ("inplace", "out", "nosend"))
@pytest.mark.parametrize("root", ("first", "last"))
@pytest.mark.parametrize("dtype", ("float32", "int64", "float16", "bfloat16"))
@pytest.mark.parametrize("count", COUNTS)
def test_broadcast(pool, count, dtype, root, mode):
    _need(dtype)
    root = 0 if root == "first" else pool.nranks - 1
    outs = pool.run(_broadcast, count, dtype, root, mode)
    for rank, out in enumerate(outs):
        check(out, values(root, count, dtype), dtype, f"rank {rank}")


@pytest.mark.parametrize("mode", ("inplace", "out"))
@pytest.mark.parametrize("root", ("first", "last"))
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reduce(pool, dtype, op, root, mode):
    _need(dtype)
    count = 1001
    root = 0 if root == "first" else pool.nranks - 1
    outs = pool.run(_reduce, count, dtype, op, root, mode)
    ins = [values(r, count, dtype, op) for r in range(pool.nranks)]
    check(outs[root], reduce_ref(ins, op, dtype, pool.nranks), dtype, f"root {root}")
    if mode == "inplace":  # off the root, sendbuf is only read
        for rank, out in enumerate(outs):
            if rank != root:
                check(out, ins[rank], dtype, f"rank {rank}'s sendbuf")


@pytest.mark.parametrize("mode", ("new", "out"))
@pytest.mark.parametrize("dtype", NUMPY_DTYPES[:4] + ("bfloat16",))
@pytest.mark.parametrize("n", (1, 333))
def test_alltoall(pool, n, dtype, mode):
    _need(dtype)
    outs = pool.run(_alltoall, n, dtype, mode)
    ins = [values(r, n * pool.nranks, dtype) for r in range(pool.nranks)]
    for rank, out in enumerate(outs):
        want = np.concatenate([ins[p][rank * n:(rank + 1) * n] for p in range(pool.nranks)])
        check(out, want, dtype, f"rank {rank}")


def _ring(comm, count, dtype):
    # Everyone sends first: only a group keeps this from deadlocking.
    # The send buffer is a temporary on purpose: the group keeps it alive.
    recv = make(np.zeros(count), dtype)
    with ccl.group():
        comm.send(make(values(comm.rank, count, dtype), dtype), (comm.rank + 1) % comm.size)
        comm.recv(recv, (comm.rank - 1) % comm.size)
    return as_numpy(recv)


@pytest.mark.parametrize("dtype", ("float64", "int32", "bfloat16"))
@pytest.mark.parametrize("count", (1, 100001))
def test_sendrecv_ring(pool, count, dtype):
    _need(dtype)
    outs = pool.run(_ring, count, dtype)
    for rank, out in enumerate(outs):
        check(out, values((rank - 1) % pool.nranks, count, dtype), dtype, f"rank {rank}")


def _pingpong(comm):
    # Blocking send/recv outside a group: rank 0 to the last rank and back.
    last = comm.size - 1
    buf = np.zeros(7, dtype=np.int64)
    if comm.rank == 0:
        comm.send(np.arange(7, dtype=np.int64), last)
        comm.recv(buf, last)
    elif comm.rank == last:
        comm.recv(buf, 0)
        comm.send(buf * 2, 0)
    return buf


def test_sendrecv_blocking(pool):
    outs = pool.run(_pingpong)
    assert (outs[0] == np.arange(7) * 2).all()
    assert (outs[-1] == np.arange(7)).all()


def _grouped_collectives(comm):
    a = np.full(5, comm.rank + 1, dtype=np.float32)
    b = np.full(3, comm.rank + 1, dtype=np.int32)
    with ccl.group():
        comm.allreduce(a)
        comm.allreduce(b, op=ccl.MAX)
    return a, b


def test_group_collectives(pool):
    n = pool.nranks
    for a, b in pool.run(_grouped_collectives):
        assert (a == n * (n + 1) / 2).all() and (b == n).all()


def _split(comm):
    # Even and odd ranks, each ordered backwards; the last rank of three
    # joins no communicator.
    color = None if comm.size == 3 and comm.rank == 2 else comm.rank % 2
    sub = comm.split(color, key=-comm.rank)
    if sub is None:
        return None
    with sub:
        x = np.array([comm.rank], dtype=np.int64)
        sub.allreduce(x)
        return sub.rank, sub.size, int(x[0])


def test_split(pool):
    outs = pool.run(_split)
    for rank, out in enumerate(outs):
        members = [r for r in range(pool.nranks) if r % 2 == rank % 2 and not (pool.nranks == 3 and r == 2)]
        if rank not in members:
            assert out is None
            continue
        order = sorted(members, reverse=True)
        assert out == (order.index(rank), len(members), sum(members))


def _barrier(comm):
    comm.barrier()
    return comm.rank, comm.size


def test_barrier_rank_size(pool):
    assert pool.run(_barrier) == [(r, pool.nranks) for r in range(pool.nranks)]


def _gil_released(comm):
    # Rank 0 comes late; meanwhile the others wait inside ccl_barrier, and
    # a Python thread of theirs must keep running (ctypes drops the GIL).
    if comm.rank == 0:
        time.sleep(0.3)
        comm.barrier()
        return None
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.01)
    before = len(ticks)
    comm.barrier()
    during = len(ticks) - before
    stop.set()
    t.join()
    return during


def test_gil_released_while_waiting(pool):
    for during in pool.run(_gil_released)[1:]:
        assert during > 20, f"the thread ticked {during} times while the rank waited 0.3 s in ccl"
