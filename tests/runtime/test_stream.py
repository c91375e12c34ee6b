"""Streams: creation, ordering, concurrency, current stream, destroy; kernel launches."""

import threading
import time

import npurt
import numpy as np
import pytest
from helpers import LONG, run_in_thread, wait_until

# ---------------------------------------------------------------- creation


@pytest.mark.parametrize("prio", range(8))
def test_valid_priorities(prio):
    s = npurt.Stream(priority=prio)
    assert s.priority == prio
    assert s.device == 0
    assert s.is_alive and not s.is_default
    s.destroy()


def test_default_priority_and_numpy_int_priority():
    assert npurt.Stream().priority == 0
    assert npurt.Stream(priority=None).priority == 0
    assert npurt.Stream(priority=np.int64(5)).priority == 5


@pytest.mark.parametrize("bad", [-1, 8, 100, 2**70, -(2**70)])
def test_priority_out_of_range(bad):
    with pytest.raises(npurt.InvalidValueError) as ei:
        npurt.Stream(priority=bad)
    assert ei.value.code == 107000
    assert isinstance(ei.value, ValueError)


@pytest.mark.parametrize("bad", [1.5, "x", True, False, [1]])
def test_priority_of_wrong_type(bad):
    with pytest.raises(npurt.InvalidTypeError) as ei:
        npurt.Stream(priority=bad)
    assert ei.value.code == 107000
    assert isinstance(ei.value, TypeError)


def test_stream_on_another_device():
    for dev in (1, npurt.Device(1)):
        s = npurt.Stream(device=dev)
        assert s.device == 1
        npurt.kernels.empty(stream=s)
        s.synchronize(timeout=LONG)
        s.destroy()
    with pytest.raises(npurt.InvalidDeviceError):
        npurt.Stream(device=2)


def test_streams_are_distinct_and_hashable():
    a, b = npurt.Stream(), npurt.Stream()
    assert a == a and a != b and a.id != b.id
    assert len({a, b, a}) == 2
    assert a != "not a stream"
    a.destroy()
    b.destroy()


# ---------------------------------------------------------------- synchronize / query


def test_fresh_stream_is_idle(stream):
    assert stream.query() is True
    stream.synchronize()
    assert stream.completed == 0


def test_query_and_synchronize_track_work(stream):
    flag = threading.Event()
    npurt.kernels.busy(0.2, stream=stream)
    stream.launch_host_func(flag.set)
    assert stream.query() is False
    stream.synchronize(timeout=LONG)
    assert flag.is_set()
    assert stream.query() is True
    assert stream.completed == 2


def test_synchronize_with_timeout_that_is_long_enough(stream):
    npurt.kernels.busy(0.05, stream=stream)
    stream.synchronize(timeout=LONG)
    stream.synchronize(timeout=0)  # idle: a zero timeout succeeds
    stream.synchronize(timeout=float("inf"))
    assert stream.query()


def test_synchronize_timeout_is_not_sticky(stream):
    npurt.kernels.busy(0.6, stream=stream)
    t0 = time.monotonic()
    with pytest.raises(npurt.WaitTimeoutError) as ei:
        stream.synchronize(timeout=0.05)
    took = time.monotonic() - t0
    assert ei.value.code == 507046
    assert isinstance(ei.value, TimeoutError)
    assert 0.05 <= took < 0.5  # it gave up before the work finished
    stream.synchronize(timeout=LONG)  # the stream still works after a timeout
    npurt.kernels.empty(stream=stream)
    stream.synchronize(timeout=LONG)


# ---------------------------------------------------------------- ordering


def test_fifo_within_a_stream(stream):
    out = []
    for i in range(30):
        if i % 3 == 0:
            npurt.kernels.busy(0.002, stream=stream, blocks=1 + i % 4)
        elif i % 3 == 1:
            npurt.kernels.empty(stream=stream, blocks=3)
        stream.launch_host_func(out.append, i)
    stream.synchronize(timeout=LONG)
    assert out == list(range(30))


def test_host_callback_runs_after_earlier_kernel(stream):
    # The callback is queued behind a 0.15 s kernel: it must not run before it finishes.
    t0 = time.monotonic()
    when = []
    npurt.kernels.busy(0.15, stream=stream)
    stream.launch_host_func(lambda: when.append(time.monotonic() - t0))
    stream.synchronize(timeout=LONG)
    assert len(when) == 1 and when[0] >= 0.15


def test_wait_stream_orders_across_streams():
    s1, s2 = npurt.Stream(), npurt.Stream()
    out = []
    npurt.kernels.busy(0.2, stream=s1)
    s1.launch_host_func(out.append, "s1")
    s2.wait_stream(s1)
    s2.launch_host_func(out.append, "s2")
    s2.synchronize(timeout=LONG)
    assert out == ["s1", "s2"]
    s1.synchronize(timeout=LONG)
    s1.destroy()
    s2.destroy()


