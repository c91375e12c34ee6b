"""Host copies of device arrays: the host-side argument handling of
``DeviceArray.copy_(host)`` and ``to_host(out=)``. The copies themselves, and their ordering
with the arrays' last writers, are ``npurt.memcpy[_async]``'s (``npurt_kernels::copies``)."""

from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from .. import _npurt
from .util import _type_error, _value_error


def host_like(src: Any, shape: Tuple[int, ...], dtype: Any, op: str) -> Any:
    """``src`` as C-contiguous host data of ``shape`` and ``dtype``: as it is when it already
    is (a numpy view of a HostBuffer stays pinned), else converted by ``np.copyto``'s rules
    (broadcasting, ``same_kind`` casting)."""
    x = src if isinstance(src, np.ndarray) else np.asarray(src)
    if x.shape == shape and x.dtype == dtype and x.flags.c_contiguous:
        return x
    tmp = np.empty(shape, dtype)
    try:
        np.copyto(tmp, x, casting="same_kind")
    except TypeError as e:
        raise _type_error(f"{op}: {e}") from None
    except ValueError as e:
        raise _value_error(f"{op}: {e}") from None
    return tmp


def copy_from_host(a: Any, src: Any, st: Any) -> Any:
    """``a.copy_(src)`` for host data into a contiguous, non-bfloat16 array: one
    ``memcpy_async`` on ``st`` (None: the current stream)."""
    if isinstance(src, (_npurt.HostBuffer, _npurt.DeviceBuffer)):
        if src.nbytes < a.nbytes:
            raise _value_error(f"copy_: the buffer holds {src.nbytes} bytes, the array needs {a.nbytes}")
    else:
        src = host_like(src, a.shape, a.dtype, "copy_")
    if a.nbytes:
        _npurt.memcpy_async(a._a, src, st, a.nbytes)
    return a


def to_host_out(a: Any, out: Any, stream: Any) -> Any:
    """``a.to_host(out=out, stream=stream)`` for a contiguous array; returns ``out``."""
    if isinstance(out, np.ndarray):
        want = np.dtype(np.float32 if a.dtype_name == "bfloat16" else a.dtype_name)
        if out.dtype != want:
            raise _type_error(f"to_host: out has dtype {out.dtype}, the array needs {want}")
        if out.shape != a.shape:
            raise _value_error(f"to_host: out has shape {out.shape}, the array has {a.shape}")
        if a.dtype_name == "bfloat16":  # widened on the host
            out[...] = a.to_host(stream=stream)
            return out
    elif not isinstance(out, _npurt.HostBuffer):
        raise _type_error(f"to_host: out must be a numpy array or an npurt.HostBuffer, not {type(out).__name__}")
    if a.nbytes:
        if stream is None:
            _npurt.memcpy(out, a._a, a.nbytes)
        else:
            _npurt.memcpy_async(out, a._a, stream, a.nbytes)
    return out
