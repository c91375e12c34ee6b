"""The ``local`` and ``shm`` backends: both are the Rust engine (``npurt_core::collective``)
behind one :class:`NativeBackend`; they differ in how the communicator is made
(``local``: a process-wide table of groups by name; ``shm``: rank 0 creates and exports a
shareable segment, the others import its key from the bootstrap store)."""

from __future__ import annotations

import functools
import os
from typing import Any, Optional

from .. import _npurt
from ._backend import Backend, Work, hccl_count

__all__ = ["NativeBackend", "NativeWork", "local_backend", "shm_backend", "HOST_SYNC_ENV"]

# "0": collectives with async_op=False are always queued on the communication stream (the
# host never blocks in the call); else the calling thread runs them when that stream is idle.
HOST_SYNC_ENV = "NPURT_COLLECTIVE_HOST_SYNC"


class NativeWork(Work):
    """A collective queued on a stream: done when the stream ran it."""

    __slots__ = ("stream", "target", "seq")

    def __init__(self, stream: Any, target: int, seq: int) -> None:
        self.stream, self.target, self.seq = stream, target, seq

    def wait(self, timeout: Optional[float] = None) -> bool:
        return bool(_npurt._wait_task(self.stream, self.target, timeout))

    def is_completed(self) -> bool:
        return self.stream.completed >= self.target

    def exception(self) -> Optional[BaseException]:
        if not self.is_completed():
            return None
        try:
            _npurt._wait_task(self.stream, self.target, 0.0)
        except BaseException as e:  # noqa: BLE001 - the collective's error, returned
            return e
        return None


class NativeBackend(Backend):
    """A backend over an ``npurt._npurt._Comm``."""

    def __init__(self, name: str, comm: Any) -> None:
        self.name, self.comm = name, comm
        self.rank, self.size = comm.rank, comm.world
        self.host_sync = os.environ.get(HOST_SYNC_ENV, "1").strip() != "0"

    def collective(self, kind, send, recv, op, root, stream, timeout_s) -> Work:  # type: ignore[override]
        arr = send if send is not None else recv
        dtype = arr.dtype_name if arr is not None else "uint8"
        count = hccl_count(kind, send, recv, self.size)
        seq, target = self.comm.enqueue(
            kind,
            send._a if send is not None else None,
            recv._a if recv is not None else None,
            count,
            dtype,
            int(op),
            int(root),
            stream,
            timeout_s,
        )
        return NativeWork(stream, target, seq)

    def run(self, kind, send, recv, op, root, stream, timeout_s) -> None:  # type: ignore[override]
        """``async_op=False``: on an idle ``stream`` the calling thread runs the collective
        (``_Comm.enqueue(run_here=True)``; ``NPURT_COLLECTIVE_HOST_SYNC=0``: always queued)."""
        arr = send if send is not None else recv
        self.comm.enqueue(
            kind,
            send._a if send is not None else None,
            recv._a if recv is not None else None,
            hccl_count(kind, send, recv, self.size),
            arr.dtype_name if arr is not None else "uint8",
            op,
            root,
            stream,
            timeout_s,
            self.host_sync,
        )

    def one_call(self) -> Any:
        """``_Comm.run_sync``: the blocking in-place collectives in one native call."""
        return self.comm.run_sync if self.host_sync else functools.partial(self.comm.run_sync, run_here=False)

    def shutdown(self) -> None:
        self.comm.destroy()

    def set_timeout(self, timeout_s: float) -> None:
        self.comm.set_timeout(timeout_s)

    def board(self) -> list:
        return self.comm.board()


def local_backend(group_name: str, rank: int, size: int, timeout: Optional[float]) -> NativeBackend:
    return NativeBackend("local", _npurt._comm_local(group_name or "default", rank, size, timeout))


def shm_backend(store: Any, prefix: str, rank: int, size: int, device: Any, timeout: Optional[float]) -> NativeBackend:
    """Rank 0 collects the ranks' pids (the segment's import whitelist), creates and exports
    the segment and publishes its key; the others import it."""
    store.set(f"{prefix}/pid/{rank}", str(os.getpid()))
    if rank == 0:
        pids = [int(store.get(f"{prefix}/pid/{r}")) for r in range(1, size)]
        comm, key = _npurt._comm_shm_create(size, device, None, pids, timeout)
        store.set(f"{prefix}/key", key)
    else:
        key = store.get(f"{prefix}/key")
        comm = _npurt._comm_shm_join(key, rank, size, device, timeout)
    return NativeBackend("shm", comm)
