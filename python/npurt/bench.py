"""``python -m npurt.bench``: the runtime's own costs and throughput versus stream count,
side by side with baselines measured in the same run.

Every figure is the median of repeated runs (min and max kept) after a warm-up; ratios are
taken between figures of the same run. Correctness is checked once per run. ``--quick``
finishes in well under a minute; ``--out DIR`` writes ``bench.json`` (and ``bench.png`` when
matplotlib is installed); ``--compare OLD.json`` prints now/before ratios.

JSON schema (version 1): ``{"machine": {python, platform, cpus, npurt, config},
"settings": {quick, reps}, "results": {<metric>: {median, min, max, n}, ...,
"busy_1ms_kernels_per_s_by_streams": {<S>: {median, min, max, n}}}, "skipped": [str]}``.
Metric names end in their unit (``_per_s``, ``_us``); ``baseline_*`` metrics are the same
workload on a baseline runtime, measured in the same run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import threading
from pathlib import Path
from typing import Callable, Dict, List

import npurt

from . import _baseline, _membench
from ._workloads import (
    baseline_launch_rate,
    baseline_round_trip_us,
    check_correctness,
    event_hop_us,
    launch_rate,
    matmul_streams,
    numpy_threads_matmul,
    overlap,
    pocl_launch_rate,
    pocl_round_trip_us,
    round_trip_us,
    streams_throughput,
)


def _stats(samples: List[float]) -> Dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


_PROGRESS = {"on": False}


def _repeat(fn: Callable[[], float], reps: int, label: str = "") -> Dict[str, float]:
    if _PROGRESS["on"] and label:
        print(f"  running {label} ...", end="\r", file=sys.stderr, flush=True)
    fn()  # warm-up
    samples = [fn() for _ in range(reps)]
    if _PROGRESS["on"] and label:
        print(" " * 60, end="\r", file=sys.stderr, flush=True)
    return _stats(samples)


def overlap_table(quick: bool, reps: int) -> Dict[str, object]:
    chunks, chunk_bytes, kernel_s = (16 if quick else 64), 8 << 20, 0.002
    out: Dict[str, object] = {"chunks": chunks, "chunk_bytes": chunk_bytes, "kernel_s": kernel_s}
    for s in (1, 2, 4):
        out[str(s)] = _repeat(lambda s=s: overlap(s, chunks, chunk_bytes, kernel_s), reps, f"overlap S={s}")
    return out


def machine() -> Dict[str, object]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "npurt": npurt.__version__,
        "config": npurt.get_config(),
    }


def run(quick: bool, stream_counts: List[int], reps: int, with_memory: bool = True) -> Dict[str, object]:
    n_launch = 100_000 if quick else 1_000_000
    n_rt = 2_000 if quick else 20_000
    kernel_s = 0.001
    total = 200 if quick else 1000
    res: Dict[str, object] = {"machine": machine(), "settings": {"quick": quick, "reps": reps}}
    check_correctness()
    rows: Dict[str, object] = {}
    rows["launch_rate_per_s"] = _repeat(lambda: launch_rate(n_launch), reps, "launch rate")
    rows["baseline_python_threads_launch_rate_per_s"] = _repeat(
        lambda: baseline_launch_rate(n_launch // 4), reps, "baseline launch rate"
    )
    rows["round_trip_us"] = _repeat(lambda: round_trip_us(n_rt), reps, "round trip")
    rows["baseline_python_threads_round_trip_us"] = _repeat(
        lambda: baseline_round_trip_us(n_rt // 4), reps, "baseline round trip"
    )
    rows["event_hop_us"] = _repeat(lambda: event_hop_us(n_rt), reps, "event hop")
    tput = {}
    for s in stream_counts:
        tput[s] = _repeat(lambda s=s: streams_throughput(s, kernel_s, total), reps, f"{s} streams")
    rows["busy_1ms_kernels_per_s_by_streams"] = tput
    try:
        mm_total = 400 if quick else 2000
        mm = {}
        for s in stream_counts:
            mm[s] = _repeat(lambda s=s: matmul_streams(s, mm_total), reps, f"matmul {s} streams")
        rows["matmul256_per_s_by_streams"] = mm
        for k in (1, 2):
            rows[f"baseline_numpy_{k}_threads_matmul256_per_s"] = _repeat(
                lambda k=k: numpy_threads_matmul(k, mm_total), reps, f"numpy matmul {k} threads"
            )
    except ImportError as e:
        res.setdefault("skipped_early", []).append(f"matmul workloads: {e}")
    skipped = []
    try:
        _baseline.PoclRunner()
        rows["baseline_pocl_launch_rate_per_s"] = _repeat(lambda: pocl_launch_rate(n_launch // 10), reps, "PoCL")
        rows["baseline_pocl_round_trip_us"] = _repeat(lambda: pocl_round_trip_us(n_rt // 4), reps, "PoCL rt")
    except Exception as e:  # pyopencl or an OpenCL platform missing
        skipped.append(f"PoCL baseline: {type(e).__name__}: {e} (pip install pyopencl pocl-binary-distribution)")
    if with_memory:
        rows["overlap_seconds_by_streams"] = overlap_table(quick, reps)
        if _PROGRESS["on"]:
            print("  running memory workloads ...", end="\r", file=sys.stderr, flush=True)
        try:
            rows["memory"] = _membench.run(quick)
        except ImportError as e:
            skipped.append(f"memory workloads: {e}")
    res["results"] = rows
    res["skipped"] = skipped + res.pop("skipped_early", [])
    return res


def report(res: Dict[str, object]) -> str:
    r = res["results"]  # type: ignore[index]
    lr, blr = r["launch_rate_per_s"]["median"], r["baseline_python_threads_launch_rate_per_s"]["median"]
    rt, brt = r["round_trip_us"]["median"], r["baseline_python_threads_round_trip_us"]["median"]
    lines = [
        f"{'metric':44} {'npurt':>12} {'baseline':>12} {'ratio':>8}",
        f"{'empty-kernel launch+run, one stream (/s)':44} {lr:12,.0f} {blr:12,.0f} {lr / blr:7.1f}x",
        f"{'submit + synchronize round trip (us)':44} {rt:12.2f} {brt:12.2f} {brt / rt:7.1f}x",
        f"{'event record -> other stream waits (us)':44} {r['event_hop_us']['median']:12.2f}",
    ]
    if "baseline_pocl_launch_rate_per_s" in r:
        plr, prt = r["baseline_pocl_launch_rate_per_s"]["median"], r["baseline_pocl_round_trip_us"]["median"]
        lines += [
            f"{'  vs PoCL: launch+run (/s)':44} {lr:12,.0f} {plr:12,.0f} {lr / plr:7.1f}x",
            f"{'  vs PoCL: round trip (us)':44} {rt:12.2f} {prt:12.2f} {prt / rt:7.1f}x",
        ]
    lines += [
        "",
        f"{'streams':>8} {'busy 1 ms kernels/s':>20} {'vs S=1':>8} {'ideal':>6}",
    ]
    tput = r["busy_1ms_kernels_per_s_by_streams"]
    base = tput[min(tput)]["median"]
    cores = npurt.get_config()["worker_threads"]
    for s, st in tput.items():
        lines.append(f"{s:8d} {st['median']:20,.0f} {st['median'] / base:7.2f}x {min(s, cores):5d}x")
    if "matmul256_per_s_by_streams" in r:
        mm = r["matmul256_per_s_by_streams"]
        n1 = r["baseline_numpy_1_threads_matmul256_per_s"]["median"]
        n2 = r["baseline_numpy_2_threads_matmul256_per_s"]["median"]
        lines += ["", f"{'streams':>8} {'256^2 matmuls/s':>20} {'vs S=1':>8} {'vs numpy 2 threads':>20}"]
        m1 = mm[min(mm)]["median"]
        for s, st in mm.items():
            lines.append(f"{s:8d} {st['median']:20,.0f} {st['median'] / m1:7.2f}x {st['median'] / n2:19.2f}x")
        lines.append(f"  numpy, single-threaded BLAS: 1 thread {n1:,.0f}/s, 2 threads {n2:,.0f}/s")
    if "overlap_seconds_by_streams" in r:
        ov = r["overlap_seconds_by_streams"]
        one = ov["1"]["median"]
        lines += ["", f"overlap: {ov['chunks']} chunks x (H2D {ov['chunk_bytes'] >> 20} MiB -> busy "
                  f"{ov['kernel_s'] * 1e3:.0f} ms -> D2H), speed-up over 1 stream:"]
        for k in ("2", "4"):
            lines.append(f"  {k} streams: {one / ov[k]['median']:5.2f}x  ({ov[k]['median'] * 1e3:.1f} ms vs {one * 1e3:.1f} ms)")
    if "memory" in r:
        lines += _membench.report(r["memory"])
    lines.append("(baselines measured in this run: a pure-Python runtime of one thread per stream; PoCL via pyopencl)")
    for skip in res.get("skipped", []):  # type: ignore[union-attr]
        lines.append(f"skipped: {skip}")
    return "\n".join(lines)


def compare(res: Dict[str, object], old_path: Path) -> str:
    """Ratios of this run's medians against an earlier ``bench.json``."""
    old = json.loads(old_path.read_text())["results"]
    new = res["results"]  # type: ignore[index]
    lines = [f"{'metric':52} {'now':>12} {'before':>12} {'now/before':>10}"]

    def walk(prefix: str, a: Dict[str, object], b: Dict[str, object]) -> None:
        for k, v in a.items():
            if k not in b and str(k) not in b:
                continue
            w = b.get(k, b.get(str(k)))
            if isinstance(v, dict) and "median" in v and isinstance(w, dict) and "median" in w:
                lines.append(f"{prefix + str(k):52} {v['median']:12.3f} {w['median']:12.3f} {v['median'] / w['median']:9.2f}x")
            elif isinstance(v, dict) and isinstance(w, dict):
                walk(prefix + str(k) + ".", v, w)

    walk("", new, old)
    return "\n".join(lines)


