"""``acl.rt`` user-thread callbacks: ``subscribe_report``, ``launch_callback``,
``process_report``, ``unsubscribe_report`` (``aclrtSubscribeReport`` ...).

ACL's model: a user thread subscribes to a stream and loops on ``process_report(timeout)``;
``launch_callback(fn, user_data, block_type, stream)`` queues a task on the stream which,
when the stream reaches it, hands ``fn(user_data)`` to the subscribed thread. With
``ACL_CALLBACK_BLOCK`` later work on the stream waits until the callback has run; with
``ACL_CALLBACK_NO_BLOCK`` it does not. Thread ids are ``threading.get_ident()`` values
(what ``acl.util.start_thread`` returns: the pthread id).

Codes (hicann/runtime ``callback`` implementation and ``rt_error_codes.h``): a bad
``block_type`` or ``timeout`` (0 or < -1) is 100000; ``process_report`` in a thread with no
subscription is 107012 (ACL_ERROR_RT_THREAD_SUBSCRIBE) and a timeout with nothing to run is
507012 (ACL_ERROR_RT_REPORT_TIMEOUT); a stream subscribed twice, or unsubscribed by a thread
that does not hold it, 107011; launching on a stream nobody subscribed, 107015.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from typing import Any, Dict, Optional, Set

from .. import _npurt
from .. import sanitizer as _san
from . import _state as S
from . import constants as C

__all__ = ["launch_callback", "process_report", "subscribe_report", "unsubscribe_report"]

_lock = threading.Condition()
_stream_sub: Dict[int, int] = {}  # npurt stream id -> subscribed thread id
_thread_streams: Dict[int, Set[int]] = {}  # thread id -> stream ids
_thread_device: Dict[int, int] = {}
_queues: Dict[int, "queue.SimpleQueue[_Report]"] = {}


class _Report:
    """One callback on its way from a stream to the subscribed thread."""

    __slots__ = ("fn", "data", "block", "state", "done", "task")

    def __init__(self, fn: Any, data: Any, block: bool) -> None:
        self.fn, self.data, self.block = fn, data, block
        self.task: Any = None  # the sanitizer's: the stream task that handed it over
        self.state = "queued"  # -> "running" (the thread took it) or "cancelled"
        self.done = threading.Event()


def _queue(tid: int) -> "queue.SimpleQueue[_Report]":
    with _lock:
        q = _queues.get(tid)
        if q is None:
            q = _queues[tid] = queue.SimpleQueue()
        return q


def _thread_alive(tid: int) -> bool:
    return any(t.ident == tid and t.is_alive() for t in threading.enumerate())


def _claim(r: _Report, new: str) -> bool:
    with _lock:
        if r.state != "queued":
            return False
        r.state = new
        return True


def _deliver(sid: int, r: _Report) -> None:
    """Runs on npurt's host-callback thread when the stream reaches the callback task."""
    with _lock:
        tid = _stream_sub.get(sid)
    if tid is None:
        return  # unsubscribed meanwhile: nobody can run it
    if _san.active:  # racecheck: the subscribed thread runs it as this stream task
        r.task = _npurt._sanitizer_task()
    _queue(tid).put(r)
    with _lock:
        _lock.notify_all()
    if not r.block:
        return
    while not r.done.wait(0.05):
        with _lock:
            gone = _stream_sub.get(sid) != tid
        if (gone or not _thread_alive(tid)) and _claim(r, "cancelled"):
            return  # the subscriber went away before taking it: do not block forever


@S.api()
def subscribe_report(thread_id: int, stream: int) -> int:
    """``ret = acl.rt.subscribe_report(thread_id, stream)``: callbacks launched on ``stream``
    run in thread ``thread_id`` (when it calls ``process_report``). One thread may serve
    several streams of one device; a stream has at most one thread."""
    fn = "rt.subscribe_report"
    tid, h = S.ulong(thread_id, fn), S.ulong(stream, fn)
    if tid == 0:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "thread id 0")
    st = S.stream_of(h)
    with _lock:
        if st.id in _stream_sub:
            raise S.Fail(C.ACL_ERROR_RT_STREAM_SUBSCRIBE, "stream already subscribed")
        if _thread_device.get(tid, st.device) != st.device:
            raise S.Fail(C.ACL_ERROR_RT_THREAD_SUBSCRIBE, "thread serves another device")
        _stream_sub[st.id] = tid
        _thread_streams.setdefault(tid, set()).add(st.id)
        _thread_device[tid] = st.device
        _lock.notify_all()
    return C.ACL_SUCCESS


