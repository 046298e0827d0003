"""ccl for Python: communicators and collectives on NumPy arrays and
PyTorch tensors, through ctypes over libccl (no compiled extension).

    uid = ccl.get_unique_id()                # on one rank; bytes, send it to the others
    with ccl.Communicator(nranks, uid, rank) as comm:
        comm.allreduce(x)                    # in place, sum
        y = comm.allgather(x)                # a new array

Buffers are C-contiguous NumPy arrays or torch tensors; their dtype is the
element type. CPU buffers run blocking calls (ccl's NULL stream); CUDA
tensors are queued on torch's current stream of their device, as NCCL's
calls are. Failures raise CclError (or a subclass) with ccl's message;
arguments refused before reaching ccl raise ValueError or TypeError.
docs/python.md is the guide.
"""

import contextlib
import ctypes
import operator
import os
import sys
import threading
import weakref

from . import _lib
from ._lib import (
    CclAbortedError,
    CclArgumentError,
    CclError,
    CclRemoteError,
    CclTimeoutError,
    CclUnsupportedError,
)
from ._types import SPLIT_NOCOLOR, UNIQUE_ID_BYTES, DTYPE_BY_NAME, DataType, RedOp, Result, redop

__all__ = [
    "AVG", "MAX", "MIN", "PROD", "SUM", "SPLIT_NOCOLOR", "UNIQUE_ID_BYTES",
    "CclAbortedError", "CclArgumentError", "CclError", "CclRemoteError", "CclTimeoutError",
    "CclUnsupportedError", "Communicator", "DataType", "RedOp", "Result",
    "get_unique_id", "get_version", "group",
]

SUM, PROD, MAX, MIN, AVG = RedOp.SUM, RedOp.PROD, RedOp.MAX, RedOp.MIN, RedOp.AVG


def get_version():
    """The linked libccl's version code (major*10000 + minor*100 + patch)."""
    v = ctypes.c_int()
    _lib.check(_lib.lib.ccl_get_version(ctypes.byref(v)))
    return v.value


def get_unique_id():
    """A new bootstrap token (128 bytes). Call on one rank and hand it to
    every rank (pickle, multiprocessing, mpi4py's bcast); the bootstrap
    root runs in this process until the ranks have joined or CCL_TIMEOUT
    passes."""
    uid = _lib.UniqueIdStruct()
    _lib.check(_lib.lib.ccl_get_unique_id(ctypes.byref(uid)))
    # Not uid.internal: ctypes reads a char array field as a C string,
    # cut at the first zero byte.
    return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)


# ---- groups --------------------------------------------------------------------

# ccl's group state is per thread, and so is what keeps a group's buffers
# alive: a call queued in a group reads its buffers only at the outermost
# group end, so an array made inline (comm.send(np.ones(4), 1)) must not be
# freed before then.
_group_state = threading.local()


def _group_depth():
    return getattr(_group_state, "depth", 0)


@contextlib.contextmanager
def group():
    """Calls inside run together at the end of the outermost `with
    ccl.group()` (ccl_group_start/end), e.g. sends and receives that would
    deadlock as separate blocking calls. Nests. When a call inside fails,
    the group end runs nothing and the first error propagates."""
    _lib.check(_lib.lib.ccl_group_start())
    if _group_depth() == 0:
        _group_state.keep = []
    _group_state.depth = _group_depth() + 1
    failed = True
    try:
        yield
        failed = False
    finally:
        _group_state.depth -= 1
        res = _lib.lib.ccl_group_end()
        if _group_state.depth == 0:
            _group_state.keep = []
        # The body's exception already says what went wrong; ccl's group
        # end then repeats a refused call's error, which adds nothing.
        if not failed:
            _lib.check(res)


# ---- buffers -------------------------------------------------------------------


