"""A torch.distributed backend named "ccl" over ccl's Python package.

    import ccl.torch                     # registers the backend
    dist.init_process_group("ccl", rank=rank, world_size=n)

Importing the module registers the backend with
torch.distributed.Backend.register_backend. The process group is a plain
Python subclass of torch's ProcessGroup: torch 1.13 ships a pybind11
trampoline (c10d::PyProcessGroup) through which C++ callers, such as
DistributedDataParallel's reducer and parameter broadcast, reach the
Python methods, so no compiled extension is needed. Collectives take
contiguous CPU tensors and run on the calling thread through ccl's
blocking (NULL stream) calls; each returns a Work that is already
complete. docs/python.md ("torch.distributed backend") is the guide.
"""

import os

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ProcessGroup,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
    _create_work_from_future,
)

import ccl

__all__ = ["ProcessGroupCCL"]

_RedOpType = dist.ReduceOp.RedOpType
# torch's reductions that ccl has; BAND, BOR, BXOR and PREMUL_SUM it has not.
# Keyed by the enum's int: hashing pybind11's enum costs a microsecond more
# per call, a tenth of a small allreduce here.
_OPS = {
    int(_RedOpType.SUM): ccl.SUM,
    int(_RedOpType.PRODUCT): ccl.PROD,
    int(_RedOpType.MIN): ccl.MIN,
    int(_RedOpType.MAX): ccl.MAX,
    int(_RedOpType.AVG): ccl.AVG,
}

# The store key under which rank 0 of a group publishes the unique id; the
# store torch hands each group is already prefixed with the group's name.
_UID_KEY = "ccl_unique_id"


def _redop(opts):
    # torch passes either an options object or, through the short overloads
    # of ProcessGroup.allreduce, a ReduceOp itself.
    op = getattr(opts, "reduceOp", opts)
    kind = getattr(op, "op", op)
    try:
        return _OPS[int(kind)]
    except (KeyError, TypeError):
        raise ValueError(f"ccl backend: reduction {kind} is not supported "
                         "(SUM, PRODUCT, MIN, MAX and AVG are)") from None


def _one(tensors, call):
    if len(tensors) != 1:
        raise ValueError(f"ccl backend: {call} takes one tensor per process, got {len(tensors)}")
    return tensors[0]


def _done(result):
    """A Work that is already complete: wait() returns True at once and
    get_future() (what DDP's reducer waits on) holds `result`. A C++ Work
    made from a future rather than a Python subclass of Work: C++ callers
    (DDP) keep only the C++ part of a Python object, whose Python methods
    pybind11 no longer finds once Python has dropped the object."""
    fut = torch.futures.Future()
    fut.set_result(result)
    return _create_work_from_future(fut)


