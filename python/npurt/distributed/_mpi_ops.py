"""The ``mpi`` backend's data side: MPI datatypes per npurt dtype, zero-copy buffers over
device memory, and the host-side reductions MPI has no op for (float16 / bfloat16, AVG).

npurt's device memory is host memory: a contiguous DeviceArray's bytes are handed to MPI as
they are (``[memoryview, count, datatype]``, no staging). float16 and bfloat16 reductions
gather the raw elements and fold them here in rank order, accumulating in float32 and
rounding once — the same rule and bits as the ``local`` / ``shm`` reduce kernels.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

# npurt dtype name -> (HCCL data type code, MPI datatype attribute name, itemsize)
DTYPES: Dict[str, Tuple[int, str, int]] = {
    "int8": (0, "INT8_T", 1),
    "int16": (1, "INT16_T", 2),
    "int32": (2, "INT32_T", 4),
    "float16": (3, "", 2),
    "float32": (4, "FLOAT", 4),
    "int64": (5, "INT64_T", 8),
    "uint64": (6, "UINT64_T", 8),
    "uint8": (7, "UINT8_T", 1),
    "uint16": (8, "UINT16_T", 2),
    "uint32": (9, "UINT32_T", 4),
    "float64": (10, "DOUBLE", 8),
    "bfloat16": (11, "", 2),
}
NAMES_BY_CODE = {v[0]: k for k, v in DTYPES.items()}

SUM, PROD, MAX, MIN, AVG = 0, 1, 2, 3, 4
OP_NAMES = {SUM: "sum", PROD: "prod", MAX: "max", MIN: "min", AVG: "avg"}


def mpi_datatype(MPI: Any, dtype: str) -> Any:
    """The MPI datatype reductions use, or None when MPI has none (float16, bfloat16)."""
    attr = DTYPES[dtype][1]
    return getattr(MPI, attr) if attr else None


def mpi_op(MPI: Any, op: int) -> Any:
    return {SUM: MPI.SUM, PROD: MPI.PROD, MAX: MPI.MAX, MIN: MPI.MIN, AVG: MPI.SUM}[op]


def byte_view(arr: Any) -> memoryview:
    """The bytes of a contiguous DeviceArray (or numpy array) as a writable memoryview:
    device memory is host memory, so this is the array itself, not a copy."""
    native = getattr(arr, "_a", None)
    if native is None:
        a = np.ascontiguousarray(arr)
        return memoryview(a.reshape(-1).view(np.uint8))
    nbytes = native.nbytes
    if nbytes == 0:
        return memoryview(bytearray(0))
    raw = memoryview(native._host_bytes()).cast("B")
    off = native.offset
    return raw[off : off + nbytes]


def native_view(native: Any) -> memoryview:
    """:func:`byte_view` of a native array (a DeviceArray's ``_a``)."""
    nbytes = native.nbytes
    if nbytes == 0:
        return memoryview(bytearray(0))
    off = native.offset
    return memoryview(native._host_bytes()).cast("B")[off : off + nbytes]


def numpy_view(mv: memoryview, dtype: str) -> np.ndarray:
    """A numpy view of ``mv`` in ``dtype`` (bfloat16, which numpy lacks, as uint16)."""
    if dtype == "bfloat16":
        return np.frombuffer(mv, dtype=np.uint16)
    return np.frombuffer(mv, dtype=dtype)


def _to_f32(raw: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.view(np.float16).astype(np.float32)


def _bf16_from_f32(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN."""
    u = x.view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        rounded[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return rounded


def _fold(acc: np.ndarray, x: np.ndarray, op: int) -> np.ndarray:
    if op in (SUM, AVG):
        return acc + x
    if op == PROD:
        return acc * x
    # numpy's maximum/minimum: a NaN on either side wins (the reduce kernels' rule)
    return np.maximum(acc, x) if op == MAX else np.minimum(acc, x)


def fold_ranks(parts: List[np.ndarray], dtype: str, op: int) -> np.ndarray:
    """``((p0 ∘ p1) ∘ p2) ∘ ...`` over raw uint16 parts of float16 or bfloat16 elements,
    in float32, rounded once; returns the result's bits (uint16)."""
    acc = _to_f32(parts[0], dtype)
    for p in parts[1:]:
        acc = _fold(acc, _to_f32(p, dtype), op)
    if op == AVG:
        acc = acc / np.float32(len(parts))
    if dtype == "bfloat16":
        return _bf16_from_f32(acc.astype(np.float32))
    return acc.astype(np.float16).view(np.uint16)


def divide_avg(out: np.ndarray, n: int) -> None:
    """AVG after an MPI SUM, in place: floats ``x / n`` in their dtype, integers truncate
    toward zero (the reduce kernels' rule)."""
    if out.dtype.kind == "f":
        np.divide(out, out.dtype.type(n), out=out)
        return
    q = out // n
    if out.dtype.kind == "i":
        q = q + ((out % n != 0) & (out < 0)).astype(out.dtype)
    out[...] = q


def host_reduced(dtype: str, op: int) -> bool:
    """Whether this (dtype, op) is reduced on the host after a gather (MPI has no op)."""
    return dtype in ("float16", "bfloat16")
