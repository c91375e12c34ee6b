"""npurt.Model: loading, running (numpy and device inputs, run / run_async / __call__),
plans per input shape, the memory plan, concurrency (one model, many threads and streams)
and the typed errors of bad input. Models from ``builders`` (onnx.helper) against numpy
references, and onnxruntime as a second oracle when it is installed."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import builders  # noqa: E402
import npurt  # noqa: E402


def _ort(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def test_mlp_matches_numpy_and_metadata():
    proto, ref = builders.mlp()
    m = npurt.Model.load(proto.SerializeToString())
    assert [(i.name, i.shape, i.dtype) for i in m.inputs] == [("x", ("N", 16), "float32")]
    assert [(o.name, o.shape, o.dtype) for o in m.outputs] == [("y", ("N", 4), "float32")]
    x = np.random.default_rng(1).standard_normal((7, 16)).astype(np.float32)
    y = m(x)
    assert isinstance(y, npurt.DeviceArray) and y.shape == (7, 4)
    np.testing.assert_allclose(y.to_host(), ref(x), rtol=1e-5, atol=1e-6)


def test_transformer_block_dynamic_shapes_and_oracles():
    proto, ref = builders.transformer_block()
    m = npurt.Model.load(proto)
    assert m.inputs[0].shape == ("B", "S", 32)
    rng = np.random.default_rng(2)
    for b, s in [(2, 5), (1, 9), (2, 5)]:
        x = rng.standard_normal((b, s, 32)).astype(np.float32)
        (y,) = m.run({"x": x})
        np.testing.assert_allclose(y.to_host(), ref(x), rtol=2e-4, atol=2e-5)
    assert len(m._plans) == 2  # one plan per input shape, reused
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return
    x = rng.standard_normal((3, 4, 32)).astype(np.float32)
    np.testing.assert_allclose(m(x).to_host(), _ort(proto, {"x": x})[0], rtol=2e-4, atol=2e-5)


def test_device_inputs_run_async_and_given_outputs():
    proto, ref = builders.mlp()
    m = npurt.Model.load(proto)
    x = np.random.default_rng(3).standard_normal((5, 16)).astype(np.float32)
    s = npurt.Stream()
    xd = npurt.to_device(x, stream=s)
    out = npurt.empty((5, 4))
    (y,) = m.run_async([xd], outputs=[out], stream=s)
    assert y is out
    s.synchronize()
    np.testing.assert_allclose(out.to_host(), ref(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(npurt.InvalidValueError):
        m.run_async([xd], outputs=[npurt.empty((5, 3))], stream=s)


def test_memory_plan_shares_the_workspace():
    proto, _ = builders.transformer_block()
    m = npurt.Model.load(proto)
    p = m.plan(np.zeros((2, 16, 32), np.float32))
    mem = p.memory
    assert 0 < mem.peak_live <= mem.workspace < mem.intermediates
    # No two slots alive at the same step overlap in the workspace.
    from npurt.model import dtypes, memplan

    life = memplan.lifetimes(p.slots, p.step_list)
    assert len(life) > 10

    def span(k):
        sl = p.slots[k]
        return mem.offsets[k], mem.offsets[k] + dtypes.itemsize(sl.dtype) * int(np.prod(sl.shape))

    for a in life:
        for b in life:
            if a < b and life[a][0] <= life[b][1] and life[b][0] <= life[a][1]:
                (a0, a1), (b0, b1) = span(a), span(b)
                assert a1 <= b0 or b1 <= a0, (a, b)


def test_many_threads_share_one_model():
    proto, ref = builders.transformer_block()
    m = npurt.Model.load(proto)
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((2, 6, 32)).astype(np.float32) for _ in range(8)]
    want = [ref(x) for x in xs]
    errors = []

    def worker(k):
        try:
            s = npurt.Stream()
            for _ in range(3):
                (y,) = m.run_async([xs[k]], stream=s)
                s.synchronize()
                np.testing.assert_allclose(y.to_host(), want[k], rtol=2e-4, atol=2e-5)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors[0]
    assert len(m._weights) > 0 and len(m._plans) == 1


def test_bad_inputs_are_typed_errors():
    proto, _ = builders.mlp()
    m = npurt.Model.load(proto)
    x = np.zeros((2, 16), np.float32)
    with pytest.raises(npurt.InvalidValueError, match="expected shape"):
        m(np.zeros((2, 15), np.float32))
    with pytest.raises(npurt.InvalidValueError, match="rank"):
        m(np.zeros(16, np.float32))
    with pytest.raises(npurt.InvalidTypeError, match="float32"):
        m(x.astype(np.float64))
    with pytest.raises(npurt.InvalidValueError, match="missing"):
        m.run({})
    with pytest.raises(npurt.InvalidValueError, match="unknown"):
        m.run({"x": x, "z": x})
    with pytest.raises(npurt.InvalidValueError, match="takes 1 input"):
        m.run([x, x])
    with pytest.raises(npurt.InvalidTypeError):
        m.run([x], stream="s")
    with pytest.raises(npurt.InvalidTypeError):
        m(npurt.to_device(np.zeros((2, 16), np.int32)))


def test_bad_models_are_typed_errors(tmp_path):
    with pytest.raises(npurt.InvalidValueError, match="ONNX"):
        npurt.Model.load(b"\x00\x01garbage" * 10)
    om = tmp_path / "net.om"
    om.write_bytes(b"IMOD" + b"\x00" * 64)
    with pytest.raises(npurt.InvalidValueError, match="npurt loads ONNX"):
        npurt.Model.load(str(om))
    with pytest.raises(npurt.InvalidValueError, match="cannot read"):
        npurt.Model.load(str(tmp_path / "missing.onnx"))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.Model.load(42)
    # Every unsupported node is named in one load-time error.
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("NonZero", ["a"], ["b"], name="nz"), helper.make_node("Unique", ["a"], ["c"], name="uq")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("b", TensorProto.INT64, None), helper.make_tensor_value_info("c", TensorProto.FLOAT, None)])
    with pytest.raises(npurt.NotSupportedError) as e:
        npurt.Model.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert "2 node(s)" in str(e.value) and "nz (NonZero)" in str(e.value) and "uq (Unique)" in str(e.value)


def test_constant_folding_and_shape_parameters():
    # y = Reshape(x * (c1 + c2), shape) with c1 + c2 folded at load and shape a graph input.
    c = [helper.make_tensor("c1", TensorProto.FLOAT, [1], [1.0]), helper.make_tensor("c2", TensorProto.FLOAT, [1], [2.0])]
    g = helper.make_graph(
        [helper.make_node("Add", ["c1", "c2"], ["c"]), helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Reshape", ["m", "shape"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=c)
    m = npurt.Model.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert m._graph.folded == 1
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = m.run([x, np.array([3, 2], np.int64)])
    np.testing.assert_array_equal(y.to_host(), (x * 3).reshape(3, 2))
    (y,) = m.run([x, np.array([1, 6], np.int64)])
    assert y.shape == (1, 6)
    assert len(m._plans) == 2  # the shape input's value keys the plan


def test_conv_net_or_a_load_time_refusal():
    proto, ref = builders.conv_net()
    from npurt.model import ops

    gaps = [op for op in ("Conv", "MaxPool") if ops.missing(op)]
    if gaps:  # the CNN kernels (npurt.nn) are not in this build: one error names the nodes
        with pytest.raises(npurt.NotSupportedError) as e:
            npurt.Model.load(proto)
        assert all(f"{op}: needs npurt.nn." in str(e.value) for op in gaps), str(e.value)
        return
    m = npurt.Model.load(proto)
    x = np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(m(x).to_host(), ref(x), rtol=1e-4, atol=1e-5)
