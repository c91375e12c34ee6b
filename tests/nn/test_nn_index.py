"""take (Gather), pad, tile, broadcast_to, arange and topk against numpy: negative
indices, axes, every pad mode with negative pads, tile reps, ONNX Range lengths, topk ties
and both directions; typed errors and the kernel fault of an out-of-range index."""

import npurt
import numpy as np
import pytest

rng = np.random.default_rng(5)


def _d(a):
    return npurt.to_device(a)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
@pytest.mark.parametrize("idt", ["int64", "int32"])
def test_take(axis, idt):
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    n = x.size if axis is None else x.shape[axis]
    idx = rng.integers(-n, n, (2, 3)).astype(idt)
    np.testing.assert_array_equal(npurt.take(_d(x), _d(idx), axis=axis).to_host(), np.take(x, idx, axis=axis))
    s = np.array(-1, idt)  # a scalar index drops the axis
    np.testing.assert_array_equal(npurt.take(_d(x), _d(s), axis=0).to_host(), x[-1])
    xi = rng.integers(0, 100, (6, 2))
    np.testing.assert_array_equal(npurt.take(_d(xi), _d(np.array([5, 0, -6])), axis=0).to_host(), xi[[5, 0, 0]])


def test_take_out_of_range_is_a_stream_error():
    s = npurt.Stream()
    y = npurt.take(_d(np.zeros((3, 2), np.float32)), _d(np.array([0, 3])), axis=0, stream=s)
    with pytest.raises(npurt.Error, match="out of bounds"):
        s.synchronize(timeout=10)
    del y


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes(mode):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    pads = [1, 0, 2, 2, 3, 1]
    ref = np.pad(x, [(1, 2), (0, 3), (2, 1)], mode=mode, **({"constant_values": 1.5} if mode == "constant" else {}))
    np.testing.assert_array_equal(npurt.pad(_d(x), pads, mode=mode, constant_value=1.5).to_host(), ref)
    crop = [0, -1, 1, -1, 0, -2]  # negative pads crop
    ref = np.pad(x[0:2, 1:, :3], [(0, 0), (0, 0), (1, 0)], mode=mode, **({"constant_values": 0} if mode == "constant" else {}))
    np.testing.assert_array_equal(npurt.pad(_d(x), crop, mode=mode).to_host(), ref)


def test_pad_ints_and_errors():
    x = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(npurt.pad(_d(x), [1, 1, 0, 2], constant_value=-7).to_host(), np.pad(x, [(1, 0), (1, 2)], constant_values=-7))
    with pytest.raises(npurt.InvalidValueError):
        npurt.pad(_d(x), [1, 1])
    with pytest.raises(npurt.InvalidValueError):
        npurt.pad(_d(x), [0, 0, 0, 0], mode="mirror")
    with pytest.raises(npurt.InvalidValueError):
        npurt.pad(_d(x), [-3, 0, 0, 0])


def test_tile_and_broadcast_to():
    x = rng.standard_normal((2, 1, 3)).astype(np.float32)
    for reps in ([2, 3, 1], [1, 1, 2], [3], [2, 1, 1, 2], [0, 1, 1]):
        np.testing.assert_array_equal(npurt.tile(_d(x), reps).to_host(), np.tile(x, reps))
    np.testing.assert_array_equal(npurt.tile(_d(x)[:, :, ::2], [2, 2, 2]).to_host(), np.tile(x[:, :, ::2], [2, 2, 2]))
    np.testing.assert_array_equal(npurt.broadcast_to(_d(x), (4, 2, 5, 3)).to_host(), np.broadcast_to(x, (4, 2, 5, 3)))
    assert npurt.broadcast_shapes((2, 1, 3), (4, 1)) == (2, 4, 3)
    with pytest.raises(npurt.InvalidValueError):
        npurt.broadcast_to(_d(x), (2, 2, 2))


def test_arange():
    for args in ((5,), (2, 11, 3), (10, 2, -3), (0.5, 2.0, 0.25), (3, 3), (5, 1), (-2, 3.5, 0.7)):
        got = npurt.arange(*args).to_host()
        ref = np.arange(*args)
        np.testing.assert_allclose(got, ref.astype(got.dtype), rtol=1e-6)
        assert got.dtype == (np.int64 if all(isinstance(a, int) for a in args) else np.float32)
    assert npurt.arange(0, 4, dtype="int32").to_host().dtype == np.int32
    with pytest.raises(npurt.InvalidValueError):
        npurt.arange(0, 4, 0)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.arange("a")


def test_topk():
    x = rng.integers(0, 6, (3, 9)).astype(np.float32)  # many ties
    for largest in (True, False):
        v, i = npurt.topk(_d(x), 4, axis=1, largest=largest)
        key = -x if largest else x
        ref_i = np.argsort(key, axis=1, kind="stable")[:, :4]
        np.testing.assert_array_equal(i.to_host(), ref_i)
        np.testing.assert_array_equal(v.to_host(), np.take_along_axis(x, ref_i, 1))
    y = rng.standard_normal((5, 4, 2)).astype(np.float32)
    v, i = npurt.topk(_d(y), 2, axis=0)
    ref_i = np.argsort(-y, axis=0, kind="stable")[:2]
    np.testing.assert_array_equal(i.to_host(), ref_i)
    assert i.dtype == np.int64
    with pytest.raises(npurt.InvalidValueError):
        npurt.topk(_d(y), 6, axis=0)
