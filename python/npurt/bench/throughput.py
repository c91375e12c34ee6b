"""Throughput-versus-stream-count workloads of ``python -m npurt.bench``.

A *spec* is one workload at one batch size: its host operands (numpy, seeded), its numpy
reference and how to launch one item on npurt and on the numpy baselines. A *runner* is a
spec on S streams of one runtime, with one output per stream; launch ``i`` goes to stream
``i % S``. Stream k uses operand variant ``k % VARIANTS`` (a different alpha or input), so
an output written by the wrong stream, a skipped kernel (outputs start as NaN) or a wrong
kernel fails ``check``. ``sample`` times ``total`` launches plus the final synchronize.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

import npurt

from . import baselines
from .runner import one_blas_thread

VARIANTS = 3
GELU_C = float(np.sqrt(2.0 / np.pi))


class Spec:
    name = ""
    label = ""
    item = "kernel"
    batched = False

    def __init__(self, batch: int = 1) -> None:
        self.batch = batch
        self.host: Dict[str, Any] = {}

    def launches(self, quick: bool) -> int:
        raise NotImplementedError

    def reference(self, v: int) -> Optional[np.ndarray]:
        """The float64 numpy result for operand variant ``v`` (computed once)."""
        refs = self.__dict__.setdefault("_refs", {})
        if v not in refs:
            refs[v] = self._reference(v)
        return refs[v]

    def _reference(self, v: int) -> Optional[np.ndarray]:
        return None

    def npurt_state(self, streams: List[Any]) -> Any:
        """(launch(k, stream), per-stream outputs or None)."""
        raise NotImplementedError

    def numpy_state(self, n: int) -> Any:
        """(run(k) computing stream k's item on the calling thread, outputs or None)."""
        raise NotImplementedError


class Empty(Spec):
    name, label, item = "empty", "empty kernel", "kernel"

    def launches(self, quick: bool) -> int:
        return 100_000 if quick else 1_000_000

    def npurt_state(self, streams):
        empty = npurt.kernels.empty
        return (lambda k, s: empty(stream=s)), None

    def numpy_state(self, n):
        return (lambda k: None), None


class Busy(Spec):
    """One block spinning ``kernel_s`` on one core; the baseline spins in Python."""

    name, label, item = "busy", "busy 1 ms kernel (1 block)", "kernel"
    kernel_s = 0.001

    def launches(self, quick: bool) -> int:
        return 64 if quick else 1000

    def npurt_state(self, streams):
        busy, ks = npurt.kernels.busy, self.kernel_s
        return (lambda k, s: busy(ks, stream=s)), None

    def numpy_state(self, n):
        ks, clock = self.kernel_s, time.perf_counter

        def spin(k: int) -> None:
            end = clock() + ks
            while clock() < end:
                pass

        return spin, None


class Matmul(Spec):
    """``batch`` stacked 256x256 float32 matrices times one 256x256 matrix (default block plan)."""

    name, label, item, batched = "matmul256", "256x256 float32 matmul (default blocks)", "matmul", True
    n = 256
    blocks: Any = None  # the default plan, as users call it

    def __init__(self, batch: int = 1) -> None:
        super().__init__(batch)
        rng = np.random.default_rng(1)
        shape = (self.n, self.n) if batch == 1 else (batch, self.n, self.n)
        self.host = {"a": [rng.standard_normal(shape, dtype=np.float32) for _ in range(VARIANTS)],
                     "b": rng.standard_normal((self.n, self.n), dtype=np.float32)}
        self.shape = shape

    def launches(self, quick: bool) -> int:
        return max(16, (128 if quick else 2000) // self.batch)

    def _reference(self, v):
        return self.host["a"][v].astype(np.float64) @ self.host["b"]

    def npurt_state(self, streams):
        a = [npurt.to_device(x) for x in self.host["a"]]
        b = npurt.to_device(self.host["b"])
        outs = [npurt.full(self.shape, np.nan, stream=s) for s in streams]
        mm = npurt.matmul
        blocks = self.blocks
        return (lambda k, s: mm(a[k % VARIANTS], b, out=outs[k], stream=s, blocks=blocks)), outs

    def numpy_state(self, n):
        a, b, mm = self.host["a"], self.host["b"], np.matmul
        outs = [np.full(self.shape, np.nan, np.float32) for _ in range(n)]
        return (lambda k: mm(a[k % VARIANTS], b, out=outs[k])), outs


class Matmul1Block(Matmul):
    """The same matmuls forced to one block each (one core per launch)."""

    name, label = "matmul256_1block", "256x256 float32 matmul (1 block)"
    blocks = 1


class Axpy(Spec):
    """``alpha * x + y`` over 2^20 float32 elements (npurt.axpy, fused)."""

    name, label, item = "axpy", "1M-element float32 axpy", "axpy"
    n = 1 << 20

    def __init__(self, batch: int = 1) -> None:
        super().__init__(batch)
        rng = np.random.default_rng(2)
        self.host = {"x": rng.standard_normal(self.n, dtype=np.float32),
                     "y": rng.standard_normal(self.n, dtype=np.float32)}

    @staticmethod
    def alpha(k: int) -> float:
        return 0.5 + k % VARIANTS

    def launches(self, quick: bool) -> int:
        return 128 if quick else 640

    def _reference(self, v):
        return self.alpha(v) * self.host["x"].astype(np.float64) + self.host["y"]

    def npurt_state(self, streams):
        x, y = npurt.to_device(self.host["x"]), npurt.to_device(self.host["y"])
        outs = [npurt.full(self.n, np.nan, stream=s) for s in streams]
        axpy, alpha = npurt.axpy, self.alpha
        return (lambda k, s: axpy(alpha(k), x, y, out=outs[k], stream=s)), outs

    def numpy_state(self, n):
        x, y = self.host["x"], self.host["y"]
        outs = [np.full(self.n, np.nan, np.float32) for _ in range(n)]
        alphas = [np.float32(self.alpha(k)) for k in range(n)]

        def run(k: int) -> None:
            np.multiply(x, alphas[k], out=outs[k])
            np.add(outs[k], y, out=outs[k])

        return run, outs


class Mlp(Spec):
    """One MLP layer: ``gelu(x @ W + b)``, x batch x 1024, W 1024 x 1024, float32, GELU
    with the tanh approximation; three kernels (matmul split by the planner, add, gelu)."""

    name, label, item, batched = "mlp", "MLP layer gelu(x @ W[1024x1024] + b)", "row", True
    d = 1024

    def __init__(self, batch: int = 32) -> None:
        super().__init__(batch)
        rng = np.random.default_rng(3)
        self.host = {"x": [rng.standard_normal((batch, self.d), dtype=np.float32) for _ in range(VARIANTS)],
                     "w": (rng.standard_normal((self.d, self.d), dtype=np.float32) / 32).astype(np.float32),
                     "b": rng.standard_normal(self.d, dtype=np.float32)}

    def launches(self, quick: bool) -> int:
        return min(1024, max(64, (2048 if quick else 8192) // self.batch))

    def _reference(self, v):
        z = self.host["x"][v].astype(np.float64) @ self.host["w"] + self.host["b"]
        return 0.5 * z * (1.0 + np.tanh(GELU_C * (z + 0.044715 * z**3)))

    def npurt_state(self, streams):
        x = [npurt.to_device(v) for v in self.host["x"]]
        w, b = npurt.to_device(self.host["w"]), npurt.to_device(self.host["b"])
        shape = (self.batch, self.d)
        hs = [npurt.empty(shape, stream=s) for s in streams]
        outs = [npurt.full(shape, np.nan, stream=s) for s in streams]

        def launch(k: int, s: Any) -> None:
            h = hs[k]
            npurt.matmul(x[k % VARIANTS], w, out=h, stream=s)
            npurt.add(h, b, out=h, stream=s)
            npurt.gelu(h, approximate="tanh", out=outs[k], stream=s)

        return launch, outs

    def numpy_state(self, n):
        x, w, b = self.host["x"], self.host["w"], self.host["b"]
        shape = (self.batch, self.d)
        hs = [np.empty(shape, np.float32) for _ in range(n)]
        outs = [np.full(shape, np.nan, np.float32) for _ in range(n)]

        def run(k: int) -> None:
            h, o = hs[k], outs[k]
            np.matmul(x[k % VARIANTS], w, out=h)
            h += b
            np.multiply(h, h, out=o)
            o *= 0.044715
            o += 1.0
            o *= h
            o *= GELU_C
            np.tanh(o, out=o)
            o += 1.0
            o *= h
            o *= 0.5

        return run, outs


SPECS = {c.name: c for c in (Empty, Busy, Matmul, Matmul1Block, Axpy, Mlp)}


@functools.lru_cache(maxsize=16)
def spec(name: str, batch: int = 1) -> Spec:
    """The spec of a workload at a batch size (operands made once per run)."""
    return SPECS[name](batch)


# -- runners ---------------------------------------------------------------------------


class _Runner:
    """A runner is a context manager: ``with NpurtStreams(sp, 4) as r:`` closes it (its
    streams) on the way out, also on an exception."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> "_Runner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class NpurtStreams(_Runner):
    def __init__(self, sp: Spec, streams: int) -> None:
        self.spec, self.n = sp, streams
        self.streams = [npurt.Stream() for _ in range(streams)]
        try:
            self._launch, self.outs = sp.npurt_state(self.streams)
            self.sync()
        except BaseException:
            for s in self.streams:
                s.destroy()
            raise

    def launch(self, i: int) -> None:
        k = i % self.n
        self._launch(k, self.streams[k])

    def sync(self) -> None:
        for s in self.streams:
            s.synchronize()

    def outputs(self) -> Optional[List[np.ndarray]]:
        return None if self.outs is None else [o.to_host() for o in self.outs]

    def order_check(self) -> None:
        """Every stream runs a host callback after its kernels, in order."""
        seen: List[int] = []
        for k, s in enumerate(self.streams):
            s.launch_host_func(seen.append, k)
        self.sync()
        if sorted(seen) != list(range(self.n)):
            raise RuntimeError(f"{self.spec.name}: host callbacks ran for streams {sorted(seen)}")

    def close(self) -> None:
        self.sync()
        for s in self.streams:
            s.destroy()


class NumpyThreads(_Runner):
    """numpy doing the work, one ``PyStream`` worker thread per stream (``threaded``) or on
    the calling thread (``threaded=False``; the stream count is then 1)."""

    def __init__(self, sp: Spec, streams: int, threaded: bool = True) -> None:
        self.spec, self.n = sp, streams
        self._run, self.outs = sp.numpy_state(streams)
        self.streams = [baselines.PyStream() for _ in range(streams)] if threaded else []
        self._fns: List[Callable[[], None]] = [functools.partial(self._run, k) for k in range(streams)]

    def launch(self, i: int) -> None:
        k = i % self.n
        if self.streams:
            self.streams[k].launch(self._fns[k])
        else:
            self._fns[k]()

    def sync(self) -> None:
        for s in self.streams:
            s.synchronize()

    def outputs(self) -> Optional[List[np.ndarray]]:
        return self.outs

    def order_check(self) -> None:
        seen: List[int] = []
        lock = threading.Lock()

        def note(k: int) -> None:
            with lock:
                seen.append(k)

        for k, s in enumerate(self.streams):
            s.launch(functools.partial(note, k))
        self.sync()
        if sorted(seen) != list(range(len(self.streams))):
            raise RuntimeError(f"{self.spec.name}: baseline streams did not all finish")

    def close(self) -> None:
        for s in self.streams:
            s.close()


def sample(runner: Any, total: int) -> float:
    """Launches per second: ``total`` launches round-robin over the runner's streams, then
    a synchronize of every stream."""
    launch, clock = runner.launch, time.perf_counter
    t = clock()
    for i in range(total):
        launch(i)
    runner.sync()
    return total / (clock() - t)


def check(runner: Any, cores: int) -> Dict[str, Any]:
    """Compares every stream's output with the numpy reference of its variant (computed in
    float64, compared in float32); for kernels without output, checks that every stream
    completed (and, for ``busy``, that the work was not done faster than ``cores`` cores
    can spin). Raises ``RuntimeError``; returns ``{"streams", "max_abs_err"}``."""
    sp = runner.spec
    outs = runner.outputs()
    res: Dict[str, Any] = {"streams": runner.n, "max_abs_err": None}
    if outs is None:
        if hasattr(runner, "order_check"):
            runner.order_check()
        if sp.name == "busy":
            n = 32 * min(cores, runner.n) if runner.n > 1 else 32  # enough launches that a stall of a few ms cannot hide a fake
            rate = sample(runner, n)
            bound = cores / sp.kernel_s * 1.1
            if rate > bound:
                raise RuntimeError(f"busy: {rate:,.0f} kernels/s is faster than {cores} cores can spin 1 ms kernels")
        return res
    worst = 0.0
    refs = [one_blas_thread(lambda v=v: sp.reference(v)).astype(np.float32) for v in range(min(VARIANTS, len(outs)))]
    tols = [1e-4 + 1e-4 * float(np.max(np.abs(r))) for r in refs]
    for k, out in enumerate(outs):
        ref, tol = refs[k % VARIANTS], tols[k % VARIANTS]
        diff = np.abs(np.subtract(np.asarray(out).reshape(ref.shape), ref, dtype=np.float32))
        err = float(np.max(diff))  # NaN (a kernel that never ran) propagates and fails below
        if not err <= tol:
            raise RuntimeError(f"{sp.name} (batch {sp.batch}): stream {k} of {runner.n} differs from numpy "
                               f"by {err:.3g} (tolerance {tol:.3g}): a wrong answer")
        worst = max(worst, err)
    res["max_abs_err"] = worst
    return res
