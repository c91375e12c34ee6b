"""npurt.random's kernels: distributions (moments and bucket tests on 10^6 draws),
determinism per seed, offsets reserved at launch (results independent of scheduling),
independence across streams, dtypes, devices and argument errors."""

import math
import threading

import npurt
import numpy as np
import pytest
from helpers import LONG, run_in_thread

N = 1_000_000


@pytest.fixture(autouse=True)
def _restore_rng():
    saved = npurt.random.get_rng_state_all()
    yield
    npurt.random.set_rng_state_all(saved)


def bits(a):
    return np.asarray(a).view(np.uint32).copy()


def chi2_uniform(x, lo, hi, k=100):
    counts, _ = np.histogram(x, bins=k, range=(lo, hi))
    exp = len(x) / k
    return float(((counts - exp) ** 2 / exp).sum())


# chi-square with 99 degrees of freedom: the 99.99th percentile is about 158.
CHI2_99_LIMIT = 158.0


def test_rand_is_uniform_on_0_1():
    npurt.random.manual_seed(1234)
    x = np.asarray(npurt.random.rand(N)).astype(np.float64)
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(x.var() - 1 / 12) < 0.002
    assert chi2_uniform(x, 0.0, 1.0) < CHI2_99_LIMIT
    # neighbouring draws (words of one counter block, and of adjacent blocks) are uncorrelated
    for lag in (1, 2, 3, 4, 5):
        assert abs(np.corrcoef(x[:-lag], x[lag:])[0, 1]) < 0.005


def test_uniform_scales_and_shifts():
    npurt.random.manual_seed(7)
    x = np.asarray(npurt.random.uniform(-3.0, 5.0, (1000, 1000))).astype(np.float64)
    assert x.shape == (1000, 1000) and x.min() >= -3.0 and x.max() <= 5.0
    assert abs(x.mean() - 1.0) < 5 * 8 / math.sqrt(12 * N)
    assert chi2_uniform(x.ravel(), -3.0, 5.0) < CHI2_99_LIMIT
    assert (np.asarray(npurt.random.uniform(2.0, 2.0, 10)) == 2.0).all()


def _normal_cdf(v):
    return 0.5 * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0)))


def test_randn_is_standard_normal():
    npurt.random.manual_seed(99)
    z = np.asarray(npurt.random.randn(N)).astype(np.float64)
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.var() - 1.0) < 5 * math.sqrt(2 / N)
    assert abs((z**3).mean()) < 0.02 and abs((z**4).mean() - 3.0) < 0.05  # skew, kurtosis
    # Kolmogorov–Smirnov on a 20 000-draw subsample: D < 1.63/sqrt(n) (alpha = 0.01).
    sub = np.sort(z[::50])
    n = len(sub)
    cdf = _normal_cdf(sub)
    d = max((np.arange(1, n + 1) / n - cdf).max(), (cdf - np.arange(n) / n).max())
    assert d < 1.63 / math.sqrt(n)
    # equal-probability buckets of N(0, 1): the draws' CDF values are uniform
    assert chi2_uniform(_normal_cdf(z[:200_000]), 0.0, 1.0) < CHI2_99_LIMIT


def test_normal_mean_and_std():
    npurt.random.manual_seed(5)
    x = np.asarray(npurt.random.normal(10.0, 0.5, N)).astype(np.float64)
    assert abs(x.mean() - 10.0) < 5 * 0.5 / math.sqrt(N)
    assert abs(x.std() - 0.5) < 0.002
    assert (np.asarray(npurt.random.normal(1.5, 0.0, 8)) == 1.5).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_dtypes(dtype):
    npurt.random.manual_seed(3)
    u = npurt.random.rand((256, 256), dtype=dtype)
    assert u.dtype_name == dtype
    x = np.asarray(u).astype(np.float64)
    assert x.min() >= 0.0 and x.max() < 1.0 and abs(x.mean() - 0.5) < 0.01
    z = np.asarray(npurt.random.randn(100_000, dtype=dtype)).astype(np.float64)
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1.0) < 0.02


