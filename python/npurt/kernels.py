"""Kernels that exercise the executor.

``empty`` does nothing (launch cost), ``busy`` keeps an AI core busy for a duration per
block, ``fault`` fails in one block (to test sticky stream errors). All are asynchronous
and run on ``stream`` (the current stream by default).
"""

from __future__ import annotations

from ._npurt import busy, empty, fault

__all__ = ["busy", "empty", "fault"]
