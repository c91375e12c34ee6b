"""The Cube path: ``matmul`` (numpy's), ``gemm`` (BLAS's, with alpha/beta and a bias) and
``linear`` (torch's ``x @ weight.T + bias``). One kernel each: the scaling and the bias are
applied inside the matmul's tiles, never as extra passes."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import _npurt
from ..exceptions import InvalidValueError
from .creation import _arr, empty
from .device_array import DeviceArray
from .util import _real, _type_error, _value_error

__all__ = ["matmul", "gemm", "linear"]


def _expand(x: DeviceArray, axis: int) -> DeviceArray:
    """A view with a dimension of size 1 inserted at ``axis`` (no copy, any strides)."""
    sh, st = list(x._a.shape), list(x._a.strides)
    sh.insert(axis % (len(sh) + 1), 1)
    st.insert(axis % (len(st) + 1), 0)
    return x._view(sh, st)


def _rows(x: DeviceArray) -> DeviceArray:
    """``x`` as a 2-D ``(rows, last)`` array: a view when the strides allow, else a copy."""
    try:
        return x.reshape(-1, x.shape[-1])
    except InvalidValueError:
        return x.copy().reshape(-1, x.shape[-1])


def _operands(op: str, a: Any, b: Any, max_ndim: int = 3) -> Tuple[DeviceArray, DeviceArray]:
    a, b = _arr(a, "x1"), _arr(b, "x2")
    if a.dtype_name != b.dtype_name:
        raise _type_error(f"{op}: dtypes {a.dtype_name} and {b.dtype_name} differ; convert one with astype()")
    for x in (a, b):
        if x.ndim > max_ndim:
            raise _value_error(f"{op}: operands of more than {max_ndim} dimensions are not supported")
    return a, b


def matmul(
    x1: DeviceArray,
    x2: DeviceArray,
    out: Optional[DeviceArray] = None,
    stream: Any = None,
    blocks: Optional[int] = None,
) -> DeviceArray:
    """numpy's matmul for 1-D, 2-D and 3-D operands (a batch of 1 broadcasts); any strides.
    Floats multiply in f32, integers accumulate in i64. ``blocks`` overrides the launch's
    block count (default: the planner's, which splits large products over the AI cores);
    the result is the same for any block count."""
    if out is not None and x1.__class__ is DeviceArray and x2.__class__ is DeviceArray and out.__class__ is DeviceArray:
        # Fast path (launch cost matters for small products): 2-D/3-D operands into an
        # output; the kernel constructor checks dtypes and shapes (typed errors) anyway.
        if 2 <= len(x1._a.shape) <= 3 and 2 <= len(x2._a.shape) <= 3:
            _npurt._matmul(x1._a, x2._a, out._a, False, False, stream, blocks)
            return out
    a, b = _operands("matmul", x1, x2)
    if a.ndim == 0 or b.ndim == 0:
        raise _value_error("matmul: operands must have at least one dimension")
    squeeze = []
    if a.ndim == 1:
        a = _expand(a, 0)
        squeeze.append(-2)
    if b.ndim == 1:
        b = _expand(b, 1)
        squeeze.append(-1)
    shape = tuple(_npurt._matmul_shape(list(a.shape), list(b.shape)))
    final = list(shape)
    for d in squeeze:
        final[d] = None
    final = tuple(s for s in final if s is not None)
    if out is None:
        o = empty(shape, a.dtype_name, device=a.device)
        _npurt._matmul(a._a, b._a, o._a, False, False, stream, blocks)
        return o.reshape(final) if squeeze else o
    o = _arr(out, "out")
    if o.shape != final:
        raise _value_error(f"matmul: out has shape {o.shape}, expected {final}")
    o2 = o
    for d in sorted(squeeze):
        o2 = _expand(o2, d)
    _npurt._matmul(a._a, b._a, o2._a, False, False, stream, blocks)
    return o


def gemm(
    a: DeviceArray,
    b: DeviceArray,
    c: Optional[DeviceArray] = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    bias: Optional[DeviceArray] = None,
    trans_a: bool = False,
    trans_b: bool = False,
    out: Optional[DeviceArray] = None,
    stream: Any = None,
    blocks: Optional[int] = None,
) -> DeviceArray:
    """``out = alpha * op(a) @ op(b) + beta * c + bias`` in one kernel (BLAS's gemm, batched).

    ``a``, ``b``: 2-D, or 3-D for a batch (a batch of 1 broadcasts), one dtype (floats; or
    integers with integral alpha/beta); ``op(x)`` swaps the last two dims when ``trans_x``
    (a view: nothing is copied). ``c`` broadcasts to the output shape; with ``c=None`` and
    ``out`` given, C is ``out``'s current contents (an in-place update, ``out = alpha·AB +
    beta·out``). ``beta == 0`` never reads C (NaNs in it do not propagate). ``bias``: a
    vector of length N added to every row. Shapes and dtypes are checked before anything
    is queued (``InvalidValueError`` / ``InvalidTypeError``)."""
    a, b = _operands("gemm", a, b)
    for x in (a, b):
        if x.ndim < 2:
            raise _value_error("gemm: operands must be 2-D or 3-D (use matmul for vectors)")
    shape = tuple(_npurt._matmul_shape(list(a.shape), list(b.shape), bool(trans_a), bool(trans_b)))
    if c is not None:
        c = _arr(c, "c")
    if bias is not None:
        bias = _arr(bias, "bias")
    beta = _real(beta, "beta")
    if out is None:
        if c is None and beta != 0.0:
            raise _value_error("gemm: beta != 0 needs c (or out, to update in place)")
        out = empty(shape, a.dtype_name, device=a.device)
    else:
        out = _arr(out, "out")
    c_arg = None if c is None or beta == 0.0 else c._a
    _npurt._gemm(a._a, b._a, out._a, c_arg, None if bias is None else bias._a, _real(alpha, "alpha"), beta, bool(trans_a), bool(trans_b), stream, blocks)
    return out


def linear(
    x: DeviceArray,
    weight: DeviceArray,
    bias: Optional[DeviceArray] = None,
    out: Optional[DeviceArray] = None,
    stream: Any = None,
) -> DeviceArray:
    """torch's ``linear``: ``x @ weight.T + bias`` with ``x`` of shape ``(..., in)``,
    ``weight`` ``(out_features, in)``, ``bias`` ``(out_features,)``; one gemm kernel (the
    transpose is a view, the bias is added inside the tiles)."""
    x, w = _arr(x, "x"), _arr(weight, "weight")
    if w.ndim != 2:
        raise _value_error(f"linear: weight must be 2-D (out_features, in_features), not {w.shape}")
    if x.ndim == 0:
        raise _value_error("linear: x must have at least one dimension")
    lead = x.shape[:-1]
    x2 = x if x.ndim == 2 else _rows(x)
    want = lead + (w.shape[0],)
    o = None
    if out is not None:
        o = _arr(out, "out")
        if o.shape != want:
            raise _value_error(f"linear: out has shape {o.shape}, expected {want}")
        o = o.reshape(x2.shape[0], w.shape[0]) if o.ndim != 2 else o
    y = gemm(x2, w, bias=bias, trans_b=True, out=o, stream=stream)
    if out is not None:
        return out
    return y.reshape(want) if y.shape != want else y