def test_same_seed_same_bits():
    npurt.random.manual_seed(2024)
    a = [npurt.random.rand(5000), npurt.random.randn(777), npurt.random.normal(1.0, 2.0, (3, 5))]
    npurt.random.manual_seed(2024)
    b = [npurt.random.rand(5000), npurt.random.randn(777), npurt.random.normal(1.0, 2.0, (3, 5))]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(bits(x), bits(y))
    npurt.random.manual_seed(2025)
    assert not np.array_equal(bits(npurt.random.rand(5000)), bits(a[0]))


def test_a_launch_reserves_its_offset_when_queued(stream):
    """Offsets are taken at launch: a busy stream's pending draw does not shift another
    stream's, and the values are those of the launch order, whatever ran first."""
    npurt.random.manual_seed(8)
    ref_a, ref_b = npurt.random.rand(4096), npurt.random.rand(4096)  # one stream, in order
    other = npurt.Stream()
    npurt.random.manual_seed(8)
    npurt.kernels.busy(0.05, stream=stream)  # stream's draw will run after other's
    a = npurt.random.rand(4096, stream=stream)
    b = npurt.random.rand(4096, stream=other)
    np.testing.assert_array_equal(bits(b), bits(ref_b))
    np.testing.assert_array_equal(bits(a), bits(ref_a))
    other.destroy()


def test_streams_draw_independent_values():
    npurt.random.manual_seed(17)
    s1, s2 = npurt.Stream(), npurt.Stream()
    xs = [npurt.random.rand(100_000, stream=s) for s in (s1, s2, s1, s2)]
    host = [np.asarray(x).astype(np.float64) for x in xs]
    for i in range(4):
        for j in range(i + 1, 4):
            assert abs(np.corrcoef(host[i], host[j])[0, 1]) < 0.015
            assert not np.array_equal(host[i], host[j])
    # launches from two threads at once: every draw comes from its own counter range
    npurt.random.manual_seed(17)

    got = {}

    def draw(s):
        got[s] = [bits(npurt.random.rand(10_000, stream=s)) for _ in range(20)]

    threads = [threading.Thread(target=draw, args=(s,)) for s in (s1, s2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(LONG)
    assert len(got) == 2
    # each launch drew one whole window of the seed's counter stream, no two the same one
    npurt.random.manual_seed(17)
    ref = bits(npurt.random.rand(400_000)).reshape(40, 10_000)
    windows = {next(k for k in range(40) if np.array_equal(ref[k], g)) for g in got[s1] + got[s2]}
    assert windows == set(range(40))
    for s in (s1, s2):
        s.destroy()


def test_generators_are_per_device(fresh_dev1):
    npurt.random.manual_seed(1, device=0)
    npurt.random.manual_seed(1, device=1)
    before0 = npurt.random.get_rng_state(0)

    def on_1():
        s = npurt.Stream(device=1)
        x = npurt.random.rand(64, stream=s)
        out = (x.device, np.asarray(x))
        s.destroy()
        return out

    dev, x1 = run_in_thread(on_1)
    assert dev == 1
    np.testing.assert_array_equal(npurt.random.get_rng_state(0), before0)
    assert int.from_bytes(npurt.random.get_rng_state(1)[8:].tobytes(), "little") == 16
    np.testing.assert_array_equal(bits(npurt.random.rand(64)), bits(x1))  # same seed, same offset


def test_bad_arguments_are_typed_errors():
    before = npurt.random.get_rng_state()
    with pytest.raises(npurt.InvalidTypeError):
        npurt.random.rand(4, dtype="int32")
    with pytest.raises(npurt.InvalidTypeError):
        npurt.random.rand(4, dtype="float64x")
    with pytest.raises(npurt.InvalidValueError):
        npurt.random.uniform(1.0, 0.0, 4)
    with pytest.raises(npurt.InvalidValueError):
        npurt.random.uniform(0.0, float("inf"), 4)
    with pytest.raises(npurt.InvalidValueError):
        npurt.random.normal(0.0, -1.0, 4)
    with pytest.raises(npurt.InvalidValueError):
        npurt.random.rand((2, -1))
    with pytest.raises(npurt.InvalidTypeError):
        npurt.random.normal("0", 1.0, 4)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.random.rand(4, stream="s")
    np.testing.assert_array_equal(npurt.random.get_rng_state(), before)  # nothing reserved
    assert npurt.random.rand(0).size == 0 and npurt.random.rand(()).shape == ()
