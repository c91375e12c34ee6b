"""A loaded ONNX graph, ready to plan: initializer-only subgraphs folded once, the nodes
left to lower, and the load-time support check (one error naming every node that cannot
run in this build).

Which nodes need a kernel: a value is *plan-time known* if it is a constant, the output of
``Shape`` / ``Size``, or the output of a node whose inputs are all plan-time known (shape
arithmetic); such nodes are evaluated on the host when a plan is built and need no kernel.
Every other node must have a lowering whose npurt functions exist (``ops.missing``).

Host evaluation (``host_eval``): known nodes are computed by ``onnx.reference`` (ONNX's
executable specification), one node at a time with the model's opset imports, so npurt
keeps no second host implementation of any operator; this runs at load and plan time only.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..exceptions import InvalidValueError
from . import fuse, onnx_io, ops
from .ir import Unsupported

_SHAPE_SOURCES = frozenset({"Shape", "Size"})
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



def _has_subgraph(node: Any) -> bool:
    return any(a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute)


def _label(node: Any) -> str:
    return f"{node.name} ({node.op_type})" if node.name else node.op_type


class Graph:
    """``inputs`` / ``outputs`` (TensorInfo), ``consts`` (name -> host array: initializers
    and folded values), ``nodes`` (``(NodeProto, attrs)`` in topological order), ``opset``
    and ``opsets`` (the model's imports), ``folded`` (how many nodes were folded at load),
    ``fused`` (how many Conv + BatchNormalization pairs became one Conv),
    ``fused_activations`` (how many activations became a Conv's epilogue) and
    ``fused_epilogues`` (how many Mul / Add nodes joined a MatMul; ``fuse.py``)."""

    def __init__(self, proto: Any) -> None:
        self.opsets = list(proto.opset_import)
        self.opset = onnx_io.opset_of(proto)
        inferred = onnx_io.infer_shapes(proto)
        self.inputs, self.outputs = onnx_io.graph_io(inferred)
        self.consts: Dict[str, np.ndarray] = onnx_io.initializers(proto)
        self.fold_cache: Dict[int, Any] = {}
        names = {v.name for v in self.inputs}
        if len(names) != len(self.inputs):
            raise InvalidValueError("model inputs have repeated names")
        all_nodes = list(proto.graph.node)
        self._check(all_nodes, names)  # before folding: an unsupported model fails fast
        nodes: List[Tuple[int, Any, Dict[str, Any]]] = []
        self.folded = 0
        for k, n in enumerate(all_nodes):
            if self._foldable(n, self.consts.keys()):
                vals = [self.consts[i] if i else None for i in n.input]
                for name, a in zip(n.output, host_eval(n, vals, self.opsets, self.fold_cache, k), strict=False):
                    if name:
                        self.consts[name] = a
                self.folded += 1
            else:
                nodes.append((k, n, onnx_io.attributes(n)))
        outs = {o.name for o in self.outputs}
        self.fused = self.fused_activations = self.fused_epilogues = 0
        # Whether load-time rewrites run; plans built later follow the same choice.
        self.fuse = fuse.enabled()
        if self.fuse:
            nodes, self.fused = fuse.fold_batch_norms(nodes, self.consts, outs)
            nodes, self.fused_activations = fuse.fuse_activations(nodes, self.consts, outs, self.opset)
            nodes, self.fused_epilogues = fuse.fuse_matmul_epilogues(nodes, self.consts, outs)
        self.nodes = nodes

    @staticmethod
    def _foldable(n: Any, known: Any) -> bool:
        return (
            n.domain in ("", "ai.onnx")
            and n.op_type not in NEVER_FOLD
            and not _has_subgraph(n)
            and all(i == "" or i in known for i in n.input)
        )

    def _check(self, nodes: List[Any], input_names: Set[str]) -> None:
        """Raises one ``Unsupported`` naming every node that cannot run here."""
        known: Set[str] = set(self.consts)
        produced: Set[str] = set(input_names) | known
        bad: List[str] = []
        for n in nodes:
            for i in n.input:
                if i and i not in produced:
                    bad.append(f"{_label(n)}: input {i!r} is not produced by any earlier node")
            produced.update(o for o in n.output if o)
            if n.domain not in ("", "ai.onnx"):
                bad.append(f"{_label(n)}: custom domain {n.domain!r}")
                continue
            if n.op_type in _SHAPE_SOURCES or self._foldable(n, known):
                known.update(o for o in n.output if o)
                continue
            if _has_subgraph(n):
                bad.append(f"{_label(n)}: control flow (subgraphs) is not supported")
                continue
            why = ops.missing(n.op_type)
            if why is not None:
                bad.append(f"{_label(n)}: {why}")
        for o in self.outputs:
            if o.name not in produced:
                bad.append(f"graph output {o.name!r} is not produced by any node")
        if bad:
            raise Unsupported(f"the model has {len(bad)} node(s) npurt cannot run: " + "; ".join(bad))

    def op_types(self) -> List[str]:
        return sorted({n.op_type for _k, n, _a in self.nodes})

    def input_index(self, name: str) -> Optional[int]:
        for i, v in enumerate(self.inputs):
            if v.name == name:
                return i
        return None
