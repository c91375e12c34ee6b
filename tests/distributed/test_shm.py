"""npurt.distributed on the "shm" backend with real processes (subprocess): the matrix
against numpy, pieces larger than a slot, determinism across processes, and hangs turned
into errors (a rank past the deadline, a rank that exits, a SIGKILLed rank, a desync),
plus npurt.hccl's root-info bootstrap."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest

WORKER = os.path.join(os.path.dirname(__file__), "dist_worker.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(scenario, world, **env):
    port = free_port()
    procs = []
    for r in range(world):
        e = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        e.update({k: str(v) for k, v in env.items()})
        procs.append(subprocess.Popen([sys.executable, WORKER, scenario], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def results(procs, timeout=120):
    out = []
    for p in procs:
        try:
            so, se = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError("a rank hung") from None
        lines = [ln for ln in so.splitlines() if ln.startswith("{")]
        out.append(json.loads(lines[-1]) if lines else {"exit": p.returncode, "stderr": se[-2000:]})
    return out


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_matrix(world):
    for r, res in enumerate(results(launch("matrix", world))):
        assert res.get("ok") == [], f"rank {r}: {res}"


def test_matrix_on_the_general_path():
    """Chunks above the engine's eager limit: the staged algorithms through the slots."""
    for r, res in enumerate(results(launch("matrix_general", 3))):
        assert res.get("ok") == [], f"rank {r}: {res}"


@pytest.mark.parametrize("slot,fragment", [("16384", "16384"), ("65536", "4096")])
def test_matrix_on_the_general_path_in_many_fragments(slot, fragment):
    """The all_reduce / reduce ring through the slots over many fragments: one entry a
    slot (every fragment waits for the last one to be read) and eight (ranks run ahead)."""
    env = dict(NPURT_SHM_SLOT_BYTES=slot, NPURT_SHM_FRAGMENT_BYTES=fragment, NPURT_SHM_CMA_BYTES="0")
    for r, res in enumerate(results(launch("matrix_general", 3, **env))):
        assert res.get("ok") == [], f"rank {r}: {res}"


def test_spot_check_8_ranks_and_many_pieces():
    for r, res in enumerate(results(launch("chunks", 8, NPURT_SHM_SLOT_BYTES=16384))):
        assert res.get("ok") is True, f"rank {r}: {res}"


@pytest.mark.parametrize("fragment", ["junk", "1", "100000000"])
def test_fragment_setting_out_of_range_or_unreadable(fragment):
    """NPURT_SHM_FRAGMENT_BYTES that does not parse falls back to the default; 1 and more
    than a slot are clamped (64 bytes..the slot): the rings still move every byte."""
    for r, res in enumerate(results(launch("chunks", 3, NPURT_SHM_FRAGMENT_BYTES=fragment, NPURT_SHM_CMA_BYTES=0))):
        assert res.get("ok") is True, f"rank {r}: {res}"


@pytest.mark.parametrize("scenario,world", [("chunks", 3), ("chunks", 2), ("matrix_general", 3)])
def test_single_copy_path(scenario, world):
    """NPURT_SHM_CMA_BYTES=1: every collective above the eager limit that the single copy
    runs (peers' buffers read with process_vm_readv) takes it: every kind, dtypes with
    their own folds, in-place all_reduce and all_gather, a broadcast from the last rank."""
    for r, res in enumerate(results(launch(scenario, world, NPURT_SHM_CMA_BYTES=1))):
        assert res.get("ok") in ([], True), f"rank {r}: {res}"


@pytest.mark.parametrize("setting", ["junk", "-5", "0"])
def test_single_copy_setting_unreadable_or_off(setting):
    """NPURT_SHM_CMA_BYTES that does not parse falls back to the default windows; 0 turns
    the single copy off: either way every collective completes with numpy's result."""
    for r, res in enumerate(results(launch("chunks", 2, NPURT_SHM_CMA_BYTES=setting))):
        assert res.get("ok") is True, f"rank {r}: {res}"


