"""Run under mpirun by test_mpi.py: ccl's collectives checked against MPI's
own on the same inputs. Rank 0 makes the unique id and mpi4py broadcasts
it, the usual way to bootstrap ccl under MPI. Prints one "ok <check>" line
per check; any mismatch raises, which fails the rank and so the run."""

import sys

import numpy as np
from mpi4py import MPI

import ccl

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
uid = ccl.get_unique_id() if rank == 0 else None
uid = world.bcast(uid, root=0)

MPI_OPS = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}


def inputs(count, dtype, seed):
    rng = np.random.default_rng(seed * 1000 + rank)
    return rng.integers(-4, 5, count).astype(dtype)


def report(what):
    if rank == 0:
        print("ok", what, flush=True)


with ccl.Communicator(size, uid, rank) as comm:
    assert (comm.rank, comm.size) == (rank, size)
    seed = 0
    for dtype in ("float32", "float64", "int32", "int64"):
        for op, mpi_op in MPI_OPS.items():
            for count in (1, 1001, 65537):
                seed += 1
                x = inputs(count, dtype, seed)
                if op == "prod":  # keep products small and exact
                    x = np.where(x == 0, 1, np.sign(x)).astype(dtype)
                want = np.empty_like(x)
                world.Allreduce(x, want, op=mpi_op)
                got = comm.allreduce(x, np.empty_like(x), op=op)
                np.testing.assert_array_equal(got, want, err_msg=f"allreduce {dtype} {op} {count}")
        report(f"allreduce {dtype}")

        x = inputs(333, dtype, seed + 1)
        want = np.empty(333 * size, dtype=dtype)
        world.Allgather(x, want)
        np.testing.assert_array_equal(comm.allgather(x), want, err_msg=f"allgather {dtype}")

        x = inputs(333 * size, dtype, seed + 2)
        want = np.empty(333, dtype=dtype)
        world.Reduce_scatter_block(x, want, op=MPI.SUM)
        np.testing.assert_array_equal(comm.reduce_scatter(x), want, err_msg=f"reduce_scatter {dtype}")

        want = np.empty_like(x)
        world.Alltoall(x, want)
        np.testing.assert_array_equal(comm.alltoall(x), want, err_msg=f"alltoall {dtype}")

        for root in range(size):
            x = inputs(1001, dtype, seed + 3)
            want = x.copy()
            world.Bcast(want, root=root)
            np.testing.assert_array_equal(comm.broadcast(x, root=root), want, err_msg=f"broadcast {dtype}")

            x = inputs(1001, dtype, seed + 4)
            want = np.empty_like(x)
            world.Reduce(x, want, op=MPI.MAX, root=root)
            got = comm.reduce(x, np.empty_like(x), op="max", root=root)
            if rank == root:
                np.testing.assert_array_equal(got, want, err_msg=f"reduce {dtype}")
        report(f"allgather, reduce_scatter, alltoall, broadcast, reduce {dtype}")

    # Rank order and membership of a split, against MPI's Split.
    sub = comm.split(rank % 2, key=size - rank)
    mpi_sub = world.Split(rank % 2, key=size - rank)
    with sub:
        assert (sub.rank, sub.size) == (mpi_sub.Get_rank(), mpi_sub.Get_size())
        x = np.array([rank], dtype=np.int64)
        np.testing.assert_array_equal(sub.allreduce(x.copy()), mpi_sub.allreduce(x, op=MPI.SUM))
    mpi_sub.Free()
    report("split")
    comm.barrier()

world.Barrier()
report(f"all on {size} ranks")
sys.exit(0)
