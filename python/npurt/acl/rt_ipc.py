"""``acl.rt`` IPC memory sharing: ``ipc_mem_get_export_key``, ``ipc_mem_set_import_pid``,
``ipc_mem_import_by_key``, ``ipc_mem_close``, ``device_get_bare_tgid``
(``aclrtIpcMem*``, ``aclrtDeviceGetBareTgid``).

The memory must be shareable: allocate it while ``NPURT_IPC_SHAREABLE=1`` (or
``npurt.set_ipc_shareable(True)``) is in effect, so unchanged pyACL code (``acl.rt.malloc``
then ``ipc_mem_get_export_key``) works; other memory gives 507022
(``ACL_ERROR_RT_IPC_ERROR``), as every IPC failure does. Any ``dev_ptr + size`` inside an
allocation can be exported (ACL needs page-aligned whole allocations). Unlike ACL, every
close/free order is safe: the memory lives until the exporter freed it and every importer
closed it or exited.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Tuple

from .. import _npurt
from .. import ipc as _ipc
from . import _state as S
from . import constants as C

__all__ = [
    "device_get_bare_tgid",
    "ipc_mem_close",
    "ipc_mem_get_export_key",
    "ipc_mem_import_by_key",
    "ipc_mem_set_import_pid",
]

_lock = threading.Lock()
#: Imported device pointers of each key (importer side), for ipc_mem_close.
_imports: Dict[str, List[int]] = {}


def _key(key: Any, fn: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"acl.{fn} args parse failed")
    return key


@S.api("")
def ipc_mem_get_export_key(dev_ptr: int, size: int, flags: int) -> Tuple[str, int]:
    """``key, ret = acl.rt.ipc_mem_get_export_key(dev_ptr, size, flags)``: a key (≤ 64
    characters) for ``[dev_ptr, dev_ptr + size)`` of an ``acl.rt.malloc`` allocation.
    ``flags``: ``ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT`` (only pids given to
    ``ipc_mem_set_import_pid`` may import) or ``..._DISABLE_PID_VALIDATION`` (anyone with the key)."""
    fn = "rt.ipc_mem_get_export_key"
    ptr, n, fl = S.ulong(dev_ptr, fn), S.ulong(size, fn), S.ulong(flags, fn)
    if fl not in (C.ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT, C.ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION):
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"flags {fl} is not an IPC export flag")
    if ptr == 0 or n == 0:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "null pointer or size 0")
    found = S.device_allocs.find(ptr)
    if found is None:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"{ptr:#x} is not inside an acl.rt.malloc allocation")
    buf, offset, _ = found
    open_key = fl == C.ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION
    return buf.ipc_export(open=open_key, offset=offset, nbytes=n), C.ACL_SUCCESS


@S.api()
def ipc_mem_set_import_pid(key: str, pid: Any) -> int:
    """``ret = acl.rt.ipc_mem_set_import_pid(key, pid_list)``: lets these pids (from
    ``device_get_bare_tgid`` in the importers) import the key."""
    fn = "rt.ipc_mem_set_import_pid"
    pids = [S.cint(p, fn) for p in (pid if isinstance(pid, (list, tuple)) else [pid])]
    if not pids:
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, "empty pid list")
    _ipc.ipc_set_import_pid(_key(key, fn), pids)
    return C.ACL_SUCCESS


@S.api(0)
def ipc_mem_import_by_key(key: str, flags: int) -> Tuple[int, int]:
    """``dev_ptr, ret = acl.rt.ipc_mem_import_by_key(key, flags)``: maps the exporter's
    memory on the current context's device. ``flags``: ``ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT``
    or ``..._ENABLE_PEER_ACCESS`` (npurt's devices share the host: no effect)."""
    fn = "rt.ipc_mem_import_by_key"
    k, fl = _key(key, fn), S.ulong(flags, fn)
    if fl not in (C.ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT, C.ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS):
        raise S.Fail(C.ACL_ERROR_INVALID_PARAM, f"flags {fl} is not an IPC import flag")
    ctx = S.current_context()
    buf = _npurt.ipc_import(k, ctx.device)
    S.device_allocs.add(buf.ptr, buf, buf.nbytes)
    with _lock:
        _imports.setdefault(k, []).append(buf.ptr)
    return buf.ptr, C.ACL_SUCCESS


@S.api()
def ipc_mem_close(key: str) -> int:
    """``ret = acl.rt.ipc_mem_close(key)``, on both sides: the exporter retires the key
    (later imports fail; open ones keep their memory); an importer unmaps its imports of
    it (``acl.rt.free`` of the pointer does the same)."""
    k = _key(key, "rt.ipc_mem_close")
    if _npurt._ipc_is_own_key(k):
        _ipc.ipc_close(k)
        return C.ACL_SUCCESS
    with _lock:
        ptrs = _imports.pop(k, [])
    bufs = [b for b in (S.device_allocs.pop(p) for p in ptrs) if b is not None]
    if not bufs:
        raise S.Fail(C.ACL_ERROR_RT_IPC_ERROR, "this process neither exported nor imported the key")
    for b in bufs:
        b.free()
    return C.ACL_SUCCESS


@S.api(0)
def device_get_bare_tgid() -> Tuple[int, int]:
    """``pid, ret = acl.rt.device_get_bare_tgid()``: this process's host pid (what
    exporters whitelist)."""
    return _npurt._ipc_bare_tgid(), C.ACL_SUCCESS
