"""``npurt.distributed.mpirun_command`` (the one place that knows Open MPI's flags), the
``hccl`` alias' choice between ``shm`` and ``mpi``, and a real two-rank mpi4py job with
the command it builds (the ``mpi`` extra's wheels, no system MPI)."""

from __future__ import annotations

import os
import subprocess
import sys

import npurt
import pytest
from npurt.distributed import find_mpirun, mpirun_command
from npurt.distributed._mpi import select_hccl_backend
from npurt.distributed._mpirun import cma_permitted


def test_mpirun_is_the_wheel_beside_this_python():
    path = find_mpirun()
    assert os.access(path, os.X_OK)
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    assert "Open MPI" in out.stdout + out.stderr or "prte" in (out.stdout + out.stderr).lower()


def test_command_has_the_flags_this_machine_needs():
    cmd, env = mpirun_command(3, ["python", "x.py"], env={"PATH": "/usr/bin"})
    assert cmd[1:3] == ["-np", "3"] and cmd[-2:] == ["python", "x.py"]
    assert "--oversubscribe" in cmd and cmd[cmd.index("--bind-to") + 1] == "none"
    assert cmd[cmd.index("--with-ft") + 1] == "ulfm"
    assert "btl_tcp_if_include" in cmd and cmd[cmd.index("btl_tcp_if_include") + 1] == "lo"
    assert env["PATH"] == "/usr/bin"
    if os.geteuid() == 0:
        assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"


def test_hosts_drop_loopback_and_ulfm_can_be_left_out():
    cmd, _ = mpirun_command(2, ["a"], hosts=["h1", "h2"], ulfm=False, env={})
    assert "--with-ft" not in cmd and "btl_tcp_if_include" not in cmd
    assert cmd[cmd.index("--host") + 1] == "h1,h2"


def test_cma_fallback_is_forced_by_the_environment(monkeypatch):
    monkeypatch.setenv("NPURT_MPI_CMA", "0")
    assert not cma_permitted()
    cmd, _ = mpirun_command(2, ["a"], env={})
    assert cmd[cmd.index("smsc") + 1] == "^cma"
    monkeypatch.setenv("NPURT_MPI_CMA", "1")
    assert "smsc" not in mpirun_command(2, ["a"], env={})[0]


def test_bad_arguments_are_typed_errors(monkeypatch):
    with pytest.raises(npurt.InvalidTypeError):
        mpirun_command("2", ["a"])  # type: ignore[arg-type]
    with pytest.raises(npurt.InvalidValueError):
        mpirun_command(0, ["a"])
    with pytest.raises(npurt.InvalidTypeError):
        mpirun_command(2, "python x.py")  # type: ignore[arg-type]
    monkeypatch.setenv("NPURT_MPIRUN", "/nonexistent/mpirun")
    with pytest.raises(FileNotFoundError, match="NPURT_MPIRUN"):
        find_mpirun()


@pytest.mark.parametrize("env,world,want", [
    ({}, 4, "shm"),
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "4", "OMPI_COMM_WORLD_SIZE": "4"}, -1, "shm"),
    ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_SIZE": "4"}, -1, "mpi"),
    ({"LOCAL_WORLD_SIZE": "8", "WORLD_SIZE": "16"}, -1, "mpi"),
    ({"LOCAL_WORLD_SIZE": "8"}, 8, "shm"),
    ({"NPURT_HCCL_BACKEND": "mpi", "LOCAL_WORLD_SIZE": "8"}, 8, "mpi"),
])
def test_hccl_alias_picks_shm_on_one_host_and_mpi_across_hosts(monkeypatch, env, world, want):
    for k in ("NPURT_HCCL_BACKEND", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert select_hccl_backend(world) == want


def test_two_rank_mpi4py_job_runs_as_this_user():
    prog = ("from mpi4py import MPI; import numpy as np; c = MPI.COMM_WORLD; a = np.full(4, c.rank + 1.0); "
            "b = np.empty_like(a); c.Allreduce(a, b); print('SUM', c.rank, c.size, b[0], MPI.Query_thread())")
    cmd, env = mpirun_command(2, [sys.executable, "-c", prog])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    lines = sorted(line for line in p.stdout.splitlines() if line.startswith("SUM"))
    assert lines == ["SUM 0 2 3.0 3", "SUM 1 2 3.0 3"], (p.stdout, p.stderr)


def test_hccl_under_mpirun_on_one_host_is_shm_without_any_rendezvous_variables():
    """``mpirun -np 2 python train.py`` with ``init_process_group("hccl")``: rank and size
    come from mpirun, the bootstrap is a file store named after the job, the backend is
    ``shm`` (every rank is on this host) and an all_reduce works."""
    prog = ("import numpy as np, npurt, npurt.distributed as dist; dist.init_process_group('hccl', timeout=60); "
            "t = npurt.to_device(np.full(8, dist.get_rank() + 1.0, np.float32)); dist.all_reduce(t); "
            "print('HCCL', dist.get_rank(), dist.get_world_size(), dist.get_backend(), t.to_host()[0]); "
            "dist.destroy_process_group()")
    cmd, env = mpirun_command(2, [sys.executable, "-c", prog])
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE", "NPURT_HCCL_BACKEND"):
        env.pop(k, None)
    env["NPURT_DEVICE_COUNT"] = "1"
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90)
    lines = sorted(line for line in p.stdout.splitlines() if line.startswith("HCCL"))
    assert lines == ["HCCL 0 2 shm 3.0", "HCCL 1 2 shm 3.0"], (p.stdout, p.stderr[-2000:])


def test_run_mpirun_kills_the_whole_job_on_timeout(tmp_path):
    """A job that outlives its timeout is killed with every process it started (killing
    ``mpirun`` alone left ranks spinning); stand-in: a shell whose child sleeps."""
    import os
    import subprocess
    import time

    import pytest
    from npurt.distributed import run_mpirun

    pidfile = tmp_path / "child"
    script = f"sleep 60 & echo $! > {pidfile}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        run_mpirun(["sh", "-c", script], dict(os.environ), timeout=1.0)
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"child {child} outlived the job")
    done = run_mpirun(["sh", "-c", "echo out; echo err >&2; exit 3"], dict(os.environ), timeout=10)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
