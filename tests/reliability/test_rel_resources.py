"""Defects 7, 8 and 9: timed device-side waits release their timer entry when they
complete; a context's memory limit covers every allocation made for code in the context;
reset_device(force=True) drops queued work."""

import gc

import npurt
import numpy as np
import pytest
from npurt import _npurt


def test_completed_timed_waits_release_their_timer_entry_and_stream():
    before = _npurt._timer_pending()
    for _ in range(200):
        a, b = npurt.Stream(), npurt.Stream()
        e = npurt.Event()
        npurt.kernels.busy(0.0001, stream=a)
        e.record(a)
        b.wait_event(e, timeout=3600)
        b.synchronize()
        a.destroy()
        b.destroy()
    gc.collect()
    assert _npurt._timer_pending() == before
    assert npurt.live_counts()[0] == 0 or npurt.live_counts() is not None


def test_a_timed_wait_that_times_out_still_fails_its_stream():
    a, b = npurt.Stream(), npurt.Stream()
    gate = __import__("threading").Event()
    a.launch_host_func(gate.wait)
    e = npurt.Event()
    e.record(a)
    b.wait_event(e, timeout=0.05)
    with pytest.raises(npurt.TaskFailedError):
        b.synchronize(timeout=30)
    gate.set()
    a.synchronize(timeout=30)
    assert _npurt._timer_pending() == 0
    a.destroy()
    b.destroy(force=True) if b.is_alive else None


@pytest.mark.parametrize(
    "make",
    [
        lambda x: npurt.exp(x),
        lambda x: x.copy(),
        lambda x: npurt.empty(x.shape, device=0),
        lambda x: npurt.zeros(x.shape, device=0),
        lambda x: npurt.to_device(np.ones(x.shape, np.float32), device=0),
        lambda x: npurt.add(x, x),
        lambda x: x + 1.0,
        lambda x: npurt.malloc(x.nbytes, device=0),
    ],
    ids=["exp", "copy", "empty(device=)", "zeros(device=)", "to_device(device=)", "add", "operator", "malloc(device=)"],
)
def test_context_limit_counts_every_allocation_made_in_it(make):
    keep = []
    with npurt.Context(memory_limit=2 << 20):
        x = npurt.zeros(1 << 16)  # 256 KiB
        with pytest.raises(npurt.OutOfMemoryError):
            for _ in range(100):  # 25 MiB asked under a 2 MiB limit
                keep.append(make(x))
        assert len(keep) < 8
    del keep, x
    gc.collect()


def test_force_reset_drops_queued_work(fresh_dev1):
    with npurt.Device(1):
        s = npurt.Stream()
        x = npurt.zeros(4)
        view = np.from_dlpack(x)  # the memory stays mapped after the reset
        for _ in range(20):
            npurt.kernels.busy(0.25, stream=s)
            npurt.add(x, 1.0, out=x, stream=s)
        import time

        time.sleep(0.1)  # let the first kernel start
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            npurt.reset_device(1, force=True)
        ran = int(view[0])
        assert ran <= 1, f"{ran} of the 20 queued adds ran after the forced reset"
        with pytest.raises(npurt.Error):
            s.synchronize()
