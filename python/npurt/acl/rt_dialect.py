"""The tutorial dialect of ``acl.rt``: calls that articles teaching the CANN runtime write
and people paste, which pyacl itself does not have (docs/COMPAT.md marks each "tutorial
dialect, not in pyACL"). Each is a thin alias over the real machinery:

* ``pool = acl.rt.mem_pool_config(nbytes)``: an npurt ``MemPool`` (``nbytes`` mapped up
  front, never grows) on the current device, as an integer handle;
  ``acl.rt.malloc(size, policy, pool)`` allocates from it (ACL's ``ALIGN_UP(size, 32) + 32``
  bytes; the pool full: 207001), ``acl.rt.free(ptr)`` gives the block back to it, and
  ``acl.rt.mem_pool_destroy(pool)`` releases it (blocks still allocated: 107000);
* ``with acl.rt.context(device_id) as ctx:`` sets the device for the block (``ctx`` is the
  handle of its default context) and resets it at the end.
"""

from __future__ import annotations

from typing import Any, Tuple

from ..memory import MemPool
from . import _state as S
from . import constants as C
from . import rt_device as _dev

__all__ = ["context", "mem_pool_config", "mem_pool_destroy"]


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
