"""The one Chrome-trace writer: ``prof.export_chrome_trace``, ``tensorboard_trace_handler``,
``npurt.acl.prof`` and the ``NPURT_DUMP_ON_ERROR`` flight recorder all write through
:func:`write_chrome_trace`.

The file has the shape torch's profiler (Kineto) writes: an object with ``traceEvents``,
``ts``/``dur`` in µs with 3 decimals relative to ``baseTimeNanoseconds``, devices as
``pid`` and streams as ``tid``, ``M`` events naming processes and threads, ``s``/``f`` flow
pairs sharing ``id``/``cat``/``name``, ``C`` counters. Perfetto's rule that slices on one
track nest is kept by giving every stream, AI core, the copy engine and each host-callback
thread a track of its own (on one stream, tasks run one after another).

Tracks (``pid``, ``tid``): the host process (the real pid) with one track per launching
thread; device ``d`` is ``pid`` ``d`` with ``tid`` = stream id for its streams,
``AICORE_TID + core`` for AI cores, ``COPY_TID`` for the copy engine and
``CALLBACK_TID + i`` for host-callback thread ``i``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .. import _npurt
from .events import COPY_KINDS, KINDS, RUNTIME_CALLS, TaskEvent

AICORE_TID = 1_000_000
COPY_TID = 2_000_000
CALLBACK_TID = 2_000_100
LAUNCH_FLOW = "ac2g"  # Kineto's name for launch -> kernel flows
SYNC_FLOW = "npu_sync"  # event record / stream -> the waits it releases


def host_pid() -> int:
    """The host process's pid in traces (kept clear of device pids 0..63)."""
    pid = os.getpid()
    return pid if pid >= 1000 else 1_000_000 + pid


def _us(ns: int) -> float:
    return round(ns / 1000.0, 3)


class _Builder:
    def __init__(self, base_ns: int) -> None:
        self.base = base_ns
        self.out: List[Dict[str, Any]] = []
        self.tracks: Dict[Tuple[int, int], Tuple[str, int]] = {}
        self.processes: Dict[int, Tuple[str, int]] = {}
        self.flow_id = 0

    def ts(self, ns: int) -> float:
        return _us(max(0, ns - self.base))

    def track(self, pid: int, tid: int, name: str, sort: int) -> None:
        self.tracks.setdefault((pid, tid), (name, sort))

    def slice(self, pid: int, tid: int, name: str, cat: str, start: int, end: int, args: Dict[str, Any]) -> None:
        ts = self.ts(start)
        dur = max(0.0, round(self.ts(end) - ts, 3))
        self.out.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})

    def flow(self, cat: str, src: Tuple[int, int, int], dst: Tuple[int, int, int]) -> int:
        self.flow_id += 1
        fid = self.flow_id
        (sp, st, sts), (dp, dt, dts) = src, dst
        self.out.append({"ph": "s", "id": fid, "pid": sp, "tid": st, "ts": self.ts(sts), "cat": cat, "name": cat})
        self.out.append({"ph": "f", "id": fid, "pid": dp, "tid": dt, "ts": self.ts(max(sts, dts)), "cat": cat,
                         "name": cat, "bp": "e"})
        return fid

    def metadata(self) -> List[Dict[str, Any]]:
        m: List[Dict[str, Any]] = []
        for pid, (name, sort) in sorted(self.processes.items()):
            m.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            m.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}})
        for (pid, tid), (name, sort) in sorted(self.tracks.items()):
            m.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            m.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": sort}})
        return m


def _thread_names() -> Dict[int, str]:
    return {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}


def _task_args(e: TaskEvent, eid: int) -> Dict[str, Any]:
    a: Dict[str, Any] = {"External id": eid, "context": e.context, "stream": e.stream, "seq": e.seq, "kind": e.kind}
    if e.kind == "kernel":
        a["blocks"] = e.blocks
        a["cores"] = e.cores
    if e.kind in COPY_KINDS:
        a["bytes"] = e.bytes
    if e.site:
        a["site"] = e.site
    if e.shapes:
        a["Input Dims"] = e.shapes
    if e.stack:
        a["stack"] = e.stack
    if e.wait_on:
        a["waited_on"] = {"stream": e.wait_on[0], "task": e.wait_on[1] - 1}
    if e.failed:
        a["failed"] = True
    return a


def _host_slices(events: Sequence[TaskEvent]) -> Dict[int, List[Tuple[int, int, TaskEvent]]]:
    """Per launching thread, the launch slices made to nest: a launch created before an
    earlier one was queued (a launch whose ordering waits found the ring full) starts
    when that one ends."""
    per: Dict[int, List[TaskEvent]] = {}
    for e in events:
        if e.thread is not None and e.queued_ns is not None:
            per.setdefault(e.thread, []).append(e)
    out: Dict[int, List[Tuple[int, int, TaskEvent]]] = {}
    for tid, evs in per.items():
        evs.sort(key=lambda e: (e.submit_ns, e.queued_ns))
        last_end = 0
        rows = []
        for e in evs:
            start = max(e.submit_ns, last_end)
            end = max(start, e.queued_ns)
            rows.append((start, end, e))
            last_end = end
        out[tid] = rows
    return out


