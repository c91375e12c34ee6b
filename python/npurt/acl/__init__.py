"""``npurt.acl``: a pyacl-compatible front end, so code written for the card runs by
changing one import::

    import npurt.acl as acl                      # instead of: import acl

    ret = acl.init()
    ret = acl.rt.set_device(0)
    stream, ret = acl.rt.create_stream()
    dev_ptr, ret = acl.rt.malloc(nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    ret = acl.rt.memcpy(dev_ptr, nbytes, host.ctypes.data, nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE)

Calls return ``ret`` or ``(value..., ret)`` with ACL's integer codes and never raise for
runtime errors; wrong argument *types* raise TypeError, as pyacl's bindings do. ACL's
per-thread semantics are strict: a thread with no device or context set gets 107002.
The constants (``ACL_MEMCPY_HOST_TO_DEVICE``, ``ACL_ERROR_RT_CONTEXT_NULL``...) are here
and in ``npurt.acl.constants``. See docs/COMPAT.md for the coverage.
"""

from __future__ import annotations

import os
import sys
import threading

from .. import _npurt
from . import constants, dialect, mdl, media, prof, rt, util
from .constants import *  # noqa: F403
from .constants import ACL_ERROR_INVALID_FILE, ACL_ERROR_REPEAT_FINALIZE, ACL_ERROR_REPEAT_INITIALIZE, ACL_SUCCESS
from .dialect import *  # noqa: F403  (tutorial dialect, not in pyACL)
from .mdl_data import (  # noqa: F401  (pyacl has the data-buffer calls on acl itself)
    create_data_buffer,
    destroy_data_buffer,
    get_data_buffer_addr,
    get_data_buffer_size,
    get_data_buffer_size_v2,
    update_data_buffer,
)
from .prof import (  # noqa: F401  (pyacl has these on acl itself)
    ACL_AICORE_ARITHMETIC_UTILIZATION,
    ACL_AICORE_MEMORY_BANDWIDTH,
    ACL_AICORE_NONE,
    ACL_AICORE_PIPE_UTILIZATION,
    ACL_PROF_ACL_API,
    ACL_PROF_AICORE_METRICS,
    ACL_PROF_TASK_MEMORY,
    ACL_PROF_TASK_TIME,
)

__all__ = [
    "app_log", "constants", "finalize", "get_soc_name", "init", "mdl", "media", "prof", "rt", "util", "create_data_buffer",
    "destroy_data_buffer", "get_data_buffer_addr", "get_data_buffer_size", "get_data_buffer_size_v2", "update_data_buffer",
] + constants.__all__ + dialect.__all__ + prof.CONSTANTS

_init_lock = threading.Lock()
_initialized = False


def init(config_path: str | None = None) -> int:
    """``ret = acl.init(config_path=None)`` (``aclInit``): 100002 if already initialized;
    a path that does not exist: 100003. The configuration file's content is ignored."""
    global _initialized
    if config_path is not None and not isinstance(config_path, str):
        raise TypeError("acl.init args parse failed")
    if config_path and not os.path.isfile(config_path):
        return ACL_ERROR_INVALID_FILE
    with _init_lock:
        if _initialized:
            return ACL_ERROR_REPEAT_INITIALIZE
        _initialized = True
    return ACL_SUCCESS


def finalize() -> int:
    """``ret = acl.finalize()`` (``aclFinalize``): 100037 if not initialized. Devices are
    not torn down here (``acl.rt.reset_device`` does that, or process exit)."""
    global _initialized
    with _init_lock:
        if not _initialized:
            return ACL_ERROR_REPEAT_FINALIZE
        _initialized = False
    return ACL_SUCCESS


def get_soc_name() -> str:
    """``name = acl.get_soc_name()`` (``aclrtGetSocName``): npurt's SoC name."""
    from .. import get_device_properties

    return str(get_device_properties(0).get("soc_name", "npurt"))


def app_log(log_level: int, message: str) -> None:
    """``acl.app_log(log_level, message)`` (``aclAppLog``): logs ``message`` in module
    ``APP`` through the runtime's logger, beside the runtime's own records (Python logger
    ``npurt.app``, the plog file and stdout sinks), as from the caller's file and line.
    ``log_level`` is ``ACL_DEBUG`` (0) … ``ACL_ERROR`` (3) and obeys the log levels
    (``ASCEND_GLOBAL_LOG_LEVEL``, ``ASCEND_MODULE_LOG_LEVEL=APP=…``, ``npurt.set_log_level``);
    other values log nothing, as ACL ignores them."""
    if isinstance(log_level, bool) or not isinstance(log_level, int) or not isinstance(message, str):
        raise TypeError("acl.app_log args parse failed")
    if not constants.ACL_DEBUG <= log_level <= constants.ACL_ERROR:
        return
    caller = sys._getframe(1)
    _npurt._log_record("APP", log_level, message, caller.f_code.co_filename, caller.f_lineno)
