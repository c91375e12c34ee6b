"""The bench's array-copy figures and the copy/compute overlap pipeline on DeviceArrays:
what they record and print, and that a wrong pipeline fails the run. No timed assertions."""

import json

import npurt
import numpy as np
import pytest
from npurt.bench import cli, copies

FAST = ["--quick", "--reps", "1", "--no-progress"]


def _main(tmp_path, *args):
    assert cli.main([*FAST, "--out", str(tmp_path), *args]) == 0
    return json.loads((tmp_path / "bench.json").read_text())


def test_overlap_runs_on_arrays_and_reports_both_block_plans(tmp_path, capsys):
    res = _main(tmp_path, "--workloads", "overlap")
    r = res["results"]
    ov, dflt = r["overlap_seconds_by_streams"], r["overlap_default_blocks_seconds_by_streams"]
    assert ov["blocks"] == 1 and dflt["blocks"] is None
    assert ov["chunks"] == 16 and ov["chunk_bytes"] == copies.ROWS * copies.K * 4 and "matmul" in ov["kernel"]
    assert {"1", "2", "4"} <= set(ov) and {"1", "2"} <= set(dflt)
    assert all(ov[k]["median"] > 0 for k in ("1", "2", "4"))
    out = capsys.readouterr().out
    assert "overlap on arrays, one block per matmul" in out and "default block plan" in out
    base = r["baseline_python_threads_overlap_seconds_by_streams"]
    assert base["1"]["median"] > 0 and base["2"]["median"] > 0 and "one Python thread per stream" in out
    assert npurt.memory_allocated() == 0  # arrays and pinned buffers all freed


def test_a_pipeline_that_skips_a_copy_fails(monkeypatch):
    monkeypatch.setattr(npurt.DeviceArray, "copy_", lambda self, src, stream=None: self)
    with pytest.raises(RuntimeError, match="wrong result"):
        copies.overlap(2, chunks=4, rows=64, k=16)


def test_memory_workload_has_the_array_copy_figures(tmp_path, capsys):
    m = _main(tmp_path, "--workloads", "memory")["results"]["memory"]
    for key in ("array_h2d_pinned_gbps", "array_d2h_pinned_gbps", "array_numpy_copyto_gbps"):
        assert m[key] > 0
    out = capsys.readouterr().out
    assert "array H2D 64 MiB pinned vs np.copyto" in out and "array D2H 64 MiB pinned vs np.copyto" in out


def test_array_copy_figures_check_the_bytes(monkeypatch):
    real = npurt.DeviceArray.copy_
    monkeypatch.setattr(npurt.DeviceArray, "copy_", lambda self, src, stream=None: real(self, np.zeros(self.shape, np.float32), stream))
    with pytest.raises(RuntimeError, match="wrong result"):
        copies.array_copy_gbps(1 << 20, 1)