def test_without_wait_streams_are_independent():
    # Control for the test above: without wait_stream, s2 does not wait for s1.
    s1, s2 = npurt.Stream(), npurt.Stream()
    out = []
    npurt.kernels.busy(0.3, stream=s1)
    s1.launch_host_func(out.append, "s1")
    s2.launch_host_func(out.append, "s2")
    s2.synchronize(timeout=LONG)
    assert out == ["s2"]
    s1.synchronize(timeout=LONG)
    assert out == ["s2", "s1"]
    s1.destroy()
    s2.destroy()


def test_wait_stream_only_covers_work_submitted_before():
    s1, s2 = npurt.Stream(), npurt.Stream()
    s2.wait_stream(s1)  # s1 is idle: nothing to wait for
    npurt.kernels.busy(0.3, stream=s1)
    flag = threading.Event()
    s2.launch_host_func(flag.set)
    s2.synchronize(timeout=LONG)
    assert flag.is_set()
    assert not s1.query()  # s2 finished while s1 was still busy
    s1.synchronize(timeout=LONG)
    s1.destroy()
    s2.destroy()


def test_wait_stream_on_itself_and_bad_types(stream):
    with pytest.raises(npurt.InvalidValueError):
        stream.wait_stream(stream)
    with pytest.raises(npurt.InvalidTypeError):
        stream.wait_stream("s")
    with pytest.raises(npurt.InvalidTypeError):
        stream.wait_event(stream)


# ---------------------------------------------------------------- concurrency across streams


def test_two_streams_run_kernels_concurrently():
    if npurt.Device(0).properties["worker_threads"] < 2:
        pytest.skip("needs two AI-core workers")
    s1, s2 = npurt.Stream(), npurt.Stream()
    t0 = time.monotonic()
    npurt.kernels.busy(0.25, stream=s1)
    npurt.kernels.busy(0.25, stream=s2)
    s1.synchronize(timeout=LONG)
    s2.synchronize(timeout=LONG)
    took = time.monotonic() - t0
    # Serialised they would take >= 0.5 s; the kernels are wall-clock bound, so this holds
    # even when the host is loaded.
    assert 0.25 <= took < 0.45
    s1.destroy()
    s2.destroy()


def test_blocks_split_across_workers(stream):
    workers = npurt.Device(0).properties["worker_threads"]
    if workers < 2:
        pytest.skip("needs two AI-core workers")
    t0 = time.monotonic()
    npurt.kernels.busy(0.1, stream=stream, blocks=4)
    stream.synchronize(timeout=LONG)
    took = time.monotonic() - t0
    # 4 blocks of 0.1 s on 2 workers: ~0.2 s; on one core they would take 0.4 s.
    assert 0.19 <= took < 0.35


def test_single_block_busy_takes_its_time(stream):
    t0 = time.monotonic()
    npurt.kernels.busy(0.1, stream=stream)
    stream.synchronize(timeout=LONG)
    assert time.monotonic() - t0 >= 0.1


def test_many_launches_beyond_queue_depth(stream):
    depth = npurt.get_config()["stream_queue_depth"]
    n = 3 * depth + 7
    for _ in range(n):
        npurt.kernels.empty(stream=stream)
    stream.synchronize(timeout=LONG)
    assert stream.completed == n


def test_max_blocks_is_accepted(stream):
    npurt.kernels.empty(stream=stream, blocks=65535)
    stream.synchronize(timeout=LONG)
    assert stream.completed == 1


# ---------------------------------------------------------------- current stream


def test_default_stream():
    d = npurt.default_stream()
    assert d.is_default and d.device == 0 and d.priority == 0
    assert d == npurt.current_stream() == npurt.default_stream(0)
    d1 = npurt.default_stream(1)
    assert d1.device == 1 and d1.is_default and d1 != d
    with pytest.raises(npurt.InvalidValueError):
        d.destroy()
    assert d.is_alive


def test_with_stream_makes_it_current(stream):
    assert npurt.current_stream() != stream
    gate = threading.Event()  # holds the stream: its work cannot be done before the check
    stream.launch_host_func(gate.wait, LONG)
    with stream as entered:
        assert entered is stream
        assert npurt.current_stream() == stream
        npurt.kernels.busy(0.001)  # goes to the current stream
        npurt.kernels.empty()
        assert not stream.query()
        assert stream.completed == 0
    assert npurt.current_stream() == npurt.default_stream()
    gate.set()
    stream.synchronize(timeout=LONG)
    assert stream.completed == 3


def test_nested_streams_restore_and_survive_exceptions():
    a, b = npurt.Stream(), npurt.Stream()
    with a:
        with pytest.raises(RuntimeError):
            with b:
                assert npurt.current_stream() == b
                raise RuntimeError
        assert npurt.current_stream() == a
    assert npurt.current_stream() == npurt.default_stream()
    a.destroy()
    b.destroy()


def test_stream_helper_context_manager(stream):
    with npurt.stream(None) as s:
        assert s is None
        assert npurt.current_stream() == npurt.default_stream()
    with npurt.stream(stream) as s:
        assert s is stream
        assert npurt.current_stream() == stream
    assert npurt.current_stream() == npurt.default_stream()


