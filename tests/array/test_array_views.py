"""Slicing and movement: basic indexing as views, permute/transpose/.T, reshape without a
copy where the strides allow, ascontiguousarray/copy as kernels, concatenate; and every
kernel taking non-contiguous views as inputs (compared with numpy on the same strided
views)."""

import math

import npurt
import numpy as np
import pytest

F32 = dict(rtol=2e-6, atol=1e-6)
_erf = np.vectorize(math.erf, otypes=[np.float64])

# Views of a (6, 8, 10) array: (name, function applied to both the ndarray and the DeviceArray).
VIEWS = [
    ("step", lambda x: x[::2, 1:, ::3]),
    ("reversed", lambda x: x[::-1, :, ::-2]),
    ("transposed", lambda x: x.transpose(2, 0, 1)),
    ("T-sliced", lambda x: x[1:5].T),
    ("int-index", lambda x: x[:, 3, 1:9]),
    ("newaxis", lambda x: x[None, 2, ..., None][0, ::2, :, 0]),
]


def _pair(seed=0, shape=(6, 8, 10), dtype="float32"):
    rng = np.random.default_rng(seed)
    h = rng.standard_normal(shape).astype(dtype)
    return h, npurt.to_device(h)


@pytest.mark.parametrize(
    "key",
    [
        1,
        -1,
        (slice(None), 2),
        (Ellipsis, 1),
        (slice(1, None, 2), Ellipsis, slice(None, None, -3)),
        (None, slice(2, 4), None, 5),
        (slice(5, 1, -1), slice(None), slice(3, 3)),
        (0, 0, 0),
        (Ellipsis, None),
    ],
)
def test_getitem_is_a_view_like_numpy(key):
    h, d = _pair()
    v = d[key]
    want = h[key]
    assert v.shape == want.shape and v.strides == want.strides
    assert v._a.shares_buffer(d._a)
    np.testing.assert_array_equal(v.to_host(), want)
    with pytest.raises(IndexError):
        d[6]
    with pytest.raises(IndexError):
        d[0, 0, 0, 0]
    with pytest.raises(IndexError):
        d[..., ...]


