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


def test_the_native_rule_refuses_codes_it_does_not_know():
    f32 = ops.DTYPES["float32"][0]
    assert _npurt._mpi_one_phase(small.KINDS["all_reduce"], f32, 16, 4, small.MAX_EAGER)
    for kind in (small.KINDS["send"], small.KINDS["recv"], 0, 99):
        assert not _npurt._mpi_one_phase(kind, f32, 16, 4, small.MAX_EAGER), kind
    assert not _npurt._mpi_one_phase(small.KINDS["all_reduce"], 99, 16, 4, small.MAX_EAGER)
