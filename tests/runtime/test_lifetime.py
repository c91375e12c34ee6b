"""ACL lifetime: the outermost ``with npurt.Device(i)`` tears the device down.

These tests use device 1 through ``fresh_dev1`` (no reference held on it at the start);
device 0 carries the process's implicit reference, so it is never torn down here.
"""

import gc
import re
import threading
import warnings

import npurt
import pytest
from helpers import LONG


def test_teardown_finishes_pending_work(fresh_dev1):
    flag = threading.Event()
    with pytest.warns(ResourceWarning):
        with npurt.Device(1):
            s = npurt.Stream()
            npurt.kernels.busy(0.2, stream=s)
            s.launch_host_func(flag.set)
    # The exit returned only after the busy kernel and the callback behind it had run.
    assert flag.is_set()
    assert not npurt.Device(1).is_active
    assert npurt.Device(1)._refcount() == 0


def test_teardown_finishes_pending_work_on_the_default_stream(fresh_dev1):
    flag = threading.Event()
    with npurt.Device(1):
        npurt.kernels.busy(0.15)
        npurt.current_stream().launch_host_func(flag.set)
    assert flag.is_set()
    assert not npurt.Device(1).is_active


def test_teardown_finishes_work_of_released_streams(fresh_dev1):
    flag = threading.Event()
    with npurt.Device(1):
        s = npurt.Stream()
        npurt.kernels.busy(0.2, stream=s)
        s.launch_host_func(flag.set)
        del s  # released: its queued work still runs
    assert flag.wait(1.0)


def test_resource_warning_names_what_was_alive(fresh_dev1):
    with pytest.warns(ResourceWarning) as rec:
        with npurt.Device(1):
            s1, s2 = npurt.Stream(), npurt.Stream()
            e = npurt.Event()
    msgs = [str(w.message) for w in rec if issubclass(w.category, ResourceWarning)]
    assert len(msgs) == 1
    m = msgs[0]
    assert re.search(r"device 1\b", m)
    assert "2 stream(s)" in m
    assert "1 event(s)" in m
    assert "0 context(s)" in m
    del s1, s2, e


def test_no_warning_when_everything_was_released(fresh_dev1):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with npurt.Device(1):
            s = npurt.Stream()
            e = npurt.Event(timing=True)
            e.record(s)
            npurt.kernels.busy(0.02, stream=s)
            s.destroy()
            del e
            kept = npurt.Stream()
            del kept  # dropping the handle releases the stream too
    assert not [w for w in rec if issubclass(w.category, ResourceWarning)]
    assert not npurt.Device(1).is_active


@pytest.fixture
def dead_dev1_objects(fresh_dev1):
    with pytest.warns(ResourceWarning):
        with npurt.Device(1):
            s = npurt.Stream()
            default = npurt.current_stream()
            e = npurt.Event()
            t1, t2 = npurt.Event(timing=True), npurt.Event(timing=True)
            t1.record(s)
            npurt.kernels.busy(0.02, stream=s)
            t2.record(s)
            e.record(s)
    assert not npurt.Device(1).is_active
    return {"stream": s, "default": default, "event": e, "t1": t1, "t2": t2}


USES = {
    "synchronize": lambda o: o["stream"].synchronize(),
    "synchronize_timeout": lambda o: o["stream"].synchronize(timeout=0.01),
    "query": lambda o: o["stream"].query(),
    "launch": lambda o: npurt.kernels.busy(0.01, stream=o["stream"]),
    "launch_empty": lambda o: npurt.kernels.empty(stream=o["stream"]),
    "fault": lambda o: npurt.kernels.fault(stream=o["stream"]),
    "host_func": lambda o: o["stream"].launch_host_func(print),
    "wait_event": lambda o: o["stream"].wait_event(o["event"]),
    "wait_stream": lambda o: o["stream"].wait_stream(o["default"]),
    "destroy": lambda o: o["stream"].destroy(),
    "force_destroy": lambda o: o["stream"].destroy(force=True),
    "enter": lambda o: o["stream"].__enter__(),
    "record_event": lambda o: o["stream"].record_event(),
    "default_stream": lambda o: o["default"].synchronize(),
    "event_record": lambda o: o["event"].record(o["stream"]),
    "event_query": lambda o: o["event"].query(),
    "event_synchronize": lambda o: o["event"].synchronize(),
    "event_wait": lambda o: o["event"].wait(o["stream"]),
    "elapsed_time": lambda o: o["t1"].elapsed_time(o["t2"]),
    "device0_waits_dead_event": lambda o: npurt.default_stream(0).wait_event(o["event"]),
}


@pytest.mark.parametrize("use", sorted(USES))
def test_objects_of_a_reset_device_raise_invalid_handle(dead_dev1_objects, use):
    with pytest.raises(npurt.InvalidHandleError) as ei:
        USES[use](dead_dev1_objects)
    assert ei.value.code == 107017
    assert "107017" in str(ei.value)


