"""Memory history in torch.cuda's snapshot format: record_history / _snapshot /
dump_snapshot, the memviz curves, and memory_summary's per-pool lines."""

import pickle
import subprocess
import sys

import npurt
import numpy as np
import pytest

MIB = 1 << 20


@pytest.fixture
def history():
    npurt.empty_cache()
    npurt.memory.record_history(max_entries=100_000)
    yield
    npurt.memory.record_history(enabled=None)


def _trace(snap, dev=0):
    return snap["device_traces"][dev]


def test_snapshot_has_torch_shape_states_and_stacks(history):
    keep = npurt.malloc(3 * MIB)  # a large segment of its own
    gone = npurt.malloc(1000)
    gone.free()
    snap = npurt.memory._snapshot()
    assert set(snap) >= {"segments", "device_traces"}
    actions = [e["action"] for e in _trace(snap)]
    for a in ("segment_alloc", "alloc", "free_requested", "free_completed"):
        assert a in actions, actions
    for e in _trace(snap):
        assert set(e) >= {"action", "addr", "size", "stream", "time_us", "frames"}
    times = [e["time_us"] for e in _trace(snap)]
    assert times == sorted(times)
    seg = next(s for s in snap["segments"] if any(b["address"] == keep.ptr for b in s["blocks"]))
    for k in ("device", "address", "total_size", "allocated_size", "active_size", "requested_size",
              "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"):
        assert k in seg
    assert seg["segment_type"] == "large" and seg["pool"] == "device"
    blk = next(b for b in seg["blocks"] if b["address"] == keep.ptr)
    assert blk["state"] == "active_allocated" and blk["requested_size"] == 3 * MIB
    # The live block's allocation stack names this test's line.
    assert any(f["name"] == "test_snapshot_has_torch_shape_states_and_stacks" and f["filename"] == __file__
               for f in blk["frames"]), blk["frames"][:3]
    # A freed block is in no segment as allocated.
    assert all(b["address"] != gone.ptr or b["state"] == "inactive" for s in snap["segments"] for b in s["blocks"])
    keep.free()


def test_oom_is_in_the_trace(history):
    total = npurt.mem_get_info()[1]
    with pytest.raises(npurt.OutOfMemoryError):
        npurt.malloc(total + MIB)
    oom = [e for e in _trace(npurt.memory._snapshot()) if e["action"] == "oom"]
    assert oom and oom[-1]["size"] >= total + MIB and "device_free" in oom[-1]


def test_max_entries_keeps_the_last_events():
    npurt.memory.record_history(max_entries=10)
    try:
        for _ in range(50):
            npurt.malloc(512).free()
        assert len(_trace(npurt.memory._snapshot())) == 10
    finally:
        npurt.memory.record_history(enabled=None)
    n = len(_trace(npurt.memory._snapshot()))
    npurt.malloc(512).free()
    assert len(_trace(npurt.memory._snapshot())) == n, "stopped: nothing recorded"
    with pytest.raises(ValueError):
        npurt.memory.record_history(enabled="sometimes")


def _run_loop(leak: bool):
    """A training-style loop: each step makes a ~1 MiB array and waits for its result;
    the leaking one keeps every step's array."""
    kept = []
    for i in range(12):
        a = npurt.zeros((256 + 16 * i if leak else 256, 1024), dtype=np.float32)
        npurt.synchronize()
        if leak:
            kept.append(a)
        else:
            del a
    return kept


def test_leaking_and_reusing_loops_are_told_apart(tmp_path):
    from npurt import memviz

    curves = {}
    for leak in (True, False):
        npurt.empty_cache()
        npurt.memory.record_history()
        kept = _run_loop(leak)
        path = tmp_path / f"leak{leak}.pickle"
        npurt.memory.dump_snapshot(path)
        npurt.memory.record_history(enabled=None)
        del kept
        with open(path, "rb") as f:
            curves[leak] = memviz.timeline(pickle.load(f))[0]
    leak_r, reuse_r = curves[True]["reserved"], curves[False]["reserved"]
    # Leak: reserved keeps rising, to about the sum of the arrays.
    assert leak_r[-1] >= 12 * MIB and leak_r[-1] == max(leak_r)
    # Reuse: after the first iterations reserved is flat, allocated goes up and down.
    assert max(reuse_r) <= 3 * MIB, max(reuse_r)
    alloc = curves[False]["allocated"]
    assert max(alloc) >= MIB and alloc[-1] < max(alloc)


def test_memviz_draws_a_png(tmp_path, history):
    pytest.importorskip("matplotlib")
    a = npurt.malloc(2 * MIB)
    a.free()
    snap = tmp_path / "s.pickle"
    npurt.memory.dump_snapshot(snap)
    out = tmp_path / "mem.png"
    r = subprocess.run([sys.executable, "-m", "npurt.memviz", str(snap), "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_memviz_without_matplotlib_is_a_clear_error(tmp_path, history):
    snap = tmp_path / "s.pickle"
    npurt.memory.dump_snapshot(snap)
    code = ("import sys; sys.modules['matplotlib'] = None; from npurt import memviz; "
            f"sys.exit(memviz.main([{str(snap)!r}, '-o', {str(tmp_path / 'x.png')!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "pip install 'npurt[viz]'" in r.stderr


def test_memory_summary_has_pool_and_page_kind_lines():
    pool = npurt.MemPool(4 * MIB)
    try:
        s = npurt.memory_summary()
        assert "caching pool" in s and f"mempool {pool.id}" in s and "dedicated segments" in s
        for k in ("hugetlb pages", "thp pages", "normal pages"):
            assert k in s
    finally:
        pool.destroy()


def test_timeline_counts_only_what_recording_saw():
    """A block allocated before recording and freed during it (a garbage-collected buffer of
    earlier code) must not take the curve below zero."""
    from npurt import memviz

    ev = lambda action, addr, size, t: {"action": action, "addr": addr, "size": size, "time_us": t}  # noqa: E731
    trace = [
        ev("free_completed", 0x1000, 4096, 1),  # from before recording
        ev("segment_free", 0x10000, 1 << 20, 2),  # likewise
        ev("segment_alloc", 0x20000, 2 << 20, 3),
        ev("alloc", 0x20000, 512, 4),
        ev("alloc", 0x20200, 512, 5),
        ev("free_completed", 0x20000, 512, 6),
        ev("alloc", 0x20000, 1024, 7),  # the address comes back
        ev("free_completed", 0x20000, 1024, 8),
        ev("free_completed", 0x20000, 1024, 9),  # a second free of it: not counted twice
    ]
    c = memviz.timeline({"device_traces": [trace]})[0]
    assert c["allocated"] == [0, 0, 0, 512, 1024, 512, 1536, 512, 512]
    assert c["reserved"] == [0, 0, 2 << 20] + [2 << 20] * 6
