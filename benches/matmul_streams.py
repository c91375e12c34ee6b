"""256^2 f32 matmuls (one block each) on S=1/S=2 npurt streams vs numpy on 1/2 threads
(threadpoolctl: single-threaded BLAS), in short interleaved rounds in one process; plus
1024^3 matmul GFLOP/s, npurt (all cores) vs numpy (default BLAS threads).

    python benches/matmul_streams.py [rounds=15] [matmuls_per_round=800]

On a shared machine the best-of figures estimate the machine when it is free; the medians
include the other processes. Ratios are between figures of the same run."""

import statistics
import sys
import threading
import time

import npurt
import numpy as np
from threadpoolctl import threadpool_limits

N = 256
rng = np.random.default_rng(0)
ha, hb = rng.standard_normal((N, N), dtype=np.float32), rng.standard_normal((N, N), dtype=np.float32)
a, b = npurt.to_device(ha), npurt.to_device(hb)


def npurt_rate(streams: int, total: int) -> float:
    ss = [npurt.Stream() for _ in range(streams)]
    outs = [npurt.empty((N, N), stream=s) for s in ss]
    for s in ss:
        s.synchronize()
    mm = npurt.matmul
    t = time.perf_counter()
    for i in range(total):
        k = i % streams
        mm(a, b, out=outs[k], stream=ss[k], blocks=1)
    for s in ss:
        s.synchronize()
    dt = time.perf_counter() - t
    assert np.allclose(outs[-1].to_host(), ha @ hb, rtol=1e-4, atol=1e-3)
    for s in ss:
        s.destroy()
    return total / dt


def numpy_rate(threads: int, total: int) -> float:
    outs = [np.empty((N, N), np.float32) for _ in range(threads)]

    def work(k: int) -> None:
        for _ in range(total // threads):
            np.matmul(ha, hb, out=outs[k])

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return (total // threads) * threads / (time.perf_counter() - t)


def gflops_1024(reps: int = 5, rounds: int = 4) -> tuple:
    """Best GFLOP/s of a 1024^3 matmul. npurt and numpy run in separate bursts (0.1 s apart):
    interleaving single calls would bill OpenBLAS's still-spinning worker threads to npurt."""
    m = 1024
    x, y = rng.standard_normal((m, m), dtype=np.float32), rng.standard_normal((m, m), dtype=np.float32)
    dx, dy, do = npurt.to_device(x), npurt.to_device(y), npurt.empty((m, m))
    o = np.empty((m, m), np.float32)
    s = npurt.Stream()
    f = 2 * m**3 / 1e9
    best_n = best_p = 0.0
    npurt.matmul(dx, dy, out=do, stream=s)
    s.synchronize()
    np.matmul(x, y, out=o)
    for _ in range(rounds):
        time.sleep(0.1)
        for _ in range(reps):
            t = time.perf_counter()
            npurt.matmul(dx, dy, out=do, stream=s)
            s.synchronize()
            best_n = max(best_n, f / (time.perf_counter() - t))
        time.sleep(0.1)
        for _ in range(reps):
            t = time.perf_counter()
            np.matmul(x, y, out=o)
            best_p = max(best_p, f / (time.perf_counter() - t))
    assert np.allclose(do.to_host(), x @ y, rtol=1e-3, atol=1e-2)
    s.destroy()
    return best_n, best_p


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    total = int(sys.argv[2]) if len(sys.argv) > 2 else 800
    runs = {"S1": (npurt_rate, 1), "S2": (npurt_rate, 2), "np1": (numpy_rate, 1), "np2": (numpy_rate, 2)}
    r = {k: [] for k in runs}
    with threadpool_limits(limits=1, user_api="blas"):
        for f, k in runs.values():
            f(k, 100)
        for _ in range(rounds):
            for name, (f, k) in runs.items():
                r[name].append(f(k, total))
    g = gflops_1024()
    best = {k: max(v) for k, v in r.items()}
    med = {k: statistics.median(v) for k, v in r.items()}
    for k in r:
        print(f"{k:4s} best {best[k]:6.0f}/s ({best[k] * 2 * N**3 / 1e9:5.1f} GFLOP/s)  median {med[k]:6.0f}/s")
    for lab, d in (("best", best), ("median", med)):
        print(
            f"{lab:6s}: npurt S2/S1 {d['S2'] / d['S1']:.3f} | numpy 2t/1t {d['np2'] / d['np1']:.3f}"
            f" | npurt S2 / numpy 2t {d['S2'] / d['np2']:.3f}"
        )
    print(f"1024^3 f32 matmul: npurt {g[0]:.1f} GFLOP/s, numpy {g[1]:.1f} GFLOP/s, ratio {g[0] / g[1]:.3f}")


if __name__ == "__main__":
    main()
