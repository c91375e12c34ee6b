"""Model throughput versus stream count: N concurrent requests of a conv net and of a
transformer encoder block on S = 1..64 npurt streams (one loaded model, requests queued
round-robin from one host thread), against onnxruntime's CPU provider in the same run (one
session with intra_op threads = cores, run back to back; and one session per core with one
thread each, requests split over them). Single-request latency beside it.

    python benches/model_streams.py [--requests 64] [--rounds 3] [--streams 1,2,4,8,16,32,64]

Figures are requests/s, best of ``--rounds`` (the machine may be shared: the best estimates
it when it is free); ratios are between figures of this run. The conv net needs
``npurt.nn.conv`` (skipped with a message when this build lacks it)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

import npurt
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "model"))
import builders  # noqa: E402


def _npurt_rate(model, x, n, streams, rounds):
    ss = [npurt.Stream() for _ in range(streams)]
    xd = npurt.to_device(x)
    best = 0.0
    for _ in range(rounds):
        t = time.perf_counter()
        outs = [model.run_async([xd], stream=ss[i % streams])[0] for i in range(n)]
        for s in ss:
            s.synchronize()
        best = max(best, n / (time.perf_counter() - t))
    del outs
    for s in ss:
        s.destroy()
    return best


def _ort_rates(path, x, n, rounds, cores):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    o = ort.SessionOptions()
    o.intra_op_num_threads = cores
    one = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    feed = {one.get_inputs()[0].name: x}
    one.run(None, feed)
    best_one = 0.0
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            one.run(None, feed)
        best_one = max(best_one, n / (time.perf_counter() - t))
    o1 = ort.SessionOptions()
    o1.intra_op_num_threads = 1
    sessions = [ort.InferenceSession(path, o1, providers=["CPUExecutionProvider"]) for _ in range(cores)]
    best_many = 0.0
    for _ in range(rounds):
        def work(s, k):
            for _ in range(k):
                s.run(None, feed)

        ths = [threading.Thread(target=work, args=(s, n // cores)) for s in sessions]
        t = time.perf_counter()
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        best_many = max(best_many, (n // cores) * cores / (time.perf_counter() - t))
    lat = []
    for _ in range(max(5, rounds * 3)):
        t = time.perf_counter()
        one.run(None, feed)
        lat.append(time.perf_counter() - t)
    return best_one, best_many, statistics.median(lat) * 1e3, one


def bench(name, proto, x, args, cores):
    path = os.path.join(tempfile.mkdtemp(), f"{name}.onnx")
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())
    try:
        model = npurt.Model.load(path)
    except npurt.NotSupportedError as e:
        print(f"{name}: skipped ({e.message[:160]})")
        return
    y = model(x).to_host()
    lat = []
    s = npurt.Stream()
    for _ in range(max(5, args.rounds * 3)):
        t = time.perf_counter()
        model.run([x], stream=s)
        lat.append(time.perf_counter() - t)
    rates = {S: _npurt_rate(model, x, args.requests, S, args.rounds) for S in args.streams}
    ort = _ort_rates(path, x, args.requests, args.rounds, cores)
    print(f"\n{name}: input {x.shape}, {args.requests} requests, best of {args.rounds}")
    print(f"  {'streams':>8}  {'npurt req/s':>12}  {'vs S=1':>7}")
    for S, r in rates.items():
        print(f"  {S:>8}  {r:>12.1f}  {r / rates[args.streams[0]]:>6.2f}x")
    best = max(rates.values())
    print(f"  npurt single-request latency: {statistics.median(lat) * 1e3:.2f} ms (median)")
    if ort is None:
        print("  onnxruntime not installed: no baseline")
        return
    one, many, olat, sess = ort
    ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    err = float(np.abs(y - ref).max())
    print(f"  onnxruntime: one session x {cores} threads {one:.1f} req/s; {cores} sessions x 1 thread {many:.1f} req/s; latency {olat:.2f} ms")
    print(f"  npurt best / onnxruntime best: {best / max(one, many):.2f}x   (max |npurt - ort| = {err:.2g})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--streams", default="1,2,4,8,16,32,64")
    args = ap.parse_args()
    args.streams = [int(s) for s in args.streams.split(",")]
    cores = os.cpu_count() or 1
    print(npurt.isa_info()["summary"], f"| {cores} cores | npurt {npurt.__version__}")
    rng = np.random.default_rng(0)
    proto, _ = builders.transformer_block(d=128, heads=4, ff=512)
    bench("transformer_block", proto, rng.standard_normal((1, 64, 128)).astype(np.float32), args, cores)
    proto, _ = builders.conv_net(c_in=3, classes=10, width=32, size=32)
    bench("conv_net", proto, rng.standard_normal((1, 3, 32, 32)).astype(np.float32), args, cores)


if __name__ == "__main__":
    main()
