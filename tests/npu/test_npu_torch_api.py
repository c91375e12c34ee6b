"""npurt.npu as torch.npu / torch.cuda code uses it: the device class and device_of,
lazy initialisation, the no-op names tests probe, device arguments and their errors,
stream attributes and contexts, set_stream, events, and the tutorial dialect
(stream(priority=), H2D, D2H). Small reproductions of what torch_npu's own tests do."""

import npurt
import numpy as np
import pytest
from helpers import run_in_thread, run_python
from npurt import npu


def test_device_is_a_class_and_a_context_manager(fresh_dev1):
    d = npu.device(0)
    assert isinstance(d, npu.device) and d.idx == 0
    assert isinstance(npu.device("npu:1"), npu.device) and npu.device("npu:1").idx == 1
    with npu.device(0):
        assert npu.current_device() == 0

    def switch():
        with npu.device(1):
            assert npu.current_device() == 1
            with npu.device("npu:0"):
                assert npu.current_device() == 0
            assert npu.current_device() == 1
        after = npu.current_device()
        with npu.device(None), npu.device(-1):  # no-ops, as in torch
            same = npu.current_device()
        return after, same

    assert run_in_thread(switch) == (0, 0)
    with pytest.raises(npurt.InvalidDeviceError) as e:
        with npu.device(7):
            pass
    assert e.value.code == 107001
    assert npu.current_device() == 0


def test_device_of_follows_the_objects_device(fresh_dev1):
    def on_1():
        x = npurt.zeros(4, device=1)
        assert isinstance(npu.device_of(x), npu.device_of) and isinstance(npu.device_of(x), npu.device)
        with npu.device_of(x):
            inside = npu.current_device()
        with npu.device_of(object()):  # nothing to follow: no change
            unchanged = npu.current_device()
        return inside, unchanged, npu.current_device()

    assert run_in_thread(on_1) == (1, 0, 0)


