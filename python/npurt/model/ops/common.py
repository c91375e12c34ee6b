"""Helpers the lowerings share: shape arithmetic on the host, dtype checks, attribute
reading and the common step shapes (one kernel with ``out=``)."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

from ... import _npurt
from ..ir import Ctx, Unsupported, Val

DEVICE_DTYPES = frozenset({"float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool"})
FLOATS = frozenset({"float32", "float16", "bfloat16"})


def need_dtype(ctx: Ctx, v: Val, allowed: Optional[Sequence[str]] = None, what: str = "input") -> str:
    """``v``'s dtype if the device has it (and it is in ``allowed``), else Unsupported."""
    if v.dtype not in DEVICE_DTYPES:
        raise Unsupported(f"{ctx.node}: {what} has dtype {v.dtype}, which npurt devices do not hold")
    if allowed is not None and v.dtype not in allowed:
        raise Unsupported(f"{ctx.node}: {what} dtype {v.dtype} is not supported (only {', '.join(sorted(allowed))})")
    return v.dtype


def bshape(ctx: Ctx, *shapes: Sequence[int]) -> Tuple[int, ...]:
    """numpy broadcasting of shapes (ONNX's multidirectional broadcasting)."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        from ...exceptions import InvalidValueError

        raise InvalidValueError(f"{ctx.node}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast") from None


def axis_of(ctx: Ctx, axis: int, rank: int) -> int:
    if not -max(rank, 1) <= axis < max(rank, 1):
        from ...exceptions import InvalidValueError

        raise InvalidValueError(f"{ctx.node}: axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def ints(a: Optional[np.ndarray]) -> Optional[List[int]]:
    return None if a is None else [int(x) for x in np.asarray(a).reshape(-1)]


def scalar_of(v: Val) -> Optional[Any]:
    """A known one-element value as a Python number (for kernels' scalar operands)."""
    if v.known and v.const.size == 1 and v.dtype in DEVICE_DTYPES:
        x = v.const.reshape(()).item()
        return bool(x) if v.dtype == "bool" else x
    return None


def copy_into(ctx: Ctx, src: Val, dst: Val, view: Callable[[Any], Any] = lambda a: a, op: str = "copy") -> None:
    """A copy kernel: ``dst = view(src)`` broadcast to ``dst``'s shape."""

    def run(i: List[Any], o: List[Any], s: Any) -> None:
        _npurt._copy(view(i[0])._a, o[0]._a, s)

    if dst.size:
        ctx.emit(run, [src], [dst], op)


def out_like(ctx: Ctx, shape: Sequence[int], dtype: str) -> Val:
    return ctx.new(shape, dtype)


def kernel(ctx: Ctx, fn: Callable[..., Any], ins: Sequence[Val], shape: Sequence[int], dtype: str, op: str = "", **kw: Any) -> Val:
    """One npurt call ``fn(*in_arrays, out=o, stream=s, **kw)`` into a new value."""
    out = ctx.new(shape, dtype)
    if out.size:

        def run(i: List[Any], o: List[Any], s: Any) -> None:
            fn(*i, out=o[0], stream=s, **kw)

        ctx.emit(run, ins, [out], op)
    return out
