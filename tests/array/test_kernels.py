"""npurt's tensor kernels against numpy: elementwise (hypothesis, broadcasting), reductions,
softmax/norms, matmul, movement, operators, typed errors, an MLP on two streams and
determinism across worker counts."""

import math

import npurt
import numpy as np
import pytest
from helpers import run_python
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FAST = settings(max_examples=25, deadline=None)
TOL = {"float32": dict(rtol=2e-6, atol=1e-6), "float16": dict(rtol=2**-9, atol=2**-13)}
_erf = np.vectorize(math.erf, otypes=[np.float64])

BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


def _data(shape, dtype, rng, positive=False):
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(shape)
        if positive:
            x = np.abs(x) + 0.1
        return x.astype(dtype)
    return rng.integers(-50, 50, size=shape).astype(dtype)


def _close(got, want, dtype):
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, want, **TOL[np.dtype(dtype).name])
    else:
        np.testing.assert_array_equal(got, want)


# -- elementwise -----------------------------------------------------------------------


@FAST
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=5),
    op=st.sampled_from(sorted(BINARY)),
    dtype=st.sampled_from(["float32", "float16", "int32"]),
    seed=st.integers(0, 2**16),
)
def test_binary_broadcast(shapes, op, dtype, seed):
    rng = np.random.default_rng(seed)
    (sa, sb), want_shape = shapes.input_shapes, shapes.result_shape
    a, b = _data(sa, dtype, rng), _data(sb, dtype, rng, positive=(op == "divide"))
    got = getattr(npurt, op)(npurt.to_device(a), npurt.to_device(b)).to_host()
    assert got.shape == want_shape
    if op == "divide" and dtype == "int32":
        want = a.astype(np.float32) / b.astype(np.float32)
        dtype = "float32"
    else:
        want = BINARY[op](a, b)
    assert got.dtype == np.dtype(dtype)
    _close(got, want.astype(dtype), dtype)


@FAST
@given(
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
    op=st.sampled_from(sorted(BINARY)),
    scalar=st.sampled_from([2, -3, 0.5, 1.75]),
    left=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_binary_scalar(shape, op, scalar, left, seed):
    rng = np.random.default_rng(seed)
    a = _data(shape, "float32", rng, positive=True)
    d = npurt.to_device(a)
    got = (getattr(npurt, op)(scalar, d) if left else getattr(npurt, op)(d, scalar)).to_host()
    want = BINARY[op](np.float32(scalar), a) if left else BINARY[op](a, np.float32(scalar))
    _close(got, want.astype(np.float32), "float32")


def test_binary_transposed_and_out():
    rng = np.random.default_rng(1)
    a, b = _data((6, 5), "float32", rng), _data((5, 6), "float32", rng)
    da, db = npurt.to_device(a), npurt.to_device(b)
    out = npurt.empty((5, 6))
    r = npurt.add(da.T, db, out=out)
    assert r is out
    _close(out.to_host(), a.T + b, "float32")
    npurt.multiply(out, out, out=out)  # exactly the same view: in place
    _close(out.to_host(), (a.T + b) ** 2, "float32")


def test_int_scalar_and_int_divide():
    a = np.arange(-5, 5, dtype=np.int32)
    d = npurt.to_device(a)
    np.testing.assert_array_equal((d + 3).to_host(), a + 3)
    np.testing.assert_array_equal((d * -2).to_host(), a * -2)
    np.testing.assert_allclose((d / 4).to_host(), a / 4)
    assert (d / 4).dtype == np.float32
    with pytest.raises(npurt.InvalidTypeError):
        d + 0.5


UNARY = {
    "exp": (np.exp, False),
    "log": (np.log, True),
    "sqrt": (np.sqrt, True),
    "tanh": (np.tanh, False),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), False),
    "relu": (lambda x: np.maximum(x, 0), False),
    "gelu": (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), False),
    "silu": (lambda x: x / (1 + np.exp(-x)), False),
    "rsqrt": (lambda x: 1 / np.sqrt(x), True),
    "abs": (np.abs, False),
    "negative": (np.negative, False),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", [(0,), (1,), (7, 13), (3, 0, 2), (2, 33, 5)])
def test_unary(name, dtype, shape):
    ref, positive = UNARY[name]
    a = _data(shape, dtype, np.random.default_rng(2), positive=positive)
    got = getattr(npurt, name)(npurt.to_device(a)).to_host()
    want = ref(a.astype(np.float64)).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else TOL["float16"]
    np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("name", ["exp", "tanh", "gelu", "relu"])
