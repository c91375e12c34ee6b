"""The ``mpi`` backend under real ``mpirun -np 2..4`` jobs (Open MPI from the ``mpi`` extra,
loopback only, oversubscribed, ULFM on: the command comes from
``npurt.distributed.mpirun_command``). Each job is bounded by a subprocess timeout; the
ranks print ``RESULT {json}`` lines (``mpi_ranks.py``) that the tests check."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from npurt.distributed import mpirun_command, run_mpirun

RANKS = Path(__file__).with_name("mpi_ranks.py")
JOB_TIMEOUT = 90


def run_job(n: int, mode: str, ulfm: bool = True) -> tuple:
    cmd, env = mpirun_command(n, [sys.executable, str(RANKS), mode], ulfm=ulfm)
    env["NPURT_DEVICE_COUNT"] = "1"
    p = run_mpirun(cmd, env, JOB_TIMEOUT)
    rows = {}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            row = json.loads(line[7:])
            rows[row["rank"]] = row
    return rows, p


def _crashes(rows: dict) -> list:
    return [r.get("crash") for r in rows.values() if r.get("crash")]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_every_collective_op_and_dtype_matches_numpy(n):
    rows, p = run_job(n, "all")
    assert not _crashes(rows), _crashes(rows)
    assert sorted(rows) == list(range(n)), (p.stdout[-2000:], p.stderr[-2000:])
    for r, row in rows.items():
        assert row["fails"] == [], f"rank {r}: {row['fails']}"
        assert row["checks"] >= 90  # 7 dtypes x (5 ops x 2..3 collectives + 3) + the rest


def test_rank_sleeping_past_the_deadline_is_named_by_the_others():
    rows, p = run_job(3, "sleep")
    assert sorted(rows) == [0, 1, 2], (p.stdout[-2000:], p.stderr[-2000:])
    for r in (0, 2):
        assert rows[r]["cls"] == "CollectiveTimeoutError", rows[r]
        assert "all_reduce" in rows[r]["error"] and "rank(s) 1 never arrived" in rows[r]["error"], rows[r]
    # the late rank learns, when it arrives, that the communicator was aborted (same class)
    assert rows[1]["cls"] == "CollectiveTimeoutError", rows[1]
    assert "aborted at collective #2" in rows[1]["error"] and "rank(s) 1 never arrived" in rows[1]["error"], rows[1]


@pytest.mark.parametrize("mode,theirs", [("desync", "broadcast(float32[1000], root=0)"),
                                         ("size", "all_reduce(float32[101], op=sum)")])
def test_desync_is_reported_with_both_calls_on_every_rank(mode, theirs):
    rows, p = run_job(3, mode)
    assert sorted(rows) == [0, 1, 2], (p.stdout[-2000:], p.stderr[-2000:])
    msgs = {rows[r]["error"] for r in rows}
    assert len(msgs) == 1, msgs  # the same message on every rank
    for r in rows:
        assert rows[r]["cls"] == "CollectiveDesyncError", rows[r]
        assert "rank 0 called all_reduce(float32[" in rows[r]["error"] and theirs in rows[r]["error"], rows[r]


def test_killed_rank_is_named_with_its_pid_by_the_survivors():
    rows, p = run_job(3, "kill")
    assert sorted(rows) == [0, 2], (p.stdout[-2000:], p.stderr[-2000:])
    for r in (0, 2):
        assert rows[r]["cls"] == "RankFailedError", rows[r]
        assert "rank 1 died (pid" in rows[r]["error"], rows[r]


def test_rank_that_exits_early_is_named_by_the_others():
    rows, p = run_job(3, "exit")
    assert sorted(rows) == [0, 1, 2], (p.stdout[-2000:], p.stderr[-2000:])
    for r in (0, 2):
        assert rows[r]["cls"] == "RankFailedError", rows[r]
        assert f"rank 1 exited (pid {rows[1]['pid']})" in rows[r]["error"], rows[r]


def test_without_ulfm_open_mpi_ends_the_job_and_names_the_dead_rank():
    """Plain ``mpirun`` (no ``--with-ft ulfm``): Open MPI's runtime terminates the other
    ranks when one is killed, and says which one died; nothing hangs (the documented case)."""
    rows, p = run_job(3, "kill", ulfm=False)
    assert p.returncode != 0
    assert "rank 1" in p.stderr + p.stdout and "signal 9" in p.stderr + p.stdout, p.stderr[-2000:]
