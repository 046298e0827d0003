"""Loads libccl, declares the ctypes signatures of ccl.h, and turns result
codes into exceptions.

Where the library comes from, first found wins:
  1. $CCL_LIBRARY, a path to libccl.so;
  2. the build tree, when the package runs from a clone
     (python/ccl/../../build/lib/libccl.so);
  3. the install prefix, when `make install` put the package in
     $PREFIX/lib/python3.X/dist-packages/ccl ($PREFIX/lib/libccl.so.0, so
     a prefix outside the loader's path works too);
  4. the dynamic loader's search path (libccl.so.0, then find_library).

ctypes releases the GIL around every call into a CDLL, so a blocking
collective does not stop the process's other Python threads.
"""

import ctypes
import ctypes.util
import os
import pathlib

from ._types import UNIQUE_ID_BYTES, Result

SONAME = "libccl.so.0"  # the Makefile's -soname, libccl.so.$(SOMAJOR)


class UniqueIdStruct(ctypes.Structure):
    """ccl_unique_id_t: passed by value to ccl_comm_init_rank."""

    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


def _candidates():
    env = os.environ.get("CCL_LIBRARY")
    if env:
        # An explicit choice: no silent fallback to another copy.
        yield env
        return
    here = pathlib.Path(__file__).resolve().parent
    yield str(here.parent.parent / "build" / "lib" / "libccl.so")
    yield str(here.parent.parent.parent / SONAME)
    yield SONAME
    found = ctypes.util.find_library("ccl")
    if found:
        yield found


def _load():
    tried = []
    for cand in _candidates():
        if os.sep in cand and not os.path.exists(cand):
            tried.append(f"{cand} (no such file)")
            continue
        try:
            return ctypes.CDLL(cand), cand
        except OSError as e:
            tried.append(f"{cand} ({e})")
    raise ImportError("ccl: cannot load libccl; set CCL_LIBRARY to its path. Tried: " + "; ".join(tried))


lib, path = _load()

_c_int_p = ctypes.POINTER(ctypes.c_int)
_comm = ctypes.c_void_p
_buf = ctypes.c_void_p
_stream = ctypes.c_void_p
_size = ctypes.c_size_t
_int = ctypes.c_int

_SIGNATURES = {
    "ccl_get_version": (_c_int_p,),
    "ccl_get_unique_id": (ctypes.POINTER(UniqueIdStruct),),
    "ccl_comm_init_rank": (ctypes.POINTER(_comm), _int, UniqueIdStruct, _int),
    "ccl_comm_finalize": (_comm,),
    "ccl_comm_destroy": (_comm,),
    "ccl_comm_abort": (_comm,),
    "ccl_comm_count": (_comm, _c_int_p),
    "ccl_comm_user_rank": (_comm, _c_int_p),
    "ccl_comm_get_async_error": (_comm, _c_int_p),
    "ccl_comm_split": (_comm, _int, _int, ctypes.POINTER(_comm)),
    "ccl_group_start": (),
    "ccl_group_end": (),
    "ccl_allreduce": (_buf, _buf, _size, _int, _int, _comm, _stream),
    "ccl_allgather": (_buf, _buf, _size, _int, _comm, _stream),
    "ccl_reduce_scatter": (_buf, _buf, _size, _int, _int, _comm, _stream),
    "ccl_broadcast": (_buf, _buf, _size, _int, _int, _comm, _stream),
    "ccl_reduce": (_buf, _buf, _size, _int, _int, _int, _comm, _stream),
    "ccl_alltoall": (_buf, _buf, _size, _int, _comm, _stream),
    "ccl_barrier": (_comm, _stream),
    "ccl_send": (_buf, _size, _int, _int, _comm, _stream),
    "ccl_recv": (_buf, _size, _int, _int, _comm, _stream),
}

for _name, _args in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.argtypes = list(_args)
    _fn.restype = _int
lib.ccl_get_error_string.argtypes = [_int]
lib.ccl_get_error_string.restype = ctypes.c_char_p
lib.ccl_get_last_error.argtypes = [_comm]
lib.ccl_get_last_error.restype = ctypes.c_char_p


class CclError(RuntimeError):
    """A ccl call failed. `code` is the ccl.Result, `message` ccl's text
    (ccl_get_last_error), which names the call and what was wrong."""

    def __init__(self, code, message):
        try:
            code = Result(code)
        except ValueError:  # a code newer than this package: keep the int
            pass
        self.code = code
        self.message = message
        name = code.name if isinstance(code, Result) else str(code)
        super().__init__(f"{message} [{name}]")

    def __reduce__(self):
        # Picklable with its code and message, e.g. from a multiprocessing
        # worker to its parent.
        return type(self), (self.code, self.message)


class CclArgumentError(CclError, ValueError):
    """ccl refused an argument (dtype, op, rank, count, buffer layout)."""


class CclTimeoutError(CclError, TimeoutError):
    """A wait ran past CCL_TIMEOUT."""


class CclRemoteError(CclError):
    """A peer failed, exited or sent something wrong."""


class CclAbortedError(CclError):
    """The communicator was aborted."""


class CclUnsupportedError(CclError):
    """Valid, but not supported by this build or machine."""


_ERROR_CLASS = {
    Result.ERR_INVALID_ARGUMENT: CclArgumentError,
    Result.ERR_NULL_BUFFER: CclArgumentError,
    Result.ERR_INVALID_DTYPE: CclArgumentError,
    Result.ERR_INVALID_OP: CclArgumentError,
    Result.ERR_INVALID_RANK: CclArgumentError,
    Result.ERR_COUNT_OVERFLOW: CclArgumentError,
    Result.ERR_INPLACE_LAYOUT: CclArgumentError,
    Result.ERR_TIMEOUT: CclTimeoutError,
    Result.ERR_REMOTE: CclRemoteError,
    Result.ERR_ABORTED: CclAbortedError,
    Result.ERR_UNSUPPORTED: CclUnsupportedError,
}


def error(code, comm=None):
    """The exception for `code`, with ccl's last message on comm (or, with
    comm None, on this thread). ccl keeps that message per thread, and a
    ctypes call runs on the calling thread, so it is the right one."""
    raw = lib.ccl_get_last_error(comm)
    message = raw.decode(errors="replace") if raw else ""
    if not message:
        message = lib.ccl_get_error_string(code).decode(errors="replace")
    return _ERROR_CLASS.get(code, CclError)(code, message)


def check(code, comm=None):
    """Raises error(code, comm) unless code is CCL_SUCCESS."""
    if code != Result.SUCCESS:
        raise error(code, comm)
