"""npurt's profiler: ``with npurt.profile() as prof:`` (and torch's spelling,
``npurt.npu.profiler.profile(activities=..., schedule=..., on_trace_ready=...)``).

While a profile runs, the runtime records every task of the observed devices (kind, name,
stream, cores, blocks, bytes, submit / start / end) with the host side of its launch and
its Python call site; ``profile_memory`` adds allocated / reserved memory over time from the
memory event hook. Results: ``events()``, ``key_averages().table(sort_by=...)``,
``export_chrome_trace(path)`` (Perfetto / chrome://tracing), ``memory_timeline()``.
"""

from __future__ import annotations

import enum
import os
import socket
import threading
import time
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

from .. import _npurt
from .events import TaskEvent, build
from .memory import MemoryRecorder, MemoryTimeline
from .table import EventList, FunctionEventAvg, key_averages
from .trace import write_chrome_trace

__all__ = [
    "EventList", "FunctionEventAvg", "MemoryTimeline", "ProfilerAction", "ProfilerActivity", "TaskEvent",
    "profile", "schedule", "tensorboard_trace_handler", "write_chrome_trace",
]


class ProfilerActivity(enum.Enum):
    """What to record (torch's names; ``NPU`` as torch_npu's, ``CUDA`` accepted)."""

    CPU = "cpu"
    NPU = "npu"
    CUDA = "npu"


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """torch.profiler.schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle,
    ``warmup`` profiled-but-discarded and ``active`` recorded steps (the last one saves:
    ``on_trace_ready``), ``repeat`` cycles (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("schedule() needs wait, warmup, repeat, skip_first >= 0 and active > 0")

    def fn(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        m = step % cycle
        if m < wait:
            return ProfilerAction.NONE
        if m < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if m < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return fn


def _worker_name() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"


def tensorboard_trace_handler(dir_name: str, worker_name: Optional[str] = None, use_gzip: bool = False) -> Callable[["profile"], None]:
    """``on_trace_ready`` handler writing torch_npu's layout under ``dir_name``:
    ``{worker}_{timestamp}_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json`` (the trace),
    ``kernel_details.csv`` and, with ``profile_memory``, ``memory_record.csv``."""
    if use_gzip:
        raise ValueError("use_gzip is not supported: npurt writes plain JSON")

    def handler(prof: "profile") -> None:
        name = worker_name or _worker_name()
        stamp = time.strftime("%Y%m%d%H%M%S") + f"{time.time_ns() // 1_000_000 % 1000:03d}"
        out = os.path.join(dir_name, f"{name}_{stamp}_ascend_pt", "ASCEND_PROFILER_OUTPUT")
        os.makedirs(out, exist_ok=True)
        prof.export_chrome_trace(os.path.join(out, "trace_view.json"))
        prof._write_csvs(out)
        prof.last_trace_dir = os.path.dirname(out)

    return handler


_ALL = (ProfilerActivity.CPU, ProfilerActivity.NPU)


class profile:
    """Records tasks between ``start()`` / ``__enter__`` and ``stop()`` / ``__exit__``.

    ``npurt.profile(record_shapes=False, profile_memory=False, with_stack=False)``, or with
    torch's arguments ``activities`` (``ProfilerActivity.CPU``: host launch slices;
    ``ProfilerActivity.NPU``: device tasks; both by default), ``schedule``, ``on_trace_ready``
    (called with the profile when an active window ends, or at exit without a schedule).
    ``devices``: ordinals to observe (default: every active device, else the current one).
    ``with_flops``, ``with_modules`` and ``experimental_config`` are accepted and ignored.
    """

    def __init__(self, activities: Optional[Iterable[ProfilerActivity]] = None, schedule: Optional[Callable[[int], ProfilerAction]] = None,
                 on_trace_ready: Optional[Callable[["profile"], Any]] = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: Any = None, devices: Optional[Sequence[int]] = None) -> None:
        from ..exceptions import InvalidTypeError

        try:
            acts = set(activities) if activities is not None else set(_ALL)
        except TypeError:
            raise InvalidTypeError(f"activities must be an iterable of ProfilerActivity, not {activities!r}") from None
        for a in acts:
            if not isinstance(a, ProfilerActivity):
                raise InvalidTypeError(f"activities must be ProfilerActivity values, not {a!r}")
        self.activities = acts
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        if devices is not None and not isinstance(devices, (list, tuple, range)):
            raise InvalidTypeError(f"devices must be a sequence of device ordinals, not {type(devices).__name__}")
        self.devices = list(devices) if devices is not None else None
        self.step_num = 0
        self.last_trace_dir: Optional[str] = None
        self._collector: Any = None
        self._memory: Optional[MemoryRecorder] = None
        self._events: List[TaskEvent] = []
        self._mem_samples: List[Tuple[int, int, int, int]] = []
        self._steps: List[Tuple[str, int, int, int]] = []
        self._step_start: Optional[Tuple[int, int]] = None
        self._action = ProfilerAction.RECORD
        self._running = False

    # -- recording -------------------------------------------------------------------
    def _begin(self) -> None:
        self._collector = _npurt._Collector(self.devices, self.record_shapes, self.with_stack)
        if self.profile_memory:
            self._memory = MemoryRecorder(self._collector.devices)
        self._steps = []
        self._step_start = (threading.get_native_id(), _npurt._clock_ns())

    def _end(self, keep: bool = True) -> None:
        """Stops recording; ``keep``: the results replace the previous window's."""
        if self._collector is None:
            return
        self._close_step()
        self._collector.stop()
        recs, launches = self._collector.take()
        events = build(recs, launches)
        if ProfilerActivity.CPU not in self.activities:
            for e in events:
                e.thread = e.queued_ns = None
        if ProfilerActivity.NPU not in self.activities:
            events = []
        samples = self._memory.stop() if self._memory is not None else []
        self._memory = None
        self._collector = None
        if keep:
            self._events, self._mem_samples = events, samples

    def _discard(self) -> None:
        if self._collector is not None:
            self._collector.take()
        self._steps = []
        self._step_start = (threading.get_native_id(), _npurt._clock_ns())

    def _close_step(self) -> None:
        if self._step_start is not None and self.schedule is not None:
            tid, t0 = self._step_start
            self._steps.append((f"ProfilerStep#{self.step_num}", tid, t0, _npurt._clock_ns()))
        self._step_start = None

    def _save(self) -> None:
        self._end()
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def start(self) -> None:
        if self._running:
            raise RuntimeError("the profiler is already running")
        self._running = True
        self.step_num = 0
        self._action = self.schedule(0) if self.schedule else ProfilerAction.RECORD
        if self._action != ProfilerAction.NONE:
            self._begin()

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._save()
        else:
            self._end(keep=False)

    def step(self) -> None:
        """Marks the end of a step (torch's ``prof.step()``); drives the schedule."""
        if not self._running:
            return
        prev = self._action
        if self._collector is not None and self.schedule is not None:
            self._close_step()
            if prev != ProfilerAction.RECORD_AND_SAVE:
                self._step_start = (threading.get_native_id(), _npurt._clock_ns())
        self.step_num += 1
        cur = self.schedule(self.step_num) if self.schedule else ProfilerAction.RECORD
        self._action = cur
        if prev == ProfilerAction.RECORD_AND_SAVE:
            self._save()
            if cur != ProfilerAction.NONE:
                self._begin()
        elif prev == ProfilerAction.NONE and cur != ProfilerAction.NONE:
            self._begin()
        elif prev == ProfilerAction.WARMUP and cur in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._discard()  # warm-up steps are profiled, not kept
        elif prev != ProfilerAction.NONE and cur == ProfilerAction.NONE:
            self._end(keep=False)

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- results ---------------------------------------------------------------------
    def events(self) -> List[TaskEvent]:
        """Every recorded task, by start time."""
        return list(self._events)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        """The op table's rows (``.table(sort_by="npu_time_total", row_limit=10)``)."""
        return key_averages(self._events, group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> str:
        """Chrome trace JSON (Kineto's shape) of the recorded window; opens in Perfetto."""
        if not str(path).endswith(".json"):
            raise ValueError(f"export_chrome_trace writes JSON: {path!r} should end in .json")
        return write_chrome_trace(str(path), self._events, self._mem_samples, self._steps)

    def memory_timeline(self) -> MemoryTimeline:
        """Allocated and reserved bytes per device over time (``profile_memory=True``)."""
        if not self.profile_memory:
            raise RuntimeError("memory_timeline() needs profile(profile_memory=True)")
        return MemoryTimeline(self._mem_samples)

    def _write_csvs(self, out: str) -> None:
        import csv

        with open(os.path.join(out, "kernel_details.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                        "Wait Time(us)", "Block Dim", "Input Shapes", "Stream Id", "Source Location"])
            for e in self._events:
                w.writerow([self.step_num, e.name, e.kind, " ".join(map(str, e.cores)), f"{e.start_ns / 1e3:.3f}",
                            f"{(e.end_ns - e.start_ns) / 1e3:.3f}", f"{(e.start_ns - e.submit_ns) / 1e3:.3f}", e.blocks,
                            e.shapes or "", e.stream, e.site or ""])
        if self._mem_samples:
            with open(os.path.join(out, "memory_record.csv"), "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["Component", "Device", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)"])
                for t, dev, a, r in self._mem_samples:
                    w.writerow(["npurt", dev, f"{t / 1e3:.3f}", f"{a / 2**20:.4f}", f"{r / 2**20:.4f}"])


# -- NPURT_DUMP_ON_ERROR: the flight recorder ---------------------------------------------
_dump_path: Optional[str] = None
_dump_lock = threading.Lock()
FLIGHT_RECORDS = 4096


def arm_dump_on_error(path: str, capacity: int = FLIGHT_RECORDS) -> None:
    """Keeps the last ``capacity`` task records (with call sites) and writes them as a trace
    to ``path`` when a failed task or a timeout is raised (``NPURT_DUMP_ON_ERROR=path``)."""
    global _dump_path
    _dump_path = path
    _npurt._flight_recorder(capacity)


def _dump_on_error(message: str) -> None:
    if _dump_path is None:
        return
    with _dump_lock:
        events = build(_npurt._flight_records())
        write_chrome_trace(_dump_path, events, trace_name="npurt flight recorder",
                           extra={"npurtError": message})


def _from_env() -> None:
    path = os.environ.get("NPURT_DUMP_ON_ERROR")
    if path:
        arm_dump_on_error(path)
    if os.environ.get("NPURT_CALL_SITES", "").strip() not in ("", "0"):
        _npurt._call_sites(True)


_from_env()
