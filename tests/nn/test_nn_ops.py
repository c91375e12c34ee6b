"""The elementwise additions against numpy: power, erf, reciprocal, floor/ceil/round,
sign, clip, comparisons and logic (bool results, broadcasting, scalars), where, and the
npurt.nn activations; typed errors."""

import math

import npurt
import numpy as np
import pytest

rng = np.random.default_rng(11)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _d(a):
    return npurt.to_device(a)


def test_unary_maps():
    x = (rng.standard_normal((5, 7)) * 3).astype(np.float32)
    x[0, :4] = [0.5, 1.5, -2.5, -0.0]
    xd = _d(x)
    np.testing.assert_allclose(npurt.erf(xd).to_host(), _erf(x), atol=1e-6)
    np.testing.assert_allclose(npurt.reciprocal(xd).to_host(), 1 / x, rtol=1e-6)
    np.testing.assert_array_equal(npurt.floor(xd).to_host(), np.floor(x))
    np.testing.assert_array_equal(npurt.ceil(xd).to_host(), np.ceil(x))
    np.testing.assert_array_equal(npurt.round(xd).to_host(), np.rint(x))
    np.testing.assert_array_equal(npurt.sign(xd).to_host(), np.sign(x))
    np.testing.assert_array_equal(npurt.clip(xd, -1.0, 2.0).to_host(), np.clip(x, -1, 2))
    np.testing.assert_array_equal(npurt.clip(xd, a_max=0.5).to_host(), np.minimum(x, 0.5))
    i = np.array([-3, 0, 7, 2], np.int64)
    np.testing.assert_array_equal(npurt.sign(_d(i)).to_host(), np.sign(i))
    np.testing.assert_array_equal(npurt.clip(_d(i), 0, 5).to_host(), np.clip(i, 0, 5))
    y = npurt.to_device(x)
    npurt.erf(y, out=y)  # in place
    np.testing.assert_allclose(y.to_host(), _erf(x), atol=1e-6)


def test_activations():
    x = (rng.standard_normal(300) * 5).astype(np.float32)
    xd = _d(x)
    np.testing.assert_allclose(npurt.nn.leaky_relu(xd, 0.1).to_host(), np.where(x < 0, 0.1 * x, x), rtol=1e-6)
    np.testing.assert_allclose(npurt.nn.hard_sigmoid(xd).to_host(), np.clip(0.2 * x + 0.5, 0, 1), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(npurt.nn.hard_swish(xd).to_host(), x * np.clip(x / 6 + 0.5, 0, 1), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(npurt.nn.elu(xd, 0.7).to_host(), np.where(x < 0, 0.7 * np.expm1(x), x), rtol=1e-5, atol=1e-6)
    a, g = 1.6732632, 1.050701
    np.testing.assert_allclose(npurt.nn.selu(xd).to_host(), g * np.where(x <= 0, a * np.expm1(x), x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(npurt.nn.softplus(xd).to_host(), np.log1p(np.exp(x.astype(np.float64))), rtol=1e-5, atol=1e-6)


def test_power_broadcasts():
    a = (rng.random((4, 1, 3)) * 3 + 0.1).astype(np.float32)
    b = rng.standard_normal((5, 1)).astype(np.float32)
    np.testing.assert_allclose(npurt.power(_d(a), _d(b)).to_host(), a ** b, rtol=2e-6)
    np.testing.assert_allclose(npurt.power(_d(a), 2.0).to_host(), a ** 2, rtol=2e-6)
    np.testing.assert_allclose(npurt.power(2.0, _d(b)).to_host(), 2.0 ** b, rtol=2e-6)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.power(_d(np.arange(3)), 2)


CMP = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
       "greater": np.greater, "greater_equal": np.greater_equal}


@pytest.mark.parametrize("name", list(CMP))
@pytest.mark.parametrize("dtype", ["float32", "int64", "int32"])
def test_comparisons(name, dtype):
    a = rng.integers(-3, 3, (3, 1, 4)).astype(dtype)
    b = rng.integers(-3, 3, (5, 1)).astype(dtype)
    f = getattr(npurt, name)
    r = f(_d(a), _d(b))
    assert r.dtype == np.bool_
    np.testing.assert_array_equal(r.to_host(), CMP[name](a, b))
    np.testing.assert_array_equal(f(_d(a), 1).to_host(), CMP[name](a, 1))
    np.testing.assert_array_equal(f(1, _d(a)).to_host(), CMP[name](1, a))


def test_logic_and_where():
    p = rng.random((4, 6)) < 0.5
    q = rng.random((6,)) < 0.5
    for name, ref in (("logical_and", np.logical_and), ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)):
        np.testing.assert_array_equal(getattr(npurt, name)(_d(p), _d(q)).to_host(), ref(p, q))
    np.testing.assert_array_equal(npurt.logical_not(_d(p)).to_host(), ~p)
    np.testing.assert_array_equal(npurt.logical_not(_d(np.array([0.0, 2.0], np.float32))).to_host(), [True, False])
    x = rng.standard_normal((4, 1)).astype(np.float32)
    y = rng.standard_normal((6,)).astype(np.float32)
    np.testing.assert_array_equal(npurt.where(_d(p), _d(x), _d(y)).to_host(), np.where(p, x, y))
    np.testing.assert_array_equal(npurt.where(_d(p), _d(x), 0.0).to_host(), np.where(p, x, np.float32(0)))
    np.testing.assert_array_equal(npurt.where(_d(p.astype(np.int32)), -1, _d(y)).to_host(), np.where(p, np.float32(-1), y))
    i = rng.integers(0, 9, (4, 6))
    np.testing.assert_array_equal(npurt.where(_d(p), _d(i), _d(i * 10)).to_host(), np.where(p, i, i * 10))


def test_compare_and_where_errors():
    a = _d(np.zeros((3, 4), np.float32))
    with pytest.raises(npurt.InvalidValueError):
        npurt.less(a, _d(np.zeros((2, 4), np.float32)))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.less(a, _d(np.zeros((3, 4), np.int64)))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.equal(a, "x")
    with pytest.raises(npurt.InvalidTypeError):
        npurt.where(a, 1.0, 2.0)
    with pytest.raises(npurt.InvalidValueError):
        npurt.where(_d(np.zeros(5, bool)), a, a)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.erf(_d(np.arange(3)))