class _Buffer:
    """One array or tensor as ccl sees it: address, element count and type,
    and the CUDA device it lives on (None for host memory)."""

    __slots__ = ("obj", "ptr", "count", "dtype", "device", "is_torch")

    def __init__(self, obj, name, writable):
        torch = sys.modules.get("torch")
        np = sys.modules.get("numpy")
        if torch is not None and isinstance(obj, torch.Tensor):
            self._init_torch(obj, name)
        elif np is not None and isinstance(obj, np.ndarray):
            self._init_numpy(obj, name, writable)
        else:
            raise TypeError(f"{name} must be a NumPy array or a torch tensor, not {type(obj).__name__}")
        self.obj = obj

    def _init_torch(self, t, name):
        if t.device.type not in ("cpu", "cuda"):
            raise ValueError(f"{name} is on device {t.device}; ccl takes CPU and CUDA tensors")
        if not t.is_contiguous():
            raise ValueError(f"{name} is not contiguous; pass t.contiguous() (ccl does not copy silently)")
        self.dtype = _DTYPES.get(t.dtype)
        if self.dtype is None:
            self.dtype = _dtype(t.dtype, str(t.dtype).replace("torch.", ""), name)
        self.ptr = t.data_ptr()
        self.count = t.numel()
        self.device = t.device.index if t.device.type == "cuda" else None
        self.is_torch = True

    def _init_numpy(self, a, name, writable):
        if not a.flags.c_contiguous:
            raise ValueError(f"{name} is not C-contiguous; pass np.ascontiguousarray(...) "
                             "(ccl does not copy silently)")
        if writable and not a.flags.writeable:
            raise ValueError(f"{name} is read-only")
        self.dtype = _DTYPES.get(a.dtype)
        if self.dtype is None:
            if not a.dtype.isnative:
                raise ValueError(f"{name} has non-native byte order ({a.dtype.str})")
            self.dtype = _dtype(a.dtype, a.dtype.name, name)
        self.ptr = a.ctypes.data
        self.count = a.size
        self.device = None
        self.is_torch = False

    def empty(self, shape):
        """A new array of this buffer's kind, dtype and device."""
        if self.is_torch:
            return sys.modules["torch"].empty(shape, dtype=self.obj.dtype, device=self.obj.device)
        return sys.modules["numpy"].empty(shape, dtype=self.obj.dtype)


# NumPy or torch dtype object -> ccl type, filled as dtypes are met: a
# dtype's name is built on each access (microseconds, a quarter of a small
# call's cost in Python), the dict lookup is not.
_DTYPES = {}


def _dtype(dt, name, what):
    try:
        _DTYPES[dt] = DTYPE_BY_NAME[name]
    except KeyError:
        raise TypeError(f"{what} has dtype {name}, which ccl does not support "
                        f"(supported: {', '.join(DTYPE_BY_NAME)})") from None
    return _DTYPES[dt]


def _recvbuf(recvbuf, send, count, call):
    """Checks a caller's recvbuf against the sendbuf and the element count
    the call writes: same dtype and device, exactly `count` elements."""
    r = _Buffer(recvbuf, "recvbuf", writable=True)
    if r.dtype != send.dtype:
        raise TypeError(f"{call}: recvbuf is {r.dtype.name.lower()} but sendbuf is {send.dtype.name.lower()}")
    if r.device != send.device:
        raise ValueError(f"{call}: sendbuf and recvbuf are on different devices")
    if r.count != count:
        raise ValueError(f"{call}: recvbuf has {r.count} elements, needs {count}")
    return r


def _split_count(buf, nranks, call):
    if buf.count % nranks:
        raise ValueError(f"{call}: sendbuf has {buf.count} elements, not a multiple of the {nranks} ranks")
    return buf.count // nranks


def _rank_arg(value, what, call):
    # operator.index: Python and NumPy integers, not floats or strings.
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{call}: {what} must be an int, not {type(value).__name__}") from None
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"{call}: {what} {value} does not fit a C int")
    return value


# ---- communicators -------------------------------------------------------------


def _destroy_handle(handle, pid):
    # A forked child inherits Python objects of its parent's communicators;
    # destroying those would tear down the parent's.
    if os.getpid() == pid:
        _lib.lib.ccl_comm_destroy(handle)


