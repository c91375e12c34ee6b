"""Elementwise kernels (numpy names, broadcasting, scalars), casts, reductions, softmax and
the norms: each checks its arguments, picks the output shape and dtype, and queues one
kernel on ``stream`` (default: the current stream)."""

from __future__ import annotations

from typing import Any, Optional

from .. import _npurt
from .creation import _arr, _out, empty
from .device_array import DeviceArray
from .util import (
    _FLOATS,
    _axes,
    _axis_int,
    _bshape,
    _dtype_name,
    _flag,
    _is_scalar,
    _real,
    _scalar,
    _type_error,
    _value_error,
)

__all__ = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "silu", "abs", "negative", "cast", "axpy", "sum", "mean", "max", "min", "argmax", "softmax", "log_softmax", "layer_norm", "rms_norm"]

# -- elementwise ---------------------------------------------------------------------


def _binary(op: str, x1: Any, x2: Any, out: Any, stream: Any) -> DeviceArray:
    # Fast path (a launch costs about a microsecond): an output, a DeviceArray first operand
    # and a DeviceArray or a plain int/float second one; the kernel checks dtypes and shapes.
    if out.__class__ is DeviceArray and x1.__class__ is DeviceArray and op != "divide":
        c2 = x2.__class__
        if c2 is DeviceArray:
            _npurt._binary(op, x1._a, x2._a, out._a, stream)
            return out
        if c2 is int or (c2 is float and x1._a.is_float):
            _npurt._binary(op, x1._a, x2, out._a, stream)
            return out
    t1, t2 = x1.__class__ is DeviceArray or isinstance(x1, DeviceArray), x2.__class__ is DeviceArray or isinstance(x2, DeviceArray)
    if t1 and t2:
        dt = x1._a.dtype
        if x2._a.dtype != dt:
            raise _type_error(f"{op}: dtypes {dt} and {x2._a.dtype} differ; convert one with astype()")
        dev = x1
    elif t1 or t2:
        dev = x1 if t1 else x2
        dt = dev._a.dtype
        sc = x2 if t1 else x1
        if not _is_scalar(sc):
            raise _type_error(f"{op}: operands must be DeviceArrays or Python numbers, not {type(sc).__name__}")
    else:
        raise _type_error(f"{op}: at least one operand must be an npurt.DeviceArray")
    if op == "divide" and dt not in _FLOATS:
        x1 = cast(x1, "float32", stream=stream) if t1 else x1
        x2 = cast(x2, "float32", stream=stream) if t2 else x2
        dt = "float32"
    a = x1._a if t1 else _scalar(x1)
    b = x2._a if t2 else _scalar(x2)
    if dt not in _FLOATS and (a.__class__ is float or b.__class__ is float):
        s = a if a.__class__ is float else b
        raise _type_error(f"{op}: float scalar {s!r} with a {dt} array; convert the array with astype() first")
    if out is None:
        if t1 and t2:
            s1, s2 = x1._a.shape, x2._a.shape
            shape = s1 if s1 == s2 else _bshape(op, s1, s2)
        else:
            shape = dev._a.shape
        out = empty(shape, dt, device=dev._a.device)
    elif not isinstance(out, DeviceArray):
        raise _type_error(f"out must be an npurt.DeviceArray, not {type(out).__name__}")
    _npurt._binary(op, a, b, out._a, stream)
    return out


