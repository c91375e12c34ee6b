"""npurt.nn pools, batch_norm and lrn against numpy references: max/avg pooling in 1-D,
2-D, 3-D with strides, dilations, asymmetric pads, ceil_mode and count_include_pad;
global pools; typed errors."""

import npurt
import numpy as np
import pytest
from nnref import pool as pool_ref

TOL = dict(rtol=1e-5, atol=1e-6)
rng = np.random.default_rng(3)

CASES = [
    ((2, 3, 8, 9), dict(kernel_shape=[3, 3])),
    ((1, 2, 9, 8), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 2, 1])),
    ((1, 2, 7, 7), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=True)),
    ((1, 2, 6, 6), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=True)),
    ((1, 3, 10, 9), dict(kernel_shape=[2, 3], dilations=[2, 2], strides=[1, 2], pads=[1, 1, 0, 2])),
    ((2, 3, 11), dict(kernel_shape=[4], strides=[3], pads=[2, 1])),
    ((1, 2, 5, 6, 4), dict(kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[0, 1, 1, 1, 0, 0])),
]


@pytest.mark.parametrize("shape, kw", CASES, ids=[str(c) for c in range(len(CASES))])
def test_max_and_avg_pool(shape, kw):
    x = rng.standard_normal(shape).astype(np.float32)
    xd = npurt.to_device(x)
    args = dict(kernel=kw["kernel_shape"], strides=kw.get("strides"), pads=kw.get("pads"),
                dilations=kw.get("dilations"), ceil=kw.get("ceil_mode", False))
    np.testing.assert_allclose(npurt.nn.max_pool(xd, **kw).to_host(), pool_ref(x, "max", **args), **TOL)
    if "dilations" not in kw:
        for cip in (False, True):
            got = npurt.nn.avg_pool(xd, count_include_pad=cip, **kw).to_host()
            np.testing.assert_allclose(got, pool_ref(x, "avg", count_include_pad=cip, **args), **TOL)


def test_onnx_averagepool_2d_ceil_case():
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    y = npurt.nn.avg_pool(npurt.to_device(x), [3, 3], strides=[2, 2], ceil_mode=True).to_host()
    np.testing.assert_array_equal(y, np.array([[[[6, 7.5], [12, 13.5]]]], np.float32))


def test_max_pool_ignores_padding_for_negative_inputs():
    x = -np.ones((1, 1, 3, 3), np.float32) - np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    y = npurt.nn.max_pool(npurt.to_device(x), [3, 3], pads=[1, 1, 1, 1]).to_host()
    assert y.max() < 0 and y[0, 0, 0, 0] == -1


def test_global_pools():
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    xd = npurt.to_device(x)
    np.testing.assert_allclose(npurt.nn.global_avg_pool(xd).to_host(), x.mean((2, 3), keepdims=True), **TOL)
    np.testing.assert_array_equal(npurt.nn.global_max_pool(xd).to_host(), x.max((2, 3), keepdims=True))


def test_batch_norm_and_lrn():
    x = rng.standard_normal((2, 5, 4, 3)).astype(np.float32)
    s, b, m = (rng.standard_normal(5).astype(np.float32) for _ in range(3))
    v = rng.random(5).astype(np.float32) + 0.1
    y = npurt.nn.batch_norm(*(npurt.to_device(a) for a in (x, s, b, m, v)), epsilon=1e-3).to_host()
    r = lambda a: a.reshape(1, 5, 1, 1)  # noqa: E731
    ref = (x - r(m)) / np.sqrt(r(v) + 1e-3) * r(s) + r(b)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    xd = npurt.to_device(x)
    npurt.nn.batch_norm(xd, *(npurt.to_device(a) for a in (s, b, m, v)), epsilon=1e-3, out=xd)  # in place
    np.testing.assert_allclose(xd.to_host(), ref, rtol=1e-5, atol=1e-5)
    for size in (1, 2, 3, 4):
        y = npurt.nn.lrn(npurt.to_device(x), size, alpha=2e-2, beta=0.75, bias=1.5).to_host()
        sq = np.zeros_like(x, dtype=np.float64)
        for c in range(5):
            lo, hi = max(0, c - (size - 1) // 2), min(5, c + (size - 1) - (size - 1) // 2 + 1)
            sq[:, c] = (x[:, lo:hi].astype(np.float64) ** 2).sum(1)
        np.testing.assert_allclose(y, x / (1.5 + 2e-2 / size * sq) ** 0.75, rtol=1e-5, atol=1e-6)


def test_pool_and_norm_errors_are_typed():
    x = npurt.zeros((1, 2, 4, 4))
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.max_pool(x, [5, 5])
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.max_pool(x, [2])
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.avg_pool(x, [2, 2], dilations=[0, 1])
    with pytest.raises(npurt.InvalidTypeError):
        npurt.nn.avg_pool(x, [2, 2], ceil_mode="yes")
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.batch_norm(x, *(npurt.zeros(3) for _ in range(4)))
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.lrn(x, 0)


def test_auto_pads():
    assert npurt.nn.auto_pads("SAME_UPPER", [5, 4], [3, 2], strides=[2, 1]) == [1, 0, 1, 1]
    assert npurt.nn.auto_pads("SAME_LOWER", [4], [2]) == [1, 0]
    assert npurt.nn.auto_pads("VALID", [4], [2]) == [0, 0]
    x = npurt.to_device(rng.standard_normal((1, 1, 5, 4)).astype(np.float32))
    y = npurt.nn.max_pool(x, [3, 2], strides=[2, 1], pads=npurt.nn.auto_pads("SAME_UPPER", [5, 4], [3, 2], [2, 1]))
    assert y.shape == (1, 1, 3, 4)
    with pytest.raises(npurt.InvalidValueError):
        npurt.nn.auto_pads("SAME", [4], [2])
