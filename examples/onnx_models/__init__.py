"""A small ONNX model for the examples, built with ``onnx.helper`` (no download): a
transformer-style encoder layer (self-attention with 4 heads, a GELU feed-forward block,
residuals and LayerNorm) on inputs of shape (batch, 16, 64), dynamic batch."""

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def encoder(path, d=64, heads=4, ff=128, seq=16, seed=0):
    """Writes the model to ``path`` and returns the input shape of batch 1."""
    rng = np.random.default_rng(seed)
    dh = d // heads
    arrays = {n: (rng.standard_normal(s) * 0.1).astype(np.float32) for n, s in
              [("Wq", (d, d)), ("Wk", (d, d)), ("Wv", (d, d)), ("Wo", (d, d)), ("W1", (d, ff)), ("W2", (ff, d)), ("b1", (ff,)), ("b2", (d,))]}
    arrays.update(g=np.ones(d, np.float32), b=np.zeros(d, np.float32), scale=np.array(1 / math.sqrt(dh), np.float32),
                  split=np.array([-1, seq, heads, dh], np.int64), merge=np.array([-1, seq, d], np.int64))
    N = helper.make_node
    nodes = []
    for p in "qkv":
        nodes += [N("MatMul", ["x", f"W{p}"], [f"{p}0"]), N("Reshape", [f"{p}0", "split"], [f"{p}1"]),
                  N("Transpose", [f"{p}1"], [p], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [N("MatMul", ["q", "k"], ["s0"]), N("Mul", ["s0", "scale"], ["s1"]), N("Softmax", ["s1"], ["pr"], axis=-1),
              N("MatMul", ["pr", "v"], ["a0"]), N("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]), N("Reshape", ["a1", "merge"], ["a2"]),
              N("MatMul", ["a2", "Wo"], ["a3"]), N("Add", ["x", "a3"], ["r1"]), N("LayerNormalization", ["r1", "g", "b"], ["n1"]),
              N("MatMul", ["n1", "W1"], ["f0"]), N("Add", ["f0", "b1"], ["f1"]), N("Gelu", ["f1"], ["f2"]),
              N("MatMul", ["f2", "W2"], ["f3"]), N("Add", ["f3", "b2"], ["f4"]), N("Add", ["n1", "f4"], ["r2"]),
              N("LayerNormalization", ["r2", "g", "b"], ["y"])]
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", seq, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, d])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in arrays.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return (1, seq, d)
