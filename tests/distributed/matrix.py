"""The collective × op × dtype matrix one rank runs, checked against numpy (each rank
rebuilds every rank's inputs from the seed, so it checks its own results).

The reference follows npurt's documented order: element i is reduced over the ranks in
rank order; float16/bfloat16 accumulate in float32 and round once; integers wrap; AVG is
the sum divided by the world size (integers truncate). So floats compare bitwise.
"""

from __future__ import annotations

import functools
from typing import List

import npurt
import npurt.distributed as dist
import numpy as np

OPS = [dist.ReduceOp.SUM, dist.ReduceOp.PROD, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.AVG]
DTYPES = ["float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8"]
N = 6  # elements per rank chunk (small: 2 cores); every collective takes the eager path
# Elements per chunk that send every collective of every dtype down the general path
# (send side above the engine's eager limit).
N_GENERAL = npurt._npurt.COLLECTIVE_EAGER_BYTES + 5


def bf16_round(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (round to nearest even), as float32."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32)
    r = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)) << np.uint32(16)
    return r.astype(np.uint32).view(np.float32)


def data(rank: int, n: int, dtype: str, seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s input (bfloat16: float32 values that bfloat16 holds exactly)."""
    rng = np.random.default_rng(seed * 1000 + rank)
    if dtype == "bfloat16":
        return bf16_round(rng.uniform(-2, 2, n).astype(np.float32))
    if dtype.startswith("float"):
        return rng.uniform(-2, 2, n).astype(dtype)
    lo = 0 if dtype.startswith("uint") else -5
    return rng.integers(lo, 6, n).astype(dtype)


def reference(xs: List[np.ndarray], op: int, bf16: bool = False) -> np.ndarray:
    dt = xs[0].dtype
    acc_t = np.float32 if dt == np.float16 else dt.type
    f = {0: np.add, 1: np.multiply, 2: np.maximum, 3: np.minimum, 4: np.add}[int(op)]
    with np.errstate(over="ignore"):
        acc = functools.reduce(lambda a, b: f(a, b.astype(acc_t)), xs[1:], xs[0].astype(acc_t))
        if int(op) == 4:
            n = len(xs)
            if np.issubdtype(acc_t, np.floating):
                acc = (acc / acc_t(n)).astype(acc_t)
            else:
                acc = (np.sign(acc) * (np.abs(acc) // n)).astype(acc_t)
    return bf16_round(acc) if bf16 else acc.astype(dt)


def check(name: str, got, want, failures: List[str]) -> None:
    g = np.asarray(got)
    if g.shape != want.shape:
        failures.append(f"{name}: shape {g.shape} want {want.shape}")
    elif not np.array_equal(g.view(np.uint8), np.ascontiguousarray(want).view(np.uint8)):
        bad = np.flatnonzero(g.view(np.uint8) != np.ascontiguousarray(want).view(np.uint8)) // g.itemsize
        i = np.unique(bad)[:8]
        failures.append(f"{name}: {len(np.unique(bad))} elements differ, e.g. at {i.tolist()}: got {g[i].tolist()} want {want[i].tolist()}")


def run_matrix(rank: int, world: int, dtypes=DTYPES, ops=OPS, seed: int = 0, n: int = N) -> List[str]:
    """Runs every collective with ``n`` elements per rank chunk; returns the failures
    (empty: all matched numpy)."""
    fails: List[str] = []
    last = world - 1
    for dt in dtypes:
        bf = dt == "bfloat16"
        xs = [data(r, n, dt, seed) for r in range(world)]
        bigs = [data(r + 100, n * world, dt, seed) for r in range(world)]
        dev = dist.group_of(None).device
        for op in ops:
            t = npurt.to_device(xs[rank], device=dev, dtype=dt)
            dist.all_reduce(t, op=op)
            check(f"all_reduce {dt} {op.name}", t, reference(xs, op, bf), fails)
            t = npurt.to_device(xs[rank], device=dev, dtype=dt)
            dist.reduce(t, dst=last, op=op)
            if rank == last:
                check(f"reduce {dt} {op.name}", t, reference(xs, op, bf), fails)
            o = npurt.empty((n,), dt, device=dev)
            dist.reduce_scatter_tensor(o, npurt.to_device(bigs[rank], device=dev, dtype=dt), op=op)
            want = reference([b[rank * n:(rank + 1) * n] for b in bigs], op, bf)
            check(f"reduce_scatter_tensor {dt} {op.name}", o, want, fails)
        t = npurt.to_device(xs[rank], device=dev, dtype=dt)
        dist.broadcast(t, src=last)
        check(f"broadcast {dt}", t, xs[last], fails)
        o = npurt.empty((n * world,), dt, device=dev)
        dist.all_gather_into_tensor(o, npurt.to_device(xs[rank], device=dev, dtype=dt))
        check(f"all_gather_into_tensor {dt}", o, np.concatenate(xs), fails)
        outs = [npurt.empty((n,), dt, device=dev) for _ in range(world)]
        dist.all_gather(outs, npurt.to_device(xs[rank], device=dev, dtype=dt))
        for j in range(world):
            check(f"all_gather[{j}] {dt}", outs[j], xs[j], fails)
        o = npurt.empty((n * world,), dt, device=dev)
        dist.all_to_all_single(o, npurt.to_device(bigs[rank], device=dev, dtype=dt))
        check(f"all_to_all_single {dt}", o, np.concatenate([b[rank * n:(rank + 1) * n] for b in bigs]), fails)
        ins = [npurt.to_device(bigs[rank][j * n:(j + 1) * n], device=dev, dtype=dt) for j in range(world)]
        outs = [npurt.empty((n,), dt, device=dev) for _ in range(world)]
        dist.all_to_all(outs, ins)
        for j in range(world):
            check(f"all_to_all[{j}] {dt}", outs[j], bigs[j][rank * n:(rank + 1) * n], fails)
        o = npurt.empty((n,), dt, device=dev)
        dist.reduce_scatter(o, [npurt.to_device(bigs[rank][j * n:(j + 1) * n], device=dev, dtype=dt) for j in range(world)])
        check(f"reduce_scatter {dt}", o, reference([b[rank * n:(rank + 1) * n] for b in bigs], dist.ReduceOp.SUM, bf), fails)
        peer = rank ^ 1
        if peer < world:
            t = npurt.to_device(xs[rank], device=dev, dtype=dt)
            if rank % 2 == 0:
                dist.send(t, dst=peer)
                dist.recv(t, src=peer)
            else:
                r = npurt.empty((n,), dt, device=dev)
                dist.recv(r, src=peer)
                dist.send(t, dst=peer)
                check(f"recv {dt}", r, xs[peer], fails)
            if rank % 2 == 0:
                check(f"send/recv {dt}", t, xs[peer], fails)
    dist.barrier()
    return fails
