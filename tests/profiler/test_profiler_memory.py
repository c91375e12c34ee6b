"""profile_memory: the memory timeline (allocated and reserved per device over time, from
the memory event hook) tells a leaking loop from a reusing one, and the trace gets
memory counters."""

import npurt
from trace_check import check_trace

MIB = 1 << 20
N = 16


def loop(leak):
    npurt.synchronize()
    npurt.empty_cache()  # cached free segments from earlier tests would hide a leak
    kept = []
    with npurt.profile(profile_memory=True) as prof:
        for _ in range(N):
            b = npurt.malloc(4 * MIB)
            if leak:
                kept.append(b)
            else:
                b.free()
    for b in kept:
        b.free()
    npurt.empty_cache()
    return prof


def test_the_memory_timeline_tells_a_leak_from_reuse(tmp_path):
    leaking, reusing = loop(leak=True), loop(leak=False)
    lt, rt = leaking.memory_timeline(), reusing.memory_timeline()
    assert 0 in lt.devices() and len(lt) >= 2 * N and len(rt) >= 2 * N
    # Leak: allocated and reserved keep rising (a segment per iteration).
    la, lr = lt.allocated(0), lt.reserved(0)
    assert la[-1] - la[0] >= N * 4 * MIB and lr[-1] - lr[0] >= (N - 1) * 4 * MIB
    assert all(b >= a for a, b in zip(lr, lr[1:], strict=False))
    # Reuse: allocated goes up and down, reserved rises at most once (the first segment).
    ra, rr = rt.allocated(0), rt.reserved(0)
    assert max(ra) - ra[0] >= 4 * MIB and ra[-1] == ra[0]
    assert max(rr) - rr[0] <= 8 * MIB
    # The trace carries both curves as counters.
    summary = check_trace(leaking.export_chrome_trace(str(tmp_path / "leak.json")))
    assert summary.counters and {"Allocated", "Reserved"} <= set(summary.counters[-1]["args"])
    assert summary.counters[-1]["args"]["Reserved"] - summary.counters[0]["args"]["Reserved"] >= (N - 1) * 4 * MIB


def test_memory_timeline_needs_profile_memory():
    import pytest

    with npurt.profile() as prof:
        pass
    with pytest.raises(RuntimeError, match="profile_memory"):
        prof.memory_timeline()
