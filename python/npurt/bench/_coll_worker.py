"""One rank's side of ``python -m npurt.bench.collectives``: times each collective at each
size on one backend (an ``npurt.distributed`` backend on DeviceArrays, or mpi4py's own
blocking calls on numpy arrays) and checks one result per size against numpy.

Sizes are nccl-tests' "size": the bytes of the larger buffer (all_gather's output,
reduce_scatter's input, all_to_all's either, all_reduce's and broadcast's one); the data
is float32; all_reduce and broadcast run in place (torch's shape; ``MPI_IN_PLACE`` for
mpi4py). The time of a size is the slowest rank's mean over ``iters`` back-to-back calls
(up to :data:`MAX_ITERS` for small sizes), the last one synchronized, after the checked
call, ``warmup(iters)`` untimed ones (first touches of staging memory, the first calls'
slow paths: a first row must not measure them) and a barrier.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
BUS_FACTOR: Dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


def counts(op: str, size: int, n: int) -> Tuple[int, int]:
    """(send, receive) float32 elements of ``op`` at nccl-tests size ``size`` bytes."""
    total = max(size // 4 // n * n, n)
    if op == "all_gather":
        return total // n, total
    if op == "reduce_scatter":
        return total, total // n
    return total, total


def inputs(op: str, rank: int, count: int) -> np.ndarray:
    """Rank ``rank``'s input: small integers in float32, so every sum is exact."""
    return ((np.arange(count, dtype=np.int64) * 7 + rank * 13) % 101).astype(np.float32)


def expected(op: str, rank: int, n: int, send_count: int) -> np.ndarray:
    xs = [inputs(op, r, send_count) for r in range(n)]
    if op == "all_reduce":
        return np.sum(xs, axis=0, dtype=np.float32)
    if op == "all_gather":
        return np.concatenate(xs)
    if op == "reduce_scatter":
        part = send_count // n
        return np.sum(xs, axis=0, dtype=np.float32)[rank * part : (rank + 1) * part]
    if op == "all_to_all":
        part = send_count // n
        return np.concatenate([x[rank * part : (rank + 1) * part] for x in xs])
    return xs[0]  # broadcast from rank 0


MAX_ITERS = 500


def iters_for(size: int, budget_bytes: int) -> int:
    return int(max(3, min(MAX_ITERS, budget_bytes // max(size, 1))))


def warmup(iters: int) -> int:
    """Untimed calls before the timed ones (besides the checked call)."""
    return max(1, iters // 10)


class Ops:
    """How one backend runs a collective: ``alloc(np_array) -> buffer``, ``run(op, send,
    recv)``, ``sync()`` (host waits for queued work), ``host(buffer) -> numpy``,
    ``barrier()``, ``allmax(float) -> float``."""

    alloc: Callable[[np.ndarray], Any]
    run: Callable[[str, Any, Any], None]
    sync: Callable[[], None]
    host: Callable[[Any], np.ndarray]
    barrier: Callable[[], None]
    allmax: Callable[[float], float]


def measure(o: Ops, rank: int, n: int, ops: List[str], sizes: List[int], budget: int) -> List[Dict[str, Any]]:
    rows = []
    for op in ops:
        for size in sizes:
            sc, rc = counts(op, size, n)
            x = inputs(op, rank, sc)
            if op == "broadcast" and rank != 0:
                x = np.zeros(sc, np.float32)
            send = o.alloc(x)
            inplace = op in ("broadcast", "all_reduce")  # torch's shape: both in place (MPI_IN_PLACE for mpi4py)
            recv = send if inplace else o.alloc(np.zeros(rc, np.float32))
            o.run(op, send, recv)
            o.sync()
            ok = bool(np.array_equal(o.host(recv), expected(op, rank, n, sc)))
            iters = iters_for(size, budget)
            for _ in range(warmup(iters)):
                o.run(op, send, recv)
            o.sync()
            o.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                o.run(op, send, recv)
            o.sync()
            t = o.allmax((time.perf_counter() - t0) / iters)
            ok = o.allmax(0.0 if ok else 1.0) == 0.0
            nbytes = 4 * max(sc, rc)
            algbw = nbytes / t / 1e9
            rows.append({"op": op, "size": nbytes, "count": max(sc, rc), "time_us": t * 1e6, "algbw_gbps": algbw,
                         "busbw_gbps": algbw * BUS_FACTOR[op](n), "correct": ok, "iters": iters})
    return rows


def mpi4py_ops(MPI: Any) -> Ops:
    """mpi4py's own blocking calls on numpy arrays (the baseline)."""
    c = MPI.COMM_WORLD
    o = Ops()
    o.alloc = lambda a: a.copy()
    calls = {"all_reduce": lambda s, r: c.Allreduce(MPI.IN_PLACE, r, op=MPI.SUM),
             "all_gather": lambda s, r: c.Allgather(s, r),
             "reduce_scatter": lambda s, r: c.Reduce_scatter_block(s, r, op=MPI.SUM),
             "all_to_all": lambda s, r: c.Alltoall(s, r),
             "broadcast": lambda s, r: c.Bcast(r, root=0)}
    o.run = lambda op, s, r: calls[op](s, r)
    o.sync = lambda: None
    o.host = lambda a: a
    o.barrier = c.Barrier
    o.allmax = lambda v: c.allreduce(v, op=MPI.MAX)
    return o


def npurt_ops(allmax: Callable[[float], float]) -> Ops:
    """The current ``npurt.distributed`` process group on DeviceArrays."""
    import npurt
    import npurt.distributed as dist

    o = Ops()
    o.alloc = lambda a: npurt.to_device(a)
    calls = {"all_reduce": lambda s, r: dist.all_reduce(r),
             "all_gather": lambda s, r: dist.all_gather_into_tensor(r, s),
             "reduce_scatter": lambda s, r: dist.reduce_scatter_tensor(r, s),
             "all_to_all": lambda s, r: dist.all_to_all_single(r, s),
             "broadcast": lambda s, r: dist.broadcast(r, 0)}
    o.run = lambda op, s, r: calls[op](s, r)
    o.sync = lambda: npurt.current_stream().synchronize()
    o.host = lambda a: a.to_host()
    o.barrier = lambda: dist.barrier()
    o.allmax = allmax
    return o

