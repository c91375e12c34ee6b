"""More elementwise kernels with numpy names (ONNX's Pow, Erf, Reciprocal, Floor, Ceil,
Round, Sign, Clip, Equal, Less, Greater, And, Or, Not, Xor, Where): comparisons and logic
return bool arrays; numpy broadcasting; Python scalars take the array's dtype."""

from __future__ import annotations

from typing import Any, Optional

from .. import _npurt
from .creation import _arr, _out
from .device_array import DeviceArray
from .util import _bshape, _is_scalar, _scalar, _type_error

__all__ = [
    "power", "erf", "reciprocal", "floor", "ceil", "round", "sign", "clip", "equal", "not_equal", "less",
    "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "where",
]


def _operand(op: str, v: Any, what: str) -> Any:
    if isinstance(v, DeviceArray):
        return v
    if _is_scalar(v):
        return _scalar(v)
    raise _type_error(f"{op}: {what} must be an npurt.DeviceArray or a Python number, not {type(v).__name__}")


def _pair(op: str, x1: Any, x2: Any):
    """The operands (arrays or scalars), their common dtype, device and broadcast shape."""
    a, b = _operand(op, x1, "x1"), _operand(op, x2, "x2")
    arrs = [v for v in (a, b) if isinstance(v, DeviceArray)]
    if not arrs:
        raise _type_error(f"{op}: at least one operand must be an npurt.DeviceArray")
    dt = arrs[0].dtype_name
    if any(v.dtype_name != dt for v in arrs):
        raise _type_error(f"{op}: dtypes {arrs[0].dtype_name} and {arrs[1].dtype_name} differ; convert one with astype()")
    shape = _bshape(op, *[v.shape for v in arrs])
    native = [v._a if isinstance(v, DeviceArray) else v for v in (a, b)]
    return native, dt, arrs[0].device, shape


def _compare(op: str, x1: Any, x2: Any, out: Any, stream: Any) -> DeviceArray:
    (a, b), _, dev, shape = _pair(op, x1, x2)
    o = _out(out, shape, "bool", dev)
    _npurt._compare(op, a, b, o._a, stream)
    return o


def power(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``x1 ** x2`` for float arrays (f32 ``powf``), numpy broadcasting."""
    (a, b), dt, dev, shape = _pair("power", x1, x2)
    o = _out(out, shape, dt, dev)
    _npurt._compare("power", a, b, o._a, stream)
    return o


def equal(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _compare("equal", x1, x2, out, stream)


def not_equal(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _compare("not_equal", x1, x2, out, stream)


def less(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _compare("less", x1, x2, out, stream)


def less_equal(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _compare("less_equal", x1, x2, out, stream)


def greater(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _compare("greater", x1, x2, out, stream)


def greater_equal(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _compare("greater_equal", x1, x2, out, stream)


def logical_and(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _compare("logical_and", x1, x2, out, stream)


def logical_or(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _compare("logical_or", x1, x2, out, stream)


def logical_xor(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _compare("logical_xor", x1, x2, out, stream)


def logical_not(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``x == 0`` as bool (any dtype)."""
    x = _arr(x, "x")
    return _compare("equal", x, False if x.dtype_name == "bool" else 0, out, stream)


def _act(op: str, x: Any, out: Any, stream: Any, **kw: Any) -> DeviceArray:
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._activation(op, x._a, o._a, stream=stream, **kw)
    return o


def erf(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """The error function (absolute error < 5e-7)."""
    return _act("erf", x, out, stream)


def reciprocal(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _act("reciprocal", x, out, stream)


def floor(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _act("floor", x, out, stream)


def ceil(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _act("ceil", x, out, stream)


def round(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:  # noqa: A001
    """Round half to even (numpy's ``rint``; ONNX ``Round``)."""
    return _act("round", x, out, stream)


def sign(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _act("sign", x, out, stream)


def clip(x: DeviceArray, a_min: Any = None, a_max: Any = None, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``min(max(x, a_min), a_max)`` with scalar bounds (None: open); NaN passes through."""
    lo = None if a_min is None else _scalar(a_min)
    hi = None if a_max is None else _scalar(a_max)
    return _act("clip", x, out, stream, lo=lo, hi=hi)


def where(condition: Any, x: Any, y: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``x`` where ``condition`` is non-zero, else ``y`` (numpy broadcasting of all three;
    ``x``/``y`` arrays of one dtype or scalars, at least one an array)."""
    c = _operand("where", condition, "condition")
    a, b = _operand("where", x, "x"), _operand("where", y, "y")
    arrs = [v for v in (a, b) if isinstance(v, DeviceArray)]
    if not arrs:
        raise _type_error("where: x or y must be an npurt.DeviceArray")
    dt = arrs[0].dtype_name
    if any(v.dtype_name != dt for v in arrs):
        raise _type_error(f"where: dtypes {arrs[0].dtype_name} and {arrs[1].dtype_name} differ; convert one with astype()")
    shape = _bshape("where", *[v.shape for v in (c, a, b) if isinstance(v, DeviceArray)])
    o = _out(out, shape, dt, arrs[0].device)
    n = [v._a if isinstance(v, DeviceArray) else v for v in (c, a, b)]
    _npurt._where(n[0], n[1], n[2], o._a, stream)
    return o