class Communicator:
    """A ccl communicator: rank `rank` of `nranks`, joined through `uid`
    (from get_unique_id on one rank). Blocks until every rank has joined or
    CCL_TIMEOUT (seconds, default 300) passes.

    As a context manager it finalizes and destroys on a normal exit (a
    barrier: every rank's calls are done), and aborts when the block
    raises, so peers get an error instead of waiting. Otherwise call
    destroy() (or abort()); an unreachable communicator is destroyed by
    the garbage collector."""

    def __init__(self, nranks, uid, rank):
        nranks = _rank_arg(nranks, "nranks", "Communicator")
        rank = _rank_arg(rank, "rank", "Communicator")
        raw = bytes(uid)
        if len(raw) != UNIQUE_ID_BYTES:
            raise ValueError(f"Communicator: uid has {len(raw)} bytes, a unique id has {UNIQUE_ID_BYTES}")
        cuid = _lib.UniqueIdStruct()
        ctypes.memmove(ctypes.addressof(cuid), raw, UNIQUE_ID_BYTES)
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.ccl_comm_init_rank(ctypes.byref(handle), nranks, cuid, rank))
        self._adopt(handle.value)

    @classmethod
    def _from_handle(cls, handle):
        self = cls.__new__(cls)
        self._adopt(handle)
        return self

    def _adopt(self, handle):
        self._handle = handle
        self._finalizer = weakref.finalize(self, _destroy_handle, handle, os.getpid())
        n, r = ctypes.c_int(), ctypes.c_int()
        _lib.check(_lib.lib.ccl_comm_count(handle, ctypes.byref(n)), handle)
        _lib.check(_lib.lib.ccl_comm_user_rank(handle, ctypes.byref(r)), handle)
        self._size, self._rank = n.value, r.value

    @property
    def rank(self):
        """This rank's number, 0..size-1."""
        return self._rank

    @property
    def size(self):
        """The number of ranks."""
        return self._size

    @property
    def handle(self):
        """The ccl_comm_t as an int, for C code (0 once destroyed)."""
        return self._handle or 0

    def __repr__(self):
        state = "" if self._handle else ", destroyed"
        return f"<ccl.Communicator rank {self._rank} of {self._size}{state}>"

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._handle:
            return
        if exc_type is not None:
            self.abort()
            return
        try:
            self.finalize()
        except BaseException:
            self.abort()  # a peer is gone: finalize says so, abort frees
            raise
        self.destroy()

    def _live(self, call):
        if not self._handle:
            raise CclError(Result.ERR_NULL_COMM, f"{call}: the communicator was destroyed or aborted")
        return self._handle

    def _release(self):
        handle, self._handle = self._handle, None
        self._finalizer.detach()
        return handle

    def finalize(self):
        """ccl_comm_finalize: waits for this rank's calls, then for every
        rank (a barrier). Only destroy() and abort() may follow."""
        handle = self._live("finalize")
        _lib.check(_lib.lib.ccl_comm_finalize(handle), handle)

    def destroy(self):
        """ccl_comm_destroy: frees the communicator. Calling it again does
        nothing; any other call afterwards raises CclError."""
        if self._handle:
            handle = self._release()
            _lib.check(_lib.lib.ccl_comm_destroy(handle))

    def abort(self):
        """ccl_comm_abort: stops outstanding work as soon as possible and
        frees the communicator; peers see an error instead of hanging. Safe
        from another thread than the one in a call."""
        if self._handle:
            handle = self._release()
            _lib.check(_lib.lib.ccl_comm_abort(handle))

    def split(self, color, key=None):
        """ccl_comm_split, collective over every rank: ranks with the same
        color form a new Communicator, ordered by key (default: this rank),
        then rank. color None (or SPLIT_NOCOLOR) joins none: returns None."""
        handle = self._live("split")
        color = SPLIT_NOCOLOR if color is None else _rank_arg(color, "color", "split")
        key = self._rank if key is None else _rank_arg(key, "key", "split")
        new = ctypes.c_void_p()
        _lib.check(_lib.lib.ccl_comm_split(handle, color, key, ctypes.byref(new)), handle)
        return Communicator._from_handle(new.value) if new.value else None

    def _run(self, call, bufs, *args):
        """Calls ccl_<call>(*args, comm, stream). Host buffers use the NULL
        stream (blocking); CUDA tensors torch's current stream of their
        device, with that device current, as ccl.h asks."""
        handle = self._live(call)
        device = bufs[0].device if bufs else None
        if any(b.device != device for b in bufs):
            raise ValueError(f"{call}: buffers on different devices")
        fn = getattr(_lib.lib, "ccl_" + call)
        if device is None:
            res = fn(*args, handle, None)
        else:
            # Untested: no GPU where this was written (docs/python.md).
            torch = sys.modules["torch"]
            with torch.cuda.device(device):
                res = fn(*args, handle, torch.cuda.current_stream(device).cuda_stream)
        if _group_depth():
            _group_state.keep.extend(b.obj for b in bufs)
        _lib.check(res, handle)

    # ---- collectives ----

    def allreduce(self, sendbuf, recvbuf=None, op=SUM):
        """recvbuf = op over ranks of sendbuf; in place (on sendbuf) when
        recvbuf is None or sendbuf itself. Returns the result buffer."""
        s = _Buffer(sendbuf, "sendbuf", writable=recvbuf is None)
        r = s if recvbuf is None else _recvbuf(recvbuf, s, s.count, "allreduce")
        self._run("allreduce", (s, r), s.ptr, r.ptr, s.count, s.dtype, redop(op))
        return r.obj

    def allgather(self, sendbuf, recvbuf=None):
        """recvbuf = every rank's sendbuf, concatenated in rank order
        (size * sendbuf.size elements). recvbuf None: a new array of shape
        (size * n0, ...) for a sendbuf of shape (n0, ...). In place when
        sendbuf is the view recvbuf[rank*n:(rank+1)*n] (NCCL's rule)."""
        s = _Buffer(sendbuf, "sendbuf", writable=False)
        total = s.count * self._size
        if recvbuf is None:
            shape = tuple(sendbuf.shape)
            recvbuf = s.empty((self._size * shape[0],) + shape[1:] if shape else (self._size,))
        r = _recvbuf(recvbuf, s, total, "allgather")
        self._run("allgather", (s, r), s.ptr, r.ptr, s.count, s.dtype)
        return r.obj

    def reduce_scatter(self, sendbuf, recvbuf=None, op=SUM):
        """recvbuf = op over ranks of block `rank` of sendbuf (size blocks
        of sendbuf.size / size elements). recvbuf None: a new array, of
        shape (n0 / size, ...) when size divides sendbuf's first dimension
        n0, else flat. In place when recvbuf is the view of sendbuf's block
        `rank`."""
        s = _Buffer(sendbuf, "sendbuf", writable=False)
        n = _split_count(s, self._size, "reduce_scatter")
        if recvbuf is None:
            shape = tuple(sendbuf.shape)
            if shape and shape[0] % self._size == 0:
                recvbuf = s.empty((shape[0] // self._size,) + shape[1:])
            else:
                recvbuf = s.empty((n,))
        r = _recvbuf(recvbuf, s, n, "reduce_scatter")
        self._run("reduce_scatter", (s, r), s.ptr, r.ptr, n, s.dtype, redop(op))
        return r.obj

    def broadcast(self, sendbuf, recvbuf=None, root=0):
        """recvbuf = root's sendbuf on every rank; in place (on sendbuf)
        when recvbuf is None. sendbuf is read on root only, and may be None
        elsewhere when recvbuf is given."""
        root = _rank_arg(root, "root", "broadcast")
        if sendbuf is None:
            if recvbuf is None or root == self._rank:
                raise ValueError("broadcast: sendbuf is None (allowed only off the root, with a recvbuf)")
            r = _Buffer(recvbuf, "recvbuf", writable=True)
            s = r
        else:
            s = _Buffer(sendbuf, "sendbuf", writable=recvbuf is None)
            r = s if recvbuf is None else _recvbuf(recvbuf, s, s.count, "broadcast")
        self._run("broadcast", (s, r), s.ptr, r.ptr, s.count, s.dtype, root)
        return r.obj

    def reduce(self, sendbuf, recvbuf=None, op=SUM, root=0):
        """recvbuf on root = op over ranks of sendbuf; in place (on sendbuf)
        when recvbuf is None. Other ranks' recvbuf is left alone. Returns
        the result buffer (meaningful on root only)."""
        root = _rank_arg(root, "root", "reduce")
        s = _Buffer(sendbuf, "sendbuf", writable=recvbuf is None and root == self._rank)
        r = s if recvbuf is None else _recvbuf(recvbuf, s, s.count, "reduce")
        self._run("reduce", (s, r), s.ptr, r.ptr, s.count, s.dtype, redop(op), root)
        return r.obj

    def alltoall(self, sendbuf, recvbuf=None):
        """Block p of sendbuf (size equal blocks) goes to rank p, landing in
        block `rank` of its recvbuf. recvbuf None: a new array shaped as
        sendbuf. The buffers must not overlap (ccl has no in-place
        alltoall)."""
        s = _Buffer(sendbuf, "sendbuf", writable=False)
        n = _split_count(s, self._size, "alltoall")
        if recvbuf is None:
            recvbuf = s.empty(tuple(sendbuf.shape))
        r = _recvbuf(recvbuf, s, s.count, "alltoall")
        self._run("alltoall", (s, r), s.ptr, r.ptr, n, s.dtype)
        return r.obj

    def barrier(self):
        """Returns once every rank has called it."""
        self._run("barrier", ())

    def send(self, buf, peer):
        """Sends buf to rank peer; matched in order by its recv, which must
        take as many bytes. Outside a group it blocks until the data is
        handed over: exchanges belong in `with ccl.group():`."""
        peer = _rank_arg(peer, "peer", "send")
        b = _Buffer(buf, "buf", writable=False)
        self._run("send", (b,), b.ptr, b.count, b.dtype, peer)

    def recv(self, buf, peer):
        """Receives into buf from rank peer; returns buf."""
        peer = _rank_arg(peer, "peer", "recv")
        b = _Buffer(buf, "buf", writable=True)
        self._run("recv", (b,), b.ptr, b.count, b.dtype, peer)
        return b.obj
