"""Load-time rewrites of a graph's remaining nodes that save kernels at run time.

* **BatchNormalization into Conv.** An inference BatchNormalization whose input is the
  only use of a Conv's output, with every parameter and the Conv's weights (and bias)
  constant, becomes part of the Conv: ``w' = w · k`` per output channel and
  ``b' = (b - mean) · k + bias`` with ``k = scale / sqrt(var + eps)``, computed once in
  float64 and rounded to float32 (onnxruntime's and TensorRT's folding). Results differ
  from the unfolded pair by float rounding only.
"""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

import numpy as np

Node = Tuple[int, Any, Dict[str, Any]]


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
    uses = _uses(nodes, outputs)
    producer: Dict[str, int] = {}
    out: List[Node] = []
    merged = 0
    for k, n, a in nodes:
        src = producer.get(n.input[0]) if n.input else None
        if src is not None and uses.get(n.input[0], 0) == 1:
            ck, conv, ca = out[src]
            w = consts.get(conv.input[1]) if len(conv.input) > 1 else None
            b = consts.get(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
            has_b = len(conv.input) > 2 and bool(conv.input[2])
            ok = conv.op_type == "Conv" and w is not None and w.dtype == np.float32 and w.ndim >= 3 and (b is not None or not has_b)
            if ok and _foldable_bn(n, a, consts, w.shape[0]):
                scale, bias, mean, var = (consts[i].astype(np.float64) for i in n.input[1:5])
                kf = scale / np.sqrt(var + float(a.get("epsilon", 1e-5)))
                b0 = b.astype(np.float64) if b is not None else np.zeros(w.shape[0])
                wname, bname = f"{n.output[0]}::bn_folded_w", f"{n.output[0]}::bn_folded_b"
                consts[wname] = (w.astype(np.float64) * kf.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)
                consts[bname] = ((b0 - mean) * kf + bias).astype(np.float32)
                new = type(conv)()
                new.CopyFrom(conv)
                del new.input[:]
                new.input.extend([conv.input[0], wname, bname])
                del new.output[:]
                new.output.extend(n.output)
                out[src] = (ck, new, ca)
                producer[n.output[0]] = src
                merged += 1
                continue
        for o in n.output:
            if o:
                producer[o] = len(out)
        out.append((k, n, a))
    return out, merged