def test_permute_transpose_T_and_reshape_of_views():
    h, d = _pair(1)
    p = d.permute(2, 0, 1)
    assert p.shape == (10, 6, 8) and p._a.shares_buffer(d._a) and not p.is_contiguous
    np.testing.assert_array_equal(p.to_host(), h.transpose(2, 0, 1))
    np.testing.assert_array_equal(npurt.permute(d, (1, 2, 0)).to_host(), h.transpose(1, 2, 0))
    np.testing.assert_array_equal(d.T.to_host(), h.T)
    with pytest.raises(npurt.InvalidValueError):
        d.permute(0, 1)
    # No-copy reshapes of non-contiguous views (numpy's rule), else a typed error.
    t = d.T  # (10, 8, 6)
    r = t.reshape(5, 2, 48 // 1 // 6, 6)
    assert r._a.shares_buffer(d._a)
    np.testing.assert_array_equal(r.to_host(), h.T.reshape(5, 2, 8, 6))
    s = d[:, ::2]  # (6, 4, 10): the last two dims can merge, not the first
    np.testing.assert_array_equal(s.reshape(6, 2, 2, 10).to_host(), h[:, ::2].reshape(6, 2, 2, 10))
    with pytest.raises(npurt.InvalidValueError):
        s.reshape(-1)
    with pytest.raises(npurt.InvalidValueError):
        t.reshape(480)


def test_ascontiguousarray_and_copy_are_kernels():
    h, d = _pair(2)
    assert npurt.ascontiguousarray(d) is d
    for name, f in VIEWS:
        v = f(d)
        c = npurt.ascontiguousarray(v)
        assert c.is_contiguous and not c._a.shares_buffer(d._a), name
        np.testing.assert_array_equal(c.to_host(), f(h), err_msg=name)
        np.testing.assert_array_equal(v.copy().to_host(), f(h), err_msg=name)
    # Big (batched) 2-D transposes take the tiled kernel; all dtypes by item size.
    for dt in ("float32", "float16", "int64", "uint8"):
        big, dbig = _pair(3, (3, 130, 257), dt)
        np.testing.assert_array_equal(npurt.ascontiguousarray(dbig.permute(0, 2, 1)).to_host(), big.transpose(0, 2, 1))
        np.testing.assert_array_equal(dbig[1].T.copy().to_host(), big[1].T)


def test_concatenate_views():
    h, d = _pair(4)
    parts_h = [h[:, :3].transpose(1, 0, 2), h[::-1, 5:7].transpose(1, 0, 2), h[:, 1:2, ::-1].transpose(1, 0, 2)]
    parts_d = [d[:, :3].transpose(1, 0, 2), d[::-1, 5:7].transpose(1, 0, 2), d[:, 1:2, ::-1].transpose(1, 0, 2)]
    got = npurt.concatenate(parts_d, axis=0)
    np.testing.assert_array_equal(got.to_host(), np.concatenate(parts_h, axis=0))
    np.testing.assert_array_equal(npurt.concatenate([d[0].T, d[1, ::-1].T], axis=-1).to_host(), np.concatenate([h[0].T, h[1, ::-1].T], axis=-1))


UNARY = {
    "exp": np.exp,
    "log": lambda x: np.log(np.abs(x) + 0.5),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "negative": np.negative,
    "abs": np.abs,
}


@pytest.mark.parametrize("name,view", VIEWS, ids=[v[0] for v in VIEWS])
def test_every_kernel_takes_non_contiguous_inputs(name, view):
    h, d = _pair(5)
    hv, dv = view(h).astype(np.float64), view(d)
    assert not dv.is_contiguous
    hw, dw = view(np.flip(h, 0).copy()).astype(np.float64), view(npurt.to_device(np.flip(h, 0).copy()))
    for op, ref in UNARY.items():
        x, hx = (npurt.add(npurt.abs(dv), 0.5), np.abs(hv) + 0.5) if op == "log" else (dv, hv)
        got = getattr(npurt, "log" if op == "log" else op)(x if op == "log" else dv).to_host()
        want = np.log(hx) if op == "log" else ref(hv)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=op)
    for op, ref in (("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply), ("maximum", np.maximum)):
        np.testing.assert_allclose(getattr(npurt, op)(dv, dw).to_host(), ref(hv, hw), **F32, err_msg=op)
        np.testing.assert_allclose(getattr(npurt, op)(dv, 1.5).to_host(), ref(hv, 1.5), **F32, err_msg=op)
    np.testing.assert_allclose(npurt.divide(dv, npurt.add(npurt.abs(dw), 1.0)).to_host(), hv / (np.abs(hw) + 1), rtol=1e-6)
    np.testing.assert_allclose(npurt.axpy(2.0, dv, dw).to_host(), 2 * hv + hw, **F32)
    np.testing.assert_array_equal(npurt.cast(dv, "float16").to_host(), hv.astype(np.float16))
    for axis in (None, 0, -1, (0, 1)):
        np.testing.assert_allclose(npurt.sum(dv, axis=axis).to_host(), hv.sum(axis=axis), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(npurt.mean(dv, axis=axis).to_host(), hv.mean(axis=axis), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(npurt.max(dv, axis=axis).to_host(), hv.max(axis=axis).astype(np.float32))
        np.testing.assert_array_equal(npurt.min(dv, axis=axis).to_host(), hv.min(axis=axis).astype(np.float32))
    np.testing.assert_array_equal(npurt.argmax(dv, axis=1).to_host(), hv.argmax(axis=1))
    np.testing.assert_array_equal(npurt.argmax(dv).to_host(), hv.argmax())
    for axis in (-1, 0):
        e = np.exp(hv - hv.max(axis=axis, keepdims=True))
        np.testing.assert_allclose(npurt.softmax(dv, axis=axis).to_host(), e / e.sum(axis=axis, keepdims=True), rtol=1e-5, atol=1e-7)
        ls = hv - hv.max(axis=axis, keepdims=True)
        np.testing.assert_allclose(npurt.log_softmax(dv, axis=axis).to_host(), ls - np.log(np.exp(ls).sum(axis=axis, keepdims=True)), rtol=1e-5, atol=1e-5)
    n = hv.shape[-1]
    wv, bv = d[0, 0, :n] if n <= 10 else None, d[1, 1, :n] if n <= 10 else None
    if wv is not None:
        hwv, hbv = h[0, 0, :n].astype(np.float64), h[1, 1, :n].astype(np.float64)
        mu, var = hv.mean(-1, keepdims=True), hv.var(-1, keepdims=True)
        np.testing.assert_allclose(npurt.layer_norm(dv, wv, bv).to_host(), (hv - mu) / np.sqrt(var + 1e-5) * hwv + hbv, rtol=1e-4, atol=1e-5)
        rms = np.sqrt((hv * hv).mean(-1, keepdims=True) + 1e-6)
        np.testing.assert_allclose(npurt.rms_norm(dv, wv[::-1]).to_host(), hv / rms * hwv[::-1], rtol=1e-4, atol=1e-5)
    # matmul / gemm on the last two dims of strided views (3-D: batched).
    k = hv.shape[-1]
    wm = npurt.to_device(np.arange(k * 4 * 2, dtype=np.float32).reshape(4, 2 * k) / 50)[:, ::2].T  # (k, 4), strided
    hwm = (np.arange(k * 4 * 2, dtype=np.float32).reshape(4, 2 * k) / 50)[:, ::2].T.astype(np.float64)
    np.testing.assert_allclose(npurt.matmul(dv, wm).to_host(), hv @ hwm, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(npurt.gemm(dv, wm, alpha=0.5, bias=wm[0]).to_host(), 0.5 * hv @ hwm + hwm[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(npurt.matmul(dv[..., 0, :], wm).to_host(), hv[..., 0, :] @ hwm, rtol=1e-5, atol=1e-5)  # 1-D/strided rows


def test_non_contiguous_outputs_and_operators():
    h, d = _pair(6, (8, 12))
    out = npurt.zeros((12, 16))[:, ::2]  # a strided output view
    npurt.multiply(d.T, 2.0, out=out)
    np.testing.assert_allclose(out.to_host(), h.T * 2, **F32)
    v = d[::2, 1::3]
    np.testing.assert_allclose((v * v + 1.0).to_host(), h[::2, 1::3] ** 2 + 1, **F32)
    np.testing.assert_allclose((d[:, :8] @ d.T[:8, ::-1]).to_host(), h[:, :8].astype(np.float64) @ h.T[:8, ::-1], rtol=1e-5, atol=1e-5)


def test_the_no_copy_reshape_rule_is_numpys():
    """``_npurt._reshape_strides`` (the rule DeviceArray.reshape and the model planner use)
    against numpy on transposed and sliced views: a view exactly when numpy's reshape
    shares memory, with numpy's strides."""
    from npurt import _npurt

    rng = np.random.default_rng(3)
    seen = {True: 0, False: 0}
    for _ in range(400):
        nd = int(rng.integers(1, 5))
        shape = [int(d) for d in rng.integers(1, 5, nd)]
        a = np.empty(shape, np.float32).transpose(rng.permutation(nd))
        if rng.random() < 0.3:
            a = a[..., ::2]
        if a.size == 0:
            continue
        # A random factorisation of the size into 1-4 dims (1s included).
        n, new = a.size, []
        for _ in range(int(rng.integers(0, 4))):
            divs = [d for d in range(1, n + 1) if n % d == 0]
            d = divs[int(rng.integers(0, len(divs)))]
            new.append(d)
            n //= d
        new.append(n)
        got = _npurt._reshape_strides(list(a.shape), [s // 4 for s in a.strides], new)
        r = a.reshape(new)
        view = np.shares_memory(r, a)
        seen[view] += 1
        assert (got is not None) == view, (a.shape, a.strides, new)
        if view:  # strides of size-1 dims are arbitrary in both
            want = [s for s, d in zip(r.strides, new, strict=True) if d > 1]
            assert [s * 4 for s, d in zip(got, new, strict=True) if d > 1] == want, (a.shape, a.strides, new, got)
    assert seen[True] > 50 and seen[False] > 50, seen
    assert _npurt._reshape_strides([2, 3], [3, 1], [4, 2]) is None  # element counts differ
