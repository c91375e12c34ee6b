"""The benchmark harness: ``python -m npurt.bench`` (or the ``npurt-bench`` script).

Not part of the runtime: nothing in ``npurt`` imports it. ``cli`` parses the options, plans
the run and writes the JSON; ``runner`` executes the plan with a progress bar;
``workloads`` (launch, round trip, events, overlap) and ``throughput`` (throughput versus
stream count) are what is measured; ``baselines`` are the runtimes measured against in the
same run (Python threads, numpy, PoCL, numba's CUDA simulator); ``memory`` holds the memory
workloads; ``report`` the tables and plots.
"""

from __future__ import annotations

from .cli import compare, main, report, run

__all__ = ["compare", "main", "report", "run"]
