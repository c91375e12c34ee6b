"""The "kernels" section of ``python -m npurt.bench``: npurt's kernels against numpy on the
same operands in the same run, on all cores and on one core.

Cases: f32 matmul 1024³ and 256³ (GFLOP/s), axpy over 16M f32 (GB/s, 12 bytes moved per
element), softmax and layer_norm over (4096, 1024) f32 (GB/s, 8 bytes per element: one
read, one write). npurt runs its default paths (``npurt.matmul(a, b, out=c)``, no
``blocks=``) on one stream and synchronizes after each call; numpy runs the same maths with
``out=`` where it has one. Each runtime runs in a child process of its own (numpy's BLAS
threads spin after a call and would steal a core from npurt's workers in a shared process);
"one core" children get ``NPURT_WORKER_THREADS=1`` and numpy's BLAS pinned to one thread
(``OPENBLAS_NUM_THREADS=1`` and friends), so both runtimes get exactly one core. Every figure is the median of
``reps`` samples after a warm-up; each case is checked once against numpy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

import numpy as np

import npurt

from .runner import Step, one_blas_thread

# name -> (unit, work per call: flops or bytes)
CASES: Dict[str, Tuple[str, float]] = {
    "matmul1024": ("GFLOP/s", 2.0 * 1024**3),
    "matmul256": ("GFLOP/s", 2.0 * 256**3),
    "axpy16M": ("GB/s", 12.0 * (16 << 20)),
    "softmax": ("GB/s", 8.0 * 4096 * 1024),
    "layer_norm": ("GB/s", 8.0 * 4096 * 1024),
}
# Seconds each runtime runs a case before its first timed sample.
WARM_S = 0.25
_ONE_CORE_ENV = {"NPURT_WORKER_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _np_softmax(x: np.ndarray, out: np.ndarray) -> None:
    np.subtract(x, x.max(axis=-1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=-1, keepdims=True)


def _np_layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    mean = x.mean(axis=-1, keepdims=True)
    np.subtract(x, mean, out=out)
    var = np.mean(np.square(out), axis=-1, keepdims=True)
    out /= np.sqrt(var + 1e-5)
    out *= w
    out += b


class Case:
    """Operands of one case on the host and the device, and a call of each runtime."""

    def __init__(self, name: str, quick: bool) -> None:
        self.name = name
        self.unit, self.work = CASES[name]
        rng = np.random.default_rng(7)
        f32 = np.float32
        self.s = npurt.Stream()
        self._warm: set = set()
        if name.startswith("matmul"):
            n = 1024 if name == "matmul1024" else 256
            ha, hb = rng.standard_normal((n, n), dtype=f32), rng.standard_normal((n, n), dtype=f32)
            self.host = (ha, hb, np.empty((n, n), f32))
            a, b, c = npurt.to_device(ha), npurt.to_device(hb), npurt.empty((n, n))
            self.dev_out, self.ref = c, lambda: ha.astype(np.float64) @ hb
            self._npurt = lambda: npurt.matmul(a, b, out=c, stream=self.s)
            self._numpy = lambda: np.matmul(ha, hb, out=self.host[2])
            self.calls = (4 if quick else 10) if n == 1024 else (64 if quick else 200)
        elif name == "axpy16M":
            n = 16 << 20
            hx, hy = rng.standard_normal(n, dtype=f32), rng.standard_normal(n, dtype=f32)
            ho = np.empty(n, f32)
            x, y, o = npurt.to_device(hx), npurt.to_device(hy), npurt.empty(n)
            self.dev_out, self.ref = o, lambda: 0.5 * hx.astype(np.float64) + hy
            self._npurt = lambda: npurt.axpy(0.5, x, y, out=o, stream=self.s)

            def np_axpy() -> None:
                np.multiply(hx, f32(0.5), out=ho)
                np.add(ho, hy, out=ho)

            self._numpy = np_axpy
            self.calls = 4 if quick else 10
        else:
            shape = (4096, 1024)
            hx = rng.standard_normal(shape, dtype=f32)
            ho = np.empty(shape, f32)
            x, o = npurt.to_device(hx), npurt.empty(shape)
            self.dev_out = o
            if name == "softmax":
                self.ref = lambda: _ref_softmax(hx)
                self._npurt = lambda: npurt.softmax(x, axis=-1, out=o, stream=self.s)
                self._numpy = lambda: _np_softmax(hx, ho)
            else:
                hw, hb = rng.standard_normal(1024, dtype=f32), rng.standard_normal(1024, dtype=f32)
                w, b = npurt.to_device(hw), npurt.to_device(hb)
                self.ref = lambda: _ref_layer_norm(hx, hw, hb)
                self._npurt = lambda: npurt.layer_norm(x, w, b, eps=1e-5, out=o, stream=self.s)
                self._numpy = lambda: _np_layer_norm(hx, hw, hb, ho)
            self.calls = 4 if quick else 10

    def rate(self, which: str) -> float:
        """Work per second of ``calls`` calls (npurt: launched back to back, then synchronized).
        The first call of each runtime first runs it for ``WARM_S`` seconds: on a VM an idle
        vCPU comes back slowly (the second core joined a 1024³ matmul 2-4 ms late for the
        first ~50 ms of work after an idle spell, on npurt and numpy alike), so a warm-up of
        one sample measured the hypervisor, not the kernels."""
        if which not in self._warm:
            self._warm.add(which)
            end = time.perf_counter() + WARM_S
            while time.perf_counter() < end:
                self._run(which)
        t0 = time.perf_counter()
        self._run(which)
        return self.work * self.calls / (time.perf_counter() - t0) / 1e9

    def _run(self, which: str) -> None:
        if which == "npurt":
            for _ in range(self.calls):
                self._npurt()
            self.s.synchronize()
        else:
            for _ in range(self.calls):
                self._numpy()

    def check(self) -> str:
        self._npurt()
        got = self.dev_out.to_host().astype(np.float64)
        want = one_blas_thread(self.ref)
        tol = 1e-3 * max(1.0, float(np.abs(want).max()))
        err = float(np.abs(got - want).max())
        if not err <= tol:
            raise RuntimeError(f"kernels/{self.name}: npurt differs from numpy by {err:.3g} (tolerance {tol:.3g})")
        return "ok"

    def close(self) -> None:
        self.s.destroy()


def _ref_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _ref_layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * w + b


def steps(quick: bool, reps: int, cases: List[str], impls: Tuple[str, ...] = ("npurt", "numpy"),
          where: str = "all_cores") -> List[Step]:
    """Figures of ``impls`` per case, under ``kernels/<case>/<where>/<impl>``."""
    out: List[Step] = []
    for name in cases:
        for impl in impls:
            out.append(Step(("kernels", name, where, impl), f"{name} {impl} ({where.replace('_', ' ')})",
                            lambda c, impl=impl: c.rate(impl), reps,
                            make=lambda name=name: Case(name, quick),
                            check=(lambda c: c.check()) if impl == "npurt" else None,
                            check_path=("kernels", name, "check")))
    return out


def child_steps(quick: bool, reps: int, cases: List[str]) -> List[Step]:
    """Each runtime on all cores and on one core, each in a child process of its own: numpy's
    BLAS threads keep spinning after a call and would take a core from npurt's workers (and
    npurt's workers, briefly, from numpy) if both ran in one process."""
    out = []
    for where, env in (("all_cores", {}), ("one_core", _ONE_CORE_ENV)):
        for impl in ("npurt", "numpy"):
            out.append(Step(("kernels_child", where, impl), f"kernels: {impl}, {where.replace('_', ' ')} (child)",
                            raw=lambda impl=impl, where=where, env=env: _child(quick, reps, cases, impl, where, env)))
    return out


