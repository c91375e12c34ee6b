"""The ``mpi`` backend's collective header (``Call``, ``describe``) and its one-phase path
for small collectives, where the header rides on the data.

A collective whose payload per peer is at most :func:`eager_limit` bytes (64 KiB by
default, ``NPURT_MPI_EAGER_BYTES`` lowers it, 0 turns the path off; groups of at most
:data:`MAX_RANKS` ranks) makes one exchange instead of two: each rank sends every peer one
message, its 64-byte header followed by the bytes that peer needs (all_reduce: the whole
input; broadcast: the root's buffer; reduce: the input, to the root only; all_gather: the
input; reduce_scatter / all_to_all: the peer's chunk; barrier and the ranks that have
nothing for a peer: the header alone), then completes the collective locally — copies, or
a fold in rank order for the reductions (``((x0 ∘ x1) ∘ x2) ∘ ...``, the ``local`` /
``shm`` order; float16 / bfloat16 accumulate in float32 and round once).

Desync detection is unchanged: the messages are received into per-peer buffers large
enough for any header-plus-payload (the two-phase path receives its headers there too),
so whatever the others called — another collective, another size, the other path — each
rank gets every peer's header and compares them all (``MpiComm._exchange``).
Whether a call takes this path is a function of its header and the group size only, so
ranks whose headers agree took the same path. Timeouts name the peers whose message has
not come; abort notices and ULFM failures are handled by the same wait loop.

The protocol itself (the messages, the header check, the local completion and its fold)
runs in native code only (``npurt_core::collective::mpi``: ``plan.rs``, ``exchange.rs``;
``_MpiExchange``), tested there and through the mpirun jobs; this module keeps the header
as Python reads it in error messages and the rule of which calls take the path.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .. import _npurt
from . import _mpi_ops as ops

MAX_EAGER = _npurt._MPI_MAX_EAGER  # bytes of payload per peer, at most (the receive rows' size)
EAGER_FIT = _npurt._MPI_EAGER_FIT  # payload bytes per peer in one message of MPI's shared-memory eager size
MAX_RANKS = _npurt._MPI_MAX_RANKS  # the largest group on the one-phase path
HEADER_BYTES = 64  # 8 x int64 (Call.header)
KINDS = {"all_reduce": 1, "broadcast": 2, "reduce": 3, "all_gather": 4, "reduce_scatter": 5,
         "all_to_all": 6, "barrier": 7, "send": 8, "recv": 9}
KIND_NAMES = {v: k for k, v in KINDS.items()}
_REDUCING = ("all_reduce", "reduce", "reduce_scatter")
_ROOTED = ("broadcast", "reduce")
_MAGIC = 0x6E707572


class Call:
    """One collective as every rank describes it (the header) plus this rank's buffers."""

    __slots__ = ("kind", "seq", "dtype", "count", "op", "root", "send", "recv", "peer", "timeout_s", "eager", "arrays")

    def __init__(self, kind: str, seq: int, dtype: str, count: int, op: int, root: int,
                 send: Optional[memoryview], recv: Optional[memoryview], peer: int, timeout_s: float) -> None:
        self.kind, self.seq, self.dtype, self.count = kind, seq, dtype, count
        self.op, self.root, self.send, self.recv, self.peer, self.timeout_s = op, root, send, recv, peer, timeout_s
        self.eager = False  # the one-phase path (_mpi_small)
        self.arrays: Tuple[Any, Any] = (None, None)  # the native arrays behind send / recv (the native exchange's)

    def label(self) -> str:
        """``all_reduce(float32 x 4, sum)``: the collective as errors name it."""
        extra = f", {ops.OP_NAMES.get(self.op, self.op)}" if self.kind in _REDUCING else ""
        if self.kind in _ROOTED:
            extra += f", root {self.root}"
        elif self.kind in ("send", "recv"):
            extra += f", {'to' if self.kind == 'send' else 'from'} {self.peer}"
        return f"{self.kind}({self.dtype} x {self.count}{extra})"

    def header(self) -> np.ndarray:
        op = self.op if self.kind in _REDUCING else -1
        root = self.root if self.kind in _ROOTED else -1
        return np.array([_MAGIC, self.seq, KINDS[self.kind], ops.DTYPES[self.dtype][0], self.count, op, root,
                         int(self.eager)],
                        dtype=np.int64)


def describe(h: Sequence[int]) -> str:
    kind = KIND_NAMES.get(int(h[2]), f"kind {int(h[2])}")
    dt = ops.NAMES_BY_CODE.get(int(h[3]), f"dtype {int(h[3])}")
    s = f"{kind}({dt}[{int(h[4])}]"
    if int(h[5]) >= 0:
        s += f", op={ops.OP_NAMES.get(int(h[5]), int(h[5]))}"
    if int(h[6]) >= 0:
        s += f", root={int(h[6])}"
    return s + f") at #{int(h[1])}"


def eager_limit() -> int:
    """``NPURT_MPI_EAGER_BYTES`` (capped at :data:`MAX_EAGER`), else :data:`MAX_EAGER`."""
    v = os.environ.get("NPURT_MPI_EAGER_BYTES", "")
    try:
        return max(0, min(MAX_EAGER, int(v))) if v else MAX_EAGER
    except ValueError:
        return MAX_EAGER


def inbox_bytes(n: int) -> int:
    """Bytes of each per-peer receive buffer of a group of ``n`` ranks: room for any
    header plus payload a peer may send (the header alone when the path is off)."""
    return int(_npurt._mpi_inbox_bytes(n))


def native_data(c: Call, n: int) -> bool:
    """Whether a two-phase call's data phase runs natively too (``collective::mpi::
    native_data``: header fields and the group size only): everything but the float16 /
    bfloat16 and AVG reductions (``_mpi_data``'s host folds) and buffers over 2 GiB."""
    return bool(_npurt._mpi_native_data(KINDS[c.kind], ops.DTYPES[c.dtype][0], c.count, c.op, max(c.root, 0), n))


def eligible(kind: str, dtype: str, count: int, n: int, limit: int, op: int = ops.SUM, spread: bool = False) -> bool:
    """Whether a call takes the one-phase path: the native rule (``collective::mpi::
    one_phase``, which the blocking one-call path runs too): the same answer on every
    rank whose header is the same (only header fields, the group size and ``limit``).
    Below ``limit``, when ``spread`` (every rank of the group has a core of its own),
    calls whose data phase runs natively take two phases from a size per kind: broadcast,
    all_gather and all_to_all once a message no longer fits Open MPI's shared-memory eager
    size (``collective::mpi::EAGER_FIT``), all_reduce from 32 KiB per peer."""
    if kind in ("send", "recv") or limit <= 0:
        return False
    return bool(_npurt._mpi_one_phase(KINDS[kind], ops.DTYPES[dtype][0], count, op, n, limit, spread))
