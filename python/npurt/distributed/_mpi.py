"""The ``mpi`` backend: collectives between processes (on one host or several) over mpi4py.

Each collective is a host task on the group's communication stream (``stream``, which the
public layer already made wait for the current stream's earlier work): when the stream
reaches it, a runtime callback thread runs the MPI exchange on the arrays' own memory —
npurt device memory is host memory, so MPI reads and writes the DeviceArrays in place, no
staging — with a deadline (:mod:`._mpi_comm`), then the stream moves on. A blocking call
(``async_op=False``) whose communication stream is idle runs its task on the calling
thread instead (the stream records it as if its host engine had). The receive array's
last writer becomes the communication stream, so kernels that read it later wait for the
collective. Waits poll ``MPI_Test`` and yield or sleep with the GIL released.

Small collectives (at most 64 KiB per peer) are one exchange, header and data together,
completed locally (:mod:`._mpi_small`: reductions fold in rank order, as ``local`` /
``shm`` do). Larger reductions use MPI's own operations and order (``MPI_Iallreduce``...):
results are what the MPI library computes (Open MPI's order depends on the algorithm it
picks, so they are not promised bitwise equal to ``local`` / ``shm``); float16 and
bfloat16 (which MPI cannot reduce) are gathered and folded in rank order here, as the
native engine does.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from .. import _npurt
from . import _mpi_ops as ops
from . import _mpi_small as small
from ._backend import Backend, Work, collective_error, hccl_count
from ._group import register_backend
from ._mpi_comm import Call, MpiComm
from ._mpi_data import _addr
from ._mpi_load import load_mpi

__all__ = ["MpiBackend", "MpiWork", "mpi_world", "select_hccl_backend"]

DEFAULT_TIMEOUT_S = 1800.0  # HCCL_EXEC_TIMEOUT's default
_POLL_S = 0.05  # how often a waiting work looks whether the stream dropped its task


class MpiWork(Work):
    """One queued MPI collective: done when its host task on the communication stream ran.

    A failed collective raises in its task, so the stream keeps the error (reading the
    arrays, ``synchronize`` raise it) and drops the tasks queued behind it: their works
    then raise "cannot run: the communicator was aborted" instead of waiting forever."""

    __slots__ = ("call", "comm", "done", "started", "error")

    def __init__(self, call: Call, comm: MpiComm) -> None:
        self.call, self.comm = call, comm
        self.done = threading.Event()
        self.started = False
        self.error: Optional[BaseException] = None

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks (GIL released) until the collective ran or ``timeout`` seconds passed
        (False); raises the collective's error."""
        until = None if timeout is None else time.monotonic() + float(timeout)
        while not self.done.wait(_POLL_S if until is None else max(0.0, min(_POLL_S, until - time.monotonic()))):
            failed = self.comm.failed
            if failed is not None and not self.started:  # the stream dropped this task
                self.error = self.comm.aborted_error(self.call, failed)
                self.done.set()
                break
            if until is not None and time.monotonic() >= until:
                return False
        if self.error is not None:
            raise self.error
        return True

    def is_completed(self) -> bool:
        return self.done.is_set() or (self.comm.failed is not None and not self.started)

    def exception(self) -> Optional[BaseException]:
        if self.done.is_set():
            return self.error
        failed = self.comm.failed
        return self.comm.aborted_error(self.call, failed) if failed is not None and not self.started else None


