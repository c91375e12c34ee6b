"""Soak (issue 13, ``-m soak``): mixed load on 64 streams from 8 threads for
``NPURT_SOAK_SECONDS`` (default 180) — kernels, multi-block kernels, host callbacks, async
copies, allocations and frees, events and cross-stream waits, array reads checked against
numpy. Afterwards memory is back to its baseline, no stream or event is left, and the
figures (operations, RSS before/after) are printed."""

import gc
import os
import threading
import time

import npurt
import numpy as np
import pytest

THREADS, STREAMS = 8, 64


def _rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_soak_mixed_load_64_streams_8_threads():
    seconds = float(os.environ.get("NPURT_SOAK_SECONDS", "180"))
    gc.collect()
    npurt.synchronize(timeout=60)
    base_mem, base_live = npurt.memory_allocated(), npurt.live_counts()
    rss_before = _rss_kib()
    streams = [npurt.Stream(priority=i % 8) for i in range(STREAMS)]
    host = npurt.malloc_host(1 << 20)
    deadline = time.monotonic() + seconds
    ops, errors, mismatches, callbacks = [0] * THREADS, [], [], [0]
    lock = threading.Lock()

    def bump():
        with lock:
            callbacks[0] += 1

    def work(t):
        rng = np.random.default_rng(t)
        mine = streams[t * 8 : (t + 1) * 8]
        n = 0
        try:
            while time.monotonic() < deadline:
                s = mine[n % 8]
                other = streams[int(rng.integers(STREAMS))]
                k = int(rng.integers(6))
                if k == 0:
                    v = float(rng.integers(1, 9))
                    x = npurt.full((int(rng.integers(1, 4096)),), v, stream=s)
                    y = npurt.add(npurt.multiply(x, 2.0, stream=s), 1.0, stream=other)  # waits for x
                    if n % 8 == 0 and float(y.to_host()[0]) != 2 * v + 1:
                        mismatches.append((t, n))
                elif k == 1:
                    npurt.kernels.busy(0.0001, stream=s, blocks=int(rng.integers(1, 5)))
                elif k == 2:
                    d = npurt.malloc(int(rng.integers(1, 1 << 20)))
                    npurt.memcpy_async(d, host, s, nbytes=min(d.nbytes, host.nbytes))
                    d.free()  # stream-ordered
                elif k == 3:
                    e = npurt.Event()
                    e.record(s)
                    other.wait_event(e, timeout=3600 if n % 2 else None)
                elif k == 4:
                    s.launch_host_func(bump)
                else:
                    a = npurt.to_device(rng.random((32, 32), dtype=np.float32), stream=s)
                    r = npurt.sum(npurt.softmax(a, axis=-1, stream=s), axis=-1, stream=s)
                    if n % 16 == 0 and not np.allclose(r.to_host(), 1.0, atol=1e-4):
                        mismatches.append((t, n))
                n += 1
                if n % 256 == 0:
                    s.synchronize(timeout=120)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
        ops[t] = n

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(seconds + 600)
    assert not any(th.is_alive() for th in threads), "a worker thread hung"
    npurt.synchronize(timeout=120)
    for s in streams:
        s.destroy()
    streams.clear()
    host = None
    gc.collect()
    npurt.synchronize(timeout=60)
    rss_after = _rss_kib()
    print(
        f"soak: {seconds:.0f} s, {sum(ops)} operations ({THREADS} threads x {STREAMS} streams), "
        f"{callbacks[0]} callbacks, RSS {rss_before} KiB -> {rss_after} KiB, "
        f"memory_allocated {base_mem} -> {npurt.memory_allocated()}"
    )
    assert errors == [], errors[:3]
    assert mismatches == []
    assert npurt.memory_allocated() == base_mem, "device memory did not return to the baseline"
    assert npurt.live_counts() == base_live, "streams/events/contexts left alive"
