"""Many threads at once: submitting to one stream, synchronizing, entering devices."""

import threading
import time

import npurt
import pytest
from helpers import LONG


def _run_threads(n, target):
    errors = []
    start = threading.Barrier(n)

    def body(t):
        try:
            start.wait(LONG)
            target(t)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((t, e))

    threads = [threading.Thread(target=body, args=(t,), daemon=True) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not any(th.is_alive() for th in threads), "a submitting thread hung"
    assert errors == []


def test_many_threads_submitting_to_one_stream(stream):
    threads, per_thread = 4, 2000
    out = []

    def submit(t):
        for i in range(per_thread):
            if i % 2:
                stream.launch_host_func(out.append, (t, i))
            else:
                npurt.kernels.empty(stream=stream)

    _run_threads(threads, submit)
    stream.synchronize(timeout=60)
    assert stream.completed == threads * per_thread  # nothing lost
    assert len(out) == threads * per_thread // 2
    for t in range(threads):
        mine = [i for (tt, i) in out if tt == t]
        assert mine == list(range(1, per_thread, 2)), f"thread {t} out of order or lost"


def test_many_threads_each_with_own_stream():
    results = {}

    def work(t):
        s = npurt.Stream(priority=t % 8)
        seen = []
        for i in range(300):
            npurt.kernels.empty(stream=s, blocks=1 + i % 3)
            s.launch_host_func(seen.append, i)
        s.synchronize(timeout=LONG)
        results[t] = (seen, s.completed)
        s.destroy()

    _run_threads(4, work)
    assert sorted(results) == [0, 1, 2, 3]
    for seen, completed in results.values():
        assert seen == list(range(300))
        assert completed == 600


def test_many_threads_synchronizing_one_stream(stream):
    flag = threading.Event()
    npurt.kernels.busy(0.2, stream=stream)
    stream.launch_host_func(flag.set)
    seen = []

    def sync(t):
        stream.synchronize(timeout=LONG)
        seen.append(flag.is_set())

    _run_threads(4, sync)
    assert seen == [True] * 4


def test_many_threads_waiting_on_one_event(stream):
    e = npurt.Event()
    flag = threading.Event()
    npurt.kernels.busy(0.15, stream=stream)
    stream.launch_host_func(flag.set)
    e.record(stream)
    seen = []

    def wait(t):
        if t % 2:
            e.synchronize(timeout=LONG)
        else:
            s = npurt.Stream()
            s.wait_event(e)
            s.synchronize(timeout=LONG)
            s.destroy()
        seen.append(flag.is_set())

    _run_threads(4, wait)
    assert seen == [True] * 4


def test_threads_entering_and_leaving_a_device(fresh_dev1):
    deadline = time.monotonic() + 1.0
    counts = [0] * 4

    def churn(t):
        while time.monotonic() < deadline:
            with npurt.Device(1):
                assert npurt.current_device() == 1
                s = npurt.Stream()
                out = []
                npurt.kernels.empty(stream=s)
                s.launch_host_func(out.append, t)
                s.synchronize(timeout=LONG)
                assert out == [t]
                s.destroy()
            assert npurt.current_device() == 0
            counts[t] += 1

    _run_threads(4, churn)
    assert all(c > 0 for c in counts)
    assert npurt.Device(1)._refcount() == 0
    assert not npurt.Device(1).is_active


def test_submitting_from_python_threads_while_callbacks_need_the_gil(stream):
    # Python threads spin holding the GIL in turns while the callback thread needs it.
    stop = threading.Event()
    out = []

    def spin():
        x = 0
        while not stop.is_set():
            x += 1

    spinners = [threading.Thread(target=spin, daemon=True) for _ in range(2)]
    for t in spinners:
        t.start()
    try:
        for i in range(50):
            stream.launch_host_func(out.append, i)
        stream.synchronize(timeout=30)
    finally:
        stop.set()
        for t in spinners:
            t.join(LONG)
    assert out == list(range(50))


@pytest.mark.parametrize("force", [False, True])
def test_destroy_while_other_threads_submit(force):
    s = npurt.Stream()
    go = threading.Event()
    errors = []

    def submit():
        go.wait(LONG)
        try:
            for _ in range(20000):
                npurt.kernels.empty(stream=s)
        except (npurt.InvalidHandleError, npurt.StreamAbortedError) as e:
            errors.append(e)

    threads = [threading.Thread(target=submit, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    go.set()
    time.sleep(0.01)
    s.destroy(force=force)
    for t in threads:
        t.join(LONG)
    assert not any(t.is_alive() for t in threads)
    assert not s.is_alive
    # Submitting after destroy fails with a handle error, never a crash or a hang.
    with pytest.raises((npurt.InvalidHandleError, npurt.StreamAbortedError)):
        npurt.kernels.empty(stream=s)