def test_current_stream_is_per_thread(stream):
    with stream:
        assert run_in_thread(lambda: npurt.current_stream() == npurt.default_stream())
        assert npurt.current_stream() == stream


def test_current_stream_follows_the_device():
    s0 = npurt.Stream()
    with s0:
        with npurt.Device(1):
            assert npurt.current_stream() == npurt.default_stream(1)
            assert npurt.current_stream(1) == npurt.default_stream(1)
        assert npurt.current_stream() == s0
    s0.destroy()


def test_entering_a_stream_of_another_device_raises():
    s1 = npurt.Stream(device=1)
    with pytest.raises(npurt.WrongContextError) as ei:
        with s1:
            pass
    assert ei.value.code == 107003
    assert npurt.current_stream() == npurt.default_stream()
    with npurt.Device(1):
        with s1:
            assert npurt.current_stream() == s1
    s1.destroy()


# ---------------------------------------------------------------- destroy


def test_destroy_waits_for_queued_work():
    s = npurt.Stream()
    flag = threading.Event()
    npurt.kernels.busy(0.15, stream=s)
    s.launch_host_func(flag.set)
    s.destroy()
    assert flag.is_set()  # destroy returned only after the work had run
    assert not s.is_alive


@pytest.mark.parametrize(
    "use",
    [
        lambda s: s.synchronize(),
        lambda s: s.query(),
        lambda s: npurt.kernels.empty(stream=s),
        lambda s: s.launch_host_func(print),
        lambda s: npurt.Event().record(s),
        lambda s: s.wait_stream(npurt.default_stream()),
        lambda s: s.destroy(),
        lambda s: s.__enter__(),
    ],
    ids=["synchronize", "query", "launch", "host_func", "record", "wait_stream", "destroy", "enter"],
)
def test_using_a_destroyed_stream_raises_invalid_handle(use):
    s = npurt.Stream()
    s.destroy()
    with pytest.raises(npurt.InvalidHandleError) as ei:
        use(s)
    assert ei.value.code == 107017
    assert npurt.current_stream() == npurt.default_stream()


def test_force_destroy_drops_queued_work():
    # busy(t) cannot end before t has passed since it was launched. When the destroy and
    # the read of `completed` both happen within t of the launch, the kernel was still
    # running: force did not wait for it, and every callback behind it must be dropped.
    # A machine too loaded to fit 100 launches in the window retries with a longer kernel
    # (the test once failed when the window was missed).
    t = 0.4
    for _ in range(6):
        s = npurt.Stream()
        ran = []
        t0 = time.monotonic()
        npurt.kernels.busy(t, stream=s)
        for i in range(100):
            s.launch_host_func(ran.append, i)
        s.destroy(force=True)
        completed_at_destroy = s.completed
        if time.monotonic() - t0 < t:
            break
        assert wait_until(lambda s=s: s.completed == 101)
        t *= 2
    else:
        pytest.fail("the machine never fit 100 launches and a destroy into the busy kernel's window")
    assert completed_at_destroy == 0  # force did not wait for the running kernel
    assert not s.is_alive
    # Every task is accounted for (run or dropped) once the busy kernel is done.
    assert wait_until(lambda: s.completed == 101)
    assert ran == []  # queued behind a kernel that was still running: all dropped
    with pytest.raises((npurt.InvalidHandleError, npurt.StreamAbortedError)) as ei:
        s.synchronize()
    assert ei.value.code in (107017, 107023)
    with pytest.raises((npurt.InvalidHandleError, npurt.StreamAbortedError)):
        npurt.kernels.empty(stream=s)


def test_dropping_the_last_reference_keeps_queued_work_running():
    flag = threading.Event()
    s = npurt.Stream()
    npurt.kernels.busy(0.05, stream=s)
    s.launch_host_func(flag.set)
    before = npurt.live_counts()[0]
    del s
    assert npurt.live_counts()[0] == before - 1
    assert flag.wait(LONG)


def test_wait_event_timeout_fails_the_waiting_stream_only():
    slow, waiter = npurt.Stream(), npurt.Stream()
    npurt.kernels.busy(0.3, stream=slow)
    ev = slow.record_event()
    waiter.wait_event(ev, timeout=0.02)
    ran = []
    waiter.launch_host_func(ran.append, 1)
    t = time.perf_counter()
    with pytest.raises(npurt.TaskFailedError) as info:
        waiter.synchronize(timeout=LONG)
    assert time.perf_counter() - t < 0.25
    assert info.value.code == 107019
    assert ran == []
    slow.synchronize(timeout=LONG)  # the other stream is unaffected
    slow.destroy()
    waiter.destroy(force=True)


def test_wait_event_timeout_argument_is_checked(stream):
    ev = npurt.Event()
    with pytest.raises(npurt.InvalidValueError):
        stream.wait_event(ev, timeout=-1)
    with pytest.raises(npurt.InvalidTypeError):
        stream.wait_event(ev, timeout="soon")
