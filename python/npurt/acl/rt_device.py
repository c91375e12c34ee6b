"""``acl.rt`` devices and contexts: ``set_device``, ``reset_device``, ``get_device``,
``get_device_count``, ``synchronize_device``, ``get_run_mode``, ``create_context``,
``destroy_context``, ``set_context``, ``get_context``.

Per-thread state as in ACL: ``set_device`` makes the device's default context current in
the calling thread (and takes one reference on the device; ``reset_device`` drops it);
``create_context`` binds the new context to the calling thread; a thread that did
neither has no context, and calls that need one return 107002.
"""

from __future__ import annotations

from typing import Tuple

from .. import _npurt
from ..context import Context
from . import _state as S
from . import constants as C

__all__ = [
    "create_context",
    "destroy_context",
    "get_context",
    "get_device",
    "get_device_count",
    "get_run_mode",
    "reset_device",
    "reset_device_force",
    "set_context",
    "set_device",
    "synchronize_device",
    "synchronize_device_with_timeout",
]


@S.api()
def set_device(device_id: int) -> int:
    """``ret = acl.rt.set_device(device_id)`` (``aclrtSetDevice``)."""
    dev = S.cint(device_id, "rt.set_device")
    _npurt._acl_set_device(dev)
    return C.ACL_SUCCESS


@S.api()
def reset_device(device_id: int) -> int:
    """``ret = acl.rt.reset_device(device_id)`` (``aclrtResetDevice``): drops one reference;
    the last one waits for the device's work and releases everything on it."""
    dev = S.cint(device_id, "rt.reset_device")
    _npurt._acl_reset_device(dev)
    return C.ACL_SUCCESS


@S.api()
def reset_device_force(device_id: int) -> int:
    """``ret = acl.rt.reset_device_force(device_id)`` (``aclrtResetDeviceForce``): releases
    the device whatever its reference count, aborting queued work (a second one finds no
    device to reset: ACL_SUCCESS, as resetting an idle device is)."""
    dev = S.cint(device_id, "rt.reset_device_force")
    _npurt._acl_reset_device(dev, True)
    return C.ACL_SUCCESS


@S.api(0)
def get_device() -> Tuple[int, int]:
    """``device_id, ret = acl.rt.get_device()``; 107002 if this thread has no context."""
    return S.current_context().device, C.ACL_SUCCESS


@S.api(0)
def get_device_count() -> Tuple[int, int]:
    """``count, ret = acl.rt.get_device_count()``."""
    return _npurt.device_count(), C.ACL_SUCCESS


@S.api()
def synchronize_device() -> int:
    """``ret = acl.rt.synchronize_device()``: waits for every stream of the current context."""
    S.current_context().synchronize()
    return C.ACL_SUCCESS


@S.api()
def synchronize_device_with_timeout(timeout: int) -> int:
    """``ret = acl.rt.synchronize_device_with_timeout(timeout)``: ``timeout`` in ms, -1 waits
    forever; 507046 (stream sync timeout) when it passes."""
    t = S.cint(timeout, "rt.synchronize_device_with_timeout")
    if t < -1:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, "timeout must be -1 or >= 0 ms")
    S.current_context().synchronize(None if t == -1 else t / 1000.0)
    return C.ACL_SUCCESS


@S.api(C.ACL_HOST)
def get_run_mode() -> Tuple[int, int]:
    """``run_mode, ret = acl.rt.get_run_mode()``: always ``ACL_HOST`` (1): the application
    runs on the host and the "device" is reached through copies."""
    return C.ACL_HOST, C.ACL_SUCCESS


@S.api(0)
def create_context(device_id: int) -> Tuple[int, int]:
    """``context, ret = acl.rt.create_context(device_id)``: an explicit context with its own
    default stream, made current in the calling thread."""
    dev = S.cint(device_id, "rt.create_context")
    ctx = Context(dev)
    _npurt._acl_set_context(ctx)
    return S.context_handle(ctx), C.ACL_SUCCESS


@S.api()
def destroy_context(context: int) -> int:
    """``ret = acl.rt.destroy_context(context)``: waits for the context's work, releases its
    streams; if it is this thread's current context, the thread has none afterwards."""
    h = S.ulong(context, "rt.destroy_context")
    ctx = S.get_handle("context", h)
    try:
        current = S.current_context().id == ctx.id
    except Exception:
        current = False
    ctx.destroy()
    S.drop_handle("context", h)
    if current:
        _npurt._acl_clear_context()
    return C.ACL_SUCCESS


@S.api()
def set_context(context: int) -> int:
    """``ret = acl.rt.set_context(context)`` (``aclrtSetCurrentContext``): switches this
    thread's context (and so its device)."""
    h = S.ulong(context, "rt.set_context")
    _npurt._acl_set_context(S.get_handle("context", h))
    return C.ACL_SUCCESS


@S.api(0)
def get_context() -> Tuple[int, int]:
    """``context, ret = acl.rt.get_context()`` (``aclrtGetCurrentContext``): the handle of
    this thread's context (a device's default context gets one too); 107002 if none."""
    return S.context_handle(S.current_context()), C.ACL_SUCCESS