class MpiBackend(Backend):
    """One rank of a group over MPI. ``ranks``: the group's MPI world ranks (None: all)."""

    name = "mpi"

    def __init__(self, ranks: Optional[List[int]] = None, timeout: Optional[float] = None) -> None:
        self.comm = MpiComm(ranks)
        self.rank, self.size = self.comm.rank, self.comm.size
        self.timeout_s = default_timeout() if timeout is None else float(timeout)
        self.comm.enable_fast(self._deadline_s(None))
        self._enqueue = threading.Lock()
        self._tail: dict = {}  # stream id -> its task count after a blocking call that was queued
        self._scratch: dict = {}

    def collective(self, kind, send, recv, op, root, stream, timeout_s) -> Work:  # type: ignore[override]
        work = self._submit(kind, send, recv, op, root, stream, timeout_s, False)
        assert work is not None
        return work

    def run(self, kind, send, recv, op, root, stream, timeout_s) -> None:  # type: ignore[override]
        """A blocking collective: on this thread when ``stream`` is idle (one hand-off
        less: the runtime's callback thread need not wake and take the GIL), else queued;
        no work object (its failure is the stream's error, as for a queued one). When this
        group's previous blocking call on ``stream`` was queued (e.g. behind a kernel) and
        nothing was submitted to the stream since, it first waits for that call: else
        each call of a burst finds the stream busy with the one before and queues too,
        for as long as the burst lasts (each then wakes the callback thread)."""
        tail = self._tail.pop(stream.id, None)
        if tail is not None and stream.submitted == tail and stream.completed < tail:
            try:  # nothing came since this group's last (queued) call
                _npurt._wait_task(stream, tail)
            except Exception:  # noqa: BLE001 - a failed collective: the launch below reports it
                pass
        self._submit(kind, send, recv, op, root, stream, timeout_s, True)

    def _submit(self, kind, send, recv, op, root, stream, timeout_s, here: bool) -> Optional[MpiWork]:  # noqa: ANN001
        arr = send if send is not None else recv
        dtype = arr.dtype_name if arr is not None else "uint8"
        if dtype not in ops.DTYPES:
            raise collective_error("param", kind, self.comm.seq + 1, [], f"dtype {dtype} is not an HCCL data type", self.rank)
        count = hccl_count(kind, send, recv, self.size)
        send_mv = _bytes(send)
        recv_mv = send_mv if recv is send else _bytes(recv)  # one view: the data phase runs MPI_IN_PLACE
        bad = _shape_error(kind, send, recv, self.size) or _overlap_error(kind, send_mv, recv_mv)
        if bad:
            raise collective_error("param", kind, self.comm.seq + 1, [], bad, self.rank)
        if self.comm.failed is not None:
            raise self.comm.aborted_error(None, self.comm.failed, kind)
        p2p = kind in ("send", "recv")
        with self._enqueue:  # collectives are numbered in enqueue order (= the stream's order)
            seq = self.comm.seq if p2p else self.comm.next_seq()
        t = self._deadline_s(timeout_s)
        peer = int(root) if p2p else -1
        header_count = count * self.size if kind in ("reduce_scatter", "all_to_all") else count
        call = Call(kind, seq, dtype, header_count, int(op), int(root), send_mv, recv_mv, peer, t)
        call.arrays = (send._a if send is not None else None, recv._a if recv is not None else None)
        work = None if here else MpiWork(call, self.comm)
        ran: List[bool] = []
        keep = (send, recv)  # the arrays stay alive until the task ran

        def task() -> None:
            if work is not None:
                work.started = True
            try:
                self.comm.run(call)
            except BaseException as e:
                if work is not None:
                    work.error = e
                raise
            finally:
                ran.append(True)
                if work is not None:
                    work.done.set()
                del call.send, call.recv
                call.arrays = (None, None)
                _ = keep

        for a in (send,) if recv is send else (send, recv):
            if a is not None:
                self._after_writer(a, stream)
        side = send_mv if send_mv is not None else recv_mv  # the bytes profiles show: as the native engine
        # shown as HcclAllReduce...; `here`: run now on this thread if the stream is idle
        _npurt._launch_collective(stream, task, kind, len(side) if side is not None else 0, here)
        if here and not ran:  # queued: the next blocking call may wait for it (run)
            self._tail[stream.id] = stream.submitted
        if recv is not None:
            recv._a._mark_written(stream)
        return work

    def _after_writer(self, a: Any, stream: Any) -> None:
        """Orders ``stream`` (on the device) after the last writer of ``a``'s buffer, as the
        native backends and every kernel do: the glue's ``_prepare_on`` where it has it,
        else a one-element copy out of ``a`` on ``stream`` (its launch waits for the writer)."""
        prepare = getattr(a._a, "_prepare_on", None)
        if prepare is not None:
            prepare(stream)
            return
        if a.size == 0:
            return
        key = (a.dtype_name, a.device)
        scratch = self._scratch.get(key)
        if scratch is None:
            scratch = self._scratch[key] = _npurt._empty([1], a.dtype_name, a.device)
        _npurt._copy(a._a.view(a._a.offset, a.dtype_name, [1], [1]), scratch, stream)

    def _deadline_s(self, timeout_s: Optional[float]) -> float:
        t = self.timeout_s if timeout_s is None else float(timeout_s)
        return math.inf if t <= 0 else t  # 0: no deadline (HCCL_EXEC_TIMEOUT=0)

    def one_call(self) -> Any:
        """``_MpiExchange.run_sync``: a blocking one-phase collective in one native call
        (the stream ordering, the exchange, the fold; errors built by ``MpiComm``)."""
        x = self.comm._x0
        return x.run_sync if x is not None else None

    def shutdown(self) -> None:
        self.comm.close()

    def set_timeout(self, timeout_s: float) -> None:
        self.timeout_s = float(timeout_s)
        self.comm.set_fast_timeout(self._deadline_s(None))