def test_unary_transposed(name):
    ref, _ = UNARY[name]
    a = _data((9, 17), "float32", np.random.default_rng(3))
    got = getattr(npurt, name)(npurt.to_device(a).T).to_host()
    np.testing.assert_allclose(got, ref(a.T.astype(np.float64)).astype(np.float32), rtol=1e-5, atol=1e-6)


def test_gelu_tanh_and_int_relu():
    a = _data((100,), "float32", np.random.default_rng(4))
    want = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))
    np.testing.assert_allclose(npurt.gelu(npurt.to_device(a), approximate="tanh").to_host(), want, rtol=1e-5, atol=1e-6)
    i = np.arange(-4, 4, dtype=np.int64)
    np.testing.assert_array_equal(npurt.relu(npurt.to_device(i)).to_host(), np.maximum(i, 0))


# -- reductions ------------------------------------------------------------------------


@FAST
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
    data=st.data(),
    op=st.sampled_from(["sum", "mean", "max", "min"]),
    dtype=st.sampled_from(["float32", "int32", "float16"]),
    keepdims=st.booleans(),
)
def test_reductions(shape, data, op, dtype, keepdims):
    ndim = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1), st.just(tuple(range(ndim)))))
    if op == "mean" and dtype == "int32":
        dtype = "float32"
    a = _data(shape, dtype, np.random.default_rng(5))
    got = getattr(npurt, op)(npurt.to_device(a), axis=axis, keepdims=keepdims).to_host()
    want = getattr(np, op)(a.astype(np.float64), axis=axis, keepdims=keepdims)
    assert got.shape == np.shape(want)
    if dtype == "int32":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want.astype(dtype), rtol=1e-5 if dtype == "float32" else 2**-9, atol=1e-5)


def test_reduction_dtypes_and_edges():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    s = npurt.sum(npurt.to_device(a), axis=1)
    assert s.dtype == np.int64
    np.testing.assert_array_equal(s.to_host(), a.sum(1))
    assert npurt.sum(npurt.to_device(np.zeros((0, 3), np.float32))).to_host() == 0
    np.testing.assert_array_equal(npurt.sum(npurt.to_device(np.zeros((0, 3), np.float32)), axis=0).to_host(), np.zeros(3))
    with pytest.raises(npurt.InvalidValueError):
        npurt.max(npurt.to_device(np.zeros((0, 3), np.float32)), axis=0)
    with pytest.raises(npurt.InvalidValueError):
        npurt.sum(npurt.to_device(a), axis=2)
    t = npurt.to_device(a.astype(np.float32)).T
    np.testing.assert_allclose(npurt.mean(t, axis=0).to_host(), a.T.mean(0))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_argmax(axis):
    a = np.random.default_rng(6).standard_normal((7, 9)).astype(np.float32)
    a[3, 4] = a[3, 5] = 10.0  # first maximum wins
    got = npurt.argmax(npurt.to_device(a), axis=axis).to_host()
    np.testing.assert_array_equal(got, np.argmax(a, axis=axis))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(npurt.argmax(npurt.to_device(a).T, axis=axis).to_host(), np.argmax(a.T, axis=axis))


# -- rows ------------------------------------------------------------------------------


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape,axis", [((4, 33), -1), ((3, 5, 7), 1), ((1,), 0), ((6, 1), -1), ((0, 5), -1)])
def test_softmax(dtype, shape, axis):
    a = _data(shape, dtype, np.random.default_rng(7)) * 3
    ref = _softmax(a.astype(np.float64), axis)
    tol = dict(rtol=1e-5, atol=1e-7) if dtype == "float32" else dict(rtol=2**-9, atol=2**-12)
    np.testing.assert_allclose(npurt.softmax(npurt.to_device(a), axis=axis).to_host(), ref.astype(dtype), **tol)
    lref = np.log(ref) if ref.size else ref
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=2**-9, atol=2**-8)
    np.testing.assert_allclose(npurt.log_softmax(npurt.to_device(a), axis=axis).to_host(), lref.astype(dtype), **tol)


