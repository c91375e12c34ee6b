"""npurt.acl.mdl: pyacl's model calls on ONNX models — return tuples and ACL codes, the
description queries, datasets and data buffers, execute / execute_async against the
Pythonic front, and the errors (bad paths, .om files, unsupported ops, unknown ids,
mismatched datasets, foreign pointers, no context)."""

import os
import sys
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import npurt  # noqa: E402
import npurt.acl as acl  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "model"))
import builders  # noqa: E402

H2D, D2H = acl.ACL_MEMCPY_HOST_TO_DEVICE, acl.ACL_MEMCPY_DEVICE_TO_HOST


_ALLOCS = []


@pytest.fixture
def ctx():
    assert acl.rt.set_device(0) == 0
    c, ret = acl.rt.create_context(0)
    assert ret == 0
    yield c
    while _ALLOCS:  # every acl.rt.malloc of the test (other tests check nothing is left)
        assert acl.rt.free(_ALLOCS.pop()) == 0
    acl.rt.destroy_context(c)
    acl.rt.reset_device(0)


def _malloc(n):
    p, ret = acl.rt.malloc(n, 0)
    assert ret == 0
    _ALLOCS.append(p)
    return p


@pytest.fixture
def mlp_path(tmp_path):
    proto, ref = builders.mlp()
    # A static batch of 3, so every size is known.
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 3
    p = tmp_path / "mlp.onnx"
    p.write_bytes(proto.SerializeToString())
    return str(p), ref


def _dev(a):
    p = _malloc(a.nbytes)
    assert acl.rt.memcpy(p, a.nbytes, a.ctypes.data, a.nbytes, H2D) == 0
    return p


def _ds(*ptr_sizes):
    ds = acl.mdl.create_dataset()
    for p, n in ptr_sizes:
        d, ret = acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(p, n))
        assert (d, ret) == (ds, 0)
    return ds


def test_load_describe_execute(ctx, mlp_path):
    path, ref = mlp_path
    mid, ret = acl.mdl.load_from_file(path)
    assert ret == 0 and mid > 0
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_num_inputs(desc) == 0  # not filled yet
    assert acl.mdl.get_desc(desc, mid) == 0
    assert (acl.mdl.get_num_inputs(desc), acl.mdl.get_num_outputs(desc)) == (1, 1)
    assert acl.mdl.get_input_size_by_index(desc, 0) == 3 * 16 * 4
    assert acl.mdl.get_output_size_by_index(desc, 0) == 3 * 4 * 4
    assert acl.mdl.get_input_dims(desc, 0) == ({"name": "x", "dimCount": 2, "dims": [3, 16]}, 0)
    assert acl.mdl.get_output_dims(desc, 0) == ({"name": "y", "dimCount": 2, "dims": [3, 4]}, 0)
    assert acl.mdl.get_input_name_by_index(desc, 0) == "x" and acl.mdl.get_output_name_by_index(desc, 0) == "y"
    assert acl.mdl.get_input_index_by_name(desc, "x") == (0, 0)
    assert acl.mdl.get_input_index_by_name(desc, "nope")[1] == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.get_input_data_type(desc, 0) == 0  # ACL_FLOAT
    assert acl.mdl.get_input_dims(desc, 5)[1] == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.get_input_size_by_index(desc, 5) == 0

    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    pin, pout = _dev(x), _malloc(48)
    ins, outs = _ds((pin, x.nbytes)), _ds((pout, 48))
    assert acl.mdl.get_dataset_num_buffers(ins) == 1
    buf = acl.mdl.get_dataset_buffer(outs, 0)
    assert acl.get_data_buffer_addr(buf) == pout and acl.get_data_buffer_size_v2(buf) == 48
    assert acl.mdl.get_dataset_buffer(outs, 1) == 0
    assert acl.mdl.execute(mid, ins, outs) == 0
    y = np.empty((3, 4), np.float32)
    assert acl.rt.memcpy(y.ctypes.data, 48, pout, 48, D2H) == 0
    np.testing.assert_allclose(y, ref(x), rtol=1e-5, atol=1e-6)

    # execute_async on a stream; the seeds' 3-argument add_dataset_buffer.
    s, _ = acl.rt.create_stream()
    pout2 = _malloc(48)
    outs2 = acl.mdl.create_dataset()
    assert acl.mdl.add_dataset_buffer(outs2, pout2, 48) == (outs2, 0)
    assert acl.mdl.execute_async(mid, ins, outs2, s) == 0
    assert acl.rt.synchronize_stream(s) == 0
    y2 = np.empty((3, 4), np.float32)
    assert acl.rt.memcpy(y2.ctypes.data, 48, pout2, 48, D2H) == 0
    np.testing.assert_array_equal(y2, y)

    # errors on execute: wrong dataset sizes, foreign pointers, unknown ids and handles
    assert acl.mdl.execute(mid, ins, _ds((pout, 8))) == acl.ACL_ERROR_GE_PARAM_INVALID
    assert acl.mdl.execute(mid, _ds((pin, 8)), outs) == acl.ACL_ERROR_GE_PARAM_INVALID
    assert acl.mdl.execute(mid, _ds(), outs) == acl.ACL_ERROR_GE_PARAM_INVALID
    assert acl.mdl.execute(mid, _ds((x.ctypes.data, x.nbytes)), outs) == acl.ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID
    assert acl.mdl.execute(mid + 1000, ins, outs) == acl.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID
    assert acl.mdl.execute(mid, 12345, outs) == acl.ACL_ERROR_INVALID_PARAM
    with pytest.raises(TypeError):
        acl.mdl.execute(mid, "ins", outs)

    for ds in (ins, outs, outs2):
        for i in range(acl.mdl.get_dataset_num_buffers(ds)):
            assert acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(ds, i)) == 0
        assert acl.mdl.destroy_dataset(ds) == 0
    assert acl.mdl.destroy_dataset(ins) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.destroy_data_buffer(buf) == acl.ACL_ERROR_INVALID_PARAM
    assert acl.mdl.destroy_desc(desc) == 0
    assert acl.mdl.unload(mid) == 0
    assert acl.mdl.unload(mid) == acl.ACL_ERROR_GE_EXEC_MODEL_ID_INVALID
    acl.rt.destroy_stream(s)


