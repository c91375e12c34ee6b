"""Host copies with DeviceArrays: npurt.memcpy / memcpy_async with arrays on either side,
DeviceArray.copy_(host, stream=), to_host(out=, stream=), to_device(pinned, stream=).
Correctness of every combination, ordering with the arrays' last writers, typed errors,
the GIL in waits and the lifetime of queued copies."""

import gc
import threading

import npurt
import numpy as np
import pytest
from helpers import LONG, run_python

N = 1 << 12  # elements


def gate(s):
    """Blocks ``s`` (a host callback waiting on an event) until the returned event is set:
    work queued behind it has certainly not run yet."""
    ev = threading.Event()
    s.launch_host_func(ev.wait, LONG)
    return ev


def pinned(values):
    """A HostBuffer holding ``values`` and its float32 numpy view."""
    h = npurt.malloc_host(values.nbytes)
    v = h.numpy(values.dtype)
    v[:] = values
    return h, v


def data(n=N, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


# -- every combination ------------------------------------------------------------------

HOST_KINDS = ["numpy", "hostbuffer", "pinned_numpy", "devicebuffer"]


def host_side(kind, x):
    """``x`` (float32) as the host side of a copy, and a reader of its bytes."""
    if kind == "numpy":
        return x.copy(), lambda o: o
    if kind in ("hostbuffer", "pinned_numpy"):
        h, v = pinned(x)
        return (h if kind == "hostbuffer" else v), lambda o, h=h: h.numpy(np.float32)
    d = npurt.malloc(x.nbytes)
    npurt.memcpy(d, x)

    def read(o, d=d):
        out = np.empty_like(x)
        npurt.memcpy(out, d)
        return out

    return d, read


@pytest.mark.parametrize("kind", HOST_KINDS)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_h2d_and_d2h_with_arrays(kind, mode, stream):
    x = data()
    src, _ = host_side(kind, x)
    a = npurt.empty(N)
    if mode == "sync":
        npurt.memcpy(a, src)
    else:
        npurt.memcpy_async(a, src, stream)
    np.testing.assert_array_equal(a.to_host(), x)  # to_host waits for a's writer
    dst, read = host_side(kind, np.zeros(N, np.float32))
    if mode == "sync":
        npurt.memcpy(dst, a)
    else:
        npurt.memcpy_async(dst, a, stream)
        stream.synchronize(timeout=LONG)
    np.testing.assert_array_equal(read(dst), x)


def test_python_deviceArray_and_native_array_are_both_accepted(stream):
    x = data()
    a, b = npurt.empty(N), npurt.empty(N)
    npurt.memcpy(a._a, x)
    npurt.memcpy_async(b, a, stream)  # array -> array on the copy engine
    np.testing.assert_array_equal(b.to_host(), x)
    assert b.to_host().dtype == np.float32


def test_contiguous_views_copy_their_own_bytes(stream):
    a = npurt.zeros((4, 8))
    npurt.memcpy_async(a[2], np.full(8, 5, np.float32), stream)
    npurt.memcpy_async(a[1:2], np.full(8, 3, np.float32), stream)
    want = np.zeros((4, 8), np.float32)
    want[2], want[1] = 5, 3
    np.testing.assert_array_equal(a.to_host(), want)
    out = np.zeros(8, np.float32)
    npurt.memcpy(out, a[2])
    np.testing.assert_array_equal(out, 5)


def test_nbytes_copies_part_of_an_array():
    a = npurt.zeros(N)
    npurt.memcpy(a, np.ones(N, np.float32), 64)
    np.testing.assert_array_equal(a.to_host()[:16], 1)
    np.testing.assert_array_equal(a.to_host()[16:], 0)


# -- typed errors ------------------------------------------------------------------------


def test_non_contiguous_views_are_refused_clearly(stream):
    a = npurt.zeros((8, 8))
    out = np.zeros(64, np.float32)
    for call in (lambda: npurt.memcpy(out, a.T), lambda: npurt.memcpy_async(a[:, ::2], out, stream)):
        with pytest.raises(npurt.InvalidValueError, match="not contiguous") as e:
            call()
        assert e.value.code == 107000


@pytest.mark.npurt_sanitizer(expect=["out-of-bounds"])  # misuse on purpose: the sanitizer must see it
def test_bounds_and_sizes_are_typed_errors(stream):
    a = npurt.zeros(16)
    small = npurt.malloc_host(32)
    with pytest.raises(npurt.InvalidValueError, match="destination"):
        npurt.memcpy_async(small, a, stream)  # 64 bytes into 32
    with pytest.raises(npurt.InvalidValueError, match="source"):
        npurt.memcpy(a, small, 64)
    with pytest.raises(npurt.InvalidValueError):
        npurt.memcpy(a, np.zeros(32, np.float32))  # 128 bytes into 64
    with pytest.raises(npurt.InvalidValueError):
        npurt.memcpy(a, small, 0)
    with pytest.raises(npurt.InvalidTypeError):
        npurt.memcpy(a, object())
    with pytest.raises(npurt.InvalidTypeError, match="fill"):
        npurt.memset(a, 0)
    with pytest.raises(npurt.InvalidValueError, match="read-only"):
        npurt.memcpy(np.zeros(16, np.float32).setflags(write=False) or np.frombuffer(bytes(64), np.float32), a)
    stream.synchronize(timeout=LONG)
    np.testing.assert_array_equal(a.to_host(), 0)  # nothing was copied


def test_array_of_another_device_on_a_stream_is_wrong_context(stream, fresh_dev1):
    b = npurt.zeros(16, device=1)
    with pytest.raises(npurt.WrongContextError):
        npurt.memcpy_async(b, np.zeros(16, np.float32), stream)
    npurt.memcpy(b, np.ones(16, np.float32))  # synchronous copies need no stream
    np.testing.assert_array_equal(b.to_host(), 1)
    del b


@pytest.mark.npurt_sanitizer(expect=["out-of-bounds"])  # misuse on purpose: the sanitizer must see it
def test_copy_and_to_host_check_dtype_shape_and_size(stream):
    a = npurt.zeros((4, 4))
    with pytest.raises(npurt.InvalidTypeError):
        a.copy_(np.ones((4, 4), np.complex64))  # not same_kind
    with pytest.raises(npurt.InvalidValueError):
        a.copy_(np.ones(5, np.float32))  # does not broadcast
    with pytest.raises(npurt.InvalidValueError, match="holds 32 bytes"):
        a.copy_(npurt.malloc_host(32))
    with pytest.raises(npurt.InvalidTypeError, match="dtype"):
        a.to_host(out=np.empty((4, 4), np.int32))
    with pytest.raises(npurt.InvalidValueError, match="shape"):
        a.to_host(out=np.empty(16, np.float32))
    with pytest.raises(npurt.InvalidValueError, match="destination"):
        a.to_host(out=npurt.malloc_host(8), stream=stream)
    with pytest.raises(npurt.InvalidTypeError):
        a.to_host(out=[0] * 16)
    i = npurt.zeros(4, "int32")
    with pytest.raises(npurt.InvalidTypeError):
        i.copy_(np.ones(4, np.float32))  # float -> int is not same_kind
    np.testing.assert_array_equal(a.to_host(), 0)


# -- copy_ / to_host(out=) / to_device(stream=) ------------------------------------------


@pytest.mark.parametrize("kind", ["numpy", "list", "hostbuffer", "pinned_numpy"])
def test_copy_from_host_is_one_async_copy(kind, stream):
    x = data(16).reshape(4, 4)
    a = npurt.zeros((4, 4))
    src = {"numpy": lambda: x.copy(), "list": lambda: x.tolist()}.get(kind)
    if src is not None:
        src = src()
    else:
        h, v = pinned(x.reshape(-1))
        src = h if kind == "hostbuffer" else v.reshape(4, 4)
    ev = gate(stream)
    assert a.copy_(src, stream=stream) is a  # returns while the stream is blocked
    if kind in ("numpy", "list"):
        src = None  # pageable: staged, so the source may go at once
        gc.collect()
    ev.set()
    np.testing.assert_array_equal(a.to_host(), x)


def test_copy_broadcasts_and_casts_like_copyto():
    a = npurt.zeros((3, 4))
    a.copy_(np.arange(4, dtype=np.float64))  # float64 -> float32 is same_kind
    np.testing.assert_array_equal(a.to_host(), np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)))
    a.copy_(2)
    np.testing.assert_array_equal(a.to_host(), 2)


