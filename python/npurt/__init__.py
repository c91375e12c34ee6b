"""npurt: an Ascend-NPU-style device runtime (AscendCL ``aclrt*`` semantics) on the CPU.

>>> import npurt
>>> with npurt.Device(0) as dev:
...     s = npurt.Stream(priority=0)
...     npurt.kernels.busy(0.001, stream=s)
...     s.synchronize()
"""

from __future__ import annotations

import atexit as _atexit

from . import _npurt, array, kernels, memory
from .array import *  # noqa: F403
from .array import DeviceArray, to_device  # noqa: F401  (explicit for type checkers)
from .context import Context
from .device import (
    Device,
    configure,
    current_device,
    device_count,
    get_config,
    get_device_properties,
    reset_device,
    set_device,
    synchronize,
)
from .event import Event
from .exceptions import *  # noqa: F403
from .exceptions import Error, OutOfMemoryError, WaitTimeoutError
from .memory import (
    DeviceBuffer,
    HostBuffer,
    MemPool,
    empty_cache,
    get_per_process_memory_fraction,
    host_empty_cache,
    host_memory_stats,
    malloc,
    malloc_host,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memcpy,
    memcpy_async,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    memset,
    memset_async,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .stream import Stream, current_stream, default_stream, stream

__version__ = _npurt.__version__

__all__ = array.__all__ + [
    "Context",
    "Device",
    "DeviceBuffer",
    "Error",
    "Event",
    "HostBuffer",
    "MemPool",
    "OutOfMemoryError",
    "Stream",
    "WaitTimeoutError",
    "configure",
    "current_device",
    "current_stream",
    "default_stream",
    "device_count",
    "empty_cache",
    "get_config",
    "get_device_properties",
    "get_per_process_memory_fraction",
    "host_empty_cache",
    "host_memory_stats",
    "kernels",
    "live_counts",
    "malloc",
    "malloc_host",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memcpy",
    "memcpy_async",
    "memory",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "memset",
    "memset_async",
    "reset_device",
    "reset_peak_memory_stats",
    "set_device",
    "set_per_process_memory_fraction",
    "stream",
    "synchronize",
]

live_counts = _npurt.live_counts

# Finish queued work and stop runtime threads while the interpreter can still run
# host callbacks.
_atexit.register(_npurt._shutdown)
