"""Names of the tutorial dialect on ``acl`` itself: what articles teaching the CANN runtime
write (``acl.GDDR_MEM``, ``acl.HOST_TO_DEVICE``,
``acl_rt_mem_malloc_policy.ACL_MEM_MALLOC_HUGE_FIRST``) and pyACL does not have. Aliases of
ACL's own values (docs/COMPAT.md: "tutorial dialect, not in pyACL"); the calls of the
dialect are in ``rt_dialect``."""

from __future__ import annotations

from . import constants as C

__all__ = [
    "DEVICE_TO_DEVICE",
    "DEVICE_TO_HOST",
    "GDDR_MEM",
    "HOST_TO_DEVICE",
    "HOST_TO_HOST",
    "acl_rt_mem_malloc_policy",
    "acl_rt_memcpy_kind",
]

#: Device memory for ``acl.rt.get_mem_info`` (ACL calls it HBM).
GDDR_MEM = C.ACL_HBM_MEM
HOST_TO_HOST = C.ACL_MEMCPY_HOST_TO_HOST
HOST_TO_DEVICE = C.ACL_MEMCPY_HOST_TO_DEVICE
DEVICE_TO_HOST = C.ACL_MEMCPY_DEVICE_TO_HOST
DEVICE_TO_DEVICE = C.ACL_MEMCPY_DEVICE_TO_DEVICE


class acl_rt_mem_malloc_policy:  # noqa: N801 - the dialect's name
    """``aclrtMemMallocPolicy`` as a namespace."""

    ACL_MEM_MALLOC_HUGE_FIRST = C.ACL_MEM_MALLOC_HUGE_FIRST
    ACL_MEM_MALLOC_HUGE_ONLY = C.ACL_MEM_MALLOC_HUGE_ONLY
    ACL_MEM_MALLOC_NORMAL_ONLY = C.ACL_MEM_MALLOC_NORMAL_ONLY


class acl_rt_memcpy_kind:  # noqa: N801 - the dialect's name
    """``aclrtMemcpyKind`` as a namespace."""

    ACL_MEMCPY_HOST_TO_HOST = C.ACL_MEMCPY_HOST_TO_HOST
    ACL_MEMCPY_HOST_TO_DEVICE = C.ACL_MEMCPY_HOST_TO_DEVICE
    ACL_MEMCPY_DEVICE_TO_HOST = C.ACL_MEMCPY_DEVICE_TO_HOST
    ACL_MEMCPY_DEVICE_TO_DEVICE = C.ACL_MEMCPY_DEVICE_TO_DEVICE
