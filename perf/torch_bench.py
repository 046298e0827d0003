#!/usr/bin/env python3
"""torch.distributed on CPU tensors: the "ccl" backend (ccl.torch) against
gloo, measured in the same processes.

    /usr/bin/python3 perf/torch_bench.py [-n 2 4] [--max-bytes 67108864] [--rounds 7]

For each process count, forked ranks join a default "ccl" group and a
gloo group (new_group) and time dist.all_reduce (float32, sum, blocking)
from 8 B to --max-bytes by factors of 8, the last size included. Per
size, rounds alternate between the backends (ccl, gloo, ccl, ...) so that
load from elsewhere on the machine hits both alike; a round times a loop
of calls, and the table shows each backend's median round: time per call,
bus bandwidth (2(n-1)/n * bytes / time, as nccl-tests counts it) and
gloo's time over ccl's. Then one DistributedDataParallel training step
(forward, backward with the bucketed gradient allreduce, SGD step) of a
small MLP, per backend, interleaved the same way. Rank 0's clock is
reported; a blocking allreduce loop keeps the ranks in step. Needs
Debian's python3-torch; uses this clone's python/ccl and build/lib.
"""

import argparse
import multiprocessing
import os
import pathlib
import socket
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
os.environ.setdefault("CCL_TIMEOUT", "120")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import ccl.torch  # noqa: E402,F401  (registers "ccl")

BACKENDS = ("ccl", "gloo")


def _sizes(max_bytes):
    sizes, s = [], 8
    while s < max_bytes:
        sizes.append(s)
        s *= 8
    return sizes + [max_bytes]


def _iters(nbytes):
    # 200 calls a round up to 64 KiB, then 16 MiB worth of calls, at least 3.
    return max(3, min(200, (16 << 20) // max(nbytes, 1)))


def _time_loop(fn, iters):
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters


def _allreduce(groups, sizes, rounds):
    out = []
    for nbytes in sizes:
        tensors = {b: torch.ones(nbytes // 4) for b in BACKENDS}
        iters = _iters(nbytes)
        times = {b: [] for b in BACKENDS}
        for b in BACKENDS:  # warm-up: connections, first touch of buffers
            dist.all_reduce(tensors[b], group=groups[b])
        for _ in range(rounds):
            for b in BACKENDS:
                dist.barrier(group=groups[b])
                times[b].append(_time_loop(lambda: dist.all_reduce(tensors[b], group=groups[b]), iters))
        out.append((nbytes, {b: statistics.median(t) for b, t in times.items()}))
    return out


def _ddp_step(groups, rounds):
    models = {}
    for b in BACKENDS:
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                  torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
        ddp = torch.nn.parallel.DistributedDataParallel(mlp, process_group=groups[b])
        models[b] = (ddp, torch.optim.SGD(ddp.parameters(), lr=0.01))
    params = sum(p.numel() for p in models["ccl"][0].parameters())
    x, y = torch.randn(8, 512), torch.randint(0, 10, (8,))

    def step(b):
        ddp, opt = models[b]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()

    times = {b: [] for b in BACKENDS}
    for b in BACKENDS:
        step(b)
    for _ in range(rounds):
        for b in BACKENDS:
            dist.barrier(group=groups[b])
            times[b].append(_time_loop(lambda: step(b), 5))
    return params, {b: statistics.median(t) for b, t in times.items()}


def _rank(rank, n, port, args, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # n ranks share the machine's cores
    dist.init_process_group("ccl", rank=rank, world_size=n)
    groups = {"ccl": None, "gloo": dist.new_group(backend="gloo")}
    ar = _allreduce(groups, _sizes(args.max_bytes), args.rounds)
    ddp = _ddp_step(groups, args.rounds)
    # Not destroy_process_group: torch 1.13's gloo group can deadlock in its
    # destructor (its worker thread waits for the GIL to free a tensor).
    # ccl's finalize means every rank is done with all calls; then exit.
    dist.distributed_c10d._get_default_group().communicator.finalize()
    if rank == 0:
        results.put((ar, ddp))
        results.close()
        results.join_thread()
    os._exit(0)


def _fmt_bytes(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


def _report(n, ar, ddp):
    factor = 2 * (n - 1) / n
    print(f"\n## dist.all_reduce, float32 sum, {n} processes (median of rounds; busbw in GB/s)")
    print(f"{'size':>10} {'ccl us':>10} {'ccl busbw':>10} {'gloo us':>10} {'gloo busbw':>10} {'gloo/ccl':>9}")
    for nbytes, t in ar:
        bw = {b: factor * nbytes / t[b] / 1e9 for b in BACKENDS}
        print(f"{_fmt_bytes(nbytes):>10} {t['ccl'] * 1e6:10.1f} {bw['ccl']:10.3f} "
              f"{t['gloo'] * 1e6:10.1f} {bw['gloo']:10.3f} {t['gloo'] / t['ccl']:8.1f}x")
    params, t = ddp
    print(f"DDP step, MLP 512-1024-1024-10 ({params / 1e6:.2f} M parameters, batch 8 per rank): "
          f"ccl {t['ccl'] * 1e3:.2f} ms, gloo {t['gloo'] * 1e3:.2f} ms ({t['gloo'] / t['ccl']:.2f}x)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, nargs="+", default=[2, 4], help="process counts (default 2 4)")
    ap.add_argument("--max-bytes", type=int, default=64 << 20, help="largest allreduce (default 64 MiB)")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds per size (default 7)")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, ccl {ccl.get_version()} ({ccl._lib.path}), {os.cpu_count()} CPUs")
    # Fork: the ranks inherit the imports (seconds each on small machines).
    ctx = multiprocessing.get_context("fork")
    for n in args.n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        results = ctx.Queue()
        procs = [ctx.Process(target=_rank, args=(r, n, port, args, results)) for r in range(n)]
        for p in procs:
            p.start()
        ar, ddp = results.get(timeout=1800)
        for p in procs:
            p.join(60)
        _report(n, ar, ddp)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