def _child(quick: bool, reps: int, cases: List[str], impl: str, where: str, env: Dict[str, str]) -> Any:
    args = [sys.executable, "-m", "npurt.bench.kernels", "--reps", str(reps), "--cases", ",".join(cases),
            "--impl", impl, "--where", where]
    if quick:
        args.append("--quick")
    p = subprocess.run(args, env=dict(os.environ, **env), capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"kernels child ({impl}, {where}) failed: {(p.stderr or p.stdout).strip()[-400:]}")
    return json.loads(p.stdout)


def merge_children(results: Dict[str, Any]) -> None:
    """Folds the children's figures into ``kernels/<case>/<where>/<impl>`` (+ ``check``)."""
    children = results.pop("kernels_child", None) or {}
    ks = results.setdefault("kernels", {})
    for per_where in children.values():
        for child in per_where.values():
            for name, per in child.get("kernels", {}).items():
                dst = ks.setdefault(name, {})
                for key, val in per.items():  # "all_cores"/"one_core" dicts, or the npurt child's "check"
                    if isinstance(val, dict):
                        dst.setdefault(key, {}).update(val)
                    else:
                        dst[key] = val  # a failed check already failed its child


def table(results: Dict[str, Any]) -> List[str]:
    """Lines of the kernels table: npurt and numpy medians and their ratio, per core count."""
    ks = results.get("kernels") or {}
    if not ks:
        return []
    lines = ["kernels (npurt default paths vs numpy, same operands, same run; ratio = npurt / numpy):"]
    lines.append(f"  {'case':12} {'cores':9} {'npurt':>10} {'numpy':>10}  {'unit':8} ratio")
    for name, per in ks.items():
        unit = CASES.get(name, ("",))[0]
        for where in ("all_cores", "one_core"):
            f = per.get(where)
            if not f or "npurt" not in f or "numpy" not in f:
                continue
            a, b = f["npurt"]["median"], f["numpy"]["median"]
            lines.append(f"  {name:12} {where.replace('_', ' '):9} {a:10.1f} {b:10.1f}  {unit:8} {a / b:5.2f}x")
    return lines


def main(argv: List[str] | None = None) -> None:
    """Child entry point: runs the section and prints the results as JSON."""
    import argparse

    from .runner import Progress, execute

    p = argparse.ArgumentParser(prog="python -m npurt.bench.kernels")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--impl", choices=("npurt", "numpy", "both"), default="both")
    p.add_argument("--where", default="all_cores")
    a = p.parse_args(argv)
    impls = ("npurt", "numpy") if a.impl == "both" else (a.impl,)
    results: Dict[str, Any] = {}
    execute(steps(a.quick, a.reps, a.cases.split(","), impls, a.where), results, Progress(1, False))
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
