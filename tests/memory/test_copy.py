"""Copies and memsets: every direction, sync and async, pageable and pinned host memory,
bounds checks, stream-ordered frees, and HostBuffer's numpy views."""

import gc
import time

import npurt
import numpy as np
import pytest
from helpers import LONG

MIB = 1 << 20


def data(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


@pytest.mark.parametrize("n", [1, 1000, 64 * 1024, 3 * MIB + 5, 20 * MIB])
def test_sync_round_trip_numpy_device_numpy(n):
    src = data(n)
    out = np.zeros(n, np.uint8)
    with npurt.malloc(n) as d1, npurt.malloc(n) as d2:
        npurt.memcpy(d1, src)  # H2D
        npurt.memcpy(d2, d1)  # D2D
        npurt.memcpy(out, d2)  # D2H
    assert np.array_equal(out, src)


def test_typed_arrays_and_bytes_like_objects():
    a = np.linspace(0, 1, 1000, dtype=np.float64).reshape(10, 100)
    with npurt.malloc(a.nbytes) as d:
        npurt.memcpy(d, a)
        b = np.empty_like(a)
        npurt.memcpy(b, d)
        assert np.array_equal(a, b)
        npurt.memcpy(d, b"hello world")
        ba = bytearray(11)
        npurt.memcpy(ba, d, 11)
        assert ba == b"hello world"
        mv = memoryview(bytearray(5))
        npurt.memcpy(mv, d, 5)
        assert mv.tobytes() == b"hello"


def test_async_round_trip_through_pinned_memory(stream):
    n = 5 * MIB + 3
    src = data(n, 1)
    h_in, h_out = npurt.malloc_host(n), npurt.malloc_host(n)
    np.asarray(h_in)[:] = src
    with npurt.malloc(n) as d1, npurt.malloc(n) as d2:
        npurt.memcpy_async(d1, h_in, stream)  # H2D
        npurt.memcpy_async(d2, d1, stream)  # D2D
        npurt.memcpy_async(h_out, d2, stream)  # D2H
        stream.synchronize(timeout=LONG)
    assert np.array_equal(np.asarray(h_out), src)
    h3 = npurt.malloc_host(n)
    npurt.memcpy_async(h3, h_out, stream, nbytes=n)  # H2H
    stream.synchronize(timeout=LONG)
    assert np.array_equal(h3.numpy(), src)
    for h in (h_in, h_out, h3):
        h.free()


def test_async_copies_are_stream_ordered_behind_a_kernel(stream):
    n = MIB
    h = npurt.malloc_host(n)
    with npurt.malloc(n) as d:
        npurt.memset(d, 9)
        npurt.kernels.busy(0.1, stream=stream)
        t = time.perf_counter()
        npurt.memcpy_async(h, d, stream)
        assert time.perf_counter() - t < 0.05, "memcpy_async must not wait"
        assert not stream.query()
        stream.synchronize(timeout=LONG)
    assert (np.asarray(h) == 9).all()


def test_async_from_pageable_memory_is_staged(stream):
    n = 2 * MIB
    src = data(n, 2)
    keep = src.copy()
    out = np.zeros(n, np.uint8)
    with npurt.malloc(n) as d:
        npurt.kernels.busy(0.1, stream=stream)
        npurt.memcpy_async(d, src, stream)
        src[:] = 0  # the caller may reuse pageable memory at once (it was staged)
        npurt.memcpy_async(out, d, stream)  # into pageable memory: done on return
        assert stream.query()
    assert np.array_equal(out, keep)


def test_cross_device_copies(stream):
    n = 3 * MIB
    src = data(n, 3)
    s1 = npurt.Stream(device=1)
    try:
        with npurt.malloc(n, device=0) as a, npurt.malloc(n, device=1) as b:
            npurt.memcpy(a, src)
            npurt.memcpy(b, a)  # sync D2D across devices
            out = np.zeros(n, np.uint8)
            npurt.memcpy(out, b)
            assert np.array_equal(out, src)
            npurt.memset(a, 0)
            npurt.memcpy_async(a, b, s1)  # on device 1's copy engine
            s1.synchronize(timeout=LONG)
            npurt.memcpy(out, a)
            assert np.array_equal(out, src)
    finally:
        s1.destroy()


def test_free_while_a_queued_copy_uses_the_buffer(stream):
    gc.collect()
    npurt.synchronize(timeout=LONG)
    base = npurt.memory_allocated()
    n = 4 * MIB
    host = npurt.malloc_host(n)
    src = npurt.malloc(n)
    npurt.memcpy(src, data(n, 4))
    expect = data(n, 4)
    npurt.kernels.busy(0.2, stream=stream)
    npurt.memcpy_async(host, src, stream)
    src.free()  # stream-ordered: the queued copy keeps the memory
    assert npurt.memory_allocated() > base
    stream.synchronize(timeout=LONG)
    assert npurt.memory_allocated() == base
    assert np.array_equal(np.asarray(host), expect)
    # Dropping the last Python reference frees the same way.
    src2 = npurt.malloc(n)
    npurt.memset(src2, 5)
    npurt.kernels.busy(0.1, stream=stream)
    npurt.memcpy_async(host, src2, stream)
    del src2
    assert npurt.memory_allocated() > base
    stream.synchronize(timeout=LONG)
    assert npurt.memory_allocated() == base
    assert (np.asarray(host) == 5).all()
    host.free()


def test_memset_sync_and_async(stream):
    with npurt.malloc(1000) as d, npurt.malloc_host(1000) as h:
        npurt.memset(d, 0xAB)
        npurt.memset(d, 1, nbytes=10)
        npurt.memcpy(h, d)
        v = np.asarray(h)
        assert (v[:10] == 1).all() and (v[10:] == 0xAB).all()
        npurt.kernels.busy(0.05, stream=stream)
        npurt.memset_async(d, 7, stream, nbytes=500)
        npurt.memcpy_async(h, d, stream)
        npurt.memset_async(h, 3, stream, 100)
        stream.synchronize(timeout=LONG)
        assert (v[:100] == 3).all() and (v[100:500] == 7).all() and (v[500:] == 0xAB).all()
    a = np.zeros(64, np.uint8)
    npurt.memset(a, 255, 32)
    assert (a[:32] == 255).all() and (a[32:] == 0).all()
    npurt.memset_async(a, 1, stream)
    assert (a == 1).all()
    for bad in (-1, 256):
        with pytest.raises(npurt.InvalidValueError):
            npurt.memset(a, bad)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.memset(a, 1.0)


@pytest.mark.npurt_sanitizer(expect=["out-of-bounds"])  # misuse on purpose: the sanitizer must see it
def test_bounds_and_sizes_are_checked_against_both_sides():
    with npurt.malloc(100) as small, npurt.malloc(200) as big:
        cases = [
            lambda: npurt.memcpy(small, big),  # whole source does not fit
            lambda: npurt.memcpy(big, small, 150),  # more than the source holds
            lambda: npurt.memcpy(big, small, 0),
            lambda: npurt.memcpy(np.zeros(10, np.uint8), big, 11),
            lambda: npurt.memcpy(big, np.zeros(10, np.uint8), 11),
            lambda: npurt.memcpy_async(small, big, None),
            lambda: npurt.memcpy_async(np.zeros(10, np.uint8), big, None),
            lambda: npurt.memcpy_async(big, np.zeros(10, np.uint8), None, 20),
            lambda: npurt.memset(small, 0, 101),
            lambda: npurt.memset_async(small, 0, None, 0),
            lambda: npurt.memcpy(big, np.zeros(0, np.uint8)),
        ]
        for i, case in enumerate(cases):
            with pytest.raises(npurt.InvalidValueError) as e:
                case()
            assert e.value.code == 107000, i
        npurt.memcpy(big, small)  # exactly the source: fine
        npurt.memcpy(small, big, 100)


def test_python_buffers_must_be_contiguous_writable_buffers():
    with npurt.malloc(64) as d:
        with pytest.raises(npurt.InvalidValueError, match="C-contiguous"):
            npurt.memcpy(d, np.zeros((8, 8), np.uint8)[:, ::2])
        with pytest.raises(npurt.InvalidValueError, match="read-only"):
            npurt.memcpy(b"x" * 64, d)
        ro = np.zeros(64, np.uint8)
        ro.flags.writeable = False
        with pytest.raises(npurt.InvalidValueError, match="read-only"):
            npurt.memcpy(ro, d)
        npurt.memcpy(d, ro)  # read-only is fine as a source
        for bad in (None, 5, [1, 2, 3], "abc"):
            with pytest.raises(npurt.InvalidTypeError):
                npurt.memcpy(d, bad)
            with pytest.raises(npurt.InvalidTypeError):
                npurt.memcpy(bad, d)
        with pytest.raises(npurt.InvalidTypeError):
            npurt.memcpy_async(d, d, stream="s")
        with pytest.raises(npurt.InvalidValueError):
            npurt.memcpy(d, d, nbytes=-1)


def test_device_buffer_copy_helpers(stream):
    a = np.arange(256, dtype=np.int32)
    with npurt.malloc(a.nbytes) as d:
        d.copy_from_host(a)
        out = d.copy_to_host()
        assert out.dtype == np.uint8 and np.array_equal(out.view(np.int32), a)
        b = np.zeros_like(a)
        assert d.copy_to_host(b) is b and np.array_equal(a, b)
        d.copy_from_host(a[::-1].copy(), stream=stream)
        out = d.copy_to_host(stream=stream)
        assert np.array_equal(out.view(np.int32), a[::-1])
        assert d.copy_to_host(nbytes=8).nbytes == 8


def test_host_buffer_views_and_lifetime():
    h = npurt.malloc_host(4096)
    assert isinstance(h, npurt.HostBuffer)
    assert h.pinned is True and isinstance(h.locked, bool)
    assert h.nbytes == len(h) == 4096 and h.ptr % 4096 == 0
    v = np.asarray(h)
    assert v.dtype == np.uint8 and v.shape == (4096,)
    assert v.__array_interface__["data"][0] == h.ptr
    v[:] = 42
    assert h.to_bytes() == b"*" * 4096
    f = h.numpy(np.float32)
    assert f.shape == (1024,)
    f[0] = 1.5
    assert np.asarray(h)[:4].view(np.float32)[0] == 1.5
    assert np.array(h, dtype=np.float64).dtype == np.float64
    c = np.array(h, copy=True)
    c[:] = 0
    assert np.asarray(h)[5] == 42
    h.free()
    # The view keeps the memory alive after free(): still readable, no crash.
    assert v[5] == 42
    assert "freed" in repr(h)
    with pytest.raises(npurt.InvalidHandleError):
        h.to_bytes()
    del v, f


def test_gil_is_released_during_large_copies(stream):
    """A thread keeps running Python while a large copy runs."""
    import threading

    n = 64 * MIB
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.0005)

    with npurt.malloc(n) as a, npurt.malloc(n) as b:
        npurt.memset(a, 1)
        t = threading.Thread(target=ticker)
        t.start()
        try:
            before = len(ticks)
            for _ in range(5):
                npurt.memcpy(b, a)
            during = len(ticks) - before
        finally:
            stop.set()
            t.join(LONG)
    assert during > 0
