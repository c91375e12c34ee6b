"""Workloads of ``python -m npurt.bench``: launch, synchronisation, events, and their
baselines (a pure-Python thread-per-stream runtime, PoCL). Each returns one sample.
Throughput versus stream count lives in ``throughput``, copies and the copy/compute overlap
pipeline in ``copies``."""

from __future__ import annotations

import statistics
import time
from typing import List

import numpy as np

import npurt

from . import baselines


def launch_rate(n: int) -> float:
    """Empty kernels launched and run per second on one stream (launch + execution)."""
    s = npurt.Stream()
    empty = npurt.kernels.empty
    t = time.perf_counter()
    for _ in range(n):
        empty(stream=s)
    s.synchronize()
    dt = time.perf_counter() - t
    s.destroy()
    return n / dt


def baseline_launch_rate(n: int) -> float:
    s = baselines.PyStream()
    nop = baselines.nop
    t = time.perf_counter()
    for _ in range(n):
        s.launch(nop)
    s.synchronize()
    dt = time.perf_counter() - t
    s.close()
    return n / dt


def pocl_launch_rate(n: int) -> float:
    r = baselines.PoclRunner()
    launch = r.launch
    t = time.perf_counter()
    for _ in range(n):
        launch()
    r.synchronize()
    return n / (time.perf_counter() - t)


def pocl_round_trip_us(n: int) -> float:
    r = baselines.PoclRunner()
    launch, sync, clock = r.launch, r.synchronize, time.perf_counter
    lat = []
    for _ in range(n):
        t = clock()
        launch()
        sync()
        lat.append(clock() - t)
    return statistics.median(lat) * 1e6


def round_trip_us(n: int) -> float:
    """Median of submit + synchronize of one empty kernel, in microseconds."""
    s = npurt.Stream()
    empty, sync, clock = npurt.kernels.empty, s.synchronize, time.perf_counter
    lat = []
    for _ in range(n):
        t = clock()
        empty(stream=s)
        sync()
        lat.append(clock() - t)
    s.destroy()
    return statistics.median(lat) * 1e6


def baseline_round_trip_us(n: int) -> float:
    # Same loop shape as round_trip_us (methods looked up once, outside the timing).
    s = baselines.PyStream()
    launch, sync, nop, clock = s.launch, s.synchronize, baselines.nop, time.perf_counter
    lat = []
    for _ in range(n):
        t = clock()
        launch(nop)
        sync()
        lat.append(clock() - t)
    s.close()
    return statistics.median(lat) * 1e6


def event_hop_us(n: int) -> float:
    """Kernel on stream A, record, stream B waits on the event, kernel on B, sync B."""
    a, b = npurt.Stream(), npurt.Stream()
    ev = npurt.Event()
    empty = npurt.kernels.empty
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        empty(stream=a)
        ev.record(a)
        b.wait_event(ev)
        empty(stream=b)
        b.synchronize()
        lat.append(time.perf_counter() - t)
    a.destroy()
    b.destroy()
    return statistics.median(lat) * 1e6


def tiny_launch_rate(n: int) -> float:
    """Real kernels launched and run per second on one stream: a 1-element in-place add
    (``npurt.add(t, 1.0, out=t, stream=s)``), as user code calls it; the result is checked."""
    s = npurt.Stream()
    t = npurt.zeros(1, stream=s)
    add = npurt.add
    t0 = time.perf_counter()
    for _ in range(n):
        add(t, 1.0, out=t, stream=s)
    s.synchronize()
    dt = time.perf_counter() - t0
    got = float(t.to_host()[0])
    s.destroy()
    if got != float(n):
        raise RuntimeError(f"tiny add: {n} launches left {got}, not {n}")
    return n / dt


def numpy_tiny_rate(n: int) -> float:
    """The same 1-element add done inline by numpy (``np.add(x, 1.0, out=x)``) per second."""
    x = np.zeros(1, np.float32)
    add = np.add
    t0 = time.perf_counter()
    for _ in range(n):
        add(x, 1.0, out=x)
    return n / (time.perf_counter() - t0)


def tiny_event_hop_us(n: int) -> float:
    """Tiny add on stream A → record → stream B waits → tiny add on B → synchronize B."""
    a, b = npurt.Stream(), npurt.Stream()
    ev = npurt.Event()
    x, y = npurt.zeros(1, stream=a), npurt.zeros(1, stream=b)
    add, clock = npurt.add, time.perf_counter
    lat = []
    for _ in range(n):
        t = clock()
        add(x, 1.0, out=x, stream=a)
        ev.record(a)
        b.wait_event(ev)
        add(y, 1.0, out=y, stream=b)
        b.synchronize()
        lat.append(clock() - t)
    a.destroy()
    b.destroy()
    return statistics.median(lat) * 1e6


def check_correctness() -> None:
    """A fast wrong answer must not pass: order, waits and timing are checked once."""
    s1, s2 = npurt.Stream(), npurt.Stream()
    log: List[int] = []
    for i in range(100):
        s1.launch_host_func(log.append, i)
    ev = s1.record_event()
    s2.wait_event(ev)
    s2.launch_host_func(lambda: log.append(-1))
    s2.synchronize()
    if log != list(range(100)) + [-1]:
        raise RuntimeError(f"stream order broken: {log[:10]}...")
    start, end = npurt.Event(timing=True), npurt.Event(timing=True)
    start.record(s1)
    npurt.kernels.busy(0.01, stream=s1)
    end.record(s1)
    end.synchronize()
    ms = start.elapsed_time(end)
    if not 9.0 < ms < 1000.0:
        raise RuntimeError(f"a 10 ms kernel measured {ms} ms")
    s1.destroy()
    s2.destroy()
