"""``acl.rt`` streams and events: ``create_stream``, ``destroy_stream``,
``synchronize_stream[_with_timeout]``, ``stream_wait_event``,
``create_event[_with_flag|_ex_with_flag]``, ``record_event``, ``query_event[_status]``,
``query_event_wait_status``, ``synchronize_event[_with_timeout]``, ``event_elapsed_time``,
``destroy_event``;
interprocess events (``ACL_EVENT_IPC``): ``ipc_get_event_handle``, ``ipc_open_event_handle``.

Streams and events are npurt's own (``npurt.Stream``, ``npurt.Event``) behind integer
handles; stream ``0`` is the current context's default stream. Timeouts are in ms (-1:
wait forever); elapsed times are ms as a float (single precision, like pyacl's ``f``).
"""

from __future__ import annotations

import struct
import threading
from typing import Tuple

from .. import _npurt
from .. import sanitizer as _san
from ..event import Event
from ..stream import Stream
from . import _state as S
from . import constants as C

__all__ = [
    "create_event",
    "create_event_ex_with_flag",
    "create_event_with_flag",
    "ipc_get_event_handle",
    "ipc_open_event_handle",
    "create_stream",
    "create_stream_with_config",
    "destroy_event",
    "destroy_stream",
    "destroy_stream_force",
    "event_elapsed_time",
    "query_event",
    "query_event_status",
    "query_event_wait_status",
    "record_event",
    "stream_query",
    "stream_wait_event",
    "synchronize_event",
    "synchronize_event_with_timeout",
    "synchronize_stream",
    "synchronize_stream_with_timeout",
]

_EVENT_FLAGS = (
    C.ACL_EVENT_SYNC
    | C.ACL_EVENT_CAPTURE_STREAM_PROGRESS
    | C.ACL_EVENT_TIME_LINE
    | C.ACL_EVENT_DEVICE_USE_ONLY
    | C.ACL_EVENT_EXTERNAL
    | C.ACL_EVENT_IPC
)
#: aclrtCreateEventExWithFlag's flags (ACL_EVENT_IPC only alone).
_EX_EVENT_FLAGS = C.ACL_EVENT_SYNC | C.ACL_EVENT_CAPTURE_STREAM_PROGRESS | C.ACL_EVENT_TIME_LINE | C.ACL_EVENT_IPC
_recorded: set = set()  # event handles recorded at least once
_ex_flags: dict = {}  # handle -> flag, for events made by create_event_ex_with_flag
_waits: dict = {}  # handle -> markers recorded right after each stream_wait_event on it
_rec_lock = threading.Lock()


def _timeout_s(ms: int) -> float | None:
    if ms < -1:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, "timeout must be -1 or >= 0 ms")
    return None if ms == -1 else ms / 1000.0


@S.api(0)
def create_stream() -> Tuple[int, int]:
    """``stream, ret = acl.rt.create_stream()``: a stream in the current context (107002 if
    the thread has none)."""
    S.current_context()
    return S.add_handle("stream", Stream()), C.ACL_SUCCESS


@S.api(0)
def create_stream_with_config(priority: int, flag: int) -> Tuple[int, int]:
    """``stream, ret = acl.rt.create_stream_with_config(priority, flag)``: ``priority`` 0
    (highest) .. 7; the ``ACL_STREAM_*`` flags are accepted and have no effect."""
    prio, _ = S.cint(priority, "rt.create_stream_with_config"), S.cint(flag, "rt.create_stream_with_config")
    S.current_context()
    return S.add_handle("stream", Stream(priority=prio)), C.ACL_SUCCESS


@S.api()
def destroy_stream(stream: int) -> int:
    """``ret = acl.rt.destroy_stream(stream)``: waits for the stream's work, then destroys it."""
    h = S.ulong(stream, "rt.destroy_stream")
    S.get_handle("stream", h).destroy()
    S.drop_handle("stream", h)
    return C.ACL_SUCCESS