def test_softmax_transposed():
    a = _data((16, 8), "float32", np.random.default_rng(8))
    np.testing.assert_allclose(npurt.softmax(npurt.to_device(a).T).to_host(), _softmax(a.T.astype(np.float64)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_rms_norm(dtype, affine):
    rng = np.random.default_rng(9)
    x = _data((5, 3, 64), dtype, rng)
    w, b = _data((64,), dtype, rng), _data((64,), dtype, rng)
    x64 = x.astype(np.float64)
    m, v = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    want = (x64 - m) / np.sqrt(v + 1e-5)
    rms = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6)
    dw = npurt.to_device(w) if affine else None
    db = npurt.to_device(b) if affine else None
    if affine:
        want = want * w + b
        rms = rms * w
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=2**-8, atol=2**-8)
    np.testing.assert_allclose(npurt.layer_norm(npurt.to_device(x), dw, db, eps=1e-5).to_host(), want.astype(dtype), **tol)
    np.testing.assert_allclose(npurt.rms_norm(npurt.to_device(x), dw).to_host(), rms.astype(dtype), **tol)


# -- matmul ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sa,sb",
    [((5, 7), (7, 3)), ((1, 1), (1, 1)), ((7,), (7, 3)), ((5, 7), (7,)), ((7,), (7,)), ((2, 5, 7), (2, 7, 3)), ((2, 5, 7), (7, 3)), ((64, 130), (130, 65)), ((0, 4), (4, 3)), ((3, 0), (0, 4))],
)
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_matmul(sa, sb, dtype):
    rng = np.random.default_rng(10)
    a, b = _data(sa, dtype, rng), _data(sb, dtype, rng)
    got = npurt.matmul(npurt.to_device(a), npurt.to_device(b)).to_host()
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape
    if dtype == "int32":
        np.testing.assert_array_equal(got, want.astype(np.int32))
    else:
        k = sa[-1]
        tol = 1e-5 if dtype == "float32" else 2**-9
        np.testing.assert_allclose(got, want.astype(dtype), rtol=tol * 4, atol=tol * max(k, 1) ** 0.5 * 4)


def test_matmul_transposed_inputs_operator_and_out():
    rng = np.random.default_rng(11)
    a, b = _data((40, 30), "float32", rng), _data((50, 40), "float32", rng)
    da, db = npurt.to_device(a), npurt.to_device(b)
    np.testing.assert_allclose((da.T @ db.T).to_host(), a.T @ b.T, rtol=1e-4, atol=1e-4)
    out = npurt.empty((30, 50))
    assert npurt.matmul(da.T, db.T, out=out) is out
    np.testing.assert_allclose(out.to_host(), a.T @ b.T, rtol=1e-4, atol=1e-4)
    with pytest.raises(npurt.InvalidValueError):
        npurt.matmul(da, da)
    with pytest.raises(npurt.InvalidValueError):
        npurt.matmul(da, db.T, out=npurt.empty((3, 3)))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.matmul(da, npurt.to_device(b.astype(np.float16)))


# -- movement, operators ---------------------------------------------------------------


def test_concat_transpose():
    rng = np.random.default_rng(12)
    xs = [_data((2, n, 3), "float32", rng) for n in (1, 4, 2)]
    got = npurt.concat([npurt.to_device(x) for x in xs], axis=1).to_host()
    np.testing.assert_array_equal(got, np.concatenate(xs, axis=1))
    a = _data((3, 4, 5), "float32", rng)
    np.testing.assert_array_equal(npurt.transpose(npurt.to_device(a), (2, 0, 1)).copy().to_host(), a.transpose(2, 0, 1))
    with pytest.raises(npurt.InvalidValueError):
        npurt.concat([npurt.to_device(xs[0]), npurt.to_device(a)], axis=1)


def test_operators():
    rng = np.random.default_rng(13)
    a, b = _data((4, 5), "float32", rng), _data((5,), "float32", rng, positive=True)
    da, db = npurt.to_device(a), npurt.to_device(b)
    _close((da + db).to_host(), a + b, "float32")
    _close((da - db).to_host(), a - b, "float32")
    _close((da * db).to_host(), a * b, "float32")
    _close((da / db).to_host(), a / b, "float32")
    _close((2 - da).to_host(), 2 - a, "float32")
    _close((1.0 / db).to_host(), 1 / b, "float32")
    _close((-da).to_host(), -a, "float32")
    _close((da @ db).to_host(), a @ b, "float32")
    c = da.copy()
    c += db
    c *= 2
    _close(c.to_host(), (a + b) * 2, "float32")


def test_axpy():
    rng = np.random.default_rng(14)
    x, y = _data((1000,), "float32", rng), _data((1000,), "float32", rng)
    o = npurt.empty(1000)
    npurt.axpy(2.0, npurt.to_device(x), npurt.to_device(y), out=o)
    _close(o.to_host(), 2 * x + y, "float32")


