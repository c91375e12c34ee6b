"""Host copies of device arrays in ``python -m npurt.bench``: H2D / D2H of one 64 MiB array
from and into pinned memory against ``np.copyto`` of the same bytes in the same process
(``array_copy_gbps``, part of the memory workload), and the copy/compute overlap pipeline
on arrays (``overlap``: H2D → matmul → D2H per chunk, round-robin on S streams).

Why a matmul. On a CPU "device" a copy and a kernel share the cores and the memory bus. A
memory-bound kernel (axpy, an elementwise op) needs the bandwidth the copy is using, so
running both at once gains little. A compute-bound kernel (a matmul: its operands stay in
cache, the FMA units limit it) leaves the bus to the copy, so one stream's chunk can be
copied while another's is multiplied. The copy engine has no core of its own, though: on a
machine whose every core runs AI-core workers, overlap pays only where one stream leaves a
core idle. The headline pipeline therefore runs each chunk's matmul as one block (one AI
core, as an NPU stream's small kernel occupies part of the card): one stream alternates
copy and compute, and a second stream fills the idle core with the other. The same
pipeline on the default block plan (every core for a lone launch) is reported beside it.
The chunk (8192 × 128 float32, 4 MiB each way) makes a chunk's matmul a few times longer
than its copies, so the pipeline is compute-bound, as the issue's pipeline implies."""

from __future__ import annotations

import time
from typing import Any, Dict, List

import numpy as np

import npurt

from .runner import Step

CHUNKS, ROWS, K = 16, 8192, 128


