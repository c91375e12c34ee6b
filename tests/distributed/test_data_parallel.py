"""``examples/data_parallel.py`` on every backend: 4 ranks train a least-squares model with
npurt kernels, all-reduce the gradients, check after every step that the weights are
bitwise identical on every rank and at the end that the loss fell (the script asserts
both; a failure is a non-zero exit)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "data_parallel.py"


@pytest.mark.parametrize("backend", ["local", "shm", "mpi"])
def test_data_parallel_trains_identically_on_every_rank(backend):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPURT_")}
    p = subprocess.run([sys.executable, str(SCRIPT), "--backend", backend, "--steps", "25"], env=env,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    lines = p.stdout.splitlines()
    assert "data_parallel: OK" in lines, p.stdout
    assert any(line.startswith(f"{backend}: 4 ranks, 25 steps, final loss") for line in lines), p.stdout
