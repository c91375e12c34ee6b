"""ONNX models built with ``onnx.helper`` for the model tests and examples, with numpy
references: an MLP, a transformer encoder block (dynamic batch and sequence, shapes through
Shape / Gather / Concat chains) and a small conv net."""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def mlp(d_in=16, d_hidden=32, d_out=4, seed=0):
    rng = np.random.default_rng(seed)
    w = {"W1": rng.standard_normal((d_in, d_hidden)).astype(np.float32) * 0.3, "B1": rng.standard_normal(d_hidden).astype(np.float32),
         "W2": rng.standard_normal((d_hidden, d_out)).astype(np.float32) * 0.3, "B2": rng.standard_normal(d_out).astype(np.float32)}
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"]),
        helper.make_node("Add", ["h", "B1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("Gemm", ["h2", "W2", "B2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", F, ["N", d_in])], [helper.make_tensor_value_info("y", F, ["N", d_out])],
                          initializer=[_init(k, v) for k, v in w.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    def ref(x):
        h = np.maximum(x @ w["W1"] + w["B1"], 0)
        z = h @ w["W2"] + w["B2"]
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return model, ref


def _layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _gelu(x):
    from math import erf

    return x * 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)).astype(np.float32))


def transformer_block(d=32, heads=4, ff=64, seed=0):
    """A post-norm encoder block: multi-head self-attention + FFN (Gelu), residuals and
    LayerNorm; input (B, S, d) with symbolic B and S."""
    rng = np.random.default_rng(seed)
    dh = d // heads
    w = {n: (rng.standard_normal(s) * 0.2).astype(np.float32) for n, s in
         [("Wq", (d, d)), ("Wk", (d, d)), ("Wv", (d, d)), ("Wo", (d, d)), ("W1", (d, ff)), ("W2", (ff, d)), ("b1", (ff,)), ("b2", (d,))]}
    w.update({"g1": np.ones(d, np.float32), "be1": np.zeros(d, np.float32), "g2": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32),
              "be2": (0.1 * rng.standard_normal(d)).astype(np.float32)})
    c = {"heads": np.array([heads], np.int64), "dh": np.array([dh], np.int64), "dm": np.array([d], np.int64),
         "i0": np.array([0], np.int64), "i1": np.array([1], np.int64), "scale": np.array(1.0 / math.sqrt(dh), np.float32)}
    N = helper.make_node
    nodes = [
        N("Shape", ["x"], ["xs"]),
        N("Gather", ["xs", "i0"], ["B"], axis=0),
        N("Gather", ["xs", "i1"], ["S"], axis=0),
        N("Concat", ["B", "S", "heads", "dh"], ["split_shape"], axis=0),
        N("Concat", ["B", "S", "dm"], ["merge_shape"], axis=0),
    ]
    for p in "qkv":
        nodes += [N("MatMul", ["x", f"W{p}"], [f"{p}0"]), N("Reshape", [f"{p}0", "split_shape"], [f"{p}1"]),
                  N("Transpose", [f"{p}1"], [f"{p}"], perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
    nodes += [
        N("MatMul", ["q", "k"], ["s0"]), N("Mul", ["s0", "scale"], ["s1"]), N("Softmax", ["s1"], ["p"], axis=-1),
        N("MatMul", ["p", "v"], ["a0"]), N("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]), N("Reshape", ["a1", "merge_shape"], ["a2"]),
        N("MatMul", ["a2", "Wo"], ["a3"]), N("Add", ["x", "a3"], ["r1"]),
        N("LayerNormalization", ["r1", "g1", "be1"], ["n1"], axis=-1, epsilon=1e-5),
        N("MatMul", ["n1", "W1"], ["f0"]), N("Add", ["f0", "b1"], ["f1"]), N("Gelu", ["f1"], ["f2"]),
        N("MatMul", ["f2", "W2"], ["f3"]), N("Add", ["f3", "b2"], ["f4"]), N("Add", ["n1", "f4"], ["r2"]),
        N("LayerNormalization", ["r2", "g2", "be2"], ["y"], axis=-1, epsilon=1e-5),
    ]
    g = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("x", F, ["B", "S", d])], [helper.make_tensor_value_info("y", F, ["B", "S", d])],
                          initializer=[_init(k, v) for k, v in {**w, **c}.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])

    def ref(x):
        b, s, _ = x.shape
        q, k, v = (np.transpose((x @ w[f"W{p}"]).reshape(b, s, heads, dh), (0, 2, 1, 3)) for p in "qkv")
        sc = q @ np.swapaxes(k, -1, -2) / math.sqrt(dh)
        e = np.exp(sc - sc.max(-1, keepdims=True))
        a = (e / e.sum(-1, keepdims=True)) @ v
        a = np.transpose(a, (0, 2, 1, 3)).reshape(b, s, d) @ w["Wo"]
        n1 = _layer_norm(x + a, w["g1"], w["be1"])
        f = _gelu(n1 @ w["W1"] + w["b1"]) @ w["W2"] + w["b2"]
        return _layer_norm(n1 + f, w["g2"], w["be2"])

    return model, ref


def conv_net(c_in=3, classes=10, width=8, size=16, seed=0):
    """Conv-BN-Relu-MaxPool, a depthwise conv, HardSwish, global average pool, Flatten,
    Gemm: input (N, c_in, size, size), ``width`` channels."""
    rng = np.random.default_rng(seed)
    c = width
    w = {"cw1": (rng.standard_normal((c, c_in, 3, 3)) * 0.3).astype(np.float32), "cb1": (0.1 * rng.standard_normal(c)).astype(np.float32),
         "bn_s": (1 + 0.1 * rng.standard_normal(c)).astype(np.float32), "bn_b": (0.1 * rng.standard_normal(c)).astype(np.float32),
         "bn_m": (0.1 * rng.standard_normal(c)).astype(np.float32), "bn_v": (1 + 0.1 * rng.random(c)).astype(np.float32),
         "dw": (rng.standard_normal((c, 1, 3, 3)) * 0.3).astype(np.float32), "fc": (rng.standard_normal((classes, c)) * 0.3).astype(np.float32),
         "fcb": (0.1 * rng.standard_normal(classes)).astype(np.float32)}
    N = helper.make_node
    nodes = [
        N("Conv", ["x", "cw1", "cb1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["b1"], epsilon=1e-5),
        N("Relu", ["b1"], ["r1"]),
        N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        N("Conv", ["p1", "dw"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=c),
        N("HardSwish", ["c2"], ["h2"]),
        N("GlobalAveragePool", ["h2"], ["g"]),
        N("Flatten", ["g"], ["f"]),
        N("Gemm", ["f", "fc", "fcb"], ["y"], transB=1),
    ]
    g = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", F, ["N", c_in, size, size])], [helper.make_tensor_value_info("y", F, ["N", classes])],
                          initializer=[_init(k, v) for k, v in w.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    def conv3x3(x, k, b=None, groups=1):  # stride 1, pads 1
        n, ci, h, wd = x.shape
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        co, cpg = k.shape[0], ci // groups
        out = np.zeros((n, co, h, wd), np.float64)
        for o in range(co):
            g0 = (o // (co // groups)) * cpg
            for dy in range(3):
                for dx in range(3):
                    out[:, o] += np.einsum("nchw,c->nhw", xp[:, g0:g0 + cpg, dy:dy + h, dx:dx + wd], k[o, :, dy, dx])
        return out + (0 if b is None else b[None, :, None, None])

    def ref(x):
        y = conv3x3(x, w["cw1"], w["cb1"])
        k = w["bn_s"] / np.sqrt(w["bn_v"] + 1e-5)
        y = np.maximum(y * k[None, :, None, None] + (w["bn_b"] - w["bn_m"] * k)[None, :, None, None], 0)
        n, ch, h, wd = y.shape
        y = y.reshape(n, ch, h // 2, 2, wd // 2, 2).max(axis=(3, 5))
        y = conv3x3(y, w["dw"], groups=c)
        y = y * np.clip(y / 6 + 0.5, 0, 1)
        return (y.mean(axis=(2, 3)) @ w["fc"].T + w["fcb"]).astype(np.float32)

    return model, ref
