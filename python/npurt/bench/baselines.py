"""Baseline runtimes that ``python -m npurt.bench`` measures against, in the same run.

* ``PyStream``: a pure-Python runtime of one worker thread per stream (queue +
  ``threading.Event``), the runtime people would otherwise write;
* ``PoclRunner`` / ``PoclStreams``: PoCL (CPU OpenCL) through pyopencl, one in-order command
  queue per stream;
* ``NumbaSimStreams``: numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), one numba CUDA
  stream per stream. The simulator runs every launch synchronously on the calling thread,
  one Python thread per CUDA thread, so it is slow: the bench uses it for the cheap
  workloads, few stream counts and few launches, and says so.

Each optional baseline raises ``ImportError`` (or an OpenCL error) from its constructor when
its package is missing; the bench turns that into a "skipped" line.
"""

from __future__ import annotations

import functools
import os
import queue
import threading
from typing import Any, Callable, List, Optional

import numpy as np


class PyStream:
    """One worker thread draining a FIFO of callables."""

    def __init__(self) -> None:
        self._q: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            item()

    def launch(self, fn: Callable[[], Any]) -> None:
        self._q.put(fn)

    def synchronize(self) -> None:
        done = threading.Event()
        self._q.put(done.set)
        done.wait()

    def close(self) -> None:
        self._q.put(None)
        self._t.join()


def nop() -> None:
    return None


# -- PoCL ------------------------------------------------------------------------------

_CL_SRC = """
__kernel void nop(__global int* x) { }
__kernel void axpy(float a, __global const float* x, __global const float* y, __global float* o) {
    size_t i = get_global_id(0);
    o[i] = a * x[i] + y[i];
}
"""


@functools.lru_cache(maxsize=None)
def _pocl() -> Any:
    """(pyopencl, context, program), built once per process (the build takes ~1 s)."""
    import pyopencl as cl

    platforms = [p for p in cl.get_platforms() if "Portable" in p.name] or cl.get_platforms()
    ctx = cl.Context(devices=platforms[0].get_devices())
    return cl, ctx, cl.Program(ctx, _CL_SRC).build()


class PoclRunner:
    """PoCL (CPU OpenCL) through pyopencl: one in-order command queue is one stream."""

    def __init__(self) -> None:
        cl, self.ctx, prg = _pocl()
        self.cl = cl
        self.queue = cl.CommandQueue(self.ctx)
        self.buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, 4)
        self.kernel = cl.Kernel(prg, "nop")
        self.kernel.set_args(self.buf)

    def launch(self) -> None:
        self.cl.enqueue_nd_range_kernel(self.queue, self.kernel, (1,), None)

    def synchronize(self) -> None:
        self.queue.finish()


class PoclStreams:
    """A throughput workload (``empty`` or ``axpy``) on ``streams`` PoCL command queues;
    stream k writes its own output with the spec's k-th operands."""

    def __init__(self, spec: Any, streams: int) -> None:
        cl, ctx, prg = _pocl()
        if spec.name not in ("empty", "axpy"):
            raise NotImplementedError(f"PoCL baseline has no {spec.name} kernel")
        self.cl, self.spec, self.n = cl, spec, streams
        mf = cl.mem_flags
        self.queues = [cl.CommandQueue(ctx) for _ in range(streams)]
        if spec.name == "empty":
            self.kernels = [cl.Kernel(prg, "nop") for _ in range(streams)]
            self.keep = [cl.Buffer(ctx, mf.READ_WRITE, 4)]  # set_args holds no reference
            for k in self.kernels:
                k.set_args(self.keep[0])
            self.size, self.outs = (1,), []
        else:
            x, y = spec.host["x"], spec.host["y"]
            bx = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
            by = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=y)
            self.keep = [bx, by]
            self.outs = [cl.Buffer(ctx, mf.READ_WRITE, x.nbytes) for _ in range(streams)]
            self.kernels = []
            for k in range(streams):
                kern = cl.Kernel(prg, "axpy")
                kern.set_args(np.float32(spec.alpha(k)), bx, by, self.outs[k])
                self.kernels.append(kern)
                cl.enqueue_fill_buffer(self.queues[k], self.outs[k], np.float32(np.nan), 0, x.nbytes)
            self.size = (x.size,)
        self.sync()

    def launch(self, i: int) -> None:
        k = i % self.n
        self.cl.enqueue_nd_range_kernel(self.queues[k], self.kernels[k], self.size, None)

    def sync(self) -> None:
        for q in self.queues:
            q.finish()

    def outputs(self) -> Optional[List[np.ndarray]]:
        if not self.outs:
            return None
        res = []
        for q, b in zip(self.queues, self.outs, strict=True):
            h = np.empty_like(self.spec.host["x"])
            self.cl.enqueue_copy(q, h, b)
            res.append(h)
        return res

    def close(self) -> None:
        self.sync()