def test_load_errors(ctx, tmp_path):
    assert acl.mdl.load_from_file(str(tmp_path / "missing.onnx")) == (0, acl.ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID)
    om = tmp_path / "resnet50.om"
    om.write_bytes(b"IMOD" + bytes(256))
    assert acl.mdl.load_from_file(str(om)) == (0, acl.ACL_ERROR_GE_PARAM_INVALID)
    junk = b"\xff\xfe not a model" * 8
    assert acl.mdl.load_from_mem(acl.util.bytes_to_ptr(junk), len(junk)) == (0, acl.ACL_ERROR_GE_PARAM_INVALID)
    assert acl.mdl.load_from_mem(0, 10)[1] == acl.ACL_ERROR_INVALID_PARAM
    g = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    assert acl.mdl.load_from_mem(acl.util.bytes_to_ptr(data), len(data)) == (0, acl.ACL_ERROR_FEATURE_UNSUPPORTED)
    with pytest.raises(TypeError):
        acl.mdl.load_from_file(42)


def test_load_from_mem_and_no_context(ctx, mlp_path):
    path, _ = mlp_path
    with open(path, "rb") as f:
        data = f.read()
    mid, ret = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(data), len(data))
    assert ret == 0
    got = []
    t = threading.Thread(target=lambda: got.append((acl.mdl.load_from_file(path), acl.mdl.unload(mid))))
    t.start()
    t.join()
    assert got == [((0, acl.ACL_ERROR_RT_CONTEXT_NULL), acl.ACL_ERROR_RT_CONTEXT_NULL)]
    assert acl.mdl.unload(mid) == 0


def test_dynamic_batch_from_buffer_size(ctx, tmp_path):
    proto, ref = builders.mlp()  # input ("N", 16)
    p = tmp_path / "dyn.onnx"
    p.write_bytes(proto.SerializeToString())
    mid, ret = acl.mdl.load_from_file(str(p))
    assert ret == 0
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, mid)
    assert acl.mdl.get_input_dims(desc, 0)[0]["dims"] == [-1, 16]
    assert acl.mdl.get_input_size_by_index(desc, 0) == 0
    for n in (1, 5):
        x = np.random.default_rng(n).standard_normal((n, 16)).astype(np.float32)
        pin, pout = _dev(x), _malloc(n * 16)
        assert acl.mdl.execute(mid, _ds((pin, x.nbytes)), _ds((pout, n * 16))) == 0
        y = np.empty((n, 4), np.float32)
        acl.rt.memcpy(y.ctypes.data, y.nbytes, pout, y.nbytes, D2H)
        np.testing.assert_allclose(y, ref(x), rtol=1e-5, atol=1e-6)
    assert acl.mdl.execute(mid, _ds((pin, 30)), _ds((pout, 80))) == acl.ACL_ERROR_GE_PARAM_INVALID  # 30 bytes: no batch
    acl.mdl.destroy_desc(desc)
    assert acl.mdl.unload(mid) == 0
    assert npurt.Model is not None