@S.api()
def destroy_stream_force(stream: int) -> int:
    """``ret = acl.rt.destroy_stream_force(stream)``: drops the stream's queued work."""
    h = S.ulong(stream, "rt.destroy_stream_force")
    S.get_handle("stream", h).destroy(force=True)
    S.drop_handle("stream", h)
    return C.ACL_SUCCESS


@S.api()
def synchronize_stream(stream: int) -> int:
    """``ret = acl.rt.synchronize_stream(stream)``; a failed task's code is returned here."""
    S.stream_of(S.ulong(stream, "rt.synchronize_stream")).synchronize()
    return C.ACL_SUCCESS


@S.api()
def synchronize_stream_with_timeout(stream: int, timeout: int) -> int:
    """``ret = acl.rt.synchronize_stream_with_timeout(stream, timeout)``: ``timeout`` in ms,
    -1 forever; 507046 (ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) when it passes, < -1: 107000."""
    fn = "rt.synchronize_stream_with_timeout"
    h, t = S.ulong(stream, fn), S.cint(timeout, fn)
    S.stream_of(h).synchronize(_timeout_s(t))
    return C.ACL_SUCCESS


@S.api(C.ACL_STREAM_STATUS_NOT_READY)
def stream_query(stream: int) -> Tuple[int, int]:
    """``status, ret = acl.rt.stream_query(stream)``: ``ACL_STREAM_STATUS_COMPLETE`` (0) or
    ``_NOT_READY`` (1)."""
    done = S.stream_of(S.ulong(stream, "rt.stream_query")).query()
    return (C.ACL_STREAM_STATUS_COMPLETE if done else C.ACL_STREAM_STATUS_NOT_READY), C.ACL_SUCCESS


@S.api()
def stream_wait_event(stream: int, event: int) -> int:
    """``ret = acl.rt.stream_wait_event(stream, event)``: later work on ``stream`` waits, on
    the device, for the work ``event`` recorded."""
    fn = "rt.stream_wait_event"
    s, e = S.ulong(stream, fn), S.ulong(event, fn)
    st, ev = S.stream_of(s), S.get_handle("event", e)
    with _rec_lock:
        flag = _ex_flags.get(e)
    if flag is not None and not flag & (C.ACL_EVENT_SYNC | C.ACL_EVENT_IPC):
        raise S.Fail(
            C.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "an event made by create_event_ex_with_flag without ACL_EVENT_SYNC cannot be waited on",
        )
    st.wait_event(ev)
    if flag is None:  # for query_event_wait_status: done when the stream passed the wait
        marker = Event()
        marker.record(st)
        with _rec_lock:
            pending = [m for m in _waits.get(e, ()) if not m.query()]
            pending.append(marker)
            _waits[e] = pending
    return C.ACL_SUCCESS


@S.api(0)
def create_event() -> Tuple[int, int]:
    """``event, ret = acl.rt.create_event()``: an event that can be recorded, waited on and
    timed (``event_elapsed_time``)."""
    S.current_context()
    return S.add_handle("event", Event(timing=True)), C.ACL_SUCCESS


@S.api(0)
def create_event_with_flag(flag: int) -> Tuple[int, int]:
    """``event, ret = acl.rt.create_event_with_flag(flag)``: timing only with
    ``ACL_EVENT_TIME_LINE`` (0x8); unknown flag bits: 100000."""
    f = S.uint(flag, "rt.create_event_with_flag")
    if f & ~_EVENT_FLAGS:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"unknown event flag bits {f:#x}")
    if f & C.ACL_EVENT_IPC:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, "ACL_EVENT_IPC events are made by create_event_ex_with_flag")
    S.current_context()
    return S.add_handle("event", _flagged_event(f)), C.ACL_SUCCESS


def _flagged_event(f: int) -> Event:
    if f & C.ACL_EVENT_IPC:
        if f & C.ACL_EVENT_TIME_LINE:
            raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, "ACL_EVENT_IPC events cannot have ACL_EVENT_TIME_LINE")
        return Event(interprocess=True)
    return Event(timing=bool(f & C.ACL_EVENT_TIME_LINE))


