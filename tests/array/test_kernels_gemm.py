"""npurt.gemm / npurt.linear against numpy (float64 references).

Tolerances: float32 rtol 1e-5·4, atol 4e-5·sqrt(k)·scale (f32 accumulation over k terms);
float16 one rounding of the f32 result (rtol 2^-9·4) plus the same accumulation term at
2^-9; bfloat16 the same with 2^-6 (the kernel multiplies half types in f32 and rounds once).
"""

import npurt
import numpy as np
import pytest

TOL = {"float32": 1e-5, "float16": 2**-9, "bfloat16": 2**-6}


def _host(x, dtype):
    """x rounded to dtype, as float64 (bfloat16 through the device cast)."""
    if dtype == "bfloat16":
        return npurt.to_device(x, dtype="bfloat16").to_host().astype(np.float64)
    return x.astype(dtype).astype(np.float64)


def _dev(x, dtype):
    return npurt.to_device(x, dtype=dtype) if dtype == "bfloat16" else npurt.to_device(x.astype(dtype))


def _check(got, want, dtype, k, scale=1.0):
    tol = TOL[dtype]
    got = np.asarray(got, dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=tol * 4, atol=tol * 4 * max(k, 1) ** 0.5 * scale)


def _op(x, t):
    return np.swapaxes(x, -1, -2) if t else x


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("batch", [None, 3])
def test_gemm_alpha_beta_c_bias(dtype, trans_a, trans_b, batch):
    rng = np.random.default_rng(1)
    m, n, k = 33, 20, 17
    lead = () if batch is None else (batch,)
    sa = lead + ((k, m) if trans_a else (m, k))
    sb = lead + ((n, k) if trans_b else (k, n))
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    c, bias = rng.standard_normal(lead + (m, n)), rng.standard_normal(n)
    ha, hb, hc, hbias = (_host(x, dtype) for x in (a, b, c, bias))
    got = npurt.gemm(_dev(a, dtype), _dev(b, dtype), _dev(c, dtype), alpha=0.5, beta=-2.0, bias=_dev(bias, dtype), trans_a=trans_a, trans_b=trans_b)
    assert got.shape == lead + (m, n) and got.dtype_name == dtype
    want = 0.5 * _op(ha, trans_a) @ _op(hb, trans_b) - 2.0 * hc + hbias
    _check(got.to_host(), want, dtype, k, scale=2.0)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gemm_in_place_update_broadcast_c_and_beta_zero(dtype):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 24, 16)).astype(dtype), rng.standard_normal((16, 40)).astype(dtype)
    acc0 = rng.standard_normal((2, 24, 40)).astype(dtype)
    da, db = npurt.to_device(a), npurt.to_device(b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    # c=None with out: C is out's contents (BLAS's in-place update).
    acc = npurt.to_device(acc0)
    assert npurt.gemm(da, db, alpha=2.0, beta=0.5, out=acc) is acc
    _check(acc.to_host(), 2.0 * a64 @ b64 + 0.5 * acc0.astype(np.float64), dtype, 16, scale=2.0)
    # a broadcast C (a row vector) and C given as out itself.
    row = rng.standard_normal((1, 40)).astype(dtype)
    got = npurt.gemm(da, db, npurt.to_device(row), beta=1.0)
    _check(got.to_host(), a64 @ b64 + row.astype(np.float64), dtype, 16)
    same = npurt.to_device(acc0)
    npurt.gemm(da, db, same, beta=1.0, out=same)
    _check(same.to_host(), a64 @ b64 + acc0.astype(np.float64), dtype, 16)
    # beta = 0 never reads C: NaNs there do not propagate.
    nan = npurt.full((2, 24, 40), float("nan"), dtype)
    npurt.gemm(da, db, nan, beta=0.0, out=nan)
    _check(nan.to_host(), a64 @ b64, dtype, 16)


def test_gemm_integer_and_big_tiled_case_and_block_counts():
    rng = np.random.default_rng(3)
    a, b = rng.integers(-9, 9, (20, 30)).astype(np.int32), rng.integers(-9, 9, (30, 10)).astype(np.int32)
    bias = rng.integers(-9, 9, 10).astype(np.int32)
    got = npurt.gemm(npurt.to_device(a), npurt.to_device(b), alpha=3, bias=npurt.to_device(bias)).to_host()
    np.testing.assert_array_equal(got, 3 * (a.astype(np.int64) @ b) + bias)
    # Big enough to be cut into tiles: the bias epilogue and the scaling are per tile, and
    # the result does not depend on the block count.
    x, w = rng.standard_normal((300, 256)).astype(np.float32), rng.standard_normal((384, 256)).astype(np.float32)
    bv = rng.standard_normal(384).astype(np.float32)
    dx, dw, db = npurt.to_device(x), npurt.to_device(w), npurt.to_device(bv)
    outs = [npurt.gemm(dx, dw, bias=db, alpha=0.25, trans_b=True, blocks=nb).to_host() for nb in (1, 3, None)]
    _check(outs[0], 0.25 * x.astype(np.float64) @ w.T.astype(np.float64) + bv, "float32", 256)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_linear_matches_torch_semantics():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 5, 12)).astype(np.float32), rng.standard_normal((7, 12)).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    dx, dw, db = npurt.to_device(x), npurt.to_device(w), npurt.to_device(b)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + b
    got = npurt.linear(dx, dw, db)
    assert got.shape == (2, 5, 7)
    _check(got.to_host(), want, "float32", 12)
    _check(npurt.linear(dx, dw).to_host(), want - b, "float32", 12)
    _check(npurt.linear(dx[0, 1], dw, db).to_host(), want[0, 1], "float32", 12)  # 1-D x
    # a non-contiguous x that cannot be flattened without a copy, and out=
    xt = npurt.to_device(np.ascontiguousarray(x.transpose(1, 0, 2))).transpose(1, 0, 2)
    out = npurt.empty((2, 5, 7))
    assert npurt.linear(xt, dw, db, out=out) is out
    _check(out.to_host(), want, "float32", 12)


def test_gemm_errors_are_typed_before_queueing():
    a, b = npurt.ones((4, 5)), npurt.ones((5, 6))
    with pytest.raises(npurt.InvalidValueError):
        npurt.gemm(a, a)  # inner dimensions differ
    with pytest.raises(npurt.InvalidValueError):
        npurt.gemm(a, b, bias=npurt.ones(5))  # bias length != N
    with pytest.raises(npurt.InvalidValueError):
        npurt.gemm(a, b, npurt.ones((3, 6)), beta=1.0)  # C does not broadcast
    with pytest.raises(npurt.InvalidValueError):
        npurt.gemm(a, b, beta=1.0)  # no C and no out
    with pytest.raises(npurt.InvalidValueError):
        npurt.gemm(a, b, out=npurt.empty((4, 5)))
    with pytest.raises(npurt.InvalidValueError):
        npurt.gemm(npurt.ones(5), b)  # vectors: use matmul
    with pytest.raises(npurt.InvalidTypeError):
        npurt.gemm(a, npurt.ones((5, 6), "float16"))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.gemm(a, b, bias=npurt.ones(6, "float16"))
    with pytest.raises(npurt.InvalidValueError):
        npurt.gemm(npurt.ones((4, 5), "int32"), npurt.ones((5, 6), "int32"), alpha=0.5)  # not integral
    with pytest.raises(npurt.InvalidValueError):
        npurt.gemm(a, b, out=a)  # out overlaps an input
    with pytest.raises(npurt.InvalidValueError):
        npurt.linear(npurt.ones((3, 4)), npurt.ones((2, 5)))