def test_dead_handles_report_not_alive_and_stay_dead(dead_dev1_objects):
    s = dead_dev1_objects["stream"]
    assert not s.is_alive
    assert s.device == 1
    with npurt.Device(1):  # the device is started again: old handles stay invalid
        assert npurt.Device(1).is_active
        with pytest.raises(npurt.InvalidHandleError):
            s.synchronize()
        fresh = npurt.Stream()
        npurt.kernels.empty(stream=fresh)
        fresh.synchronize(timeout=LONG)
        fresh.destroy()
    assert not npurt.Device(1).is_active


def test_inner_with_on_same_device_does_not_tear_down(fresh_dev1):
    with npurt.Device(1):
        s = npurt.Stream()
        with npurt.Device(1):
            npurt.kernels.busy(0.05, stream=s)
        assert npurt.Device(1).is_active
        s.synchronize(timeout=LONG)  # still usable
        s.destroy()
    assert not npurt.Device(1).is_active


def test_with_device0_inside_implicit_use_does_not_tear_down():
    s = npurt.Stream()  # implicit use of device 0
    refs = npurt.Device(0)._refcount()
    with npurt.Device(0):
        t = npurt.Stream()
        npurt.kernels.busy(0.02, stream=t)
    assert npurt.Device(0).is_active
    assert npurt.Device(0)._refcount() == refs
    t.synchronize(timeout=LONG)
    npurt.kernels.empty(stream=s)
    s.synchronize(timeout=LONG)
    s.destroy()
    t.destroy()


def test_exception_in_with_releases_what_the_block_owns(fresh_dev1):
    gc.collect()
    before = npurt.live_counts()
    with pytest.warns(ResourceWarning):
        with pytest.raises(RuntimeError, match="inside"):
            with npurt.Device(1):
                s = npurt.Stream()
                e = npurt.Event(timing=True)
                with s:
                    npurt.kernels.busy(0.02)
                    e.record()
                    raise RuntimeError("inside")
    assert npurt.current_device() == 0
    assert npurt.current_stream() == npurt.default_stream()
    assert not npurt.Device(1).is_active
    del s, e
    gc.collect()
    assert npurt.live_counts() == before


def test_exception_in_with_without_leak_warning(fresh_dev1):
    gc.collect()
    before = npurt.live_counts()
    with pytest.raises(KeyError):
        with npurt.Device(1):
            s = npurt.Stream()
            s.destroy()
            raise KeyError("x")
    assert not npurt.Device(1).is_active
    del s
    gc.collect()
    assert npurt.live_counts() == before


def test_context_inside_with_is_torn_down_with_the_device(fresh_dev1):
    flag = threading.Event()
    with pytest.warns(ResourceWarning, match=r"1 context\(s\)"):
        with npurt.Device(1):
            c = npurt.Context()
            with c:
                npurt.kernels.busy(0.1)
                npurt.current_stream().launch_host_func(flag.set)
    assert flag.is_set()
    assert npurt.Device(1)._refcount() == 0
    assert not npurt.Device(1).is_active
    assert not c.is_alive


def test_teardown_from_another_thread_waits_for_gil_callbacks(fresh_dev1):
    # The device exit waits for a callback that needs the GIL: it must not hold it.
    done = []

    def body():
        with npurt.Device(1):
            s = npurt.Stream()
            npurt.kernels.busy(0.05, stream=s)
            s.launch_host_func(lambda: done.append(sum(range(10000))))
            s.destroy()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(LONG)
    assert not t.is_alive()
    assert done == [sum(range(10000))]
    assert not npurt.Device(1).is_active


def test_wait_queued_on_a_device_that_is_torn_down_completes(fresh_dev1):
    out = []
    s0 = npurt.Stream()
    with npurt.Device(1):
        s1 = npurt.Stream()
        npurt.kernels.busy(0.15, stream=s1)
        s1.launch_host_func(out.append, "dev1")
        e = s1.record_event()
        s0.wait_event(e)  # queued on device 0 before device 1 goes away
        s0.launch_host_func(out.append, "dev0")
        s1.destroy()
        del e
    assert not npurt.Device(1).is_active
    s0.synchronize(timeout=LONG)
    assert out == ["dev1", "dev0"]
    s0.destroy()


def test_device_with_inside_callback_does_not_leak_a_reference(fresh_dev1):
    s = npurt.Stream()
    seen = []

    def cb():
        try:
            with npurt.Device(1):
                seen.append(npurt.current_device())
        except npurt.Error as e:
            seen.append(e)

    s.launch_host_func(cb)
    s.synchronize(timeout=LONG)
    s.destroy()
    assert len(seen) >= 1
    assert npurt.Device(1)._refcount() == 0
