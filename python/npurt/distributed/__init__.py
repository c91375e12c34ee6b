"""``npurt.distributed``: torch.distributed's API over npurt's collective engine.

Backends: ``"local"`` (ranks are threads / virtual devices of one process), ``"shm"``
(processes on one host, through a shared memfd segment), ``"mpi"`` (hosts, over mpi4py),
``"hccl"`` (an alias: ``shm`` on one host, ``mpi`` under mpirun across hosts).

A collective runs on the group's communication stream of the tensor's device, after the
current stream's earlier work; with ``async_op=False`` the current stream waits for it
(later kernels see the result; the host does not block, as with torch + NCCL); with
``async_op=True`` a :class:`Work` is returned and nothing waits until ``work.wait()``.
Errors of a collective (:class:`npurt.CollectiveTimeoutError`,
:class:`npurt.CollectiveDesyncError`, :class:`npurt.RankFailedError`) are raised where its
result is waited for: ``work.wait()``, ``barrier()``, reading the tensor (``to_host``,
``np.asarray``), ``synchronize``.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from ..array.device_array import DeviceArray
from ..exceptions import InvalidTypeError, InvalidValueError
from ._backend import Backend, ReduceOp, Work, collective_error
from ._group import (
    GroupMember,
    ProcessGroup,
    destroy_process_group,
    fast_group,
    get_backend,
    get_rank,
    get_world_size,
    group_of,
    init_process_group,
    is_initialized,
    new_group,
    register_backend,
)
from ._mpirun import find_mpirun, mpirun_command, run_mpirun

__all__ = [
    "Backend",
    "ReduceOp",
    "Work",
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
    "all_reduce",
    "broadcast",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "send",
    "recv",
    "barrier",
    "collective_error",
    "mpirun_command",
    "run_mpirun",
    "find_mpirun",
]


def _check(t: Any, what: str) -> Any:
    if not isinstance(t, DeviceArray):
        raise InvalidTypeError(f"{what} must be an npurt.DeviceArray, not {type(t).__name__}")
    if not t.is_contiguous:
        raise InvalidValueError(f"{what} must be contiguous (use npurt.ascontiguousarray)")
    return t


# all_reduce, broadcast and reduce (in place), all_gather_into_tensor, reduce_scatter_tensor
# and all_to_all_single (with `output=`) with async_op=False and no timeout first try the
# backend's one-call path (`ProcessGroup.one_call`: the checks, the stream ordering and the
# collective in one native call); it returns False, having done nothing, whenever
# `ProcessGroup.run` must take the call (which also raises every argument error, in the
# same order as before).


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False, timeout=None):
    """Reduces ``tensor`` over the group, in place on every rank."""
    g = fast_group(group, async_op, timeout)
    if g is not None and isinstance(tensor, DeviceArray) and g.one_call("all_reduce", tensor._a, op, 0, g._streams):
        return None
    t = _check(tensor, "tensor")
    return group_of(group).run("all_reduce", t, t, op, 0, async_op, timeout)


def broadcast(tensor, src, group=None, async_op=False, timeout=None):
    """Copies rank ``src``'s ``tensor`` into every rank's ``tensor``."""
    g = fast_group(group, async_op, timeout)
    if (g is not None and isinstance(tensor, DeviceArray) and type(src) is int and src in g.ranks
            and g.one_call("broadcast", tensor._a, 0, g.ranks.index(src), g._streams)):
        return None
    t = _check(tensor, "tensor")
    g = group_of(group)
    return g.run("broadcast", t, t, ReduceOp.SUM, g.group_rank(src, "src"), async_op, timeout)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False, timeout=None):
    """Reduces ``tensor`` over the group into rank ``dst``'s ``tensor``."""
    g = fast_group(group, async_op, timeout)
    if (g is not None and isinstance(tensor, DeviceArray) and type(dst) is int and dst in g.ranks
            and g.one_call("reduce", tensor._a, op, g.ranks.index(dst), g._streams)):
        return None
    t = _check(tensor, "tensor")
    g = group_of(group)
    return g.run("reduce", t, t, op, g.group_rank(dst, "dst"), async_op, timeout)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False, timeout=None):
    """``output_tensor`` (world × input elements) gets every rank's ``input_tensor`` in rank order."""
    g = fast_group(group, async_op, timeout)
    if (g is not None and isinstance(output_tensor, DeviceArray) and isinstance(input_tensor, DeviceArray)
            and g.one_call("all_gather", input_tensor._a, 0, 0, g._streams, output=output_tensor._a)):
        return None
    o, i = _check(output_tensor, "output_tensor"), _check(input_tensor, "input_tensor")
    return group_of(group).run("all_gather", i, o, ReduceOp.SUM, 0, async_op, timeout)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False, timeout=None):
    """Rank r's ``output`` gets chunk r of the reduction of every rank's ``input``."""
    g = fast_group(group, async_op, timeout)
    if (g is not None and isinstance(output, DeviceArray) and isinstance(input, DeviceArray)
            and g.one_call("reduce_scatter", input._a, op, 0, g._streams, output=output._a)):
        return None
    o, i = _check(output, "output"), _check(input, "input")
    return group_of(group).run("reduce_scatter", i, o, op, 0, async_op, timeout)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False, timeout=None):
    """Chunk j of rank r's ``input`` goes to chunk r of rank j's ``output`` (equal splits)."""
    if output_split_sizes is not None or input_split_sizes is not None:
        from ..exceptions import NotSupportedError

        raise NotSupportedError("all_to_all_single: uneven splits are not supported (equal chunks only)")
    g = fast_group(group, async_op, timeout)
    if (g is not None and isinstance(output, DeviceArray) and isinstance(input, DeviceArray)
            and g.one_call("all_to_all", input._a, 0, 0, g._streams, output=output._a)):
        return None
    o, i = _check(output, "output"), _check(input, "input")
    return group_of(group).run("all_to_all", i, o, ReduceOp.SUM, 0, async_op, timeout)


