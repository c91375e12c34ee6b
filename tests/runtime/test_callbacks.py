"""Host callbacks: stream order, blocking, the GIL, nesting, and errors."""

import gc
import threading
import time
import weakref

import npurt
import pytest
from helpers import LONG


def test_callback_receives_its_arguments(stream):
    got = []
    stream.launch_host_func(lambda *a: got.append(a), 1, "two", None, (3,))
    stream.launch_host_func(lambda: got.append("no args"))
    stream.synchronize(timeout=LONG)
    assert got == [(1, "two", None, (3,)), "no args"]


def test_callback_with_missing_argument_fails_the_stream():
    s = npurt.Stream()
    s.launch_host_func(lambda x: None)
    with pytest.raises(npurt.TaskFailedError, match="TypeError"):
        s.synchronize(timeout=LONG)
    s.destroy()


def test_non_callable_is_rejected(stream):
    with pytest.raises(npurt.InvalidTypeError):
        stream.launch_host_func(42)
    with pytest.raises(TypeError):
        stream.launch_host_func("print")
    assert stream.query()


def test_callbacks_run_in_stream_order_with_kernels(stream):
    out = []
    for i in range(50):
        npurt.kernels.busy(0.001, stream=stream, blocks=1 + i % 3)
        stream.launch_host_func(out.append, i)
    stream.synchronize(timeout=LONG)
    assert out == list(range(50))


def test_callback_blocks_later_work(stream):
    gate = threading.Event()
    after = npurt.Event()
    stream.launch_host_func(gate.wait, LONG)
    npurt.kernels.empty(stream=stream)
    after.record(stream)
    time.sleep(0.15)
    # The callback is still waiting: the kernel behind it has not run.
    assert not after.query()
    assert not stream.query()
    assert stream.completed == 0
    gate.set()
    after.synchronize(timeout=LONG)
    stream.synchronize(timeout=LONG)
    assert stream.completed == 2


def test_callbacks_needing_the_gil_while_main_thread_synchronizes(stream):
    total = []

    def python_work(i):
        total.append(sum(x * x for x in range(2000)) + i)

    for i in range(200):
        npurt.kernels.empty(stream=stream)
        stream.launch_host_func(python_work, i)
    stream.synchronize(timeout=LONG)  # must release the GIL, or this deadlocks
    assert len(total) == 200


@pytest.mark.parametrize(
    "wait",
    [
        lambda s, e, c: s.synchronize(timeout=LONG),
        lambda s, e, c: e.synchronize(timeout=LONG),
        lambda s, e, c: npurt.Device(0).synchronize(timeout=LONG),
        lambda s, e, c: npurt.synchronize(timeout=LONG),
        lambda s, e, c: c.synchronize(timeout=LONG),
        lambda s, e, c: s.destroy(),
    ],
    ids=["stream", "event", "device", "module", "context", "destroy"],
)
def test_blocking_calls_release_the_gil_for_callbacks(wait):
    ctx = npurt.Context()
    with ctx:
        s = npurt.Stream()
    e = npurt.Event()
    ran = []
    s.launch_host_func(time.sleep, 0.05)  # re-takes the GIL when the sleep ends
    s.launch_host_func(lambda: ran.append(sum(range(1000))))
    e.record(s)
    t = threading.Thread(target=wait, args=(s, e, ctx), daemon=True)
    t.start()
    t.join(LONG)
    assert not t.is_alive(), "deadlock"
    # The same call from the main thread.
    s2 = npurt.Stream()
    s2.launch_host_func(time.sleep, 0.05)
    s2.launch_host_func(lambda: ran.append(0))
    e.record(s2)
    wait(s2, e, ctx)
    s2.synchronize(timeout=LONG) if s2.is_alive else None
    assert len(ran) == 2
    ctx.destroy()
    for x in (s, s2):
        if x.is_alive:
            x.destroy()


def test_callback_may_launch_work_on_another_stream():
    s1, s2 = npurt.Stream(), npurt.Stream()
    out = []
    gate = threading.Event()  # holds s2 until s1's callback was seen to finish

    def cb():
        s2.launch_host_func(gate.wait, LONG)
        npurt.kernels.busy(0.001, stream=s2)
        s2.launch_host_func(out.append, "inner")
        out.append("outer")

    s1.launch_host_func(cb)
    s1.synchronize(timeout=LONG)
    assert out == ["outer"]
    gate.set()
    s2.synchronize(timeout=LONG)
    assert out == ["outer", "inner"]
    s1.destroy()
    s2.destroy()