def plot(res: Dict[str, object], path: Path) -> bool:
    """Throughput versus stream count per workload, as speed-up over one stream, with the
    ideal min(S, cores) line."""
    if importlib.util.find_spec("matplotlib") is None:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = res["results"]  # type: ignore[index]
    series = {
        "busy 1 ms kernel (1 block)": r["busy_1ms_kernels_per_s_by_streams"],
        "256x256 float32 matmul": r.get("matmul256_per_s_by_streams"),
    }
    cores = npurt.get_config()["worker_threads"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    xs_all: List[int] = []
    for label, data in series.items():
        if not data:
            continue
        xs = sorted(data)
        base = data[xs[0]]["median"]
        ys = [data[x]["median"] / base for x in xs]
        lo = [data[x]["min"] / base for x in xs]
        hi = [data[x]["max"] / base for x in xs]
        ax.plot(xs, ys, "o-", label=f"npurt: {label} ({base:,.0f}/s at S={xs[0]})")
        ax.fill_between(xs, lo, hi, alpha=0.15)
        xs_all = xs
    ax.plot(xs_all, [min(x, cores) / min(xs_all[0], cores) for x in xs_all], "--", label="ideal min(S, cores)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("streams")
    ax.set_ylabel("throughput / throughput at S=1")
    ax.set_title(f"npurt throughput versus stream count ({cores} AI-core workers)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m npurt.bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a short run (well under a minute)")
    p.add_argument("--streams", default="1,2,4,8,16,32,64", help="comma-separated stream counts")
    p.add_argument("--reps", type=int, default=None, help="repetitions per figure (median reported)")
    p.add_argument("--out", default="bench-out", help="directory for bench.json / bench.png")
    p.add_argument("--compare", default=None, help="an earlier bench.json: print now/before ratios")
    p.add_argument("--no-progress", action="store_true", help="do not print progress to stderr")
    p.add_argument("--no-memory", action="store_true", help="skip the memory workloads")
    a = p.parse_args(argv)
    _PROGRESS["on"] = not a.no_progress and sys.stderr.isatty()
    counts = [int(x) for x in a.streams.split(",") if x.strip()]
    if not counts or min(counts) < 1:
        p.error("--streams needs positive integers")
    reps = a.reps or (3 if a.quick else 5)
    res = run(a.quick, counts, reps, with_memory=not a.no_memory)
    print(report(res))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(res, indent=2, default=str))
    print(f"wrote {out / 'bench.json'}")
    if plot(res, out / "bench.png"):
        print(f"wrote {out / 'bench.png'}")
    if a.compare:
        print(compare(res, Path(a.compare)))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "npurt-bench"
    sys.exit(main())