@S.api(0)
def create_event_ex_with_flag(flag: int) -> Tuple[int, int]:
    """``event, ret = acl.rt.create_event_ex_with_flag(flag)`` (aclrtCreateEventExWithFlag):
    ``flag`` is a bitmap of ``ACL_EVENT_SYNC`` (0x1: streams may wait on it),
    ``ACL_EVENT_CAPTURE_STREAM_PROGRESS`` (0x2), ``ACL_EVENT_TIME_LINE`` (0x8: timestamps), or
    ``ACL_EVENT_IPC`` (0x40) alone: an interprocess event whose handle
    ``ipc_get_event_handle`` gives. Other bits: 100000; IPC with another flag: 107000. As in
    ACL, such events refuse ``query_event`` and ``query_event_wait_status``, and
    ``stream_wait_event`` needs ``ACL_EVENT_SYNC`` (or IPC) (207000)."""
    f = S.uint(flag, "rt.create_event_ex_with_flag")
    if f & ~_EX_EVENT_FLAGS:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"unknown event flag bits {f:#x}")
    if f & C.ACL_EVENT_IPC and f != C.ACL_EVENT_IPC:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, "ACL_EVENT_IPC cannot be combined with other event flags")
    S.current_context()
    h = S.add_handle("event", _flagged_event(f))
    with _rec_lock:
        _ex_flags[h] = f
    return h, C.ACL_SUCCESS


@S.api(b"")
def ipc_get_event_handle(event: int) -> Tuple[bytes, int]:
    """``handle, ret = acl.rt.ipc_get_event_handle(event)`` (aclrtIpcGetEventHandle): the
    64-byte handle (``ACL_IPC_EVENT_HANDLE_SIZE``) of an ``ACL_EVENT_IPC`` event; 107000
    for another event."""
    ev = S.get_handle("event", S.ulong(event, "rt.ipc_get_event_handle"))
    if not ev.interprocess:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, "the event was not created with ACL_EVENT_IPC")
    return ev.ipc_handle(), C.ACL_SUCCESS


@S.api(0)
def ipc_open_event_handle(handle: bytes) -> Tuple[int, int]:
    """``event, ret = acl.rt.ipc_open_event_handle(handle)`` (aclrtIpcOpenEventHandle): an
    event of this process for another process's ``ACL_EVENT_IPC`` event; streams wait on
    its records with ``stream_wait_event``. 107000 for a malformed handle, 507022 for a
    stale one."""
    if not isinstance(handle, (bytes, bytearray, str)):
        raise TypeError("acl.rt.ipc_open_event_handle args parse failed")
    S.current_context()
    return S.add_handle("event", Event.from_ipc_handle(bytes(handle) if not isinstance(handle, str) else handle)), \
        C.ACL_SUCCESS


@S.api()
def record_event(event: int, stream: int) -> int:
    """``ret = acl.rt.record_event(event, stream)``: the event completes when the work
    submitted to ``stream`` so far has run."""
    fn = "rt.record_event"
    e, s = S.ulong(event, fn), S.ulong(stream, fn)
    ev, st = S.get_handle("event", e), S.stream_of(s)
    ev.record(st)
    with _rec_lock:
        _recorded.add(e)
    return C.ACL_SUCCESS


def _complete(h: int) -> bool:
    ev = S.get_handle("event", h)
    if ev.interprocess:  # recorded in any process: the shared slot knows
        return ev.query()
    with _rec_lock:
        recorded = h in _recorded
    return recorded and ev.query()


@S.api(C.ACL_EVENT_RECORDED_STATUS_NOT_READY)
def query_event_status(event: int) -> Tuple[int, int]:
    """``status, ret = acl.rt.query_event_status(event)``:
    ``ACL_EVENT_RECORDED_STATUS_COMPLETE`` (1) once recorded and reached, else ``_NOT_READY``
    (0) — also for an event never recorded."""
    done = _complete(S.ulong(event, "rt.query_event_status"))
    return (C.ACL_EVENT_RECORDED_STATUS_COMPLETE if done else C.ACL_EVENT_RECORDED_STATUS_NOT_READY), C.ACL_SUCCESS


