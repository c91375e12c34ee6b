"""torch.npu's RNG names over npurt's per-device Philox generators: seeding, states and
their layout, replay, errors. Reproductions of torch_npu's test_cuda_manual_seed*.py,
test_cuda_get_rng_state_all.py and test_npu.py's get/set_rng_state tests."""

import npurt
import numpy as np
import pytest
from npurt import npu

TORCH_DEFAULT_SEED = 67280421310721


@pytest.fixture(autouse=True)
def _restore_rng():
    saved = npu.get_rng_state_all()
    yield
    npu.set_rng_state_all(saved)


def bits(a):
    return np.asarray(a).view(np.uint32).copy()


def test_manual_seed_returns_none_for_boundary_seeds():
    for s in (42, 0, 2**31 - 1, 2**64 - 1, 123, 123):
        assert npu.manual_seed(s) is None
        assert npu.initial_seed() == s
    assert npu.manual_seed_all(42) is None
    assert [npu.initial_seed(d) for d in range(npu.device_count())] == [42] * npu.device_count()


def test_seed_values_follow_torchs_rules():
    npu.manual_seed(-1)  # torch maps negatives to 0xffff_ffff_ffff_ffff + seed
    assert npu.initial_seed() == 0xFFFF_FFFF_FFFF_FFFF - 1
    npu.manual_seed(np.int64(7))
    assert npu.initial_seed() == 7
    for bad in (2**64, -(2**63) - 1):
        with pytest.raises(npurt.InvalidValueError):
            npu.manual_seed(bad)
    for bad in ([1], True, 1.5j):
        with pytest.raises(npurt.InvalidTypeError):
            npu.manual_seed(bad)


def test_default_seed_in_a_fresh_process():
    from helpers import run_python

    r = run_python("from npurt import npu; print(npu.initial_seed())")
    assert r.returncode == 0 and int(r.stdout) == TORCH_DEFAULT_SEED, r.stderr


def test_state_layout_is_seed_then_offset():
    npu.manual_seed(3)
    st = npu.get_rng_state()
    assert isinstance(st, np.ndarray) and st.dtype == np.uint8 and st.shape == (16,)
    assert int(st[0]) == 3 and st[1:].sum() == 0
    npurt.random.rand(10)  # 10 draws: 3 counter blocks of 4 words
    st = npu.get_rng_state()
    assert int.from_bytes(st[:8].tobytes(), "little") == 3
    assert int.from_bytes(st[8:].tobytes(), "little") == 3
    npu.manual_seed(2)
    assert int(npu.get_rng_state()[0]) == 2 and npu.get_rng_state()[8:].sum() == 0


def test_get_set_rng_state_replays_draws():
    npu.manual_seed(11)
    npurt.random.rand(100)
    state = npu.get_rng_state()
    a, b = npurt.random.rand(1000), npurt.random.randn((10, 10))
    npu.set_rng_state(state)
    np.testing.assert_array_equal(bits(npurt.random.rand(1000)), bits(a))
    np.testing.assert_array_equal(bits(npurt.random.randn((10, 10))), bits(b))
    npu.set_rng_state(bytes(state))  # bytes and lists of ints are states too
    np.testing.assert_array_equal(bits(npurt.random.rand(1000)), bits(a))
    npu.set_rng_state(list(state))
    np.testing.assert_array_equal(bits(npurt.random.rand(1000)), bits(a))


def test_get_set_rng_state_take_every_device_spelling(fresh_dev1):
    for d in ("npu", 0, "npu:0", npurt.Device(0), None):
        npu.set_rng_state(npu.get_rng_state(d), d)
    npu.manual_seed(5, device=1)
    assert npu.initial_seed(1) == 5 and npu.initial_seed("npu:1") == 5
    with pytest.raises(npurt.InvalidDeviceError) as e:
        npu.get_rng_state(9)
    assert e.value.code == 107001
    with pytest.raises(npurt.InvalidDeviceError):
        npu.manual_seed(1, device=2)


def test_bad_states_are_typed_errors():
    st = npu.get_rng_state()
    with pytest.raises(npurt.InvalidValueError) as e:
        npu.set_rng_state(st[:15])
    assert e.value.code == 107000 and "16 bytes" in str(e.value)
    with pytest.raises(npurt.InvalidTypeError):
        npu.set_rng_state(np.full(16, 300))
    with pytest.raises(npurt.InvalidTypeError):
        npu.set_rng_state(object())
    np.testing.assert_array_equal(npu.get_rng_state(), st)


def test_all_devices_states(fresh_dev1):
    npu.manual_seed_all(42)
    s1 = npu.get_rng_state_all()
    assert isinstance(s1, list) and len(s1) == npu.device_count()
    npu.manual_seed_all(123)
    s2 = npu.get_rng_state_all()
    assert len(s1) == len(s2) and all(int(s[0]) == 123 for s in s2)
    npu.set_rng_state_all(s1)
    assert [npu.initial_seed(d) for d in range(npu.device_count())] == [42] * npu.device_count()


def test_seed_draws_a_fresh_nondeterministic_seed():
    npu.manual_seed(1)
    npu.seed()
    a = npu.initial_seed()
    npu.seed()
    b = npu.initial_seed()
    assert a != b and a != 1
    npu.seed_all()
    assert len({npu.initial_seed(d) for d in range(npu.device_count())}) == 1


def test_manual_seed_makes_draws_reproducible_like_torchs_test():
    npu.manual_seed(2)
    x = npurt.random.uniform(0.0, 1.0, (4, 4))
    npu.manual_seed(2)
    y = npurt.random.uniform(0.0, 1.0, (4, 4))
    np.testing.assert_array_equal(bits(x), bits(y))
    assert npu.initial_seed() == 2
    npu.manual_seed(3)
    assert not np.array_equal(bits(npurt.random.uniform(0.0, 1.0, (4, 4))), bits(x))
