"""npurt.nn.resize against onnx.reference (a one-node Resize model run by
ReferenceEvaluator): nearest with every nearest_mode, linear and cubic with the
coordinate modes converters emit, sizes and scales, up- and downsampling."""

import npurt
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

rng = np.random.default_rng(2)


def onnx_resize(x, sizes=None, scales=None, **attrs):
    inputs = ["X", "", "scales" if scales is not None else "", "sizes" if sizes is not None else ""]
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("Resize", inputs, ["Y"], **attrs)
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)]
    feeds = {"X": x}
    if scales is not None:
        ins.append(helper.make_tensor_value_info("scales", TensorProto.FLOAT, [len(scales)]))
        feeds["scales"] = np.array(scales, np.float32)
    if sizes is not None:
        ins.append(helper.make_tensor_value_info("sizes", TensorProto.INT64, [len(sizes)]))
        feeds["sizes"] = np.array(sizes, np.int64)
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, feeds)[0]


CASES = [
    dict(mode="nearest", nearest_mode="round_prefer_floor", coordinate_transformation_mode="half_pixel"),
    dict(mode="nearest", nearest_mode="round_prefer_ceil", coordinate_transformation_mode="asymmetric"),
    dict(mode="nearest", nearest_mode="floor", coordinate_transformation_mode="align_corners"),
    dict(mode="nearest", nearest_mode="ceil", coordinate_transformation_mode="half_pixel"),
    dict(mode="linear", coordinate_transformation_mode="half_pixel"),
    dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    dict(mode="linear", coordinate_transformation_mode="align_corners"),
    dict(mode="linear", coordinate_transformation_mode="asymmetric"),
    dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"),
    dict(mode="cubic", coordinate_transformation_mode="half_pixel"),
    dict(mode="cubic", coordinate_transformation_mode="align_corners", cubic_coeff_a=-0.5),
    dict(mode="cubic", coordinate_transformation_mode="half_pixel", exclude_outside=1),
]


@pytest.mark.parametrize("attrs", CASES, ids=[f"{c['mode']}-{c['coordinate_transformation_mode']}-{c.get('nearest_mode', '')}{c.get('exclude_outside', '')}" for c in CASES])
@pytest.mark.parametrize("target", [dict(sizes=[1, 2, 7, 9]), dict(sizes=[1, 2, 3, 2]), dict(scales=[1.0, 1.0, 2.0, 1.5]), dict(scales=[1.0, 1.0, 0.6, 0.8]), dict(sizes=[1, 2, 1, 5])])
def test_resize_matches_onnx_reference(attrs, target):
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    ref = onnx_resize(x, **target, **attrs)
    kw = dict(attrs)
    if "scales" in target:  # the float32 scales ONNX sees
        target = dict(scales=[float(np.float32(v)) for v in target["scales"]])
    if "exclude_outside" in kw:
        kw["exclude_outside"] = bool(kw["exclude_outside"])
    got = npurt.nn.resize(npurt.to_device(x), **target, **kw).to_host()
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_resize_tf_half_pixel_for_nn():
    # Opset 11's mode (onnx.reference no longer has it): x_in = (x_out + 0.5) / scale.
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 1, 4)
    got = npurt.nn.resize(npurt.to_device(x), sizes=[1, 1, 1, 3], coordinate_transformation_mode="tf_half_pixel_for_nn").to_host()
    # scale 0.75: x_in = 0.667, 2.0, 3.333 -> round_prefer_floor 1, 2, 3
    np.testing.assert_array_equal(got[0, 0, 0], [1, 2, 3])


def test_resize_errors():
    x = npurt.zeros((1, 1, 2, 2))
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.resize(x)
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.resize(x, sizes=[1, 1, 4])
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.resize(x, sizes=[1, 1, 4, 4], mode="area")
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.resize(x, sizes=[1, 1, 4, 4], coordinate_transformation_mode="tf_crop_and_resize")
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.resize(x, scales=[1, 1, 0, 2])
