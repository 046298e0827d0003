"""ccl.h's enums in Python, and the map from array dtypes to ccl's.

The values mirror include/ccl.h (result codes, element types, reduction
operators); python/tests/test_enums.py parses the header and fails when
the two drift apart. Member names are the C names without the ``CCL_``
prefix (``CCL_ERR_TIMEOUT`` is ``Result.ERR_TIMEOUT``).
"""

import enum
import operator

# ccl.h: CCL_UNIQUE_ID_BYTES and CCL_SPLIT_NOCOLOR.
UNIQUE_ID_BYTES = 128
SPLIT_NOCOLOR = -1


class Result(enum.IntEnum):
    """ccl_result_t."""

    SUCCESS = 0
    ERR_CUDA = 1
    ERR_SYSTEM = 2
    ERR_INTERNAL = 3
    ERR_INVALID_ARGUMENT = 4
    ERR_INVALID_USAGE = 5
    ERR_REMOTE = 6
    IN_PROGRESS = 7
    ERR_TIMEOUT = 8
    ERR_ABORTED = 9
    ERR_UNSUPPORTED = 10
    ERR_NULL_COMM = 11
    ERR_NULL_BUFFER = 12
    ERR_INVALID_DTYPE = 13
    ERR_INVALID_OP = 14
    ERR_INVALID_RANK = 15
    ERR_COUNT_OVERFLOW = 16
    ERR_INPLACE_LAYOUT = 17
    ERR_MISMATCH = 18
    ERR_GROUP = 19
    ERR_CORRUPT = 20


class DataType(enum.IntEnum):
    """ccl_datatype_t (numbered as NCCL's ncclDataType_t)."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8_E4M3 = 10
    FLOAT8_E5M2 = 11


class RedOp(enum.IntEnum):
    """ccl_redop_t's built-in operators."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


# An array's dtype name -> ccl's type. NumPy (`arr.dtype.name`) and torch
# (`str(t.dtype)` without "torch.") spell the common types alike, so one
# table serves both. bfloat16 and the float8 types come from torch (or
# ml_dtypes' NumPy dtypes, which use the same names); NumPy itself has none.
DTYPE_BY_NAME = {
    "int8": DataType.INT8,
    "uint8": DataType.UINT8,
    "int32": DataType.INT32,
    "uint32": DataType.UINT32,
    "int64": DataType.INT64,
    "uint64": DataType.UINT64,
    "float16": DataType.FLOAT16,
    "float32": DataType.FLOAT32,
    "float64": DataType.FLOAT64,
    "bfloat16": DataType.BFLOAT16,
    "float8_e4m3fn": DataType.FLOAT8_E4M3,
    "float8_e5m2": DataType.FLOAT8_E5M2,
}


def redop(op):
    """The ccl_redop_t value of `op`: a RedOp, its name ("sum", any case)
    or an int (passed through, so ccl itself judges values it does not
    know, such as a premulsum operator made in C)."""
    if isinstance(op, str):
        try:
            return RedOp[op.upper()]
        except KeyError:
            names = ", ".join(m.name.lower() for m in RedOp)
            raise ValueError(f"unknown reduction op {op!r} (one of {names})") from None
    try:
        op = operator.index(op)  # Python and NumPy integers, not floats
    except TypeError:
        raise TypeError(f"op must be a ccl.RedOp, a name such as 'sum' or an int, not {type(op).__name__}") from None
    if not -(2**31) <= op < 2**31:
        raise ValueError(f"op {op} does not fit ccl_redop_t (a C int)")
    return op
