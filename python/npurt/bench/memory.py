"""Memory workloads of ``python -m npurt.bench``: pool allocation against raw mappings,
pinned copies against numpy, first touch on huge pages, and a fragmentation replay
against a plain first-fit allocator (the baselines are measured in the same run)."""

from __future__ import annotations

import mmap
import random
import time
from typing import Dict, List, Tuple

import npurt

from .copies import array_copy_gbps

MiB = 1 << 20


def _median_ns(loop, n: int, rounds: int = 5) -> float:
    """Median over ``rounds`` calls of ``loop(k)`` (``k = n // rounds`` iterations of the
    timed operation, written out in ``loop`` itself), ns per iteration."""
    k = max(1, n // rounds)
    # Warm up for 0.1 s first: a core that sat idle runs slowly for tens of milliseconds
    # (frequency ramp on the host), which would otherwise land in every round of a short run.
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.1:
        loop(k)
    res = []
    for _ in range(rounds):
        t = time.perf_counter()
        loop(k)
        res.append((time.perf_counter() - t) / k * 1e9)
    return sorted(res)[rounds // 2]


def pool_pair_ns(n: int) -> float:
    """One 1 MiB ``malloc`` + ``free`` from Python, ns per pair (cache warm; median of 5
    rounds; the ``for`` loop's own cost is included, as it is for the baseline)."""

    def loop(k: int) -> None:
        m = npurt.malloc
        for _ in range(k):
            m(MiB).free()

    return _median_ns(loop, n)


def raw_mmap_pair_ns(n: int) -> float:
    """Baseline: an anonymous 1 MiB mapping made and unmapped (Python's mmap module)."""

    def loop(k: int) -> None:
        m = mmap.mmap
        for _ in range(k):
            m(-1, MiB).close()

    return _median_ns(loop, n)


def copy_gbps(nbytes: int, reps: int) -> Dict[str, float]:
    """H2D and D2H from pinned host memory, and numpy's ``copyto`` of the same size."""
    import numpy as np

    host = npurt.malloc_host(nbytes)
    dev = npurt.malloc(nbytes)
    npurt.memset(host, 1)
    npurt.memcpy(dev, host)  # first touch of both sides outside the timings
    a = np.ones(nbytes, dtype=np.uint8)
    b = np.empty_like(a)
    np.copyto(b, a)

    def best(fn) -> float:
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return nbytes / sorted(times)[len(times) // 2] / 1e9

    res = {
        "h2d_pinned_gbps": best(lambda: npurt.memcpy(dev, host)),
        "d2h_pinned_gbps": best(lambda: npurt.memcpy(host, dev)),
        "numpy_copyto_gbps": best(lambda: np.copyto(b, a)),
    }
    dev.free()
    host.free()
    return res


def first_touch_ms(nbytes: int, policy: str) -> float:
    """Time to write every byte of a fresh allocation (page faults dominate)."""
    npurt.empty_cache()
    buf = npurt.malloc(nbytes, policy=policy)
    t = time.perf_counter()
    npurt.memset(buf, 0x5A)
    ms = (time.perf_counter() - t) * 1e3
    buf.free()
    npurt.empty_cache()
    return ms


def first_touch(nbytes: int, rounds: int) -> Dict[str, float]:
    """First touch on huge_first against normal_only memory.

    The first round of each policy is reported apart (``cold_*``): on a virtual machine
    it also pays the hypervisor backing guest memory it never touched, which can cost
    more than the guest's own page faults and hides the huge-page effect. The headline
    figures are medians of ``rounds`` later rounds, the policies alternating."""
    policies = ("huge_first", "normal_only")
    res: Dict[str, float] = {f"cold_{p}": first_touch_ms(nbytes, p) for p in policies}
    warm: Dict[str, List[float]] = {p: [] for p in policies}
    for _ in range(rounds):
        for p in policies:
            warm[p].append(first_touch_ms(nbytes, p))
    for p in policies:
        res[p] = sorted(warm[p])[len(warm[p]) // 2]
    return res


def _trace(steps: int, seed: int = 7) -> List[Tuple[str, int, int]]:
    """Dynamic-shape serving loop: float32 images 3x224², 3x640², 3x480² allocated and freed
    in varying order, plus a few long-lived buffers."""
    rng = random.Random(seed)
    sizes = [3 * 224 * 224 * 4, 3 * 640 * 640 * 4, 3 * 480 * 480 * 4]
    ops: List[Tuple[str, int, int]] = [("alloc", i, 8 * MiB + i * MiB) for i in range(3)]  # long-lived
    live: List[int] = []
    nxt = 3
    for _ in range(steps):
        if live and (len(live) > 6 or rng.random() < 0.45):
            victim = live.pop(rng.randrange(len(live)))
            ops.append(("free", victim, 0))
        else:
            size = rng.choice(sizes) * rng.choice([1, 1, 2])
            ops.append(("alloc", nxt, size))
            live.append(nxt)
            nxt += 1
    return ops


def first_fit_ratio(ops: List[Tuple[str, int, int]]) -> float:
    """Baseline: a first-fit allocator over one address range (512-byte rounding);
    returns peak extent used / peak bytes allocated."""
    free: List[List[int]] = [[0, 1 << 62]]  # [start, size], sorted by start
    where: Dict[int, Tuple[int, int]] = {}
    allocated = peak_alloc = peak_extent = 0
    for kind, key, size in ops:
        if kind == "alloc":
            size = (size + 511) // 512 * 512
            for i, (start, fsize) in enumerate(free):
                if fsize >= size:
                    where[key] = (start, size)
                    if fsize == size:
                        free.pop(i)
                    else:
                        free[i] = [start + size, fsize - size]
                    peak_extent = max(peak_extent, start + size)
                    break
            allocated += size
            peak_alloc = max(peak_alloc, allocated)
        else:
            start, size = where.pop(key)
            allocated -= size
            free.append([start, size])
            free.sort()
            merged: List[List[int]] = []
            for blk in free:
                if merged and merged[-1][0] + merged[-1][1] == blk[0]:
                    merged[-1][1] += blk[1]
                else:
                    merged.append(blk)
            free = merged
    return peak_extent / peak_alloc


def npurt_replay(ops: List[Tuple[str, int, int]]) -> Dict[str, float]:
    """The same trace through npurt's caching pool: peak reserved / peak allocated."""
    npurt.empty_cache()
    npurt.reset_peak_memory_stats()
    base_alloc, base_res = npurt.memory_allocated(), npurt.memory_reserved()
    bufs = {}
    ooms = 0
    for kind, key, size in ops:
        if kind == "alloc":
            try:
                bufs[key] = npurt.malloc(size)
            except npurt.OutOfMemoryError:
                ooms += 1
        elif key in bufs:
            bufs.pop(key).free()
    peak_alloc = npurt.max_memory_allocated() - base_alloc
    peak_res = npurt.max_memory_reserved() - base_res
    for b in bufs.values():
        b.free()
    npurt.empty_cache()
    return {"reserved_over_peak_allocated": peak_res / peak_alloc, "ooms": float(ooms)}


def run(quick: bool) -> Dict[str, object]:
    n = 50_000 if quick else 200_000
    touch = (128 if quick else 512) * MiB
    steps = 2_000 if quick else 10_000
    res: Dict[str, object] = {
        "pool_alloc_free_1mib_ns": pool_pair_ns(n),
        "baseline_raw_mmap_alloc_free_1mib_ns": raw_mmap_pair_ns(n // 10),
    }
    res.update(copy_gbps(64 * MiB, 5 if quick else 11))
    res.update(array_copy_gbps(64 * MiB, 5 if quick else 11))
    res["first_touch_ms"] = {"bytes": touch, **first_touch(touch, 2 if quick else 3)}
    ops = _trace(steps)
    res["fragmentation"] = {"steps": steps, "baseline_first_fit": first_fit_ratio(ops), **npurt_replay(ops)}
    return res


def _array_copy_lines(m: Dict[str, object]) -> List[str]:
    if "array_h2d_pinned_gbps" not in m:
        return []
    base = m["array_numpy_copyto_gbps"]
    return [f"{'array ' + d + ' 64 MiB pinned vs np.copyto (GB/s)':44} {m[k]:12.2f} {base:12.2f} {m[k] / base:7.2f}x"
            for d, k in (("H2D", "array_h2d_pinned_gbps"), ("D2H", "array_d2h_pinned_gbps"))]


def report(m: Dict[str, object]) -> List[str]:
    ft = m["first_touch_ms"]
    fr = m["fragmentation"]
    return [
        "",
        f"{'memory':44} {'npurt':>12} {'baseline':>12} {'ratio':>8}",
        f"{'1 MiB alloc+free from Python (ns/pair)':44} {m['pool_alloc_free_1mib_ns']:12.0f} "
        f"{m['baseline_raw_mmap_alloc_free_1mib_ns']:12.0f} "
        f"{m['baseline_raw_mmap_alloc_free_1mib_ns'] / m['pool_alloc_free_1mib_ns']:7.1f}x",
        f"{'H2D 64 MiB pinned vs np.copyto (GB/s)':44} {m['h2d_pinned_gbps']:12.2f} {m['numpy_copyto_gbps']:12.2f} "
        f"{m['h2d_pinned_gbps'] / m['numpy_copyto_gbps']:7.2f}x",
        f"{'D2H 64 MiB pinned vs np.copyto (GB/s)':44} {m['d2h_pinned_gbps']:12.2f} {m['numpy_copyto_gbps']:12.2f} "
        f"{m['d2h_pinned_gbps'] / m['numpy_copyto_gbps']:7.2f}x",
        *_array_copy_lines(m),
        f"{'first touch ' + str(ft['bytes'] >> 20) + ' MiB: huge_first vs normal (ms)':44} {ft['huge_first']:12.1f} "
        f"{ft['normal_only']:12.1f} {ft['normal_only'] / ft['huge_first']:7.2f}x",
        f"{'  (first round, VM backing memory too)':44} {ft['cold_huge_first']:12.1f} "
        f"{ft['cold_normal_only']:12.1f} {ft['cold_normal_only'] / ft['cold_huge_first']:7.2f}x",
        f"{'fragmentation replay: reserved/peak alloc':44} {fr['reserved_over_peak_allocated']:12.2f} "
        f"{fr['baseline_first_fit']:12.2f}   (first-fit baseline; OOMs: {fr['ooms']:.0f})",
    ]
