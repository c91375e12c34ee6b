"""``acl.util``: moving between Python objects and raw pointers, and pyacl's thread helpers.

Same signatures and errors as pyACL's ``util`` module (hicann/runtime
``python/pyACL/util/*.cpp``): ``numpy_to_ptr(array)`` and ``ptr_to_numpy(ptr, shape,
npy_type)`` (NumPy C type numbers: 0 bool, 1 int8, 2 uint8, 3 int16, 4 uint16, 5 int32,
6 uint32, 7/9 int64, 8/10 uint64, 11 float32, 12 float64, 23 float16) warn that they are
deprecated, as pyacl does; ``bytes_to_ptr(data)`` returns the address of the bytes
object's own buffer (valid while ``data`` lives), ``ptr_to_bytes(ptr, size)`` copies.
``start_thread(fn, args)`` runs ``fn(args)`` (``fn()`` when ``args`` is None) in a new
thread and returns ``(thread_id, ret)``; ``stop_thread(thread_id)`` joins it and raises
RuntimeError if the function raised.

Host pointers only, as on the card: these helpers read and write process memory
directly. (npurt's device memory happens to be host memory too; use ``acl.rt.memcpy``.)
"""

from __future__ import annotations

import ctypes
import threading
import traceback
import warnings
from typing import Any, Dict, List, Optional, Tuple

from .. import _npurt
from .. import sanitizer as _san
from . import _state as S

__all__ = ["bytes_to_ptr", "numpy_to_ptr", "ptr_to_bytes", "ptr_to_numpy", "start_thread", "stop_thread"]

_threads: Dict[int, Tuple[threading.Thread, List[str]]] = {}
_tlock = threading.Lock()


def numpy_to_ptr(array: Any) -> int:
    """``ptr = acl.util.numpy_to_ptr(array)``: the address of an ndarray's data."""
    import numpy as np

    warnings.warn(
        "acl.util.numpy_to_ptr will be deprecated. Please use acl.util.bytes_to_ptr instead.", Warning, stacklevel=2
    )
    if not isinstance(array, np.ndarray):
        raise ValueError("needs an ndarray as argument")
    if not array.flags.c_contiguous:
        warnings.warn(
            "The input ndarray is discontiguous. Please use acl.util.bytes_to_ptr instead.", Warning, stacklevel=2
        )
    return int(array.ctypes.data)


def _npy_types() -> Dict[int, Any]:
    import numpy as np

    return {np.dtype(c).num: np.dtype(c) for c in "?bBhHiIlLqQfdgeFDG"}


def ptr_to_numpy(ptr: int, shape: Tuple[int, ...], npy_type: int) -> Any:
    """``array = acl.util.ptr_to_numpy(ptr, shape, npy_type)``: a writable ndarray *view* of
    the memory at ``ptr`` (no copy; the memory must outlive it)."""
    import numpy as np

    warnings.warn(
        "acl.util.ptr_to_numpy will be deprecated. Please use acl.util.ptr_to_bytes instead.", Warning, stacklevel=2
    )
    p = S.ulong(ptr, "util.ptr_to_numpy")
    code = S.cint(npy_type, "util.ptr_to_numpy")
    if not isinstance(shape, tuple) or not all(isinstance(d, int) for d in shape):
        raise TypeError("the second argument is not list of int")
    dtype = _npy_types().get(code)
    if dtype is None:
        raise ValueError(f"unknown NumPy type number {code}")
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if nbytes == 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_ubyte * nbytes).from_address(p)
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(shape)


def bytes_to_ptr(data: bytes) -> int:
    """``ptr = acl.util.bytes_to_ptr(data)``: the address of ``data``'s buffer (no copy)."""
    if not isinstance(data, bytes):
        raise ValueError("needs an byte as argument")
    return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    """``data = acl.util.ptr_to_bytes(ptr, size)``: a copy of ``size`` bytes at ``ptr``."""
    p, n = S.ulong(ptr, "util.ptr_to_bytes"), S.ulong(size, "util.ptr_to_bytes")
    if n == 0:
        return b""
    if p == 0:
        raise ValueError("convert c pointer to bytes failed")
    if _san.active:
        if _npurt._sanitizer_check_freed(p, n, "acl.util.ptr_to_bytes"):  # memcheck: freed / a redzone
            raise ValueError(f"ptr_to_bytes: {p:#x} (+{n} bytes) is not live memory (see the sanitizer's report)")
        _npurt._sanitizer_host_access(p, n, False, "acl.util.ptr_to_bytes")  # racecheck / initcheck
    return ctypes.string_at(p, n)


def start_thread(fn: Any, args: Any) -> Tuple[int, int]:
    """``thread_id, ret = acl.util.start_thread(fn, args)``."""
    if not callable(fn):
        raise TypeError("parameter must be callable")
    errors: List[str] = []

    def body() -> None:
        try:
            fn() if args is None else fn(args)
        except BaseException as e:  # reported by stop_thread, as pyacl does
            traceback.print_exc()
            errors.append(f"exception={type(e).__name__},msg=thread call failed")

    t = threading.Thread(target=body, name="acl-util-thread", daemon=True)
    t.start()
    tid = t.ident or 0
    with _tlock:
        _threads[tid] = (t, errors)
    return tid, 0


def stop_thread(thread_id: int) -> int:
    """``ret = acl.util.stop_thread(thread_id)``: waits for the thread to end (like
    ``pthread_join``); 3 (ESRCH) for an unknown id."""
    tid = S.ulong(thread_id, "util.stop_thread")
    with _tlock:
        entry: Optional[Tuple[threading.Thread, List[str]]] = _threads.pop(tid, None)
    if entry is None:
        return 3  # ESRCH
    t, errors = entry
    t.join()
    if errors:
        raise RuntimeError(";".join(errors) + ";")
    return 0
