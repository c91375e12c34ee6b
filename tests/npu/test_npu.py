"""npurt.npu: torch_npu's device, stream, event and memory API (names and argument
conventions) over npurt's own objects."""

import npurt
import numpy as np
import pytest
from helpers import run_in_thread
from npurt import npu

MIB = 1 << 20


def test_device_functions_and_device_arguments(fresh_dev1):
    assert npu.is_available() and npu.device_count() == npurt.device_count() == 2
    assert npu.current_device() == 0
    for d in (0, "npu:0", "npu", None, npurt.Device(0)):
        assert npu.memory_allocated(d) == npurt.memory_allocated(0)
    for bad in ("cuda:0", "npu:x", "npu0"):
        with pytest.raises(ValueError):
            npu.memory_allocated(bad)
    for bad in (1.5, True, [0]):
        with pytest.raises(TypeError):
            npu.memory_allocated(bad)

    def on_1():
        npu.set_device("npu:1")
        assert npu.current_device() == 1
        with npu.device(0):
            assert npu.current_device() == 0
        assert npu.current_device() == 1
        return npu.get_device_name("npu:1"), npu.get_device_properties(1)["id"]

    name, idx = run_in_thread(on_1)
    assert "1" in name and idx == 1
    npu.set_device(0)
    assert npu.current_device() == 0


def test_streams_map_torch_priorities():
    hi, lo = npu.Stream(priority=-1), npu.Stream()
    assert isinstance(hi, npurt.Stream) and isinstance(hi, npu.Stream)
    assert isinstance(npurt.Stream(), npu.Stream) and not isinstance(object(), npu.Stream)
    assert hi.priority == 0 and lo.priority == npu.DEFAULT_ACL_PRIORITY
    assert npu.Stream(priority=-5).priority == 0 and npu.Stream(priority=3).priority == npu.DEFAULT_ACL_PRIORITY
    assert npu.Stream(device="npu:0").device == 0
    for s in (hi, lo):
        s.destroy()


def test_stream_context_manager_and_current_default_stream():
    s = npu.Stream()
    assert npu.current_stream() == npu.default_stream() == npurt.default_stream()
    with npu.stream(s):
        assert npu.current_stream() == s and npu.current_stream("npu:0") == s
        assert npu.default_stream() != s
    assert npu.current_stream() == npu.default_stream()
    with npu.stream(None):
        assert npu.current_stream() == npu.default_stream()
    s.destroy()


def test_events_time_in_milliseconds_and_order_streams():
    s1, s2 = npu.Stream(), npu.Stream()
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    assert isinstance(start, npu.Event) and isinstance(start, npurt.Event)
    with npu.stream(s1):
        start.record()
        npurt.kernels.busy(0.03)
        end.record()
    s2.wait_event(end)
    seen = []
    s2.launch_host_func(lambda: seen.append(end.query()))
    s2.synchronize()
    assert seen == [True]  # s2 ran only after s1's kernel
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and 25.0 <= ms < 2000.0
    plain = npu.Event()
    plain.record(s1)
    plain.synchronize()
    with pytest.raises(npurt.Error):
        start.elapsed_time(plain)  # no timing on it
    with pytest.raises(npurt.InvalidValueError, match="timing"):
        npu.Event(enable_timing=True, interprocess=True)
    ipc = npu.Event(interprocess=True)
    ipc.record(s1)
    other = npu.Event.from_ipc_handle(0, ipc.ipc_handle())
    s2.wait_event(other)
    s2.synchronize()
    assert other.query() and isinstance(other, npu.Event)
    for s in (s1, s2):
        s.destroy()


def test_synchronize_waits_for_all_streams():
    s = npu.Stream()
    npurt.kernels.busy(0.05, stream=s)
    assert not s.query()
    npu.synchronize()
    assert s.query()
    npurt.kernels.busy(0.01, stream=s)
    npu.synchronize("npu:0")
    assert s.query()
    s.destroy()


def test_memory_statistics_follow_allocations():
    base = npu.memory_allocated()
    npu.reset_peak_memory_stats()
    buf = npurt.malloc(8 * MIB)
    assert npu.memory_allocated() - base >= 8 * MIB
    assert npu.memory_allocated("npu:0") == npu.memory_allocated(0) == npu.memory_allocated()
    assert npu.max_memory_allocated() >= npu.memory_allocated()
    assert npu.memory_reserved() >= npu.memory_allocated()
    assert npu.max_memory_reserved() >= npu.memory_reserved()
    stats = npu.memory_stats()
    assert stats["allocated_bytes.all.current"] == npu.memory_allocated()
    assert isinstance(npu.memory_summary(), str) and isinstance(npu.memory_summary(abbreviated=True), str)
    free, total = npu.mem_get_info()
    assert 0 < free <= total
    peak = npu.max_memory_allocated()
    buf.free()
    assert npu.memory_allocated() == base and npu.max_memory_allocated() == peak
    assert npu.empty_cache() is None
    assert npu.memory_reserved() <= npu.max_memory_reserved()


def test_set_per_process_memory_fraction(fresh_dev1):
    npu.set_per_process_memory_fraction(0.25, "npu:1")
    assert npurt.get_per_process_memory_fraction(1) == pytest.approx(0.25)
    total = npurt.get_device_properties(1)["total_memory"]
    with pytest.raises(MemoryError):
        npurt.malloc(int(total * 0.3), device=1)
    with pytest.raises(ValueError):
        npu.set_per_process_memory_fraction(1.5, 1)


def test_torch_style_copy_and_compute_on_a_side_stream():
    a = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    s = npu.Stream(priority=-1)
    done = npu.Event()
    with npu.stream(s):
        x = npurt.to_device(a)
        y = x @ x
        done.record()
    npu.current_stream().wait_event(done)
    np.testing.assert_allclose(np.asarray(y), a @ a, rtol=1e-4)
    s.destroy()
