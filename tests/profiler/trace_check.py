"""A checker for npurt's Chrome traces, standing in for Perfetto's importer (whose trace
processor cannot run here). It enforces what Perfetto and Kineto-reading tools rely on:

* the top level: an object with ``traceEvents``, ``schemaVersion``, ``baseTimeNanoseconds``,
  ``displayTimeUnit``;
* known phases only (X, M, s, f, C, i) with their required keys; ``ts``/``dur`` numbers ≥ 0;
* tracks named: every ``pid`` with events has a ``process_name``, every ``(pid, tid)``
  holding slices a ``thread_name``;
* slices on one track nest (no partial overlap);
* flows: each ``(id, cat, name)`` has exactly one ``s`` and one ``f`` (``bp: "e"``), the
  ``f`` not before the ``s``, each end inside a slice of its track;
* times ordered: a task's launch slice (host) starts no later than its device slice.

``check_trace(path)`` raises ``AssertionError`` naming the first problem and returns a
:class:`Summary` for further checks.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

EPS = 0.0015  # µs: ts and dur are rounded to 3 decimals each
PHASES = {"X", "M", "s", "f", "C", "i"}
META = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


@dataclass
class Summary:
    trace: Dict[str, Any]
    slices: Dict[Tuple[Any, Any], List[Dict[str, Any]]] = field(default_factory=dict)
    thread_names: Dict[Tuple[Any, Any], str] = field(default_factory=dict)
    process_names: Dict[Any, str] = field(default_factory=dict)
    flows: Dict[Tuple[Any, str, str], Dict[str, Dict[str, Any]]] = field(default_factory=dict)
    counters: List[Dict[str, Any]] = field(default_factory=list)

    def track(self, name: str) -> List[Dict[str, Any]]:
        """The slices of the track named ``name`` (e.g. ``"Copy Engine"``), every device."""
        out: List[Dict[str, Any]] = []
        for key, n in self.thread_names.items():
            if n == name:
                out += self.slices.get(key, [])
        return out

    def tracks_named(self, prefix: str) -> List[str]:
        return sorted({n for n in self.thread_names.values() if n.startswith(prefix)})

    def device_tasks(self) -> List[Dict[str, Any]]:
        """Slices on stream tracks: one per task."""
        return [s for key, n in self.thread_names.items() if n.startswith("Stream ") for s in self.slices.get(key, [])]

    def flows_of(self, cat: str) -> List[Dict[str, Dict[str, Any]]]:
        return [v for (fid, c, n), v in self.flows.items() if c == cat]


def _num(e: Dict[str, Any], k: str) -> float:
    v = e.get(k)
    assert isinstance(v, (int, float)) and not isinstance(v, bool), f"{k} must be a number: {e}"
    assert v >= 0, f"{k} must be >= 0: {e}"
    return float(v)


def _enclosing(slices: List[Dict[str, Any]], ts: float) -> bool:
    return any(s["ts"] - EPS <= ts <= s["ts"] + s["dur"] + EPS for s in slices)


def check_trace(path_or_trace: Any) -> Summary:
    if isinstance(path_or_trace, dict):
        trace = path_or_trace
    else:
        with open(path_or_trace) as f:
            trace = json.load(f)
    assert isinstance(trace, dict), "the trace must be a JSON object"
    for k in ("traceEvents", "schemaVersion", "baseTimeNanoseconds", "displayTimeUnit"):
        assert k in trace, f"missing top-level key {k}"
    assert isinstance(trace["baseTimeNanoseconds"], int)
    events = trace["traceEvents"]
    assert isinstance(events, list)
    s = Summary(trace)
    pids_used = set()
    slices: Dict[Tuple[Any, Any], List[Dict[str, Any]]] = defaultdict(list)
    flows: Dict[Tuple[Any, str, str], Dict[str, Dict[str, Any]]] = defaultdict(dict)
    for e in events:
        ph = e.get("ph")
        assert ph in PHASES, f"unknown phase {ph!r}: {e}"
        assert "pid" in e and "name" in e, f"pid and name needed: {e}"
        if ph == "M":
            assert e["name"] in META, f"unknown metadata {e['name']}"
            if e["name"] == "process_name":
                s.process_names[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                s.thread_names[(e["pid"], e["tid"])] = e["args"]["name"]
            else:
                assert isinstance(e["args"]["sort_index"], int)
            continue
        pids_used.add(e["pid"])
        _num(e, "ts")
        if ph == "X":
            _num(e, "dur")
            assert "tid" in e and "cat" in e, f"X needs tid and cat: {e}"
            slices[(e["pid"], e["tid"])].append(e)
        elif ph in ("s", "f"):
            assert "id" in e and "cat" in e and "tid" in e, f"flow needs id, cat, tid: {e}"
            key = (e["id"], e["cat"], e["name"])
            assert ph not in flows[key], f"two {ph!r} events for flow {key}"
            if ph == "f":
                assert e.get("bp") == "e", f"flow end must bind to its enclosing slice: {e}"
            flows[key][ph] = e
        elif ph == "C":
            assert isinstance(e.get("args"), dict) and e["args"], f"counter without values: {e}"
            s.counters.append(e)
    for pid in pids_used:
        assert pid in s.process_names, f"pid {pid} has no process_name"
    for key in slices:
        assert key in s.thread_names, f"track {key} has no thread_name"
    # Nesting per track.
    for key, evs in slices.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: List[Tuple[float, float]] = []
        for e in evs:
            start, end = e["ts"], e["ts"] + e["dur"]
            while stack and start >= stack[-1][1] - EPS:
                stack.pop()
            if stack:
                assert end <= stack[-1][1] + EPS, (
                    f"slices overlap without nesting on track {s.thread_names[key]!r} {key}: {e['name']} "
                    f"[{start}, {end}] vs [{stack[-1][0]}, {stack[-1][1]}]")
            stack.append((start, end))
    # Flows paired, ordered, bound.
    for key, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {key} is not paired: {sorted(pair)}"
        a, b = pair["s"], pair["f"]
        assert b["ts"] >= a["ts"] - EPS, f"flow {key} ends before it starts"
        for end in (a, b):
            assert _enclosing(slices.get((end["pid"], end["tid"]), []), end["ts"]), f"flow end outside any slice: {end}"
    # Launch before execution, per task (External id).
    by_eid: Dict[int, List[Dict[str, Any]]] = defaultdict(list)
    for evs in slices.values():
        for e in evs:
            eid = e.get("args", {}).get("External id")
            if eid is not None:
                by_eid[eid].append(e)
    for eid, evs in by_eid.items():
        host = [e for e in evs if e["cat"] == "cuda_runtime"]
        dev = [e for e in evs if e["cat"] != "cuda_runtime"]
        for h in host:
            for d in dev:
                assert h["ts"] <= d["ts"] + EPS, f"task {eid} runs before its launch: {h} {d}"
    s.slices = dict(slices)
    s.flows = dict(flows)
    return s
