"""Events: record/query/synchronize, timing, cross-stream and cross-device waits."""

import threading
import time

import npurt
import pytest
from helpers import LONG, run_python


def test_event_attributes():
    e = npurt.Event()
    assert e.timing is False and e.device == 0
    assert npurt.Event(timing=True).timing is True
    assert npurt.Event(enable_timing=True).timing is True
    assert npurt.Event(device=1).device == 1


def test_never_recorded_event_is_complete():
    e = npurt.Event()
    assert e.query() is True
    e.synchronize(timeout=0)
    e.synchronize()


def test_record_tracks_earlier_work(stream):
    e = npurt.Event()
    npurt.kernels.busy(0.2, stream=stream)
    e.record(stream)
    assert e.query() is False
    e.synchronize(timeout=LONG)
    assert e.query() is True
    assert stream.query() is True


def test_record_does_not_cover_later_work(stream):
    e = npurt.Event()
    npurt.kernels.empty(stream=stream)
    e.record(stream)
    npurt.kernels.busy(0.3, stream=stream)
    e.synchronize(timeout=LONG)
    assert e.query() is True
    assert stream.query() is False  # the later kernel is still running
    stream.synchronize(timeout=LONG)


def test_record_defaults_to_current_stream(stream):
    e = npurt.Event()
    npurt.kernels.busy(0.2, stream=stream)
    with stream:
        e.record()
    assert e.query() is False
    e.synchronize(timeout=LONG)
    assert e.query()


def test_re_recording_moves_the_point(stream):
    e = npurt.Event()
    e.record(stream)
    assert e.query()
    npurt.kernels.busy(0.2, stream=stream)
    e.record(stream)
    assert not e.query()
    e.synchronize(timeout=LONG)
    assert e.query()


def test_record_event_on_stream(stream):
    npurt.kernels.busy(0.2, stream=stream)
    e = stream.record_event()
    assert isinstance(e, npurt.Event) and e.device == 0
    assert not e.query()
    mine = npurt.Event(timing=True)
    assert stream.record_event(mine) is mine
    e.synchronize(timeout=LONG)
    mine.synchronize(timeout=LONG)
    assert e.query() and mine.query()


# ---------------------------------------------------------------- timing


def test_elapsed_time_measures_a_kernel(stream):
    start, end = npurt.Event(timing=True), npurt.Event(timing=True)
    start.record(stream)
    npurt.kernels.busy(0.05, stream=stream)
    end.record(stream)
    end.synchronize(timeout=LONG)
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    assert 40.0 <= ms <= 500.0
    assert end.elapsed_time(start) == pytest.approx(-ms)
    assert start.elapsed_time(start) == 0.0


def test_elapsed_time_needs_timing_events(stream):
    timed, plain1, plain2 = npurt.Event(timing=True), npurt.Event(), npurt.Event()
    for e in (timed, plain1, plain2):
        e.record(stream)
    stream.synchronize(timeout=LONG)
    for a, b in ((plain1, plain2), (timed, plain1), (plain1, timed)):
        with pytest.raises(npurt.Error) as ei:
            a.elapsed_time(b)
        assert ei.value.code == 107006


def test_elapsed_time_needs_recorded_events(stream):
    a, b = npurt.Event(timing=True), npurt.Event(timing=True)
    with pytest.raises(npurt.Error) as ei:
        a.elapsed_time(b)
    assert ei.value.code == 107006
    a.record(stream)
    stream.synchronize(timeout=LONG)
    with pytest.raises(npurt.Error):
        a.elapsed_time(b)
    with pytest.raises(npurt.Error):
        b.elapsed_time(a)


def test_elapsed_time_needs_completed_events(stream):
    a, b = npurt.Event(timing=True), npurt.Event(timing=True)
    a.record(stream)
    npurt.kernels.busy(0.3, stream=stream)
    b.record(stream)
    with pytest.raises(npurt.Error) as ei:
        a.elapsed_time(b)
    assert ei.value.code == 507006
    b.synchronize(timeout=LONG)
    assert a.elapsed_time(b) >= 250.0


def test_elapsed_time_wrong_type():
    with pytest.raises(npurt.InvalidTypeError):
        npurt.Event(timing=True).elapsed_time("end")


def test_event_synchronize_timeout(stream):
    e = npurt.Event()
    npurt.kernels.busy(0.6, stream=stream)
    e.record(stream)
    t0 = time.monotonic()
    with pytest.raises(npurt.WaitTimeoutError) as ei:
        e.synchronize(timeout=0.05)
    took = time.monotonic() - t0
    assert ei.value.code == 507047
    assert isinstance(ei.value, TimeoutError)
    assert 0.05 <= took < 0.5
    e.synchronize(timeout=LONG)
    assert e.query()


