"""``prof.key_averages()`` and its ``table()``: torch's op table (``profiler_util``'s
columns where they apply) over task events. Host ("CPU") time of a row is the time its
launches took on the launching threads; device ("NPU") time is the time its tasks ran.
Tasks have no children, so self and total times are equal. Times are in µs, as torch's."""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Tuple

from .events import COPY_KINDS, TaskEvent


class FunctionEventAvg:
    """One row: the tasks sharing a key (name, plus shapes / stack frames if grouped)."""

    def __init__(self, key: str, shapes: Optional[str] = None, stack: Optional[List[str]] = None) -> None:
        self.key = key
        self.input_shapes = shapes
        self.stack = stack or []
        self.count = 0
        self.cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.bytes = 0
        self.kinds: set = set()

    def add(self, e: TaskEvent) -> None:
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.device_time_total += e.device_time_total
        self.bytes += e.bytes
        self.kinds.add(e.kind)

    # torch's names (self == total: a task has no children).
    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total

    @property
    def self_device_time_total(self) -> float:
        return self.device_time_total

    @property
    def npu_time_total(self) -> float:
        return self.device_time_total

    self_npu_time_total = self_device_time_total

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        return self.device_time_total / self.count if self.count else 0.0

    npu_time = device_time

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} count={self.count} cpu_time_total={self.cpu_time_total:.3f}us "
                f"npu_time_total={self.device_time_total:.3f}us bytes={self.bytes}>")


# sort_by keys (torch's, with cuda/device/npu spelled any way) -> the row's value.
_SORT: Dict[str, Callable[[FunctionEventAvg], float]] = {
    "cpu_time_total": lambda r: r.cpu_time_total,
    "self_cpu_time_total": lambda r: r.self_cpu_time_total,
    "cpu_time": lambda r: r.cpu_time,
    "device_time_total": lambda r: r.device_time_total,
    "self_device_time_total": lambda r: r.self_device_time_total,
    "device_time": lambda r: r.device_time,
    "count": lambda r: r.count,
    "bytes": lambda r: r.bytes,
}


def sort_key(name: str) -> Callable[[FunctionEventAvg], float]:
    key = name
    for dev in ("cuda", "npu", "xpu", "privateuse1"):
        key = key.replace(dev, "device")
    if key not in _SORT:
        known = sorted(set(_SORT) | {k.replace("device", "npu") for k in _SORT})
        raise ValueError(f"sort_by={name!r} is not a column; use one of {known}")
    return _SORT[key]


def _fmt_time(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "0.00%"


class EventList(list):
    """The rows of ``key_averages()`` (a list of :class:`FunctionEventAvg`)."""

    def table(self, sort_by: Optional[str] = None, row_limit: int = 100, max_name_column_width: int = 55,
              header: Optional[str] = None, top_level_events_only: bool = False) -> str:
        rows = list(self)
        if sort_by is not None:
            rows.sort(key=sort_key(sort_by), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        all_rows = list(self)
        cpu_total = sum(r.self_cpu_time_total for r in all_rows)
        dev_total = sum(r.self_device_time_total for r in all_rows)
        has_bytes = any(r.bytes for r in all_rows)
        has_shapes = any(r.input_shapes for r in all_rows)
        has_stack = any(r.stack for r in all_rows)
        name_w = min(max([len("Name")] + [len(r.key) for r in rows]) + 2, max_name_column_width)
        cols: List[Tuple[str, int, Callable[[FunctionEventAvg], str]]] = [
            ("Name", name_w, lambda r: r.key if len(r.key) <= name_w - 2 else r.key[: name_w - 5] + "..."),
            ("Self CPU %", 12, lambda r: _pct(r.self_cpu_time_total, cpu_total)),
            ("Self CPU", 12, lambda r: _fmt_time(r.self_cpu_time_total)),
            ("CPU total %", 12, lambda r: _pct(r.cpu_time_total, cpu_total)),
            ("CPU total", 12, lambda r: _fmt_time(r.cpu_time_total)),
            ("CPU time avg", 12, lambda r: _fmt_time(r.cpu_time)),
            ("Self NPU", 12, lambda r: _fmt_time(r.self_device_time_total)),
            ("Self NPU %", 12, lambda r: _pct(r.self_device_time_total, dev_total)),
            ("NPU total", 12, lambda r: _fmt_time(r.device_time_total)),
            ("NPU time avg", 12, lambda r: _fmt_time(r.device_time)),
        ]
        if has_bytes:
            cols.append(("Bytes", 12, lambda r: _fmt_bytes(r.bytes) if r.bytes else ""))
        cols.append(("# of Calls", 12, lambda r: str(r.count)))
        if has_shapes:
            cols.append(("Input Shapes", 40, lambda r: (r.input_shapes or "")[:38]))
        if has_stack:
            cols.append(("Source Location", 40, lambda r: (r.stack[-1] if r.stack else "")[-38:]))
        line = "-" * (sum(w for _, w, _ in cols) + len(cols) - 1)
        out = []
        if header:
            out.append(header)
        fmt_row = lambda vals: " ".join(v.rjust(w) if i else v.ljust(w) for i, (v, (_, w, _)) in enumerate(zip(vals, cols, strict=True)))  # noqa: E731
        out += [line, fmt_row([c for c, _, _ in cols]), line]
        for r in rows:
            out.append(fmt_row([f(r) for _, _, f in cols]))
        out.append(line)
        out.append(f"Self CPU time total: {_fmt_time(cpu_total)}")
        out.append(f"Self NPU time total: {_fmt_time(dev_total)}")
        return "\n".join(out) + "\n"

    def __str__(self) -> str:
        return self.table()


def key_averages(events: Iterable[TaskEvent], group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
    """Rows per task name (and shapes / the innermost ``group_by_stack_n`` stack frames)."""
    rows: Dict[Tuple, FunctionEventAvg] = {}
    for e in events:
        stack = (e.stack or ([e.site] if e.site else []))[-group_by_stack_n:] if group_by_stack_n > 0 else []
        shapes = e.shapes if group_by_input_shape else None
        k = (e.name, shapes, tuple(stack))
        row = rows.get(k)
        if row is None:
            row = rows[k] = FunctionEventAvg(e.name, shapes if group_by_input_shape else None, list(stack))
            if not group_by_input_shape and e.shapes:
                row.input_shapes = e.shapes
        row.add(e)
    return EventList(rows.values())


__all__ = ["COPY_KINDS", "EventList", "FunctionEventAvg", "key_averages", "sort_key"]
