"""Behaviours that published pyacl code (docs/COMPAT.md, "Real code") relies on, each
reproduced from scratch from pyACL's bindings and ACL's documentation: argument-less calls
ignoring extra arguments (pyacl registers every call ``METH_VARARGS`` and its argument-less
wrappers never parse them), ``acl.mdl.get_cur_output_dims``, and ``memcpy`` into the buffer of
a ``bytes`` object from ``acl.util.bytes_to_ptr`` (the samples' way of reading device memory
back)."""

import npurt.acl as acl
import numpy as np
import pytest

D2H = acl.ACL_MEMCPY_DEVICE_TO_HOST
H2D = acl.ACL_MEMCPY_HOST_TO_DEVICE


@pytest.fixture
def dev0():
    assert acl.rt.set_device(0) == 0
    yield 0
    acl.rt.reset_device(0)
    acl.rt.get_last_error(0)  # the failures these tests provoke are not left to later tests


def test_argument_less_calls_ignore_extra_arguments(dev0):
    # pyacl code in the wild calls acl.rt.synchronize_device(device_id): pyacl ignores it
    assert acl.rt.synchronize_device(0) == 0
    assert acl.rt.get_device(7, "x") == (0, 0)
    assert acl.rt.get_run_mode(None) == (acl.ACL_HOST, 0)
    s, ret = acl.rt.create_stream(1)
    assert ret == 0 and acl.rt.destroy_stream(s) == 0
    # calls with parameters still count them
    with pytest.raises(TypeError, match=r"^function takes exactly 1 argument \(2 given\)$"):
        acl.rt.set_device(0, 1)


def test_memcpy_into_a_bytes_buffer_reads_device_memory_back(dev0):
    """The samples read device memory into ``np.zeros(n).tobytes()`` through
    ``bytes_to_ptr`` and then ``np.frombuffer`` it."""
    src = np.arange(256, dtype=np.uint8)
    dev, ret = acl.rt.malloc(src.nbytes, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
    assert ret == 0
    upload = src.tobytes()  # kept alive: bytes_to_ptr is the address of its buffer, no copy
    assert acl.rt.memcpy(dev, src.nbytes, acl.util.bytes_to_ptr(upload), src.nbytes, H2D) == 0
    sink = np.zeros(src.nbytes, np.uint8).tobytes()
    assert acl.rt.memcpy(acl.util.bytes_to_ptr(sink), len(sink), dev, src.nbytes, D2H) == 0
    assert (np.frombuffer(sink, np.uint8) == src).all()
    assert acl.rt.free(dev) == 0


def test_get_cur_output_dims_are_the_latest_runs(dev0, tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    # y = x * 2 with a dynamic batch: the current output dims follow the buffer given
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["y"])], "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        initializer=[helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    ctx, _ = acl.rt.create_context(0)
    mid, ret = acl.mdl.load_from_file(str(path))
    assert ret == 0
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, mid) == 0
    dims, ret = acl.mdl.get_cur_output_dims(desc, 0)
    assert ret == 0 and dims == {"name": "y", "dimCount": 2, "dims": [-1, 3]}, "before a run: the model's dims"
    for n in (2, 5):
        x = np.ones((n, 3), np.float32)
        pin, _ = acl.rt.malloc(x.nbytes, 0)
        pout, _ = acl.rt.malloc(x.nbytes, 0)
        assert acl.rt.memcpy(pin, x.nbytes, x.ctypes.data, x.nbytes, H2D) == 0
        ins, outs = acl.mdl.create_dataset(), acl.mdl.create_dataset()
        acl.mdl.add_dataset_buffer(ins, acl.create_data_buffer(pin, x.nbytes))
        acl.mdl.add_dataset_buffer(outs, acl.create_data_buffer(pout, x.nbytes))
        assert acl.mdl.execute(mid, ins, outs) == 0
        assert acl.mdl.get_cur_output_dims(desc, 0) == ({"name": "y", "dimCount": 2, "dims": [n, 3]}, 0)
        for ds in (ins, outs):
            for i in range(acl.mdl.get_dataset_num_buffers(ds)):
                acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(ds, i))
            acl.mdl.destroy_dataset(ds)
        acl.rt.free(pin)
        acl.rt.free(pout)
    assert acl.mdl.get_cur_output_dims(desc, 1) == ({}, acl.ACL_ERROR_INVALID_PARAM)
    assert acl.mdl.unload(mid) == 0
    assert acl.mdl.destroy_desc(desc) == 0
    assert acl.rt.destroy_context(ctx) == 0


_AT_EXIT = """
import os
import npurt.acl as acl

class Holder:  # acllite-style: resources released in __del__, which may run at exit
    def __del__(self):
        ret = acl.rt.free(0xDEAD000)  # not an allocation
        os.write(1, f"RET {ret}\\n".encode())

acl.rt.set_device(0)
h = Holder()
"""


def test_a_failing_call_at_interpreter_exit_still_returns_its_code():
    # Sample libraries free in __del__; at exit sys.modules is being torn down, so neither
    # the error path nor the call may import anything then.
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _AT_EXIT], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "RET 207002" in r.stdout, (r.stdout, r.stderr)
    assert "Exception ignored" not in r.stderr, r.stderr