def _rows(tensor, sizes, nranks, call):
    """The dim-0 slices of `tensor` by split sizes (equal when empty)."""
    if not sizes:
        if tensor.dim() == 0 or tensor.shape[0] % nranks:
            raise ValueError(f"ccl backend: {call}: dimension 0 of a {tuple(tensor.shape)} tensor "
                             f"does not split evenly over {nranks} ranks")
        sizes = [tensor.shape[0] // nranks] * nranks
    if len(sizes) != nranks or sum(sizes) != tensor.shape[0]:
        raise ValueError(f"ccl backend: {call}: split sizes {list(sizes)} do not cover dimension 0 "
                         f"({tensor.shape[0]}) in {nranks} parts")
    return list(torch.split(tensor, list(sizes)))


class ProcessGroupCCL(ProcessGroup):
    """One ccl Communicator as a torch.distributed process group. Made by
    init_process_group("ccl") / new_group(backend="ccl") through the
    registered creator: rank 0 makes the unique id and puts it in the
    group's store, the others read it from there."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        # ccl reads CCL_TIMEOUT at its first call in a process; a timeout
        # set there already (the tests' 60 s) wins over torch's default.
        os.environ.setdefault("CCL_TIMEOUT", str(max(1, int(timeout.total_seconds()))))
        if rank == 0:
            uid = ccl.get_unique_id()
            store.set(_UID_KEY, uid.hex())
        else:
            # Store.get waits up to the store's timeout (init's) for rank 0.
            uid = bytes.fromhex(store.get(_UID_KEY).decode())
        self._comm = ccl.Communicator(size, uid, rank)
        # batch_isend_irecv's calls are queued in a ccl group from
        # _start_coalescing to _end_coalescing.
        self._coalescing = None

    def getBackendName(self):
        # The name C++ asks for through the trampoline (_get_backend_name).
        return "ccl"

    @property
    def communicator(self):
        """The ccl.Communicator under this group."""
        return self._comm

    # ---- collectives ----

    def allreduce(self, tensors, opts=AllreduceOptions()):
        t = _one(tensors, "allreduce")
        self._comm.allreduce(t, op=_redop(opts))
        return _done(tensors)

    def broadcast(self, tensors, opts=BroadcastOptions()):
        t = _one(tensors, "broadcast")
        self._comm.broadcast(t, root=opts.rootRank)
        return _done(tensors)

    def reduce(self, tensors, opts=ReduceOptions()):
        t = _one(tensors, "reduce")
        self._comm.reduce(t, op=_redop(opts), root=opts.rootRank)
        return _done(tensors)

    def allgather(self, output_lists, inputs, opts=AllgatherOptions()):
        t = _one(inputs, "allgather")
        outs = _one(output_lists, "allgather")
        if len(outs) != self.size():
            raise ValueError(f"ccl backend: allgather needs {self.size()} output tensors, got {len(outs)}")
        # ccl gathers into one buffer; torch's list holds separate tensors.
        flat = torch.empty((self.size(),) + tuple(t.shape), dtype=t.dtype)
        self._comm.allgather(t, flat)
        for out, part in zip(outs, flat):
            out.copy_(part)
        return _done(output_lists)

    def _allgather_base(self, output, input, opts=AllgatherOptions()):
        self._comm.allgather(input, output)
        return _done([output])

    def reduce_scatter(self, outputs, input_lists, opts=ReduceScatterOptions()):
        out = _one(outputs, "reduce_scatter")
        ins = _one(input_lists, "reduce_scatter")
        if len(ins) != self.size():
            raise ValueError(f"ccl backend: reduce_scatter needs {self.size()} input tensors, got {len(ins)}")
        flat = torch.stack([x.reshape(out.shape) for x in ins])
        self._comm.reduce_scatter(flat, out, op=_redop(opts))
        return _done(outputs)

    def _reduce_scatter_base(self, output, input, opts=ReduceScatterOptions()):
        self._comm.reduce_scatter(input, output, op=_redop(opts))
        return _done([output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes,
                      opts=AllToAllOptions()):
        if not output_split_sizes and not input_split_sizes:
            self._comm.alltoall(input, output)
        else:
            n = self.size()
            self._exchange(_rows(input, input_split_sizes, n, "all_to_all_single"),
                           _rows(output, output_split_sizes, n, "all_to_all_single"))
        return _done([output])

    def alltoall(self, outputs, inputs, opts=AllToAllOptions()):
        n = self.size()
        if len(inputs) != n or len(outputs) != n:
            raise ValueError(f"ccl backend: all_to_all needs {n} input and {n} output tensors")
        self._exchange(inputs, outputs)
        return _done(outputs)

    def _exchange(self, sends, recvs):
        """sends[p] goes to rank p, recvs[p] comes from it, as one ccl group
        of sends and receives (any sizes); this rank's own part is a copy."""
        me = self.rank()
        with ccl.group():
            for peer, (s, r) in enumerate(zip(sends, recvs)):
                if peer == me:
                    continue
                # Empty parts are skipped on both sides alike: the sizes are
                # agreed (rank p's sends[me] is this rank's recvs[p]).
                if s.numel():
                    self._comm.send(s, peer)
                if r.numel():
                    self._comm.recv(r, peer)
        recvs[me].copy_(sends[me])

    def gather(self, output_lists, inputs, opts=GatherOptions()):
        # torch passes the list of outputs on the root only.
        t, root, me = _one(inputs, "gather"), opts.rootRank, self.rank()
        with ccl.group():
            if me != root:
                self._comm.send(t, root)
            else:
                outs = _one(output_lists, "gather")
                for peer, out in enumerate(outs):
                    if peer != me:
                        self._comm.recv(out, peer)
        if me == root:
            outs[me].copy_(t)
        return _done(output_lists)

    def scatter(self, outputs, input_lists, opts=ScatterOptions()):
        # torch passes the list of inputs on the root only.
        t, root, me = _one(outputs, "scatter"), opts.rootRank, self.rank()
        with ccl.group():
            if me != root:
                self._comm.recv(t, root)
            else:
                ins = _one(input_lists, "scatter")
                for peer, x in enumerate(ins):
                    if peer != me:
                        self._comm.send(x, peer)
        if me == root:
            t.copy_(ins[me])
        return _done(outputs)

    def barrier(self, opts=BarrierOptions()):
        self._comm.barrier()
        return _done([])

    # ---- point to point ----

    def send(self, tensors, dst, tag=0):
        # Tags are not matched: ccl matches a pair's messages in order.
        self._comm.send(_one(tensors, "send"), dst)
        return _done(tensors)

    def recv(self, tensors, src, tag=0):
        self._comm.recv(_one(tensors, "recv"), src)
        return _done(tensors)

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("ccl backend: recv needs a source rank (ccl has no receive from any source)")

    def _start_coalescing(self):
        # batch_isend_irecv: the sends and receives up to _end_coalescing run
        # as one ccl group, so exchanges that would deadlock as blocking
        # calls (both sides sending first) complete.
        self._coalescing = ccl.group()
        self._coalescing.__enter__()

    def _end_coalescing(self, reqs):
        group, self._coalescing = self._coalescing, None
        group.__exit__(None, None, None)


def _register():
    if hasattr(dist.Backend, "CCL") or "CCL" in dist.Backend._plugins:
        plugin = dist.Backend._plugins.get("CCL")
        owner = getattr(getattr(plugin, "creator_fn", None), "__module__", None) or "torch"
        raise RuntimeError(f"torch.distributed already has a backend named 'ccl', registered by {owner} "
                           "(Intel's oneccl_bindings_for_pytorch uses that name); ccl.torch cannot register "
                           "its own. Import ccl.torch in a process that does not load the other one.")
    # The class is the creator: torch calls it as (store, rank, size, timeout).
    dist.Backend.register_backend("ccl", ProcessGroupCCL)


_register()
