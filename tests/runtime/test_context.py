"""Explicit contexts: current context, default stream, isolation of errors, destroy."""

import gc
import threading

import npurt
import pytest
from helpers import LONG, run_in_thread


@pytest.fixture
def ctx():
    c = npurt.Context()
    yield c
    if c.is_alive:
        c.destroy()


def test_context_attributes(ctx):
    assert ctx.device == 0
    assert ctx.is_alive
    d = ctx.default_stream
    assert d.is_default and d.device == 0
    assert d != npurt.default_stream()  # not the device's default context
    assert ctx.default_stream == d


def test_context_on_another_device():
    c = npurt.Context(device=1)
    assert c.device == 1
    with c:
        assert npurt.current_device() == 1
        assert npurt.current_stream() == c.default_stream
    c.destroy()


def test_contexts_have_distinct_ids():
    a, b = npurt.Context(), npurt.Context()
    assert a.id != b.id
    a.destroy()
    b.destroy()


def test_with_context_makes_it_current(ctx):
    with ctx as entered:
        assert entered is ctx
        assert npurt.current_stream() == ctx.default_stream
        assert npurt.default_stream() == ctx.default_stream
        assert npurt.current_device() == 0
        s = npurt.Stream()
        with s:
            assert npurt.current_stream() == s
        assert npurt.current_stream() == ctx.default_stream
        s.destroy()
    assert npurt.current_stream() == npurt.default_stream()
    assert npurt.current_stream() != ctx.default_stream


def test_with_context_restores_on_exception(ctx):
    with pytest.raises(ZeroDivisionError):
        with ctx:
            1 / 0
    assert npurt.current_stream() == npurt.default_stream()


def test_current_context_is_per_thread(ctx):
    with ctx:
        assert run_in_thread(lambda: npurt.current_stream() == npurt.default_stream())


def test_work_on_context_default_stream(ctx):
    flag = threading.Event()
    with ctx:
        npurt.kernels.busy(0.05)
        npurt.current_stream().launch_host_func(flag.set)
    ctx.synchronize(timeout=LONG)
    assert flag.is_set()


def test_context_synchronize_covers_its_streams(ctx):
    flags = [threading.Event(), threading.Event()]
    with ctx:
        s = npurt.Stream()
        npurt.kernels.busy(0.1, stream=s)
        s.launch_host_func(flags[0].set)
        npurt.kernels.busy(0.1)
        npurt.current_stream().launch_host_func(flags[1].set)
    ctx.synchronize(timeout=LONG)
    assert all(f.is_set() for f in flags)
    s.destroy()


def test_failing_kernel_in_one_context_does_not_affect_another():
    a, b = npurt.Context(), npurt.Context()
    with a:
        sa = npurt.Stream()
        npurt.kernels.fault("ctx-a fault", stream=sa)
        npurt.kernels.fault("ctx-a default fault")  # a's default stream
    with b:
        sb = npurt.Stream()
        npurt.kernels.busy(0.02, stream=sb)
        npurt.kernels.empty()
    with pytest.raises(npurt.TaskFailedError, match="ctx-a"):
        a.synchronize(timeout=LONG)
    with pytest.raises(npurt.TaskFailedError):
        a.default_stream.synchronize(timeout=LONG)
    b.synchronize(timeout=LONG)
    sb.synchronize(timeout=LONG)
    b.default_stream.synchronize(timeout=LONG)
    npurt.default_stream().synchronize(timeout=LONG)  # device 0's default context too
    out = []
    b.default_stream.launch_host_func(out.append, "b")
    b.synchronize(timeout=LONG)
    assert out == ["b"]
    for c in (a, b):
        c.destroy()


def test_stream_of_another_context_cannot_be_entered(ctx):
    s = npurt.Stream()  # device 0's default context
    with ctx:
        with pytest.raises(npurt.WrongContextError):
            with s:
                pass
        assert npurt.current_stream() == ctx.default_stream
    s.destroy()