def _fast_binary(op: str, doc: Optional[str]) -> Any:
    """``op`` as a module function whose first lines are ``_binary``'s fast path, so a
    launch with ``out=`` costs one Python call (the closure reads its constants as cells)."""
    launch, DA = _npurt._binary, DeviceArray

    def f(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
        if out.__class__ is DA and x1.__class__ is DA:
            c2 = x2.__class__
            if c2 is DA:
                launch(op, x1._a, x2._a, out._a, stream)
                return out
            if c2 is int or (c2 is float and x1._a.is_float):
                launch(op, x1._a, x2, out._a, stream)
                return out
        return _binary(op, x1, x2, out, stream)

    f.__name__ = f.__qualname__ = op
    f.__doc__ = doc
    return f


add = _fast_binary("add", """``x1 + x2`` with numpy broadcasting (a kernel on ``stream``).""")
subtract = _fast_binary("subtract", None)
multiply = _fast_binary("multiply", None)
maximum = _fast_binary("maximum", None)
minimum = _fast_binary("minimum", None)


def divide(x1: Any, x2: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """True division; integer arrays are cast to float32 first."""
    return _binary("divide", x1, x2, out, stream)


def _unary(op: str, x: Any, out: Any, stream: Any) -> DeviceArray:
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._unary(op, x._a, o._a, stream)
    return o


def exp(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("exp", x, out, stream)


def log(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("log", x, out, stream)


def sqrt(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("sqrt", x, out, stream)


def rsqrt(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("rsqrt", x, out, stream)


def tanh(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("tanh", x, out, stream)


def sigmoid(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("sigmoid", x, out, stream)


def relu(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("relu", x, out, stream)


def gelu(x: DeviceArray, approximate: str = "none", out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """GELU: exact (erf) by default, ``approximate="tanh"`` for the tanh form."""
    if approximate not in ("none", "tanh"):
        raise _value_error(f"approximate must be 'none' or 'tanh', not {approximate!r}")
    return _unary("gelu" if approximate == "none" else "gelu_tanh", x, out, stream)


def silu(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("silu", x, out, stream)


def abs(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:  # noqa: A001
    return _unary("abs", x, out, stream)


def negative(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _unary("neg", x, out, stream)


def cast(x: DeviceArray, dtype: Any, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``x`` converted to ``dtype`` (numpy's rules; float→int truncates and saturates)."""
    x = _arr(x, "x")
    o = _out(out, x.shape, _dtype_name(dtype), x.device)
    _npurt._cast(x._a, o._a, stream)
    return o


def axpy(alpha: Any, x: DeviceArray, y: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``alpha * x + y`` in one pass (fused)."""
    x, y = _arr(x, "x"), _arr(y, "y")
    o = _out(out, _bshape("axpy", x.shape, y.shape), x.dtype_name, x.device)
    _npurt._axpy(_scalar(alpha), x._a, y._a, o._a, stream)
    return o


# -- reductions ----------------------------------------------------------------------


def _reduce(op: str, x: Any, axis: Any, keepdims: bool, dtype: Optional[str], out: Any, stream: Any) -> DeviceArray:
    x = _arr(x, "x")
    ax = _axes(axis, x.ndim)
    shape = _npurt._reduce_out_shape(list(x.shape), None if ax is None else list(ax), _flag(keepdims, "keepdims"))
    o = _out(out, shape, dtype or x.dtype_name, x.device)
    _npurt._reduce(op, x._a, None if ax is None else list(ax), o._a, stream)
    return o


def sum(x: DeviceArray, axis: Any = None, dtype: Any = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:  # noqa: A001
    """Sum over ``axis`` (None: all). Integer/bool inputs sum to int64 (numpy), floats keep
    their dtype; accumulation in f64 / i64."""
    x = _arr(x, "x")
    if dtype is None:
        dtype = x.dtype_name if x.dtype_name in _FLOATS else "int64"
    return _reduce("sum", x, axis, keepdims, _dtype_name(dtype), out, stream)


def mean(x: DeviceArray, axis: Any = None, dtype: Any = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:
    """Mean over ``axis``; integer inputs give float32 (numpy gives float64)."""
    x = _arr(x, "x")
    if dtype is None:
        dtype = x.dtype_name if x.dtype_name in _FLOATS else "float32"
    return _reduce("mean", x, axis, keepdims, _dtype_name(dtype), out, stream)


def max(x: DeviceArray, axis: Any = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:  # noqa: A001
    return _reduce("max", x, axis, keepdims, None, out, stream)


def min(x: DeviceArray, axis: Any = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:  # noqa: A001
    return _reduce("min", x, axis, keepdims, None, out, stream)


def argmax(x: DeviceArray, axis: Optional[int] = None, out: Optional[DeviceArray] = None, keepdims: bool = False, stream: Any = None) -> DeviceArray:
    """Index of the first maximum (int64) along one axis, or of the flattened array."""
    if axis is not None and isinstance(axis, (tuple, list)):
        raise _type_error("argmax takes one axis or None")
    return _reduce("argmax", x, axis, keepdims, "int64", out, stream)


# -- rows ------------------------------------------------------------------------------


def _softmax(x: Any, axis: Any, out: Any, log: bool, stream: Any) -> DeviceArray:
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._softmax(x._a, _axis_int(axis), o._a, log, stream)
    return o


def softmax(x: DeviceArray, axis: int = -1, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _softmax(x, axis, out, False, stream)


def log_softmax(x: DeviceArray, axis: int = -1, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _softmax(x, axis, out, True, stream)


def layer_norm(
    x: DeviceArray,
    weight: Optional[DeviceArray] = None,
    bias: Optional[DeviceArray] = None,
    eps: float = 1e-5,
    out: Optional[DeviceArray] = None,
    stream: Any = None,
) -> DeviceArray:
    """Layer normalisation over the last axis (biased variance), then ``* weight + bias``."""
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._norm(x._a, None if weight is None else _arr(weight, "weight")._a, None if bias is None else _arr(bias, "bias")._a, _real(eps, "eps"), o._a, False, stream)
    return o


def rms_norm(x: DeviceArray, weight: Optional[DeviceArray] = None, eps: float = 1e-6, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._norm(x._a, None if weight is None else _arr(weight, "weight")._a, None, _real(eps, "eps"), o._a, True, stream)
    return o