def default_timeout() -> float:
    """``HCCL_EXEC_TIMEOUT`` seconds (0: none), else 1800 (HCCL's default)."""
    v = os.environ.get("HCCL_EXEC_TIMEOUT", "")
    try:
        return float(v) if v else DEFAULT_TIMEOUT_S
    except ValueError:
        return DEFAULT_TIMEOUT_S


def _shape_error(kind: str, send: Any, recv: Any, n: int) -> str:
    """Why ``send`` / ``recv`` cannot go together in ``kind`` ('' when they can)."""
    if send is None or recv is None or send is recv:
        return ""
    if send.dtype_name != recv.dtype_name:
        return f"send is {send.dtype_name} but recv is {recv.dtype_name}"
    want = {"all_gather": (send.size * n, "world size x the input's"),
            "reduce_scatter": (send.size // n if send.size % n == 0 else -1, "the input's / world size"),
            "all_to_all": (send.size if send.size % n == 0 else -1, "the input's (a multiple of the world size)"),
            "all_reduce": (send.size, "the input's"), "reduce": (send.size, "the input's"),
            "broadcast": (send.size, "the input's")}.get(kind)
    if want is not None and recv.size != want[0]:
        return f"{send.size} elements in, {recv.size} out: the output must have {want[1]} elements (world size {n})"
    return ""


def _overlap_error(kind: str, send: Any, recv: Any) -> str:
    """Why these send / receive bytes cannot go together in ``kind`` ('' when they can):
    the one rule of every backend (``collective::overlap_error``)."""
    if send is None or recv is None or send is recv or kind not in small.KINDS:
        return ""
    return _npurt._coll_overlap(small.KINDS[kind], (_addr(send), len(send)), (_addr(recv), len(recv))) or ""


def _bytes(arr: Any) -> Any:
    return None if arr is None else ops.byte_view(arr)


def mpi_world() -> tuple:
    """``(rank, size)`` of this process in MPI's world (starts MPI on first use)."""
    MPI = load_mpi()
    return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


def _factory(rank: int, world_size: int, init_method: str, timeout_s: Optional[float], device: Any,
             group_name: str) -> Tuple[MpiBackend, Callable[..., MpiBackend]]:
    """``init_process_group(backend="mpi")``: one npurt rank per MPI process, ranks and world
    size are MPI's (``rank`` / ``world_size``, when given, must match them)."""
    r, n = mpi_world()
    if world_size not in (-1, n) or rank not in (-1, r):
        raise collective_error(
            "param", "init_process_group", 0, [],
            f"backend 'mpi' runs one rank per MPI process: this is MPI rank {r} of {n}, not rank {rank} of {world_size} "
            "(start the ranks with mpirun -np N; npurt.distributed.mpirun_command builds the command)", r)
    backend = MpiBackend(None, timeout_s)

    def make(sub_rank: int, sub_size: int, name: str, timeout: Optional[float],
             ranks: Optional[List[int]] = None) -> MpiBackend:
        if ranks is None:
            raise collective_error("param", "new_group", 0, [], "backend 'mpi' needs the members' ranks", r)
        return MpiBackend(list(ranks), timeout if timeout is not None else timeout_s)

    return backend, make


def select_hccl_backend(world_size: int = -1) -> str:
    """What backend ``hccl`` means here: ``shm`` when every rank is on this host, ``mpi``
    across hosts. ``NPURT_HCCL_BACKEND`` (``shm`` / ``mpi``) decides if set; else under a
    launcher the local world size says it (``LOCAL_WORLD_SIZE`` from torchrun,
    ``OMPI_COMM_WORLD_LOCAL_SIZE`` from mpirun) against the world size; without one, all
    ranks are local. Reads the environment only (MPI is not started)."""
    forced = os.environ.get("NPURT_HCCL_BACKEND")
    if forced in ("shm", "mpi"):
        return forced
    if world_size == -1:
        w = os.environ.get("WORLD_SIZE") or os.environ.get("OMPI_COMM_WORLD_SIZE") or ""
        world_size = int(w) if w.isdigit() else -1
    for var in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        v = os.environ.get(var, "")
        if v.isdigit():
            return "shm" if world_size in (-1, int(v)) else "mpi"
    return "shm"


register_backend("mpi", _factory)