def test_destroy_waits_and_invalidates():
    c = npurt.Context()
    flag = threading.Event()
    with c:
        s = npurt.Stream()
        npurt.kernels.busy(0.1, stream=s)
        s.launch_host_func(flag.set)
    default = c.default_stream
    c.destroy()
    assert flag.is_set()
    assert not c.is_alive
    for use in (
        lambda: c.__enter__(),
        lambda: c.default_stream,
        lambda: c.synchronize(),
        lambda: c.destroy(),
        lambda: s.synchronize(),
        lambda: npurt.kernels.empty(stream=s),
        lambda: default.synchronize(),
    ):
        with pytest.raises(npurt.InvalidHandleError) as ei:
            use()
        assert ei.value.code == 107017
    assert npurt.current_stream() == npurt.default_stream()


def test_live_counts_follow_contexts():
    gc.collect()
    before = npurt.live_counts()
    c = npurt.Context()
    with c:
        s = npurt.Stream()
        e = npurt.Event()
    assert npurt.live_counts() == (before[0] + 1, before[1] + 1, before[2] + 1)
    c.destroy()
    del c, s, e
    gc.collect()
    assert npurt.live_counts() == before


MiB = 1 << 20


def test_memory_limit_per_context():
    a = npurt.Context(memory_limit=8 * MiB)
    b = npurt.Context()
    try:
        assert a.memory_limit == 8 * MiB and b.memory_limit is None
        device_before = npurt.memory_allocated()
        with a:
            x = npurt.malloc(6 * MiB)
            with pytest.raises(npurt.OutOfMemoryError) as ei:
                npurt.malloc(3 * MiB)
            err = ei.value
            assert isinstance(err, MemoryError) and err.code == 207001
            assert f"context {a.id} memory limit" in str(err) and "requested" in str(err)
            # The context stays usable; arrays count too.
            y = npurt.zeros((MiB // 4,), dtype="float32")  # 1 MiB
            assert a.memory_allocated() == 7 * MiB
            with pytest.raises(npurt.OutOfMemoryError):
                npurt.empty((MiB,), dtype="float32")
        with b:  # a's limit does not bind b
            z = npurt.malloc(16 * MiB)
        assert a.memory_allocated() == 7 * MiB and a.max_memory_allocated() == 7 * MiB
        x.free()
        del y
        gc.collect()
        # y's fill kernel holds its memory until it ran (stream-ordered release); its
        # worker may not have had a CPU yet when the main thread keeps the other one.
        npurt.synchronize()
        assert a.memory_allocated() == 0
        z.free()
        assert npurt.memory_allocated() == device_before
        a.set_memory_limit(None)
        assert a.memory_limit is None
        with a:
            big = npurt.malloc(16 * MiB)
        assert a.memory_allocated() == 0  # no limit: nothing counted
        big.free()
    finally:
        a.destroy()
        b.destroy()


def test_array_device_argument_follows_malloc_rules():
    # `device=` naming the current device means the current context (its limit binds
    # arrays as it binds npurt.malloc): alloc::malloc_for decides for both.
    a = npurt.Context(memory_limit=2 * MiB)
    try:
        with a:
            x = npurt.empty((MiB // 4,), dtype="float32", device=a.device)  # 1 MiB
            assert a.memory_allocated() == MiB
            with pytest.raises(npurt.OutOfMemoryError):
                npurt.empty((MiB // 2,), dtype="float32", device=a.device)  # 2 more MiB
            with pytest.raises(npurt.OutOfMemoryError):
                npurt.malloc(2 * MiB, device=a.device)
            del x
            gc.collect()
            assert a.memory_allocated() == 0
    finally:
        a.destroy()


def test_memory_limit_is_released_on_exceptions():
    a = npurt.Context(memory_limit=4 * MiB)
    try:
        with pytest.raises(RuntimeError):
            with a, npurt.malloc(2 * MiB), npurt.malloc(MiB):
                assert a.memory_allocated() == 3 * MiB
                raise RuntimeError("boom")
        assert a.memory_allocated() == 0
    finally:
        a.destroy()


@pytest.mark.parametrize("bad", [-1, "1k", 1.5])
def test_memory_limit_bad_values(bad):
    with pytest.raises((npurt.InvalidValueError, npurt.InvalidTypeError)):
        npurt.Context(memory_limit=bad)
    c = npurt.Context()
    try:
        with pytest.raises((npurt.InvalidValueError, npurt.InvalidTypeError)):
            c.set_memory_limit(bad)
    finally:
        c.destroy()
    with pytest.raises(npurt.Error):
        c.set_memory_limit(MiB)  # destroyed context