def test_copy_into_strided_and_bfloat16_arrays_still_works():
    a = npurt.zeros((4, 4))
    a.T.copy_(np.arange(16, dtype=np.float32).reshape(4, 4))
    np.testing.assert_array_equal(a.to_host(), np.arange(16, dtype=np.float32).reshape(4, 4).T)
    b = npurt.zeros(4, "bfloat16")
    b.copy_(np.array([1, 2, 3, 4], np.float32))
    np.testing.assert_array_equal(b.to_host(), [1, 2, 3, 4])
    out = np.zeros(4, np.float32)
    assert b.to_host(out=out) is out
    np.testing.assert_array_equal(out, [1, 2, 3, 4])


@pytest.mark.parametrize("kind", ["numpy", "hostbuffer", "pinned_numpy"])
def test_to_host_out_sync(kind):
    x = data(64).reshape(8, 8)
    a = npurt.to_device(x)
    if kind == "numpy":
        out = np.zeros((8, 8), np.float32)
        read = lambda: out  # noqa: E731
    else:
        h = npurt.malloc_host(x.nbytes)
        out = h if kind == "hostbuffer" else h.numpy(np.float32).reshape(8, 8)
        read = lambda: h.numpy(np.float32).reshape(8, 8)  # noqa: E731
    assert a.to_host(out=out) is out
    np.testing.assert_array_equal(read(), x)
    a.T.to_host(out=out)  # a strided array goes through a copy kernel first
    np.testing.assert_array_equal(read(), x.T)


