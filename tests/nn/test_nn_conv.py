"""npurt.nn.conv / conv_transpose against numpy references (nnref.py): 1-D, 2-D and 3-D,
groups (depthwise too), strides, dilations, asymmetric pads, bias, pointwise (the no-im2col
path), strided inputs, determinism across block counts, and typed errors."""

import npurt
import numpy as np
import pytest
from nnref import conv as conv_ref
from nnref import conv_transpose as convt_ref

TOL = dict(rtol=1e-4, atol=1e-4)  # f32 sums of up to 576 products of N(0, 1) values
rng = np.random.default_rng(7)


def _r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES = [
    # x shape, w shape, kwargs
    ((2, 3, 9, 8), (4, 3, 3, 3), {}),
    ((1, 4, 10, 7), (6, 2, 3, 2), dict(group=2, strides=[2, 1], pads=[1, 0, 2, 1], dilations=[1, 2])),
    ((1, 6, 8, 8), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1])),  # depthwise
    ((2, 5, 6, 6), (7, 5, 1, 1), {}),  # pointwise, no im2col
    ((1, 4, 7, 7), (3, 4, 1, 1), dict(strides=[2, 2])),  # 1x1 strided: im2col
    ((2, 3, 17), (4, 3, 5), dict(strides=[3], pads=[2, 1], dilations=[2])),  # 1-D
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(pads=[1, 0, 1, 0, 1, 1], strides=[1, 2, 1])),  # 3-D
    ((1, 64, 20, 20), (32, 64, 3, 3), dict(pads=[1, 1, 1, 1])),  # several tiles
]


@pytest.mark.parametrize("xs, ws, kw", CASES, ids=[str(c[0]) + str(c[2]) for c in CASES])
def test_conv_matches_reference(xs, ws, kw):
    x, w, b = _r(*xs), _r(*ws), _r(ws[0])
    y = npurt.nn.conv(npurt.to_device(x), npurt.to_device(w), npurt.to_device(b), **kw)
    np.testing.assert_allclose(y.to_host(), conv_ref(x, w, b, **kw), **TOL)
    y0 = npurt.nn.conv(npurt.to_device(x), npurt.to_device(w), **kw)
    np.testing.assert_allclose(y0.to_host(), conv_ref(x, w, None, **kw), **TOL)


def test_conv_strided_input_and_out():
    x, w = _r(1, 3, 12, 10), _r(4, 3, 3, 3)
    xd = npurt.to_device(x)[:, :, ::2, 1:]  # a strided view
    out = npurt.zeros((1, 4, 4, 7))
    r = npurt.nn.conv(xd, npurt.to_device(w), out=out)
    assert r is out
    np.testing.assert_allclose(out.to_host(), conv_ref(x[:, :, ::2, 1:], w), **TOL)


def test_conv_is_bitwise_deterministic_across_streams():
    x, w = _r(2, 16, 24, 24), _r(16, 16, 3, 3)
    xd, wd = npurt.to_device(x), npurt.to_device(w)
    a = npurt.nn.conv(xd, wd, pads=[1, 1, 1, 1]).to_host()
    b = npurt.nn.conv(xd, wd, pads=[1, 1, 1, 1], stream=npurt.Stream()).to_host()
    assert np.array_equal(a, b)


def test_conv_errors_are_typed():
    x, w = npurt.zeros((1, 4, 5, 5)), npurt.zeros((2, 4, 3, 3))
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.conv(x, npurt.zeros((2, 3, 3, 3)))  # channel mismatch
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.conv(x, npurt.zeros((3, 2, 3, 3)), group=2)  # M not a multiple of group
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.conv(x, npurt.zeros((2, 4, 7, 7)))  # kernel larger than the input
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.conv(x, w, pads=[1, 1])
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.conv(x, w, strides=[0, 1])
    with pytest.raises(npurt.InvalidTypeError):
        npurt.nn.conv(x, w, strides="2")
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.conv(npurt.zeros((4, 5)), w)
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.conv(x, w, bias=npurt.zeros(3))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.nn.conv(x.astype("float16"), w.astype("float16"))
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.conv(x, w, out=npurt.zeros((1, 2, 4, 4)))


TCASES = [
    ((1, 3, 4, 5), (3, 2, 3, 3), {}),
    ((2, 4, 3, 3), (4, 3, 3, 2), dict(strides=[2, 3], pads=[1, 0, 0, 1], output_padding=[1, 0])),
    ((1, 4, 5, 4), (4, 2, 2, 3), dict(group=2, dilations=[2, 1], strides=[1, 2])),
    ((2, 3, 7), (3, 5, 4), dict(strides=[2], pads=[1, 2])),
]


@pytest.mark.parametrize("xs, ws, kw", TCASES, ids=[str(c[0]) + str(c[2]) for c in TCASES])
def test_conv_transpose_matches_reference(xs, ws, kw):
    x, w = _r(*xs), _r(*ws)
    b = _r(ws[1] * kw.get("group", 1))
    y = npurt.nn.conv_transpose(npurt.to_device(x), npurt.to_device(w), npurt.to_device(b), **kw)
    np.testing.assert_allclose(y.to_host(), convt_ref(x, w, b, **kw), **TOL)


def test_conv_transpose_output_shape_derives_pads():
    x, w = _r(1, 2, 3, 3), _r(2, 3, 3, 3)
    y = npurt.nn.conv_transpose(npurt.to_device(x), npurt.to_device(w), strides=[2, 2], output_shape=[6, 6])
    # total padding 1 per axis: ONNX gives the begin pad the larger half.
    ref = convt_ref(x, w, strides=[2, 2], pads=[1, 1, 0, 0])
    assert y.shape == (1, 3, 6, 6)
    np.testing.assert_allclose(y.to_host(), ref, **TOL)
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.conv_transpose(npurt.to_device(x), npurt.to_device(_r(3, 3, 3, 3)))
