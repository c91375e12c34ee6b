"""Task events: the runtime's per-task records (``_npurt._Collector``), joined with the host
side of their launch and their call site. ``profile.events()`` returns these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .. import _npurt

# Kind codes of the native records -> the category Kineto writes for that activity.
KINDS = {
    "kernel": "kernel",
    "h2d": "gpu_memcpy",
    "d2h": "gpu_memcpy",
    "d2d": "gpu_memcpy",
    "h2h": "gpu_memcpy",
    "copy": "gpu_memcpy",
    "memset": "gpu_memset",
    "record": "npu_event_record",
    "wait": "npu_stream_wait",
    "host_func": "npu_host_callback",
}
# The runtime call that queued each kind (the host-side slice's name).
RUNTIME_CALLS = {
    "kernel": "aclrtLaunchKernel",
    "h2d": "aclrtMemcpyAsync",
    "d2h": "aclrtMemcpyAsync",
    "d2d": "aclrtMemcpyAsync",
    "h2h": "aclrtMemcpyAsync",
    "copy": "aclrtMemcpyAsync",
    "memset": "aclrtMemsetAsync",
    "record": "aclrtRecordEvent",
    "wait": "aclrtStreamWaitEvent",
    "host_func": "aclrtLaunchCallback",
}
COPY_KINDS = frozenset(("h2d", "d2h", "d2d", "h2h", "copy", "memset"))


@dataclass
class TaskEvent:
    """One task: what ran where and when (times in ns on the runtime's clock)."""

    kind: str
    name: str
    device: int
    context: int
    stream: int
    seq: int
    blocks: int
    bytes: int
    core: Optional[int]
    spans: List[Tuple[int, int, int, int]]
    submit_ns: int
    start_ns: int
    end_ns: int
    site: Optional[str] = None
    stack: Optional[List[str]] = None
    shapes: Optional[str] = None
    wait_on: Optional[Tuple[int, int]] = None
    failed: bool = False
    thread: Optional[int] = None
    queued_ns: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.name

    @property
    def device_time_ns(self) -> int:
        """Time on the device (waits and records count 0: they compute nothing)."""
        return 0 if self.kind in ("wait", "record") else self.end_ns - self.start_ns

    @property
    def host_time_ns(self) -> int:
        """Time of the launch call on the host (creating and queueing the task)."""
        return 0 if self.queued_ns is None else self.queued_ns - self.submit_ns

    @property
    def cpu_time_total(self) -> float:
        """Host time in µs (torch's unit)."""
        return self.host_time_ns / 1e3

    @property
    def device_time_total(self) -> float:
        """Device time in µs (torch's unit)."""
        return self.device_time_ns / 1e3

    npu_time_total = device_time_total

    @property
    def input_shapes(self) -> Optional[str]:
        return self.shapes

    @property
    def cores(self) -> List[int]:
        if self.spans:
            return sorted({c for c, _, _, _ in self.spans})
        return [] if self.core is None or self.kind not in ("kernel",) else [self.core]


_SITE_CACHE: Dict[int, Any] = {}


def _site(meta: int) -> Any:
    if meta == 0:
        return None
    got = _SITE_CACHE.get(meta)
    if got is None:
        got = _npurt._site(meta)
        _SITE_CACHE[meta] = got
    return got


def build(records: Iterable[tuple], launches: Iterable[tuple] = ()) -> List[TaskEvent]:
    """TaskEvents from the native tuples (see ``npurt-py/src/profiler.rs``), sorted by start."""
    notes = {(n[1], n[2]): n for n in launches}
    out: List[TaskEvent] = []
    for r in records:
        (device, context, stream, seq, kind, name, blocks, nbytes, core, spans, submit, start, end, meta, wait_on, failed) = r
        site = _site(meta)
        e = TaskEvent(kind, name, device, context, stream, seq, blocks, nbytes, core, [tuple(s) for s in spans],
                      submit, start, end, wait_on=tuple(wait_on) if wait_on else None, failed=failed)
        if site is not None:
            e.site, stack, e.shapes = site
            e.stack = stack.split("\n") if stack else None
        note = notes.get((stream, seq))
        if note is not None and note[4] == submit:
            e.thread, e.queued_ns = note[3], note[5]
        out.append(e)
    out.sort(key=lambda e: (e.start_ns, e.stream, e.seq))
    return out
