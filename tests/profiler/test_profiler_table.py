"""The op table: torch's columns, sortable by device time (and any other column)."""

import npurt
import pytest


def profile_mix():
    s = npurt.Stream()
    with npurt.profile() as prof:
        for _ in range(3):
            npurt.kernels.busy(0.004, stream=s)
        for _ in range(40):
            npurt.kernels.empty(stream=s)
        s.synchronize()
    return prof


def test_the_table_sorts_by_device_time_and_by_calls():
    prof = profile_mix()
    rows = prof.key_averages()
    by_name = {r.key: r for r in rows}
    assert by_name["busy"].count == 3 and by_name["empty"].count == 40
    assert by_name["busy"].npu_time_total >= 3 * 4000 * 0.9  # µs, like torch
    assert by_name["busy"].npu_time_total > by_name["empty"].npu_time_total
    table = rows.table(sort_by="npu_time_total", row_limit=10)
    lines = table.splitlines()
    header = lines[1]
    for col in ("Name", "Self CPU %", "Self CPU", "CPU total", "CPU time avg", "Self NPU", "NPU total",
                "NPU time avg", "# of Calls"):
        assert col in header
    body = [ln for ln in lines[3:] if ln and not ln.startswith("-")]
    assert body[0].startswith("busy") and body[1].startswith("empty")
    assert lines[-2].startswith("Self CPU time total:") and lines[-1].startswith("Self NPU time total:")
    by_calls = rows.table(sort_by="count", row_limit=1).splitlines()
    assert by_calls[3].startswith("empty") and len([ln for ln in by_calls[3:] if ln and not ln.startswith(("-", "Self"))]) == 1
    # torch's spellings of the device column work too.
    for key in ("cuda_time_total", "device_time_total", "self_npu_time_total", "cpu_time_total", "npu_time"):
        rows.table(sort_by=key)
    with pytest.raises(ValueError, match="not a column"):
        rows.table(sort_by="flops")


def test_copies_show_their_bytes_and_events_are_scriptable():
    import numpy as np

    a = npurt.empty(1 << 16)
    with npurt.profile() as prof:
        a.copy_(np.ones(1 << 16, np.float32))
        a.to_host()
    h2d = [e for e in prof.events() if e.kind == "h2d"]
    assert h2d and h2d[0].bytes == 4 << 16 and h2d[0].name == "Memcpy HtoD"
    assert "Bytes" in prof.key_averages().table()
    for e in prof.events():
        assert e.submit_ns <= e.start_ns <= e.end_ns and e.device == 0
