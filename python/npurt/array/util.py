"""Shared helpers of the array modules: dtype names, shapes, scalars, typed errors. No
dependency on ``DeviceArray``."""

from __future__ import annotations

import builtins as _builtins
import numbers
import operator
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .. import _npurt
from ..exceptions import InvalidIndexError, InvalidTypeError, InvalidValueError

_DTYPES = ("float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool")
_FLOATS = ("float32", "float16", "bfloat16")
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8, "int8": 1, "uint8": 1, "bool": 1}


def _value_error(msg: str) -> InvalidValueError:
    return InvalidValueError(msg)


def _type_error(msg: str) -> InvalidTypeError:
    return InvalidTypeError(msg)


_DTYPE_SET = frozenset(_DTYPES)


def _dtype_name(dtype: Any) -> str:
    if dtype.__class__ is str and dtype in _DTYPE_SET:
        return dtype
    if dtype is None:
        return "float32"
    if isinstance(dtype, str) and dtype in ("bfloat16", "bf16"):
        return "bfloat16"
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise _type_error(f"unsupported dtype {dtype!r}") from None
    if name not in _DTYPES:
        raise _type_error(f"unsupported dtype {name!r}; npurt arrays hold {', '.join(_DTYPES)}")
    return name


def _shape_arg(shape: Any) -> Tuple[int, ...]:
    if shape.__class__ is tuple and all(s.__class__ is int and 0 <= s <= _MAX_DIM for s in shape):
        return shape
    if isinstance(shape, (numbers.Integral, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(int(operator_index(s)) for s in shape)
    except TypeError:
        raise _type_error(f"shape must be an int or a sequence of ints, not {shape!r}") from None
    if any(s < 0 for s in out):
        raise _value_error(f"negative dimensions are not allowed: {out}")
    if any(s > _MAX_DIM for s in out):
        raise _value_error(f"dimension too large in shape {out}")
    return out


def operator_index(v: Any, name: str = "index") -> int:
    """``operator.index`` that also rejects bool; an ``InvalidTypeError`` (a TypeError)
    naming ``name`` for anything but an int."""
    if v.__class__ is int:
        return v
    if isinstance(v, (bool, np.bool_)):
        raise _type_error(f"{name} must be an int, not {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise _type_error(f"{name} must be an int, not {type(v).__name__}") from None


# Dimensions, axes and offsets beyond this cannot name anything (the native side takes
# 64-bit values): an InvalidValueError instead of an OverflowError from the conversion.
_MAX_DIM = 1 << 62


def _real(v: Any, name: str) -> float:
    """A real number argument (int or float, numpy's too; never bool) as a float."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.integer, np.floating)):
        raise _type_error(f"{name} must be a number, not {type(v).__name__}")
    try:
        return float(v)
    except OverflowError:
        raise _value_error(f"{name}={v} is out of range") from None


def _axis_int(v: Any) -> int:
    """One axis (an int, possibly negative; the kernel checks it against the rank)."""
    ax = operator_index(v, "axis")
    if abs(ax) > _MAX_DIM:
        raise _value_error(f"axis {ax} is out of range")
    return ax


def _flag(v: Any, name: str) -> bool:
    """A bool argument (numpy's bool too)."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise _type_error(f"{name} must be a bool, not {type(v).__name__}")


def _contig_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= _builtins.max(s, 1)
    return tuple(reversed(st))


def _stream_for(stream: Any, device: Any):
    if stream is not None:
        return stream
    if device is None:
        return None  # the current stream (resolved natively)
    return _npurt.current_stream(device)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


def _scalar(v: Any) -> Any:
    if isinstance(v, (np.bool_, np.integer, np.floating)):
        return v.item()
    if isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v.item()
    raise _type_error(f"expected a number, not {type(v).__name__}")


def _bshape(op: str, *shapes: Sequence[int]) -> Tuple[int, ...]:
    """numpy's broadcast shape (npurt-kernels' rule; equal shapes skip the call)."""
    out = tuple(shapes[0])
    for s in shapes[1:]:
        if tuple(s) != out:
            out = tuple(_npurt._broadcast_shapes(op, list(out), list(s)))
    return out


def _axes(axis: Any, ndim: int) -> Optional[Tuple[int, ...]]:
    """``axis`` (an int or a sequence of ints) normalised for ``ndim`` dimensions, in order
    (npurt-kernels' rule); None stays None."""
    if axis is None:
        return None
    ax = [axis] if not isinstance(axis, (tuple, list)) else list(axis)
    ax = [operator_index(a, "axis") for a in ax]
    if any(abs(a) > _MAX_DIM for a in ax):
        raise _value_error(f"axis {tuple(ax)} is out of range for {ndim} dimension(s)")
    return tuple(_npurt._normalize_axes(ax, ndim))


def _index(shape: Sequence[int], strides: Sequence[int], offset: int, itemsize: int, key: Any) -> Tuple[list, list, int]:
    """numpy's basic indexing: (shape, strides in elements, byte offset) of ``x[key]`` for
    ints, slices, ``...`` and ``None`` (a new axis of size 1)."""
    if not isinstance(key, tuple):
        key = (key,)
    used = _builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    nd = len(shape)
    if _builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise InvalidIndexError("an index can only have a single ellipsis ('...')")
    if any(k is Ellipsis for k in key):
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (nd - used) + key[i + 1 :]
    if used > nd:
        raise InvalidIndexError(f"too many indices for array of {nd} dimension(s)")
    new_sh, new_st, d = [], [], 0
    for k in key:
        if k is None:
            new_sh.append(1)
            new_st.append(0)
            continue
        n, s = shape[d], strides[d]
        if isinstance(k, slice):
            try:
                start, stop, step = k.indices(n)
            except (TypeError, ValueError) as e:
                raise InvalidIndexError(f"bad slice {k!r}: {e}") from None
            cnt = len(range(start, stop, step))
            if cnt:
                offset += start * s * itemsize
            new_sh.append(cnt)
            new_st.append(s * step)
        else:
            try:
                i = operator_index(k)
            except TypeError:
                raise InvalidIndexError(f"only integers, slices, ... and None are valid indices, not {k!r}") from None
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise InvalidIndexError(f"index {k} is out of bounds for axis {d} with size {n}")
            offset += i * s * itemsize
        d += 1
    return new_sh + list(shape[d:]), new_st + list(strides[d:]), offset


def _ints(v: Any, name: str, n: Optional[int] = None, lo: Optional[int] = 0) -> list:
    """A sequence of ints (``n`` of them when given, each ``>= lo`` unless ``lo`` is None)
    as a list, with typed errors."""
    if not isinstance(v, (tuple, list)) and not (isinstance(v, np.ndarray) and v.ndim == 1):
        raise _type_error(f"{name} must be a sequence of ints, not {type(v).__name__}")
    out = [operator_index(s, name) for s in v]
    if n is not None and len(out) != n:
        raise _value_error(f"{name} has {len(out)} entries, expected {n}")
    if any(abs(s) > _MAX_DIM or (lo is not None and s < lo) for s in out):
        raise _value_error(f"{name} {out} is out of range" + (f" (entries must be >= {lo})" if lo is not None else ""))
    return out


def _opt_ints(v: Any, name: str, n: Optional[int] = None, lo: Optional[int] = 0) -> Optional[list]:
    return None if v is None else _ints(v, name, n, lo)
