"""Elementwise ops: arithmetic with broadcasting, variadic Sum/Mean/Max/Min, unary math,
activations, Clip, Cast, comparisons and logic. Composite activations (HardSigmoid,
HardSwish, LeakyRelu, PRelu) are short chains of npurt kernels when ``npurt.nn`` lacks
the fused kernel. Comparisons and logic use ``npurt.equal`` ... (``nn-api.md``); Pow by a
known exponent of 1, 2, 3, 0.5 or -1 is lowered to multiply / sqrt / divide kernels, any
other exponent needs ``npurt.power``."""

from __future__ import annotations

from typing import Any, List, Optional

import npurt

from ..ir import Ctx, Unsupported, Val
from . import FLOATS, bshape, copy_into, kernel, need_dtype, op, resolve, scalar_of

_BINARY = {"Add": npurt.add, "Sub": npurt.subtract, "Mul": npurt.multiply, "Max": npurt.maximum, "Min": npurt.minimum}


def _binary(ctx: Ctx, fn: Any, a: Val, b: Val, opname: str) -> Val:
    need_dtype(ctx, a)
    need_dtype(ctx, b)
    if a.dtype != b.dtype:
        raise Unsupported(f"{ctx.node}: {opname} of {a.dtype} and {b.dtype} (ONNX requires one dtype)")
    shape = bshape(ctx, a.shape, b.shape)
    sb = scalar_of(b)
    if sb is not None and shape == a.shape and a.dtype in FLOATS | {"int32", "int64"}:
        return kernel(ctx, lambda x, out, stream: fn(x, sb, out=out, stream=stream), [a], shape, a.dtype, opname)
    return kernel(ctx, fn, [a, b], shape, a.dtype, opname)


