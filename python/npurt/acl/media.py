"""``acl.media``: DVPP device memory (``dvpp_malloc`` / ``dvpp_free``); the image and video
processing calls themselves are out of npurt's scope.

* ``dvpp_malloc`` follows ``acldvppMalloc``: the allocation holds ``ALIGN_UP(size, 32) + 32``
  bytes (npurt-mem's ``acl_malloc`` rule, the same as ``aclrtMalloc``), on huge pages where
  the machine has them (``ACL_MEM_MALLOC_HUGE_FIRST``), the start at least 128-byte aligned
  (npurt's blocks are 512-byte aligned). The pointer is ordinary ``acl.rt`` device memory:
  every copy, memset and kernel takes it.
* ``dvpp_free`` frees only what ``dvpp_malloc`` returned (anything else: 207002, as
  ``acl.rt.free`` of a bad pointer); ``acl.rt.free`` also accepts DVPP memory.
* Any other ``acl.media`` name is a callable that returns ACL's "feature not supported"
  code (``ACL_ERROR_FEATURE_UNSUPPORTED``, 200006), not an AttributeError, so a sample that
  probes or sets up media processing gets ACL's answer for a product without DVPP.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Set, Tuple

from . import _state as S
from . import constants as C
from . import rt_memory as _rm

__all__ = ["dvpp_free", "dvpp_malloc"]

_dvpp: Set[int] = set()
_lock = threading.Lock()


@S.api(0)
def dvpp_malloc(size: int) -> Tuple[int, int]:
    """``dev_ptr, ret = acl.media.dvpp_malloc(size)`` (``acldvppMalloc``)."""
    ptr, ret = _rm._malloc(S.ulong(size, "media.dvpp_malloc"), C.ACL_MEM_MALLOC_HUGE_FIRST, True)
    with _lock:
        _dvpp.add(ptr)
    return ptr, ret


@S.api()
def dvpp_free(dev_ptr: int) -> int:
    """``ret = acl.media.dvpp_free(dev_ptr)`` (``acldvppFree``)."""
    p = S.ulong(dev_ptr, "media.dvpp_free")
    if p == 0:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "dvpp_free: null pointer")
    with _lock:
        # A pointer acl.rt.free already released is no longer live, whatever _dvpp says.
        live = p in _dvpp and p in S.device_allocs
        _dvpp.discard(p)
    if not live:
        raise S.Fail(C.ACL_ERROR_RT_MEMORY_FREE, f"dvpp_free: {p:#x} is not a live dvpp_malloc allocation")
    return _rm._free(S.device_allocs, p, "dvpp_free")


def _unsupported(name: str) -> Callable[..., int]:
    def call(*_args: Any, **_kwargs: Any) -> int:
        return C.ACL_ERROR_FEATURE_UNSUPPORTED

    call.__name__ = name
    call.__qualname__ = name
    call.__doc__ = f"``acl.media.{name}``: media processing is not emulated; returns 200006 (ACL_ERROR_FEATURE_UNSUPPORTED)."
    return call


def __getattr__(name: str) -> Callable[..., int]:
    if name.startswith("__"):
        raise AttributeError(name)
    return _unsupported(name)
