"""Neural-network operators with ONNX semantics (``npurt.nn``): convolution (N-d, groups,
pads, strides, dilations; on the GEMM path with the matmul's block split) and its
transpose, max/average/global pooling, inference batch normalisation, LRN, resize, and
the activations ONNX has beyond numpy's names (leaky_relu, hard_sigmoid, hard_swish, elu,
selu, softplus).

Layout is ``[N, C, D1, ..., Dk]``; window attributes take ONNX's layout (``pads = [b1..bk,
e1..ek]``), default strides/dilations 1 and pads 0. Float32 only (cast first). Every
function is a kernel on ``stream`` (default: the current stream) writing a new array or
``out``; bad shapes and attributes are typed ``npurt`` errors before anything is queued.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from . import _npurt
from .array.creation import _arr, _out
from .array.device_array import DeviceArray
from .array.ops import max as _max
from .array.ops import mean as _mean
from .array.util import _flag, _ints, _opt_ints, _real, _type_error, _value_error, operator_index

__all__ = [
    "conv", "conv_transpose", "max_pool", "avg_pool", "global_avg_pool", "global_max_pool", "batch_norm", "lrn",
    "resize", "auto_pads", "leaky_relu", "hard_sigmoid", "hard_swish", "elu", "selu", "softplus",
]


def _spatial(x: DeviceArray, what: str = "x") -> int:
    if x.ndim < 3:
        raise _value_error(f"{what} must have at least 3 dimensions ([N, C, spatial...]), got shape {tuple(x.shape)}")
    return x.ndim - 2


def _window(k: int, strides: Any, pads: Any, dilations: Any):
    return (_opt_ints(strides, "strides", k, lo=1), _opt_ints(pads, "pads", 2 * k), _opt_ints(dilations, "dilations", k, lo=1))


def _group(group: Any) -> int:
    g = operator_index(group, "group")
    if g < 1:
        raise _value_error(f"group must be >= 1, got {g}")
    return g


def conv(x: DeviceArray, w: DeviceArray, bias: Optional[DeviceArray] = None, strides: Optional[Sequence[int]] = None,
         pads: Optional[Sequence[int]] = None, dilations: Optional[Sequence[int]] = None, group: int = 1,
         out: Optional[DeviceArray] = None, stream: Any = None, activation: Optional[str] = None,
         activation_params: Sequence[float] = ()) -> DeviceArray:
    """ONNX ``Conv``: ``x`` ``[N, C, D...]``, ``w`` ``[M, C/group, K...]``, ``bias`` ``[M]``.
    ``activation`` fuses an activation into the kernel (applied to every output after the
    bias, bitwise the separate kernel): ``"relu"``, ``"leaky_relu"`` (``[alpha]``),
    ``"clip"`` (``[lo, hi]``), ``"hard_sigmoid"`` (``[alpha, beta]``), ``"hard_swish"``."""
    x, w = _arr(x, "x"), _arr(w, "w")
    k = _spatial(x)
    st, pd, dl = _window(k, strides, pads, dilations)
    g = _group(group)
    if w.ndim != x.ndim:
        raise _value_error(f"conv: w has shape {tuple(w.shape)}, expected {x.ndim} dimensions")
    sp = _npurt._window_out_shape("conv", list(x.shape[2:]), list(w.shape[2:]), st, pd, dl)
    w = w if w.is_contiguous else w.copy(stream=stream)
    o = _out(out, [x.shape[0], w.shape[0], *sp], x.dtype_name, x.device)
    if activation is not None and not isinstance(activation, str):
        raise _type_error(f"activation must be a str or None, not {type(activation).__name__}")
    params = [_real(p, "activation_params") for p in activation_params]
    _npurt._conv(x._a, w._a, None if bias is None else _arr(bias, "bias")._a, o._a, st, pd, dl, g, stream, activation, params)
    return o


def conv_transpose(x: DeviceArray, w: DeviceArray, bias: Optional[DeviceArray] = None,
                   strides: Optional[Sequence[int]] = None, pads: Optional[Sequence[int]] = None,
                   dilations: Optional[Sequence[int]] = None, group: int = 1,
                   output_padding: Optional[Sequence[int]] = None, output_shape: Optional[Sequence[int]] = None,
                   out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """ONNX ``ConvTranspose``: ``x`` ``[N, C, D...]``, ``w`` ``[C, M/group, K...]``; the
    output is ``stride·(D-1) + output_padding + (K-1)·dilation + 1 - pads``. With
    ``output_shape`` (spatial sizes) the pads are derived as ONNX does (``pads`` ignored:
    the begin pad gets the larger half)."""
    x, w = _arr(x, "x"), _arr(w, "w")
    k = _spatial(x)
    st, pd, dl = _window(k, strides, pads, dilations)
    g = _group(group)
    op = _ints(output_padding, "output_padding", k) if output_padding is not None else [0] * k
    if w.ndim != x.ndim:
        raise _value_error(f"conv_transpose: w has shape {tuple(w.shape)}, expected {x.ndim} dimensions")
    if output_shape is not None:
        os_ = _ints(output_shape, "output_shape")[-k:] if len(output_shape) >= k else _ints(output_shape, "output_shape", k)
        stv, dlv = st or [1] * k, dl or [1] * k
        pd = [0] * (2 * k)
        for d in range(k):
            total = stv[d] * (x.shape[2 + d] - 1) + op[d] + (w.shape[2 + d] - 1) * dlv[d] + 1 - os_[d]
            if total < 0:
                raise _value_error(f"conv_transpose: output_shape {os_} is larger than the full output along dim {d}")
            pd[d], pd[k + d] = total - total // 2, total // 2
    shape = _npurt._conv_transpose_shape(list(x.shape), list(w.shape), st, pd, dl, g, op)
    x = x if x.is_contiguous else x.copy(stream=stream)
    w = w if w.is_contiguous else w.copy(stream=stream)
    o = _out(out, shape, x.dtype_name, x.device)
    _npurt._conv_transpose(x._a, w._a, None if bias is None else _arr(bias, "bias")._a, o._a, st, pd, dl, g, op, stream)
    return o


def auto_pads(auto_pad: str, input_shape: Sequence[int], kernel_shape: Sequence[int],
              strides: Optional[Sequence[int]] = None, dilations: Optional[Sequence[int]] = None) -> list:
    """ONNX's ``auto_pad`` as explicit ``pads`` (``[b1..bk, e1..ek]``) for the spatial
    ``input_shape``: ``"SAME_UPPER"`` / ``"SAME_LOWER"`` keep ``ceil(input / stride)``
    outputs (the odd pad at the end, resp. the begin); ``"VALID"`` / ``"NOTSET"`` pad nothing."""
    if not isinstance(auto_pad, str):
        raise _type_error(f"auto_pad must be a str, not {type(auto_pad).__name__}")
    inp = _ints(input_shape, "input_shape")
    k = len(inp)
    ks = _ints(kernel_shape, "kernel_shape", k, lo=1)
    st = _ints(strides, "strides", k, lo=1) if strides is not None else [1] * k
    dl = _ints(dilations, "dilations", k, lo=1) if dilations is not None else [1] * k
    return _npurt._auto_pads(auto_pad, inp, ks, st, dl)


def _pool(kind: str, x: Any, kernel_shape: Any, strides: Any, pads: Any, dilations: Any, ceil_mode: Any,
          count_include_pad: Any, out: Any, stream: Any) -> DeviceArray:
    x = _arr(x, "x")
    k = _spatial(x)
    ks = _ints(kernel_shape, "kernel_shape", k, lo=1)
    st, pd, dl = _window(k, strides, pads, dilations)
    cm, cip = _flag(ceil_mode, "ceil_mode"), _flag(count_include_pad, "count_include_pad")
    sp = _npurt._window_out_shape(f"{kind}_pool", list(x.shape[2:]), ks, st, pd, dl, cm)
    o = _out(out, [*x.shape[:2], *sp], x.dtype_name, x.device)
    _npurt._pool(kind, x._a, o._a, ks, st, pd, dl, cm, cip, stream)
    return o


def max_pool(x: DeviceArray, kernel_shape: Sequence[int], strides: Optional[Sequence[int]] = None,
             pads: Optional[Sequence[int]] = None, dilations: Optional[Sequence[int]] = None,
             ceil_mode: bool = False, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """ONNX ``MaxPool`` (padding never wins: only positions inside the input count)."""
    return _pool("max", x, kernel_shape, strides, pads, dilations, ceil_mode, False, out, stream)


def avg_pool(x: DeviceArray, kernel_shape: Sequence[int], strides: Optional[Sequence[int]] = None,
             pads: Optional[Sequence[int]] = None, dilations: Optional[Sequence[int]] = None,
             ceil_mode: bool = False, count_include_pad: bool = False, out: Optional[DeviceArray] = None,
             stream: Any = None) -> DeviceArray:
    """ONNX ``AveragePool``: the divisor counts positions inside the input, or with
    ``count_include_pad`` inside the padded input."""
    return _pool("avg", x, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad, out, stream)


def global_avg_pool(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """ONNX ``GlobalAveragePool``: the mean over the spatial dims, kept as size 1."""
    x = _arr(x, "x")
    _spatial(x)
    return _mean(x, axis=tuple(range(2, x.ndim)), keepdims=True, out=out, stream=stream)


def global_max_pool(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """ONNX ``GlobalMaxPool``: the max over the spatial dims, kept as size 1."""
    x = _arr(x, "x")
    _spatial(x)
    return _max(x, axis=tuple(range(2, x.ndim)), keepdims=True, out=out, stream=stream)


def batch_norm(x: DeviceArray, scale: DeviceArray, bias: DeviceArray, mean: DeviceArray, var: DeviceArray,
               epsilon: float = 1e-5, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """ONNX ``BatchNormalization`` in inference mode: ``(x - mean) / sqrt(var + epsilon)
    * scale + bias`` per channel (axis 1)."""
    x = _arr(x, "x")
    p = [_arr(v, n)._a for v, n in ((scale, "scale"), (bias, "bias"), (mean, "mean"), (var, "var"))]
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._batch_norm(x._a, *p, _real(epsilon, "epsilon"), o._a, stream)
    return o


def lrn(x: DeviceArray, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0,
        out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """ONNX ``LRN``: ``x / (bias + alpha/size · Σ x²)^beta`` over ``size`` neighbouring channels."""
    x = _arr(x, "x")
    n = operator_index(size, "size")
    if n < 1:
        raise _value_error(f"size must be >= 1, got {n}")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._lrn(x._a, n, _real(alpha, "alpha"), _real(beta, "beta"), _real(bias, "bias"), o._a, stream)
    return o


def resize(x: DeviceArray, sizes: Optional[Sequence[int]] = None, scales: Optional[Sequence[float]] = None,
           mode: str = "nearest", coordinate_transformation_mode: str = "half_pixel",
           nearest_mode: str = "round_prefer_floor", cubic_coeff_a: float = -0.75, exclude_outside: bool = False,
           out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """ONNX ``Resize`` over every axis: ``sizes`` (one per axis) or ``scales`` (output
    ``floor(in · scale)``, and the scale itself drives the coordinate transform, as in
    ONNX). ``mode``: nearest, linear (N-linear) or cubic; coordinate modes half_pixel,
    half_pixel_symmetric, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn."""
    x = _arr(x, "x")
    for name, v in (("mode", mode), ("coordinate_transformation_mode", coordinate_transformation_mode), ("nearest_mode", nearest_mode)):
        if not isinstance(v, str):
            raise _type_error(f"{name} must be a str, not {type(v).__name__}")
    if (sizes is None) == (scales is None):
        raise _value_error("resize needs exactly one of sizes and scales")
    sc = None
    if sizes is not None:
        shape = _ints(sizes, "sizes", x.ndim)
    else:
        if not isinstance(scales, (tuple, list)) and not hasattr(scales, "__len__"):
            raise _type_error(f"scales must be a sequence of numbers, not {type(scales).__name__}")
        sc = [_real(v, "scales") for v in scales]
        if len(sc) != x.ndim or any(not (v > 0 and v < float("inf")) for v in sc):
            raise _value_error(f"scales {sc} must have {x.ndim} positive entries")
        shape = [int(s * v) for s, v in zip(x.shape, sc, strict=False)]
    o = _out(out, shape, x.dtype_name, x.device)
    _npurt._resize(x._a, o._a, mode, coordinate_transformation_mode, nearest_mode, _real(cubic_coeff_a, "cubic_coeff_a"),
                   _flag(exclude_outside, "exclude_outside"), sc, stream)
    return o


def _act(op: str, x: Any, out: Any, stream: Any, alpha: float = 0.0, beta: float = 0.0) -> DeviceArray:
    x = _arr(x, "x")
    o = _out(out, x.shape, x.dtype_name, x.device)
    _npurt._activation(op, x._a, o._a, alpha=_real(alpha, "alpha"), beta=_real(beta, "beta"), stream=stream)
    return o


def leaky_relu(x: DeviceArray, alpha: float = 0.01, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _act("leaky_relu", x, out, stream, alpha)


def hard_sigmoid(x: DeviceArray, alpha: float = 0.2, beta: float = 0.5, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``max(0, min(1, alpha·x + beta))`` (ONNX's defaults)."""
    return _act("hard_sigmoid", x, out, stream, alpha, beta)


def hard_swish(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``x · hard_sigmoid(x, 1/6, 1/2)``."""
    return _act("hard_swish", x, out, stream)


def elu(x: DeviceArray, alpha: float = 1.0, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _act("elu", x, out, stream, alpha)


def selu(x: DeviceArray, alpha: float = 1.67326319217681884765625, gamma: float = 1.05070102214813232421875,
         out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    return _act("selu", x, out, stream, alpha, gamma)


def softplus(x: DeviceArray, out: Optional[DeviceArray] = None, stream: Any = None) -> DeviceArray:
    """``ln(1 + eˣ)``, without overflow."""
    return _act("softplus", x, out, stream)
