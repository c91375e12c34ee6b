"""Process groups: which backend, which ranks, the communication streams, and the
stream ordering of every collective (see ``npurt.distributed``'s docstring)."""

from __future__ import annotations

import datetime
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence

import npurt

from ._backend import Backend, Work, collective_error
from ._mpirun import launcher_defaults

__all__ = [
    "GroupMember",
    "ProcessGroup",
    "init_process_group",
    "is_initialized",
    "get_rank",
    "get_world_size",
    "get_backend",
    "new_group",
    "destroy_process_group",
    "register_backend",
    "group_of",
    "fast_group",
]

# backend name -> factory(rank, world_size, init_method, timeout_s, device, group_name) -> Backend
_FACTORIES: Dict[str, Callable[..., Backend]] = {}

# The default group: per thread for "local" (each rank is a thread), else per process.
class _Local(threading.local):
    group: Optional["ProcessGroup"] = None  # (a class default: a miss raises no AttributeError)


_tls = _Local()
_process_group: Optional["ProcessGroup"] = None


class GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = object()


def _seconds(timeout: Any) -> Optional[float]:
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


class _PublicWork(Work):
    """The backend's work plus an event after it on the communication stream (or, when
    the collective failed before the event could be recorded, the error recording it
    raised: ``wait`` raises the work's own error, else that one)."""

    def __init__(self, work: Work, event: Any, device: int) -> None:
        self._work, self._event, self._device = work, event, device

    def wait(self, timeout: Optional[float] = None) -> bool:
        if not self._work.wait(timeout):
            return False
        if isinstance(self._event, BaseException):
            raise self._event
        self._event.synchronize(timeout)
        npurt.current_stream(self._device).wait_event(self._event)
        return True

    def is_completed(self) -> bool:
        return self._work.is_completed() and (isinstance(self._event, BaseException) or self._event.query())

    def exception(self) -> Optional[BaseException]:
        return self._work.exception()


