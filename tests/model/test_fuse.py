"""Load-time fusion (``npurt.model.fuse``): activations after a Conv become the Conv's
epilogue (``npurt.nn.conv(activation=...)``), only when the Conv's output has no other
reader; results match onnxruntime / onnx.reference and the unfused model
(``NPURT_MODEL_FUSE=0``) to float32 rounding, and a run queues fewer kernels.

Tolerances: float32 sums of at most 27 products against onnxruntime's (different order):
``rtol=1e-5, atol=1e-5``; fused against unfused npurt: the same convolution kernel, so
the activation's own rounding only (``rtol=1e-6, atol=1e-6``; BatchNormalization folding
rounds once more: ``rtol=2e-5, atol=2e-5``)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import builders  # noqa: E402
import npurt  # noqa: E402

F = TensorProto.FLOAT


def _oracle(proto, x):
    try:
        import onnxruntime as ort

        s = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        return s.run(None, {"x": x})
    except ImportError:
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(proto).run(None, {"x": x})


def _conv_then(act_nodes, inits=(), opset=17, c_in=3, extra_out=None):
    """x [1, c_in, 9, 11] -> Conv 3x3 (8 channels, pads 1) -> the given nodes (reading "c")."""
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((8, c_in, 3, 3)) * 0.5).astype(np.float32)
    b = (rng.standard_normal(8) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])] + act_nodes
    outs = [helper.make_tensor_value_info("y", F, None)] + ([helper.make_tensor_value_info(extra_out, F, None)] if extra_out else [])
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")] + list(inits)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [1, c_in, 9, 11])], outs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _c(name, v):
    return numpy_helper.from_array(np.array(v, np.float32), name)


N = helper.make_node
FUSABLE = {
    "relu": ([N("Relu", ["c"], ["y"])], [], 17),
    "leaky_relu": ([N("LeakyRelu", ["c"], ["y"], alpha=0.3)], [], 17),
    "leaky_relu_default": ([N("LeakyRelu", ["c"], ["y"])], [], 17),
    "relu6": ([N("Clip", ["c", "lo", "hi"], ["y"])], [_c("lo", 0.0), _c("hi", 0.6)], 17),
    "clip_max_only": ([N("Clip", ["c", "", "hi"], ["y"])], [_c("hi", 0.2)], 17),
    "clip_opset6": ([N("Clip", ["c"], ["y"], min=-0.2, max=0.4)], [], 6),
    "hard_sigmoid": ([N("HardSigmoid", ["c"], ["y"], alpha=0.3, beta=0.4)], [], 17),
    "hard_swish": ([N("HardSwish", ["c"], ["y"])], [], 17),
}


@pytest.mark.parametrize("name", sorted(FUSABLE))
def test_activation_is_fused_into_the_conv(name, monkeypatch):
    nodes, inits, opset = FUSABLE[name]
    proto = _conv_then(nodes, inits, opset)
    x = np.random.default_rng(2).standard_normal((1, 3, 9, 11)).astype(np.float32) * 2
    m = npurt.Model.load(proto)
    assert m._graph.fused_activations == 1
    plan = m.plan(x)
    assert [s.op for s in plan.step_list] == [f"Conv+{FUSABLE_NAME[name]}"]
    y = m(x).to_host()
    np.testing.assert_allclose(y, _oracle(proto, x)[0], rtol=1e-5, atol=1e-5)
    monkeypatch.setenv("NPURT_MODEL_FUSE", "0")
    m0 = npurt.Model.load(proto)
    assert m0._graph.fused_activations == 0 and len(m0.plan(x).step_list) > 1
    np.testing.assert_allclose(y, m0(x).to_host(), rtol=1e-6, atol=1e-6)


FUSABLE_NAME = {"relu": "relu", "leaky_relu": "leaky_relu", "leaky_relu_default": "leaky_relu", "relu6": "clip", "clip_max_only": "clip",
                "clip_opset6": "clip", "hard_sigmoid": "hard_sigmoid", "hard_swish": "hard_swish"}


def test_not_fused_when_the_conv_output_is_read_elsewhere():
    x = np.random.default_rng(3).standard_normal((1, 3, 9, 11)).astype(np.float32)
    # Two readers of the conv's output.
    two = _conv_then([N("Relu", ["c"], ["r"]), N("Add", ["r", "c"], ["y"])])
    # The conv's output is a graph output.
    exposed = _conv_then([N("Relu", ["c"], ["y"])], extra_out="c")
    # A Clip bound computed at run time (from x).
    rt = _conv_then([N("ReduceMax", ["x"], ["hi"], keepdims=0), N("Clip", ["c", "", "hi"], ["y"])])
    for proto in (two, exposed, rt):
        m = npurt.Model.load(proto)
        assert m._graph.fused_activations == 0
        for got, want in zip(m.run([x]), _oracle(proto, x), strict=True):
            np.testing.assert_allclose(got.to_host(), want, rtol=1e-5, atol=1e-5)


def test_conv_net_fuses_bn_and_both_activations(monkeypatch):
    proto, ref = builders.conv_net(c_in=3, classes=10, width=32, size=32)
    x = np.random.default_rng(4).standard_normal((2, 3, 32, 32)).astype(np.float32)
    m = npurt.Model.load(proto)
    assert (m._graph.fused, m._graph.fused_activations) == (1, 2)
    ops = [s.op for s in m.plan(x).step_list]
    assert ops[:3] == ["Conv+relu", "MaxPool", "Conv+hard_swish"] and "Relu" not in ops and "HardSwish" not in ops
    y = m(x).to_host()
    np.testing.assert_allclose(y, ref(x), rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(y, _oracle(proto, x)[0], rtol=1e-4, atol=1e-5)
    monkeypatch.setenv("NPURT_MODEL_FUSE", "0")
    m0 = npurt.Model.load(proto)
    assert (m0._graph.fused, m0._graph.fused_activations) == (0, 0)
    assert len(m0.plan(x).step_list) == len(ops) + 3  # BatchNormalization, Relu, HardSwish
    np.testing.assert_allclose(y, m0(x).to_host(), rtol=2e-5, atol=2e-5)


def test_nn_conv_activation_argument():
    rng = np.random.default_rng(5)
    x = npurt.to_device(rng.standard_normal((1, 3, 6, 7)).astype(np.float32))
    w = npurt.to_device(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    plain = npurt.nn.conv(x, w, pads=[1, 1, 1, 1]).to_host()
    got = npurt.nn.conv(x, w, pads=[1, 1, 1, 1], activation="clip", activation_params=[-0.5, 0.5]).to_host()
    np.testing.assert_array_equal(got, np.clip(plain, -0.5, 0.5))
    got = npurt.nn.conv(x, w, pads=[1, 1, 1, 1], activation="relu").to_host()
    np.testing.assert_array_equal(got, np.maximum(plain, 0))
    with pytest.raises(npurt.InvalidValueError, match="unknown activation"):
        npurt.nn.conv(x, w, activation="swish")
    with pytest.raises(npurt.InvalidValueError, match="at most 1 parameters"):
        npurt.nn.conv(x, w, activation="leaky_relu", activation_params=[0.1, 0.2])
    with pytest.raises(npurt.InvalidTypeError):
        npurt.nn.conv(x, w, activation=3)


def test_replayed_direct_conv_reads_weights_given_as_inputs():
    # A launch is captured once and replayed with new inputs copied in: the direct conv
    # (depthwise and few-tap) must read weights that are graph inputs at run time.
    for shape_w, group in (((6, 1, 3, 3), 6), ((4, 6, 1, 3), 1)):
        g = helper.make_graph([N("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=group)], "g",
                              [helper.make_tensor_value_info("x", F, [1, 6, 7, 8]), helper.make_tensor_value_info("w", F, list(shape_w))],
                              [helper.make_tensor_value_info("y", F, None)])
        proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m = npurt.Model.load(proto)
        rng = np.random.default_rng(6)
        from onnx.reference import ReferenceEvaluator

        ref = ReferenceEvaluator(proto)
        for _ in range(3):
            x = rng.standard_normal((1, 6, 7, 8)).astype(np.float32)
            w = rng.standard_normal(shape_w).astype(np.float32)
            (y,) = m.run([x, w])
            np.testing.assert_allclose(y.to_host(), ref.run(None, {"x": x, "w": w})[0], rtol=1e-5, atol=1e-5)


def _attention(batch, k_also_output=False):
    """x [batch, 8, 2, 4] (S=8, 2 heads of 4) as q = k = v: Transpose -> MatMul(q, k^T) ->
    Softmax -> MatMul(p, v) -> Transpose back (numpy reference beside)."""
    nodes = [
        N("Transpose", ["x"], ["q"], perm=[0, 2, 1, 3]),
        N("Transpose", ["x"], ["kt"], perm=[0, 2, 3, 1]),
        N("MatMul", ["q", "kt"], ["s"]),
        N("Softmax", ["s"], ["p"], axis=-1),
        N("MatMul", ["p", "q"], ["a"]),
        N("Transpose", ["a"], ["y"], perm=[0, 2, 1, 3]),
    ]
    outs = [helper.make_tensor_value_info("y", F, None)] + ([helper.make_tensor_value_info("kt", F, None)] if k_also_output else [])
    g = helper.make_graph(nodes, "att", [helper.make_tensor_value_info("x", F, [batch, 8, 2, 4])], outs)

    def ref(x):
        q = x.transpose(0, 2, 1, 3).astype(np.float64)
        s = q @ x.transpose(0, 2, 3, 1)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        return (p @ q).transpose(0, 2, 1, 3)

    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), ref


def test_matmul_reads_transposed_operands_through_views(monkeypatch):
    x = np.random.default_rng(5).standard_normal((1, 8, 2, 4)).astype(np.float32)
    proto, ref = _attention(1)
    m = npurt.Model.load(proto)
    ops = [s.op for s in m.plan(x).step_list]
    # Both head-split Transposes are read through views: only the final one copies.
    assert ops.count("Transpose") == 1 and ops.count("MatMul") == 2, ops
    y = m(x).to_host()
    np.testing.assert_allclose(y, ref(x), rtol=1e-5, atol=1e-6)
    for _ in range(3):  # replayed instances read the same views
        np.testing.assert_array_equal(m(x).to_host(), y)
    monkeypatch.setenv("NPURT_MODEL_FUSE", "0")
    m0 = npurt.Model.load(proto)
    assert [s.op for s in m0.plan(x).step_list].count("Transpose") == 3
    # Same products; the GEMM may sum them in another order for another operand layout.
    np.testing.assert_allclose(m0(x).to_host(), y, rtol=1e-6, atol=1e-7)


def test_transposes_kept_where_a_view_cannot_serve():
    rng = np.random.default_rng(6)
    # Batch 2: (2, 2 heads) do not merge into one batch dim of a strided view.
    x2 = rng.standard_normal((2, 8, 2, 4)).astype(np.float32)
    proto, ref = _attention(2)
    m = npurt.Model.load(proto)
    assert [s.op for s in m.plan(x2).step_list].count("Transpose") == 3
    np.testing.assert_allclose(m(x2).to_host(), ref(x2), rtol=1e-5, atol=1e-6)
    # The K transpose is also a graph output: its copy stays, the MatMul may still view.
    x1 = rng.standard_normal((1, 8, 2, 4)).astype(np.float32)
    proto, ref = _attention(1, k_also_output=True)
    m = npurt.Model.load(proto)
    y, kt = m.run([x1])
    np.testing.assert_allclose(y.to_host(), ref(x1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(kt.to_host(), x1.transpose(0, 2, 3, 1))
