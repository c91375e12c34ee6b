"""Model throughput versus stream count: N concurrent requests of a conv net and of a
transformer encoder block on S = 1..64 npurt streams (one loaded model, requests queued
round-robin from one host thread), against onnxruntime's CPU provider in the same run (one
session with intra_op threads = cores, run back to back; and one session per core with one
thread each, requests split over them). Single-request latency beside it.

    python benches/model_streams.py [--requests 64] [--rounds 3] [--streams 1,2,4,8,16,32,64]

Figures are requests/s, best of ``--rounds`` rounds that alternate npurt's and
onnxruntime's measurements (the machine may be shared: the best estimates it when it is
free, and alternating lets load changes hit both sides); ratios are between figures of
this run. Each figure is a sustained window (MIN_TIME of passes after WARM of warm-up) and
onnxruntime's spinning threads get SETTLE to park before the next measurement (see below). The conv net needs
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

# Every figure is a window of at least MIN_TIME seconds of back-to-back passes, after WARM
# seconds of the same work: a pass of 64 small requests takes ~1-3 ms, and a VM's idle vCPU
# comes back slowly for the first tens of ms of work (npurt and onnxruntime alike), so
# single passes measured mostly the wake-up. After onnxruntime runs, SETTLE seconds pass
# before anything else is timed: its intra-op threads spin after a run (its default) and
# took a core from the next measurement (npurt at 14-18 k req/s right after onnxruntime
# against 29 k after a 0.2 s pause, same build).
MIN_TIME, WARM, SETTLE = 0.2, 0.05, 0.15


def _sustained(one_pass, n):
    """Requests/s of ``one_pass`` (n requests) run back to back for MIN_TIME after WARM."""
    t = time.perf_counter()
    while time.perf_counter() - t < WARM:
        one_pass()
    done, t = 0, time.perf_counter()
    while True:
        one_pass()
        done += n
        dt = time.perf_counter() - t
        if dt >= MIN_TIME:
            return done / dt


def _npurt_round(model, x, n, streams):
    """Requests/s of passes of n requests round-robin on ``streams`` (each pass waits)."""

    def one_pass():
        outs = [model.run_async([x], stream=streams[i % len(streams)])[0] for i in range(n)]
        for s in streams:
            s.synchronize()
        del outs

    return _sustained(one_pass, n)


def _latency(run, reps):
    lat = []
    for _ in range(reps):
        t = time.perf_counter()
        run()
        lat.append(time.perf_counter() - t)
    return statistics.median(lat) * 1e3


class _Ort:
    """onnxruntime's CPU provider: one session with ``cores`` intra-op threads, and
    ``cores`` sessions with one thread each (requests split over Python threads)."""

    def __init__(self, ort, path, x, cores):
        o = ort.SessionOptions()
        o.intra_op_num_threads = cores
        self.one = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
        o1 = ort.SessionOptions()
        o1.intra_op_num_threads = 1
        self.many = [ort.InferenceSession(path, o1, providers=["CPUExecutionProvider"]) for _ in range(cores)]
        self.feed = {self.one.get_inputs()[0].name: x}
        for s in [self.one] + self.many:
            s.run(None, self.feed)

    def one_round(self, n):
        def one_pass():
            for _ in range(n):
                self.one.run(None, self.feed)

        r = _sustained(one_pass, n)
        time.sleep(SETTLE)
        return r

    def many_round(self, n):
        k = n // len(self.many)

        def work(s):
            for _ in range(k):
                s.run(None, self.feed)

        def one_pass():
            ths = [threading.Thread(target=work, args=(s,)) for s in self.many]
            for th in ths:
                th.start()
            for th in ths:
                th.join()

        r = _sustained(one_pass, k * len(self.many))
        time.sleep(SETTLE)
        return r


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
    xd = npurt.to_device(x)
    streams = {S: [npurt.Stream() for _ in range(S)] for S in args.streams}
    try:
        import onnxruntime
    except ImportError:
        onnxruntime = None
    ort = _Ort(onnxruntime, path, x, cores) if onnxruntime is not None else None
    # Warm-up: one pass at the most streams records the replay instances a pass needs.
    _npurt_round(model, xd, args.requests, streams[max(args.streams)])
    rates = {S: 0.0 for S in args.streams}
    one = many = 0.0
    s1 = streams[args.streams[0]][0]
    lat = olat = float("inf")
    reps = max(5, args.rounds * 3)
    # Alternating: every round measures each npurt configuration and then onnxruntime's,
    # so a change in the machine's load hits both sides alike; best of the rounds.
    for _ in range(args.rounds):
        for S in args.streams:
            rates[S] = max(rates[S], _npurt_round(model, xd, args.requests, streams[S]))
        lat = min(lat, _latency(lambda: model.run([x], stream=s1), reps))
        if ort is not None:
            one = max(one, ort.one_round(args.requests))
            many = max(many, ort.many_round(args.requests))
            olat = min(olat, _latency(lambda: ort.one.run(None, ort.feed), reps))
            time.sleep(SETTLE)
    print(f"\n{name}: input {x.shape}, {args.requests} requests, best of {args.rounds} alternating rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"  {'streams':>8}  {'npurt req/s':>12}  {'vs S=1':>7}")
    for S, r in rates.items():
        print(f"  {S:>8}  {r:>12.1f}  {r / rates[args.streams[0]]:>6.2f}x")
    best = max(rates.values())
    plan = model.plan(x)
    print(f"  npurt single-request latency: {lat:.2f} ms (median of {reps}, best round; numpy in, device array out, synchronized)")
    print(f"  plan: {plan.steps} steps, {plan.instances} replay instances{'' if plan.replay_off is None else ', replay off: ' + plan.replay_off}")
    if ort is None:
        print("  onnxruntime not installed: no baseline")
        return
    ref = ort.one.run(None, ort.feed)[0]
    err = float(np.abs(y - ref).max())
    print(f"  onnxruntime: one session x {cores} threads {one:.1f} req/s; {cores} sessions x 1 thread {many:.1f} req/s; latency {olat:.2f} ms")
    print(f"  npurt best / onnxruntime best: {best / max(one, many):.2f}x; latency npurt / onnxruntime: {lat / olat:.1f}x   (max |npurt - ort| = {err:.2g})")
    for ss in streams.values():
        for st in ss:
            st.destroy()


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
