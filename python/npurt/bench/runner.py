"""The execution plan of ``python -m npurt.bench`` and its progress bar.

The bench first lists every measurement as a ``Step`` (what to run, how many samples, where
the result goes), so the progress bar knows the total; ``execute`` then runs them in order:
per step an optional warm-up, the optional correctness check (once), then the samples.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, TextIO

# How long OpenBLAS's threads keep spinning after a multi-threaded call (measured: one core
# busy for ~100 ms after a 256² matmul on 2 threads), with a margin.
BLAS_SPIN_S = 0.15


def one_blas_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` with numpy's BLAS on the calling thread only (when threadpoolctl is there):
    a multi-threaded BLAS call, such as a float64 reference matmul, leaves OpenBLAS's
    threads spinning for ~0.1 s after it, on a core npurt's workers need for the next
    figure (256³ matmuls measured after a check ran at one core's speed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return fn()
    with threadpool_limits(limits=1, user_api="blas"):
        return fn()


def settle_blas() -> None:
    """Waits until OpenBLAS's threads, spinning after a baseline's multi-threaded calls,
    have parked, so that the next npurt figure gets the cores (without this, the
    throughput rows measured right after "numpy on the calling thread" lost up to half)."""
    time.sleep(BLAS_SPIN_S)


def stats(samples: Sequence[float]) -> Dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


@dataclass
class Step:
    """One figure. ``path`` is where its result goes in ``results`` (dicts made on the way).

    Either ``fn`` returns one sample (``reps`` samples after a warm-up give median/min/max),
    or ``raw`` returns a finished result stored as is (one unit of progress). With ``make``,
    ``fn`` takes the object ``make()`` returned (built once, outside the timings, and
    ``close()``d afterwards) and ``check(obj)``, if given, runs once after the first run (the
    warm-up, if any); its result goes to ``check_path``."""

    path: Sequence[str]
    label: str
    fn: Optional[Callable[..., float]] = None
    reps: int = 1
    warmup: bool = True
    make: Optional[Callable[[], Any]] = None
    check: Optional[Callable[[Any], Any]] = None
    check_path: Sequence[str] = ()
    raw: Optional[Callable[[], Any]] = None

    @property
    def units(self) -> int:
        return 1 if self.raw is not None else self.reps + (1 if self.warmup else 0)


class Progress:
    """A progress bar on stderr: tqdm when installed, else a small built-in bar. Off when
    ``enabled`` is false (``--no-progress``, or stderr is not a terminal)."""

    def __init__(self, total: int, enabled: bool, file: Optional[TextIO] = None, use_tqdm: bool = True) -> None:
        self.total, self.done, self.enabled = max(total, 1), 0, enabled
        self.file = file or sys.stderr
        self.label = ""
        self.t0 = time.monotonic()
        self._tqdm = None
        if enabled and use_tqdm:
            try:
                from tqdm import tqdm
            except ImportError:
                pass
            else:
                self._tqdm = tqdm(total=self.total, file=self.file, unit="run", leave=False, dynamic_ncols=True)

    def describe(self, label: str) -> None:
        self.label = label
        if self._tqdm is not None:
            self._tqdm.set_description_str(label, refresh=True)
        else:
            self._draw()

    def advance(self, n: int = 1) -> None:
        self.done = min(self.done + n, self.total)
        if self._tqdm is not None:
            self._tqdm.update(n)
        else:
            self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        frac = self.done / self.total
        width = 30
        fill = int(frac * width)
        elapsed = time.monotonic() - self.t0
        eta = f" eta {elapsed / frac - elapsed:4.0f}s" if 0 < frac < 1 else ""
        bar = "#" * fill + "-" * (width - fill)
        line = f"\r[{bar}] {frac * 100:3.0f}% {self.done}/{self.total}{eta} {self.label[:40]:40}"
        self.file.write(line)
        self.file.flush()

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()
        elif self.enabled:
            self.file.write("\r" + " " * 100 + "\r")
            self.file.flush()


def _put(tree: Dict[str, Any], path: Sequence[str], value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(str(key), {})
    tree[str(path[-1])] = value


def execute(steps: List[Step], results: Dict[str, Any], progress: Progress) -> None:
    """Runs the steps in order, storing every figure under its path in ``results``."""
    for st in steps:
        progress.describe(st.label)
        if st.raw is not None:
            _put(results, st.path, st.raw())
            progress.advance()
            continue
        obj = st.make() if st.make is not None else None
        assert st.fn is not None
        fn: Callable[[], float] = functools.partial(st.fn, obj) if st.make is not None else st.fn
        try:
            samples = []
            for i in range(st.units):
                value = fn()
                progress.advance()
                if i == 0 and st.check is not None:  # after the first run (the warm-up, if any)
                    _put(results, st.check_path, st.check(obj))
                if i > 0 or not st.warmup:
                    samples.append(value)
        finally:
            if obj is not None and hasattr(obj, "close"):
                obj.close()
        _put(results, st.path, stats(samples))
