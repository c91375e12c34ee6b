"""``acl.rt`` copies and memsets on raw pointers: ``memcpy``, ``memcpy_async``, ``memset``,
``memset_async``.

Each pointer is located first (see ``_state``): inside an ``acl.rt.malloc`` allocation
(device), inside an ``acl.rt.malloc_host`` allocation (pinned host), or else pageable host
memory. ``kind`` is checked like ``MemcpyKindTranslate`` (0..5, else 100000) and then, as
pyACL documents ("kind is reserved; the system judges from the pointers"), the direction is
inferred from the pointers: a mislabelled ``kind`` (``DEVICE_TO_HOST`` for an upload) copies
the way the pointers say. What is never taken for host memory: a pointer into npurt device
memory not from ``acl.rt.malloc``, into freed device memory (still cached or given back),
into a freed acl range not mapped again, or into unmapped memory (107000 each). ``count``
must be <= ``dest_max`` (107000) and lie inside the allocations it touches (107000).

* device/pinned <-> device/pinned: npurt's copy engine (``_view_memcpy[_async]``); an
  async copy holds both allocations until it ran, so ``free`` right after is safe.
* pageable -> device/pinned, async: ``npurt.memcpy_async`` stages it into pinned memory
  before the call returns (the source may be reused at once), then copies in stream order.
* device/pinned -> pageable, async: waits for the stream, then copies (ACL's rule for
  pageable memory); the bytes are only defined after the stream is synchronized anyway.
* memset: device or pinned memory only (the card's rule); pageable pointers: 107000.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Tuple

from .. import _npurt
from .. import sanitizer as _san
from . import _state as S
from . import constants as C

__all__ = ["memcpy", "memcpy_async", "memset", "memset_async"]

# The aclrtMemcpyKind values MemcpyKindTranslate accepts (the direction itself comes from
# the pointers).
_KINDS = frozenset(
    {
        C.ACL_MEMCPY_HOST_TO_HOST,
        C.ACL_MEMCPY_HOST_TO_DEVICE,
        C.ACL_MEMCPY_DEVICE_TO_HOST,
        C.ACL_MEMCPY_DEVICE_TO_DEVICE,
        C.ACL_MEMCPY_DEFAULT,
        C.ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE,
    }
)


def _view(found: Tuple[Any, int, int], n: int) -> Any:
    buf, off, size = found
    if off + n > size and _san.padding:  # the buffer has a redzone past `size`: bounds are ACL's
        _npurt._sanitizer_check_freed(buf.ptr + off, n, "acl.rt copy")
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"{n} bytes at offset {off} overrun the {size}-byte allocation")
    return _npurt._BufferView(buf, off, n)


def _locate(ptr: int, n: int, write: bool) -> Tuple[Optional[Any], int]:
    """(view, ptr): a checked view of npurt memory, or (None, ptr) for pageable memory.
    ``ptr`` is not 0 (``_prepare`` checked)."""
    found = S.device_allocs.find(ptr) or S.host_allocs.find(ptr)
    if found is not None:
        return _view(found, n), ptr
    if _san.active and _npurt._sanitizer_check_freed(ptr, n, "acl.rt copy"):  # memcheck: quarantined / a redzone
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"{ptr:#x} is not live acl memory (freed, or past an allocation's end)")
    if S.npurt_device_pointer(ptr):
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"{ptr:#x} is npurt device memory not from acl.rt.malloc")
    # Freed device memory stays known: still cached by a pool, it is device memory (never
    # written through as host memory); given back to the OS, it is no longer mapped.
    if _npurt._owns_device_address(ptr):
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"{ptr:#x} is freed device memory")
    if S.freed.overlaps(ptr, n):
        if not S.host_accessible(ptr, n, write):
            raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"{ptr:#x} is freed acl memory")
    elif not S.host_mapped(ptr, n):
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"{ptr:#x} (+{n} bytes) is not mapped memory")
    return None, ptr


def _prepare(fn: str, dst: Any, dest_max: Any, src: Any, count: Any, kind: Any):
    d, dmax, s, n, k = (S.ulong(dst, fn), S.ulong(dest_max, fn), S.ulong(src, fn), S.ulong(count, fn), S.cint(kind, fn))
    S.current_context()
    if d == 0 or s == 0:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "null pointer")
    if k not in _KINDS:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"kind {k} is not a valid aclrtMemcpyKind")
    if n > dmax:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"count {n} exceeds dest_max {dmax}")
    if n == 0:
        return None
    return _locate(d, n, True), _locate(s, n, False), n


def _pageable_copy(d: int, dv: Optional[Any], s: int, sv: Optional[Any], n: int) -> None:
    # Views were checked and keep their allocations mapped while referenced here.
    dst = dv.ptr if dv is not None else d
    src = sv.ptr if sv is not None else s
    if _san.active:  # racecheck / initcheck: the host itself reads and writes npurt memory here
        if sv is not None:
            _npurt._sanitizer_host_access(src, n, False, "acl.rt.memcpy")
        if dv is not None:
            _npurt._sanitizer_host_access(dst, n, True, "acl.rt.memcpy")
    ctypes.memmove(dst, src, n)


@S.api()
def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int) -> int:
    """``ret = acl.rt.memcpy(dst, dest_max, src, count, kind)`` (``aclrtMemcpy``): copies now,
    on the calling thread; not ordered with any stream."""
    p = _prepare("rt.memcpy", dst, dest_max, src, count, kind)
    if p is None:
        return C.ACL_SUCCESS
    (dv, d), (sv, s), n = p
    if dv is not None and sv is not None:
        _npurt._view_memcpy(dv, sv, n)
    else:
        _pageable_copy(d, dv, s, sv, n)
    return C.ACL_SUCCESS


@S.api()
def memcpy_async(dst: int, dest_max: int, src: int, count: int, kind: int, stream: int) -> int:
    """``ret = acl.rt.memcpy_async(dst, dest_max, src, count, kind, stream)``: queued on the
    stream's copy engine; the destination is defined once the stream is synchronized."""
    fn = "rt.memcpy_async"
    h = S.ulong(stream, fn)
    p = _prepare(fn, dst, dest_max, src, count, kind)
    st = S.stream_of(h)
    if p is None:
        return C.ACL_SUCCESS
    (dv, d), (sv, s), n = p
    if dv is not None and sv is not None:
        _npurt._view_memcpy_async(dv, sv, n, st)
    elif dv is not None:
        # ACL's staging of pageable memory is npurt's (``npurt.memcpy_async``: core
        # ``Staging``); the pageable side is handed over as a buffer over the pointer.
        _npurt.memcpy_async(dv, (ctypes.c_char * n).from_address(s), st, n)
    else:
        st.synchronize()
        _pageable_copy(d, dv, s, sv, n)
    return C.ACL_SUCCESS


