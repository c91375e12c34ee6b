"""A MatMul's scale and adds in one gemm (``npurt.model.fuse.fuse_matmul_epilogues``) and
graph outputs that are reshapes of a kernel's result written in place (``plan._root_at``).

Each case checks the kernels a run queues (``Model.plan(x).step_list``) and the result
against numpy in float64, and against the unfused model (``NPURT_MODEL_FUSE=0``).
Tolerances: the fused gemm adds the same terms in another order, so results differ from
the unfused nodes by float32 rounding of sums of at most 32 products (``rtol=1e-5,
atol=1e-5`` against float64, ``rtol=1e-6, atol=1e-6`` against the unfused model)."""

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

N = helper.make_node
RNG = np.random.default_rng(11)
W = (RNG.standard_normal((32, 24)) * 0.3).astype(np.float32)
B = (RNG.standard_normal(24) * 0.3).astype(np.float32)


def _model(nodes, inits, x_shape, outs=("y",), elem=TensorProto.FLOAT, extra_inputs=()):
    ins = [helper.make_tensor_value_info("x", elem, list(x_shape))] + [helper.make_tensor_value_info(n, elem, list(s)) for n, s in extra_inputs]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info(o, elem, None) for o in outs],
                          initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _both(proto, monkeypatch, *feeds):
    """(fused model, its ops for ``feeds``, its outputs, the unfused model's outputs)."""
    m = npurt.Model.load(proto)
    ops = [s.op for s in m.plan(*feeds).step_list]
    got = [o.to_host() for o in m.run(list(feeds))]
    with monkeypatch.context() as mp:
        mp.setenv("NPURT_MODEL_FUSE", "0")
        m0 = npurt.Model.load(proto)
        ref0 = [o.to_host() for o in m0.run(list(feeds))]
    return m, ops, got, ref0


def test_bias_and_residual_join_the_matmul(monkeypatch):
    # y = (x @ W + B) + r: bias and C of one gemm; operands of each Add in either order.
    nodes = [N("MatMul", ["x", "W"], ["h"]), N("Add", ["B", "h"], ["hb"]), N("Add", ["hb", "r"], ["y"])]
    x = RNG.standard_normal((2, 5, 32)).astype(np.float32)
    r = RNG.standard_normal((2, 5, 24)).astype(np.float32)
    m, ops, (y,), (y0,) = _both(_model(nodes, {"W": W, "B": B}, x.shape, extra_inputs=[("r", r.shape)]), monkeypatch, x, r)
    assert m._graph.fused_epilogues == 2 and ops == ["MatMul+bias+add"], ops
    np.testing.assert_allclose(y, x.astype(np.float64) @ W + B + r, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, y0, rtol=1e-6, atol=1e-6)


def test_scale_of_a_batched_product(monkeypatch):
    # Attention scores: Mul by a scalar constant after a batched MatMul is the gemm's alpha.
    nodes = [N("Transpose", ["x"], ["xt"], perm=[0, 2, 1]), N("MatMul", ["x", "xt"], ["s"]), N("Mul", ["s", "scale"], ["y"])]
    x = RNG.standard_normal((3, 6, 8)).astype(np.float32)
    m, ops, (y,), (y0,) = _both(_model(nodes, {"scale": np.array(0.125, np.float32)}, x.shape), monkeypatch, x)
    assert m._graph.fused_epilogues == 1 and ops == ["MatMul+scale"], ops  # the transpose is a view
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, 0.125 * (x64 @ x64.transpose(0, 2, 1)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, y0, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["broadcast_rows", "wider_rank", "int32", "two_biases", "vector_scale"])
def test_terms_a_gemm_cannot_take_run_as_nodes(case, monkeypatch):
    """Fused at load, but the plan runs the nodes one by one: numpy's broadcasting
    (including an add that raises the output's rank) and dtypes stay ONNX's."""
    x = RNG.standard_normal((4, 32)).astype(np.float32)
    inits = {"W": W}
    nodes = [N("MatMul", ["x", "W"], ["h"]), N("Add", ["h", "t"], ["y"])]
    if case == "broadcast_rows":
        inits["t"] = RNG.standard_normal((4, 1)).astype(np.float32)
    elif case == "wider_rank":
        inits["t"] = RNG.standard_normal((2, 1, 24)).astype(np.float32)
    elif case == "two_biases":
        inits["t"], inits["u"] = B, B[::-1].copy()
        nodes = [N("MatMul", ["x", "W"], ["h"]), N("Add", ["h", "t"], ["h2"]), N("Add", ["h2", "u"], ["y"])]
    elif case == "vector_scale":
        inits["t"] = np.linspace(0.5, 2, 24).astype(np.float32)
        nodes = [N("MatMul", ["x", "W"], ["h"]), N("Mul", ["h", "t"], ["y"])]
    elem, xs = TensorProto.FLOAT, x
    if case == "int32":
        inits = {"W": (W * 10).astype(np.int32), "t": (B * 10).astype(np.int32)}
        elem, xs = TensorProto.INT32, (x * 10).astype(np.int32)
    m, ops, (y,), (y0,) = _both(_model(nodes, inits, xs.shape, elem=elem), monkeypatch, xs)
    ref = xs.astype(np.float64) @ inits["W"]
    if case == "vector_scale":
        ref = ref * inits["t"]
        assert m._graph.fused_epilogues == 0  # a Mul joins only with a scalar
    else:
        for k in ("t", "u"):
            ref = ref + inits[k] if k in inits else ref
        assert m._graph.fused_epilogues == (2 if case == "two_biases" else 1)
        assert len(ops) >= 2, ops
    assert y.shape == ref.shape and y.dtype == y0.dtype
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(y, y0)


