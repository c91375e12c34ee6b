"""``acl.rt`` device health and errors: ``query_device_status``,
``get_device_utilization_rate``, ``peek_at_last_error``, ``get_last_error``.

* The last error is per thread, as ACL's ``ACL_RT_THREAD_LEVEL``: every ``acl.rt`` call
  that fails records its code (``_state.api``); ``peek_at_last_error`` reads it,
  ``get_last_error`` reads and resets it to ``ACL_SUCCESS``. Successful calls leave it.
* Utilisation is measured, not made up: the AI-core workers' busy time over a short
  sampling window (``npurt_core::Device::utilization``, the one rule npurt-smi uses too).
  The cube and vector units are the same AI cores on npurt, so both report it; AI CPU and
  memory utilisation are not measured: -1, which is what ACL reports for a unit a product
  lacks (and always for memory).
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

from .. import _npurt
from ..exceptions import ForkedProcessError
from . import _state as S
from . import constants as C

__all__ = ["get_device_utilization_rate", "get_last_error", "peek_at_last_error", "query_device_status"]

#: Sampling window of get_device_utilization_rate (milliseconds).
UTILIZATION_WINDOW_MS = 50


def _device_arg(device_id: Any, fn: str) -> int:
    d = S.cint(device_id, fn)
    n = _npurt.device_count()
    if not 0 <= d < n:
        raise S.Fail(C.ACL_ERROR_RT_INVALID_DEVICEID, f"device {d} out of range [0, {n})")
    return d


@S.api(C.ACL_RT_DEVICE_STATUS_END)
def query_device_status(device_id: int) -> Tuple[int, int]:
    """``device_status, ret = acl.rt.query_device_status(device_id)``
    (``aclrtQueryDeviceStatus``): ``ACL_RT_DEVICE_STATUS_NORMAL`` (0) for a usable device,
    ``..._ABNORMAL`` (1) where the runtime cannot run (a forked child); an id out of range
    is 107001 with ``ACL_RT_DEVICE_STATUS_END``."""
    d = _device_arg(device_id, "rt.query_device_status")
    try:
        _npurt._device_status(d)
    except ForkedProcessError:
        return C.ACL_RT_DEVICE_STATUS_ABNORMAL, C.ACL_SUCCESS
    return C.ACL_RT_DEVICE_STATUS_NORMAL, C.ACL_SUCCESS


def _utilization(cube: int) -> Dict[str, int]:
    return {
        "cube_utilization": cube,
        "vector_utilization": cube,
        "aicpu_utilization": C.ACL_RT_UTILIZATION_NOT_SUPPORT,
        "memory_utilization": C.ACL_RT_UTILIZATION_NOT_SUPPORT,
        "utilization_extend": 0,
    }


@S.api(_utilization(0))
def get_device_utilization_rate(device_id: int) -> Tuple[Dict[str, int], int]:
    """``utilization_info, ret = acl.rt.get_device_utilization_rate(device_id)``: a dict with
    ``cube_utilization``, ``vector_utilization`` (AI-core busy percent over the next 50 ms;
    0 for a device not started), ``aicpu_utilization`` and ``memory_utilization`` (-1: not
    measured) and ``utilization_extend`` (0, reserved). Blocks for the sampling window."""
    d = _device_arg(device_id, "rt.get_device_utilization_rate")
    pct = _npurt._device_utilization(d, UTILIZATION_WINDOW_MS)
    return _utilization(0 if pct is None else int(round(pct))), C.ACL_SUCCESS


def _level(level: Any, fn: str) -> None:
    if S.cint(level, fn) != C.ACL_RT_THREAD_LEVEL:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "only ACL_RT_THREAD_LEVEL (0) is supported")


@S.api()
def peek_at_last_error(level: int) -> int:
    """``ret = acl.rt.peek_at_last_error(level)`` (``aclrtPeekAtLastError``): the code of this
    thread's last failed ``acl.rt`` call (0 if none), not reset. ``level`` must be
    ``ACL_RT_THREAD_LEVEL``."""
    _level(level, "rt.peek_at_last_error")
    return S.last_error(clear=False)


@S.api()
def get_last_error(level: int) -> int:
    """``ret = acl.rt.get_last_error(level)`` (``aclrtGetLastError``): as
    ``peek_at_last_error``, then resets this thread's last error to ``ACL_SUCCESS``."""
    _level(level, "rt.get_last_error")
    return S.last_error(clear=True)
