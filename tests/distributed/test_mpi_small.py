"""Which calls take the ``mpi`` backend's one-phase path (``_mpi_small.eligible``), at its
limits. The protocol itself is native (``collective/mpi``: its Rust tests simulate the
exchange; the mpirun jobs of ``test_mpi.py`` run every collective, op and dtype on it
between real processes against numpy, with desync, timeouts and failures)."""

from __future__ import annotations

from npurt import _npurt
from npurt.distributed import _mpi_ops as ops
from npurt.distributed import _mpi_small as small


def test_which_calls_take_the_one_phase_path(monkeypatch):
    lim = small.MAX_EAGER
    # up to the limit when the data phase would run in Python (float16 folds, AVG)...
    assert small.eligible("all_reduce", "float16", lim // 2, 4, lim)
    assert not small.eligible("all_reduce", "float16", lim // 2 + 1, 4, lim)
    assert small.eligible("all_reduce", "float32", lim // 4, 4, lim, ops.AVG)
    # ...else, when every rank has a core, to where two phases win (per kind, bytes per peer:
    # collective::mpi::one_phase); ranks sharing cores keep the limit
    assert small.eligible("all_reduce", "float32", 8192, 4, lim, spread=True)
    assert not small.eligible("all_reduce", "float32", 8193, 4, lim, spread=True)
    assert small.eligible("all_reduce", "float32", lim // 4, 4, lim, spread=False)
    fit = small.EAGER_FIT // 4  # the copy kinds: while a message fits MPI's eager size
    assert 900 < fit < 1024
    assert small.eligible("all_gather", "float32", fit, 4, lim, spread=True)
    assert not small.eligible("all_gather", "float32", fit + 1, 4, lim, spread=True)
    assert small.eligible("broadcast", "float32", fit, 4, lim, spread=True)
    assert not small.eligible("broadcast", "float32", fit + 1, 4, lim, spread=True)
    assert small.eligible("all_gather", "float32", lim // 4, 4, lim)
    # reduce_scatter / all_to_all send each peer its chunk: the input may be n times larger
    assert small.eligible("reduce_scatter", "float32", 4 * lim // 4, 4, lim)
    assert not small.eligible("reduce_scatter", "float32", 4 * lim // 4 + 4, 4, lim)
    assert small.eligible("all_to_all", "float32", 4 * fit, 4, lim, spread=True)
    assert not small.eligible("all_to_all", "float32", 4 * fit + 4, 4, lim, spread=True)
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


def test_the_native_rule_refuses_codes_it_does_not_know():
    f32 = ops.DTYPES["float32"][0]
    assert _npurt._mpi_one_phase(small.KINDS["all_reduce"], f32, 16, ops.SUM, 4, small.MAX_EAGER, True)
    for kind in (small.KINDS["send"], small.KINDS["recv"], 0, 99):
        assert not _npurt._mpi_one_phase(kind, f32, 16, ops.SUM, 4, small.MAX_EAGER, True), kind
    assert not _npurt._mpi_one_phase(small.KINDS["all_reduce"], 99, 16, ops.SUM, 4, small.MAX_EAGER, True)
    assert not _npurt._mpi_one_phase(small.KINDS["all_reduce"], f32, 16, 99, 4, small.MAX_EAGER, True)  # unknown op


def test_which_two_phase_calls_run_their_data_phase_natively():
    """``collective::mpi::native_data``: MPI's own calls on the arrays, except what only the
    Python data phase does (float16 / bfloat16 folds, AVG's division, counts over an int)."""
    k, d = small.KINDS, {name: v[0] for name, v in ops.DTYPES.items()}
    native = _npurt._mpi_native_data
    assert native(k["all_reduce"], d["float32"], 1 << 20, ops.SUM, 0, 2)
    assert native(k["reduce_scatter"], d["int8"], 1 << 20, ops.MAX, 0, 4)
    assert not native(k["all_reduce"], d["float16"], 1 << 20, ops.SUM, 0, 2)
    assert not native(k["reduce"], d["bfloat16"], 1 << 20, ops.MIN, 0, 2)
    assert not native(k["all_reduce"], d["float32"], 1 << 20, ops.AVG, 0, 2)
    # byte movers: any dtype (and the op, which the header does not carry, does not matter)
    assert native(k["all_gather"], d["float16"], 1 << 20, ops.AVG, 0, 3)
    assert native(k["broadcast"], d["bfloat16"], 1 << 20, ops.SUM, 2, 3)
    assert not native(k["broadcast"], d["float32"], 16, ops.SUM, 3, 3)  # no such root
    assert not native(k["all_to_all"], d["float64"], 1 << 28, ops.SUM, 0, 2)  # 2 GiB: over an int count
    assert not native(k["send"], d["float32"], 16, ops.SUM, 0, 2)
    assert not native(k["all_reduce"], d["float32"], 16, ops.SUM, 0, 1)
    assert not native(k["all_reduce"], 99, 16, ops.SUM, 0, 2) and not native(99, d["float32"], 16, ops.SUM, 0, 2)
