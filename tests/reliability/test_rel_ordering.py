"""Defects 2 and 3: last-writer ordering must survive the writer stream's release, and an
array launch whose implicit wait meets a full ring must not hold the GIL while it waits."""

import gc

import npurt
import numpy as np
from relhelp import assert_clean, run_script

N = 1 << 16


def test_read_after_the_writer_stream_was_released():
    x = npurt.zeros(N)
    s = npurt.Stream()
    npurt.kernels.busy(0.3, stream=s)
    y = npurt.add(x, 1.0, stream=s)  # queued behind the busy kernel
    del s
    gc.collect()
    assert (y.to_host() == 1.0).all()


def test_kernel_on_another_stream_after_the_writer_was_released():
    x = npurt.zeros(N)
    with npurt.stream(npurt.Stream()):
        npurt.kernels.busy(0.3)
        y = npurt.add(x, 1.0)
    gc.collect()
    other = npurt.Stream()
    z = npurt.multiply(y, 2.0, stream=other)
    assert (z.to_host() == 2.0).all()
    other.destroy()


def test_released_writer_failure_is_still_reported():
    x = npurt.zeros(N)
    s = npurt.Stream()
    npurt.kernels.busy(0.3, stream=s)  # the failing callback runs after the add is queued
    s.launch_host_func(lambda: 1 / 0)
    try:
        y = npurt.add(x, 1.0, stream=s)
    except npurt.TaskFailedError:
        return  # a stalled test thread: the failure came first and was reported at launch
    del s
    gc.collect()
    try:
        y.to_host()
    except npurt.TaskFailedError:
        pass  # the writer's failure (the read must never return the stale bytes silently)
    else:
        raise AssertionError("the failed write was read as if it had run")


def test_full_ring_launch_waits_without_the_gil():
    # The ring of s2 is full of host callbacks (they need the GIL) when an array launch must
    # first push the wait for x's writer: that push must release the GIL, or nothing moves.
    p = run_script(
        """
        import npurt
        x = npurt.zeros(1024)
        s1, s2 = npurt.Stream(), npurt.Stream()
        npurt.kernels.busy(1.0, stream=s1)
        x = npurt.add(x, 1.0, stream=s1)
        npurt.kernels.busy(0.5, stream=s2)
        ran = []
        for i in range(4):  # fills the ring (depth 4) while s2 runs its busy kernel
            s2.launch_host_func(ran.append, i)
        y = npurt.add(x, 1.0, stream=s2)
        assert (y.to_host() == 2.0).all()
        assert ran == list(range(4))
        print("ok")
        """,
        env={"NPURT_STREAM_QUEUE_DEPTH": "4"},
        timeout=30,
    )
    assert_clean(p, "ok")


def test_writer_on_another_device_context_is_ordered():
    # the same rule through a context's stream that was released by leaving its `with`
    x = npurt.zeros(N)
    ctx = npurt.Context()
    with ctx:
        with npurt.stream(npurt.Stream()):
            npurt.kernels.busy(0.2)
            npurt.add(x, 3.0, out=x)
    gc.collect()
    assert (np.asarray(x) == 3.0).all()
    ctx.destroy()
