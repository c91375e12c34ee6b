"""The ``mpi`` backend's one-phase path (``_mpi_small``) without MPI: every rank's messages
are built, delivered into the receivers' inboxes as MPI would, and each rank completes the
collective from its inbox; results are checked against numpy. Which calls take the path
(``eligible``) is checked at its limits. The mpirun jobs (``test_mpi.py``) run the path
between real processes, with desync, timeouts and failures."""

from __future__ import annotations

import numpy as np
import pytest
from npurt.distributed import _mpi_ops as ops
from npurt.distributed import _mpi_small as small

KINDS = ["all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "barrier"]
OPS = {"sum": ops.SUM, "prod": ops.PROD, "max": ops.MAX, "min": ops.MIN, "avg": ops.AVG}


def header_count(kind: str, elems: int, n: int) -> int:
    """``Call.count`` as ``MpiBackend`` sets it (reduce_scatter / all_to_all: the input's)."""
    return 0 if kind == "barrier" else elems


def simulate(kind: str, dtype: str, op: int, root: int, inputs: list, out_elems: int, inplace: bool) -> list:
    """Runs ``kind`` on len(inputs) simulated ranks; returns each rank's output array."""
    n = len(inputs)
    row = small.inbox_bytes(n)
    outs = [x.copy() if inplace else np.zeros(out_elems, x.dtype) for x in inputs]
    calls, inboxes = [], []
    for r, x in enumerate(inputs):
        send = memoryview(outs[r].view(np.uint8)) if inplace else memoryview(x.view(np.uint8))
        recv = send if inplace else memoryview(outs[r].view(np.uint8))
        c = small.Call(kind, 3, dtype, header_count(kind, x.size, n), op, root, send, recv, -1, 10.0)
        c.eager = True
        calls.append(c)
        inboxes.append(np.full((n, row), 0xEE, np.uint8))  # garbage where nothing came
    sent = [small.messages(c, r, n, np.zeros((n - 1, row), np.uint8), inboxes[r]) for r, c in enumerate(calls)]
    for r, msgs in enumerate(sent):
        assert sorted(p for p, _ in msgs) == [p for p in range(n) if p != r]
        for p, m in msgs:
            assert len(m) <= row and np.array_equal(m[: small.HEADER_BYTES].view(np.int64), calls[r].header())
            inboxes[p][r, : len(m)] = m  # what MPI delivers: the message, the rest untouched
    for r, c in enumerate(calls):
        small.finish(c, r, n, inboxes[r])
    return outs


def reference(xs: list, op: str, dtype: str) -> np.ndarray:
    f = {"sum": np.add, "avg": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    acc = xs[0].astype(np.float64)
    for x in xs[1:]:
        acc = f(acc, x.astype(np.float64))
    if op == "avg":
        acc = acc / len(xs) if dtype.startswith("float") else np.trunc(acc / len(xs))
    return acc.astype(dtype)


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int64", "float64"])
@pytest.mark.parametrize("opname", list(OPS))
def test_reductions_match_numpy(n, dtype, opname):
    rng = np.random.default_rng(n)
    k = 6
    xs = [rng.integers(-3, 4, k * n).astype(dtype) for _ in range(n)]
    want = reference(xs, opname, dtype)
    outs = simulate("all_reduce", dtype, OPS[opname], 0, xs, k * n, inplace=True)
    for r in range(n):
        assert np.array_equal(outs[r], want), (r, outs[r], want)
    root = n - 1
    outs = simulate("reduce", dtype, OPS[opname], root, xs, k * n, inplace=False)
    assert np.array_equal(outs[root], want)
    assert all(not outs[r].any() for r in range(n) if r != root)  # the others' outputs untouched
    outs = simulate("reduce_scatter", dtype, OPS[opname], 0, xs, k, inplace=False)
    for r in range(n):
        assert np.array_equal(outs[r], want[r * k : (r + 1) * k])


@pytest.mark.parametrize("n", [2, 3, 4])
def test_data_movement_matches_numpy(n):
    k = 5
    xs = [np.arange(k * n, dtype=np.int32) + 100 * r for r in range(n)]
    for root in range(n):
        outs = simulate("broadcast", "int32", 0, root, xs, k * n, inplace=True)
        assert all(np.array_equal(o, xs[root]) for o in outs)
    mine = [x[:k] for x in xs]
    outs = simulate("all_gather", "int32", 0, 0, mine, k * n, inplace=False)
    assert all(np.array_equal(o, np.concatenate(mine)) for o in outs)
    outs = simulate("all_to_all", "int32", 0, 0, xs, k * n, inplace=False)
    for r in range(n):
        assert np.array_equal(outs[r], np.concatenate([x[r * k : (r + 1) * k] for x in xs]))
    outs = simulate("barrier", "uint8", 0, 0, [np.zeros(0, np.uint8)] * n, 0, inplace=False)
    assert all(o.size == 0 for o in outs)


def test_float32_all_reduce_folds_in_rank_order_bitwise():
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(999).astype(np.float32) for _ in range(4)]
    outs = simulate("all_reduce", "float32", ops.SUM, 0, xs, 999, inplace=True)
    want = ((xs[0] + xs[1]) + xs[2]) + xs[3]
    assert all(np.array_equal(o, want) for o in outs)


def test_which_calls_take_the_one_phase_path(monkeypatch):
    lim = small.MAX_EAGER
    assert small.eligible("all_reduce", "float32", lim // 4, 4, lim)
    assert not small.eligible("all_reduce", "float32", lim // 4 + 1, 4, lim)
    # reduce_scatter / all_to_all send each peer its chunk: the input may be n times larger
    assert small.eligible("reduce_scatter", "float32", 4 * lim // 4, 4, lim)
    assert not small.eligible("all_to_all", "float32", 4 * lim // 4 + 4, 4, lim)
    assert small.eligible("barrier", "uint8", 0, 4, lim)
    assert not small.eligible("all_reduce", "float32", 1, small.MAX_RANKS + 1, lim)  # large groups
    assert not small.eligible("all_reduce", "float32", 1, 1, lim) and not small.eligible("send", "int8", 1, 2, lim)
    assert not small.eligible("all_reduce", "float32", 1, 4, 0)
    assert small.inbox_bytes(4) == small.HEADER_BYTES + lim and small.inbox_bytes(64) == small.HEADER_BYTES
    monkeypatch.setenv("NPURT_MPI_EAGER_BYTES", "0")
    assert small.eager_limit() == 0
    monkeypatch.setenv("NPURT_MPI_EAGER_BYTES", str(10 * lim))
    assert small.eager_limit() == lim  # capped: the receive buffers hold no more
    monkeypatch.setenv("NPURT_MPI_EAGER_BYTES", "4096")
    assert small.eager_limit() == 4096
    monkeypatch.delenv("NPURT_MPI_EAGER_BYTES")
    assert small.eager_limit() == lim