def _memset_args(fn: str, dev_ptr: Any, max_count: Any, value: Any, count: Any):
    p, m, v, n = S.ulong(dev_ptr, fn), S.ulong(max_count, fn), S.cint(value, fn), S.ulong(count, fn)
    S.current_context()
    if p == 0:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "null pointer")
    if n > m:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"count {n} exceeds max_count {m}")
    if n == 0:
        return None
    found = S.device_allocs.find(p) or S.host_allocs.find(p)
    if found is None:
        raise S.Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"{p:#x} is not acl.rt.malloc/malloc_host memory")
    return _view(found, n), v & 0xFF, n


@S.api()
def memset(dev_ptr: int, max_count: int, value: int, count: int) -> int:
    """``ret = acl.rt.memset(dev_ptr, max_count, value, count)``: sets ``count`` bytes to
    ``value & 0xFF`` now."""
    a = _memset_args("rt.memset", dev_ptr, max_count, value, count)
    if a is not None:
        _npurt._view_memset(*a)
    return C.ACL_SUCCESS


@S.api()
def memset_async(dev_ptr: int, max_count: int, value: int, count: int, stream: int) -> int:
    """``ret = acl.rt.memset_async(dev_ptr, max_count, value, count, stream)``."""
    fn = "rt.memset_async"
    h = S.ulong(stream, fn)
    a = _memset_args(fn, dev_ptr, max_count, value, count)
    st = S.stream_of(h)
    if a is not None:
        _npurt._view_memset_async(*a, st)
    return C.ACL_SUCCESS
