"""The sanitizer's cost: ``python benches/sanitizer_overhead.py [--tasks N] [--rounds R]``.

Per case — sanitizer off, each tool alone, all three, the opt-in initcheck and memcheck
with padding — in one process, rounds alternating
so a loaded machine's drift hits every case alike: launch rate of empty kernels and of tiny
adds (``npurt.add(t, 1.0, out=t)`` on 16 floats: racecheck checks its byte spans), an
alloc+free pair (``npurt.malloc(4096)`` + ``free()``: the memory hook; and
``acl.rt.malloc`` + ``acl.rt.free``: memcheck tracks explicit-free memory), and the
README's two-stream copy/compute pipeline (H2D -> matmul -> D2H per chunk, smaller).
Prints the median of the rounds and each case's ratio to ``off``; the CPU model first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import npurt
import npurt.acl as acl
import numpy as np


def empties(s, n):
    empty = npurt.kernels.empty
    t = time.perf_counter_ns()
    for _ in range(n):
        empty(stream=s)
    s.synchronize()
    return (time.perf_counter_ns() - t) / n


def adds(s, x, n):
    add = npurt.add
    t = time.perf_counter_ns()
    for _ in range(n):
        add(x, 1.0, out=x, stream=s)
    s.synchronize()
    return (time.perf_counter_ns() - t) / n


def allocs(n):
    malloc = npurt.malloc
    t = time.perf_counter_ns()
    for _ in range(n):
        malloc(4096).free()
    return (time.perf_counter_ns() - t) / n


def acl_allocs(n):
    t = time.perf_counter_ns()
    for _ in range(n):
        p, _ = acl.rt.malloc(4096, 0)
        acl.rt.free(p)
    return (time.perf_counter_ns() - t) / n


class Pipeline:
    def __init__(self, rows=1024, chunks=8):
        self.w = npurt.to_device(np.random.rand(128, 128).astype(np.float32))
        self.streams = [npurt.Stream(), npurt.Stream()]
        self.hosts = [npurt.malloc_host(rows * 128 * 4) for _ in range(2 * chunks)]
        self.xs = [npurt.empty((rows, 128)) for _ in self.streams]
        self.ys = [npurt.empty((rows, 128)) for _ in self.streams]
        self.rows, self.chunks = rows, chunks
        self.views = [h.numpy(np.float32).reshape(rows, 128) for h in self.hosts[:chunks]]

    def __call__(self, n):
        t = time.perf_counter_ns()
        for _ in range(n):
            for c in range(self.chunks):
                i, s = c % 2, self.streams[c % 2]
                self.xs[i].copy_(self.views[c], stream=s)
                npurt.matmul(self.xs[i], self.w, out=self.ys[i], stream=s, blocks=1)
                self.ys[i].to_host(out=self.hosts[self.chunks + c], stream=s)
            for s in self.streams:
                s.synchronize()
        return (time.perf_counter_ns() - t) / n / 1e3  # us per pipeline run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=20_000, help="launches / allocations per round")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    print(npurt.isa_info()["summary"], f"({os.cpu_count()} logical CPUs, load {os.getloadavg()[0]:.1f})")
    acl.rt.set_device(0)
    s = npurt.Stream()
    x = npurt.to_device(np.zeros(16, np.float32), stream=s)
    pipe = Pipeline()
    cases = ["off", "memcheck", "racecheck", "synccheck", "all", "initcheck", "memcheck,padding"]
    work = {
        "empty launch (ns)": lambda: empties(s, a.tasks),
        "add launch (ns)": lambda: adds(s, x, a.tasks),
        "malloc+free (ns)": lambda: allocs(a.tasks),
        "acl malloc+free (ns)": lambda: acl_allocs(a.tasks // 4),
        "pipeline (us)": lambda: pipe(max(1, a.tasks // 2000)),
    }
    res = {(w, c): [] for w in work for c in cases}
    for r in range(a.rounds):
        for c in cases if r % 2 == 0 else cases[::-1]:
            npurt.sanitizer.enable("" if c == "off" else c, print_errors=False)
            for w, f in work.items():
                res[(w, c)].append(f())
            npurt.sanitizer.disable()
    errors = npurt.sanitizer.report(take=True).errors
    print(f"{'workload':<22}" + "".join(f"{c.replace('memcheck,', '+'):>18}" for c in cases))
    for w in work:
        base = statistics.median(res[(w, "off")])
        cells = []
        for c in cases:
            m = statistics.median(res[(w, c)])
            cells.append(f"{m:>10.1f}" + (f" ({m / base:4.2f}x)" if c != "off" else " " * 8))
        print(f"{w:<22}" + "".join(f"{x:>18}" for x in cells))
    print(f"sanitizer errors during the benchmark: {errors} (expected 0)")


if __name__ == "__main__":
    main()
