"""Inputs and NumPy references shared by the collective tests.

Every rank's input is a function of (rank, count, dtype, op), so the test
process recomputes all ranks' inputs to build the reference. Values are
small multiples of 0.5 (whole numbers for integer types) so that sums,
products, max and min are exact in every type, bfloat16 included; only
avg of floating types rounds, and is compared with a tolerance.
"""

import numpy as np

NUMPY_DTYPES = ("float32", "float64", "int32", "int64", "float16")
# bfloat16 has no NumPy dtype: those cases use torch tensors.
ALL_DTYPES = NUMPY_DTYPES + ("bfloat16",)
OPS = ("sum", "prod", "max", "min", "avg")

_TOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12}


def values(rank, count, dtype, op="sum"):
    """Rank `rank`'s input as float64 values."""
    seed = (rank * 7919 + count * 31 + OPS.index(op) * 3 + ALL_DTYPES.index(dtype)) % 2**32
    rng = np.random.default_rng(seed)
    unsigned = dtype.startswith("uint")
    if op == "prod":  # 3 ranks multiply to at most 8 in magnitude
        v = rng.integers(1, 3, count).astype(np.float64)
        if not unsigned:
            v *= rng.choice((-1.0, 1.0), count)
    else:
        v = rng.integers(0 if unsigned else -4, 5, count).astype(np.float64)
    if dtype.startswith("float") or dtype == "bfloat16":
        v += rng.integers(0, 2, count) * 0.5
    return v


def make(vals, dtype):
    """vals as a NumPy array of dtype, or a torch tensor for bfloat16."""
    if dtype == "bfloat16":
        import torch

        return torch.tensor(vals, dtype=torch.bfloat16)
    return np.asarray(vals).astype(dtype)


def as_numpy(buf):
    """A NumPy copy of an array or tensor (bfloat16 widened to float32),
    picklable to send back from a rank."""
    if isinstance(buf, np.ndarray):
        return buf.copy()
    import torch

    if buf.dtype == torch.bfloat16:
        buf = buf.float()
    return buf.numpy().copy()


def reduce_ref(inputs, op, dtype, nranks):
    """The reduction over ranks of float64 inputs, as ccl defines op
    (avg of integers divides with truncation, as NCCL's)."""
    x = np.stack(inputs)
    if op == "sum":
        return x.sum(0)
    if op == "prod":
        return x.prod(0)
    if op == "max":
        return x.max(0)
    if op == "min":
        return x.min(0)
    if dtype.startswith("int") or dtype.startswith("uint"):
        return np.trunc(x.sum(0) / nranks)
    return x.sum(0) / nranks


def check(got, want, dtype, what=""):
    """Exact for integers and exact-valued floats, within the type's
    rounding for float results that round."""
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    want = np.asarray(want, dtype=np.float64).reshape(-1)
    assert got.shape == want.shape, f"{what}: {got.shape} elements, want {want.shape}"
    tol = _TOL.get(dtype, 0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)