def _refuse_ex(h: int, call: str) -> None:
    with _rec_lock:
        ex = h in _ex_flags
    if ex:
        raise S.Fail(C.ACL_ERROR_RT_FEATURE_NOT_SUPPORT, f"{call} does not take events made by create_event_ex_with_flag")


@S.api(C.ACL_EVENT_STATUS_NOT_READY)
def query_event(event: int) -> Tuple[int, int]:
    """``status, ret = acl.rt.query_event(event)`` (deprecated in ACL): ``ACL_EVENT_STATUS_
    COMPLETE`` (0) or ``ACL_EVENT_STATUS_NOT_READY`` (1); 207000 for an event made by
    ``create_event_ex_with_flag``."""
    h = S.ulong(event, "rt.query_event")
    S.get_handle("event", h)
    _refuse_ex(h, "query_event")
    done = _complete(h)
    return (C.ACL_EVENT_STATUS_COMPLETE if done else C.ACL_EVENT_STATUS_NOT_READY), C.ACL_SUCCESS


@S.api(C.ACL_EVENT_WAIT_STATUS_NOT_READY)
def query_event_wait_status(event: int) -> Tuple[int, int]:
    """``status, ret = acl.rt.query_event_wait_status(event)`` (aclrtQueryEventWaitStatus):
    ``ACL_EVENT_WAIT_STATUS_COMPLETE`` (0) once every ``stream_wait_event`` on ``event`` has
    run on its stream (also when there was none), else ``ACL_EVENT_WAIT_STATUS_NOT_READY``
    (1); 207000 for an event made by ``create_event_ex_with_flag``."""
    h = S.ulong(event, "rt.query_event_wait_status")
    S.get_handle("event", h)
    _refuse_ex(h, "query_event_wait_status")
    with _rec_lock:
        pending = [m for m in _waits.get(h, ()) if not m.query()]
        if pending:
            _waits[h] = pending
        else:
            _waits.pop(h, None)
    return (C.ACL_EVENT_WAIT_STATUS_NOT_READY if pending else C.ACL_EVENT_WAIT_STATUS_COMPLETE), C.ACL_SUCCESS


@S.api()
def synchronize_event(event: int) -> int:
    """``ret = acl.rt.synchronize_event(event)``: waits until the recorded work has run."""
    S.get_handle("event", S.ulong(event, "rt.synchronize_event")).synchronize()
    return C.ACL_SUCCESS


@S.api()
def synchronize_event_with_timeout(event: int, timeout: int) -> int:
    """``ret = acl.rt.synchronize_event_with_timeout(event, timeout)``: ms, -1 forever;
    507047 (ACL_ERROR_RT_EVENT_SYNC_TIMEOUT) when it passes."""
    fn = "rt.synchronize_event_with_timeout"
    e, t = S.ulong(event, fn), S.cint(timeout, fn)
    S.get_handle("event", e).synchronize(_timeout_s(t))
    return C.ACL_SUCCESS


@S.api(0.0)
def event_elapsed_time(start: int, end: int) -> Tuple[float, int]:
    """``ms, ret = acl.rt.event_elapsed_time(start, end)``: milliseconds between two recorded,
    completed timing events (107006/507006 otherwise)."""
    fn = "rt.event_elapsed_time"
    a, b = S.ulong(start, fn), S.ulong(end, fn)
    ms = S.get_handle("event", a).elapsed_time(S.get_handle("event", b))
    return struct.unpack("f", struct.pack("f", ms))[0], C.ACL_SUCCESS


@S.api()
def destroy_event(event: int) -> int:
    """``ret = acl.rt.destroy_event(event)``."""
    h = S.ulong(event, "rt.destroy_event")
    ev = S.drop_handle("event", h)
    if _san.active:  # synccheck: streams still waiting on it
        _npurt._sanitizer_event_destroyed(ev)
    with _rec_lock:
        _recorded.discard(h)
        _ex_flags.pop(h, None)
        _waits.pop(h, None)
    return C.ACL_SUCCESS