class ProcessGroup:
    """A group: its backend (one rank of one communicator), the global ranks of its members
    (group rank i is global rank ``ranks[i]``), its device and communication streams."""

    def __init__(self, backend: Backend, ranks: List[int], device: int, name: str, store: Any = None,
                 make: Optional[Callable[..., Backend]] = None) -> None:
        self.backend, self.ranks, self.device, self.name = backend, ranks, device, name
        self.store, self._make = store, make
        self._streams: Dict[int, Any] = {}
        self._marks: Dict[int, Any] = {}  # device -> (current stream id, its submitted count)
        self._children = 0
        self.rank_stream: Any = None  # "local": this rank thread's current stream
        self.rank_device: Any = None  # "local": this rank thread's current device
        # The backend's one-call blocking in-place collective (`Backend.one_call`), or None
        # (also for a registered backend that does not derive from `Backend`).
        one_call = getattr(backend, "one_call", None)
        self.one_call: Optional[Callable[..., bool]] = one_call() if one_call is not None else None

    def rank(self) -> int:
        return self.backend.rank

    def size(self) -> int:
        return self.backend.size

    def group_rank(self, global_rank: Any, what: str) -> int:
        try:
            return self.ranks.index(int(global_rank))
        except (ValueError, TypeError):
            raise collective_error("param", self.backend.name, 0, [], f"{what}={global_rank!r} is not a rank of this group (ranks {self.ranks})") from None

    def comm_stream(self, device: int) -> Any:
        s = self._streams.get(device)
        if s is None:
            s = self._streams[device] = npurt.Stream(device=device)
        return s

    def run(self, kind: str, send: Any, recv: Any, op: Any, root: int, async_op: bool, timeout: Any) -> Optional[Work]:
        t = send if send is not None else recv
        dev = t.device if t is not None else self.device
        cur = npurt.current_stream(dev)
        cs = self.comm_stream(dev)
        # `_marks[dev]` is `cur`'s submitted count when the last collective left it: `cs`
        # is ordered after everything on `cur` before it except `cur`'s waits for `cs`
        # itself, so if nothing came since, `cs` need not wait again (back-to-back
        # collectives would otherwise hop through `cur` each time).
        if self._marks.get(dev) != (cur.id, cur.submitted) or not cs.usable:
            try:
                cs.wait_stream(cur)
            except npurt.Error:
                # The communication stream holds an earlier collective's error: start a
                # fresh one, so that this collective reports its own (the group is aborted).
                cs = self._streams[dev] = npurt.Stream(device=dev)
                cs.wait_stream(cur)
        if async_op:
            work = self.backend.collective(kind, send, recv, int(op), int(root), cs, _seconds(timeout))
            self._marks[dev] = (cur.id, cur.submitted)
            try:
                event: Any = cs.record_event()
            except npurt.Error as e:  # the collective already ran and failed (its work has the error)
                event = e
            return _PublicWork(work, event, dev)
        # May run on this thread when `cs` is idle (the backend's `run`): `cur` then has
        # nothing to wait for (no wait is queued), and if it failed, `cs` holds the error,
        # raised where the result is waited for (the tensor's last writer is `cs`), as when
        # it runs queued.
        self.backend.run(kind, send, recv, int(op), int(root), cs, _seconds(timeout))
        try:
            cur.wait_stream(cs)
        except npurt.Error:
            if cs.usable or not cur.usable:
                raise
        self._marks[dev] = (cur.id, cur.submitted)
        return None

    # -- list forms: a flat buffer and copies on the communication stream -------------
    def flat_like(self, t: Any, n: int) -> Any:
        return npurt.empty((n * t.size,), t.dtype_name, device=t.device)

    def checked_list(self, lst: Sequence[Any], like: Any, what: str) -> List[Any]:
        from ..array.device_array import DeviceArray

        if len(lst) != self.size():
            raise collective_error("param", self.backend.name, 0, [], f"{what} has {len(lst)} tensors, the group has {self.size()} ranks")
        for x in lst:
            if not isinstance(x, DeviceArray) or x.size != like.size or x.dtype_name != like.dtype_name:
                raise collective_error("param", self.backend.name, 0, [], f"{what}: every tensor must be a DeviceArray of {like.size} {like.dtype_name} elements")
        return list(lst)

    def gather_in(self, lst: List[Any], like: Any) -> Any:
        flat = self.flat_like(like, len(lst))
        cur = npurt.current_stream(like.device)
        k = like.size
        for j, x in enumerate(lst):
            flat[j * k:(j + 1) * k].copy_(x.reshape(-1), stream=cur)
        return flat

    def scatter_out(self, work: Any, flat: Any, outs: List[Any], async_op: bool) -> Optional[Work]:
        dev = flat.device
        cs = self.comm_stream(dev)
        k = flat.size // max(1, len(outs))
        for j, o in enumerate(outs):
            o.copy_(flat[j * k:(j + 1) * k].reshape(o.shape), stream=cs)
        if async_op:
            return _PublicWork(work._work, cs.record_event(), dev)
        npurt.current_stream(dev).wait_stream(cs)
        return None

    def new_subgroup(self, ranks: List[int], timeout: Optional[float]) -> Optional["ProcessGroup"]:
        self._children += 1
        name = f"{self.name}#{self._children}"
        me = self.ranks[self.rank()]
        if me not in ranks:
            return None
        if self._make is None:
            from ..exceptions import NotSupportedError

            raise NotSupportedError(f"new_group: backend {self.backend.name!r} cannot make subgroups")
        backend = self._make(ranks.index(me), len(ranks), name, timeout, ranks=ranks)
        return ProcessGroup(backend, ranks, self.device, name, self.store, self._make)

    def shutdown(self) -> None:
        self.backend.shutdown()
        self._streams.clear()


def register_backend(name: str, factory: Callable[..., Backend]) -> None:
    """Adds a backend: ``factory(rank, world_size, init_method, timeout_s, device, group_name)``
    returns a :class:`Backend` (or ``(backend, make_subgroup)``)."""
    _FACTORIES[name] = factory


def _default() -> Optional[ProcessGroup]:
    return _tls.group or _process_group


def fast_group(group: Any, async_op: Any, timeout: Any) -> Optional[ProcessGroup]:
    """The group whose one-call path (``ProcessGroup.one_call``) may take a call with these
    arguments: ``group_of(group)`` when the call is blocking, has no per-call timeout and
    the group has that path; else None (never raises: ``group_of`` does, on the general
    path)."""
    if async_op or timeout is not None:
        return None
    g = (_tls.group or _process_group) if group is None else group
    return g if type(g) is ProcessGroup and g.one_call is not None else None


def group_of(group: Any) -> ProcessGroup:
    if group is None:
        g = _default()
        if g is None:
            raise collective_error("param", "npurt.distributed", 0, [], "the default process group is not initialized: call init_process_group first")
        return g
    if group is GroupMember.NON_GROUP_MEMBER:
        raise collective_error("param", "npurt.distributed", 0, [], "this rank is not a member of the group")
    if not isinstance(group, ProcessGroup):
        from ..exceptions import InvalidTypeError

        raise InvalidTypeError(f"group must be a ProcessGroup from new_group, not {type(group).__name__}")
    return group


def _select_hccl(world_size: int) -> str:
    """``hccl``: ``shm`` when every rank is on this host, else ``mpi`` (see ``_mpi.select_hccl_backend``)."""
    from ._mpi import select_hccl_backend

    return select_hccl_backend(world_size)


