"""Profiling the README's two-stream copy/compute pipeline: the trace passes the checker
(every task present, flows paired, slices nested per track, times ordered, tracks named)
and copies overlap kernels in time."""

import json

import npurt
import numpy as np
import pytest
from trace_check import check_trace

CHUNKS, ROWS, K = 8, 8192, 128  # a chunk's matmul takes a few times its copies


def pipeline(prof_kwargs=None):
    """The README's pipeline: chunk c goes H2D -> matmul -> D2H on stream c % 2."""
    w = npurt.to_device(np.random.default_rng(0).standard_normal((K, K)).astype(np.float32) / K)
    w.synchronize()
    streams = [npurt.Stream(), npurt.Stream()]
    hosts = [npurt.malloc_host(ROWS * K * 4) for _ in range(2 * CHUNKS)]
    ins = [h.numpy(np.float32).reshape(ROWS, K) for h in hosts[:CHUNKS]]
    for c, x in enumerate(ins):
        x[...] = c
    xs = [npurt.empty((ROWS, K)) for _ in streams]
    ys = [npurt.empty((ROWS, K)) for _ in streams]
    for a in xs + ys:
        a.synchronize()
    try:
        with npurt.profile(**(prof_kwargs or {})) as prof:
            for c in range(CHUNKS):
                i = c % 2
                s = streams[i]
                xs[i].copy_(ins[c], stream=s)
                npurt.matmul(xs[i], w, out=ys[i], stream=s, blocks=1)
                ys[i].to_host(out=hosts[CHUNKS + c], stream=s)
            for s in streams:
                s.synchronize()
        col = w.to_host().sum(axis=0)
        got = hosts[2 * CHUNKS - 1].numpy(np.float32).reshape(ROWS, K)[0]
        assert np.allclose(got, (CHUNKS - 1) * col, rtol=1e-3, atol=1e-3)
        return prof, streams
    finally:
        for h in hosts:
            h.free()


def overlaps(a, b):
    return a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]


def test_pipeline_trace_passes_the_checker_and_copies_overlap_kernels(tmp_path):
    # Overlap needs the copy engine and a worker to hold a CPU at once; on a machine
    # loaded by others a run may get one CPU at a time, so up to three runs are tried
    # (each run's trace must pass every check).
    for attempt in range(3):
        if check_pipeline_run(str(tmp_path / f"pipeline{attempt}.json")):
            return
    raise AssertionError("no copy overlapped a kernel in three runs")


def check_pipeline_run(path):
    prof, streams = pipeline()
    path = prof.export_chrome_trace(path)
    summary = check_trace(path)
    events = prof.events()
    # Every task present: one stream-track slice per recorded task, and the recorded tasks
    # of each stream are contiguous (nothing lost between the first and the last).
    tasks = summary.device_tasks()
    assert sorted((t["args"]["stream"], t["args"]["seq"]) for t in tasks) == sorted((e.stream, e.seq) for e in events)
    for s in streams:
        seqs = sorted(e.seq for e in events if e.stream == s.id)
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    kinds = [e.kind for e in events]
    assert kinds.count("h2d") == CHUNKS and kinds.count("d2h") == CHUNKS
    assert [e.name for e in events].count("matmul") == CHUNKS
    # Tracks: both streams, the copy engine, the AI cores, the host thread.
    for s in streams:
        assert f"Stream {s.id}" in summary.thread_names.values()
    assert summary.track("Copy Engine") and summary.tracks_named("AI Core ")
    assert summary.process_names  # host and device named
    # A flow from every launch to its task.
    launches = summary.flows_of("ac2g")
    assert len(launches) == len(events)
    # Kineto's shape.
    raw = json.load(open(path))
    assert raw["schemaVersion"] == 1 and raw["displayTimeUnit"] == "ms"
    x = next(e for e in raw["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel")
    assert x["pid"] == 0 and x["tid"] in [s.id for s in streams]
    # Copies overlap kernels: the pipeline's point.
    copies = summary.track("Copy Engine")
    kernels = [k for name in summary.tracks_named("AI Core ") for k in summary.track(name)]
    return any(overlaps(c, k) for c in copies for k in kernels)


def test_event_waits_have_flows_from_the_record_and_callbacks_a_track(tmp_path):
    a, b = npurt.Stream(), npurt.Stream()
    ev = npurt.Event()
    hits = []
    with npurt.profile() as prof:
        npurt.kernels.busy(0.05, stream=a)  # still running when b's wait is queued
        ev.record(a)
        b.wait_event(ev)
        npurt.kernels.busy(0.001, stream=b, blocks=2)
        b.launch_host_func(hits.append, 1)
        b.synchronize()
        a.synchronize()
    assert hits == [1]
    summary = check_trace(prof.export_chrome_trace(str(tmp_path / "t.json")))
    syncs = summary.flows_of("npu_sync")
    assert len(syncs) == 1
    src, dst = syncs[0]["s"], syncs[0]["f"]
    assert (src["tid"], dst["tid"]) == (a.id, b.id)
    wait = next(e for e in prof.events() if e.kind == "wait")
    assert wait.wait_on[0] == a.id
    assert summary.tracks_named("Host Callback")
    multi = next(e for e in prof.events() if e.kind == "kernel" and e.blocks == 2)
    assert sum(b for _, b, _, _ in multi.spans) == 2


def test_shapes_and_stacks_are_recorded_when_asked(tmp_path):
    x = npurt.ones((4, 8))
    with npurt.profile(record_shapes=True, with_stack=True) as prof:
        y = npurt.add(x, 1.0)
        y.synchronize()
    k = next(e for e in prof.events() if e.kind == "kernel")
    assert k.shapes == "[[4, 8], [4, 8]]"
    assert k.site.startswith(__file__) and k.stack[-1].startswith(__file__)
    assert "test_shapes_and_stacks_are_recorded_when_asked" in k.stack[-1]
    with npurt.profile() as plain:
        npurt.add(x, 1.0).synchronize()
    k2 = next(e for e in plain.events() if e.kind == "kernel")
    assert k2.shapes is None and k2.stack is None and k2.site.startswith(__file__)


def test_profiler_off_records_nothing_and_bad_paths_raise(tmp_path):
    with npurt.profile() as prof:
        pass
    assert prof.events() == []
    check_trace(prof.export_chrome_trace(str(tmp_path / "empty.json")))
    with pytest.raises(ValueError):
        prof.export_chrome_trace(str(tmp_path / "trace.txt"))
