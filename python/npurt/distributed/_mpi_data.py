"""The data phase of the two-phase collectives that native code does not run
(``collective/mpi/data.rs`` runs the rest with the same MPI calls, ~10 µs a call faster:
``_mpi_small.native_data``): the float16 / bfloat16 reductions (folded here), AVG (MPI's
sum, then the division) and buffers over MPI's ``int`` counts (mpi4py's large-count
calls): which non-blocking call, on which buffers, and what runs after it completes.

``start(comm, call) -> (requests, finish or None)``. Buffers are byte memoryviews of the
arrays' memory; counts are elements of ``call.dtype``.

all_gather in groups of up to :data:`P2P_GATHER_MAX` ranks is one ``Irecv`` from and one
``Isend`` to every peer (plus a local copy of the rank's own part), not ``Iallgather``:
Open MPI's non-blocking all_gather (libnbc) took 1.5-2.5x its blocking one on 2 ranks of
one host (256 KiB 19-21 / 13-14 us, 4 MiB 360-418 / 166-174 us), the point-to-point
exchange polled with ``Test`` as long as the blocking one (15-16, 164-175 us), and within
12 % of ``Iallgather`` on 4 ranks (docs/BENCH.md, "`shm` slots sized to the L2; the `mpi`
backend's all_gather").
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from .. import _npurt
from . import _mpi_ops as ops

Finish = Optional[Callable[[], None]]
P2P_GATHER_MAX = _npurt._MPI_P2P_GATHER_MAX  # (read by every group at creation: tests lower it)
_TAG_GATHER = 7105  # the data communicator's all_gather messages (send/recv use 7104)


def native_handles(MPI: Any, data: Any) -> Tuple[int, int, List[int], List[int], int]:
    """``_MpiExchange.set_data``'s arguments: the data communicator's handle, MPI_IN_PLACE,
    the MPI datatype of each HCCL code (0: none), the ops sum / prod / max / min, and the
    largest group whose all_gather is point to point (:data:`P2P_GATHER_MAX`)."""
    dtypes = [0] * len(ops.DTYPES)
    for name, (code, _attr, _size) in ops.DTYPES.items():
        dt = ops.mpi_datatype(MPI, name)
        dtypes[code] = MPI._handleof(dt) if dt is not None else 0
    hops = [MPI._handleof(ops.mpi_op(MPI, o)) for o in (ops.SUM, ops.PROD, ops.MAX, ops.MIN)]
    return MPI._handleof(data), int(MPI.IN_PLACE), dtypes, hops, P2P_GATHER_MAX


def _addr(mv: Optional[memoryview]) -> int:
    if mv is None or len(mv) == 0:
        return 0
    return np.frombuffer(mv, dtype=np.uint8).ctypes.data


def _overlap(a: Optional[memoryview], b: Optional[memoryview]) -> bool:
    if a is None or b is None or not len(a) or not len(b):
        return False
    x, y = _addr(a), _addr(b)
    return x < y + len(b) and y < x + len(a)


def _avg(c: Any, n: int) -> Finish:
    if c.op != ops.AVG:
        return None
    return lambda: ops.divide_avg(ops.numpy_view(c.recv, c.dtype), n)


def _all_gather_p2p(comm: Any, c: Any, send: memoryview) -> List[Any]:
    MPI, d, me = comm.MPI, comm.data, comm.rank
    part = len(send)
    reqs = [d.Irecv([c.recv[p * part : (p + 1) * part], MPI.BYTE], source=p, tag=_TAG_GATHER) for p in comm.peers]
    reqs += [d.Isend([send, MPI.BYTE], dest=p, tag=_TAG_GATHER) for p in comm.peers]
    c.recv[me * part : (me + 1) * part] = send
    return reqs


def start(comm: Any, c: Any) -> Tuple[List[Any], Finish]:
    MPI, d, n = comm.MPI, comm.data, comm.size
    k = c.kind
    if k == "barrier":
        return [d.Ibarrier()], None
    if k == "broadcast":
        return [d.Ibcast([c.recv, MPI.BYTE], root=c.root)], None
    if k in ("all_gather", "all_to_all"):
        send = c.send
        if _overlap(send, c.recv):
            send = memoryview(bytearray(send))
        if k == "all_gather" and n <= P2P_GATHER_MAX:
            return _all_gather_p2p(comm, c, send), None
        call = d.Iallgather if k == "all_gather" else d.Ialltoall
        return [call([send, MPI.BYTE], [c.recv, MPI.BYTE])], None
    host = ops.host_reduced(c.dtype, c.op)
    if host:
        return _start_host(comm, c)
    dt, op = ops.mpi_datatype(MPI, c.dtype), ops.mpi_op(MPI, c.op)
    if k == "all_reduce":
        send = MPI.IN_PLACE if c.send is c.recv or _addr(c.send) == _addr(c.recv) else [c.send, c.count, dt]
        return [d.Iallreduce(send, [c.recv, c.count, dt], op=op)], _avg(c, n)
    if k == "reduce":
        root = comm.rank == c.root
        if root and (c.send is c.recv or _addr(c.send) == _addr(c.recv)):
            send: Any = MPI.IN_PLACE
        else:
            send = [c.send, c.count, dt]
        recv = [c.recv, c.count, dt] if root else None
        return [d.Ireduce(send, recv, op=op, root=c.root)], (_avg(c, n) if root else None)
    if k == "reduce_scatter":
        src = c.send
        if _overlap(src, c.recv):
            src = memoryview(bytearray(src))
        return [d.Ireduce_scatter_block([src, dt], [c.recv, dt], op=op)], _avg(c, n)
    raise ValueError(f"mpi backend: unknown collective {k!r}")


def _start_host(comm: Any, c: Any) -> Tuple[List[Any], Finish]:
    """float16 / bfloat16: gather the raw elements (all of them, or each rank's chunk with
    all_to_all for reduce_scatter), then fold them in rank order here."""
    MPI, d, n, k = comm.MPI, comm.data, comm.size, c.kind
    raw = np.uint16
    if k == "reduce_scatter":
        part = c.count // n
        scratch = np.empty(n * part, dtype=raw)
        req = d.Ialltoall([c.send, MPI.BYTE], [scratch, MPI.BYTE])
    else:
        scratch = np.empty(n * c.count, dtype=raw)
        if k == "all_reduce":
            req = d.Iallgather([c.send, MPI.BYTE], [scratch, MPI.BYTE])
        else:  # reduce
            recvbuf = [scratch, MPI.BYTE] if comm.rank == c.root else None
            req = d.Igather([c.send, MPI.BYTE], recvbuf, root=c.root)
            if comm.rank != c.root:
                return [req], lambda: None
        part = c.count

    def finish() -> None:
        parts = [scratch[i * part : (i + 1) * part] for i in range(n)]
        out = np.frombuffer(c.recv, dtype=raw)
        out[: part] = ops.fold_ranks(parts, c.dtype, c.op)

    return [req], finish