def test_to_host_out_pinned_with_stream_returns_before_the_copy(stream):
    x = data()
    a = npurt.to_device(x)
    h = npurt.malloc_host(x.nbytes)
    h.numpy(np.float32)[:] = 0
    ev = gate(stream)
    assert a.to_host(out=h, stream=stream) is h  # queued behind the gate
    assert not stream.query()
    ev.set()
    stream.synchronize(timeout=LONG)
    np.testing.assert_array_equal(h.numpy(np.float32), x)


def test_to_host_out_pageable_with_stream_is_synchronous(stream):
    x = data()
    a = npurt.to_device(x)
    out = np.zeros(N, np.float32)
    npurt.kernels.busy(0.02, stream=stream)
    a.to_host(out=out, stream=stream)
    assert stream.query()  # ACL: into pageable memory, the stream is synchronized first
    np.testing.assert_array_equal(out, x)


def test_to_device_from_pinned_with_stream_is_async_and_ordered(stream):
    x = data()
    h, v = pinned(x)
    other = npurt.Stream()
    try:
        ev = gate(stream)
        a = npurt.to_device(v, stream=stream)  # returns while the stream is blocked
        assert a._a is not None and not stream.query()
        # A kernel on another stream reading a waits for the copy (a's last writer).
        b = npurt.multiply(a, 2.0, stream=other)
        ev.set()
        np.testing.assert_array_equal(b.to_host(), x * 2)
    finally:
        other.synchronize(timeout=LONG)
        other.destroy()


def test_to_device_from_pageable_with_stream_is_done_on_return(stream):
    x = data()
    ev = gate(stream)
    a = npurt.to_device(x.copy(), stream=stream)
    np.testing.assert_array_equal(a._host_view(), x)  # written now, without the stream
    ev.set()


# -- ordering ----------------------------------------------------------------------------


def test_d2h_after_a_kernel_that_writes_the_array_sees_its_result(stream):
    other = npurt.Stream()
    try:
        a = npurt.zeros(N, stream=stream)
        ev = gate(stream)
        npurt.add(a, 7.0, out=a, stream=stream)  # queued behind the gate
        h = npurt.malloc_host(a.nbytes)
        npurt.memcpy_async(h, a, other)  # must wait (on the device) for the add
        ev.set()
        other.synchronize(timeout=LONG)
        np.testing.assert_array_equal(h.numpy(np.float32), 7)
        out = np.zeros(N, np.float32)
        ev = gate(stream)
        npurt.add(a, 1.0, out=a, stream=stream)
        threading.Timer(0.05, ev.set).start()
        npurt.memcpy(out, a)  # a synchronous copy waits for the pending write too
        np.testing.assert_array_equal(out, 8)
    finally:
        other.destroy()


