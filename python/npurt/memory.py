"""Device memory: allocation, pinned host memory, copies, memory pools and statistics.

AscendCL semantics (``aclrtMalloc``, ``aclrtMallocHost``, ``aclrtMemcpy[Async]``,
``aclrtMemset[Async]``) with torch's names for the caching allocator's statistics.

>>> import numpy as np, npurt
>>> a = np.arange(1024, dtype=np.float32)
>>> with npurt.malloc(a.nbytes) as dev:           # freed on exit, also on an exception
...     npurt.memcpy(dev, a)                        # host -> device (synchronous)
...     s = npurt.Stream()
...     host = npurt.malloc_host(a.nbytes)          # pinned: async copies are truly async
...     npurt.memcpy_async(host, dev, s)            # device -> host on the stream
...     s.synchronize()
...     assert (host.numpy(np.float32) == a).all()  # zero-copy numpy view

* **Ownership.** A :class:`DeviceBuffer` owns its memory. ``free()``, leaving its ``with``
  block, or dropping the last reference frees it *stream-ordered*: copies already queued
  keep the memory until they ran, then it goes back to the caching pool, where any
  stream may reuse it. Using a freed buffer raises :class:`npurt.InvalidHandleError`
  (107017); freeing it twice :class:`npurt.MemoryFreeError` (207002).
* **Copies** accept DeviceBuffer, HostBuffer, DeviceArray (contiguous; ordered with the
  array's last writer, and an async copy into it makes the stream its last writer) and
  C-contiguous Python buffers (numpy arrays; bytes as a source; bytearray...); numpy
  views of a HostBuffer count as pinned memory. ``nbytes`` defaults to the source's size and
  must fit both sides (ACL's ``destMax``), else :class:`npurt.InvalidValueError` (107000).
  An async copy from pageable memory is staged into pinned memory before the call
  returns; an async copy into pageable memory waits for the stream first (as ACL).
* **Capacity and quotas.** Each device has the configured capacity
  (``NPURT_DEVICE_MEMORY``); :func:`set_per_process_memory_fraction` sets a quota.
  Exceeding either raises :class:`npurt.OutOfMemoryError` (207001, also a
  ``MemoryError``) whose message gives the request, the limit, allocated and reserved
  bytes, the largest free block and a hint; the device stays usable.
* **Pools.** ``with npurt.MemPool(size):`` routes this thread's allocations on the pool's
  device into a preallocated pool; ``pool.destroy()`` releases it.
* **Statistics** are per device (``device=None``: the current one):
  :func:`memory_allocated`, :func:`memory_reserved`, their ``max_`` peaks,
  :func:`memory_stats` (torch's keys plus ``page_bytes.{hugetlb,thp,normal}``),
  :func:`memory_summary` (with per-pool and per-page-kind lines), :func:`mem_get_info`.
* **History** in torch.cuda's snapshot format: :func:`record_history` starts recording
  every alloc / free / segment map / unmap / OOM (with the Python stack of each
  allocation), :func:`_snapshot` returns ``{"segments": ..., "device_traces": ...}`` and
  :func:`dump_snapshot` pickles it for torch's tools (``pytorch.org/memory_viz``) or
  ``python -m npurt.memviz snapshot.pickle -o mem.png``.
"""

from __future__ import annotations

import pickle
from os import PathLike

from ._npurt import (
    DeviceBuffer,
    HostBuffer,
    MemPool,
    _memory_snapshot,
    _record_memory_history,
    empty_cache,
    get_per_process_memory_fraction,
    host_empty_cache,
    host_memory_stats,
    malloc,
    malloc_host,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memcpy,
    memcpy_async,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    memset,
    memset_async,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)

__all__ = [
    "DeviceBuffer",
    "HostBuffer",
    "MemPool",
    "POLICIES",
    "dump_snapshot",
    "empty_cache",
    "get_per_process_memory_fraction",
    "host_empty_cache",
    "host_memory_stats",
    "malloc",
    "malloc_host",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memcpy",
    "memcpy_async",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "memset",
    "memset_async",
    "record_history",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
]

#: Allocation policies of :func:`malloc` (ACL's ``aclrtMemMallocPolicy`` 0, 1, 2).
POLICIES = ("huge_first", "huge_only", "normal_only")


def record_history(
    enabled: str | bool | None = "all",
    context: str | None = "all",
    stacks: str | None = "python",
    max_entries: int = 1_000_000,
) -> None:
    """Starts (``enabled="all"``) or stops (``enabled=None``) recording memory history, as
    ``torch.cuda.memory._record_memory_history``: the last ``max_entries`` events of every
    device, and (``stacks="python"``, unless ``context=None``) the Python stack of each
    allocation. Stopping keeps what was recorded for :func:`_snapshot`."""
    if enabled is True:
        enabled = "all"
    elif enabled is False:
        enabled = None
    if context is None:
        stacks = None
    from .array.util import _value_error, operator_index

    if enabled not in ("all", "state", None):
        raise _value_error(f"enabled must be 'all', 'state', True, False or None, not {enabled!r}")
    if stacks not in ("python", "all", None):
        raise _value_error(f"stacks must be 'python', 'all' or None, not {stacks!r}")
    if not 0 <= operator_index(max_entries, "max_entries") <= 1 << 40:
        raise _value_error(f"max_entries={max_entries} is out of range 0..=2**40")

    _record_memory_history(enabled, stacks, operator_index(max_entries, "max_entries"))


def _snapshot() -> dict:
    """torch.cuda.memory._snapshot(): ``segments`` (each with ``blocks`` and their
    ``state``, npurt adds ``pool`` and ``page_kind``) and ``device_traces`` (per device:
    ``alloc`` / ``free_requested`` / ``free_completed`` / ``segment_alloc`` /
    ``segment_free`` / ``oom`` with ``addr``, ``size``, ``stream``, ``time_us``,
    ``frames``)."""
    return _memory_snapshot()


def dump_snapshot(path: str | PathLike[str]) -> None:
    """Pickles :func:`_snapshot` to ``path`` (torch's ``_dump_snapshot``)."""
    if not isinstance(path, (str, PathLike)):  # an int would be a file descriptor
        from .exceptions import InvalidTypeError

        raise InvalidTypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    snap = _snapshot()
    with open(path, "wb") as f:
        pickle.dump(snap, f)
