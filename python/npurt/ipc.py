"""Device memory shared between processes (AscendCL ``aclrtIpcMem*``, torch's
multiprocessing sharing of CUDA tensors).

>>> import npurt
>>> w = npurt.empty((1024, 1024), shareable=True)    # from the device's shareable pool
>>> key = w.ipc_export(pids=[worker_pid])            # doctest: +SKIP
>>> # in the worker process:
>>> w = npurt.ipc_import_array(key)                  # doctest: +SKIP  (same memory)

* **Shareable memory.** Only memory of the device's *shareable pool* can be exported (its
  segments are sealed memfds; shared memory gets no transparent huge pages, so it is kept
  apart from the THP-backed caching pool). Ask for it with ``npurt.malloc(n,
  shareable=True)``, ``npurt.empty/zeros/ones/full/to_device(..., shareable=True)``,
  ``npurt.MemPool(size, shareable=True)``, or make it the default for every allocation
  that does not say (``acl.rt.malloc`` included) with ``NPURT_IPC_SHAREABLE=1`` or
  :func:`set_ipc_shareable`. Exporting other memory raises
  :class:`npurt.IpcNotShareableError` saying so.
* **Keys** (``DeviceBuffer.ipc_export``, ``DeviceArray.ipc_export``) are printable strings
  with 128 random bits. By default only the listed ``pids`` (and the exporter) may import
  (:func:`ipc_set_import_pid` adds more); ``open=True`` lets any process that has the key
  import it. The importer's pid is checked by the kernel (``SO_PEERCRED``).
* **Import** (:func:`ipc_import`, :func:`ipc_import_array`) maps the same physical pages
  (writes are visible both ways); any part of an allocation can be exported.
* **Lifetime.** The memory lives until the exporter freed it and every importer dropped
  its buffer (or exited, even by SIGKILL), in any order. A key whose memory was freed is
  stale (:class:`npurt.IpcStaleKeyError`); :func:`ipc_close` retires a key.
* **multiprocessing.** DeviceBuffers and DeviceArrays passed to ``spawn`` /
  ``forkserver`` children (arguments, queues, pipes) travel as keys that any process of
  this user may import (``ForkingPickler`` reducers, as torch.multiprocessing does); keep
  the original alive until the child imported it. ``fork`` children cannot use npurt
  (:class:`npurt.ForkedProcessError`).
* **Ordering** across processes is the caller's: an export waits for the array's queued
  writes; later writes need an interprocess event or a synchronize.
"""

from __future__ import annotations

import multiprocessing.reduction as _reduction
from typing import Any, Iterable, Optional, Union

from . import _npurt
from ._npurt import DeviceBuffer, get_ipc_shareable, ipc_import, ipc_stats, set_ipc_shareable

__all__ = [
    "get_ipc_shareable",
    "ipc_close",
    "ipc_import",
    "ipc_import_array",
    "ipc_set_import_pid",
    "ipc_stats",
    "set_ipc_shareable",
]


def ipc_import_array(key: str, device: Any = None, timeout: Optional[float] = None) -> Any:
    """Maps the array behind ``key`` (from ``DeviceArray.ipc_export`` in another process):
    a DeviceArray with the exporter's shape, dtype and strides over the same memory."""
    from .array import DeviceArray

    return DeviceArray(_npurt._ipc_import_array(key, device, timeout))


def ipc_set_import_pid(key: str, pids: Union[int, Iterable[int]]) -> None:
    """Lets ``pids`` import a key this process exported (``aclrtIpcMemSetImportPid``)."""
    _npurt._ipc_set_import_pids(key, pids)


def ipc_close(key: str) -> None:
    """Retires a key this process exported: later imports raise
    :class:`npurt.IpcClosedKeyError`; imports already open keep their memory."""
    _npurt._ipc_close(key)


def _rebuild_buffer(key: str) -> DeviceBuffer:
    return ipc_import(key)


def _reduce_buffer(b: DeviceBuffer) -> Any:
    return (_rebuild_buffer, (b._ipc_share_key(),))


def _rebuild_array(key: str) -> Any:
    return ipc_import_array(key)


def _reduce_array(a: Any) -> Any:
    return (_rebuild_array, (_npurt._ipc_export_array(a._a, None, None, True),))


def _register_reducers() -> None:
    from .array import DeviceArray

    _reduction.ForkingPickler.register(DeviceBuffer, _reduce_buffer)
    _reduction.ForkingPickler.register(DeviceArray, _reduce_array)