@pytest.mark.parametrize("same_stream", [True, False])
def test_kernel_after_async_h2d_sees_the_data(same_stream, stream):
    other = stream if same_stream else npurt.Stream()
    try:
        x = data()
        h, _ = pinned(x)
        a = npurt.empty(N)
        ev = gate(stream)
        npurt.memcpy_async(a, h, stream)
        y = npurt.add(a, 1.0, stream=other)
        ev.set()
        np.testing.assert_array_equal(y.to_host(), x + 1)
    finally:
        if not same_stream:
            other.synchronize(timeout=LONG)
            other.destroy()


def test_h2d_waits_for_an_earlier_kernel_writing_the_array(stream):
    other = npurt.Stream()
    try:
        a = npurt.zeros(N)
        ev = gate(stream)
        npurt.add(a, 5.0, out=a, stream=stream)  # pending write on stream
        npurt.memcpy_async(a, np.full(N, 9, np.float32), other)  # must land after it
        ev.set()
        np.testing.assert_array_equal(a.to_host(), 9)
    finally:
        other.synchronize(timeout=LONG)
        other.destroy()


# -- GIL and lifetime --------------------------------------------------------------------


def test_waits_for_an_arrays_writer_release_the_gil(stream):
    a = npurt.zeros(16)
    stream.launch_host_func(lambda: sum(range(1000)))  # needs the GIL to run
    npurt.add(a, 1.0, out=a, stream=stream)
    out = np.zeros(16, np.float32)
    t = threading.Thread(target=npurt.memcpy, args=(out, a), daemon=True)  # 64 bytes: small
    t.start()
    t.join(LONG)
    assert not t.is_alive(), "deadlock: the wait kept the GIL"
    np.testing.assert_array_equal(out, 1)


def test_array_dropped_while_its_async_copies_are_queued(stream):
    x = data()
    h, _ = pinned(x)
    out = npurt.malloc_host(x.nbytes)
    a = npurt.empty(N)
    ev = gate(stream)
    npurt.memcpy_async(a, h, stream)
    npurt.memcpy_async(out, a, stream)
    del a, h
    gc.collect()
    for _ in range(4):  # the freed block must not be handed out and overwritten meanwhile
        npurt.full(N, 3.0)
    ev.set()
    stream.synchronize(timeout=LONG)
    np.testing.assert_array_equal(out.numpy(np.float32), x)


@pytest.mark.parametrize("direction", ["d2h", "h2d"])
def test_array_copy_into_a_full_stream_waits_for_room_without_the_gil(direction):
    code = f"""
        import time, numpy as np, npurt
        s, t = npurt.Stream(), npurt.Stream()
        a = npurt.zeros(16)
        npurt.kernels.busy(0.5, stream=t)
        npurt.add(a, 1.0, out=a, stream=t)   # a's last writer: t, still pending
        s.launch_host_func(time.sleep, 0.2)  # needs the GIL back when the sleep ends
        time.sleep(0.05)
        for _ in range(4):
            npurt.kernels.empty(stream=s)    # the ring (depth 4) is now full
        h = npurt.malloc_host(64)
        if "{direction}" == "d2h":
            npurt.memcpy_async(h, a, s)      # s must wait for t: that wait needs room
        else:
            h.numpy(np.float32)[:] = 2
            npurt.memcpy_async(a, h, s)
            npurt.memcpy_async(h, a, s)
        s.synchronize(timeout=5)
        print(h.numpy(np.float32)[0])
        """
    try:
        r = run_python(code, env={"NPURT_STREAM_QUEUE_DEPTH": "4"}, timeout=10)
    except Exception as e:  # subprocess.TimeoutExpired: the interpreter hung
        pytest.fail(f"deadlock: {e}")
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.strip()) == (1.0 if direction == "d2h" else 2.0)