@op("Add", "Sub", "Mul")
def _arith(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    a, b = ins
    return [_binary(ctx, _BINARY[op_type], a, b, op_type)]


@op("Div")
def _div(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    a, b = ins
    if a.dtype not in FLOATS:
        raise Unsupported(f"{ctx.node}: integer Div (truncating) has no npurt kernel")
    return [_binary(ctx, npurt.divide, a, b, "Div")]


@op("Max", "Min", "Sum", "Mean")
def _variadic(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    xs = [v for v in ins if v is not None]
    fn = {"Max": npurt.maximum, "Min": npurt.minimum}.get(op_type, npurt.add)
    if len(xs) == 1:
        need_dtype(ctx, xs[0])
        acc = ctx.new(xs[0].shape, xs[0].dtype)
        copy_into(ctx, xs[0], acc, op=op_type)
    else:
        acc = _binary(ctx, fn, xs[0], xs[1], op_type)
        for x in xs[2:]:
            acc = _binary(ctx, fn, acc, x, op_type)
    if op_type == "Mean":
        need_dtype(ctx, acc, FLOATS)
        n = float(len(xs))
        acc = kernel(ctx, lambda x, out, stream: npurt.multiply(x, 1.0 / n, out=out, stream=stream), [acc], acc.shape, acc.dtype, "Mean")
    return [acc]


def _unary_op(name: str, fn_path: str, floats_only: bool = True, **kw: Any) -> None:
    @op(name, needs=(fn_path,))
    def lower(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
        x = ins[0]
        need_dtype(ctx, x, FLOATS if floats_only else None)
        return [kernel(ctx, resolve(fn_path), [x], x.shape, x.dtype, name, **kw)]


for _name, _path in [("Exp", "exp"), ("Log", "log"), ("Sqrt", "sqrt"), ("Tanh", "tanh"), ("Sigmoid", "sigmoid"), ("Erf", "erf"), ("Floor", "floor"), ("Ceil", "ceil")]:
    _unary_op(_name, _path)
for _name, _path in [("Relu", "relu"), ("Abs", "abs"), ("Neg", "negative"), ("Sign", "sign")]:
    _unary_op(_name, _path, floats_only=False)
_unary_op("Not", "logical_not", floats_only=False)


@op("Gelu")
def _gelu(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS)
    approx = attrs.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise Unsupported(f"{ctx.node}: Gelu approximate={approx!r}")
    return [kernel(ctx, npurt.gelu, [x], x.shape, x.dtype, "Gelu", approximate=approx)]


@op("LeakyRelu")
def _leaky(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS)
    alpha = float(attrs.get("alpha", 0.01))
    fused = resolve("nn.leaky_relu")
    if fused is not None:
        return [kernel(ctx, lambda a, out, stream: fused(a, alpha, out=out, stream=stream), [x], x.shape, x.dtype, "LeakyRelu")]
    # max(x, 0) + alpha * min(x, 0): three kernels.
    neg = kernel(ctx, lambda a, out, stream: npurt.minimum(a, 0.0, out=out, stream=stream), [x], x.shape, x.dtype, "LeakyRelu")
    pos = kernel(ctx, lambda a, out, stream: npurt.relu(a, out=out, stream=stream), [x], x.shape, x.dtype, "LeakyRelu")
    return [kernel(ctx, lambda p, n, out, stream: npurt.axpy(alpha, n, p, out=out, stream=stream), [pos, neg], x.shape, x.dtype, "LeakyRelu")]


@op("PRelu")
def _prelu(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x, slope = ins
    need_dtype(ctx, x, FLOATS)
    if len(slope.shape) == 1 and len(x.shape) > 2 and slope.shape[0] == x.shape[1] != x.shape[-1]:
        # Exporters emit a per-channel slope of shape (C,) (opset < 7 broadcast it along
        # axis 1): the same slope as (C, 1, ..., 1).
        slope = ctx.view(slope, [slope.shape[0]] + [1] * (len(x.shape) - 2))
    shape = bshape(ctx, x.shape, slope.shape)
    neg = kernel(ctx, lambda a, out, stream: npurt.minimum(a, 0.0, out=out, stream=stream), [x], x.shape, x.dtype, "PRelu")
    scaled = _binary(ctx, npurt.multiply, neg, slope, "PRelu")
    pos = kernel(ctx, lambda a, out, stream: npurt.relu(a, out=out, stream=stream), [x], x.shape, x.dtype, "PRelu")
    return [kernel(ctx, npurt.add, [pos, scaled], shape, x.dtype, "PRelu")]


def _hard_sigmoid(ctx: Ctx, x: Val, alpha: float, beta: float, name: str) -> Val:
    fused = resolve("nn.hard_sigmoid")
    if fused is not None:
        return kernel(ctx, lambda a, out, stream: fused(a, alpha, beta, out=out, stream=stream), [x], x.shape, x.dtype, name)
    # clip(alpha * x + beta, 0, 1): two kernels (the second in place).
    t = ctx.new(x.shape, x.dtype)

    def run(i: List[Any], o: List[Any], s: Any) -> None:
        npurt.multiply(i[0], alpha, out=o[0], stream=s)
        npurt.add(o[0], beta, out=o[0], stream=s)
        npurt.maximum(o[0], 0.0, out=o[0], stream=s)
        npurt.minimum(o[0], 1.0, out=o[0], stream=s)

    if t.size:
        ctx.emit(run, [x], [t], name)
    return t


@op("HardSigmoid")
def _hsig(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS)
    return [_hard_sigmoid(ctx, x, float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5)), "HardSigmoid")]


@op("HardSwish")
def _hswish(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS)
    fused = resolve("nn.hard_swish")
    if fused is not None:
        return [kernel(ctx, fused, [x], x.shape, x.dtype, "HardSwish")]
    g = _hard_sigmoid(ctx, x, 1.0 / 6.0, 0.5, "HardSwish")
    return [kernel(ctx, npurt.multiply, [x, g], x.shape, x.dtype, "HardSwish")]


@op("Clip")
def _clip(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS | {"int32", "int64", "int8", "uint8"})
    if ctx.opset < 11:
        lo, hi = attrs.get("min"), attrs.get("max")
        bounds: List[Any] = [None if lo is None else float(lo), None if hi is None else float(hi)]
    else:
        bounds = [None if v is None else (scalar_of(v) if v.known else v) for v in (ins[1:] + [None, None])[:2]]
    cur = x
    for b, fn in zip(bounds, (npurt.maximum, npurt.minimum), strict=False):
        if b is None:
            continue
        if isinstance(b, Val):
            cur = _binary(ctx, fn, cur, b, "Clip")
        else:
            bv = b if x.dtype in FLOATS else int(b)
            cur = kernel(ctx, lambda a, out, stream, f=fn, v=bv: f(a, v, out=out, stream=stream), [cur], x.shape, x.dtype, "Clip")
    if cur is x:
        cur = kernel(ctx, lambda a, out, stream: npurt.cast(a, a.dtype_name, out=out, stream=stream), [x], x.shape, x.dtype, "Clip")
    return [cur]


@op("Cast", "CastLike")
def _cast(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    from .. import dtypes

    x = ins[0]
    to = ins[1].dtype if op_type == "CastLike" else dtypes.npurt_dtype(int(attrs["to"])) or dtypes.onnx_name(int(attrs["to"]))
    if x.known:  # CastLike of a constant: only the target's dtype is dynamic
        from .. import dtypes as _dt

        if to in _dt._BY_NPURT and to != "bfloat16":
            return [Val(x.shape, to, const=x.const.astype(_dt.numpy_dtype(to)))]
    need_dtype(ctx, x)
    probe = Val((), to)
    need_dtype(ctx, probe, what="target")
    return [kernel(ctx, lambda a, out, stream: npurt.cast(a, to, out=out, stream=stream), [x], x.shape, to, op_type)]


@op("Reciprocal")
def _reciprocal(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x = ins[0]
    need_dtype(ctx, x, FLOATS)
    return [kernel(ctx, lambda a, out, stream: npurt.divide(1.0, a, out=out, stream=stream), [x], x.shape, x.dtype, "Reciprocal")]


# -- comparisons, logic, Where, Pow ----------------------------------------------------

_CMP = {"Equal": "equal", "Less": "less", "Greater": "greater", "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal"}
_LOGIC = {"And": "logical_and", "Or": "logical_or"}


def _compare_op(name: str, path: str, logic: bool) -> None:
    @op(name, needs=(path,))
    def lower(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
        a, b = ins
        need_dtype(ctx, a, {"bool"} if logic else None)
        need_dtype(ctx, b, {"bool"} if logic else None)
        if a.dtype != b.dtype:
            raise Unsupported(f"{ctx.node}: {name} of {a.dtype} and {b.dtype}")
        fn = resolve(path)
        return [kernel(ctx, fn, [a, b], bshape(ctx, a.shape, b.shape), "bool", name)]


for _n, _p in _CMP.items():
    _compare_op(_n, _p, False)
for _n, _p in _LOGIC.items():
    _compare_op(_n, _p, True)


@op("Where", needs=("where",))
def _where(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    c, x, y = ins
    need_dtype(ctx, c, {"bool"}, "condition")
    need_dtype(ctx, x)
    if x.dtype != y.dtype:
        raise Unsupported(f"{ctx.node}: Where of {x.dtype} and {y.dtype}")
    fn = resolve("where")
    return [kernel(ctx, fn, [c, x, y], bshape(ctx, c.shape, x.shape, y.shape), x.dtype, "Where")]


@op("Pow")
def _pow(ctx: Ctx, attrs: dict, ins: List[Optional[Val]], n_out: int, op_type: str = "") -> List[Val]:
    x, e = ins
    need_dtype(ctx, x, FLOATS)
    shape = bshape(ctx, x.shape, e.shape)
    p = scalar_of(e)
    if p is not None and tuple(shape) == tuple(x.shape):
        if p == 1:
            out = ctx.new(shape, x.dtype)
            copy_into(ctx, x, out, op="Pow")
            return [out]
        if p == 2:
            return [kernel(ctx, npurt.multiply, [x, x], shape, x.dtype, "Pow")]
        if p == 3:
            sq = kernel(ctx, npurt.multiply, [x, x], shape, x.dtype, "Pow")
            return [kernel(ctx, npurt.multiply, [sq, x], shape, x.dtype, "Pow")]
        if p == 0.5:
            return [kernel(ctx, npurt.sqrt, [x], shape, x.dtype, "Pow")]
        if p == -1:
            return [kernel(ctx, lambda a, out, stream: npurt.divide(1.0, a, out=out, stream=stream), [x], shape, x.dtype, "Pow")]
    power = resolve("power")
    if power is None:
        raise Unsupported(f"{ctx.node}: Pow with exponent {'of shape ' + str(e.shape) if p is None else p} needs npurt.power (not in this build)")
    if e.dtype != x.dtype:
        raise Unsupported(f"{ctx.node}: Pow of {x.dtype} by {e.dtype}")
    return [kernel(ctx, lambda a, b, out, stream: power(a, b, out=out, stream=stream), [x, e], shape, x.dtype, "Pow")]

