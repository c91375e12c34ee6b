"""The ``mpi`` backend's errors: the same classes and wording as ``local`` / ``shm``, built by
the one formatter in Rust (``_npurt._collective_error``)."""

from __future__ import annotations

from typing import Sequence

from .. import _npurt
from .. import exceptions as _exc

_CLASSES = {"timeout": "CollectiveTimeoutError", "desync": "CollectiveDesyncError",
            "rank_failed": "RankFailedError",
            "param": "CollectiveError", "internal": "CollectiveError"}


def collective_error(kind: str, op: str, seq: int, ranks: Sequence[int] = (), detail: str = "", rank: int = 0) -> BaseException:
    """The exception for a failed collective ``op`` (#``seq``) seen on ``rank``: ``kind`` is
    ``timeout`` (``ranks`` missing, ``detail`` the seconds), ``desync`` (``detail`` says who
    called what), ``rank_failed`` (``ranks[0]`` died, ``detail`` how), ``param`` or ``internal``."""
    make = getattr(_npurt, "_collective_error", None)
    if make is not None:
        try:
            return make(kind, op, seq, [int(r) for r in ranks], detail, rank)
        except (ValueError, TypeError):
            pass  # a kind this build's formatter does not know: the message below
    cls = getattr(_exc, _CLASSES.get(kind, "CollectiveError"), None) or _exc.InternalError
    if kind == "timeout":
        missing = ", ".join(map(str, ranks)) or "none"
        msg = f"{op} (collective #{seq}) timed out after {float(detail):.3f}s on rank {rank}: rank(s) {missing} never arrived"
    elif kind == "desync":
        msg = f"collective desync at #{seq}: {detail}"
    elif kind == "rank_failed":
        msg = f"{op} (collective #{seq}): rank {ranks[0] if ranks else rank} {detail}; the communicator is aborted"
    elif kind == "param":
        cls = _exc.InvalidValueError if cls is _exc.InternalError else cls
        msg = f"{op}: {detail}"
    else:
        msg = f"{op}: {detail}"
    return cls(msg)
