"""Gathering, padding and shaping kernels with numpy names (ONNX's Gather, Pad, Tile,
Expand, Range, TopK): ``take``, ``pad``, ``tile``, ``broadcast_to``, ``arange``, ``topk``."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

from .. import _npurt
from .creation import _arr, _out, empty
from .device_array import DeviceArray
from .util import (
    _axis_int,
    _bshape,
    _dtype_name,
    _flag,
    _ints,
    _is_scalar,
    _scalar,
    _shape_arg,
    _type_error,
    _value_error,
    operator_index,
)

__all__ = ["take", "pad", "tile", "broadcast_to", "arange", "topk"]


def take(x: DeviceArray, indices: DeviceArray, axis: Optional[int] = None, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """numpy's ``take`` (ONNX ``Gather``): ``x``'s slices at integer ``indices`` along
    ``axis`` (None: of the flattened array). Negative indices count from the end; an index
    out of range fails the kernel (the stream's error names it)."""
    x, idx = _arr(x, "x"), _arr(indices, "indices")
    if axis is None:
        x = x.reshape(-1) if x.is_contiguous else x.copy(stream=stream).reshape(-1)
        axis = 0
    ax = _axis_int(axis)
    shape = _npurt._take_shape(list(x.shape), list(idx.shape), ax)
    o = _out(out, shape, x.dtype_name, x.device)
    _npurt._take(x._a, idx._a, ax, o._a, stream)
    return o


def pad(x: DeviceArray, pads: Sequence[int], mode: str = "constant", constant_value: Any = 0, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """ONNX ``Pad``: ``pads = [b1, ..., bn, e1, ..., en]`` (begins then ends; negative
    values crop); ``mode`` is ``"constant"`` (with ``constant_value``), ``"reflect"``,
    ``"edge"`` or ``"wrap"``."""
    x = _arr(x, "x")
    p = _ints(pads, "pads", 2 * x.ndim, lo=None)
    if not isinstance(mode, str):
        raise _type_error(f"mode must be a str, not {type(mode).__name__}")
    if not _is_scalar(constant_value):
        raise _type_error(f"constant_value must be a number, not {type(constant_value).__name__}")
    shape = [x.shape[d] + p[d] + p[x.ndim + d] for d in range(x.ndim)]
    if any(s < 0 for s in shape):
        raise _value_error(f"pads {p} crop {tuple(x.shape)} below zero")
    o = _out(out, shape, x.dtype_name, x.device)
    _npurt._pad(x._a, p, mode, _scalar(constant_value), o._a, stream)
    return o


def tile(x: DeviceArray, reps: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """numpy's ``tile`` (ONNX ``Tile``): ``reps`` repetitions per axis (fewer entries than
    axes repeat the last ones; more prepend axes of size 1)."""
    x = _arr(x, "x")
    r = [operator_index(reps, "reps")] if not isinstance(reps, (tuple, list)) else _ints(reps, "reps")
    if any(v < 0 for v in r):
        raise _value_error(f"reps {r} must be >= 0")
    if len(r) < x.ndim:
        r = [1] * (x.ndim - len(r)) + r
    elif len(r) > x.ndim:
        x = x.reshape(*([1] * (len(r) - x.ndim) + list(x.shape))) if x.is_contiguous else x.copy(stream=stream).reshape(*([1] * (len(r) - x.ndim) + list(x.shape)))
    shape = [s * k for s, k in zip(x.shape, r, strict=False)]
    o = _out(out, shape, x.dtype_name, x.device)
    _npurt._tile(x._a, r, o._a, stream)
    return o


def broadcast_to(x: DeviceArray, shape: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """numpy's ``broadcast_to``, materialised (a new array). For ONNX ``Expand`` (which
    broadcasts both ways) pass ``npurt.broadcast_shapes(x.shape, shape)``."""
    x = _arr(x, "x")
    shape = _shape_arg(shape)
    if _bshape("broadcast", x.shape, shape) != tuple(shape):
        raise _value_error(f"cannot broadcast an array of shape {tuple(x.shape)} to {tuple(shape)}")
    o = _out(out, shape, x.dtype_name, x.device)
    _npurt._copy(x._a, o._a, stream)
    return o


def broadcast_shapes(*shapes: Any) -> Tuple[int, ...]:
    """numpy's ``broadcast_shapes`` (npurt-kernels' rule)."""
    return _bshape("broadcast", *[_shape_arg(s) for s in shapes]) if shapes else ()


__all__.append("broadcast_shapes")


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None, device: Any = None, stream: Any = None) -> DeviceArray:
    """numpy's ``arange`` (ONNX ``Range``: ``max(ceil((stop - start) / step), 0)``
    elements ``start + i·step``); dtype defaults to int64 for integer arguments, else
    float32."""
    if stop is None:
        start, stop = 0, start
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if not _is_scalar(v) or isinstance(v, bool):
            raise _type_error(f"arange: {name} must be a number, not {type(v).__name__}")
    a, b, s = _scalar(start), _scalar(stop), _scalar(step)
    if dtype is None:
        dtype = "int64" if all(isinstance(v, int) for v in (a, b, s)) else "float32"
    n = _npurt._arange_len(a, b, s)
    o = empty((n,), _dtype_name(dtype), device=device)
    if n:
        _npurt._arange(a, s, o._a, stream)
    return o


def topk(x: DeviceArray, k: int, axis: int = -1, largest: bool = True, sorted: bool = True, stream: Any = None) -> Tuple[DeviceArray, DeviceArray]:  # noqa: A002
    """ONNX ``TopK``: the ``k`` largest (``largest=False``: smallest) elements along
    ``axis`` and their int64 indices, sorted (ties: lower index first)."""
    x = _arr(x, "x")
    k = operator_index(k, "k")
    ax = _axis_int(axis)
    _flag(sorted, "sorted")
    if not -x.ndim <= ax < x.ndim:
        raise _value_error(f"axis {ax} is out of range for {x.ndim} dimension(s)")
    shape = list(x.shape)
    if not 0 <= k <= shape[ax]:
        raise _value_error(f"k={k} must be in [0, {shape[ax]}]")
    shape[ax] = k
    values, indices = empty(shape, x.dtype_name, device=x.device), empty(shape, "int64", device=x.device)
    _npurt._topk(x._a, k, ax, _flag(largest, "largest"), values._a, indices._a, stream)
    return values, indices

