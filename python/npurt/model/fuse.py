"""Load-time rewrites of a graph's remaining nodes that save kernels at run time.

* **BatchNormalization into Conv.** An inference BatchNormalization whose input is the
  only use of a Conv's output, with every parameter and the Conv's weights (and bias)
  constant, becomes part of the Conv: ``w' = w · k`` per output channel and
  ``b' = (b - mean) · k + bias`` with ``k = scale / sqrt(var + eps)``, computed once in
  float64 and rounded to float32 (onnxruntime's and TensorRT's folding). Results differ
  from the unfolded pair by float rounding only.
* **Activation into Conv.** A ``Relu``, ``LeakyRelu``, ``Clip`` (constant bounds),
  ``HardSigmoid`` or ``HardSwish`` whose input is the only use of a float32 Conv's output
  becomes the Conv's fused activation (``ACTIVATION`` in its attributes: a name and
  parameters for ``npurt.nn.conv(activation=...)``, whose kernel applies it to every
  output after the bias, bitwise the separate activation kernel). Attributes an ONNX node
  omits are left to the kernel's own defaults (ONNX's). Fused Convs are never evaluated on
  the host (``is_fused``).

* **Transpose into MatMul** (done when a plan is built, ``ops/linalg.py``): a batched
  MatMul operand made by a Transpose is read through a strided view of the Transpose's
  input when its batch dims merge without a copy (an attention's head split and K
  transpose at batch 1); the Transpose's copy is then dropped if nothing else reads it
  (``plan._live``). Same products; the GEMM may order their sums differently for another
  operand layout (float rounding).

``NPURT_MODEL_FUSE=0`` (read when a model is loaded) turns every rewrite off.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np

Node = Tuple[int, Any, Dict[str, Any]]

# The attribute key of a Conv's fused activation: (name, [parameters]).
ACTIVATION = "npurt.activation"


def enabled() -> bool:
    """Whether load-time rewrites run (``NPURT_MODEL_FUSE``, default on)."""
    return os.environ.get("NPURT_MODEL_FUSE", "1") != "0"


def is_fused(attrs: Dict[str, Any]) -> bool:
    """True for a node this module rewrote into something its ONNX op type does not say."""
    return ACTIVATION in attrs


def _uses(nodes: List[Node], outputs: Set[str]) -> Dict[str, int]:
    uses: Dict[str, int] = {name: 1 for name in outputs}
    for _k, n, _a in nodes:
        for i in n.input:
            if i:
                uses[i] = uses.get(i, 0) + 1
    return uses


def _foldable_bn(n: Any, a: Dict[str, Any], consts: Dict[str, np.ndarray], m: int) -> bool:
    if n.op_type != "BatchNormalization" or n.domain not in ("", "ai.onnx") or len(n.input) < 5:
        return False
    if int(a.get("training_mode", 0)) or len([o for o in n.output if o]) != 1 or len(n.output) != 1:
        return False
    ps = [consts.get(i) for i in n.input[1:5]]
    return all(p is not None and p.dtype == np.float32 and p.shape == (m,) for p in ps)


def fold_batch_norms(nodes: List[Node], consts: Dict[str, np.ndarray], outputs: Set[str]) -> Tuple[List[Node], int]:
    """``nodes`` with every foldable Conv + BatchNormalization pair merged into one Conv
    (new constants added to ``consts``); and how many pairs were merged."""
    def fold(n: Any, a: Dict[str, Any], prev: Node) -> Optional[Node]:
        ck, conv, ca = prev
        w = consts.get(conv.input[1]) if len(conv.input) > 1 else None
        b = consts.get(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
        has_b = len(conv.input) > 2 and bool(conv.input[2])
        ok = conv.op_type == "Conv" and w is not None and w.dtype == np.float32 and w.ndim >= 3 and (b is not None or not has_b)
        if not (ok and _foldable_bn(n, a, consts, w.shape[0])):
            return None
        scale, bias, mean, var = (consts[i].astype(np.float64) for i in n.input[1:5])
        kf = scale / np.sqrt(var + float(a.get("epsilon", 1e-5)))
        b0 = b.astype(np.float64) if b is not None else np.zeros(w.shape[0])
        wname, bname = f"{n.output[0]}::bn_folded_w", f"{n.output[0]}::bn_folded_b"
        consts[wname] = (w.astype(np.float64) * kf.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)
        consts[bname] = ((b0 - mean) * kf + bias).astype(np.float32)
        return (ck, _renamed(conv, n.output, [conv.input[0], wname, bname]), ca)

    return _merge_into_producer(nodes, outputs, fold)


def _renamed(conv: Any, outputs: Any, inputs: Optional[List[str]] = None) -> Any:
    """A copy of node ``conv`` writing ``outputs`` (and reading ``inputs`` if given)."""
    new = type(conv)()
    new.CopyFrom(conv)
    if inputs is not None:
        del new.input[:]
        new.input.extend(inputs)
    del new.output[:]
    new.output.extend(outputs)
    return new


def _merge_into_producer(nodes: List[Node], outputs: Set[str], merge: Any) -> Tuple[List[Node], int]:
    """Walks ``nodes``; a node whose first input is read by it alone (and is no graph
    output) may be merged into that input's producer: ``merge(node, attrs, producer)``
    returns the merged producer, or None to keep both. Returns the nodes and the count."""
    uses = _uses(nodes, outputs)
    producer: Dict[str, int] = {}
    out: List[Node] = []
    merged = 0
    for k, n, a in nodes:
        src = producer.get(n.input[0]) if n.input else None
        if src is not None and uses.get(n.input[0], 0) == 1 and n.input[0] not in outputs:
            new = merge(n, a, out[src])
            if new is not None:
                out[src] = new
                producer[n.output[0]] = src
                merged += 1
                continue
        for o in n.output:
            if o:
                producer[o] = len(out)
        out.append((k, n, a))
    return out, merged


def _scalar(consts: Dict[str, np.ndarray], name: str) -> Optional[float]:
    a = consts.get(name)
    return float(a.reshape(())) if a is not None and a.size == 1 and a.dtype == np.float32 else None


def _activation(n: Any, a: Dict[str, Any], consts: Dict[str, np.ndarray], opset: int) -> Optional[Tuple[str, List[float]]]:
    """The fused-activation form of node ``n`` (None: not fusable)."""
    if n.domain not in ("", "ai.onnx") or len([o for o in n.output if o]) != 1:
        return None
    op = n.op_type
    if op == "Relu":
        return ("relu", [])
    if op == "HardSwish":
        return ("hard_swish", [])
    if op == "LeakyRelu":
        return ("leaky_relu", [float(a["alpha"])] if "alpha" in a else [])
    if op == "HardSigmoid":
        if "alpha" in a or "beta" in a:
            return ("hard_sigmoid", [float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))])
        return ("hard_sigmoid", [])
    if op == "Clip":
        if opset < 11:
            lo, hi = a.get("min"), a.get("max")
        else:
            names = (list(n.input[1:]) + ["", ""])[:2]
            if any(m and _scalar(consts, m) is None for m in names):
                return None  # a bound computed at run time
            lo, hi = (_scalar(consts, m) if m else None for m in names)
        return ("clip", [-np.inf if lo is None else float(lo), np.inf if hi is None else float(hi)])
    return None


def fuse_activations(nodes: List[Node], consts: Dict[str, np.ndarray], outputs: Set[str], opset: int) -> Tuple[List[Node], int]:
    """``nodes`` with every activation that alone reads a float32 Conv's output fused into
    the Conv (see the module docstring); and how many were fused."""
    def fuse(n: Any, a: Dict[str, Any], prev: Node) -> Optional[Node]:
        ck, conv, ca = prev
        w = consts.get(conv.input[1]) if len(conv.input) > 1 else None
        act = _activation(n, a, consts, opset)
        if conv.op_type == "Conv" and not is_fused(ca) and w is not None and w.dtype == np.float32 and act is not None:
            return (ck, _renamed(conv, n.output), {**ca, ACTIVATION: act})
        return None

    return _merge_into_producer(nodes, outputs, fuse)