def test_bad_args_are_typed_before_queueing():
    a = npurt.to_device(np.ones((3, 4), np.float32))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.add(a, "x")
    with pytest.raises(npurt.InvalidTypeError):
        npurt.add(1, 2)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.exp(np.ones(3))
    with pytest.raises(npurt.InvalidValueError):
        npurt.add(a, a, out=npurt.empty((4, 4)))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.add(a, a, out=npurt.empty((3, 4), "float16"))
    with pytest.raises(npurt.InvalidValueError):
        npurt.softmax(a, axis=2)
    with pytest.raises(npurt.InvalidValueError):
        npurt.layer_norm(a, npurt.to_device(np.ones(5, np.float32)))
    with pytest.raises(npurt.InvalidValueError):
        npurt.add(a, 1.0, out=a.T)  # overlaps the input without being the same view
    with pytest.raises(npurt.InvalidTypeError):
        npurt.add(a, 1.0, stream=3)
    e = None
    try:
        npurt.add(a, a, out=npurt.empty((4, 4)))
    except npurt.Error as err:
        e = err
    assert e.code == 107000


def test_worker_fault_is_sticky_on_the_stream(stream):
    x = npurt.to_device(np.ones(8, np.float32))
    npurt.kernels.fault(stream=stream)
    with pytest.raises(npurt.TaskFailedError):  # at the launch (fault already ran) or the read
        y = npurt.add(x, 1.0, stream=stream)
        y.to_host()


# -- the "done when": an MLP on two streams ------------------------------------


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def test_mlp_forward_on_two_streams():
    rng = np.random.default_rng(15)
    d_in, d_h, d_out = 64, 128, 10
    w1, b1 = rng.standard_normal((d_in, d_h)).astype(np.float32) * 0.1, rng.standard_normal(d_h).astype(np.float32)
    w2, b2 = rng.standard_normal((d_h, d_out)).astype(np.float32) * 0.1, rng.standard_normal(d_out).astype(np.float32)
    xs = [rng.standard_normal((32, d_in)).astype(np.float32) for _ in range(2)]
    W1, B1, W2, B2 = (npurt.to_device(v) for v in (w1, b1, w2, b2))
    streams = [npurt.Stream(), npurt.Stream()]
    try:
        outs = []
        for x, s in zip(xs, streams, strict=False):
            with npurt.stream(s):  # operators use the current stream
                h = npurt.gelu(npurt.to_device(x) @ W1 + B1)
                outs.append(npurt.softmax(h @ W2 + B2, axis=-1))
        for x, o in zip(xs, outs, strict=False):
            want = _softmax(_gelu(x.astype(np.float64) @ w1 + b1) @ w2 + b2)
            np.testing.assert_allclose(np.asarray(o), want, rtol=1e-4, atol=1e-6)
    finally:
        for s in streams:
            s.destroy()


# -- determinism -----------------------------------------------------------------------

_DET = """
import hashlib, numpy as np, npurt
rng = np.random.default_rng(0)
a = npurt.to_device(rng.standard_normal((300, 257)).astype(np.float32))
b = npurt.to_device(rng.standard_normal((257, 190)).astype(np.float32))
v = npurt.to_device(rng.standard_normal(1 << 18).astype(np.float32))
h = hashlib.sha256()
for r in (npurt.matmul(a, b), npurt.sum(v), npurt.sum(a, axis=0), npurt.softmax(a), npurt.layer_norm(a), npurt.mean(a.T, axis=1)):
    h.update(r.to_host().tobytes())
print(h.hexdigest())
"""


def test_results_do_not_depend_on_worker_count():
    digests = set()
    for workers in ("1", "2"):
        r = run_python(_DET, env={"NPURT_WORKER_THREADS": workers})
        assert r.returncode == 0, r.stderr
        digests.add(r.stdout.strip())
    assert len(digests) == 1


def test_matmul_block_count_override_gives_the_same_result():
    rng = np.random.default_rng(3)
    a = npurt.to_device(rng.standard_normal((300, 200), dtype=np.float32))
    b = npurt.to_device(rng.standard_normal((200, 260), dtype=np.float32))
    want = npurt.matmul(a, b).to_host()
    for blocks in (1, 3, 64):
        np.testing.assert_array_equal(npurt.matmul(a, b, blocks=blocks).to_host(), want)
    for bad in (0, -1, 70_000):
        with pytest.raises(npurt.InvalidValueError):
            npurt.matmul(a, b, blocks=bad)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.matmul(a, b, blocks=1.5)
