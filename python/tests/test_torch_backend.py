"""Tests of the torch.distributed backend "ccl" (ccl.torch) with 2 and 4
forked processes: every collective and point-to-point call torch offers it,
against values each rank computes itself (rank r's input is a formula of r,
so every rank knows all inputs), async work objects, a subgroup, and
DistributedDataParallel training a small MLP to the same losses as gloo.

Each group of processes runs all checks in one go (a process start and
init_process_group cost far more than the calls); a rank's first failure
comes back with its traceback. Nothing waits unbounded: the parent gives
the ranks WAIT_S seconds and kills what is left, and ccl's own waits end at
CCL_TIMEOUT (conftest.py).
"""

import multiprocessing
import os
import socket
import traceback

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("this torch has no torch.distributed", allow_module_level=True)

import ccl.torch  # noqa: E402  (registers "ccl"; the forked ranks inherit it)

WAIT_S = 120
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int32, torch.int64, torch.int8, torch.uint8]
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG"]
# Fork: the ranks inherit torch and this module, so a rank starts in
# milliseconds instead of seconds of imports on these small machines.
_ctx = multiprocessing.get_context("fork")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _data(rank, count=10):
    """Rank `rank`'s input: values 1..3, so products over 4 ranks fit int8."""
    return (torch.arange(count) + rank) % 3 + 1


def _expected(op, nranks, count=10):
    xs = torch.stack([_data(r, count) for r in range(nranks)])  # int64
    if op == "SUM":
        return xs.sum(0)
    if op == "PRODUCT":
        return xs.prod(0)
    if op == "MIN":
        return xs.min(0).values
    if op == "MAX":
        return xs.max(0).values
    return xs.sum(0).double() / nranks  # AVG; integer types truncate below


def _check(got, want, what):
    want = want.to(got.dtype)
    assert torch.equal(got, want), f"{what}: got {got.tolist()}, want {want.tolist()}"


def _collectives(rank, n):
    for dtype in DTYPES:
        for op in OPS:
            x = _data(rank).to(dtype)
            dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
            want = _expected(op, n)
            if op == "AVG" and not dtype.is_floating_point:
                want = want.floor()  # ccl's AVG of integers divides as integers
            _check(x, want, f"all_reduce {op} {dtype}")

    # async_op: a work object whose wait() says the result is there.
    x = _data(rank).float()
    work = dist.all_reduce(x, async_op=True)
    assert work.wait() is True and work.is_completed()
    _check(x, _expected("SUM", n), "async all_reduce")
    assert work.get_future().value()[0].data_ptr() == x.data_ptr()

    root = n - 1
    x = _data(rank).double() if rank == root else torch.zeros(10, dtype=torch.float64)
    dist.broadcast(x, src=root, async_op=True).wait()
    _check(x, _data(root), "broadcast")

    x = _data(rank).int()
    dist.reduce(x, dst=1, op=dist.ReduceOp.MAX)
    if rank == 1:
        _check(x, _expected("MAX", n), "reduce MAX to 1")

    x = _data(rank, 6).reshape(2, 3).float()
    outs = [torch.empty(2, 3) for _ in range(n)]
    dist.all_gather(outs, x, async_op=True).wait()
    for r, out in enumerate(outs):
        _check(out, _data(r, 6).reshape(2, 3), f"all_gather part {r}")

    out = torch.empty(2 * n, 3, dtype=torch.int64)
    dist.all_gather_into_tensor(out, x.long())
    _check(out, torch.cat([_data(r, 6).reshape(2, 3) for r in range(n)]), "all_gather_into_tensor")

    # Rank r contributes _data(r, 4*n); block p of that is reduced onto rank p.
    full = _expected("SUM", n, 4 * n).reshape(n, 4)
    ins = list(_data(rank, 4 * n).float().reshape(n, 4).unbind())
    out = torch.empty(4)
    dist.reduce_scatter(out, ins)
    _check(out, full[rank], "reduce_scatter")
    out = torch.empty(4, dtype=torch.bfloat16)
    dist.reduce_scatter_tensor(out, _data(rank, 4 * n).bfloat16(), op=dist.ReduceOp.SUM, async_op=True).wait()
    _check(out, full[rank], "reduce_scatter_tensor")

    # all_to_all: rank r sends value 100*r + p (twice) to rank p.
    send = torch.tensor([100 * rank + p for p in range(n) for _ in range(2)])
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    _check(recv, torch.tensor([100 * p + rank for p in range(n) for _ in range(2)]), "all_to_all_single")
    # Unequal splits: rank r sends p+1 rows of (r, p) to rank p, so it
    # receives r+1 rows from each rank.
    send = torch.cat([torch.tensor([[rank, p]] * (p + 1)) for p in range(n)])
    recv = torch.empty((rank + 1) * n, 2, dtype=torch.int64)
    dist.all_to_all_single(recv, send, output_split_sizes=[rank + 1] * n,
                           input_split_sizes=[p + 1 for p in range(n)])
    _check(recv, torch.cat([torch.tensor([[p, rank]] * (rank + 1)) for p in range(n)]), "all_to_all_single splits")
    sends = [torch.full((p + 1,), float(rank)) for p in range(n)]
    recvs = [torch.empty(rank + 1) for _ in range(n)]
    dist.all_to_all(recvs, sends)
    for p in range(n):
        _check(recvs[p], torch.full((rank + 1,), float(p)), f"all_to_all from {p}")

    root = n // 2
    gathered = [torch.empty(3, dtype=torch.float16) for _ in range(n)] if rank == root else None
    dist.gather(_data(rank, 3).half(), gathered, dst=root)
    if rank == root:
        for r, g in enumerate(gathered):
            _check(g, _data(r, 3), f"gather part {r}")
    out = torch.empty(5, dtype=torch.int8)
    parts = [_data(r, 5).to(torch.int8) * 2 for r in range(n)] if rank == root else None
    dist.scatter(out, parts, src=root, async_op=True).wait()
    _check(out, _data(rank, 5) * 2, "scatter")

    dist.barrier()
    assert dist.barrier(async_op=True).wait()

    with pytest.raises(ValueError, match="BAND"):
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND)


