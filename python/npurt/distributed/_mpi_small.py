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

The runtime runs this protocol in native code (``npurt_core::collective::mpi``: ``plan.rs``
builds the same header bytes and messages and folds in the same order; ``_MpiExchange``):
:func:`messages`, :func:`header_only` and :func:`finish` are its Python statement, which
``tests/distributed/test_mpi_small.py`` checks against numpy (and the native results are
checked against, bitwise, in the mpirun jobs).
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import _mpi_ops as ops

MAX_EAGER = 64 * 1024  # bytes of payload per peer, at most (the receive buffers' size)
MAX_RANKS = 16  # larger groups: n - 1 copies of an all_reduce's input cost more than MPI's algorithms
HEADER_BYTES = 64  # 8 x int64 (Call.header)
_PER_PEER_CHUNK = ("reduce_scatter", "all_to_all")
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
    return HEADER_BYTES + (MAX_EAGER if 1 < n <= MAX_RANKS else 0)


def peer_bytes(kind: str, dtype: str, count: int, n: int) -> int:
    """Payload bytes per peer of a collective with header ``count`` (see ``hccl_count``;
    reduce_scatter / all_to_all: the whole input) in a group of ``n`` ranks."""
    if kind == "barrier":
        return 0
    elems = count // n if kind in _PER_PEER_CHUNK else count
    return elems * ops.DTYPES[dtype][2]


def eligible(kind: str, dtype: str, count: int, n: int, limit: int) -> bool:
    """Whether a call takes the one-phase path (the same answer on every rank whose
    header is the same: only header fields, the group size and ``limit`` decide)."""
    if n < 2 or n > MAX_RANKS or limit <= 0 or kind in ("send", "recv"):
        return False
    return peer_bytes(kind, dtype, count, n) <= limit


_FOLD = {ops.SUM: np.add, ops.AVG: np.add, ops.PROD: np.multiply, ops.MAX: np.maximum, ops.MIN: np.minimum}


def messages(c: Any, rank: int, n: int, outbox: np.ndarray, inbox: np.ndarray) -> List[Tuple[int, np.ndarray]]:
    """``(peer, message)`` for every peer: the header, then what the peer needs. This
    rank's own header and part go to its ``inbox`` row, where :func:`finish` reads every
    rank's (so they are there even when the input overlaps the output); a message every
    peer gets is that row itself, per-peer chunks are ``outbox`` rows."""
    own = inbox[rank]
    own[:HEADER_BYTES] = c.header().view(np.uint8)
    head = own[:HEADER_BYTES]
    peers = [p for p in range(n) if p != rank]
    k = c.kind
    if k in _PER_PEER_CHUNK:  # reduce_scatter, all_to_all: chunk p to peer p
        chunk = peer_bytes(k, c.dtype, c.count, n)
        src = np.frombuffer(c.send, np.uint8)
        own[HEADER_BYTES : HEADER_BYTES + chunk] = src[rank * chunk : (rank + 1) * chunk]
        out = []
        for i, p in enumerate(peers):
            row = outbox[i, : HEADER_BYTES + chunk]
            row[:HEADER_BYTES] = head
            row[HEADER_BYTES:] = src[p * chunk : (p + 1) * chunk]
            out.append((p, row))
        return out
    payload = c.send if k in ("all_reduce", "all_gather", "reduce") else c.recv if k == "broadcast" and rank == c.root else b""
    end = HEADER_BYTES + len(payload)
    if len(payload):
        own[HEADER_BYTES:end] = np.frombuffer(payload, np.uint8)
    row = own[:end]
    if k == "reduce":  # the input to the root (a root sends every peer the header alone)
        return [(p, row if p == c.root else head) for p in peers]
    return [(p, row) for p in peers]


def header_only(c: Any, rank: int, n: int, inbox: np.ndarray) -> List[Tuple[int, np.ndarray]]:
    """The two-phase path's first messages: the header alone (from this rank's inbox row)."""
    head = inbox[rank, :HEADER_BYTES]
    head[:] = c.header().view(np.uint8)
    return [(p, head) for p in range(n) if p != rank]


def finish(c: Any, rank: int, n: int, inbox: np.ndarray) -> None:
    """Completes the collective from the ranks' parts (``inbox`` row p: rank p's message,
    this rank's own included; headers already checked equal, so every part has the
    expected size)."""
    k = c.kind
    if k == "barrier" or (k == "reduce" and rank != c.root):
        return
    chunk = peer_bytes(k, c.dtype, c.count, n)
    parts = inbox[:, HEADER_BYTES : HEADER_BYTES + chunk]
    out = np.frombuffer(c.recv, np.uint8)
    if k == "broadcast":
        if rank != c.root:
            out[:] = parts[c.root]
    elif k in ("all_gather", "all_to_all"):
        out.reshape(n, chunk)[:] = parts
    elif ops.host_reduced(c.dtype, c.op):  # all_reduce, reduce, reduce_scatter
        out[:chunk] = ops.fold_ranks(list(parts.view(np.uint16)), c.dtype, c.op).view(np.uint8)
    else:
        fold(parts.view(c.dtype), c.op, out[:chunk].view(c.dtype))


def fold(parts: np.ndarray, op: int, out: np.ndarray) -> None:
    """``out = ((parts[0] ∘ parts[1]) ∘ parts[2]) ∘ ...`` in the parts' dtype (rank order;
    integers wrap, floats overflow to inf quietly, as MPI's reductions do)."""
    if out.dtype.kind == "f":
        with np.errstate(all="ignore"):
            _fold(parts, op, out)
    else:  # (integer arrays wrap without a warning)
        _fold(parts, op, out)


def _fold(parts: np.ndarray, op: int, out: np.ndarray) -> None:
    f = _FOLD[op]
    f(parts[0], parts[1], out=out)
    for i in range(2, len(parts)):
        f(out, parts[i], out=out)
    if op == ops.AVG:
        ops.divide_avg(out, len(parts))
