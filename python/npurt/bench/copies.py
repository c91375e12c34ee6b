"""Workloads of ``python -m npurt.bench`` for host copies of device arrays: H2D / D2H of
one large array from and into pinned memory against ``np.copyto`` in the same process, and
the copy/compute overlap pipeline on arrays (H2D → matmul → D2H per chunk, round-robin on
S streams). Each returns one sample.

Why a matmul: on a CPU "device" a copy and a kernel share the cores and the memory bus. A
memory-bound kernel (axpy, an elementwise op) needs the bandwidth the copy is using, so
running both at once gains nothing. A compute-bound kernel (a matmul: its operands stay
in cache, it is limited by the FMA units) leaves the bandwidth to the copy, so a second
stream can copy one chunk while another chunk is multiplied. The chunk shape (many rows,
a narrow weight) keeps the copy and the matmul of a chunk of similar length, which is
where overlap pays; each matmul is one block (one AI core, as one NPU stream's kernel
would run on its cores), so one stream leaves the other core idle during its copies and
the second stream fills it."""

from __future__ import annotations

import time
from typing import Any, Dict, List

import numpy as np

import npurt


def _best_gbps(fn: Any, nbytes: int, reps: int) -> float:
    fn()  # warm: pages touched, pool and pinned caches filled
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return nbytes / best / 1e9


def array_copy_gbps(nbytes: int, reps: int) -> Dict[str, float]:
    """GB/s of H2D (``copy_`` from a HostBuffer on a stream, synchronized) and D2H
    (``to_host(out=HostBuffer, stream=)``, synchronized) of one ``nbytes`` float32 array,
    and of ``np.copyto`` between two numpy arrays of the same size (the baseline: what a
    host-to-host copy of the same bytes costs in this process). Best of ``reps``."""
    s = npurt.Stream()
    host = npurt.malloc_host(nbytes)
    try:
        hv = host.numpy(np.uint8)
        hv[:] = 1
        a = npurt.empty(nbytes // 4, "float32")
        src, dst = np.ones(nbytes, np.uint8), np.zeros(nbytes, np.uint8)

        def h2d() -> None:
            a.copy_(host, stream=s)
            s.synchronize()

        def d2h() -> None:
            a.to_host(out=host, stream=s)
            s.synchronize()

        return {
            "h2d_gbps": _best_gbps(h2d, nbytes, reps),
            "d2h_gbps": _best_gbps(d2h, nbytes, reps),
            "np_copyto_gbps": _best_gbps(lambda: np.copyto(dst, src), nbytes, reps),
        }
    finally:
        host.free()
        s.destroy()


def overlap_arrays(streams: int, chunks: int, rows: int, k: int, blocks: Any = 1) -> float:
    """Seconds for ``chunks`` chunks of H2D (rows × k float32 from pinned memory) → matmul
    with a (k × k) weight → D2H (into pinned memory), chunk c on stream c % ``streams``;
    every step is ordered by the arrays' last writers (no events)."""
    ss: List[npurt.Stream] = [npurt.Stream() for _ in range(streams)]
    hosts: List[Any] = []
    try:
        w = npurt.to_device(np.random.default_rng(0).standard_normal((k, k)).astype(np.float32) / k)
        xs = [npurt.empty((rows, k)) for _ in range(streams)]
        ys = [npurt.empty((rows, k)) for _ in range(streams)]
        nb = rows * k * 4
        hosts += [npurt.malloc_host(nb) for _ in range(2 * chunks)]
        ins = [h.numpy(np.float32).reshape(rows, k) for h in hosts[:chunks]]
        outs = hosts[chunks:]
        for x in ins:
            x[...] = 0.5
        w.synchronize()
        t = time.perf_counter()
        for c in range(chunks):
            i = c % streams
            s = ss[i]
            xs[i].copy_(ins[c], stream=s)
            npurt.matmul(xs[i], w, out=ys[i], stream=s, blocks=blocks)
            ys[i].to_host(out=outs[c], stream=s)
        for s in ss:
            s.synchronize()
        dt = time.perf_counter() - t
        got = outs[-1].numpy(np.float32)[:k]
        want = 0.5 * w.to_host().sum(axis=0)
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
            raise RuntimeError("overlap pipeline on arrays gave a wrong result")
        return dt
    finally:
        for h in hosts:
            h.free()
        for s in ss:
            s.destroy()
