"""``python -m npurt.bench``: the runtime's own costs and throughput versus stream count,
side by side with baselines measured in the same run.

Workloads by stream count: empty kernels, busy 1 ms kernels, 256x256 matmuls, 1M-element
axpy, an MLP layer (``--batch`` rows). Baselines: one Python thread per stream running the
same numpy code, numpy on the calling thread, PoCL command queues (pyopencl), numba's CUDA
simulator; each optional one is skipped with a message when its package is missing. Every
figure is the median of repeated runs (min and max kept) after a warm-up; ratios are taken
between figures of the same run; every workload's result is checked once per run against
numpy. ``--quick`` finishes in under a minute; ``--out DIR`` writes ``bench.json`` and the
plots ``bench.png`` (all workloads) and ``bench-<workload>.png``; ``--compare OLD.json``
prints now/before ratios. The JSON schema is documented in ``docs/BENCH.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any, Dict, List

import npurt
from npurt import _npurt

from . import baselines as bl
from . import copies as cp
from . import kernels as kb
from . import memory as mem
from . import report as rep
from . import throughput as tp
from .runner import Progress, Step, execute, settle_blas
from .workloads import (
    baseline_launch_rate,
    baseline_round_trip_us,
    check_correctness,
    event_hop_us,
    launch_rate,
    numpy_tiny_rate,
    pocl_launch_rate,
    pocl_round_trip_us,
    round_trip_us,
    tiny_event_hop_us,
    tiny_launch_rate,
)

SCHEMA = 2
WORKLOADS = ["runtime", "kernels", "empty", "busy", "matmul256", "matmul256_1block", "axpy", "mlp", "overlap", "memory"]
BASELINES = ["python_threads", "numpy", "pocl", "numba_cudasim"]
NUMPY_WORKLOADS = ("matmul256", "matmul256_1block", "axpy", "mlp")  # where "numpy on the calling thread" means something
KERNEL_BASELINES = ("empty", "axpy")  # the workloads PoCL and the numba simulator have kernels for


def machine() -> Dict[str, object]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "npurt": npurt.__version__,
        "config": npurt.get_config(),
        "isa": npurt.isa_info(),  # CPU model and the ISA path of each kernel family
        "numpy_blas": numpy_blas(),  # which BLAS kernels the numpy baselines ran
        # one-way ns for a cache line between two cores, now (and "end": after the run):
        # every cross-core figure moves with it (a VM's vCPUs on one die or two)
        "core_to_core_ns": {"start": _npurt._core_to_core_ns()},
    }


# OpenBLAS variables that pick (or cap) its kernels; some machines set them for old builds.
_BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_VERBOSE")


def numpy_blas() -> Dict[str, object]:
    """numpy's BLAS as threadpoolctl reports it (library, version, kernel architecture,
    threads) and the environment variables that cap its kernels: a numpy baseline run on
    Haswell kernels of an AVX-512 CPU (``OPENBLAS_CORETYPE=Haswell``) is half as fast, so
    every report says which kernels the baseline ran."""
    out: Dict[str, object] = {"env": {k: os.environ[k] for k in _BLAS_ENV if k in os.environ}}
    try:
        import numpy as np  # noqa: F401  (loads the BLAS so threadpoolctl sees it)
        from threadpoolctl import threadpool_info
    except ImportError:
        return out
    for lib in threadpool_info():
        if lib.get("user_api") == "blas":
            out.update({k: lib.get(k) for k in ("internal_api", "version", "architecture", "num_threads")})
            break
    return out


def runtime_steps(quick: bool, reps: int, baselines: List[str], skipped: List[str]) -> List[Step]:
    n_launch, n_rt = (100_000, 2_000) if quick else (1_000_000, 20_000)
    steps = [
        Step(("runtime_check",), "stream order + event timing check", raw=lambda: check_correctness() or "ok"),
        Step(("launch_rate_per_s",), "launch rate", lambda: launch_rate(n_launch), reps),
        Step(("round_trip_us",), "round trip", lambda: round_trip_us(n_rt), reps),
        Step(("event_hop_us",), "event hop", lambda: event_hop_us(n_rt), reps),
        Step(("tiny_launch_rate_per_s",), "tiny-kernel launch rate", lambda: tiny_launch_rate(n_launch // 2), reps),
        Step(("tiny_event_hop_us",), "tiny-kernel event hop", lambda: tiny_event_hop_us(n_rt), reps),
    ]
    if "numpy" in baselines:
        steps.append(Step(("baseline_numpy_tiny_rate_per_s",), "numpy inline tiny add",
                          lambda: numpy_tiny_rate(n_launch // 2), reps))
    if "python_threads" in baselines:
        steps += [
            Step(("baseline_python_threads_launch_rate_per_s",), "py-threads launch rate",
                 lambda: baseline_launch_rate(n_launch // 4), reps),
            Step(("baseline_python_threads_round_trip_us",), "py-threads round trip",
                 lambda: baseline_round_trip_us(n_rt // 4), reps),
        ]
    if "pocl" in baselines and _available("pocl", skipped):
        steps += [
            Step(("baseline_pocl_launch_rate_per_s",), "PoCL launch rate", lambda: pocl_launch_rate(n_launch // 10), reps),
            Step(("baseline_pocl_round_trip_us",), "PoCL round trip", lambda: pocl_round_trip_us(n_rt // 4), reps),
        ]
    return steps


_AVAILABLE: Dict[str, str] = {}


def _available(name: str, skipped: List[str]) -> bool:
    """Whether an optional baseline can run; if not, a skipped line says why (once)."""
    if name not in _AVAILABLE:
        try:
            if name == "pocl":
                bl._pocl()
            elif name == "numba_cudasim":
                bl._numba_sim()
            elif name == "threadpoolctl":
                import threadpoolctl  # noqa: F401
            _AVAILABLE[name] = ""
        except Exception as e:  # noqa: BLE001 - missing package or OpenCL platform
            hint = {"pocl": "pip install pyopencl pocl-binary-distribution", "numba_cudasim": "pip install numba",
                    "threadpoolctl": "pip install threadpoolctl"}[name]
            _AVAILABLE[name] = f"{type(e).__name__}: {e} ({hint})"
    msg = _AVAILABLE[name]
    if msg:
        what = {"pocl": "PoCL baseline", "numba_cudasim": "numba CUDA simulator baseline",
                "threadpoolctl": "BLAS thread limit of the py-threads baseline"}[name]
        line = f"{what}: {msg}"
        if line not in skipped:
            skipped.append(line)
    return not msg


class _LimitedThreads(tp.NumpyThreads):
    """The py-threads baseline with numpy's BLAS limited to one thread per stream."""

    def __init__(self, sp: tp.Spec, streams: int) -> None:
        self._limit = None
        if _AVAILABLE.get("threadpoolctl") == "":
            from threadpoolctl import threadpool_limits

            self._limit = threadpool_limits(limits=1, user_api="blas")
        try:
            super().__init__(sp, streams)
        except BaseException:
            self._restore()
            raise

    def _restore(self) -> None:
        if self._limit is not None:
            self._limit.restore_original_limits()
            self._limit = None

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._restore()


