"""Shared machinery of ``npurt.acl``: argument parsing like pyacl's ``PyArg_ParseTuple``,
the ``ret``-returning call wrapper, and the registries that turn integer handles and raw
pointers back into npurt objects.

* **Errors.** Runtime errors never raise: an ``npurt.Error`` (or an internal ``Fail``)
  inside a call becomes its ACL code as ``ret``. Arguments of the wrong *type* raise
  ``TypeError`` ("acl.rt.<name> args parse failed"), as pyacl's C bindings do when
  ``PyArg_ParseTuple`` rejects them (hicann/runtime ``python/pyACL/rt/*.cpp``).
* **Handles.** Contexts, streams and events are ints (fake pointers, never 0); 0 as a
  stream means the current context's default stream, as ``NULL`` does in ACL.
* **Pointers.** Device pointers come from ``acl.rt.malloc``; any address inside such an
  allocation (``ptr + offset``) resolves to a checked ``npurt._npurt._BufferView``.
  Pinned host pointers come from ``acl.rt.malloc_host``; anything else is pageable host
  memory (``ndarray.ctypes.data``, ``acl.util.bytes_to_ptr``...).
"""

from __future__ import annotations

import bisect
import ctypes
import functools
import inspect
import itertools
import mmap
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import _npurt
from .. import sanitizer as _san
from ..exceptions import Error
from . import constants as C

_MASK64 = (1 << 64) - 1


class Fail(Exception):
    """An ACL error detected by npurt.acl itself (returned as ``ret``)."""

    def __init__(self, code: int, message: str = ""):
        super().__init__(message or str(code))
        self.code = code


def _as_int(x: Any, fn: str) -> int:
    if isinstance(x, int):
        return int(x)
    index = getattr(type(x), "__index__", None)
    if index is None or isinstance(x, float):
        raise TypeError(f"acl.{fn} args parse failed")
    return int(index(x))


def ulong(x: Any, fn: str) -> int:
    """pyacl's ``k``/``K``: an unsigned 64-bit int, wrapped without overflow check."""
    return _as_int(x, fn) & _MASK64


def cint(x: Any, fn: str) -> int:
    """pyacl's ``i``: a signed 32-bit int (OverflowError out of range, like CPython)."""
    v = _as_int(x, fn)
    if not -(1 << 31) <= v < (1 << 31):
        raise OverflowError(f"acl.{fn}: signed integer out of range")
    return v


def uint(x: Any, fn: str) -> int:
    """pyacl's ``I``: an unsigned 32-bit int, wrapped."""
    return _as_int(x, fn) & 0xFFFFFFFF


_last_error = threading.local()


def last_error(clear: bool) -> int:
    """This thread's last failed call's code (``aclrtPeekAtLastError`` / with ``clear``,
    ``aclrtGetLastError``, which resets it to ACL_SUCCESS)."""
    code = getattr(_last_error, "code", 0)
    if clear:
        _last_error.code = 0
    return code


def _positional_range(fn: Callable) -> Tuple[int, int]:
    ps = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return sum(p.default is inspect.Parameter.empty for p in ps), len(ps)


def arity_error(name: str, lo: int, hi: int, given: int) -> TypeError:
    """The TypeError CPython's argument parsing raises for a pyacl binding called with the
    wrong number of arguments (``PyArg_ParseTuple``: "function takes exactly 2 arguments (0
    given)")."""
    how, n = ("exactly", lo) if lo == hi else ("at least", lo) if given < lo else ("at most", hi)
    return TypeError(f"function takes {how} {n} argument{'' if n == 1 else 's'} ({given} given)")


def api(*defaults: Any) -> Callable:
    """Wraps an ACL call: errors become ``ret`` (after ``defaults`` for the values) and this
    thread's last error; a wrong number of positional arguments is pyacl's TypeError (calls
    without parameters ignore any, as pyacl's do)."""

    def deco(fn: Callable) -> Callable:
        lo, hi = _positional_range(fn)
        name = fn.__name__

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if hi == 0:
                # pyacl registers every call METH_VARARGS and its argument-less wrappers never
                # parse ``args`` (pyrt_methods.cpp; WrapAclRtGetDevice, ...SynchronizeDevice):
                # acl.rt.synchronize_device(dev_id) runs on the card, extras are ignored
                args, kwargs = (), {}
            elif not kwargs and not lo <= len(args) <= hi:
                raise arity_error(name, lo, hi, len(args))
            try:
                return fn(*args, **kwargs)
            except (Fail, Error) as e:
                code = int(e.code)
            _last_error.code = code
            return (*defaults, code) if defaults else code

        return call

    return deco


# --- handles ---------------------------------------------------------------------------

_lock = threading.RLock()
_next = itertools.count(1)
_objects: Dict[int, Tuple[str, Any]] = {}
_ctx_handles: Dict[int, int] = {}  # npurt context id -> handle
_HANDLE_BASE = 0x7AC1_0000_0000


def add_handle(kind: str, obj: Any) -> int:
    with _lock:
        h = _HANDLE_BASE + 64 * next(_next)
        _objects[h] = (kind, obj)
    if kind == "stream" and _san.active:  # synccheck: one host thread per pyACL stream
        _npurt._sanitizer_acl_stream(obj)
    return h


def get_handle(kind: str, handle: int) -> Any:
    entry = _objects.get(handle)
    if entry is None or entry[0] != kind:
        raise Fail(C.ACL_ERROR_RT_PARAM_INVALID, f"unknown {kind} handle {handle:#x}")
    return entry[1]


def drop_handle(kind: str, handle: int) -> Any:
    with _lock:
        obj = get_handle(kind, handle)
        del _objects[handle]
        if kind == "context":
            _ctx_handles.pop(obj.id, None)
        return obj


