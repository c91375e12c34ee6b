"""Operator lowerings: ONNX op type -> a function that turns one node into npurt kernel
calls (steps) on a :class:`~npurt.model.ir.Ctx`.

A lowering is ``fn(ctx, attrs, ins, n_out) -> [Val, ...]``: ``ins`` are the node's input
values (None for an omitted optional input), ``attrs`` its attributes. It checks what it
supports (attributes, dtypes, ranks) and raises ``Unsupported`` otherwise, computes the
output shapes on the host, and emits steps that call only public npurt functions.

``needs`` names the npurt functions a lowering calls (``"nn.conv"`` is ``npurt.nn.conv``):
an op whose functions are not in this build is reported unsupported when a model is loaded.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import npurt

from ... import _npurt
from ..ir import Ctx, Unsupported, Val

Lowering = Callable[..., List[Any]]
OPS: Dict[str, Tuple[Lowering, Tuple[str, ...]]] = {}


def op(*names: str, needs: Sequence[str] = ()) -> Callable[[Lowering], Lowering]:
    """Registers a lowering for the op types ``names``."""

    def deco(fn: Lowering) -> Lowering:
        for n in names:
            OPS[n] = (fn, tuple(needs))
        return fn

    return deco


def resolve(path: str) -> Optional[Any]:
    """``npurt.<path>`` (``"power"``, ``"nn.conv"``), or None if this build lacks it."""
    mod, _, name = path.rpartition(".")
    m: Any = npurt
    if mod:
        try:
            m = importlib.import_module(f"npurt.{mod}")
        except ImportError:
            return None
    return getattr(m, name, None)


def missing(op_type: str) -> Optional[str]:
    """Why ``op_type`` cannot run here (None if it can): no lowering, or the npurt
    functions it calls are not in this build."""
    entry = OPS.get(op_type)
    if entry is None:
        return "no lowering"
    gone = [n for n in entry[1] if resolve(n) is None]
    return f"needs npurt.{', npurt.'.join(gone)} (not in this build)" if gone else None


def supported_ops() -> List[str]:
    """Every op type that can run in this build, sorted."""
    return sorted(n for n in OPS if missing(n) is None)


def lower(op_type: str) -> Lowering:
    return OPS[op_type][0]


# -- helpers the lowerings share: shape arithmetic, dtype checks, one-kernel steps ------

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


def kernel(ctx: Ctx, fn: Callable[..., Any], ins: Sequence[Val], shape: Sequence[int], dtype: str, op: str = "", **kw: Any) -> Val:
    """One npurt call ``fn(*in_arrays, out=o, stream=s, **kw)`` into a new value."""
    out = ctx.new(shape, dtype)
    if out.size:

        def run(i: List[Any], o: List[Any], s: Any) -> None:
            fn(*i, out=o[0], stream=s, **kw)

        ctx.emit(run, ins, [out], op)
    return out


# Register the lowerings (each module adds its ops to OPS).
from . import elementwise, linalg, movement, nn, reduce  # noqa: E402,F401