def test_single_copy_off_when_a_rank_may_not_read_another():
    """Rank 0 non-dumpable, rank 1 without CAP_SYS_PTRACE: rank 1 may not read rank 0's
    memory (EPERM). The group's probe round sees it and every rank stages instead: the
    collectives that would take the single copy complete (a read would fail the group)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        pytest.skip("needs util-linux's setpriv and root to drop CAP_SYS_PTRACE from one rank")
    port = free_port()
    procs = []
    for r in range(2):
        e = dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                 NPURT_SHM_CMA_BYTES="1", NONDUMPABLE="1" if r == 0 else "0")
        pre = [] if r == 0 else [setpriv, "--bounding-set", "-sys_ptrace"]
        procs.append(subprocess.Popen(pre + [sys.executable, WORKER, "chunks"], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for r, res in enumerate(results(procs)):
        assert res.get("ok") is True, f"rank {r}: {res}"


def test_single_copy_is_bitwise_the_staged_fold():
    """The single copy folds in rank order, as the slots do: the same bits either way."""
    staged = [r["ok"] for r in results(launch("bits_large", 3, NPURT_SHM_CMA_BYTES=0))]
    single = [r["ok"] for r in results(launch("bits_large", 3, NPURT_SHM_CMA_BYTES=1))]
    assert staged == single
    assert staged[0][0] == staged[1][0] == staged[2][0]  # the all_reduce: every rank alike


@pytest.mark.parametrize("world", [2, 3])
def test_large_buffers_streamed_out_of_the_slots_and_an_in_place_reduce_scatter(world):
    for r, res in enumerate(results(launch("large", world), timeout=300)):
        assert res.get("ok") == [], f"rank {r}: {res}"


def test_barriers_back_to_back_are_never_a_desync():
    """A rank that leaves a barrier may start its next collective while a slower rank still
    compares the barrier's descriptors on the board: that is not a desync."""
    for r, res in enumerate(results(launch("barriers", 3))):
        assert res.get("ok") is True, f"rank {r}: {res}"


def test_bitwise_identical_across_processes_and_runs():
    a = [r["ok"] for r in results(launch("bits", 3))]
    b = [r["ok"] for r in results(launch("bits", 3))]
    assert all(x == a[0] for x in a) and a == b


def test_rank_sleeping_past_the_deadline():
    out = results(launch("sleep", 3, SLOW_RANK=1, TIMEOUT=1.0))
    for r in (0, 2):
        assert out[r]["err"] == "CollectiveTimeoutError", out[r]
        assert "rank(s) 1 never arrived" in out[r]["msg"] and "collective #0" in out[r]["msg"]
        assert out[r]["code"] == 9
    assert out[1]["err"] == "CollectiveTimeoutError", out[1]


def test_rank_that_exits():
    out = results(launch("exit", 3, SLOW_RANK=2))
    for r in (0, 1):
        assert out[r]["err"] == "RankFailedError", out[r]
        assert "rank 2 died (pid" in out[r]["msg"] and out[r]["code"] == 21


def test_sigkilled_rank():
    procs = launch("hold", 2, SLOW_RANK=1)
    line = procs[1].stdout.readline()
    assert "ready" in line, line
    os.kill(procs[1].pid, signal.SIGKILL)
    out = results(procs[:1])
    procs[1].wait()
    assert out[0]["err"] == "RankFailedError" and "rank 1 died" in out[0]["msg"], out[0]


@pytest.mark.parametrize("loop", ["copies", "all_reduce"])
def test_rank_killed_during_large_collectives(loop):
    """SIGKILL a rank while both loop over 4 MiB all_to_all / all_gather (peers' buffers read
    with process_vm_readv) or over 1 MiB all_reduces (the ring of fragments through the
    slots): the survivor raises RankFailedError naming it, no hang."""
    procs = launch("loop_big", 2, TIMEOUT=20, LOOP=loop)
    ready = [json.loads(p.stdout.readline()) for p in procs]
    assert all("ready" in r for r in ready), ready
    os.kill(procs[1].pid, signal.SIGKILL)
    out = results(procs[:1], timeout=60)
    procs[1].wait()
    assert out[0].get("err") == "RankFailedError" and "rank 1" in out[0]["msg"], out[0]


def test_desync_across_processes():
    out = results(launch("desync", 2, SLOW_RANK=1))
    for res in out:
        assert res["err"] == "CollectiveDesyncError", res
        assert "rank 0 called all_reduce(float32 x 8, sum)" in res["msg"] and "rank 1 called broadcast" in res["msg"]


def test_hccl_root_info_bootstrap(tmp_path):
    out = results(launch("hccl", 3, ROOT_INFO_FILE=tmp_path / "root.bin"))
    for r, res in enumerate(out):
        ok = res.get("ok")
        assert ok and ok["size"] == 3 and ok["rank"] == r and ok["sum"] == [6.0] * 5, res
        assert ok["bad"] == 1 and "needed" in ok["msg"]
