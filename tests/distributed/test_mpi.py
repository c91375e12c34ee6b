"""The ``mpi`` backend under real ``mpirun -np 2..4`` jobs (Open MPI from the ``mpi`` extra,
loopback only, oversubscribed, ULFM on: the command comes from
``npurt.distributed.mpirun_command``). Each job is bounded by a subprocess timeout; the
ranks print ``RESULT {json}`` lines (``mpi_ranks.py``) that the tests check. ``TWO_PHASE``
jobs set ``NPURT_MPI_EAGER_BYTES=0``: every collective takes the header-then-data path
that small ones otherwise skip (``_mpi_small``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from npurt.distributed import mpirun_command, run_mpirun

RANKS = Path(__file__).with_name("mpi_ranks.py")
JOB_TIMEOUT = 90
ONE_PHASE, TWO_PHASE = "one-phase", "two-phase"


def run_job(n: int, mode: str, ulfm: bool = True, path: str = ONE_PHASE) -> tuple:
    cmd, env = mpirun_command(n, [sys.executable, str(RANKS), mode], ulfm=ulfm)
    env["NPURT_DEVICE_COUNT"] = "1"
    env.pop("NPURT_MPI_EAGER_BYTES", None)
    if path == TWO_PHASE:
        env["NPURT_MPI_EAGER_BYTES"] = "0"
    p = run_mpirun(cmd, env, JOB_TIMEOUT)
    rows = {}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            row = json.loads(line[7:])
            rows[row["rank"]] = row
    return rows, p


def _crashes(rows: dict) -> list:
    return [r.get("crash") for r in rows.values() if r.get("crash")]


def _check_path(rows: dict, path: str) -> None:
    """The collectives took the path the job asked for (one phase: all but the large ones)."""
    for r, row in rows.items():
        if path == TWO_PHASE:
            assert row["eager"] == 0, (r, row)
        else:
            assert row["eager"] >= 1, (r, row)


@pytest.mark.parametrize("n,path,mode", [(2, ONE_PHASE, "all"), (3, ONE_PHASE, "all"), (4, ONE_PHASE, "all"),
                                         (3, TWO_PHASE, "all"), (2, TWO_PHASE, "all_nbc")])
def test_every_collective_op_and_dtype_matches_numpy(n, path, mode):
    """``all_nbc``: all_gather on MPI's ``Iallgather`` (larger groups) instead of the
    point-to-point exchange."""
    rows, p = run_job(n, mode, path=path)
    assert not _crashes(rows), _crashes(rows)
    assert sorted(rows) == list(range(n)), (p.stdout[-2000:], p.stderr[-2000:])
    for r, row in rows.items():
        assert row["fails"] == [], f"rank {r}: {row['fails']}"
        assert row["checks"] >= 94  # 7 dtypes x (5 ops x 2..3 collectives + 3) + the rest
        if path == ONE_PHASE:  # every collective of the op x dtype matrix is small
            assert row["eager"] >= 7 * (5 * 2 + 3), (r, row["eager"])
            assert row["native"] >= 7 * 5 * 2, (r, row)  # blocking ones: the one-call native path
        else:
            assert row["native"] == 0, (r, row)
            # blocking two-phase calls whose data phase MPI reduces itself run natively whole
            # (5 dtypes x 4 ops x all_reduce / reduce_scatter, and the rest)
            assert row["native2"] >= 5 * 4 * 2, (r, row)
    _check_path(rows, path)


@pytest.mark.parametrize("path", [ONE_PHASE, TWO_PHASE])
def test_rank_sleeping_past_the_deadline_is_named_by_the_others(path):
    rows, p = run_job(3, "sleep", path=path)
    assert sorted(rows) == [0, 1, 2], (p.stdout[-2000:], p.stderr[-2000:])
    for r in (0, 2):
        assert rows[r]["cls"] == "CollectiveTimeoutError", rows[r]
        assert "all_reduce" in rows[r]["error"] and "rank(s) 1 never arrived" in rows[r]["error"], rows[r]
    # the late rank learns, when it arrives, that the communicator was aborted (same class)
    assert rows[1]["cls"] == "CollectiveTimeoutError", rows[1]
    assert "aborted at collective #2" in rows[1]["error"] and "rank(s) 1 never arrived" in rows[1]["error"], rows[1]
    _check_path(rows, path)


@pytest.mark.parametrize("path", [ONE_PHASE, TWO_PHASE])
@pytest.mark.parametrize("mode,theirs", [("desync", "broadcast(float32[1000], root=0)"),
                                         ("size", "all_reduce(float32[101], op=sum)"),
                                         ("mixed", "all_reduce(float32[40000], op=sum)")])
def test_desync_is_reported_with_both_calls_on_every_rank(mode, theirs, path):
    """Also across paths (``mixed``: rank 0's call is small, one phase; the others' large)."""
    rows, p = run_job(3, mode, path=path)
    assert sorted(rows) == [0, 1, 2], (p.stdout[-2000:], p.stderr[-2000:])
    msgs = {rows[r]["error"] for r in rows}
    assert len(msgs) == 1, msgs  # the same message on every rank
    for r in rows:
        assert rows[r]["cls"] == "CollectiveDesyncError", rows[r]
        assert "rank 0 called all_reduce(float32[" in rows[r]["error"] and theirs in rows[r]["error"], rows[r]
    _check_path(rows, path)


def _stream_error(row: dict, cls: str) -> str:
    """The collective's error as a blocking call reports it (before the native path too):
    the communication stream's failed task (``TaskFailedError``), raised where the result is
    read, whose text ends with the collective's own error; returns that error's message."""
    assert row["cls"] == "TaskFailedError", row
    last = row["error"].rstrip().splitlines()[-1]
    assert last.startswith(f"{cls}: "), row
    return last


def test_desync_on_the_native_one_call_path():
    """Blocking calls without a per-call timeout take ``_MpiExchange.run_sync`` (no
    ``MpiComm.run``): a desync there is the same error, worded the same on every rank."""
    rows, p = run_job(3, "fast_desync")
    assert sorted(rows) == [0, 1, 2], (p.stdout[-2000:], p.stderr[-2000:])
    msgs = {_stream_error(rows[r], "CollectiveDesyncError") for r in rows}
    assert len(msgs) == 1, msgs
    msg = msgs.pop()
    assert "rank 0 called all_reduce(float32[1000], op=sum) at #3, rank 1 called broadcast(float32[1000], root=0)" in msg
    for r in rows:
        assert rows[r]["py_runs"] == 0 and rows[r]["native_done"] == [0, 0], rows[r]


def test_timeout_on_the_native_one_call_path():
    rows, p = run_job(3, "fast_sleep")
    assert sorted(rows) == [0, 1, 2], (p.stdout[-2000:], p.stderr[-2000:])
    for r in (0, 2):
        msg = _stream_error(rows[r], "CollectiveTimeoutError")
        assert "all_reduce" in msg and "rank(s) 1 never arrived" in msg, rows[r]
        assert rows[r]["py_runs"] == 0 and rows[r]["secs"] < 2.9, rows[r]
    # the late rank learns from the abort notice that the collective failed (same class)
    msg = _stream_error(rows[1], "CollectiveTimeoutError")
    assert "aborted at collective #3" in msg and "rank(s) 1 never arrived" in msg, rows[1]


def test_ranks_on_different_paths_for_the_same_call_is_a_desync():
    """Rank 1 has the one-phase path off (``NPURT_MPI_EAGER_BYTES=0``), the others not: the
    same small call would take two paths, which every rank reports instead of mixing them."""
    rows, p = run_job(3, "pathdiff")
    assert sorted(rows) == [0, 1, 2], (p.stdout[-2000:], p.stderr[-2000:])
    assert len({rows[r]["error"] for r in rows}) == 1, rows
    for r in rows:
        assert rows[r]["cls"] == "CollectiveDesyncError", rows[r]
        assert "rank 0 and rank 1 called all_reduce(float32[100], op=sum) at #2 but took different paths" in rows[r]["error"]


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
