"""A pure-Python runtime of one worker thread per stream (queue + threading.Event).

This is the baseline people would otherwise write; the benchmarks measure npurt against it
in the same run.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable


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


class PoclRunner:
    """PoCL (CPU OpenCL) through pyopencl: one in-order command queue is one stream."""

    def __init__(self) -> None:
        import pyopencl as cl

        self.cl = cl
        platforms = [p for p in cl.get_platforms() if "Portable" in p.name] or cl.get_platforms()
        self.ctx = cl.Context(devices=platforms[0].get_devices())
        self.queue = cl.CommandQueue(self.ctx)
        prg = cl.Program(self.ctx, "__kernel void nop(__global int* x) { }").build()
        self.buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, 4)
        self.kernel = prg.nop
        self.kernel.set_args(self.buf)

    def launch(self) -> None:
        self.cl.enqueue_nd_range_kernel(self.queue, self.kernel, (1,), None)

    def synchronize(self) -> None:
        self.queue.finish()