def all_gather(tensor_list: List[Any], tensor, group=None, async_op=False, timeout=None):
    """``tensor_list[j]`` gets rank j's ``tensor``."""
    g = group_of(group)
    t = _check(tensor, "tensor")
    flat = g.flat_like(t, g.size())
    work = g.run("all_gather", t, flat, ReduceOp.SUM, 0, True, timeout)
    return g.scatter_out(work, flat, g.checked_list(tensor_list, t, "tensor_list"), async_op)


def reduce_scatter(output, input_list: Sequence[Any], op=ReduceOp.SUM, group=None, async_op=False, timeout=None):
    """Rank r's ``output`` gets the reduction of every rank's ``input_list[r]``."""
    g = group_of(group)
    o = _check(output, "output")
    flat = g.gather_in(g.checked_list(input_list, o, "input_list"), o)
    return g.run("reduce_scatter", flat, o, op, 0, async_op, timeout)


def all_to_all(output_tensor_list: List[Any], input_tensor_list: Sequence[Any], group=None, async_op=False, timeout=None):
    """``output_tensor_list[j]`` on rank r gets rank j's ``input_tensor_list[r]``."""
    g = group_of(group)
    if not input_tensor_list:
        raise collective_error("param", "all_to_all", 0, [], "input_tensor_list is empty")
    first = _check(input_tensor_list[0], "input_tensor_list[0]")
    outs = g.checked_list(output_tensor_list, first, "output_tensor_list")
    flat_in = g.gather_in(g.checked_list(input_tensor_list, first, "input_tensor_list"), first)
    flat_out = g.flat_like(first, g.size())
    work = g.run("all_to_all", flat_in, flat_out, ReduceOp.SUM, 0, True, timeout)
    return g.scatter_out(work, flat_out, outs, async_op)


def send(tensor, dst, group=None, timeout=None):
    """Sends ``tensor`` to rank ``dst`` (completes when ``dst`` received it)."""
    t = _check(tensor, "tensor")
    g = group_of(group)
    g.run("send", t, None, ReduceOp.SUM, g.group_rank(dst, "dst"), False, timeout)


def recv(tensor, src, group=None, timeout=None):
    """Receives into ``tensor`` from rank ``src``; returns ``src``."""
    t = _check(tensor, "tensor")
    g = group_of(group)
    g.run("recv", None, t, ReduceOp.SUM, g.group_rank(src, "src"), False, timeout)
    return src


def isend(tensor, dst, group=None, timeout=None) -> Work:
    t = _check(tensor, "tensor")
    g = group_of(group)
    return g.run("send", t, None, ReduceOp.SUM, g.group_rank(dst, "dst"), True, timeout)


def irecv(tensor, src, group=None, timeout=None) -> Work:
    t = _check(tensor, "tensor")
    g = group_of(group)
    return g.run("recv", None, t, ReduceOp.SUM, g.group_rank(src, "src"), True, timeout)


def barrier(group=None, async_op=False, timeout=None, device_ids: Optional[Sequence[int]] = None):
    """Waits (on the host) until every rank of the group reached the barrier."""
    g = group_of(group)
    work = g.run("barrier", None, None, ReduceOp.SUM, 0, True, timeout)
    if async_op:
        return work
    work.wait()
    return None


def progress_board(group=None) -> List[dict]:
    """The group's progress board (hang diagnosis): per rank the sequence number and
    descriptor of the collective it last entered, its barrier phase, state (0 empty, 1
    joined, 2 left), pid and last heartbeat (ms since the epoch). Empty for backends
    without a board."""
    keys = ("rank", "seq", "collective", "phase", "state", "pid", "heartbeat_ms")
    return [dict(zip(keys, row, strict=True)) for row in group_of(group).backend.board()]


__all__ += ["isend", "irecv", "progress_board"]