@S.api()
def unsubscribe_report(thread_id: int, stream: int) -> int:
    """``ret = acl.rt.unsubscribe_report(thread_id, stream)``: callbacks of ``stream`` are no
    longer handed to the thread (already handed ones still run in its next
    ``process_report``; a blocking one nobody will run releases the stream)."""
    fn = "rt.unsubscribe_report"
    tid, h = S.ulong(thread_id, fn), S.ulong(stream, fn)
    st = S.stream_of(h)
    with _lock:
        if _stream_sub.get(st.id) != tid:
            raise S.Fail(C.ACL_ERROR_RT_STREAM_SUBSCRIBE, "stream not subscribed by this thread")
        del _stream_sub[st.id]
        streams = _thread_streams.get(tid, set())
        streams.discard(st.id)
        if not streams:
            _thread_streams.pop(tid, None)
            _thread_device.pop(tid, None)
        _lock.notify_all()
    return C.ACL_SUCCESS


@S.api()
def launch_callback(fn: Any, user_data: Any, block_type: int, stream: int) -> int:
    """``ret = acl.rt.launch_callback(fn, user_data, block_type, stream)``: queues
    ``fn(user_data)`` on ``stream`` for its subscribed thread."""
    name = "rt.launch_callback"
    block, h = S.cint(block_type, name), S.ulong(stream, name)
    if not callable(fn):
        raise TypeError("parameter must be callable")
    if block not in (C.ACL_CALLBACK_NO_BLOCK, C.ACL_CALLBACK_BLOCK):
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"block_type {block} is not an aclrtCallbackBlockType")
    st = S.stream_of(h)
    with _lock:
        if st.id not in _stream_sub:
            raise S.Fail(C.ACL_ERROR_RT_STREAM_NO_CB_REG, "no thread subscribed to this stream")
    st.launch_host_func(_deliver, st.id, _Report(fn, user_data, block == C.ACL_CALLBACK_BLOCK))
    return C.ACL_SUCCESS


def _run(r: _Report) -> None:
    if not _claim(r, "running"):
        return
    prev = _npurt._sanitizer_run_as(r.task) if r.task is not None else None
    try:
        r.fn(r.data)
    except Exception:
        traceback.print_exc()  # as pyacl: the error is printed, the stream goes on
    finally:
        if r.task is not None:
            _npurt._sanitizer_run_as(prev)
        r.done.set()


def _next_report(tid: int, deadline: Optional[float]) -> Optional[_Report]:
    q = _queue(tid)
    while True:
        try:
            return q.get_nowait()
        except queue.Empty:
            pass
        with _lock:
            if not q.empty():
                continue
            if tid not in _thread_streams and deadline is None:
                return None
            left = 0.05 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return None
            _lock.wait(min(left, 0.05))


@S.api()
def process_report(timeout: int) -> int:
    """``ret = acl.rt.process_report(timeout)``: runs, in the calling thread, the callbacks
    handed to it (waiting up to ``timeout`` ms, -1 forever, for the first one)."""
    t = S.cint(timeout, "rt.process_report")
    if t == 0 or t < -1:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "timeout must be -1 or > 0 ms")
    tid = threading.get_ident()
    deadline = None if t == -1 else time.monotonic() + t / 1000.0
    r = _next_report(tid, deadline)
    if r is None:
        with _lock:
            subscribed = tid in _thread_streams
        return C.ACL_ERROR_RT_REPORT_TIMEOUT if subscribed else C.ACL_ERROR_RT_THREAD_SUBSCRIBE
    _run(r)
    q = _queue(tid)
    while True:
        try:
            _run(q.get_nowait())
        except queue.Empty:
            return C.ACL_SUCCESS
