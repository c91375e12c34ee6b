"""Reductions (ReduceSum/Mean/Max/Min/SumSquare/L1/L2, GlobalAverage/MaxPool), ArgMax /
ArgMin, Softmax / LogSoftmax (both opset conventions) and LayerNormalization."""

from __future__ import annotations

import math
from typing import Any, List, Optional

import npurt

from ...exceptions import InvalidValueError
from ..ir import Ctx, Unsupported, Val
from . import FLOATS, axis_of, ints, kernel, need_dtype, op

# op -> (npurt reduction, opset from which `axes` is an input)
_REDUCE = {
    "ReduceSum": ("sum", 13),
    "ReduceMean": ("mean", 18),
    "ReduceMax": ("max", 18),
    "ReduceMin": ("min", 18),
    "ReduceSumSquare": ("sum", 18),
    "ReduceL1": ("sum", 18),
    "ReduceL2": ("sum", 18),
}


def _reduced(shape: List[int], axes: List[int], keep: bool) -> List[int]:
    return [1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes]


@op(*_REDUCE)
def _reduce(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    kind, input_from = _REDUCE[op_type]
    need_dtype(ctx, x, FLOATS | {"int32", "int64"} if kind in ("sum", "max", "min") else FLOATS)
    if ctx.opset >= input_from:
        axes = ints(ctx.host(ins[1], "axes")) if len(ins) > 1 and ins[1] is not None else None
    else:
        axes = attrs.get("axes")
    keep = bool(int(attrs.get("keepdims", 1)))
    r = len(x.shape)
    if not axes:
        if int(attrs.get("noop_with_empty_axes", 0)):
            axes_n: List[int] = []
        else:
            axes_n = list(range(r))
    else:
        axes_n = sorted({axis_of(ctx, int(a), r) for a in axes})
    shape = _reduced(list(x.shape), axes_n, keep)
    if kind in ("max", "min") and any(x.shape[a] == 0 for a in axes_n):
        raise Unsupported(f"{ctx.node}: {op_type} over an empty axis")
    src = x
    if op_type == "ReduceSumSquare" or op_type == "ReduceL2":
        src = kernel(ctx, npurt.multiply, [x, x], x.shape, x.dtype, op_type)
    elif op_type == "ReduceL1":
        src = kernel(ctx, npurt.abs, [x], x.shape, x.dtype, op_type)
    fn = getattr(npurt, kind)
    if not axes_n:
        out = kernel(ctx, lambda a, out, stream: npurt.cast(a, a.dtype_name, out=out, stream=stream), [src], shape, x.dtype, op_type)
    elif x.size == 0 and kind in ("sum", "mean"):
        fill = 0.0 if kind == "sum" else float("nan")
        out = kernel(ctx, lambda out, stream: out.fill(fill if out.dtype_name in FLOATS else 0, stream=stream), [], shape, x.dtype, op_type)
    else:
        kw = {"dtype": x.dtype} if kind in ("sum", "mean") else {}
        out = kernel(ctx, lambda a, out, stream: fn(a, axis=tuple(axes_n), keepdims=keep, out=out, stream=stream, **kw), [src], shape, x.dtype, op_type)
    if op_type == "ReduceL2":
        out = kernel(ctx, npurt.sqrt, [out], shape, x.dtype, op_type)
    return [out]


@op("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS)
    axes = tuple(range(2, len(x.shape)))
    shape = list(x.shape[:2]) + [1] * len(axes)
    if op_type == "GlobalAveragePool":
        return [kernel(ctx, lambda a, out, stream: npurt.mean(a, axis=axes, keepdims=True, out=out, stream=stream), [x], shape, x.dtype, op_type)]
    return [kernel(ctx, lambda a, out, stream: npurt.max(a, axis=axes, keepdims=True, out=out, stream=stream), [x], shape, x.dtype, op_type)]


@op("ArgMax", "ArgMin")
def _argmax(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS | {"int32", "int64"})
    if int(attrs.get("select_last_index", 0)):
        raise Unsupported(f"{ctx.node}: {op_type} select_last_index=1")
    axis = axis_of(ctx, int(attrs.get("axis", 0)), len(x.shape))
    keep = bool(int(attrs.get("keepdims", 1)))
    shape = _reduced(list(x.shape), [axis], keep)
    src = x
    if op_type == "ArgMin":  # the first minimum of x is the first maximum of -x
        src = kernel(ctx, npurt.negative, [x], x.shape, x.dtype, op_type)
    return [kernel(ctx, lambda a, out, stream: npurt.argmax(a, axis=axis, keepdims=keep, out=out, stream=stream), [src], shape, "int64", op_type)]


@op("Softmax", "LogSoftmax")
def _softmax(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS)
    r = len(x.shape)
    log = op_type == "LogSoftmax"
    fn = npurt.log_softmax if log else npurt.softmax
    if ctx.opset >= 13:
        axis = axis_of(ctx, int(attrs.get("axis", -1)), r)
        return [kernel(ctx, lambda a, out, stream: fn(a, axis=axis, out=out, stream=stream), [x], x.shape, x.dtype, op_type)]
    # Before opset 13 the input is flattened to 2-D at `axis` (default 1) and normalised
    # over the second dimension: a softmax over the last axis of a (rows, cols) view.
    axis = axis_of(ctx, int(attrs.get("axis", 1)), r) if r else 0
    rows, cols = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
    flat = ctx.view(x, [rows, cols])
    y = kernel(ctx, lambda a, out, stream: fn(a, axis=-1, out=out, stream=stream), [flat], [rows, cols], x.dtype, op_type)
    return [ctx.view(y, x.shape)]


@op("LayerNormalization")
def _layer_norm(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x, scale = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    need_dtype(ctx, x, FLOATS)
    r = len(x.shape)
    axis = axis_of(ctx, int(attrs.get("axis", -1)), r)
    eps = float(attrs.get("epsilon", 1e-5))
    inner = math.prod(x.shape[axis:])
    outer = math.prod(x.shape[:axis])
    norm_shape = tuple(x.shape[axis:])
    for p, what in ((scale, "scale"), (bias, "bias")):
        if p is not None and (p.dtype != x.dtype or p.size != inner):
            raise Unsupported(f"{ctx.node}: LayerNormalization {what} of shape {p.shape} ({p.dtype}) for normalised shape {norm_shape} ({x.dtype})")
    flat = ctx.view(x, [outer, inner])
    w = ctx.view(scale, [inner])
    b = ctx.view(bias, [inner]) if bias is not None else None
    args = [flat, w] + ([b] if b is not None else [])

    def run(a: Any, wt: Any, *rest: Any, out: Any, stream: Any) -> None:
        npurt.layer_norm(a, wt, rest[0] if rest else None, eps=eps, out=out, stream=stream)

    if inner == 0:
        raise InvalidValueError(f"{ctx.node}: LayerNormalization over an empty axis")
    y = kernel(ctx, run, args, [outer, inner], x.dtype, op_type)
    outs = [ctx.view(y, x.shape)]
    if n_out > 1:  # Mean and InvStdDev (training outputs): four more kernels on the rows
        stat_shape = list(x.shape[:axis]) + [1] * (r - axis)
        mean, inv = ctx.new([outer, 1], x.dtype), ctx.new([outer, 1], x.dtype)
        tmp = ctx.new([outer, inner], x.dtype)

        def stats(i: List[Any], o: List[Any], s: Any) -> None:
            npurt.mean(i[0], axis=1, keepdims=True, out=o[0], stream=s)
            npurt.subtract(i[0], o[0], out=o[2], stream=s)
            npurt.multiply(o[2], o[2], out=o[2], stream=s)
            npurt.mean(o[2], axis=1, keepdims=True, out=o[1], stream=s)
            npurt.add(o[1], eps, out=o[1], stream=s)
            npurt.rsqrt(o[1], out=o[1], stream=s)

        ctx.emit(stats, [flat], [mean, inv, tmp], op_type)
        outs += [ctx.view(mean, stat_shape), ctx.view(inv, stat_shape)][: n_out - 1]
    return outs
