"""``python -m npurt.bench.collectives``: the nccl-tests table for every backend and the
mpi4py baseline of the same run, small sizes (a quick run), every row correct; and the
bus-bandwidth factors and size arithmetic it reports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from npurt.bench import _coll_worker as w
from npurt.bench.collectives import parse_size, sizes


def test_factors_and_counts_are_nccl_tests():
    assert w.BUS_FACTOR["all_reduce"](4) == pytest.approx(1.5)
    assert w.BUS_FACTOR["all_gather"](4) == w.BUS_FACTOR["reduce_scatter"](4) == w.BUS_FACTOR["all_to_all"](4) == 0.75
    assert w.BUS_FACTOR["broadcast"](4) == 1.0
    assert w.counts("all_gather", 4096, 4) == (256, 1024)
    assert w.counts("reduce_scatter", 4096, 4) == (1024, 256)
    assert w.counts("all_reduce", 4096, 4) == (1024, 1024)
    assert parse_size("1K") == 1024 and parse_size("256M") == 256 << 20 and parse_size("16MiB") == 16 << 20
    assert sizes(1024, 16384, 4) == [1024, 4096, 16384]


def test_quick_run_has_every_backend_and_correct_rows(tmp_path):
    out = tmp_path / "coll.json"
    p = subprocess.run([sys.executable, "-m", "npurt.bench.collectives", "--np", "2", "--max-size", "4K",
                        "--budget", "64K", "--json", str(out)], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    assert p.stdout.startswith("CPU: "), p.stdout[:200]
    res = json.loads(out.read_text())["results"]
    assert set(res) == {"local", "shm", "mpi", "mpi4py"}, {k: v for k, v in res.items() if not isinstance(v, list)}
    for name, rows in res.items():
        assert isinstance(rows, list), (name, rows)
        assert {r["op"] for r in rows} == set(w.OPS), name
        assert all(r["correct"] and r["time_us"] > 0 and r["busbw_gbps"] > 0 for r in rows), (name, rows)
    assert "vs mpi4py" in p.stdout
