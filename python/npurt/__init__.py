"""npurt: an Ascend-NPU-style device runtime (AscendCL ``aclrt*`` semantics) on the CPU.

>>> import npurt
>>> with npurt.Device(0) as dev:
...     s = npurt.Stream(priority=0)
...     npurt.kernels.busy(0.001, stream=s)
...     s.synchronize()
"""

from __future__ import annotations

import atexit as _atexit

from . import (
    _npurt,
    array,
    ipc,  # noqa: E402
    kernels,
    logs,
    memory,
    nn,
    profiler,  # noqa: E402,I001  (after the runtime types it records)
    random,
)
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
    isa_info,
    reset_device,
    set_device,
    synchronize,
)
from .event import Event
from .exceptions import *  # noqa: F403
from .exceptions import Error, OutOfMemoryError, WaitTimeoutError
from .ipc import *  # noqa: F403  (ipc_import, ipc_import_array, set_ipc_shareable, ...)
from .logs import get_log_level, set_log_level
from .memory import *  # noqa: F403  (DeviceBuffer, malloc, memcpy, memory_stats, ...)
from .profiler import profile
from .stream import Stream, current_stream, default_stream, stream

__version__ = _npurt.__version__

__all__ = array.__all__ + memory.__all__ + ipc.__all__ + [
    "Context",
    "Device",
    "Error",
    "Event",
    "OutOfMemoryError",
    "Stream",
    "WaitTimeoutError",
    "configure",
    "current_device",
    "current_stream",
    "default_stream",
    "device_count",
    "get_config",
    "get_device_properties",
    "get_log_level",
    "ipc",
    "isa_info",
    "kernels",
    "live_counts",
    "logs",
    "memory",
    "nn",
    "profile",
    "profiler",
    "random",
    "reset_device",
    "set_device",
    "set_log_level",
    "stream",
    "synchronize",
]

live_counts = _npurt.live_counts
ipc._register_reducers()

# Runtime logs to `logging` (its exit flush is registered first, so it runs after the
# runtime's teardown below and delivers the teardown's warnings).
logs.start()

# Finish queued work and stop runtime threads while the interpreter can still run
# host callbacks.
from . import sanitizer  # noqa: E402  (NPURT_SANITIZER: on before any allocation of the program)

sanitizer._from_env()  # its exit summary runs after the teardown below
_atexit.register(_npurt._shutdown)
sanitizer._register_leak_check()  # before the teardown: what is still allocated leaks

from . import _status  # noqa: E402  (npurt-smi's per-process record)

_status.start()

from .model import Model  # noqa: E402,F401  (its lowerings call the kernels above)

__all__.append("Model")
