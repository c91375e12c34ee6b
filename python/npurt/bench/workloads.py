"""Workloads of ``python -m npurt.bench``: launch, synchronisation, events, and their
baselines (a pure-Python thread-per-stream runtime, PoCL). Each returns one sample.
Throughput versus stream count lives in ``throughput``, copies and the copy/compute overlap
pipeline in ``copies``."""

from __future__ import annotations

import statistics
import time
from typing import List

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
