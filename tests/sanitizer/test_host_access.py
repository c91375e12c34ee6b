"""racecheck's host accesses, in this process: what ``to_host`` and numpy views of npurt
memory count as (a read of the array's bytes; a write of the viewed bytes)."""

import npurt
import numpy as np
import pytest

N = 1 << 14  # 64 KiB of float32


@pytest.fixture
def streams():
    a, b = npurt.Stream(), npurt.Stream()
    yield a, b
    a.synchronize()
    b.synchronize()
    a.destroy()
    b.destroy()


def _written_on(b, n=N, value=1.0):
    x = npurt.full(n, value, dtype="float32", stream=b)
    b.synchronize()
    return x


def test_to_host_while_another_stream_reads_the_array_is_not_a_race(streams):
    a, b = streams
    x = _written_on(b)
    with npurt.sanitizer.check("racecheck") as rep:
        npurt.kernels.busy(0.2, stream=a)  # the read below is still queued when to_host runs
        y = npurt.add(x, 1.0, stream=a)  # stream A reads x, no event to the host
        got = x.to_host()  # waits for x's writes (done): a host read, like A's
        assert a.query() is False  # the read really was pending
        a.synchronize()
    assert not rep, rep.text
    np.testing.assert_array_equal(got, np.ones(N, np.float32))
    np.testing.assert_array_equal(y.to_host(), np.full(N, 2.0, np.float32))


def test_to_host_of_a_slice_reads_only_its_bytes(streams):
    a, b = streams
    x = _written_on(b)
    with npurt.sanitizer.check("racecheck") as rep:
        npurt.kernels.busy(0.05, stream=a)
        npurt.add(x[N // 2 :], 1.0, stream=a)
        got = x[: N // 2].to_host()
        a.synchronize()
    assert not rep, rep.text
    np.testing.assert_array_equal(got, np.ones(N // 2, np.float32))


def test_a_host_write_through_a_pinned_view_during_an_async_copy_is_still_a_race(streams):
    a, _ = streams
    pinned = npurt.malloc_host(4 * N)
    dev = npurt.malloc(4 * N)
    try:
        pinned.numpy(np.float32)[:] = 1.0
        with npurt.sanitizer.check("racecheck") as rep:
            npurt.kernels.busy(0.05, stream=a)
            npurt.memcpy_async(dev, pinned, a)  # reads pinned later
            pinned.numpy(np.float32)[:] = 2.0  # the bug: rewritten before the copy ran
            a.synchronize()
        assert rep.errors == 1, rep.text
        assert "Host write to a pinned source whose async copy has not run" in rep.text, rep.text
        assert "numpy view of npurt memory" in rep.text and "Memcpy HtoD" in rep.text, rep.text
    finally:
        dev.free()
        pinned.free()


def test_a_kernel_writing_an_array_the_host_still_reads_through_a_view_is_a_race(streams):
    # _host_view (DLPack's export) stays a host write of what it views: the consumer may
    # write through it, and the runtime cannot see what it does.
    a, b = streams
    x = _written_on(b)
    with npurt.sanitizer.check("racecheck") as rep:
        npurt.kernels.busy(0.05, stream=a)
        npurt.add(x, 1.0, stream=a)  # stream A reads x
        x._host_view()
        a.synchronize()
    assert rep.errors == 1, rep.text
    assert "Host write to memory a queued kernel has not read yet" in rep.text, rep.text


def test_the_host_read_view_is_read_only_and_covers_the_span(streams):
    _, b = streams
    x = _written_on(b, value=3.0)
    part = x[4:12]
    raw = part._a._host_read()
    assert raw.nbytes == part.nbytes and not raw.flags.writeable
    np.testing.assert_array_equal(raw.view(np.float32), np.full(8, 3.0, np.float32))
    with pytest.raises(ValueError):
        raw[0] = 0


def test_to_host_of_never_written_memory_is_an_initcheck_read():
    with npurt.sanitizer.check("initcheck") as rep:
        x = npurt.empty(256, dtype="float32")
        x.to_host()  # a D2H read of bytes nothing wrote
        x.fill(0.0)
        x.to_host()  # written now
    assert rep.errors == 1, rep.text
    assert "Uninitialized read of 1024 bytes by to_host" in rep.text, rep.text


def test_a_synchronous_copy_reads_its_npurt_source(streams):
    # copy_to_host / memcpy into pageable memory read the buffer through a read-only view:
    # a host read, like the queued copy's; writing it is still a race.
    a, _ = streams
    dev, other = npurt.malloc(4 * N), npurt.malloc(4 * N)
    try:
        npurt.memcpy(dev, np.arange(4 * N, dtype=np.uint64).astype(np.uint8))
        with npurt.sanitizer.check("racecheck") as rep:
            npurt.kernels.busy(0.2, stream=a)
            npurt.memcpy_async(other, dev, a)  # reads dev later
            back = dev.copy_to_host()  # a host read of dev, like the copy's: no race
            a.synchronize()
        assert not rep, rep.text
        np.testing.assert_array_equal(back, np.arange(4 * N, dtype=np.uint64).astype(np.uint8))
        with npurt.sanitizer.check("racecheck") as rep:
            npurt.kernels.busy(0.2, stream=a)
            npurt.memcpy_async(other, dev, a)
            npurt.memcpy(dev, np.zeros(4 * N, np.uint8))  # a host write of dev: a race
            a.synchronize()
        assert rep.errors == 1, rep.text
        assert "Host write to a pinned source whose async copy has not run" in rep.text, rep.text
        assert "Memcpy DtoD" in rep.text, rep.text
    finally:
        dev.free()
        other.free()


def test_copies_dropped_by_a_forced_destroy_are_not_races():
    s = npurt.Stream()
    pinned, dev = npurt.malloc_host(4096), npurt.malloc(4096)
    try:
        with npurt.sanitizer.check("racecheck") as rep:
            npurt.kernels.busy(0.2, stream=s)  # task 0: running when the stream is destroyed
            npurt.kernels.busy(0.0, stream=s)  # task 1: could start before the drop is seen
            npurt.memcpy_async(dev, pinned, s)  # task 2: dropped, never reads pinned
            s.destroy(force=True)
            pinned.numpy(np.uint8)[:] = 7  # nothing will read it now
        assert not rep, rep.text
    finally:
        dev.free()
        pinned.free()
