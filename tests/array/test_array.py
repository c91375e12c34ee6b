"""npurt.DeviceArray: creation, host round trips, views, dtypes, ordering and errors."""

import npurt
import numpy as np
import pytest

DTYPES = ["float32", "float16", "int32", "int64", "int8", "uint8", "bool"]


def _rand(shape, dtype, rng):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (0,), (3, 0, 2), (5, 7), (2, 3, 4)])
def test_round_trip(dtype, shape):
    rng = np.random.default_rng(0)
    a = _rand(shape, dtype, rng)
    d = npurt.to_device(a)
    assert d.shape == shape and d.dtype == np.dtype(dtype)
    assert d.nbytes == a.nbytes and d.size == a.size and d.ndim == a.ndim
    assert d.device == 0
    h = d.to_host()
    assert h.dtype == a.dtype and h.shape == a.shape
    np.testing.assert_array_equal(h, a)
    np.testing.assert_array_equal(np.asarray(d), a)


def test_float64_becomes_float32_and_bfloat16():
    a = np.linspace(-3, 3, 50)
    d = npurt.to_device(a)
    assert d.dtype == np.float32
    np.testing.assert_allclose(d.to_host(), a, rtol=1e-6)
    b = npurt.to_device(a, dtype="bfloat16")
    assert b.dtype == "bfloat16" and b.dtype_name == "bfloat16" and b.nbytes == 100
    h = b.to_host()
    assert h.dtype == np.float32
    np.testing.assert_allclose(h, a, rtol=2**-8)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16", "bool", "float16"])
def test_empty_zeros_ones_full(dtype):
    assert npurt.empty((2, 3), dtype).shape == (2, 3)
    host = np.float32 if dtype == "bfloat16" else dtype
    np.testing.assert_array_equal(npurt.zeros((2, 3), dtype).to_host(), np.zeros((2, 3), host))
    np.testing.assert_array_equal(npurt.ones(4, dtype).to_host(), np.ones(4, host))
    np.testing.assert_array_equal(npurt.full((3,), 1, dtype).to_host(), np.full(3, 1, host))
    assert npurt.zeros((0, 4), dtype).to_host().shape == (0, 4)


def test_creation_on_device_and_stream(stream):
    z = npurt.zeros((8,), device=1)
    assert z.device == 1
    np.testing.assert_array_equal(z.to_host(), np.zeros(8, np.float32))
    f = npurt.full((1000,), 2.5, stream=stream)
    np.testing.assert_array_equal(f.to_host(), np.full(1000, 2.5, np.float32))


def test_views_without_copy():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = npurt.to_device(a)
    r = d.reshape(6, -1)
    assert r.shape == (6, 4) and r._a.shares_buffer(d._a)
    np.testing.assert_array_equal(r.to_host(), a.reshape(6, 4))
    t = d.T
    assert t.shape == (4, 3, 2) and not t.is_contiguous and t._a.shares_buffer(d._a)
    np.testing.assert_array_equal(t.to_host(), a.T)
    np.testing.assert_array_equal(d.transpose(1, 0, 2).to_host(), a.transpose(1, 0, 2))
    np.testing.assert_array_equal(d[1, :, ::-2].to_host(), a[1, :, ::-2])
    np.testing.assert_array_equal(d[..., 1:3].to_host(), a[..., 1:3])
    assert d.strides == a.strides
    v = d.view()
    assert v._a.shares_buffer(d._a)
    with pytest.raises(npurt.InvalidValueError):
        t.reshape(24)  # needs a copy
    np.testing.assert_array_equal(t.copy().reshape(24).to_host(), a.T.reshape(24))
    with pytest.raises(npurt.InvalidValueError):
        d.reshape(5, 5)
    with pytest.raises(IndexError):
        d[2]


def test_view_outside_buffer_is_refused():
    d = npurt.to_device(np.zeros((4, 4), np.float32))
    with pytest.raises(npurt.InvalidValueError):
        d._a.view(0, "float32", [5, 4], [4, 1])
    with pytest.raises(npurt.InvalidValueError):
        d._a.view(8, "float32", [4, 4], [4, 1])
    with pytest.raises(npurt.InvalidValueError):
        d._a.view(0, "float32", [2, 2], [-4, 1])


