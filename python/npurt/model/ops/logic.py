"""Comparisons, logic, Where and Pow on npurt's kernels (``npurt.equal`` ... from
``nn-api.md``). Pow by a known exponent of 1, 2, 3, 0.5 or -1 is lowered to multiply /
sqrt / reciprocal kernels; any other exponent needs ``npurt.power``."""

from __future__ import annotations

from typing import List, Optional

import npurt

from ..ir import Ctx, Unsupported, Val
from . import op, resolve
from .common import FLOATS, bshape, copy_into, kernel, need_dtype, scalar_of

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