def init_process_group(backend: str = "hccl", rank: int = -1, world_size: int = -1, init_method: str = "env://",
                       timeout: Any = None, device: Any = None, group_name: str = "", store: Any = None) -> None:
    """Initialises the default group (see the module docs for the backends)."""
    global _process_group
    if _default() is not None:
        raise collective_error("param", "init_process_group", 0, [], "the default process group is already initialized (destroy_process_group first)")
    rank = int(os.environ.get("RANK", -1)) if rank == -1 else int(rank)
    world_size = int(os.environ.get("WORLD_SIZE", -1)) if world_size == -1 else int(world_size)
    rank, world_size, init_method = launcher_defaults(rank, world_size, init_method)
    name = backend if backend != "hccl" else _select_hccl(world_size)
    t = _seconds(timeout)
    if name == "mpi" or (name not in ("local", "shm") and name not in _FACTORIES):
        if name == "mpi" and "mpi" not in _FACTORIES:
            from . import _mpi  # noqa: F401  (registers "mpi")
        if name not in _FACTORIES:
            raise collective_error("param", "init_process_group", 0, [], f"unknown backend {backend!r} (local, shm, mpi, hccl)")
    if name in ("local", "shm") and (rank < 0 or world_size < 1 or rank >= world_size):
        raise collective_error("param", "init_process_group", 0, [], f"rank {rank} / world_size {world_size}: give both (or RANK / WORLD_SIZE), 0 <= rank < world_size")
    dev = _device(device, rank if name == "local" else None)
    make: Optional[Callable[..., Backend]] = None
    if name == "local":
        from ._native import local_backend

        gname = group_name or "default"
        be: Backend = local_backend(gname, rank, world_size, t)
        make = lambda r, n, sub, to, **_: local_backend(sub, r, n, to if to is not None else t)  # noqa: E731
        pg = ProcessGroup(be, list(range(world_size)), dev, gname, None, make)
        # Each rank thread gets its own current stream on its device: ranks sharing a
        # device must not share a stream (rank A's stream waiting for its collective would
        # hold rank B's collective queued behind it: a cycle).
        npurt.current_stream(dev)  # the implicit (lazy) reference: leaving never resets the device
        pg.rank_device = npurt.Device(dev)
        pg.rank_device.__enter__()
        pg.rank_stream = npurt.Stream(device=dev)
        pg.rank_stream.__enter__()
        _tls.group = pg
        return
    if name == "shm":
        from ._native import shm_backend
        from ._store import store_from_url

        st = store if store is not None else store_from_url(init_method, rank, t if t is not None else 300.0)
        gname = group_name or "default"
        be = shm_backend(st, gname, rank, world_size, dev, t)
        make = lambda r, n, sub, to, **_: shm_backend(st, sub, r, n, dev, to if to is not None else t)  # noqa: E731
        _process_group = ProcessGroup(be, list(range(world_size)), dev, gname, st, make)
        return
    made = _FACTORIES[name](rank, world_size, init_method, t, dev, group_name)
    be, make = made if isinstance(made, tuple) else (made, None)
    _process_group = ProcessGroup(be, list(range(be.size)), dev, group_name or name, None, make)


def _device(device: Any, rank: Optional[int]) -> int:
    if device is not None:
        return int(device)
    if rank is not None:
        return rank % npurt.device_count()
    return npurt.current_stream().device


def is_initialized() -> bool:
    return _default() is not None


def get_rank(group: Any = None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return group_of(group).rank()


def get_world_size(group: Any = None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return group_of(group).size()


def get_backend(group: Any = None) -> str:
    return group_of(group).backend.name


def new_group(ranks: Optional[Sequence[int]] = None, timeout: Any = None, backend: Optional[str] = None) -> Any:
    """A group of ``ranks`` (global ranks; default: all). Every rank of the default group
    must call it, in the same order; non-members get ``GroupMember.NON_GROUP_MEMBER``."""
    world = group_of(None)
    members = sorted(int(r) for r in (ranks if ranks is not None else world.ranks))
    if len(set(members)) != len(members) or any(r not in world.ranks for r in members) or not members:
        raise collective_error("param", "new_group", 0, [], f"ranks {list(ranks or [])} must be distinct ranks of the default group {world.ranks}")
    g = world.new_subgroup(members, _seconds(timeout))
    return GroupMember.NON_GROUP_MEMBER if g is None else g


def destroy_process_group(group: Any = None) -> None:
    """Leaves ``group`` (default: the default group, which is then uninitialised)."""
    global _process_group
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    g = group_of(group)
    g.shutdown()
    if g.rank_stream is not None:
        g.rank_stream.__exit__(None, None, None)
        g.rank_device.__exit__(None, None, None)
        g.rank_stream = g.rank_device = None
    if group is None or g is _default():
        if _tls.group is g:
            _tls.group = None
        else:
            _process_group = None
        if g.store is not None:
            g.store.close()