def test_callback_may_launch_on_its_own_stream(stream):
    out = []

    def cb():
        out.append("first")
        stream.launch_host_func(out.append, "queued by callback")

    stream.launch_host_func(cb)
    stream.launch_host_func(out.append, "second")
    # The nested launch is queued at the time the callback runs: after "second".
    time.sleep(0.05)
    stream.synchronize(timeout=LONG)
    stream.synchronize(timeout=LONG)
    assert out == ["first", "second", "queued by callback"]


@pytest.mark.parametrize(
    "blocking",
    [
        lambda s, o, e: s.synchronize(),
        lambda s, o, e: o.synchronize(),
        lambda s, o, e: e.synchronize(),
        lambda s, o, e: npurt.Device(0).synchronize(),
        lambda s, o, e: o.destroy(),
    ],
    ids=["own_stream", "other_stream", "event", "device", "destroy"],
)
@pytest.mark.npurt_sanitizer(expect=["callback-blocks"])  # misuse on purpose: the sanitizer must see it
def test_blocking_call_inside_callback_raises_instead_of_deadlocking(blocking):
    s, other = npurt.Stream(), npurt.Stream()
    e = npurt.Event()
    npurt.kernels.busy(0.05, stream=other)
    e.record(other)
    caught = []

    def cb():
        try:
            blocking(s, other, e)
        except npurt.Error as err:
            caught.append(err)

    s.launch_host_func(cb)
    s.synchronize(timeout=LONG)  # the callback caught the error: no sticky error
    assert len(caught) == 1
    assert isinstance(caught[0], npurt.Error)
    assert caught[0].code == 107000
    assert "runtime thread" in str(caught[0]) or "deadlock" in str(caught[0])
    assert other.is_alive  # a refused destroy did not destroy
    other.synchronize(timeout=LONG)
    s.destroy()
    other.destroy()


@pytest.mark.npurt_sanitizer(expect=["callback-blocks"])  # misuse on purpose: the sanitizer must see it
def test_uncaught_synchronize_inside_callback_becomes_sticky_error():
    s = npurt.Stream()
    s.launch_host_func(lambda: s.synchronize())
    with pytest.raises(npurt.TaskFailedError, match="synchronize"):
        s.synchronize(timeout=LONG)
    s.destroy()


def test_exception_in_callback_is_sticky_with_original_message():
    s, other = npurt.Stream(), npurt.Stream()
    later = []

    def bad():
        raise ValueError("boom-1234 from the callback")

    s.launch_host_func(bad)
    s.launch_host_func(later.append, "must not run")
    with pytest.raises(npurt.TaskFailedError) as ei:
        s.synchronize(timeout=LONG)
    err = ei.value
    assert isinstance(err, RuntimeError)
    assert "boom-1234 from the callback" in str(err)
    assert "ValueError" in str(err)
    assert str(err.code) in str(err)
    assert later == []
    for _ in range(2):  # sticky
        with pytest.raises(npurt.TaskFailedError, match="boom-1234"):
            s.synchronize(timeout=LONG)
    with pytest.raises(npurt.TaskFailedError):
        s.query()
    with pytest.raises(npurt.TaskFailedError):
        s.launch_host_func(later.append, "rejected")
    # Another stream is unaffected.
    other.launch_host_func(later.append, "other")
    other.synchronize(timeout=LONG)
    assert later == ["other"]
    s.destroy()
    other.destroy()


def test_callback_references_are_released_after_it_runs(stream):
    class Payload:
        pass

    p = Payload()
    ref = weakref.ref(p)
    done = threading.Event()
    stream.launch_host_func(lambda x: done.set(), p)
    del p
    assert done.wait(LONG)
    stream.synchronize(timeout=LONG)
    gc.collect()
    assert ref() is None


def test_callbacks_on_streams_of_two_devices():
    s0, s1 = npurt.Stream(device=0), npurt.Stream(device=1)
    out0, out1 = [], []
    for i in range(20):
        s0.launch_host_func(out0.append, i)
        s1.launch_host_func(out1.append, i)
    s0.synchronize(timeout=LONG)
    s1.synchronize(timeout=LONG)
    assert out0 == out1 == list(range(20))
    s0.destroy()
    s1.destroy()