# -- numba's CUDA simulator ----------------------------------------------------------------

cuda: Any = None  # numba.cuda once _numba_sim() ran


@functools.lru_cache(maxsize=None)
def _numba_sim() -> Any:
    """(numba.cuda, empty kernel, axpy kernel) under the CUDA simulator."""
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    import numba  # noqa: F401  (ImportError: the baseline is skipped)
    from numba import config

    if not config.ENABLE_CUDASIM:
        raise ImportError("numba was imported before NUMBA_ENABLE_CUDASIM=1 could be set")
    global cuda  # kernels must see `cuda` as a global: the simulator swaps it while they run
    from numba import cuda as _cuda

    cuda = _cuda

    @_cuda.jit
    def empty():  # pragma: no cover - runs in the simulator's threads
        pass

    @_cuda.jit
    def axpy(a, x, y, o):  # pragma: no cover - grid-stride loop
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, x.shape[0], step):
            o[i] = a * x[i] + y[i]

    return _cuda, empty, axpy


class NumbaSimStreams:
    """A throughput workload (``empty`` or ``axpy``) on ``streams`` numba CUDA streams in
    numba's CUDA simulator (axpy: 1 block of 32 threads, grid-stride loop)."""

    GRID = (1, 32)

    def __init__(self, spec: Any, streams: int) -> None:
        cuda, self.k_empty, self.k_axpy = _numba_sim()
        if spec.name not in ("empty", "axpy"):
            raise NotImplementedError(f"numba simulator baseline has no {spec.name} kernel")
        self.cuda, self.spec, self.n = cuda, spec, streams
        self.streams = [cuda.stream() for _ in range(streams)]
        self.outs: List[Any] = []
        if spec.name == "axpy":
            self.x, self.y = cuda.to_device(spec.host["x"]), cuda.to_device(spec.host["y"])
            self.alphas = [np.float32(spec.alpha(k)) for k in range(streams)]
            self.outs = [cuda.to_device(np.full_like(spec.host["x"], np.nan)) for _ in range(streams)]
            small = cuda.to_device(np.ones(64, np.float32))  # warms the simulator's code paths cheaply
            self.k_axpy[self.GRID[0], self.GRID[1], self.streams[0]](np.float32(1), small, small, small)
        else:
            self.k_empty[1, 1, self.streams[0]]()

    def launch(self, i: int) -> None:
        k = i % self.n
        if self.outs:
            self.k_axpy[self.GRID[0], self.GRID[1], self.streams[k]](self.alphas[k], self.x, self.y, self.outs[k])
        else:
            self.k_empty[1, 1, self.streams[k]]()

    def sync(self) -> None:
        for s in self.streams:
            s.synchronize()

    def outputs(self) -> Optional[List[np.ndarray]]:
        return [o.copy_to_host() for o in self.outs] if self.outs else None

    def close(self) -> None:
        self.sync()
