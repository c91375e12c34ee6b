"""Reader streams (torch's ``record_stream`` problem): an array written on stream A and read
by a kernel queued on stream B, then freed (its last Python reference dropped) before B ran
that kernel, must not be handed out again by the caching pool until B's kernel has run.

npurt needs no ``record_stream``: a queued kernel holds its views, and a view holds a clone
of the buffer, so the block goes back to the pool only when the last kernel using it has
run and been dropped. These tests prove it on two streams (values and addresses)."""

import gc
import threading

import npurt
import numpy as np
from helpers import wait_until

N = 1 << 16  # 256 KiB of float32: a small-pool block, the kind the pool reuses at once


def _addr(a):
    # _host_bytes wants its caller to have synchronized (a numpy view is a host access:
    # the sanitizer's racecheck reports one taken while a queued kernel writes or reads)
    return a._a._host_bytes().ctypes.data + a._a.offset


def test_freed_input_of_another_stream_is_not_reused_before_that_stream_ran():
    a, b = npurt.Stream(), npurt.Stream()
    try:
        x = npurt.full(N, 1.0, stream=a)  # allocated and written on stream A
        x.synchronize()
        x_addr = _addr(x)
        gate = threading.Event()
        b.launch_host_func(gate.wait, 30.0)  # B is held: its next kernel stays queued
        y = npurt.multiply(x, 2.0, stream=b)  # B reads x (after waiting for A on the device)
        before = npurt.memory_allocated()
        del x
        gc.collect()
        assert npurt.memory_allocated() == before  # the queued kernel still holds the block
        # Allocate and overwrite same-size blocks on A while B's read is still pending.
        zs = [npurt.full(N, -7.0, stream=a) for _ in range(8)]
        a.synchronize()
        assert x_addr not in {_addr(z) for z in zs}
        assert not b.query()  # B's read had not run yet: the test really raced it
        gate.set()
        np.testing.assert_array_equal(y.to_host(), np.full(N, 2.0, np.float32))
        # Once B ran the kernel and dropped it, the block is back in the pool.
        b.synchronize()
        del zs
        assert wait_until(lambda: npurt.memory_allocated() < before)
    finally:
        a.destroy()
        b.destroy()


def test_freed_views_and_gemm_operands_are_held_until_the_reader_ran():
    a, b = npurt.Stream(), npurt.Stream()
    try:
        rng = np.random.default_rng(0)
        hx, hw = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((48, 32)).astype(np.float32)
        x = npurt.to_device(hx)
        w = npurt.add(npurt.to_device(hw), 0.0, stream=a)  # last written on A
        x.synchronize()
        w.synchronize()
        addrs = {_addr(x), _addr(w)}
        gate = threading.Event()
        b.launch_host_func(gate.wait, 30.0)  # B is held until the pool was exercised
        y = npurt.linear(x[::2].T.T, w.T.T, stream=b)  # views of both, read on B
        del x, w
        gc.collect()
        zs = [npurt.full((64, 48), 9.0, stream=a) for _ in range(8)] + [npurt.full((64, 32), 9.0, stream=a) for _ in range(8)]
        a.synchronize()
        assert not addrs & {_addr(z) for z in zs}
        assert not b.query()
        gate.set()
        np.testing.assert_allclose(y.to_host(), hx[::2] @ hw.T, rtol=1e-5, atol=1e-5)
    finally:
        a.destroy()
        b.destroy()