def test_copy_astype_copy_():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    d = npurt.to_device(a)
    c = d.copy()
    assert not c._a.shares_buffer(d._a)
    np.testing.assert_array_equal(c.to_host(), a)
    np.testing.assert_array_equal(d.astype("int32").to_host(), a.astype(np.int32))
    np.testing.assert_array_equal(d.astype(np.float16).to_host(), a.astype(np.float16))
    z = npurt.zeros((3, 4))
    z.copy_(npurt.to_device(np.arange(4, dtype=np.float32)))
    np.testing.assert_array_equal(z.to_host(), np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)))
    z.copy_(a)
    np.testing.assert_array_equal(z.to_host(), a)
    z.fill(7)
    assert z.to_host().tolist() == [[7.0] * 4] * 3
    assert npurt.to_device(np.array([3.5], np.float32)).item() == 3.5


def test_to_host_waits_for_pending_writes(stream):
    # A long busy kernel first, then a write: to_host must see the write.
    x = npurt.to_device(np.ones(1 << 16, np.float32))
    npurt.kernels.busy(0.05, stream=stream)
    y = npurt.multiply(x, 3.0, stream=stream)
    np.testing.assert_array_equal(y.to_host(), np.full(1 << 16, 3.0, np.float32))


def test_cross_stream_ordering():
    s1, s2 = npurt.Stream(), npurt.Stream()
    try:
        x = npurt.to_device(np.ones(1 << 16, np.float32))
        npurt.kernels.busy(0.05, stream=s1)
        y = npurt.add(x, 1.0, stream=s1)  # written on s1 (behind a busy kernel)
        z = npurt.multiply(y, 2.0, stream=s2)  # s2 waits for s1 on the device
        np.testing.assert_array_equal(z.to_host(), np.full(1 << 16, 4.0, np.float32))
    finally:
        s1.destroy()
        s2.destroy()


def test_bad_creation_args():
    with pytest.raises(npurt.InvalidTypeError):
        npurt.empty((2,), "complex64")
    with pytest.raises(npurt.InvalidTypeError):
        npurt.to_device(np.zeros(2, np.complex64))
    with pytest.raises(npurt.InvalidValueError):
        npurt.zeros((-1, 2))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.zeros("abc")
    with pytest.raises(npurt.InvalidTypeError):
        npurt.DeviceArray(3)


def test_arrays_on_other_device_are_refused():
    a = npurt.to_device(np.ones(4, np.float32))
    b = npurt.to_device(np.ones(4, np.float32), device=1)
    assert b.device == 1
    with pytest.raises(npurt.WrongContextError):
        npurt.add(a, b)
    with pytest.raises(npurt.WrongContextError):
        _ = b + 1.0  # current stream is on device 0
    s = npurt.current_stream(1)
    np.testing.assert_array_equal(npurt.add(b, 1.0, stream=s).to_host(), np.full(4, 2.0, np.float32))


def test_dlpack_zero_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = npurt.to_device(a)
    assert d.__dlpack_device__() == (1, 0)
    h = np.from_dlpack(d)
    np.testing.assert_array_equal(h, a)
    npurt.multiply(d, 2.0, out=d)  # in place on the device
    d.synchronize()
    np.testing.assert_array_equal(h, a * 2)  # the same memory
    np.testing.assert_array_equal(np.from_dlpack(d.T), (a * 2).T)
    np.testing.assert_array_equal(np.from_dlpack(d[:, ::-1]), (a * 2)[:, ::-1])
    with pytest.raises(npurt.InvalidTypeError):
        npurt.zeros(3, "bfloat16").__dlpack__()


def test_to_device_of_a_device_array():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    d = npurt.to_device(a)
    c = npurt.to_device(d)
    assert not c._a.shares_buffer(d._a)
    np.testing.assert_array_equal(c.to_host(), a)
    e = npurt.to_device(d, device=1)
    assert e.device == 1 and e.dtype == np.float32
    np.testing.assert_array_equal(e.to_host(), a)
    b = npurt.to_device(npurt.to_device(a, dtype="bfloat16"), device=1)
    assert b.dtype == "bfloat16" and b.device == 1
    np.testing.assert_array_equal(b.to_host(), a)
    np.testing.assert_array_equal(npurt.to_device(d, dtype="int32").to_host(), a.astype(np.int32))
