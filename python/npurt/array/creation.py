"""Creating device arrays: ``empty``, ``zeros``, ``ones``, ``full``, ``*_like`` and
``to_device`` (host data to a new array), plus the argument helpers every kernel wrapper uses
(``_arr``, ``_out``)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import _npurt
from .device_array import DeviceArray
from .util import _dtype_name, _scalar, _shape_arg, _stream_for, _type_error

__all__ = ["to_device", "empty", "zeros", "ones", "full", "empty_like", "zeros_like"]

def empty(
    shape: Any, dtype: Any = "float32", device: Any = None, stream: Any = None, shareable: Any = None
) -> DeviceArray:
    """A new array (contents unspecified) from the device's caching pool (``device``: an id
    or Device, default the current device). ``shareable=True``: from the shareable pool,
    so :meth:`DeviceArray.ipc_export` works (None: the process default, see
    :func:`npurt.set_ipc_shareable`)."""
    return DeviceArray(_npurt._empty(list(_shape_arg(shape)), _dtype_name(dtype), device, shareable))


def full(
    shape: Any, fill_value: Any, dtype: Any = "float32", device: Any = None, stream: Any = None, shareable: Any = None
) -> DeviceArray:
    """A new array filled with ``fill_value`` (a fill kernel on ``stream``)."""
    a = empty(shape, dtype, device=device, shareable=shareable)
    if a.size:
        _npurt._fill(a._a, _scalar(fill_value), _stream_for(stream, device))
    return a


def zeros(
    shape: Any, dtype: Any = "float32", device: Any = None, stream: Any = None, shareable: Any = None
) -> DeviceArray:
    return full(shape, 0, dtype, device=device, stream=stream, shareable=shareable)


def ones(
    shape: Any, dtype: Any = "float32", device: Any = None, stream: Any = None, shareable: Any = None
) -> DeviceArray:
    return full(shape, 1, dtype, device=device, stream=stream, shareable=shareable)


def empty_like(a: DeviceArray, dtype: Any = None) -> DeviceArray:
    a = _arr(a, "a")
    return empty(a.shape, a.dtype_name if dtype is None else dtype, device=a.device)


def zeros_like(a: DeviceArray, dtype: Any = None, stream: Any = None) -> DeviceArray:
    a = _arr(a, "a")
    return zeros(a.shape, a.dtype_name if dtype is None else dtype, device=a.device, stream=stream)


def to_device(x: Any, stream: Any = None, dtype: Any = None, device: Any = None, shareable: Any = None) -> DeviceArray:
    """Copies host data (a numpy array or anything ``np.asarray`` takes) to a new device
    array. Without ``stream`` the bytes are in device memory when the call returns (ACL's
    rule for pageable memory); with ``stream`` and pinned data (a numpy view of a
    HostBuffer: ``host.numpy(dtype)``), the copy is queued on ``stream``'s copy engine and
    the call returns before it ran (the array's last writer is ``stream``, so kernels wait
    for it; leave the host memory alone until then). float64 becomes float32; ``dtype``
    converts (``"bfloat16"`` rounds on the device, on ``stream``). ``shareable=True``: the
    new array comes from the shareable pool (see :func:`empty`)."""
    from .ops import cast

    if isinstance(x, DeviceArray):
        if device is not None and _npurt.current_stream(device).device != x.device:
            want = x.dtype_name if dtype is None else dtype
            return to_device(x.to_host(), stream=stream, dtype=want, device=device, shareable=shareable)
        if shareable:
            return to_device(x.to_host(), stream=stream, dtype=dtype, device=device, shareable=True)
        out = x.copy(stream=stream)
        return out if dtype is None or _dtype_name(dtype) == out.dtype_name else cast(out, dtype, stream=stream)
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as e:
        raise _type_error(f"to_device: cannot convert {type(x).__name__} to an array: {e}") from None
    want = _dtype_name(dtype) if dtype is not None else None
    if a.dtype == np.float64 and want is None:
        want = "float32"
    if want is None:
        want = _dtype_name(a.dtype)
    host_dtype = "float32" if want == "bfloat16" else want
    try:
        a = np.asarray(a, dtype=host_dtype, order="C")
    except (TypeError, ValueError, OverflowError) as e:
        raise _type_error(f"to_device: cannot convert {a.dtype} data to {host_dtype}: {e}") from None
    out = empty(a.shape, host_dtype, device=device, shareable=shareable)
    if a.nbytes:
        if stream is not None and _npurt._is_pinned(a):
            _npurt.memcpy_async(out._a, a, stream)
        else:
            # A fresh block from the pool is idle for every stream: write it now.
            _npurt.memcpy(out._a, a)
    if want == "bfloat16":
        return cast(out, "bfloat16", stream=_stream_for(stream, out.device))
    return out


def _arr(v: Any, what: str) -> DeviceArray:
    if not isinstance(v, DeviceArray):
        raise _type_error(f"{what} must be an npurt.DeviceArray, not {type(v).__name__}")
    return v


def _out(out: Any, shape: Sequence[int], dtype: str, device: int) -> DeviceArray:
    if out is None:
        return empty(shape, dtype, device=device)
    return _arr(out, "out")