def test_lazy_initialisation_in_a_fresh_process():
    r = run_python(
        """
        from npurt import npu
        assert npu.is_initialized() is False
        npu.init()
        assert npu.is_initialized() is True
        print("ok")
        """
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_names_tests_probe():
    assert npu.is_initialized() is True and isinstance(npu.is_initialized(), bool)
    assert npu.current_blas_handle() == 0
    assert npu.ipc_collect() is None and npu.empty_cache() is None
    assert npu.is_bf16_supported() is True
    assert npu.is_current_stream_capturing() is False
    assert npu.get_device_capability() is None
    npu.set_sync_debug_mode("warn")
    assert npu.get_sync_debug_mode() == 1
    npu.set_sync_debug_mode(0)
    assert npu.get_sync_debug_mode() == 0
    with pytest.raises(ValueError):
        npu.set_sync_debug_mode("loud")
    for d in (None, "npu", "npu:0", 0, npurt.Device(0)):
        assert npu.synchronize(d) is None


def test_device_index_errors_read_like_torch_npus():
    class TorchDevice:  # torch.device's shape: .type and .index
        def __init__(self, type, index=None):
            self.type, self.index = type, index

    assert npu._get_device_index(TorchDevice("npu", 1)) == 1
    assert npu._get_device_index("npu", optional=True) is None
    assert npu._get_device_index("npu", optional=False) == 0
    with pytest.raises(ValueError, match="Invalid device string"):
        npu._get_device_index("npu0", optional=True)
    for bad in ("cpu", TorchDevice("cpu")):
        with pytest.raises(ValueError, match="Expected a npu device, but"):
            npu.synchronize(bad)
    with pytest.raises(npurt.InvalidValueError):
        npu.get_rng_state("cuda:0")
    npu.synchronize(TorchDevice("npu", 0))


def test_stream_attributes_and_equality():
    default = npu.current_stream()
    user = npu.Stream()
    assert npu.current_stream() == default and default != user
    assert user.npu_stream != 0 and user.stream_id == user.npu_stream == user.id
    assert user.device_index == user.device == 0
    with npu.stream(user):
        assert npu.current_stream() == user
    assert npu.default_stream() == npu.current_stream()
    with pytest.raises(TypeError):
        npu.Stream(priority=0.5)
    user.destroy()


def test_stream_methods_as_torch_calls_them(stream):
    ev = stream.record_event()
    assert isinstance(ev, npu.Event)
    npurt.kernels.busy(0.01, stream=stream)
    other = npu.Stream()
    other.wait_stream(stream)
    other.wait_event(ev)
    other.synchronize()
    assert stream.query() is True and other.query() is True
    other.destroy()


@pytest.mark.npurt_sanitizer(expect=["unrecorded-event"])  # misuse on purpose: the sanitizer must see it
def test_events_as_torch_npus_tests_use_them():
    e = npu.Event()
    assert e.query() is True  # never recorded
    e.wait()  # nothing to wait for
    s = npu.default_stream()
    e.record(s)
    s.synchronize()
    assert e.query() is True
    tik, tok = npu.Event(enable_timing=True), npu.Event(enable_timing=True, blocking=True)
    tik.record(s)
    npurt.kernels.busy(0.002, stream=s)
    s.record_event(tok)
    tok.synchronize()
    assert tik.elapsed_time(tok) > 0
    plain = npu.Event(blocking=True)
    plain.record()
    plain.synchronize()
    with pytest.raises(RuntimeError) as err:  # torch raises RuntimeError
        tik.elapsed_time(plain)
    assert isinstance(err.value, npurt.EventStateError) and err.value.code == 107006
    with pytest.raises(npurt.EventStateError):
        tik.elapsed_time(npu.Event(enable_timing=True))  # never recorded


def test_stream_context_on_another_devices_stream(fresh_dev1):
    def body():
        s1 = npu.Stream(device=1)
        with npu.stream(s1) as entered:
            seen = (entered, npu.current_device(), npu.current_stream())
        s1.synchronize()
        out = (seen[0] is s1, seen[1], seen[2] == s1, npu.current_device(), npu.current_stream() == npu.default_stream())
        s1.destroy()
        return out

    assert run_in_thread(body) == (True, 1, True, 0, True)
    with pytest.raises(TypeError):
        npu.StreamContext("npu:0")


def test_set_stream_keeps_a_stream_current_on_its_thread():
    def body():
        a, b = npu.Stream(), npu.Stream()
        npu.set_stream(a)
        first = npu.current_stream() == a
        npu.set_stream(None)  # torch: a no-op
        still = npu.current_stream() == a
        npu.set_stream(b)
        second = npu.current_stream() == b
        with npu.stream(a):
            nested = npu.current_stream() == a
        back = npu.current_stream() == b
        npu.set_stream(npu.default_stream())
        reset = npu.current_stream() == npu.default_stream()
        for s in (a, b):
            s.destroy()
        return first, still, second, nested, back, reset

    assert run_in_thread(body) == (True,) * 6


def test_tutorial_stream_priority_makes_a_prioritised_stream():
    with npu.stream(priority=-1) as hi:
        assert isinstance(hi, npu.Stream) and hi.priority == 0
        assert npu.current_stream() == hi and not hi.is_default
        x = npurt.ones(8) * 2.0
    with npu.stream(priority=0) as normal:
        assert normal.priority == npu.DEFAULT_ACL_PRIORITY and normal != hi
    assert npu.current_stream() == npu.default_stream()
    np.testing.assert_array_equal(np.asarray(x), np.full(8, 2.0, np.float32))
    with pytest.raises(TypeError):
        npu.stream(npu.Stream(), priority=0)


def test_tutorial_h2d_and_d2h_over_the_copy_engine(stream):
    a = np.arange(4096, dtype=np.float32).reshape(64, 64)
    x = npu.H2D(a, stream=stream)
    assert isinstance(x, npurt.DeviceArray) and x.shape == (64, 64)
    y = npu.D2H(x, stream=stream)
    np.testing.assert_array_equal(y, a)
    host = npurt.malloc_host(a.nbytes)
    pinned = host.numpy(np.float32).reshape(64, 64)
    pinned[...] = a + 1
    dst = npurt.empty((64, 64))
    assert npu.H2D(pinned, dst, stream=stream) is dst  # asynchronous from pinned memory
    out = npurt.malloc_host(a.nbytes)
    npu.D2H(dst, out, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.numpy(np.float32).reshape(64, 64), a + 1)
    with pytest.raises(TypeError):
        npu.D2H(a)
    with pytest.raises(TypeError):
        npu.H2D(a, dst=a)