def _point_to_point(rank, n):
    # Pairs (0,1), (2,3): the even rank sends first, so blocking calls match.
    peer = rank ^ 1
    x = _data(rank).float()
    got = torch.empty(10)
    if rank % 2 == 0:
        dist.send(x, peer)
        dist.recv(got, peer)
    else:
        dist.recv(got, peer)
        assert dist.isend(x, peer).wait()
    _check(got, _data(peer), "send/recv")

    # A ring where every rank sends first: one batch (a ccl group).
    right, left = (rank + 1) % n, (rank - 1) % n
    got = torch.empty(10, dtype=torch.int64)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, _data(rank), right),
                                   dist.P2POp(dist.irecv, got, left)])
    for req in reqs:
        req.wait()
    _check(got, _data(left), "batch_isend_irecv ring")


def _subgroup(rank, n):
    group = dist.new_group(ranks=[0, 1], backend="ccl")
    if rank < 2:
        x = torch.full((3,), float(rank + 1))
        dist.all_reduce(x, group=group)
        _check(x, torch.full((3,), 3.0), "all_reduce on a subgroup")


def _train(rank, group):
    """Losses of 5 SGD steps of a seeded MLP under DDP over `group`, each
    rank on its own fixed batch."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1000 + rank)
    x, y = torch.randn(64, 16, generator=gen), torch.randn(64, 4, generator=gen)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _rank_main(rank, n, port, results):
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        torch.set_num_threads(1)  # n ranks share two cores
        dist.init_process_group("ccl", rank=rank, world_size=n)
        assert dist.get_backend() == "ccl"
        _collectives(rank, n)
        _point_to_point(rank, n)
        _subgroup(rank, n)
        losses = {"ccl": _train(rank, None),
                  "gloo": _train(rank, dist.new_group(backend="gloo"))}
        # No destroy_process_group: torch 1.13's gloo group can deadlock in
        # its destructor (it joins a worker thread that waits for the GIL
        # to free a tensor). ccl's finalize instead says every rank is done
        # with every call, ccl's and (before them) gloo's, so the rank may
        # simply exit.
        dist.distributed_c10d._get_default_group().communicator.finalize()
        results.put((rank, "ok", losses))
    except BaseException:
        results.put((rank, "err", traceback.format_exc()))
    results.close()
    results.join_thread()  # the put is on its way before the exit below
    os._exit(0)  # no teardown of torch's objects either (see above)


@pytest.mark.parametrize("nranks", [2, 4])
def test_torch_backend(nranks):
    results = _ctx.Queue()
    port = _free_port()
    procs = [_ctx.Process(target=_rank_main, args=(r, nranks, port, results), daemon=True)
             for r in range(nranks)]
    for p in procs:
        p.start()
    try:
        got = {}
        for _ in range(nranks):
            try:
                rank, status, value = results.get(timeout=WAIT_S)
            except Exception:
                pytest.fail(f"ranks {sorted(set(range(nranks)) - set(got))} did not finish within {WAIT_S} s")
            if status == "err":
                pytest.fail(f"rank {rank} failed:\n{value}")
            got[rank] = value
        for p in procs:
            p.join(WAIT_S)
            assert p.exitcode == 0, f"a rank exited with {p.exitcode}"
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    for rank, losses in got.items():
        assert losses["ccl"] == pytest.approx(losses["gloo"], rel=1e-6), f"rank {rank}: DDP losses differ"


def test_registering_twice_names_the_conflict():
    with pytest.raises(RuntimeError, match="already has a backend named 'ccl'"):
        ccl.torch._register()
