"""The backend interface of :mod:`npurt.distributed` (the contract in ``coord/dist-api.md``).

A backend runs collectives for one rank of one communicator. The public layer
(``npurt.distributed``) maps group ranks to backend ranks, checks the tensors, orders the
collective after the current stream's work (the ``stream`` it passes is the group's
communication stream on the rank's device, already waiting for the current stream) and
makes the current stream wait for the returned :class:`Work` unless ``async_op=True``.

``kind`` is one of :data:`KINDS`; ``send`` / ``recv`` are contiguous DeviceArrays (or None
where the collective has no such side); ``op`` a :class:`ReduceOp` value (HCCL's SUM 0,
PROD 1, MAX 2, MIN 3, and AVG 4); ``root`` the root (broadcast, reduce) or peer (send,
recv) as a backend rank; ``timeout_s`` the per-call deadline in seconds (None: the
group's). Counts are HCCL's: :func:`hccl_count` says which buffer gives them.

Failures are :class:`npurt.CollectiveError` subclasses with the engine's wording: a
backend that detects one itself builds it with :func:`collective_error`.
"""

from __future__ import annotations

import enum
from typing import Any, Optional, Sequence

from .. import _npurt

__all__ = ["Backend", "Work", "ReduceOp", "KINDS", "hccl_count", "collective_error"]

KINDS = (
    "all_reduce",
    "broadcast",
    "reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "barrier",
    "send",
    "recv",
)


class ReduceOp(enum.IntEnum):
    """torch.distributed's reduce ops with HCCL's values (AVG: sum, then divide)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


def hccl_count(kind: str, send: Any, recv: Any, size: int) -> int:
    """HCCL's ``count`` of a collective: elements of the buffer for all_reduce, broadcast,
    reduce, send, recv; the send count for all_gather; the receive count for
    reduce_scatter; elements per peer for all_to_all; 0 for barrier."""
    if kind == "barrier":
        return 0
    if kind in ("all_gather", "send", "all_reduce", "broadcast", "reduce"):
        return int(send.size)
    if kind in ("reduce_scatter", "recv"):
        return int(recv.size)
    if kind == "all_to_all":
        return int(send.size) // size
    raise ValueError(f"unknown collective {kind!r}")


def collective_error(
    kind: str, op: str, seq: int, ranks: Sequence[int] = (), detail: str = "", rank: int = 0, world: int = 0
) -> BaseException:
    """The exception for a failed collective, worded by the engine: ``kind`` is
    ``"timeout"`` (``ranks``: the missing ranks, ``detail``: the timeout in seconds),
    ``"desync"`` (``detail``: who called what), ``"rank_failed"`` (``ranks[0]`` the failed
    rank, ``detail``: what happened, e.g. ``"died (pid 42)"``), ``"param"`` or
    ``"internal"``; ``op`` names the collective (``"all_reduce(float32 x 4, sum)"``);
    ``rank`` is the rank reporting it; ``world`` (0: unknown) lets a timeout name the ranks
    that did arrive (and a timeout with none missing say the data exchange stalled)."""
    return _npurt._collective_error(kind, op, int(seq), [int(r) for r in ranks], detail, int(rank), int(world))


class Work:
    """A queued collective (torch's ``Work``). ``wait(timeout)`` makes the current stream
    wait for it and blocks the host until it is done (raising its error);
    ``is_completed()`` polls."""

    def wait(self, timeout: Optional[float] = None) -> bool:
        raise NotImplementedError

    def is_completed(self) -> bool:
        raise NotImplementedError

    def exception(self) -> Optional[BaseException]:
        """The error of a completed, failed collective, else None."""
        return None


class Backend:
    """One rank's backend: ``name``, ``rank``, ``size``; subclasses implement
    :meth:`collective` and may override :meth:`shutdown`."""

    name: str = ""
    rank: int = 0
    size: int = 1

    def collective(
        self,
        kind: str,
        send: Any,
        recv: Any,
        op: int,
        root: int,
        stream: Any,
        timeout_s: Optional[float],
    ) -> Work:
        raise NotImplementedError

    def run(
        self,
        kind: str,
        send: Any,
        recv: Any,
        op: int,
        root: int,
        stream: Any,
        timeout_s: Optional[float],
    ) -> None:
        """:meth:`collective` when the caller needs no :class:`Work` (``async_op=False``):
        the collective is ordered on ``stream`` all the same, but a backend may run it on
        the calling thread when nothing is pending there (host-synchronous). Its failure
        must still surface where the result is waited for (``stream``'s error)."""
        self.collective(kind, send, recv, op, root, stream, timeout_s)

    def one_call(self) -> Optional[Any]:
        """A native ``f(kind, array, op, root, streams, output=None) -> bool`` that runs a
        blocking in-place ``all_reduce`` / ``broadcast`` / ``reduce`` of ``array`` (a
        DeviceArray's native ``_a``), or with ``output`` (another native array) an
        ``all_gather`` / ``reduce_scatter`` / ``all_to_all`` from ``array`` into it, with
        the public layer's stream ordering, ``streams`` being the
        group's communication streams by device; False when it did nothing and
        :meth:`run` must take the call (see ``_npurt._Comm.run_sync``). None (the
        default): every call goes through :meth:`run`."""
        return None

    def shutdown(self) -> None:
        """Leaves the communicator (peers still waiting get RankFailedError)."""

    def set_timeout(self, timeout_s: float) -> None:
        """Changes the group's default deadline."""

    def board(self) -> list:
        """Progress rows (rank, seq, collective, phase, state, pid, heartbeat_ms) for hang
        diagnosis, where the backend has them."""
        return []
