"""The tutorial dialect of ``acl.rt``: calls that articles teaching the CANN runtime write
and people paste, which pyacl itself does not have (docs/COMPAT.md marks each "tutorial
dialect, not in pyACL"). Each is a thin alias over the real machinery:

* ``pool = acl.rt.mem_pool_config(nbytes)``: an npurt ``MemPool`` (``nbytes`` mapped up
  front, never grows) on the current device, as an integer handle;
  ``acl.rt.malloc(size, policy, pool)`` allocates from it (ACL's ``ALIGN_UP(size, 32) + 32``
  bytes; the pool full: 207001), ``acl.rt.free(ptr)`` gives the block back to it, and
  ``acl.rt.mem_pool_destroy(pool)`` releases it (blocks still allocated: 107000);
* ``ret = acl.rt.register_mem(ptr, size, attrs)`` registers ``[ptr, ptr + size)`` of an
  ``acl.rt.malloc`` allocation for sub-allocation (npurt-core's ``SubRange``: best fit,
  blocks 32-byte aligned with ``aclrtMalloc``'s size rule); ``blk, ret =
  acl.rt.malloc_from_mem(size, ptr)`` carves a block out of the range registered at ``ptr``
  (full: 207001; ``ptr`` not registered: 107000), ``acl.rt.free(blk)`` gives it back, and
  ``acl.rt.unregister_mem(ptr)`` ends the range (blocks still live: 107000). ``free`` of an
  allocation with a range registered in it: 107000 (unregister first);
* ``with acl.rt.context(device_id) as ctx:`` sets the device for the block (``ctx`` is the
  handle of its default context) and resets it at the end.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Tuple

from .. import _npurt
from ..memory import MemPool
from . import _state as S
from . import constants as C
from . import rt_device as _dev

__all__ = ["context", "malloc_from_mem", "mem_pool_config", "mem_pool_destroy", "register_mem", "unregister_mem"]

_ranges: Dict[int, Any] = {}  # registered ptr -> _npurt._SubRange
_blocks: Dict[int, Any] = {}  # block address -> its DeviceBuffer (a block may start where its allocation does)
_ranges_lock = threading.Lock()


@S.api(0)
def mem_pool_config(size: int) -> Tuple[int, int]:
    """``pool, ret = acl.rt.mem_pool_config(size)`` (tutorial dialect)."""
    n = S.ulong(size, "rt.mem_pool_config")
    if n == 0:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "pool size must be > 0")
    ctx = S.current_context()
    return S.add_handle("mem_pool", MemPool(n, ctx.device)), C.ACL_SUCCESS


def pool_of(handle: Any, fn: str) -> MemPool:
    """The MemPool behind a ``mem_pool_config`` handle (107000 if unknown)."""
    return S.get_handle("mem_pool", S.ulong(handle, fn))


@S.api()
def mem_pool_destroy(pool: int) -> int:
    """``ret = acl.rt.mem_pool_destroy(pool)`` (tutorial dialect): blocks still allocated
    from it: 107000 (free them first)."""
    h = S.ulong(pool, "rt.mem_pool_destroy")
    p = S.get_handle("mem_pool", h)
    if p.memory_allocated():
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, "the pool still has allocated blocks")
    p.destroy()
    S.drop_handle("mem_pool", h)
    return C.ACL_SUCCESS


@S.api()
def register_mem(ptr: int, size: int, attrs: int = 0) -> int:
    """``ret = acl.rt.register_mem(ptr, size, attrs)`` (tutorial dialect): ``[ptr, ptr +
    size)`` must lie in one live ``acl.rt.malloc`` allocation; ``attrs`` is accepted and
    not used (npurt's device memory has one kind). Registered twice at ``ptr``: 107000."""
    fn = "rt.register_mem"
    p, n = S.ulong(ptr, fn), S.ulong(size, fn)
    S.uint(attrs, fn)
    found = S.device_allocs.find(p)
    if found is None:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"register_mem: {p:#x} is not in a live acl.rt.malloc allocation")
    buf = found[0]
    with _ranges_lock:
        if p in _ranges:
            raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"register_mem: {p:#x} is already registered")
        _ranges[p] = _npurt._SubRange(buf, p, n)  # range checks are npurt-core's
    return C.ACL_SUCCESS


@S.api(0)
def malloc_from_mem(size: int, ptr: int) -> Tuple[int, int]:
    """``blk, ret = acl.rt.malloc_from_mem(size, ptr)`` (tutorial dialect): a block of the
    range registered at ``ptr``; ``acl.rt.free(blk)`` returns it."""
    fn = "rt.malloc_from_mem"
    n, p = S.ulong(size, fn), S.ulong(ptr, fn)
    if n == 0:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "malloc_from_mem: size must be > 0")
    with _ranges_lock:
        r = _ranges.get(p)
    if r is None:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"malloc_from_mem: no range is registered at {p:#x}")
    blk = r.malloc(n)
    with _ranges_lock:
        _blocks[blk.ptr] = blk
    return blk.ptr, C.ACL_SUCCESS


@S.api()
def unregister_mem(ptr: int) -> int:
    """``ret = acl.rt.unregister_mem(ptr)`` (tutorial dialect): ends the range registered
    at ``ptr`` (blocks of it still live: 107000, free them first)."""
    p = S.ulong(ptr, "rt.unregister_mem")
    with _ranges_lock:
        r = _ranges.get(p)
        if r is None:
            raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"unregister_mem: no range is registered at {p:#x}")
        if r.live_blocks:
            raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"unregister_mem: {r.live_blocks} block(s) of the range are still live")
        del _ranges[p]
    return C.ACL_SUCCESS


def free_block(ptr: int) -> bool:
    """``acl.rt.free(ptr)`` of a block of a registered range: frees it (True); False if
    ``ptr`` is no live block. A block that starts where its allocation does is the one
    freed: that allocation cannot be freed while the range is registered."""
    with _ranges_lock:
        blk = _blocks.pop(ptr, None)
    if blk is None:
        return False
    blk.free()
    return True


def check_unregistered(base: int) -> None:
    """``acl.rt.free`` of the allocation at ``base``: 107000 while a range is registered in it."""
    with _ranges_lock:
        if any(r.parent == base for r in _ranges.values()):
            raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"free: {base:#x} has a range registered by register_mem; unregister_mem it first")


class context:  # noqa: N801 - the dialect's lower-case name
    """``with acl.rt.context(device_id) as ctx:`` (tutorial dialect): ``set_device`` on
    entry (a failing one raises RuntimeError naming the ACL code: a ``with`` block has no
    ``ret``), ``reset_device`` on exit."""

    def __init__(self, device_id: int) -> None:
        self.device = S.cint(device_id, "rt.context")

    def __enter__(self) -> int:
        ret = _dev.set_device(self.device)
        if ret != C.ACL_SUCCESS:
            raise RuntimeError(f"acl.rt.context({self.device}): set_device returned {ret}")
        handle, ret = _dev.get_context()
        return handle

    def __exit__(self, *exc: object) -> None:
        _dev.reset_device(self.device)