# ---------------------------------------------------------------- waits between streams


def test_stream_waits_for_event_of_another_stream():
    s1, s2 = npurt.Stream(), npurt.Stream()
    out = []
    e = npurt.Event()
    npurt.kernels.busy(0.2, stream=s1)
    s1.launch_host_func(out.append, "s1")
    e.record(s1)
    npurt.kernels.empty(stream=s1)  # after the record: not waited for
    s2.wait_event(e)
    s2.launch_host_func(out.append, "s2")
    s2.synchronize(timeout=LONG)
    assert out == ["s1", "s2"]
    s1.synchronize(timeout=LONG)
    s1.destroy()
    s2.destroy()


def test_event_wait_method_targets_a_stream():
    s1, s2 = npurt.Stream(), npurt.Stream()
    out = []
    npurt.kernels.busy(0.2, stream=s1)
    s1.launch_host_func(out.append, 1)
    e = s1.record_event()
    e.wait(s2)
    s2.launch_host_func(out.append, 2)
    with s2:
        e.wait()  # the current stream
        s2.launch_host_func(out.append, 3)
    s2.synchronize(timeout=LONG)
    assert out == [1, 2, 3]
    s1.destroy()
    s2.destroy()


@pytest.mark.npurt_sanitizer(expect=["unrecorded-event"])  # misuse on purpose: the sanitizer must see it
def test_waiting_on_a_never_recorded_event_does_not_block(stream):
    stream.wait_event(npurt.Event())
    flag = threading.Event()
    stream.launch_host_func(flag.set)
    stream.synchronize(timeout=LONG)
    assert flag.is_set()


def test_timing_event_wait_orders_streams():
    s1, s2 = npurt.Stream(), npurt.Stream()
    out = []
    e = npurt.Event(timing=True)
    npurt.kernels.busy(0.2, stream=s1)
    s1.launch_host_func(out.append, "s1")
    e.record(s1)
    s2.wait_event(e)
    s2.launch_host_func(out.append, "s2")
    s2.synchronize(timeout=LONG)
    assert out == ["s1", "s2"]
    s1.destroy()
    s2.destroy()


def test_events_across_devices():
    s1 = npurt.Stream(device=1)
    s0 = npurt.Stream(device=0)
    out = []
    e = npurt.Event(device=1)
    npurt.kernels.busy(0.2, stream=s1)
    s1.launch_host_func(out.append, "dev1")
    e.record(s1)
    s0.wait_event(e)
    s0.launch_host_func(out.append, "dev0")
    s0.synchronize(timeout=LONG)
    assert out == ["dev1", "dev0"]
    assert e.query()
    s0.destroy()
    s1.destroy()


def test_events_across_devices_inside_with():
    out = []
    s0 = npurt.Stream()
    with npurt.Device(1):
        s1 = npurt.Stream()
        e = npurt.Event()
        assert e.device == 1 and s1.device == 1
        npurt.kernels.busy(0.2, stream=s1)
        s1.launch_host_func(out.append, "dev1")
        e.record(s1)
        s0.wait_event(e)  # a device-0 stream waits on a device-1 event
        s0.launch_host_func(out.append, "dev0")
        s0.synchronize(timeout=LONG)
        s1.destroy()
        del e
    assert out == ["dev1", "dev0"]
    s0.destroy()


def test_event_record_on_full_stream_does_not_deadlock_with_host_callbacks():
    # Control for the test below: with an untimed event, record never blocks.
    r = run_python(
        """
        import time, npurt
        s = npurt.Stream()
        s.launch_host_func(time.sleep, 0.2)
        time.sleep(0.05)
        for _ in range(4):
            npurt.kernels.empty(stream=s)    # the ring (depth 4) is now full
        npurt.Event().record(s)
        s.synchronize(timeout=5)
        print("ok")
        """,
        env={"NPURT_STREAM_QUEUE_DEPTH": "4"},
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_timing_event_record_on_full_stream_does_not_deadlock():
    code = """
        import time, npurt
        s = npurt.Stream()
        s.launch_host_func(time.sleep, 0.2)  # needs the GIL back when the sleep ends
        time.sleep(0.05)
        for _ in range(4):
            npurt.kernels.empty(stream=s)    # the ring (depth 4) is now full
        npurt.Event(timing=True).record(s)   # must wait for room with the GIL released
        s.synchronize(timeout=5)
        print("ok")
        """
    try:
        r = run_python(code, env={"NPURT_STREAM_QUEUE_DEPTH": "4"}, timeout=5)
    except Exception as e:  # subprocess.TimeoutExpired: the interpreter hung
        pytest.fail(f"deadlock: {e}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
