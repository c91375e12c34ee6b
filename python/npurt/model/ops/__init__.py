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

import npurt

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


# Register the lowerings (each module adds its ops to OPS).
from . import elementwise, linalg, logic, nn, reduce, shape  # noqa: E402,F401
