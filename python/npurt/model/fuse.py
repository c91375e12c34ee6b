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

* **Scale and adds into MatMul.** A MatMul's output read only by a ``Mul`` with a scalar
  float32 constant, and then (or directly) by up to two ``Add`` nodes (each sum read only by
  the next), becomes one MatMul node carrying them (``EPILOGUE`` in its attributes; its
  inputs are then ``A, B, scale, add1, add2``, ``""`` for an absent one), placed where the
  last of them was. When a plan is built (``ops/linalg.py``) it is one ``npurt.gemm``:
  ``alpha`` = the scale, an add that is a length-N vector becomes the bias, one of the
  output's own shape becomes C (``beta`` = 1); any other case runs the nodes one by one.
  Same terms; the sums are taken in another order (float rounding).
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
# The attribute key of a MatMul carrying a scale and adds (``fuse_matmul_epilogues``).
EPILOGUE = "npurt.epilogue"


def enabled() -> bool:
    """Whether load-time rewrites run (``NPURT_MODEL_FUSE``, default on)."""
    return os.environ.get("NPURT_MODEL_FUSE", "1") != "0"


def is_fused(attrs: Dict[str, Any]) -> bool:
    """True for a node this module rewrote into something its ONNX op type does not say."""
    return ACTIVATION in attrs or EPILOGUE in attrs


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


def _plain(n: Any, op_type: str, n_in: int) -> bool:
    return n.op_type == op_type and n.domain in ("", "ai.onnx") and len(n.input) == n_in and len(n.output) == 1 and bool(n.output[0])


def _epilogue_place(op_type: str, extra: List[str], other: Optional[np.ndarray]) -> Optional[int]:
    """Where a Mul or Add's other operand goes in a fused MatMul's ``[scale, add1, add2]``
    (None: it cannot join: a Mul only first and by a scalar float32 constant)."""
    if op_type == "Mul":
        scalar = other is not None and other.size == 1 and other.dtype == np.float32
        return 0 if scalar and not any(extra) else None
    return 1 if not extra[1] else 2 if not extra[2] else None


def fuse_matmul_epilogues(nodes: List[Node], consts: Dict[str, np.ndarray], outputs: Set[str]) -> Tuple[List[Node], int]:
    """``nodes`` with each MatMul's following scalar Mul and Adds merged into it (see the
    module docstring); and how many nodes were merged."""
    uses = _uses(nodes, outputs)
    out: List[Optional[Node]] = []
    chain: Dict[str, Tuple[int, List[str]]] = {}  # a MatMul chain's last value -> (index in out, [scale, add1, add2])
    merged = 0
    for k, n, a in nodes:
        if _plain(n, "MatMul", 2) and not all(i in consts for i in n.input):
            chain[n.output[0]] = (len(out), ["", "", ""])
        elif (_plain(n, "Mul", 2) or _plain(n, "Add", 2)) and n.input[0] != n.input[1]:
            hit = [i for i in n.input if i in chain and uses.get(i, 0) == 1 and i not in outputs]
            if hit:
                src, extra = chain.pop(hit[0])
                other = n.input[1] if n.input[0] == hit[0] else n.input[0]
                at = _epilogue_place(n.op_type, extra, consts.get(other))
                if at is not None:
                    extra = extra[:at] + [other] + extra[at + 1 :]
                    mk, mm, ma = out[src]  # type: ignore[misc]
                    out[src] = None
                    chain[n.output[0]] = (len(out), extra)
                    out.append((mk, _renamed(mm, n.output, list(mm.input[:2]) + extra), {**ma, EPILOGUE: True}))
                    merged += 1
                    continue
        out.append((k, n, a))
    return [x for x in out if x is not None], merged