def test_not_fused_when_a_partial_result_is_read_elsewhere(monkeypatch):
    # h is also a graph output; hb feeds two nodes: neither may disappear into the gemm.
    nodes = [N("MatMul", ["x", "W"], ["h"]), N("Add", ["h", "B"], ["y"])]
    x = RNG.standard_normal((3, 32)).astype(np.float32)
    m, ops, (y, h), _ = _both(_model(nodes, {"W": W, "B": B}, x.shape, outs=("y", "h")), monkeypatch, x)
    assert m._graph.fused_epilogues == 0 and ops.count("Add") == 1
    np.testing.assert_allclose(h, x.astype(np.float64) @ W, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, h + B, rtol=1e-6, atol=1e-6)
    nodes = [N("MatMul", ["x", "W"], ["h"]), N("Add", ["h", "B"], ["hb"]), N("Add", ["hb", "hb"], ["y"])]
    m, ops, (y,), (y0,) = _both(_model(nodes, {"W": W, "B": B}, x.shape), monkeypatch, x)
    assert m._graph.fused_epilogues == 1 and ops == ["MatMul+bias", "Add"], ops
    np.testing.assert_allclose(y, 2 * (x.astype(np.float64) @ W + B), rtol=1e-5, atol=1e-5)


def test_add_operand_computed_after_the_matmul(monkeypatch):
    # The residual is made by a node between the MatMul and its Add: the fused node runs
    # where the Add was, after its operand exists.
    nodes = [N("MatMul", ["x", "W"], ["h"]), N("Relu", ["x2"], ["r"]), N("Add", ["h", "r"], ["y"])]
    x = RNG.standard_normal((5, 32)).astype(np.float32)
    x2 = RNG.standard_normal((5, 24)).astype(np.float32)
    m, ops, (y,), _ = _both(_model(nodes, {"W": W}, x.shape, extra_inputs=[("x2", x2.shape)]), monkeypatch, x, x2)
    assert ops == ["Relu", "MatMul+add"], ops
    np.testing.assert_allclose(y, x.astype(np.float64) @ W + np.maximum(x2, 0), rtol=1e-5, atol=1e-5)


def test_transformer_block_fuses_and_matches(monkeypatch):
    proto, ref = builders.transformer_block(d=32, heads=4, ff=64)
    x = RNG.standard_normal((2, 7, 32)).astype(np.float32)
    m, ops, (y,), (y0,) = _both(proto, monkeypatch, x)
    # Q·K scale, FFN bias, FFN second bias + residual, attention output residual.
    assert m._graph.fused_epilogues == 5
    fused = ["MatMul+scale", "MatMul+add", "MatMul+bias", "MatMul+bias+add"]
    assert ops.count("Add") == ops.count("Mul") == 0 and [o for o in ops if "+" in o] == fused, ops
    np.testing.assert_allclose(y, ref(x.astype(np.float64)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y, y0, rtol=1e-5, atol=1e-5)
    for _ in range(3):  # replayed instances
        np.testing.assert_array_equal(m(x).to_host(), y)


def test_output_reshaped_from_a_kernel_is_written_in_place(monkeypatch):
    # LayerNormalization runs on (rows, d) and its result is viewed as (B, S, d): the
    # output is that kernel's own result, no copy after it.
    g = np.linspace(0.5, 1.5, 16).astype(np.float32)
    nodes = [N("LayerNormalization", ["x", "g"], ["y"], axis=-1)]
    x = RNG.standard_normal((2, 3, 16)).astype(np.float32)
    m, ops, (y,), (y0,) = _both(_model(nodes, {"g": g}, x.shape), monkeypatch, x)
    assert ops == ["LayerNormalization"], ops
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5) * g, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y, y0)
    # Two outputs of one result: one is written in place, the other is a copy of it.
    nodes += [N("Reshape", ["y", "shape"], ["z"])]
    proto = _model(nodes, {"g": g, "shape": np.array([6, 16], np.int64)}, x.shape, outs=("y", "z"))
    m = npurt.Model.load(proto)
    assert [s.op for s in m.plan(x).step_list] == ["LayerNormalization", "output"]
    y1, z1 = m.run([x])
    np.testing.assert_array_equal(y1.to_host(), y)
    np.testing.assert_array_equal(z1.to_host(), y.reshape(6, 16))
    out = npurt.empty((2, 3, 16), "float32")
    m.run_async([npurt.to_device(x)], outputs=[out, None])
    npurt.synchronize()
    np.testing.assert_array_equal(out.to_host(), y)
