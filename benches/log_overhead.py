"""The runtime logs' cost from Python: ``python benches/log_overhead.py [--tasks N]``.

Launch rate of empty kernels and of tiny adds (``npurt.add(t, 1.0, out=t)`` on 16
floats) with the log level at ``off``, at ``error`` (the default: every debug line of a
launch is one ``log::max_level()`` load and a branch), and at ``debug`` (every launch
formats a line and queues it for Python's ``logging``, which drops it at a
``NullHandler``). Rounds alternate so a loaded machine's drift hits every case alike;
prints ns per launch (median and min of the rounds) and each case's ratio to ``off``. The CPU
model and the ISA paths come first (figures are only comparable on one machine, in one
run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import npurt
import numpy as np


def empties(s: npurt.Stream, n: int) -> float:
    empty = npurt.kernels.empty
    t = time.perf_counter_ns()
    for _ in range(n):
        empty(stream=s)
    s.synchronize()
    return (time.perf_counter_ns() - t) / n


def adds(s: npurt.Stream, x: npurt.DeviceArray, n: int) -> float:
    add = npurt.add
    t = time.perf_counter_ns()
    for _ in range(n):
        add(x, 1.0, out=x, stream=s)
    s.synchronize()
    return (time.perf_counter_ns() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=50_000, help="launches per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-debug", action="store_true", help="skip the debug case (slow)")
    a = ap.parse_args()
    print(npurt.isa_info()["summary"], f"({os.cpu_count()} logical CPUs)")
    s = npurt.Stream()
    x = npurt.to_device(np.zeros(16, np.float32), stream=s)
    empties(s, 2000)
    adds(s, x, 2000)
    levels = ["off", "error"] + ([] if a.no_debug else ["debug"])
    res = {(w, lv): [] for w in ("empty", "add") for lv in levels}
    try:
        for r in range(a.rounds):
            # Every other round in reverse order: no case always follows another.
            for lv in levels if r % 2 == 0 else levels[::-1]:
                npurt.set_log_level(lv)
                res[("empty", lv)].append(empties(s, a.tasks))
                res[("add", lv)].append(adds(s, x, a.tasks))
                npurt.logs.flush()
    finally:
        npurt.set_log_level("error")
    for w in ("empty", "add"):
        base = statistics.median(res[(w, "off")])
        for lv in levels:
            m = statistics.median(res[(w, lv)])
            lo = min(res[(w, lv)])
            print(f"{w:<6} level {lv:<6} {m:8.1f} ns/launch (min {lo:7.1f})   x{m / base:.3f} of off")
    print(f"records dropped (queue full) during the debug rounds: {npurt.logs.dropped()}")


if __name__ == "__main__":
    main()
