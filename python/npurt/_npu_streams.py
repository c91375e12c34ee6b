"""The stream half of ``npurt.npu``: torch's ``Stream``, ``Event``, ``StreamContext`` /
``stream()``, ``set_stream``, and the tutorial dialect's ``stream(priority=...)``,
``H2D`` and ``D2H``. ``npurt.npu`` re-exports everything here."""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional

from . import _npurt
from .event import Event as _Event
from .exceptions import InvalidTypeError
from .stream import Stream as _Stream

#: ACL priority used for torch priority >= 0 (npurt's range is 0 = highest .. 7).
DEFAULT_ACL_PRIORITY = 3


def _acl_priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidTypeError(f"priority must be an int, not {type(priority).__name__}")
    return 0 if priority < 0 else DEFAULT_ACL_PRIORITY


class _StreamMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _Stream)

    def __call__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> _Stream:
        from .npu import _index

        return _Stream(priority=_acl_priority(priority), device=_index(device))


class Stream(metaclass=_StreamMeta):
    """``torch.npu.Stream(device=None, priority=0)``: returns an ``npurt.Stream`` (methods
    ``query``, ``synchronize``, ``wait_event``, ``wait_stream``, ``record_event``; torch's
    ``npu_stream``, ``stream_id``, ``device_index``)."""


class _EventMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _Event)

    def __call__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, **kwargs: Any
    ) -> _Event:
        if interprocess:
            return _Event(enable_timing=bool(enable_timing), interprocess=True)
        return _Event(enable_timing=bool(enable_timing))


class Event(metaclass=_EventMeta):
    """``torch.npu.Event(enable_timing=False, blocking=False, interprocess=False)``: returns
    an ``npurt.Event`` (``record``, ``query``, ``synchronize``, ``wait``, ``elapsed_time`` in
    ms; ``ipc_handle()`` for an interprocess one)."""

    @staticmethod
    def from_ipc_handle(device: Any, handle: bytes) -> _Event:
        """``torch.npu.Event.from_ipc_handle(device, handle)``: opens another process's
        interprocess event."""
        from .npu import _index

        return _Event.from_ipc_handle(handle, _index(device, optional=True))


class StreamContext:
    """``torch.npu.StreamContext(stream)``: inside, ``stream`` is the current stream (None:
    nothing changes). A stream of another device also makes that device current inside the
    block, because npurt's kernels launch on the current device's current stream. Entering
    returns the stream."""

    def __init__(self, stream: Optional[_Stream]) -> None:
        if stream is not None and not isinstance(stream, _Stream):
            raise InvalidTypeError(f"expected an npurt.npu.Stream or None, not {type(stream).__name__}")
        self.stream = stream
        self._prev_device: Optional[int] = None

    def __enter__(self) -> Optional[_Stream]:
        s = self.stream
        if s is None:
            return None
        prev = _npurt.current_device()
        if s.device != prev:
            _npurt.set_device(s.device)
            self._prev_device = prev
        try:
            s.__enter__()
        except BaseException:
            self._restore_device()
            raise
        return s

    def __exit__(self, *exc: Any) -> bool:
        if self.stream is not None:
            self.stream.__exit__(*exc)
            self._restore_device()
        return False

    def _restore_device(self) -> None:
        if self._prev_device is not None:
            _npurt.set_device(self._prev_device)
            self._prev_device = None


def stream(stream: Optional[_Stream] = None, *, priority: Optional[int] = None, device: Any = None) -> StreamContext:
    """``with torch.npu.stream(s):`` runs the block with ``s`` current (None: a no-op).

    Tutorial dialect (not in torch_npu): ``with npu.stream(priority=0) as s:`` makes a new
    stream with that torch priority (``< 0`` high, ``>= 0`` normal) on ``device`` and runs
    the block on it."""
    if priority is not None:
        if stream is not None:
            raise InvalidTypeError("stream() takes a stream or priority=, not both")
        stream = Stream(device=device, priority=priority)
    return StreamContext(stream)


_set_streams = threading.local()


def set_stream(stream: Optional[_Stream]) -> None:
    """``torch.npu.set_stream(s)``: ``s`` stays the current stream of its device on this
    thread (until another ``set_stream``); None does nothing, as in torch. Prefer
    ``with stream(s):``, as torch's documentation does."""
    if stream is None:
        return
    if not isinstance(stream, _Stream):
        raise InvalidTypeError(f"set_stream takes an npurt.npu.Stream, not {type(stream).__name__}")
    table: Dict[int, _Stream] = getattr(_set_streams, "by_device", None) or {}
    _set_streams.by_device = table
    prev_dev = _npurt.current_device()
    switch = stream.device != prev_dev
    if switch:
        _npurt.set_device(stream.device)
    try:
        old = table.pop(stream.device, None)
        if old is not None:
            old.__exit__(None, None, None)
        stream.__enter__()
        table[stream.device] = stream
    finally:
        if switch:
            _npurt.set_device(prev_dev)


def H2D(src: Any, dst: Any = None, stream: Optional[_Stream] = None) -> Any:
    """Tutorial dialect (not in torch_npu): host → device on ``stream``'s copy engine.

    ``dst=None``: a new device array holding ``src`` (``npurt.to_device(src, stream=)``);
    a DeviceArray ``dst``: ``src`` is copied into it (``dst.copy_(src, stream=)``) and
    ``dst`` is returned. Pinned sources (HostBuffer views) copy asynchronously; pageable
    ones are staged before the call returns (ACL's rule)."""
    from .array import DeviceArray, to_device

    if dst is None:
        return to_device(src, stream=stream)
    if not isinstance(dst, DeviceArray):
        raise InvalidTypeError(f"H2D: dst must be an npurt.DeviceArray or None, not {type(dst).__name__}")
    return dst.copy_(src, stream=stream)


def D2H(src: Any, dst: Any = None, stream: Optional[_Stream] = None) -> Any:
    """Tutorial dialect (not in torch_npu): device → host on ``stream``'s copy engine.

    ``dst=None``: a new numpy array (the call waits for the copy); a numpy array or
    HostBuffer ``dst``: ``src.to_host(out=dst, stream=)`` — into pinned memory it returns at
    once (synchronize ``stream`` before reading), into pageable memory after the copy."""
    from .array import DeviceArray

    if not isinstance(src, DeviceArray):
        raise InvalidTypeError(f"D2H: src must be an npurt.DeviceArray, not {type(src).__name__}")
    if dst is None:
        return src.to_host(stream=stream)
    return src.to_host(out=dst, stream=stream)