def write_chrome_trace(
    path: str,
    events: Sequence[TaskEvent],
    memory: Iterable[Tuple[int, int, int, int]] = (),
    steps: Iterable[Tuple[str, int, int, int]] = (),
    trace_name: Optional[str] = None,
    extra: Optional[Dict[str, Any]] = None,
) -> str:
    """Writes ``events`` (and memory samples ``(t_ns, device, allocated, reserved)``, step
    slices ``(name, thread, start_ns, end_ns)``) to ``path`` as Chrome trace JSON; returns
    the path. The file is written next to it and renamed (no half-written traces)."""
    memory = list(memory)
    steps = list(steps)
    times = [e.submit_ns for e in events] + [m[0] for m in memory] + [s[2] for s in steps]
    base = min(times) if times else _npurt._clock_ns()
    b = _Builder(base)
    hpid = host_pid()
    b.processes[hpid] = (f"Host (pid {os.getpid()})", 0)
    names = _thread_names()
    by_task: Dict[Tuple[int, int], TaskEvent] = {(e.stream, e.seq): e for e in events}
    eids = {id(e): i + 1 for i, e in enumerate(events)}
    host = _host_slices(events)
    host_start: Dict[int, Tuple[int, int]] = {}
    for tid, rows in host.items():
        b.track(hpid, tid, names.get(tid, f"thread {tid}"), 0 if tid == os.getpid() else 1)
        for start, end, e in rows:
            args: Dict[str, Any] = {"External id": eids[id(e)]}
            if e.site:
                args["site"] = e.site
            b.slice(hpid, tid, RUNTIME_CALLS.get(e.kind, e.kind), "cuda_runtime", start, end, args)
            host_start[id(e)] = (tid, start)
    for name, tid, start, end in steps:
        b.track(hpid, tid, names.get(tid, f"thread {tid}"), 0)
        b.slice(hpid, tid, name, "user_annotation", start, end, {})
    for e in events:
        dev = e.device
        b.processes.setdefault(dev, (f"NPU {dev}", 1 + dev))
        b.track(dev, e.stream, f"Stream {e.stream}", e.stream)
        cat = KINDS.get(e.kind, e.kind)
        args = _task_args(e, eids[id(e)])
        b.slice(dev, e.stream, e.name, cat, e.start_ns, e.end_ns, args)
        if e.kind == "kernel":
            spans = e.spans or ([(e.core, 1, e.start_ns, e.end_ns)] if e.core is not None else [])
            for core, blocks, s, t in spans:
                b.track(dev, AICORE_TID + core, f"AI Core {core}", AICORE_TID + core)
                b.slice(dev, AICORE_TID + core, e.name, cat, s, t, {"External id": eids[id(e)], "blocks": blocks})
        elif e.kind in COPY_KINDS:
            b.track(dev, COPY_TID, "Copy Engine", COPY_TID)
            b.slice(dev, COPY_TID, e.name, cat, e.start_ns, e.end_ns, {"External id": eids[id(e)]})
        elif e.kind == "host_func" and e.core is not None:
            tid = CALLBACK_TID + e.core
            b.track(dev, tid, f"Host Callback {e.core}", tid)
            b.slice(dev, tid, e.name, cat, e.start_ns, e.end_ns, {"External id": eids[id(e)]})
        hs = host_start.get(id(e))
        if hs is not None:
            b.flow(LAUNCH_FLOW, (hpid, hs[0], hs[1]), (dev, e.stream, e.start_ns))
        if e.wait_on:
            rel = by_task.get((e.wait_on[0], e.wait_on[1] - 1))
            if rel is not None:
                src = rel.end_ns - 1 if rel.end_ns > rel.start_ns else rel.start_ns
                dst = min(max(rel.end_ns, e.start_ns), max(e.start_ns, e.end_ns - 1))
                b.flow(SYNC_FLOW, (rel.device, rel.stream, src), (e.device, e.stream, dst))
    for t, dev, allocated, reserved in memory:
        b.processes.setdefault(dev, (f"NPU {dev}", 1 + dev))
        b.out.append({"ph": "C", "name": "Memory", "pid": dev, "tid": 0, "ts": b.ts(t),
                      "args": {"Allocated": allocated, "Reserved": reserved}})
    trace: Dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": d, "name": f"npurt NPU {d}"} for d in sorted(p for p in b.processes if p != hpid)],
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base + (time.time_ns() - _npurt._clock_ns()),
        "traceEvents": b.metadata() + b.out,
        "traceName": trace_name or os.path.basename(path),
    }
    if extra:
        trace.update(extra)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(trace, f, separators=(",", ":"))
    os.replace(tmp, path)
    return path