class _NumpyInline(tp.NumpyThreads):
    """numpy on the calling thread with all its BLAS threads; closing waits until those
    threads stop spinning, so the next npurt figure gets the cores."""

    def __init__(self, sp: tp.Spec, streams: int) -> None:
        super().__init__(sp, streams, threaded=False)

    def close(self) -> None:
        try:
            super().close()
        finally:
            settle_blas()


def _runners(wl: str, quick: bool, counts: List[int], reps: int, launches: int, baselines: List[str],
             skipped: List[str]) -> List[Any]:
    """(name, stream counts, factory(spec, S), launches per S, reps, warm-up) of one workload."""
    every = {s: max(launches, s) for s in counts}
    out: List[Any] = [("npurt", counts, tp.NpurtStreams, every, reps, True)]
    if "python_threads" in baselines:
        out.append(("python_threads", counts, _LimitedThreads, every, reps, True))
    if "numpy" in baselines and wl in NUMPY_WORKLOADS:
        out.append(("numpy", [1], _NumpyInline, {1: max(8, launches // 16)}, reps, True))
    if wl in KERNEL_BASELINES and "pocl" in baselines and _available("pocl", skipped):
        n = {s: max(launches // 10, s) for s in counts} if wl == "empty" else every  # PoCL: ~300k/s
        out.append(("pocl", counts, bl.PoclStreams, n, reps, True))
    if wl in KERNEL_BASELINES and "numba_cudasim" in baselines and _available("numba_cudasim", skipped):
        # The simulator runs one Python thread per CUDA thread, serially: few launches, small S,
        # and for axpy one launch per stream, no warm-up run (the runner warms up on 64 elements).
        if wl == "empty":
            ns = [s for s in counts if s <= 4]
            out.append(("numba_cudasim", ns, bl.NumbaSimStreams, {s: 100 if quick else 400 for s in ns}, reps, True))
        else:
            ns = [s for s in counts if s <= (1 if quick else 2)]
            out.append(("numba_cudasim", ns, bl.NumbaSimStreams, {s: s for s in ns}, 1 if quick else 2, False))
    return [r for r in out if r[1]]


def _batch_steps(wl: str, b: int, quick: bool, counts: List[int], reps: int, baselines: List[str],
                 node: Dict[str, Any], skipped: List[str], cores: int) -> List[Step]:
    sp = tp.spec(wl, b)
    launches = sp.launches(quick)
    node["batches"][str(b)] = {"items_per_launch": b, "launches": launches, "npurt": {}, "baselines": {}}
    base = ("throughput", wl, "batches", str(b))
    runners = _runners(wl, quick, counts, reps, launches, baselines, skipped)
    node["batches"][str(b)]["launches_by_runner"] = {r[0]: {str(s): n for s, n in r[3].items()} for r in runners}
    steps: List[Step] = []
    for s in sorted(set(counts) | {1}):  # npurt and its baselines pair by pair, S by S
        for name, ns, factory, n_by_s, n_reps, warm in runners:
            if s not in ns:
                continue
            path = base + (("npurt",) if name == "npurt" else ("baselines", name)) + (str(s),)
            steps.append(Step(
                path, f"{wl} b={b} {name} S={s}", functools.partial(tp.sample, total=n_by_s[s]), n_reps, warm,
                make=functools.partial(factory, sp, s),
                check=functools.partial(tp.check, cores=cores) if s == max(ns) else None,
                check_path=base + ("check", name)))
    return steps


def throughput_steps(quick: bool, counts: List[int], reps: int, workloads: List[str], batches: Dict[str, List[int]],
                     baselines: List[str], results: Dict[str, Any], skipped: List[str]) -> List[Step]:
    cores = npurt.get_config()["worker_threads"]
    steps: List[Step] = []
    if "python_threads" in baselines and any(w in NUMPY_WORKLOADS for w in workloads):
        _available("threadpoolctl", skipped)
    for wl in [w for w in workloads if w in tp.SPECS]:
        cls = tp.SPECS[wl]
        node = results.setdefault("throughput", {}).setdefault(wl, {})
        node.update(label=cls.label, item=cls.item, batched=cls.batched, batches={})
        for b in batches.get(wl, [1]) if cls.batched else [1]:
            steps += _batch_steps(wl, b, quick, counts, reps, baselines, node, skipped, cores)
    return steps


def run(quick: bool, stream_counts: List[int], reps: int, with_memory: bool = True, *,
        workloads: List[str] | None = None, batches: Dict[str, List[int]] | None = None,
        baselines: List[str] | None = None, progress: bool = False) -> Dict[str, object]:
    workloads = list(workloads or WORKLOADS)
    if not with_memory:
        workloads = [w for w in workloads if w not in ("overlap", "memory")]
    baselines = list(BASELINES if baselines is None else baselines)
    batches = batches or {"mlp": [32] if quick else [1, 32, 128], "matmul256": [1]}
    batches.setdefault("matmul256_1block", batches.get("matmul256", [1]))
    res: Dict[str, Any] = {
        "schema": SCHEMA,
        "machine": machine(),
        "settings": {"quick": quick, "reps": reps, "streams": stream_counts, "workloads": workloads,
                     "baselines": baselines, "batch": batches.get("mlp", []),
                     "matmul_batch": batches.get("matmul256", [1])},
    }
    results: Dict[str, Any] = {}
    skipped: List[str] = []
    steps: List[Step] = []
    if "runtime" in workloads:
        steps += runtime_steps(quick, reps, baselines, skipped)
    if "kernels" in workloads:
        steps += kb.child_steps(quick, reps, list(kb.CASES))
    steps += throughput_steps(quick, stream_counts, reps, workloads, batches, baselines, results, skipped)
    if "overlap" in workloads:
        steps += cp.overlap_steps(results, reps)
    if "memory" in workloads:
        steps.append(Step(("memory",), "memory workloads", raw=lambda: mem.run(quick)))
    bar = Progress(sum(st.units for st in steps), progress)
    try:
        execute(steps, results, bar)
    finally:
        bar.close()
    kb.merge_children(results)
    res["machine"]["core_to_core_ns"]["end"] = _npurt._core_to_core_ns()
    res["results"] = results
    res["skipped"] = skipped
    return res


def report(res: Dict[str, Any]) -> str:
    r = res["results"]
    lines: List[str] = [rep.where(res["machine"])]
    if "launch_rate_per_s" in r:
        lines += rep.runtime_lines(r)
    lines += kb.table(r)
    if "throughput" in r:
        lines += rep.tables(r["throughput"], res["machine"]["config"]["worker_threads"])
    lines += cp.overlap_report(r)
    if "memory" in r:
        lines += mem.report(r["memory"])
    for skip in res.get("skipped", []):
        lines.append(f"skipped: {skip}")
    return "\n".join(lines)


def _upgrade(old: Dict[str, Any]) -> Dict[str, Any]:
    """Maps a schema-1 ``results`` (before the throughput section) onto schema 2's names."""
    old = dict(old)
    for key, wl in (("busy_1ms_kernels_per_s_by_streams", "busy"), ("matmul256_per_s_by_streams", "matmul256")):
        if key in old:
            old.setdefault("throughput", {}).setdefault(wl, {"batches": {"1": {}}})["batches"]["1"]["npurt"] = old.pop(key)
    return old


def compare(res: Dict[str, Any], old_path: Path) -> str:
    """Ratios of this run's medians against an earlier ``bench.json`` (schema 1 or 2)."""
    old = _upgrade(json.loads(old_path.read_text())["results"])
    new = res["results"]
    lines = [f"{'metric':64} {'now':>12} {'before':>12} {'now/before':>10}"]

    def walk(prefix: str, a: Dict[str, Any], b: Dict[str, Any]) -> None:
        for k, v in a.items():
            w = b.get(k, b.get(str(k)))
            if w is None:
                continue
            if isinstance(v, dict) and "median" in v and isinstance(w, dict) and "median" in w:
                name = prefix + str(k)
                lines.append(f"{name:64} {v['median']:12.3f} {w['median']:12.3f} {v['median'] / w['median']:9.2f}x")
            elif isinstance(v, dict) and isinstance(w, dict):
                walk(prefix + str(k) + ".", v, w)

    walk("", new, old)
    return "\n".join(lines)


def _ints(p: argparse.ArgumentParser, text: str, what: str) -> List[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        p.error(f"{what} needs comma-separated positive integers, not {text!r}")
    if not vals or min(vals) < 1:
        p.error(f"{what} needs comma-separated positive integers, not {text!r}")
    return sorted(set(vals))


def _names(p: argparse.ArgumentParser, text: str, allowed: List[str], what: str) -> List[str]:
    vals = [x.strip() for x in text.split(",") if x.strip()]
    bad = [v for v in vals if v not in allowed]
    if bad:
        p.error(f"{what}: unknown {', '.join(bad)} (choose from {', '.join(allowed)})")
    return vals


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m npurt.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a short run (under a minute)")
    p.add_argument("--streams", default="1,2,4,8,16,32,64", help="comma-separated stream counts")
    p.add_argument("--batch", default=None, help="MLP batch sizes (rows), comma-separated (default: 1,32,128; quick: 32)")
    p.add_argument("--matmul-batch", default="1", help="256x256 matrices per matmul launch, comma-separated")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"subset of {','.join(WORKLOADS)}")
    p.add_argument("--baselines", default=",".join(BASELINES), help=f"subset of {','.join(BASELINES)} (or 'none')")
    p.add_argument("--reps", type=int, default=None, help="repetitions per figure (median reported)")
    p.add_argument("--out", default="bench-out", help="directory for bench.json and the PNG plots")
    p.add_argument("--compare", default=None, help="an earlier bench.json: print now/before ratios")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--no-memory", action="store_true", help="skip the overlap and memory workloads")
    a = p.parse_args(argv)
    counts = _ints(p, a.streams, "--streams")
    batches = {"mlp": _ints(p, a.batch, "--batch") if a.batch else ([32] if a.quick else [1, 32, 128]),
               "matmul256": _ints(p, a.matmul_batch, "--matmul-batch")}
    workloads = _names(p, a.workloads, WORKLOADS, "--workloads")
    baselines = [] if a.baselines.strip() == "none" else _names(p, a.baselines, BASELINES, "--baselines")
    if a.reps is not None and a.reps < 1:
        p.error("--reps needs a positive integer")
    if a.compare and not Path(a.compare).is_file():
        p.error(f"--compare: no such file {a.compare}")
    reps = a.reps or (3 if a.quick else 5)
    res = run(a.quick, counts, reps, with_memory=not a.no_memory, workloads=workloads, batches=batches,
              baselines=baselines, progress=not a.no_progress and sys.stderr.isatty())
    print(report(res))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(res, indent=2, default=str))
    print(f"wrote {out / 'bench.json'}")
    for path in rep.plot_all(res["results"].get("throughput", {}), res["machine"]["config"]["worker_threads"],
                             out):
        print(f"wrote {path}")
    if a.compare:
        print(compare(res, Path(a.compare)))
    return 0

