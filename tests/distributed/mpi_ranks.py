"""One rank of an mpirun test job (``mpirun -np N python mpi_ranks.py MODE``): runs on the
``mpi`` backend and prints one line per result, ``RESULT {json}``, which the tests parse.

Modes: ``all`` (every collective × op × dtype against numpy, stream ordering, async work,
subgroups, p2p), ``all_nbc`` (the same with all_gather on ``Iallgather``), ``sleep`` (rank 1 sleeps past the deadline), ``desync`` (rank 0 calls
all_reduce, the others broadcast), ``size`` (ranks call all_reduce with different sizes),
``mixed`` (rank 0's all_reduce is small — one phase — the others' large — two phases),
``pathdiff`` (rank 1 turns the one-phase path off: same call, different paths), ``kill``
(rank 1 SIGKILLs itself), ``exit`` (rank 1 exits without destroy_process_group). Under
``NPURT_MPI_EAGER_BYTES=0`` every collective takes the two-phase path; each result line
counts the collectives that took the one-phase path (``eager``).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback

import npurt
import npurt.distributed as dist
import numpy as np
from npurt.distributed import _mpi_comm, _mpi_data, _mpi_ops

EAGER = [0]  # collectives completed on the one-phase path by `MpiComm.run` (+ `native()`'s)
ON_CALLER: list = []  # per collective `MpiComm.run` ran: on the calling (main) thread, or queued
_run = _mpi_comm.MpiComm.run


def _recorded_run(self, c):
    ON_CALLER.append(threading.current_thread() is threading.main_thread())
    _run(self, c)
    EAGER[0] += bool(c.eager)


_mpi_comm.MpiComm.run = _recorded_run

DTYPES = ["float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8"]
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PROD, "max": dist.ReduceOp.MAX,
       "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.AVG}


def _exchange():
    """The default group's native exchange (``_MpiExchange``), or None."""
    g = dist.group_of(None) if dist.is_initialized() else None
    return getattr(getattr(getattr(g, "backend", None), "comm", None), "_x0", None)


def native() -> tuple:
    """``(on the calling thread, queued)``: the default group's one-call collectives that the
    native exchange completed (``_MpiExchange.run_sync``, which ``MpiComm.run`` never sees)."""
    x = _exchange()
    return tuple(x.stats) if x is not None else (0, 0)


def native2() -> int:
    """The default group's two-phase one-call collectives completed natively (headers and data)."""
    x = _exchange()
    return int(x.two_phase_done) if x is not None else 0


def emit(**kw) -> None:
    done, two = native(), native2()
    print("RESULT " + json.dumps({**kw, "eager": EAGER[0] + sum(done) - two, "native": sum(done) - two, "native2": two}), flush=True)


def data(dtype: str, rank: int, count: int, seed: int) -> np.ndarray:
    """Rank ``rank``'s input in float64 (values exact in every dtype; products stay small)."""
    rng = np.random.default_rng(seed * 100 + rank)
    if dtype in ("float32", "float16", "bfloat16"):
        return rng.integers(-4, 5, count).astype(np.float64) * 0.5
    lo, hi = (0, 4) if dtype == "uint8" else (-3, 4)
    return rng.integers(lo, hi, count).astype(np.float64)


def as_device(x: np.ndarray, dtype: str):
    if dtype == "bfloat16":
        return npurt.to_device(x.astype(np.float32)).astype("bfloat16")
    return npurt.to_device(x.astype(dtype))


def host(a) -> np.ndarray:
    return np.asarray(a.to_host(), dtype=np.float64)


def reference(xs, op: str, dtype: str) -> np.ndarray:
    f = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    acc = xs[0].copy()
    for x in xs[1:]:
        acc = f(acc, x)
    if op == "avg":
        acc = acc / len(xs) if dtype.startswith(("float", "bfloat")) else np.trunc(acc / len(xs))
    if dtype in ("int8", "uint8", "int32", "int64"):
        acc = acc.astype(np.int64).astype(dtype).astype(np.float64)  # wrap like the integer type
    return acc