def context_handle(ctx: Any) -> int:
    """The handle of an npurt.Context (registered on first sight, by context id)."""
    with _lock:
        h = _ctx_handles.get(ctx.id)
        if h is None:
            h = add_handle("context", ctx)
            _ctx_handles[ctx.id] = h
        return h


def current_context() -> Any:
    """This thread's ACL context (npurt.Context); 107002 if it has none."""
    return _npurt._acl_current_context()


def stream_of(handle: int) -> Any:
    """The npurt.Stream of a handle; 0 is the current context's default stream."""
    if handle == 0:
        return current_context().default_stream
    return get_handle("stream", handle)


# --- memory ----------------------------------------------------------------------------


class FreedRanges:
    """Address ranges of freed acl.rt.malloc / malloc_host allocations (disjoint, sorted).
    A pointer into one is stale: it must never be taken for pageable host memory unless
    the range was since mapped again, readable (and writable for a destination), by
    someone else. A new allocation over a range takes it out."""

    def __init__(self) -> None:
        self._starts: List[int] = []
        self._ends: List[int] = []

    def add(self, base: int, size: int) -> None:
        lo, hi = base, base + size
        with _lock:
            i = bisect.bisect_left(self._ends, lo)  # first range ending at or after lo
            j = bisect.bisect_right(self._starts, hi)  # ranges starting after hi stay
            if i < j:
                lo, hi = min(lo, self._starts[i]), max(hi, self._ends[j - 1])
            self._starts[i:j], self._ends[i:j] = [lo], [hi]

    def discard(self, base: int, size: int) -> None:
        lo, hi = base, base + size
        with _lock:
            i = bisect.bisect_right(self._ends, lo)
            j = bisect.bisect_left(self._starts, hi)
            if i >= j:
                return
            keep_s, keep_e = [], []
            if self._starts[i] < lo:
                keep_s.append(self._starts[i])
                keep_e.append(lo)
            if self._ends[j - 1] > hi:
                keep_s.append(hi)
                keep_e.append(self._ends[j - 1])
            self._starts[i:j], self._ends[i:j] = keep_s, keep_e

    def overlaps(self, ptr: int, n: int) -> bool:
        with _lock:
            i = bisect.bisect_right(self._ends, ptr)
            return i < len(self._starts) and self._starts[i] < ptr + max(n, 1)


freed = FreedRanges()


def host_accessible(ptr: int, n: int, write: bool) -> bool:
    """True if ``[ptr, ptr + n)`` is covered by mappings that are readable (and writable if
    ``write``), from ``/proc/self/maps``: the slow check for pointers into freed ranges."""
    end, at = ptr + max(n, 1), ptr
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                span, perms = line.split(None, 2)[:2]
                lo, hi = (int(x, 16) for x in span.split("-"))
                if hi <= at or lo > at:
                    continue
                if perms[0] != "r" or (write and perms[1] != "w"):
                    return False
                at = hi
                if at >= end:
                    return True
    except OSError:
        return False
    return False


class Allocations:
    """The buffers ``acl.rt.malloc`` / ``malloc_host`` handed out, by base address: the
    handle table that keeps them alive until ``free``. Which allocation an interior pointer
    belongs to is npurt-core's rule (``alloc::locate``, through ``_npurt._acl_locate``):
    ``find`` asks it for the base, then looks the base up here."""

    def __init__(self) -> None:
        self._items: Dict[int, Tuple[Any, int]] = {}

    def add(self, base: int, buf: Any, size: int) -> None:
        freed.discard(base, size)
        with _lock:
            self._items[base] = (buf, size)
        if _san.active:  # memcheck: explicit-free memory, leaked unless freed (a redzone past `size`)
            _npurt._sanitizer_raw_alloc(buf, size if _san.padding else None)

    def pop(self, base: int, api: Optional[str] = None) -> Optional[Any]:
        """Removes and returns the buffer at ``base``; ``api`` (the freeing call) reports
        a pointer that is not one to the sanitizer."""
        with _lock:
            item = self._items.pop(base, None)
        if item is None:
            if _san.active and api:  # memcheck: a double or invalid free
                _npurt._sanitizer_bad_free(base, api)
            return None
        freed.add(base, item[1])
        if _san.active:  # memcheck: the freed block goes to the quarantine
            _npurt._sanitizer_raw_free(item[0])
        return item[0]

    def find(self, ptr: int) -> Optional[Tuple[Any, int, int]]:
        """(buffer, offset, size) of the allocation of this table containing ``ptr``, or None."""
        loc = _npurt._acl_locate(ptr)
        if loc is None:
            return None
        base = loc[1]
        item = self._items.get(base)
        if item is None:
            return None
        buf, size = item
        return (buf, ptr - base, size) if ptr < base + size else None

    def __contains__(self, base: int) -> bool:
        return base in self._items


device_allocs = Allocations()
host_allocs = Allocations()


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_libc.mincore.restype = ctypes.c_int


def host_mapped(ptr: int, n: int) -> bool:
    """True if every page of ``[ptr, ptr + n)`` is mapped in this process (``mincore``
    fails with ENOMEM on an unmapped page), so touching it cannot fault for that reason."""
    page = mmap.PAGESIZE
    start = ptr - ptr % page
    length = ptr + max(n, 1) - start
    vec = ctypes.create_string_buffer((length + page - 1) // page)
    return _libc.mincore(start, length, vec) == 0


def npurt_device_pointer(ptr: int) -> bool:
    """True if ``ptr`` is inside a live npurt device allocation not made by acl.rt.malloc."""
    loc = _npurt._acl_locate(ptr)
    return loc is not None and loc[0] == "device" and loc[1] not in device_allocs
