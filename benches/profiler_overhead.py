"""The profiler's costs from Python: ``python benches/profiler_overhead.py [--tasks N]``.

Rounds alternate (so a loaded machine's drift hits every case alike): empty-kernel launch
rate with the profiler never used (the baseline), under ``npurt.profile()``, off again
after profiling, and with call sites on (``NPURT_CALL_SITES``'s mode, no profiler). Prints
ns per launch (median), each case's ratio to the baseline and the per-task cost of
profiling (on - baseline); then the trace size of 100 000 tasks and the time to export it.
The CPU model comes first (figures are only comparable on one machine, in one run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import npurt
from npurt import _npurt


def launches(s: npurt.Stream, n: int) -> float:
    empty = npurt.kernels.empty
    t = time.perf_counter_ns()
    for _ in range(n):
        empty(stream=s)
    s.synchronize()
    return (time.perf_counter_ns() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50_000, help="launches per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--trace-tasks", type=int, default=100_000)
    a = ap.parse_args()
    print(npurt.isa_info()["summary"], f"({os.cpu_count()} logical CPUs)")
    s = npurt.Stream()
    launches(s, 1000)
    cases = {"baseline (never profiled)": [], "npurt.profile() on": [], "off again": [], "call sites only": []}
    names = list(cases)
    for _ in range(a.rounds):
        cases[names[0]].append(launches(s, a.tasks))
        with npurt.profile():
            cases[names[1]].append(launches(s, a.tasks))
        cases[names[2]].append(launches(s, a.tasks))
        _npurt._call_sites(True)
        cases[names[3]].append(launches(s, a.tasks))
        _npurt._call_sites(False)
    base = statistics.median(cases[names[0]])
    for name, v in cases.items():
        m = statistics.median(v)
        print(f"{name:<28} {m:8.1f} ns/launch  x{m / base:.3f}")
    print(f"per-task cost of profiling (Python launch): {statistics.median(cases[names[1]]) - base:.1f} ns")
    with npurt.profile() as prof:
        launches(s, a.trace_tasks)
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        path = prof.export_chrome_trace(os.path.join(d, "t.json"))
        dt = time.perf_counter() - t
        size = os.path.getsize(path)
    n = len(prof.events())
    print(f"trace of {n} tasks: {size / 1e6:.1f} MB ({size / n * 1e5 / 1e6:.1f} MB per 100k tasks), exported in {dt:.2f} s")


if __name__ == "__main__":
    main()
