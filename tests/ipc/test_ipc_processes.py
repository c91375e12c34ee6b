"""IPC with multiprocessing and crashes: DeviceArrays/DeviceBuffers passed to spawn
children travel as keys (ForkingPickler reducers); a fork child gets a clear error; a
SIGKILLed importer's import is closed by the exporter (memory and records back to the
baseline); a SIGKILLed exporter leaves the importer's memory valid while it runs kernels
on it. Every child has a timeout."""

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

import npurt
import numpy as np
import pytest

CHILD = os.path.join(os.path.dirname(__file__), "ipc_child.py")
TIMEOUT = 120


def _spawn_worker(arr, buf, q):
    # Runs in a spawn child: the arguments were rebuilt by importing their keys.
    arr += 1.0
    arr.synchronize()
    q.put((type(arr).__name__, arr.shape, buf.imported, np.asarray(arr).sum().item(),
           buf.copy_to_host(nbytes=8).view(np.float32).tolist()))


def test_spawn_children_share_arrays_and_buffers():
    ctx = mp.get_context("spawn")
    a = npurt.to_device(np.arange(6, dtype=np.float32).reshape(2, 3), shareable=True)
    b = npurt.malloc(64, shareable=True)
    npurt.memcpy(b, np.full(16, 2.5, dtype=np.float32))
    q = ctx.Queue()
    p = ctx.Process(target=_spawn_worker, args=(a, b, q))
    p.start()
    try:
        got = q.get(timeout=TIMEOUT)
    finally:
        p.join(timeout=TIMEOUT)
        if p.is_alive():
            p.kill()
    assert got == ("DeviceArray", (2, 3), True, 21.0, [2.5, 2.5])
    assert p.exitcode == 0
    # The child's in-place add is visible here: the same memory, not a copy.
    assert np.asarray(a).tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def _fork_worker(arr, q):
    try:
        arr.to_host()
        q.put("no error")
    except npurt.ForkedProcessError as e:
        q.put("spawn" in str(e))


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_fork_children_get_a_clear_error():
    ctx = mp.get_context("fork")
    a = npurt.to_device(np.ones(4, dtype=np.float32), shareable=True)
    q = ctx.Queue()
    p = ctx.Process(target=_fork_worker, args=(a, q))
    p.start()
    try:
        assert q.get(timeout=TIMEOUT) is True
    finally:
        p.join(timeout=TIMEOUT)
        if p.is_alive():
            p.kill()


def _wait(cond, what):
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < 30, what
        time.sleep(0.02)


def test_sigkill_importer_closes_its_imports():
    base_alloc = npurt.memory_allocated()
    base = npurt.ipc_stats()
    b = npurt.malloc(1 << 20, shareable=True)
    key = b.ipc_export(open=True)
    p = subprocess.Popen([sys.executable, CHILD, json.dumps([{"key": key, "op": "hold"}])],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(p.stdout.readline()) == {"held": 1 << 20}
        assert npurt.ipc_stats()["leases"] == base["leases"] + 1
        b.free()  # the exporter frees first: the block is held for the importer
        assert npurt.memory_allocated() > base_alloc
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=TIMEOUT)
    finally:
        p.kill()
    _wait(lambda: npurt.ipc_stats()["leases"] == base["leases"], "the lease of the killed importer")
    _wait(lambda: npurt.memory_allocated() == base_alloc, "memory back to the baseline")
    assert npurt.ipc_stats()["held"] == base["held"]


def test_sigkill_exporter_while_importer_runs_kernels():
    code = (
        "import sys, numpy as np, npurt\n"
        "a = npurt.to_device(np.full((256, 256), 3.0, dtype=np.float32), shareable=True)\n"
        "print(a.ipc_export(open=True), flush=True)\n"
        "sys.stdin.read()\n"
    )
    exporter = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    try:
        akey = exporter.stdout.readline().strip()
        arr = npurt.ipc_import_array(akey)
        s = npurt.Stream()
        npurt.add(arr, 1.0, out=arr, stream=s)
        exporter.send_signal(signal.SIGKILL)
        exporter.wait(timeout=TIMEOUT)
        for _ in range(5):  # kernels keep running on the memory after the exporter died
            npurt.add(arr, 1.0, out=arr, stream=s)
        s.synchronize(timeout=30)
        assert float(np.asarray(arr)[0, 0]) == 9.0
        with pytest.raises(npurt.IpcStaleKeyError, match="exited"):
            npurt.ipc_import_array(akey)
        del arr  # unmapped: the pages go with the last mapping
    finally:
        exporter.kill()
