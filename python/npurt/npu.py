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

The RNG names (``manual_seed``, ``get_rng_state``...) drive the per-device generators of
``npurt.random``. ``stream(priority=...)``, ``H2D`` and ``D2H`` are the tutorial dialect
(not in torch_npu; see docs/COMPAT.md).
"""

from __future__ import annotations

import operator
from typing import Any, Dict, Optional

from . import (
    _npurt,
    profiler,  # torch_npu.profiler's names: profile, ProfilerActivity, schedule, ...
)
from . import device as _dev
from . import memory as _mem
from ._npu_streams import (
    D2H,
    DEFAULT_ACL_PRIORITY,
    H2D,
    Event,
    Stream,
    StreamContext,
    set_stream,
    stream,
)
from .exceptions import InvalidTypeError, InvalidValueError
from .random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .stream import Stream as _Stream
from .stream import current_stream as _current_stream
from .stream import default_stream as _default_stream

__all__ = [
    "D2H",
    "DEFAULT_ACL_PRIORITY",
    "Event",
    "H2D",
    "Stream",
    "StreamContext",
    "current_blas_handle",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "get_sync_debug_mode",
    "init",
    "initial_seed",
    "ipc_collect",
    "is_available",
    "is_bf16_supported",
    "is_current_stream_capturing",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "profiler",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_per_process_memory_fraction",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "set_sync_debug_mode",
    "stream",
    "synchronize",
]


def _index(device: Any, optional: bool = True) -> Optional[int]:
    """torch_npu's ``_get_device_index``: a device argument -> npurt device id (None, or a
    negative int, with ``optional``: the current device... as None; without: its id)."""
    if device is None or (isinstance(device, int) and not isinstance(device, bool) and device < 0):
        return None if optional else _dev.current_device()
    if isinstance(device, str):
        kind, sep, idx = device.partition(":")
        if kind != "npu":
            if kind.startswith("npu") or (sep and not kind):
                raise InvalidValueError(f"Invalid device string: {device!r}")
            raise InvalidValueError(f"Expected a npu device, but got: {device}")
        if sep and not idx.isdigit():
            raise InvalidValueError(f"Invalid device string: {device!r}")
        return int(idx) if idx else (None if optional else _dev.current_device())
    if isinstance(device, _dev.Device):
        return device.id
    kind = getattr(device, "type", None)  # torch.device("npu", 1)
    if isinstance(kind, str):
        if kind != "npu":
            raise InvalidValueError(f"Expected a npu device, but got: {device}")
        index = getattr(device, "index", None)
        return int(index) if index is not None else (None if optional else _dev.current_device())
    try:
        if isinstance(device, bool):
            raise TypeError
        return operator.index(device)
    except TypeError:
        raise InvalidTypeError(
            f"device must be an int, a string like 'npu:0' or None, not {type(device).__name__}"
        ) from None


_get_device_index = _index


def is_available() -> bool:
    """Always True: npurt's virtual NPUs are always there."""
    return True


def is_initialized() -> bool:
    """True once some device has been started (by use, ``set_device`` or ``init()``)."""
    return any(_npurt.Device(i).is_active for i in range(_dev.device_count()))


def init() -> None:
    """Starts the current device now instead of at first use (torch's lazy init)."""
    _dev.set_device(_dev.current_device())


def device_count() -> int:
    return _dev.device_count()


def current_device() -> int:
    return _dev.current_device()


def set_device(device: Any) -> None:
    """``torch.npu.set_device``: makes the device current on this thread."""
    _dev.set_device(_index(device, optional=False))


class device:
    """``torch.npu.device(d)``: ``with npu.device(1):`` makes device 1 current inside the
    block and restores the previous device after; ``d`` None or negative changes nothing.
    An instance is a plain object (``isinstance(x, npu.device)``); ``idx`` is the index."""

    def __init__(self, device: Any) -> None:
        self.idx = _index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx is None:
            return
        self.prev_idx = _dev.current_device()
        if self.prev_idx != self.idx:
            _dev.set_device(self.idx)

    def __exit__(self, *exc: Any) -> bool:
        if self.idx is not None and self.prev_idx != self.idx:
            _dev.set_device(self.prev_idx)
        return False

    def __repr__(self) -> str:
        return f"<npurt.npu.device idx={self.idx}>"


class device_of(device):
    """``torch.npu.device_of(obj)``: ``device`` of an object's ``.device`` (a DeviceArray,
    Stream or Event); objects without one change nothing."""

    def __init__(self, obj: Any) -> None:
        dev = getattr(obj, "device", None)
        super().__init__(dev if isinstance(dev, int) and not isinstance(dev, bool) else None)


def synchronize(device: Any = None) -> None:
    """Waits for all work on the device (the current one by default)."""
    _dev.synchronize(_index(device))


def get_device_properties(device: Any = None) -> Dict[str, Any]:
    return _dev.get_device_properties(_index(device, optional=False))


def get_device_name(device: Any = None) -> str:
    return str(get_device_properties(device)["name"])


def get_device_capability(device: Any = None) -> None:
    """None, as torch_npu returns: CANN has no compute-capability pair."""
    _index(device)
    return None


def current_stream(device: Any = None) -> _Stream:
    return _current_stream(_index(device))


def default_stream(device: Any = None) -> _Stream:
    return _default_stream(_index(device))


# -- names torch.cuda / torch.npu code probes; npurt has nothing behind them -----------------

_sync_debug_mode = 0


def current_blas_handle() -> int:
    """0: npurt's GEMM needs no handle (torch returns the cuBLAS handle)."""
    return 0


def ipc_collect() -> None:
    """No-op: npurt keeps no IPC memory to collect."""


def is_bf16_supported() -> bool:
    """True: every npurt kernel takes bfloat16."""
    return True


def is_current_stream_capturing() -> bool:
    """False: npurt has no graph capture."""
    return False


def set_sync_debug_mode(debug_mode: Any) -> None:
    """Accepted and remembered (0/"default", 1/"warn", 2/"error"); npurt does not warn on
    synchronizing calls."""
    global _sync_debug_mode
    names = {"default": 0, "warn": 1, "error": 2}
    mode = names.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if mode not in (0, 1, 2):
        raise InvalidValueError(f"invalid sync debug mode {debug_mode!r}: 0/'default', 1/'warn' or 2/'error'")
    _sync_debug_mode = int(mode)


def get_sync_debug_mode() -> int:
    return _sync_debug_mode


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
