"""Host evaluation of nodes whose inputs are all known when the model is planned:
initializer-only subgraphs (folded once at load time) and shape arithmetic (``Shape`` /
``Slice`` / ``Concat`` / ``Cast`` / ``Gather``... on shapes, folded per input shape).

The values are computed by ``onnx.reference`` (ONNX's executable specification), one
node at a time with the model's opset imports, so npurt keeps no second host
implementation of any operator. Nothing here runs when a planned model executes.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Sequence

import numpy as np

from ..exceptions import InvalidValueError
from .ir import Unsupported

# Ops whose value must not be folded: random generators differ per run.
NEVER_FOLD = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"})

_lock = threading.Lock()


def _evaluator(node: Any, arrays: Sequence[np.ndarray], opsets: Sequence[Any]) -> Any:
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    ins = []
    for name, a in zip(node.input, arrays, strict=False):
        if name and a is not None:
            et = helper.np_dtype_to_tensor_dtype(a.dtype)
            ins.append(helper.make_tensor_value_info(name, et, None))
    outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    g = helper.make_graph([node], "fold", ins, outs)
    m = helper.make_model(g, opset_imports=list(opsets))
    return ReferenceEvaluator(m)


def host_eval(node: Any, arrays: Sequence[np.ndarray], opsets: Sequence[Any], cache: Dict[int, Any], key: int) -> List[np.ndarray]:
    """The outputs of ``node`` for known inputs (None entries are omitted inputs);
    ``cache`` (the model's) keeps each node's evaluator under ``key`` (its position)."""
    with _lock:
        ev = cache.get(key)
    try:
        if ev is None:
            ev = _evaluator(node, arrays, opsets)
            with _lock:
                cache[key] = ev
        feeds = {n: a for n, a in zip(node.input, arrays, strict=False) if n}
        outs = ev.run(None, feeds)
    except Exception as e:
        label = node.name or node.op_type
        raise Unsupported(f"{label} ({node.op_type}): cannot evaluate its constant inputs at plan time: {type(e).__name__}: {e}") from None
    res = []
    for o in outs:
        a = np.asarray(o)
        if a.dtype == object:
            raise InvalidValueError(f"{node.op_type}: folded to a non-tensor value")
        res.append(a)
    return res
