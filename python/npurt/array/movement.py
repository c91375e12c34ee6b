"""Data movement: transposes and permutations (views), ``concatenate`` and
``ascontiguousarray`` (kernels). Basic slicing (``x[1:, ::2]``) is ``DeviceArray.__getitem__``
(a view); a view is materialised by a copy kernel (a 2-D transpose with the tiled one)."""

from __future__ import annotations

import builtins as _builtins
from typing import Any, Optional, Sequence

from .. import _npurt
from .creation import _arr, _out
from .device_array import DeviceArray
from .util import _axis_int, _type_error, _value_error, operator_index

__all__ = ["transpose", "permute", "ascontiguousarray", "concat", "concatenate"]


def transpose(x: DeviceArray, axes: Optional[Sequence[int]] = None) -> DeviceArray:
    """A transposed view (no copy); ``.copy()`` materialises it."""
    return _arr(x, "x").transpose(axes)


def permute(x: DeviceArray, axes: Sequence[int]) -> DeviceArray:
    """torch's ``permute``: a view with result dim ``i`` = ``x``'s dim ``axes[i]``."""
    x = _arr(x, "x")
    if not isinstance(axes, (tuple, list)):
        axes = (operator_index(axes, "axes"),)
    return x.permute(*axes)


def ascontiguousarray(x: DeviceArray, stream: Any = None) -> DeviceArray:
    """``x`` itself when it is contiguous, else a contiguous copy (a kernel on ``stream``)."""
    x = _arr(x, "x")
    return x if x.is_contiguous else x.copy(stream=stream)


def concat(arrays: Sequence[DeviceArray], axis: int = 0, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """Joins arrays (same dtype, same shape except along ``axis``; any strides)."""
    if not isinstance(arrays, (tuple, list)):
        raise _type_error(f"arrays must be a sequence of npurt.DeviceArrays, not {type(arrays).__name__}")
    xs = [_arr(a, "arrays") for a in arrays]
    if not xs:
        raise _value_error("concat needs at least one array")
    nd = xs[0].ndim
    axis = _axis_int(axis)
    if nd and not -nd <= axis < nd:
        raise _value_error(f"axis {axis} is out of bounds for arrays of {nd} dimension(s)")
    ax = axis % nd if nd else 0
    shape = list(xs[0].shape)
    shape[ax] = _builtins.sum(a.shape[ax] if a.ndim == nd else 0 for a in xs)
    o = _out(out, shape, xs[0].dtype_name, xs[0].device)
    _npurt._concat([a._a for a in xs], axis, o._a, stream)
    return o


concatenate = concat