def array_copy_gbps(nbytes: int, reps: int) -> Dict[str, float]:
    """GB/s (median of ``reps``) of H2D (``copy_`` from a HostBuffer on a stream, then
    synchronize) and D2H (``to_host(out=HostBuffer, stream=)``, then synchronize) of one
    float32 array of ``nbytes``, and of ``np.copyto`` between two numpy arrays of that
    size. The three alternate in every round, so drift on a busy machine hits all alike."""
    s = npurt.Stream()
    host = npurt.malloc_host(nbytes)
    try:
        host.numpy(np.uint8)[:] = 1
        a = npurt.empty(nbytes // 4, "float32")
        src, dst = np.ones(nbytes, np.uint8), np.zeros(nbytes, np.uint8)

        def h2d() -> None:
            a.copy_(host, stream=s)
            s.synchronize()

        def d2h() -> None:
            a.to_host(out=host, stream=s)
            s.synchronize()

        fns = {"array_h2d_pinned_gbps": h2d, "array_d2h_pinned_gbps": d2h, "array_numpy_copyto_gbps": lambda: np.copyto(dst, src)}
        times: Dict[str, List[float]] = {k: [] for k in fns}
        for fn in fns.values():
            fn()  # warm: pages touched, caches filled
        for _ in range(reps):
            for k, fn in fns.items():
                t = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t)
        if not (a.to_host()[:4].view(np.uint8) == 1).all():
            raise RuntimeError("array copies gave a wrong result")
        return {k: nbytes / sorted(v)[len(v) // 2] / 1e9 for k, v in times.items()}
    finally:
        host.free()
        s.destroy()


def overlap(streams: int, chunks: int = CHUNKS, rows: int = ROWS, k: int = K, blocks: Any = 1) -> float:
    """Seconds for ``chunks`` chunks of H2D (rows × k float32 from pinned memory, by
    ``copy_``) → ``matmul`` with a k × k weight (``blocks``: None for the default plan) →
    D2H (``to_host(out=)`` into pinned memory), chunk c on stream c % ``streams``. The
    arrays' last writers order every step (no events); the result is checked."""
    ss: List[npurt.Stream] = [npurt.Stream() for _ in range(streams)]
    hosts: List[Any] = []
    try:
        w = npurt.to_device(np.random.default_rng(0).standard_normal((k, k)).astype(np.float32) / k)
        xs = [npurt.empty((rows, k)) for _ in range(streams)]
        ys = [npurt.empty((rows, k)) for _ in range(streams)]
        hosts += [npurt.malloc_host(rows * k * 4) for _ in range(2 * chunks)]
        ins = [h.numpy(np.float32).reshape(rows, k) for h in hosts[:chunks]]
        outs = hosts[chunks:]
        for c, x in enumerate(ins):
            x[...] = c % 3
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
        col = w.to_host().sum(axis=0)
        for c in (chunks - 2, chunks - 1):
            got = outs[c].numpy(np.float32).reshape(rows, k)[rows - 1]
            if not np.allclose(got, (c % 3) * col, rtol=1e-3, atol=1e-3):
                raise RuntimeError("the overlap pipeline on arrays gave a wrong result")
        return dt
    finally:
        for h in hosts:
            h.free()
        for s in ss:
            s.destroy()


def baseline_overlap(threads: int, chunks: int = CHUNKS, rows: int = ROWS, k: int = K) -> float:
    """The same pipeline as :func:`overlap` run by ``threads`` Python threads with numpy
    (chunk c on thread c % ``threads``: ``np.copyto`` in, ``np.matmul(out=)``, ``np.copyto``
    out), BLAS limited to one thread each when threadpoolctl is installed: the same-run
    peer telling what a second stream can gain on this machine at this moment."""
    import threading

    w = (np.random.default_rng(0).standard_normal((k, k)) / k).astype(np.float32)
    ins = [np.full((rows, k), c % 3, np.float32) for c in range(chunks)]
    outs = [np.empty((rows, k), np.float32) for _ in range(chunks)]

    def body(i: int) -> None:
        x, y = np.empty((rows, k), np.float32), np.empty((rows, k), np.float32)
        for c in range(i, chunks, threads):
            np.copyto(x, ins[c])
            np.matmul(x, w, out=y)
            np.copyto(outs[c], y)

    try:
        from threadpoolctl import threadpool_limits

        limit: Any = threadpool_limits(limits=1, user_api="blas")
    except ImportError:
        limit = None
    try:
        ts = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
        t = time.perf_counter()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        dt = time.perf_counter() - t
    finally:
        if limit is not None:
            limit.unregister()
    if not np.allclose(outs[-1][-1], ((chunks - 1) % 3) * w.sum(axis=0), rtol=1e-3, atol=1e-3):
        raise RuntimeError("the python-threads overlap baseline gave a wrong result")
    return dt


def overlap_steps(results: Dict[str, Any], reps: int) -> List[Step]:
    """The bench steps: S = 1, 2, 4 with one block per matmul, and S = 1, 2 on the default
    block plan."""
    meta = {"chunks": CHUNKS, "chunk_bytes": ROWS * K * 4, "kernel": f"matmul ({ROWS}x{K}) @ ({K}x{K}) float32"}
    results["overlap_seconds_by_streams"] = dict(meta, blocks=1)
    results["overlap_default_blocks_seconds_by_streams"] = dict(meta, blocks=None)
    steps = [Step(("overlap_seconds_by_streams", str(s)), f"overlap S={s}", lambda s=s: overlap(s), reps)
             for s in (1, 2, 4)]
    steps += [Step(("overlap_default_blocks_seconds_by_streams", str(s)), f"overlap default blocks S={s}",
                   lambda s=s: overlap(s, blocks=None), reps) for s in (1, 2)]
    results["baseline_python_threads_overlap_seconds_by_streams"] = dict(meta)
    steps += [Step(("baseline_python_threads_overlap_seconds_by_streams", str(s)), f"overlap py-threads S={s}",
                   lambda s=s: baseline_overlap(s), reps) for s in (1, 2)]
    return steps


def overlap_report(r: Dict[str, Any]) -> List[str]:
    lines: List[str] = []
    for key, what in (("overlap_seconds_by_streams", "one block per matmul"),
                      ("overlap_default_blocks_seconds_by_streams", "default block plan"),
                      ("baseline_python_threads_overlap_seconds_by_streams", "baseline: numpy, one Python thread per stream")):
        ov = r.get(key)
        if not ov or "1" not in ov:
            continue
        one = ov["1"]["median"]
        lines += ["", f"overlap on arrays, {what}: {ov['chunks']} chunks x (H2D {ov['chunk_bytes'] >> 20} MiB "
                  f"-> {ov['kernel']} -> D2H), speed-up over 1 stream:"]
        for k in ("2", "4"):
            if k in ov:
                lines.append(f"  {k} streams: {one / ov[k]['median']:5.2f}x  ({ov[k]['median'] * 1e3:.1f} ms vs {one * 1e3:.1f} ms)")
    return lines