def close(got: np.ndarray, want: np.ndarray, dtype: str) -> bool:
    if dtype == "bfloat16":
        return bool(np.allclose(got, want, rtol=1e-2, atol=1e-2))
    if dtype == "float16":
        return bool(np.allclose(got, want, rtol=2e-3, atol=2e-3))
    return bool(np.array_equal(got, want)) if not dtype.startswith("float") else bool(np.allclose(got, want, rtol=1e-6))


def check_all(r: int, n: int) -> None:
    fails, checks = [], 0

    def expect(ok: bool, what: str) -> None:
        nonlocal checks
        checks += 1
        if not ok:
            fails.append(what)

    count = 37
    for dtype in DTYPES:
        for name, op in OPS.items():
            xs = [data(dtype, k, count, 1) for k in range(n)]
            t = as_device(xs[r], dtype)
            dist.all_reduce(t, op=op)
            expect(close(host(t), reference(xs, name, dtype), dtype), f"all_reduce {name} {dtype}")
            t = as_device(xs[r], dtype)
            root = (n - 1) % n
            dist.reduce(t, dst=root, op=op)
            if r == root:
                expect(close(host(t), reference(xs, name, dtype), dtype), f"reduce {name} {dtype}")
            xs = [data(dtype, k, count * n, 2) for k in range(n)]
            out = as_device(np.zeros(count), dtype)
            dist.reduce_scatter_tensor(out, as_device(xs[r], dtype), op=op)
            want = reference(xs, name, dtype)[r * count:(r + 1) * count]
            expect(close(host(out), want, dtype), f"reduce_scatter {name} {dtype}")
        xs = [data(dtype, k, count, 3) for k in range(n)]
        b = as_device(xs[r], dtype)
        dist.broadcast(b, src=n - 1)
        expect(close(host(b), xs[n - 1], dtype), f"broadcast {dtype}")
        g = as_device(np.zeros(count * n), dtype)
        dist.all_gather_into_tensor(g, as_device(xs[r], dtype))
        expect(close(host(g), np.concatenate(xs), dtype), f"all_gather {dtype}")
        xs = [data(dtype, k, count * n, 4) for k in range(n)]
        o = as_device(np.zeros(count * n), dtype)
        dist.all_to_all_single(o, as_device(xs[r], dtype))
        want = np.concatenate([x[r * count:(r + 1) * count] for x in xs])
        expect(close(host(o), want, dtype), f"all_to_all {dtype}")

    # float32 sums that round: one phase folds in rank order ((x0 + x1) + x2) + ..., bitwise
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(1000).astype(np.float32) for _ in range(n)]
    t = npurt.to_device(xs[r])
    dist.all_reduce(t)
    fold = xs[0].copy()
    for x in xs[1:]:
        fold = fold + x
    got = t.to_host()
    if os.environ.get("NPURT_MPI_EAGER_BYTES") == "0":  # MPI's order: close, not promised equal
        expect(bool(np.allclose(got, fold, rtol=1e-5, atol=1e-5)), "float32 all_reduce (MPI's order)")
    else:
        expect(bool(np.array_equal(got, fold)), "float32 all_reduce in rank order, bitwise")
    # float16 / bfloat16 values that round: accumulated in float32 in rank order, rounded
    # once, bitwise the Python fold's result (`fold_ranks`, the former one-phase code and the
    # two-phase path's), in place (the native one-call path when one phase)
    for dtype in ("float16", "bfloat16"):
        for name in ("sum", "avg", "prod", "max"):
            rng = np.random.default_rng(11)
            raw = [rng.standard_normal(500).astype(np.float32) * 3 for _ in range(n)]
            if dtype == "float16":
                bits = [x.astype(np.float16).view(np.uint16) for x in raw]
                vals = [b.view(np.float16).astype(np.float32) for b in bits]
            else:
                bits = [_mpi_ops._bf16_from_f32(x) for x in raw]
                vals = [(b.astype(np.uint32) << 16).view(np.float32) for b in bits]
            want = _mpi_ops.fold_ranks(bits, dtype, int(OPS[name]))
            want = (want.view(np.float16).astype(np.float64) if dtype == "float16"
                    else (want.astype(np.uint32) << 16).view(np.float32).astype(np.float64))
            t = as_device(vals[r].astype(np.float64), dtype)
            dist.all_reduce(t, op=OPS[name])
            expect(bool(np.array_equal(host(t), want)), f"{dtype} all_reduce {name} in rank order, bitwise")
    # in-place all_gather (the input is this rank's chunk of the output), both sizes
    for k in (5, 20000):
        g = npurt.to_device(np.zeros(k * n, np.float32))
        g[r * k:(r + 1) * k].copy_(npurt.to_device(np.full(k, r + 1, np.float32)))
        dist.all_gather_into_tensor(g, g[r * k:(r + 1) * k])
        expect(np.array_equal(host(g), np.repeat(np.arange(1, n + 1), k)), f"in-place all_gather x{k}")
    # a large all_reduce (two phases whatever the limit)
    big = npurt.to_device(np.full(40000, r + 1, np.int32))
    dist.all_reduce(big)
    expect(np.array_equal(host(big), np.full(40000, n * (n + 1) // 2)), "large all_reduce")

    # a burst of blocking calls behind a kernel: the first is queued, the rest run here
    burst = npurt.to_device(np.ones(64, np.int64))
    npurt.kernels.busy(0.05)
    del ON_CALLER[:]
    before = native()
    for _ in range(5):
        dist.all_reduce(burst)
    expect(np.array_equal(host(burst), np.full(64, n ** 5)), "burst behind a kernel")
    after = native()
    here = ON_CALLER.count(True) + after[0] - before[0]
    queued = ON_CALLER.count(False) + after[1] - before[1]
    expect((here, queued) == (4, 1) and ON_CALLER[:1] != [True], f"burst on the calling thread: {ON_CALLER}, native {before} -> {after}")

    # idle streams and nobody observing: the one-call path runs the exchange on this thread
    # with no task on the communication stream (the direct path); with the profiler on, the
    # collective is a task of that stream again, and the profile names it
    from npurt import profiler
    from npurt.distributed._group import _default
    cs = next(iter(_default()._streams.values()))
    d = npurt.to_device(np.full(256, r + 1, np.float32))
    host(d)
    dist.barrier()
    sub0, st0 = cs.submitted, native()
    for _ in range(3):
        dist.all_reduce(d)
    want = n * (n + 1) // 2 * n * n
    expect(cs.submitted == sub0 and native()[0] - st0[0] == 3 and np.array_equal(host(d), np.full(256, want)),
           f"direct path: {cs.submitted - sub0} tasks, native {st0} -> {native()}")
    with profiler.profile() as prof:
        dist.all_reduce(d)
        host(d)
    table = prof.key_averages().table()
    expect(cs.submitted == sub0 + 1 and "HcclAllReduce" in table and np.array_equal(host(d), np.full(256, want * n)),
           f"profiled one-call collective: {cs.submitted - sub0} tasks; {table}")

    # overlapping buffers (the rule of every backend): all_to_all never in place, refused
    # before any rank is involved, on the one-call path as on the general one
    ov = npurt.to_device(np.arange(4 * n, dtype=np.float32))
    for call in (lambda: dist.all_to_all_single(ov[n:3 * n], ov[0:2 * n]),
                 lambda: dist.all_to_all_single(ov[0:2 * n], ov[n:3 * n], async_op=True)):
        try:
            call()
            expect(False, "overlapping all_to_all ran")
        except npurt.CollectiveError as e:
            expect(e.code == 1 and "overlap" in str(e), f"overlapping all_to_all: {e}")
    expect(np.array_equal(host(ov), np.arange(4 * n)), "overlapping all_to_all left its buffers alone")

    # list forms
    lst = [npurt.zeros(5) for _ in range(n)]
    dist.all_gather(lst, npurt.to_device(np.full(5, r, np.float32)))
    expect(all(np.array_equal(host(x), np.full(5, k)) for k, x in enumerate(lst)), "all_gather list")

    # stream order: a kernel before the collective on the current stream, one after it
    s = npurt.Stream()
    with npurt.stream(s):
        base = npurt.to_device(np.full(1 << 16, r + 1, np.float32))
        y = base * 2.0
        dist.all_reduce(y)
        z = y + 1.0
    expect(np.array_equal(host(z), np.full(1 << 16, 2 * n * (n + 1) / 2 + 1)), "stream order")
    # the array's last writer is another stream, still busy: the collective waits for it
    s2 = npurt.Stream()
    npurt.kernels.busy(0.05, stream=s2)
    other = npurt.multiply(npurt.to_device(np.full(1 << 16, r + 1, np.float32)), 3.0, stream=s2)
    dist.all_reduce(other)
    expect(np.array_equal(host(other), np.full(1 << 16, 3 * n * (n + 1) / 2)), "writer on another stream")
    w = dist.all_reduce(base, async_op=True)
    expect(w.wait(timeout=30) is True and w.is_completed(), "async work")
    expect(np.array_equal(host(base), np.full(1 << 16, n * (n + 1) / 2)), "async result")

    # p2p ring
    nxt, prv = (r + 1) % n, (r - 1) % n
    got = npurt.zeros(7, dtype="int32")
    if r % 2 == 0:
        dist.send(npurt.to_device(np.full(7, r, np.int32)), dst=nxt)
        dist.recv(got, src=prv)
    else:
        dist.recv(got, src=prv)
        dist.send(npurt.to_device(np.full(7, r, np.int32)), dst=nxt)
    expect(np.array_equal(host(got), np.full(7, prv)), "send/recv ring")

    # bad sizes are typed errors at the call, before any communication
    try:
        dist.all_gather_into_tensor(npurt.zeros(3 * n + 1), npurt.zeros(3))
        expect(False, "all_gather with a wrong output size did not raise")
    except npurt.Error as e:
        expect("output must have" in str(e), f"all_gather size error: {e}")
    try:
        dist.reduce_scatter_tensor(npurt.zeros(2), npurt.zeros(2 * n, dtype="int32"))
        expect(False, "reduce_scatter with mixed dtypes did not raise")
    except npurt.Error as e:
        expect("int32" in str(e), f"reduce_scatter dtype error: {e}")

    # the native data phase's handles: wrong counts are refused (ValueError), nothing changes
    x = _exchange()
    for dtypes, ops_ in (([0] * 11, [0] * 4), ([0] * 12, [0] * 5)):
        try:
            x.set_data(0, 0, dtypes, ops_, 8)
            expect(False, f"set_data took {len(dtypes)} dtypes, {len(ops_)} ops")
        except ValueError as e:
            expect("handles" in str(e), f"set_data error: {e}")
    t = npurt.to_device(np.full(300_000, r + 1, np.float32))  # two phases, native data
    dist.all_reduce(t)
    expect(np.array_equal(host(t), np.full(300_000, n * (n + 1) / 2)), "two-phase all_reduce after set_data refusals")

    # a subgroup of the even ranks
    evens = list(range(0, n, 2))
    sub = dist.new_group(evens)
    if r in evens:
        v = npurt.to_device(np.full(3, r, np.float32))
        dist.all_reduce(v, group=sub)
        expect(np.array_equal(host(v), np.full(3, sum(evens))), "subgroup all_reduce")
        expect(dist.get_rank(sub) == evens.index(r), "subgroup rank")
    dist.barrier()
    emit(rank=r, mode="all", checks=checks, fails=fails)


def fast_case(mode: str, r: int, n: int) -> None:
    """Failures on the one-call path (blocking, no per-call timeout: ``_MpiExchange.run_sync``)
    in a group whose deadline is 1 s: ``fast_desync`` (rank 0 all_reduce, the others
    broadcast), ``fast_sleep`` (rank 1 comes 3 s late). ``py_runs``: how many collectives
    ``MpiComm.run`` ran for the failing call (0: it took the native path)."""
    g = dist.new_group(timeout=1.0)
    t = npurt.to_device(np.ones(1000, np.float32))
    for _ in range(2):  # the first call makes the group's communication stream
        dist.all_reduce(t, group=g)
    host(t)
    x = g.backend.comm._x0
    runs, done = len(ON_CALLER), x.stats
    t0 = time.monotonic()
    try:
        if mode == "fast_sleep" and r == 1:
            time.sleep(3.0)
        if mode == "fast_desync" and r != 0:
            dist.broadcast(t, src=0, group=g)
        else:
            dist.all_reduce(t, group=g)
        host(t)  # a failed collective's error is the stream's: raised where the result is read
        emit(rank=r, mode=mode, error=None, cls=None, py_runs=len(ON_CALLER) - runs)
    except npurt.Error as e:
        emit(rank=r, mode=mode, error=str(e), cls=type(e).__name__, secs=time.monotonic() - t0,
             py_runs=len(ON_CALLER) - runs, native_done=[b - a for a, b in zip(done, x.stats, strict=True)])


def hang_case(mode: str, r: int, n: int) -> None:
    t = npurt.to_device(np.ones(40000 if mode == "pathdiff" else 1000, np.float32))  # pathdiff: both paths agree
    dist.all_reduce(t)
    host(t)
    t0 = time.monotonic()
    try:
        if mode == "sleep" and r == 1:
            time.sleep(3.0)
        if mode == "kill" and r == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "exit" and r == 1:
            emit(rank=r, mode=mode, error=None, cls=None, pid=os.getpid())
            sys.exit(0)
        if mode == "desync" and r != 0:
            w = dist.broadcast(t, src=0, async_op=True, timeout=5.0)
        elif mode == "size":
            w = dist.all_reduce(npurt.zeros(100 + r), async_op=True, timeout=5.0)
        elif mode == "pathdiff":
            w = dist.all_reduce(npurt.zeros(100), async_op=True, timeout=5.0)
        elif mode == "mixed":  # 400 bytes (one phase) on rank 0, 160 KB (two phases) elsewhere
            w = dist.all_reduce(npurt.zeros(100 if r == 0 else 40000), async_op=True, timeout=5.0)
        else:
            w = dist.all_reduce(t, async_op=True, timeout=1.0)
        w.wait()
        dist.barrier(timeout=5.0)
        emit(rank=r, mode=mode, error=None, cls=None, pid=os.getpid())
    except npurt.Error as e:
        emit(rank=r, mode=mode, error=str(e), cls=type(e).__name__, secs=time.monotonic() - t0, pid=os.getpid())


def main() -> None:
    mode = sys.argv[1]
    if mode == "pathdiff" and os.environ.get("OMPI_COMM_WORLD_RANK") == "1":
        os.environ["NPURT_MPI_EAGER_BYTES"] = "0"
    if mode == "all_nbc":  # all_gather on MPI's Iallgather (groups above P2P_GATHER_MAX; read at init)
        _mpi_data.P2P_GATHER_MAX = 0
    dist.init_process_group("mpi", timeout=30.0)
    r, n = dist.get_rank(), dist.get_world_size()
    try:
        if mode in ("all", "all_nbc"):
            check_all(r, n)
        elif mode.startswith("fast_"):
            fast_case(mode, r, n)
        else:
            hang_case(mode, r, n)
    except Exception:
        emit(rank=r, mode=mode, crash=traceback.format_exc())
    if mode in ("all", "all_nbc"):
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
