"""``npurt.npu``: the ``torch.npu`` (torch_npu) device, stream, event and memory API over
npurt's own objects, so code written as ``torch.npu.X`` runs as ``npurt.npu.X``::

    from npurt import npu

    npu.set_device("npu:0")
    s = npu.Stream(priority=-1)                  # high priority
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    with npu.stream(s):
        start.record()
        ...                                      # npurt kernels / copies on s
        end.record()
    end.synchronize()
    print(start.elapsed_time(end), "ms", npu.memory_allocated(), npu.max_memory_allocated())

Thin wrappers: ``npu.Stream(...)`` *is* an ``npurt.Stream`` and ``npu.Event(...)`` an
``npurt.Event`` (``isinstance`` works both ways), so they go straight into
``npurt.kernels.*(stream=...)`` and ``npurt.memcpy_async``. Devices may be given as an int,
``"npu"``, ``"npu:N"``, an ``npurt.Device`` or None (the current device), as in torch.

Priorities follow torch: lower is higher, default 0, and torch_npu has two levels — any
``priority < 0`` is npurt's highest (ACL 0) and ``priority >= 0`` the default level (ACL 3),
so a "high priority" stream's work is picked first by the AI cores.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional

from . import device as _dev
from . import memory as _mem
from . import profiler  # torch_npu.profiler's names: profile, ProfilerActivity, schedule, ...
from .event import Event as _Event
from .stream import Stream as _Stream
from .stream import current_stream as _current_stream
from .stream import default_stream as _default_stream
from .stream import stream as _stream_ctx

__all__ = [
    "Event",
    "Stream",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "empty_cache",
    "get_device_name",
    "get_device_properties",
    "is_available",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "profiler",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_peak_memory_stats",
    "set_device",
    "set_per_process_memory_fraction",
    "stream",
    "synchronize",
]

#: ACL priority used for torch priority >= 0 (npurt's range is 0 = highest .. 7).
DEFAULT_ACL_PRIORITY = 3


def _index(device: Any, optional: bool = True) -> Optional[int]:
    """torch's device argument -> npurt device id (None: the current device)."""
    if device is None:
        if optional:
            return None
        return _dev.current_device()
    if isinstance(device, str):
        kind, _, idx = device.partition(":")
        if kind != "npu" or (idx and not idx.isdigit()):
            raise ValueError(f"expected an NPU device such as 'npu' or 'npu:0', got {device!r}")
        return int(idx) if idx else _dev.current_device()
    if isinstance(device, _dev.Device):
        return device.id
    index = getattr(device, "index", None)  # torch.device("npu", 1)
    if index is not None and not callable(index):
        return int(index)
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device must be an int, a string like 'npu:0' or None, not {type(device).__name__}")
    return device


class _StreamMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _Stream)

    def __call__(cls, device: Any = None, priority: int = 0, **kwargs: Any) -> _Stream:
        acl_priority = 0 if priority < 0 else DEFAULT_ACL_PRIORITY
        return _Stream(priority=acl_priority, device=_index(device))


class Stream(metaclass=_StreamMeta):
    """``torch.npu.Stream(device=None, priority=0)``: returns an ``npurt.Stream`` (methods
    ``query``, ``synchronize``, ``wait_event``, ``wait_stream``, ``record_event``)."""


class _EventMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _Event)

    def __call__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, **kwargs: Any
    ) -> _Event:
        if interprocess:
            raise NotImplementedError("interprocess events are not supported by npurt")
        return _Event(enable_timing=bool(enable_timing))


class Event(metaclass=_EventMeta):
    """``torch.npu.Event(enable_timing=False, blocking=False, interprocess=False)``: returns
    an ``npurt.Event`` (``record``, ``query``, ``synchronize``, ``wait``, ``elapsed_time`` in
    ms)."""


def is_available() -> bool:
    """Always True: npurt's virtual NPUs are always there."""
    return True


def device_count() -> int:
    return _dev.device_count()


def current_device() -> int:
    return _dev.current_device()


def set_device(device: Any) -> None:
    """``torch.npu.set_device``: makes the device current on this thread."""
    _dev.set_device(_index(device, optional=False))


@contextlib.contextmanager
def device(device: Any) -> Iterator[None]:
    """``with torch.npu.device(d):`` makes ``d`` current and restores the previous device."""
    prev = _dev.current_device()
    _dev.set_device(_index(device, optional=False))
    try:
        yield
    finally:
        _dev.set_device(prev)


def synchronize(device: Any = None) -> None:
    """Waits for all work on the device (the current one by default)."""
    _dev.synchronize(_index(device))


def get_device_properties(device: Any = None) -> Dict[str, Any]:
    return _dev.get_device_properties(_index(device, optional=False))


def get_device_name(device: Any = None) -> str:
    return str(get_device_properties(device)["name"])


def stream(s: Optional[_Stream]) -> Any:
    """``with torch.npu.stream(s):`` — ``s`` is the current stream inside (None: no-op)."""
    return _stream_ctx(s)


def current_stream(device: Any = None) -> _Stream:
    return _current_stream(_index(device))


def default_stream(device: Any = None) -> _Stream:
    return _default_stream(_index(device))


def memory_allocated(device: Any = None) -> int:
    return _mem.memory_allocated(_index(device))


def max_memory_allocated(device: Any = None) -> int:
    return _mem.max_memory_allocated(_index(device))


def memory_reserved(device: Any = None) -> int:
    return _mem.memory_reserved(_index(device))


def max_memory_reserved(device: Any = None) -> int:
    return _mem.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    _mem.reset_peak_memory_stats(_index(device))


def memory_stats(device: Any = None) -> Dict[str, int]:
    return _mem.memory_stats(_index(device))


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """``torch.npu.memory_summary(device=None, abbreviated=False)`` (``abbreviated`` is
    accepted; npurt's summary is always the short form)."""
    return _mem.memory_summary(_index(device))


def mem_get_info(device: Any = None) -> tuple:
    """``(free, total)`` bytes of the device."""
    return _mem.mem_get_info(_index(device))


def empty_cache() -> None:
    """Releases the caching allocator's unused cached memory of the current device."""
    _mem.empty_cache()


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Caps this process's memory on the device at ``fraction`` of its capacity (beyond it:
    ``npurt.OutOfMemoryError``, also a ``MemoryError``)."""
    _mem.set_per_process_memory_fraction(fraction, _index(device))
