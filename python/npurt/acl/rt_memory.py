"""``acl.rt`` memory: ``malloc``, ``malloc_align32``, ``malloc_host``, ``free``,
``free_host``, ``get_mem_info``.

Sizes follow ``aclrtMalloc``: the allocation holds ``ALIGN_UP(size, 32) + 32`` bytes
(``malloc_align32``: ``ALIGN_UP(size, 32)``; the 1 GB huge-page policies: no pad), so
``ptr + size`` .. the end of the pad is still usable memory, as on the card. The start
address is 64-byte aligned (npurt gives 512). Size 0: 100000. Policies 0..7 map to
npurt's ``huge_first`` / ``huge_only`` / ``normal_only`` (P2P variants like their base;
HUGE1G as huge_only); any other value behaves like ``HUGE_FIRST``, as ACL does. Both
rules are npurt-mem's (``npurt_mem::acl_malloc``); this module only translates.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import _npurt
from .. import memory as _mem
from .. import sanitizer as _san
from . import _state as S
from . import constants as C
from . import rt_dialect as _dialect

__all__ = ["acl_malloc_size", "free", "free_host", "get_mem_info", "malloc", "malloc_align32", "malloc_host"]

_MAX_SIZE = 1 << 62


def acl_malloc_size(size: int, pad: bool = True) -> int:
    """Bytes ``aclrtMalloc(size)`` really allocates: ``ALIGN_UP(size, 32) + 32`` (without
    ``pad``: ``ALIGN_UP(size, 32)``, as ``aclrtMallocAlign32``). The rule is npurt-mem's."""
    return _npurt._acl_malloc_size(size, 0, not pad)


def _check_size(size: int) -> None:
    """Size 0 or beyond 2**62: 100000; then 107002 when the thread has no context."""
    if size == 0 or size > _MAX_SIZE:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"size {size} must be in 1..2**62")
    S.current_context()


def _malloc(size: int, policy: int, pad: bool, pool: Any = None) -> Tuple[int, int]:
    _check_size(size)
    # memcheck's padding: a redzone behind the block (the table keeps ACL's size: copies are
    # bounds-checked against it); multiple of 32, so ACL's size rule adds exactly it
    red = _npurt._sanitizer_pad_bytes() if _san.padding else 0
    if pool is None:
        buf = _npurt._acl_malloc(size + red, policy, not pad)  # ACL's padding and policy values
    else:
        buf = pool.malloc(_npurt._acl_malloc_size(size + red, policy, not pad))
    S.device_allocs.add(buf.ptr, buf, buf.nbytes - red)
    return buf.ptr, C.ACL_SUCCESS


@S.api(0)
def malloc(size: int, policy: int, pool: Optional[int] = None) -> Tuple[int, int]:
    """``dev_ptr, ret = acl.rt.malloc(size, policy)`` (``aclrtMalloc``): device memory of
    the current context's device; 207001 when the device cannot hold it. A third argument
    (tutorial dialect, not in pyACL) allocates from an ``acl.rt.mem_pool_config`` pool."""
    fn = "rt.malloc"
    n, p = S.ulong(size, fn), S.cint(policy, fn)
    if pool is None:
        return _malloc(n, p, True)
    return _malloc(n, p, True, _dialect.pool_of(pool, fn))


@S.api(0)
def malloc_align32(size: int, policy: int) -> Tuple[int, int]:
    """``dev_ptr, ret = acl.rt.malloc_align32(size, policy)``: no 32-byte pad."""
    fn = "rt.malloc_align32"
    return _malloc(S.ulong(size, fn), S.cint(policy, fn), False)


@S.api(0)
def malloc_host(size: int) -> Tuple[int, int]:
    """``host_ptr, ret = acl.rt.malloc_host(size)`` (``aclrtMallocHost``): pinned host
    memory, page aligned; async copies from and to it are truly asynchronous."""
    n = S.ulong(size, "rt.malloc_host")
    _check_size(n)
    buf = _mem.malloc_host(n)
    S.host_allocs.add(buf.ptr, buf, n)
    return buf.ptr, C.ACL_SUCCESS


def _free(allocs: S.Allocations, ptr: int, what: str) -> int:
    if ptr == 0:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"{what}: null pointer")
    buf = allocs.pop(ptr, f"acl.rt.{what}")
    if buf is None:
        raise S.Fail(C.ACL_ERROR_RT_MEMORY_FREE, f"{what}: {ptr:#x} is not the start of a live allocation")
    buf.free()
    return C.ACL_SUCCESS


@S.api()
def free(dev_ptr: int) -> int:
    """``ret = acl.rt.free(dev_ptr)`` (``aclrtFree``). Stream-ordered: copies already queued
    that use the memory still see it. Unknown, interior or already freed pointers: 207002."""
    p = S.ulong(dev_ptr, "rt.free")
    if _dialect.free_block(p):  # a block of an acl.rt.register_mem range (tutorial dialect)
        return C.ACL_SUCCESS
    _dialect.check_unregistered(p)
    return _free(S.device_allocs, p, "free")


@S.api()
def free_host(host_ptr: int) -> int:
    """``ret = acl.rt.free_host(host_ptr)`` (``aclrtFreeHost``); bad pointers: 207002."""
    return _free(S.host_allocs, S.ulong(host_ptr, "rt.free_host"), "free_host")


@S.api(0, 0)
def get_mem_info(attr: int) -> Tuple[int, int, int]:
    """``free, total, ret = acl.rt.get_mem_info(attr)`` (``aclrtGetMemInfo``): free and total
    bytes of the current device, as the card reports them: memory ``acl.rt.free`` gave back
    counts as free again (npurt's pool caches it; ``npurt.memory_reserved()`` shows the
    cache). npurt has one kind of device memory, so every ``aclrtMemAttr`` (0..17) reports
    it; other values: 100000."""
    a = S.cint(attr, "rt.get_mem_info")
    if not C.ACL_DDR_MEM <= a <= C.ACL_MEM_P2P_HUGE1G:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"attr {a} is not an aclrtMemAttr")
    S.current_context()
    free_b, total = _npurt._acl_mem_info()
    return free_b, total, C.ACL_SUCCESS
